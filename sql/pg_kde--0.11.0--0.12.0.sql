-- pg_kde 0.11.0 -> 0.12.0: staleness of Citus tables. _kde_table_state reads a Citus table's shards on the
-- workers (their modification counters, storage files, sizes and nodes), where the coordinator's relation is an
-- empty shell whose counters never move: growth, deletes, TRUNCATE and shard moves of a distributed table
-- now make its synopses stale, and kde_refresh_stale rebuilds them. Every function that names the version is
-- replaced. Multi-column synopses keep the size of the pool their points come from (pool_rows; NULL for those
-- built before, whose intervals stay a simple random sample's).
\echo Use "ALTER EXTENSION pg_kde UPDATE TO '0.12.0'" to load this file. \quit

-- pool_rows (0.12.0): the rows of the sample the points are a balanced subsample of, whose intervals read
-- them; NULL for a synopsis built before, a simple random sample's intervals then (docs/math.md §13).
ALTER TABLE kde_synopsis_nd ADD COLUMN pool_rows integer CHECK (pool_rows IS NULL OR pool_rows >= n_points);

-- What staleness compares: the relation's modification counters (inserted + updated + deleted rows over its
-- leaf partitions, this backend's counts not yet reported included), its storage files (a TRUNCATE, a
-- rewrite or a change of partitions gives new ones) and its size in pages. A leaf that is a Citus table
-- (listed in pg_dist_partition) keeps its rows in shards on the workers, and the coordinator's relation is an
-- empty shell whose counters never move: its shards' counters, storage files, sizes and nodes are read there
-- (run_command_on_shards, as the calling role; what a worker has not reported yet, within about 10 s of
-- the change, is not seen). A shard that does not answer is marked '?' in storage_id (the synopsis reads as
-- stale, for that reason, until it answers again). A leaf without storage (a foreign table) counts as 'none',
-- so attaching or detaching one changes the storage.
CREATE OR REPLACE FUNCTION _kde_table_state(tbl regclass, OUT mod_count bigint, OUT storage_id text, OUT pages bigint)
LANGUAGE plpgsql STABLE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    leaf regclass;
    shards record;
BEGIN
    WITH leaves AS (
        SELECT p.relid FROM pg_partition_tree(tbl) p WHERE p.isleaf
        UNION ALL
        SELECT tbl WHERE NOT EXISTS (SELECT 1 FROM pg_partition_tree(tbl))
    )
    SELECT coalesce(sum(pg_stat_get_tuples_inserted(l.relid) + pg_stat_get_tuples_updated(l.relid)
                        + pg_stat_get_tuples_deleted(l.relid) + pg_stat_get_xact_tuples_inserted(l.relid)
                        + pg_stat_get_xact_tuples_updated(l.relid) + pg_stat_get_xact_tuples_deleted(l.relid)), 0)::bigint,
           string_agg(l.relid::oid::text || ':' || coalesce(pg_relation_filenode(l.relid)::text, 'none'), ','
                      ORDER BY l.relid::oid),
           coalesce(sum(pg_relation_size(l.relid) / current_setting('block_size')::bigint), 0)::bigint
    INTO mod_count, storage_id, pages
    FROM leaves l;
    IF to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN;
    END IF;
    FOR leaf IN
        EXECUTE 'SELECT d.logicalrelid FROM pg_catalog.pg_dist_partition d WHERE d.logicalrelid IN ('
                'SELECT p.relid FROM pg_catalog.pg_partition_tree($1) p WHERE p.isleaf UNION ALL '
                'SELECT $1 WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_partition_tree($1))) '
                'ORDER BY d.logicalrelid::oid' USING tbl
    LOOP
        -- One command a shard, one after another (a connection a worker, not one a shard), written with
        -- schema-qualified functions only: it runs on the workers under their search_path, where a role that
        -- may create objects in public could otherwise put an operator of its own in the way. Fields: rows
        -- changed | node | storage file | bytes; a result that is not that counts as a shard that did not answer.
        EXECUTE $q$
            WITH answers AS (
                SELECT r.shardid, r.success AND r.result ~ '^[0-9]+[|][^|]*[|][0-9]+[|][0-9]+$' AS ok, r.result
                FROM run_command_on_shards($1, $c$SELECT pg_catalog.concat_ws('|',
                    pg_catalog.int8pl(pg_catalog.int8pl(pg_catalog.pg_stat_get_tuples_inserted(%1$L::pg_catalog.regclass),
                        pg_catalog.pg_stat_get_tuples_updated(%1$L::pg_catalog.regclass)),
                        pg_catalog.pg_stat_get_tuples_deleted(%1$L::pg_catalog.regclass)),
                    pg_catalog.concat_ws(' ', coalesce(pg_catalog.host(pg_catalog.inet_server_addr()), 'socket'),
                        pg_catalog.inet_server_port()),
                    coalesce(pg_catalog.pg_relation_filenode(%1$L::pg_catalog.regclass), 0),
                    pg_catalog.pg_relation_size(%1$L::pg_catalog.regclass))$c$, false) r
            )
            SELECT coalesce(sum(split_part(a.result, '|', 1)::bigint) FILTER (WHERE a.ok), 0) AS changes,
                   string_agg(a.shardid::text || CASE WHEN a.ok THEN '@' || split_part(a.result, '|', 2) || '/'
                                                          || split_part(a.result, '|', 3) ELSE '?' END,
                              ',' ORDER BY a.shardid) AS files,
                   coalesce(sum(split_part(a.result, '|', 4)::bigint / current_setting('block_size')::bigint)
                            FILTER (WHERE a.ok), 0) AS blocks
            FROM answers a
        $q$ INTO shards USING leaf;
        mod_count := mod_count + shards.changes;
        storage_id := storage_id || ';' || leaf::oid::text || '=' || coalesce(shards.files, '');
        pages := pages + shards.blocks;
    END LOOP;
