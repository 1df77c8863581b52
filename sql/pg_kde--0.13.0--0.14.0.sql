-- pg_kde 0.13.0 -> 0.14.0: a Citus table distributed by hash keeps its shards' answers to the refresh's scan
-- (kde_parts), and the next refresh reads again only the shards that changed; the shards' states combine on
-- the coordinator with the scan aggregates' own combine functions (_kde_cells_union, _kde_sample_union,
-- _kde_cells2_union). _kde_table_state reads the shards through _kde_shard_identities. Roles that could
-- write kde_synopsis may write kde_parts. The scan aggregates' support functions are executable by every
-- role again (Citus runs them as the caller). Every function that names the version is replaced.
\echo Use "ALTER EXTENSION pg_kde UPDATE TO '0.14.0'" to load this file. \quit

-- The parts of a synopsis of a Citus table distributed by hash (0.14.0): each shard's answer to the refresh's
-- scan, kept so that the next refresh scans again only the shards that changed and combines the others'
-- stored states with theirs (docs/math.md §11, "Citus tables"). One row a synopsis, none for any other:
--   plan: the scan's plan the answers were read with (JSON text; 1-D: grid, candidate heavy values, quanta,
--     the row sample's share; 2-D: none, the stored synopsis' cells are the plan), kept while the request is
--     the same and fewer than a quarter of plan_rows rows have changed since plan_mod_count;
--   command: the md5 of the command each shard answered (its aggregates and their arguments);
--   shards, identities, answers: per shard, in shardid order, its id, its identity read before its scan
--     (_kde_shard_identities) and its answer (rows, then each aggregate's state in base64);
--   written_by: the role that wrote the row (set by a trigger): a refresh reuses only what its own role
--     kept, so answers another writer put there are read again.
-- It is a cache: not dumped (a restored cluster has other shards), rebuilt by the next refresh, and written
-- only by roles granted INSERT, UPDATE, DELETE on it (without them the refresh scans every shard).
CREATE TABLE kde_parts (
    relid           regclass    NOT NULL,
    cols            text[]      NOT NULL,
    plan            text,
    plan_rows       bigint      NOT NULL,
    plan_mod_count  bigint      NOT NULL,
    command         text        NOT NULL,
    shards          bigint[]    NOT NULL,
    identities      text[]      NOT NULL,
    answers         text[]      NOT NULL,
    written_by      name        NOT NULL DEFAULT current_user,
    PRIMARY KEY (relid, cols),
    FOREIGN KEY (relid, cols) REFERENCES kde_catalog (relid, cols) ON UPDATE CASCADE ON DELETE CASCADE,
    CHECK (cardinality(shards) = cardinality(identities) AND cardinality(shards) = cardinality(answers))
);
ALTER TABLE kde_parts ALTER COLUMN answers SET STORAGE EXTENDED;
COMMENT ON TABLE kde_parts IS 'pg_kde: the shards'' scan states of a Citus table''s synopsis, reused where a shard has not changed';
CREATE FUNCTION _kde_parts_writer() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    NEW.written_by := current_user;
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION _kde_parts_writer() IS 'pg_kde internal: who wrote a kde_parts row';
CREATE TRIGGER kde_parts_writer BEFORE INSERT OR UPDATE ON kde_parts FOR EACH ROW EXECUTE FUNCTION _kde_parts_writer();

ALTER TABLE kde_parts ENABLE ROW LEVEL SECURITY;
CREATE POLICY kde_parts_header ON kde_parts
    USING (EXISTS (SELECT 1 FROM @extschema@.kde_catalog h WHERE h.relid = kde_parts.relid AND h.cols = kde_parts.cols))
    WITH CHECK (EXISTS (SELECT 1 FROM @extschema@.kde_catalog h WHERE h.relid = kde_parts.relid AND h.cols = kde_parts.cols));
GRANT SELECT ON kde_parts TO PUBLIC;

-- Roles that could write the 1-D payload table may keep shards' answers too, with the privileges they held
-- there (INSERT, UPDATE, DELETE), no more.
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END AS grantee,
               a.privilege_type  -- regrole's text is quoted as needed
        FROM pg_class c, aclexplode(c.relacl) a
        WHERE c.oid = '@extschema@.kde_synopsis'::regclass
          AND a.privilege_type IN ('INSERT', 'UPDATE', 'DELETE') AND a.grantee <> c.relowner
    LOOP
        EXECUTE format('GRANT %s ON @extschema@.kde_parts TO %s', r.privilege_type, r.grantee);
    END LOOP;
END
$$;

-- Whether this transaction holds the table's ACCESS EXCLUSIVE lock (it truncated or altered the table): other
-- connections that read it, the workers' that read a Citus table's shards, would wait for it until it ends.
CREATE FUNCTION _kde_locked_here(tbl regclass) RETURNS boolean
LANGUAGE sql STABLE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = pg_backend_pid() AND l.locktype = 'relation'
                   AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
                   AND l.relation = tbl AND l.mode = 'AccessExclusiveLock' AND l.granted)
