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
-- the change, is not seen). A shard that does not answer makes the storage differ, so the synopsis reads as
-- stale until it answers again.
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
           string_agg(l.relid::oid::text || ':' || pg_relation_filenode(l.relid)::text, ',' ORDER BY l.relid::oid),
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
        EXECUTE $q$
            SELECT coalesce(sum(CASE WHEN r.success THEN split_part(r.result, '|', 1)::bigint END), 0) AS changes,
                   string_agg(r.shardid::text || CASE WHEN r.success THEN '@' || split_part(r.result, '|', 2) || '/'
                                                          || split_part(r.result, '|', 3) ELSE '?' END,
                              ',' ORDER BY r.shardid) AS files,
                   coalesce(sum(CASE WHEN r.success THEN split_part(r.result, '|', 4)::bigint END), 0) AS blocks
            FROM run_command_on_shards($1, $c$SELECT pg_catalog.pg_stat_get_tuples_inserted(%1$L::regclass)
                + pg_catalog.pg_stat_get_tuples_updated(%1$L::regclass)
                + pg_catalog.pg_stat_get_tuples_deleted(%1$L::regclass)
                || '|' || coalesce(pg_catalog.host(pg_catalog.inet_server_addr()), 'socket') || ' '
                || pg_catalog.inet_server_port() || '|' || pg_catalog.pg_relation_filenode(%1$L::regclass)
                || '|' || pg_catalog.pg_relation_size(%1$L::regclass)
                          / pg_catalog.current_setting('block_size')::bigint$c$) r
        $q$ INTO shards USING leaf;
        mod_count := mod_count + shards.changes;
        storage_id := storage_id || ';' || leaf::oid::text || '=' || coalesce(shards.files, '');
        pages := pages + shards.blocks;
    END LOOP;
END
$$;

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