END
$$;

-- Why a synopsis is stale, from one reading of its table's state (the view read it twice a row: _kde_stale_reason,
-- which read it again, goes), with a reason
-- of its own for shards that did not answer.
CREATE FUNCTION _kde_stale_why(mod_count bigint, storage_id text, pages bigint, rows bigint, built_mod_count bigint,
                               built_storage text, built_pages bigint) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE
        WHEN built_storage LIKE 'untracked: %' THEN 'tracking could not apply a write: ' || substr(built_storage, 12)
        WHEN storage_id LIKE '%?%' THEN 'could not read ' || (length(storage_id) - length(replace(storage_id, '?', '')))
                                        || ' shard(s) of the Citus table on the workers'
        WHEN storage_id IS DISTINCT FROM built_storage THEN 'truncated, rewritten, repartitioned or restored'
        WHEN mod_count < built_mod_count THEN 'activity statistics were reset since the build'
        WHEN mod_count - built_mod_count >= 0.1 * greatest(rows, 1) THEN 'at least 10% of the rows modified'
        WHEN abs(pages - built_pages) > greatest(0.1 * built_pages, 1) THEN 'size changed by more than 10%'
    END
$$;
COMMENT ON FUNCTION _kde_stale_why(bigint, text, bigint, bigint, bigint, text, bigint) IS
    'pg_kde internal: why a synopsis is stale, from its table''s state now and at the build';

CREATE OR REPLACE VIEW kde_synopses WITH (security_invoker = true) AS
SELECT k.relid,
       k.cols,
       k.method,
       k.n_rows,
       CASE WHEN octet_length(p1.atom_pack) > 0 THEN @extschema@._kde_atom_count(p1.atom_pack)
            ELSE coalesce(cardinality(p1.atom_values), 0) END AS heavy_values,
       coalesce(p1.kde_rows, k.n_rows) AS kde_rows,
       pg_column_size(k.*) + coalesce(pg_column_size(p1.*), 0) + coalesce(pg_column_size(p2.*), 0)
           + coalesce(pg_column_size(p3.*), 0) AS bytes,
       k.built_at,
       now() - k.built_at AS age,
       k.build_seconds,
       k.backend,
       CASE WHEN st.mod_count >= k.mod_count THEN st.mod_count - k.mod_count END AS rows_modified,
       r.reason IS NOT NULL AS stale,
       r.reason AS stale_reason,
       k.kind = '1d' AND EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgrelid = k.relid AND t.tgname = 'kde_track_insert'
                                 AND t.tgfoid = '@extschema@._kde_track_apply()'::regprocedure) AS tracked
FROM @extschema@.kde_catalog k
LEFT JOIN @extschema@.kde_synopsis p1 ON k.kind = '1d' AND p1.relid = k.relid AND p1.cols = k.cols
LEFT JOIN @extschema@.kde_synopsis_2d p2 ON k.kind = '2d' AND p2.relid = k.relid AND p2.cols = k.cols
LEFT JOIN @extschema@.kde_synopsis_nd p3 ON k.kind = 'nd' AND p3.relid = k.relid AND p3.cols = k.cols
CROSS JOIN LATERAL @extschema@._kde_table_state(k.relid) st
CROSS JOIN LATERAL (SELECT @extschema@._kde_stale_why(st.mod_count, st.storage_id, st.pages, k.n_rows + k.n_null,
                                                      k.mod_count, k.storage_id, k.pages) AS reason) r;