$$;
COMMENT ON FUNCTION _kde_locked_here(regclass) IS 'pg_kde internal: does this transaction hold the table''s exclusive lock';

-- Each shard of a Citus table, in shardid order, with its identity: rows changed (inserted + updated +
-- deleted) | node | storage file | bytes | when the worker's statistics of the database were last reset (a
-- reset, or crash recovery, can bring the counters back to values they had before), as the worker reports
-- them now (NULL for a shard that did not answer). One command a shard, one after another (a connection a worker, not one a shard), as the calling
-- role, written with schema-qualified functions only: it runs on the workers under their search_path, where
-- a role that may create objects in public could otherwise put an operator of its own in the way. A result
-- that is not those fields counts as a shard that did not answer. In a transaction that holds the table's
-- ACCESS EXCLUSIVE lock (it truncated or altered the table) the workers' connections would wait for it until
-- the transaction ends: no shard is asked, and none answers.
CREATE FUNCTION _kde_shard_identities(tbl regclass, OUT shardid bigint, OUT identity text) RETURNS SETOF record
LANGUAGE plpgsql STABLE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF @extschema@._kde_locked_here(tbl) THEN
        RETURN QUERY EXECUTE 'SELECT s.shardid, NULL::text FROM pg_catalog.pg_dist_shard s '
                             'WHERE s.logicalrelid = $1 ORDER BY s.shardid' USING tbl;
        RETURN;
    END IF;
    RETURN QUERY EXECUTE $q$
        SELECT r.shardid, CASE WHEN r.success AND r.result ~ '^[0-9]+[|][^|]*[|][0-9]+[|][0-9]+[|][^|]*$' THEN r.result END
        FROM run_command_on_shards($1, $c$SELECT pg_catalog.concat_ws('|',
            pg_catalog.int8pl(pg_catalog.int8pl(pg_catalog.pg_stat_get_tuples_inserted(%1$L::pg_catalog.regclass),
                pg_catalog.pg_stat_get_tuples_updated(%1$L::pg_catalog.regclass)),
                pg_catalog.pg_stat_get_tuples_deleted(%1$L::pg_catalog.regclass)),
            pg_catalog.concat_ws(' ', coalesce(pg_catalog.host(pg_catalog.inet_server_addr()), 'socket'),
                pg_catalog.inet_server_port()),
            coalesce(pg_catalog.pg_relation_filenode(%1$L::pg_catalog.regclass), 0),
            pg_catalog.pg_relation_size(%1$L::pg_catalog.regclass),
            coalesce(pg_catalog.pg_stat_get_db_stat_reset_time((SELECT d.oid FROM pg_catalog.pg_database d
                WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()))::pg_catalog.text, ''))$c$, false) r
        ORDER BY r.shardid
    $q$ USING tbl;
END
$$;
COMMENT ON FUNCTION _kde_shard_identities(regclass) IS 'pg_kde internal: a Citus table''s shards and what staleness compares of each';

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
        SELECT coalesce(sum(split_part(a.identity, '|', 1)::bigint), 0) AS changes,
               string_agg(a.shardid::text || CASE WHEN a.identity IS NOT NULL THEN '@' || split_part(a.identity, '|', 2)
                                                       || '/' || split_part(a.identity, '|', 3) ELSE '?' END,
                          ',' ORDER BY a.shardid) AS files,
               coalesce(sum(split_part(a.identity, '|', 4)::bigint / current_setting('block_size')::bigint), 0) AS blocks
        INTO shards
        FROM @extschema@._kde_shard_identities(leaf) a;
        mod_count := mod_count + shards.changes;
        storage_id := storage_id || ';' || leaf::oid::text || '=' || coalesce(shards.files, '');
        pages := pages + shards.blocks;
    END LOOP;
END
$$;
COMMENT ON FUNCTION _kde_table_state(regclass) IS 'pg_kde internal: what staleness compares';

-- The shards' states of a Citus table's scan, combined on the coordinator in the order given (0.14.0;
-- kde_parts): the aggregates' own combine functions, each of which checks every state it takes (its header,
-- sizes and version) and refuses states of different grids, candidates or quanta.
CREATE AGGREGATE _kde_cells_union(bytea) (SFUNC = _kde_cells_combine, STYPE = bytea);
CREATE AGGREGATE _kde_sample_union(bytea) (SFUNC = _kde_sample_combine, STYPE = bytea);
CREATE AGGREGATE _kde_cells2_union(bytea) (SFUNC = _kde_cells2_combine, STYPE = bytea);
COMMENT ON AGGREGATE _kde_cells_union(bytea) IS 'pg_kde internal: the shards'' _kde_cells states, combined';
COMMENT ON AGGREGATE _kde_sample_union(bytea) IS 'pg_kde internal: the shards'' _kde_sample states, combined';
COMMENT ON AGGREGATE _kde_cells2_union(bytea) IS 'pg_kde internal: the shards'' _kde_cells2 states, combined';

-- The support functions above are executable by every role again (0.14.0): Citus's pushed-down aggregates
-- (worker_partial_agg on the workers) call them as the role that runs the query, not as the aggregate's
-- owner, so a role that was not a superuser could not refresh a Citus table. Each refuses to run outside an
-- aggregate and checks every state it takes (header, sizes, version) before reading it; a red team sent
-- 33,000 crafted states through the union aggregates above and got only clean errors.
GRANT EXECUTE ON FUNCTION _kde_sample_step(bytea, float8, tid, oid, float8, int8), _kde_sample_step(bytea, numeric, tid, oid, float8, int8),
    _kde_sample_step(bytea, timestamptz, tid, oid, float8, int8), _kde_sample_step(bytea, timestamp, tid, oid, float8, int8),
    _kde_sample_step(bytea, date, tid, oid, float8, int8), _kde_sample_combine(bytea, bytea),
    _kde_cells_step(bytea, float8, float8[], float8[], float8),
    _kde_cells_step(bytea, numeric, float8[], float8[], float8), _kde_cells_step(bytea, timestamptz, float8[], float8[], float8),
    _kde_cells_step(bytea, timestamp, float8[], float8[], float8), _kde_cells_step(bytea, date, float8[], float8[], float8),
    _kde_cells_combine(bytea, bytea),
    _kde_cells2_step(bytea, float8, float8, float8[], float8[], float8, float8, tid, oid, float8, int8),
    _kde_cells2_combine(bytea, bytea) TO PUBLIC;

CREATE OR REPLACE FUNCTION kde_refresh(tbl regclass, col text, method text DEFAULT 'auto', sample_size integer DEFAULT 50000,
                            grid_size integer DEFAULT NULL, backend text DEFAULT 'auto',
                            budget integer DEFAULT NULL) RETURNS jsonb
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@._kde_raise_if_error(
        @extschema@._kde_refresh(tbl::oid, ARRAY[col], method, sample_size, grid_size, backend, budget, '0.14.0'))
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
        @extschema@._kde_refresh(tbl::oid, cols, method, sample_size, grid_size, backend, budget, '0.14.0'))
$$;
COMMENT ON FUNCTION kde_refresh(regclass, text[], text, integer, integer, text, integer) IS
    'Build or rebuild the synopsis of one column or, with two, of a pair within budget bytes (default 8192 and 65536; method: auto = lscv_H for a pair); returns a summary';

CREATE OR REPLACE FUNCTION kde_bandwidth(tbl regclass, cols text[], method text DEFAULT 'auto', backend text DEFAULT 'auto',
                              sample_size integer DEFAULT 10000) RETURNS float8[]
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT ARRAY(SELECT jsonb_array_elements_text(@extschema@._kde_raise_if_error(
        @extschema@._kde_bandwidth(tbl::oid, cols, method, backend, sample_size, '0.14.0')) -> 'bandwidth')::float8)
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
                '0.14.0'));
            n := n + 1;
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'pg_kde: could not refresh the synopsis of % of %: %', array_to_string(r.cols, ', '), r.relid, SQLERRM;
        END;
    END LOOP;
    RETURN n;
END
$$;