COMMENT ON VIEW kde_synopses IS
    'Every synopsis the current role may read, with its size, age, rows modified since its build (NULL when statistics were reset), a stale flag and its reason, and whether kde_track keeps it up to date';

DROP FUNCTION _kde_stale_reason(regclass, bigint, bigint, text, bigint);

CREATE OR REPLACE FUNCTION kde_refresh(tbl regclass, col text, method text DEFAULT 'auto', sample_size integer DEFAULT 50000,
                            grid_size integer DEFAULT NULL, backend text DEFAULT 'auto',
                            budget integer DEFAULT NULL) RETURNS jsonb
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@._kde_raise_if_error(
        @extschema@._kde_refresh(tbl::oid, ARRAY[col], method, sample_size, grid_size, backend, budget, '0.12.0'))
$$;
COMMENT ON FUNCTION kde_refresh(regclass, text, text, integer, integer, text, integer) IS
    'Build or rebuild the synopsis of one numeric, date or timestamp column within budget bytes (default 8192; method: auto = plugin_cdf | plugin | lscv_h | lscv_H | normal_reference); returns a summary';

CREATE OR REPLACE FUNCTION kde_refresh(tbl regclass, cols text[], method text DEFAULT 'auto', sample_size integer DEFAULT 5000,
                            grid_size integer DEFAULT NULL, backend text DEFAULT 'auto',
                            budget integer DEFAULT NULL) RETURNS jsonb
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@._kde_raise_if_error(
        @extschema@._kde_refresh(tbl::oid, cols, method, sample_size, grid_size, backend, budget, '0.12.0'))
$$;
COMMENT ON FUNCTION kde_refresh(regclass, text[], text, integer, integer, text, integer) IS
    'Build or rebuild the synopsis of one column or, with two, of a pair within budget bytes (default 8192 and 65536; method: auto = lscv_H for a pair); returns a summary';

CREATE OR REPLACE FUNCTION kde_bandwidth(tbl regclass, cols text[], method text DEFAULT 'auto', backend text DEFAULT 'auto',
                              sample_size integer DEFAULT 10000) RETURNS float8[]
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT ARRAY(SELECT jsonb_array_elements_text(@extschema@._kde_raise_if_error(
        @extschema@._kde_bandwidth(tbl::oid, cols, method, backend, sample_size, '0.12.0')) -> 'bandwidth')::float8)
$$;
COMMENT ON FUNCTION kde_bandwidth(regclass, text[], text, text, integer) IS
    'Bandwidth of a sample of rows with all columns non-NULL: {h} for one column (data units), else H row-major';

CREATE OR REPLACE FUNCTION kde_refresh_stale() RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r record;
    n integer := 0;
BEGIN
    FOR r IN SELECT k.relid, k.cols, k.requested, c.relkind, c.relowner = current_user::regrole AS owned
             FROM @extschema@.kde_synopses v
             JOIN @extschema@.kde_catalog k USING (relid, cols)
             JOIN pg_class c ON c.oid = k.relid
             WHERE v.stale
             ORDER BY k.relid::oid, k.cols
    LOOP
        -- Reading a view or a foreign table runs code its owner wrote, with the reader's privileges: a
        -- routine refresh must not run another role's code as the caller (a superuser, say).
        IF (r.relkind NOT IN ('r', 'p', 'm') AND NOT r.owned)
           OR (r.relkind = 'p' AND EXISTS (
               SELECT 1 FROM pg_partition_tree(r.relid) t JOIN pg_class c ON c.oid = t.relid
               WHERE t.isleaf AND c.relkind NOT IN ('r', 'm') AND c.relowner <> current_user::regrole)) THEN
            RAISE WARNING 'pg_kde: skipped the synopsis of % of %: reading it runs code of its owner, not yours',
                          array_to_string(r.cols, ', '), r.relid
                USING HINT = 'Refresh it as its owner, or with kde_refresh once you trust that code.';
            CONTINUE;
        END IF;
        BEGIN
            -- The same request as the last refresh (requested holds its arguments, not what was built).
            PERFORM @extschema@._kde_raise_if_error(@extschema@._kde_refresh(
                r.relid::oid, r.cols, r.requested ->> 'method', (r.requested ->> 'sample_size')::integer,
                (r.requested ->> 'grid_size')::integer, r.requested ->> 'backend', (r.requested ->> 'budget')::integer,
                '0.12.0'));
            n := n + 1;
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'pg_kde: could not refresh the synopsis of % of %: %', array_to_string(r.cols, ', '), r.relid, SQLERRM;
        END;
    END LOOP;
    RETURN n;
END
$$;
COMMENT ON FUNCTION kde_refresh_stale() IS
    'Refresh every stale synopsis the current role may read, each on its own (failures are warnings); returns how many were refreshed';
