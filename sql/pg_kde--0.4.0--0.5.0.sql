-- pg_kde 0.4.0 -> 0.5.0: the refresh reads a column in two parallel passes of C aggregates (_kde_sample and
-- _kde_cells, in the extension's library, with _kde_float8; Citus runs them on every shard); kde_track keeps
-- tables' 1-D synopses up to date (statement triggers; _kde_track_delta in the library); kde_synopses shows
-- it and why tracking stopped; every function that names the version is replaced.
\echo Use "ALTER EXTENSION pg_kde UPDATE TO '0.5.0'" to load this file. \quit

-- The refresh's sample (extension/sample.c): each row kept with probability share by a hash of its ctid,
-- tableoid and the seed (the same rows for unchanged data, in any scan order), and the column's facts over every row
-- (non-NULL and non-finite values, min and max), in one parallel pass; a bytea state with a combine function.
CREATE OR REPLACE FUNCTION _kde_sample_step(bytea, float8, tid, oid, float8, int8) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_sample_step_float8' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION _kde_sample_step(bytea, numeric, tid, oid, float8, int8) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_sample_step_numeric' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION _kde_sample_step(bytea, timestamptz, tid, oid, float8, int8) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_sample_step_timestamp' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION _kde_sample_step(bytea, timestamp, tid, oid, float8, int8) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_sample_step_timestamp' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION _kde_sample_step(bytea, date, tid, oid, float8, int8) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_sample_step_date' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION _kde_sample_combine(bytea, bytea) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_sample_combine' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE AGGREGATE _kde_sample(float8, tid, oid, float8, int8) (
    SFUNC = _kde_sample_step, STYPE = bytea, COMBINEFUNC = _kde_sample_combine, PARALLEL = SAFE);
CREATE AGGREGATE _kde_sample(numeric, tid, oid, float8, int8) (
    SFUNC = _kde_sample_step, STYPE = bytea, COMBINEFUNC = _kde_sample_combine, PARALLEL = SAFE);
CREATE AGGREGATE _kde_sample(timestamptz, tid, oid, float8, int8) (
    SFUNC = _kde_sample_step, STYPE = bytea, COMBINEFUNC = _kde_sample_combine, PARALLEL = SAFE);
CREATE AGGREGATE _kde_sample(timestamp, tid, oid, float8, int8) (
    SFUNC = _kde_sample_step, STYPE = bytea, COMBINEFUNC = _kde_sample_combine, PARALLEL = SAFE);
CREATE AGGREGATE _kde_sample(date, tid, oid, float8, int8) (
    SFUNC = _kde_sample_step, STYPE = bytea, COMBINEFUNC = _kde_sample_combine, PARALLEL = SAFE);
COMMENT ON AGGREGATE _kde_sample(float8, tid, oid, float8, int8) IS 'pg_kde internal: the refresh''s sample of a column';
COMMENT ON AGGREGATE _kde_sample(numeric, tid, oid, float8, int8) IS 'pg_kde internal: the refresh''s sample of a column';
COMMENT ON AGGREGATE _kde_sample(timestamptz, tid, oid, float8, int8) IS 'pg_kde internal: the refresh''s sample of a column';
COMMENT ON AGGREGATE _kde_sample(timestamp, tid, oid, float8, int8) IS 'pg_kde internal: the refresh''s sample of a column';
COMMENT ON AGGREGATE _kde_sample(date, tid, oid, float8, int8) IS 'pg_kde internal: the refresh''s sample of a column';
-- The aggregates' support functions take a state a caller could craft: only the aggregates call them
-- (PostgreSQL checks the aggregate owner's EXECUTE on them, not the caller's).
REVOKE EXECUTE ON FUNCTION _kde_sample_step(bytea, float8, tid, oid, float8, int8), _kde_sample_step(bytea, numeric, tid, oid, float8, int8),
    _kde_sample_step(bytea, timestamptz, tid, oid, float8, int8), _kde_sample_step(bytea, timestamp, tid, oid, float8, int8),
    _kde_sample_step(bytea, date, tid, oid, float8, int8), _kde_sample_combine(bytea, bytea) FROM PUBLIC;
-- The refresh's one scan (extension/cells.c): per cell of a grid, its rows and the exact sum of its values in
-- whole quanta; per candidate heavy value, its rows; and the column's facts. Its state is a bytea with a
-- combine function: PostgreSQL's parallel query runs it on every core, Citus on every shard, and the states
-- of parts of a table merge with the same combine. Time columns are read as epoch seconds, as
-- extract(epoch from ...)::float8 reads them (a timestamp's or a date's wall-clock time as UTC).
-- A numeric column is read as _kde_float8 reads it: the same float8 as numeric's own cast, without its text.
CREATE OR REPLACE FUNCTION _kde_float8(numeric) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_float8' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_float8(numeric) IS 'pg_kde internal: numeric to float8, as the cast, faster';
CREATE OR REPLACE FUNCTION _kde_cells_step(bytea, float8, float8[], float8[], float8) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_cells_step_float8' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION _kde_cells_step(bytea, numeric, float8[], float8[], float8) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_cells_step_numeric' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION _kde_cells_step(bytea, timestamptz, float8[], float8[], float8) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_cells_step_timestamp' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION _kde_cells_step(bytea, timestamp, float8[], float8[], float8) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_cells_step_timestamp' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION _kde_cells_step(bytea, date, float8[], float8[], float8) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_cells_step_date' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION _kde_cells_combine(bytea, bytea) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_cells_combine' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE AGGREGATE _kde_cells(float8, float8[], float8[], float8) (
    SFUNC = _kde_cells_step, STYPE = bytea, COMBINEFUNC = _kde_cells_combine, PARALLEL = SAFE);
CREATE AGGREGATE _kde_cells(numeric, float8[], float8[], float8) (
    SFUNC = _kde_cells_step, STYPE = bytea, COMBINEFUNC = _kde_cells_combine, PARALLEL = SAFE);
CREATE AGGREGATE _kde_cells(timestamptz, float8[], float8[], float8) (
    SFUNC = _kde_cells_step, STYPE = bytea, COMBINEFUNC = _kde_cells_combine, PARALLEL = SAFE);
CREATE AGGREGATE _kde_cells(timestamp, float8[], float8[], float8) (
    SFUNC = _kde_cells_step, STYPE = bytea, COMBINEFUNC = _kde_cells_combine, PARALLEL = SAFE);
CREATE AGGREGATE _kde_cells(date, float8[], float8[], float8) (
    SFUNC = _kde_cells_step, STYPE = bytea, COMBINEFUNC = _kde_cells_combine, PARALLEL = SAFE);
REVOKE EXECUTE ON FUNCTION _kde_cells_step(bytea, float8, float8[], float8[], float8),
    _kde_cells_step(bytea, numeric, float8[], float8[], float8), _kde_cells_step(bytea, timestamptz, float8[], float8[], float8),
    _kde_cells_step(bytea, timestamp, float8[], float8[], float8), _kde_cells_step(bytea, date, float8[], float8[], float8),
    _kde_cells_combine(bytea, bytea) FROM PUBLIC;
COMMENT ON AGGREGATE _kde_cells(float8, float8[], float8[], float8) IS 'pg_kde internal: the refresh''s scan of a column';
COMMENT ON AGGREGATE _kde_cells(numeric, float8[], float8[], float8) IS 'pg_kde internal: the refresh''s scan of a column';
COMMENT ON AGGREGATE _kde_cells(timestamptz, float8[], float8[], float8) IS 'pg_kde internal: the refresh''s scan of a column';
COMMENT ON AGGREGATE _kde_cells(timestamp, float8[], float8[], float8) IS 'pg_kde internal: the refresh''s scan of a column';
COMMENT ON AGGREGATE _kde_cells(date, float8[], float8[], float8) IS 'pg_kde internal: the refresh''s scan of a column';
-- budget: bytes the synopsis may take (its catalog rows, as pg_column_size counts them); NULL: 8192 for one
-- column, 65536 for a pair. grid_size (points per axis), when given, sets the grid instead.
CREATE OR REPLACE FUNCTION kde_refresh(tbl regclass, col text, method text DEFAULT 'auto', sample_size integer DEFAULT 50000,
                            grid_size integer DEFAULT NULL, backend text DEFAULT 'auto',
                            budget integer DEFAULT NULL) RETURNS jsonb
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@._kde_raise_if_error(
        @extschema@._kde_refresh(tbl::oid, ARRAY[col], method, sample_size, grid_size, backend, budget, '0.5.0'))
$$;
CREATE OR REPLACE FUNCTION kde_refresh(tbl regclass, cols text[], method text DEFAULT 'auto', sample_size integer DEFAULT 5000,
                            grid_size integer DEFAULT NULL, backend text DEFAULT 'auto',
                            budget integer DEFAULT NULL) RETURNS jsonb
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@._kde_raise_if_error(
        @extschema@._kde_refresh(tbl::oid, cols, method, sample_size, grid_size, backend, budget, '0.5.0'))
$$;
CREATE OR REPLACE FUNCTION kde_bandwidth(tbl regclass, cols text[], method text DEFAULT 'auto', backend text DEFAULT 'auto',
                              sample_size integer DEFAULT 10000) RETURNS float8[]
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT ARRAY(SELECT jsonb_array_elements_text(@extschema@._kde_raise_if_error(
        @extschema@._kde_bandwidth(tbl::oid, cols, method, backend, sample_size, '0.5.0')) -> 'bandwidth')::float8)
$$;
-- ---------------------------------------------------------------------------------------------- tracking
-- Opt-in incremental maintenance of a table's 1-D synopses (docs/math.md §12): kde_track(tbl) installs
-- statement-level AFTER INSERT, UPDATE and DELETE triggers whose transition tables add the rows written to
-- the cells and heavy values they fall in, and subtract the rows deleted, exactly; the grid stays as built
-- (its outer boundaries move out to rows beyond them) until the next full refresh. A write the synopsis
-- cannot take exactly (a NaN or infinite value, a value off its lattice, a new value of an exact frequency
-- table) marks it stale with that reason instead; kde_refresh_stale() rebuilds it.
--
-- The trigger function runs as the catalog's owner (SECURITY DEFINER): the roles writing the table need no
-- grant on the catalog, and a row of theirs can only ever change the synopsis of the table they wrote. It
-- runs only as one of the three triggers kde_track installs (checked against pg_trigger: their names, AFTER
-- ... FOR EACH STATEMENT, and the transition tables they declare), so the relations it reads are the
-- statement's own rows. Writers of one tracked table queue on its synopses' catalog rows at the end of each
-- statement (row locks held to commit): tracking serializes their commits, two REPEATABLE READ writers get a
-- serialization failure, and writers of two tracked tables in opposite orders can deadlock. Sums are kept
-- in float8 and rounded once per statement (a scan's are exact integers rounded once). 2-D synopses,
-- partitions and tables in an inheritance tree are not tracked (a write through a parent or a child would
-- not reach the triggers).

-- The values a statement wrote (added) and deleted (removed), applied to one 1-D synopsis' arrays
-- (extension/track.c): the new arrays and the changes to its rows, or the problem that keeps it from taking
-- them exactly.
CREATE OR REPLACE FUNCTION _kde_track_delta(grid float8[], step float8, atom_values float8[], atom_cum_count float8[],
                                 atom_cum_sum float8[], cell_cum_count float8[], cell_cum_sum float8[],
                                 density float4[], added float8[], removed float8[],
                                 OUT problem text, OUT nulls bigint, OUT non_null bigint, OUT kde_rows bigint,
                                 OUT applied bigint, OUT new_grid float8[], OUT new_atom_cum_count float8[],
                                 OUT new_atom_cum_sum float8[], OUT new_cell_cum_count float8[],
                                 OUT new_cell_cum_sum float8[], OUT new_density float4[])
AS 'MODULE_PATHNAME', 'kde_track_delta' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION _kde_track_delta(float8[], float8, float8[], float8[], float8[], float8[], float8[], float4[],
                                     float8[], float8[]) IS
    'pg_kde internal: apply the values a statement wrote and deleted to one 1-D synopsis';
REVOKE EXECUTE ON FUNCTION _kde_track_delta(float8[], float8, float8[], float8[], float8[], float8[], float8[], float4[],
                                            float8[], float8[]) FROM PUBLIC;
CREATE OR REPLACE FUNCTION _kde_track_apply() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r record;
    size_now bigint;
    expr text;
    added float8[];
    removed float8[];
    delta record;
BEGIN
    IF TG_LEVEL <> 'STATEMENT' OR TG_WHEN <> 'AFTER' OR NOT EXISTS (
        SELECT 1 FROM pg_trigger t
        WHERE t.tgrelid = TG_RELID AND t.tgname = TG_NAME
          AND t.tgname IN ('kde_track_insert', 'kde_track_update', 'kde_track_delete')
          AND t.tgnewtable IS NOT DISTINCT FROM (CASE WHEN TG_OP IN ('INSERT', 'UPDATE') THEN 'kde_new' END)
          AND t.tgoldtable IS NOT DISTINCT FROM (CASE WHEN TG_OP IN ('DELETE', 'UPDATE') THEN 'kde_old' END)) THEN
        RAISE EXCEPTION 'pg_kde: _kde_track_apply runs only as the triggers kde_track installs'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    size_now := pg_relation_size(TG_RELID) / current_setting('block_size')::bigint;
    -- Each synopsis' column by identity (as queries resolve it), while its type is the one it was built on.
    FOR r IN SELECT k.cols, c.name AS attname, t.typname, t.typcategory FROM @extschema@.kde_catalog k
             CROSS JOIN LATERAL @extschema@._kde_resolve(k.relid, k.cols, k.attnums, k.built_relid) c
             JOIN pg_attribute a ON a.attrelid = k.relid AND a.attnum = c.attnum
             JOIN pg_type t ON t.oid = a.atttypid
             WHERE k.relid = TG_RELID::regclass AND k.kind = '1d' AND c.type = k.coltypes[1]
               AND coalesce(k.storage_id, '') NOT LIKE 'untracked:%'
             ORDER BY k.cols FOR UPDATE OF k
    LOOP
        -- The value as the refresh's scan reads it (_kde_cells): the same float8 for every type.
        expr := CASE WHEN r.typname = 'numeric' THEN format('@extschema@._kde_float8(%I)', r.attname)
                     WHEN r.typcategory = 'N' THEN format('(%I)::float8', r.attname)
                     ELSE format('extract(epoch FROM %I)::float8', r.attname) END;
        added := NULL;
        removed := NULL;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            EXECUTE format('SELECT array_agg(%s) FROM kde_new', expr) INTO added;
        END IF;
        IF TG_OP IN ('DELETE', 'UPDATE') THEN
            EXECUTE format('SELECT array_agg(%s) FROM kde_old', expr) INTO removed;
        END IF;
        SELECT d.* INTO delta FROM @extschema@.kde_synopsis p,
               LATERAL @extschema@._kde_track_delta(p.grid, p.step, p.atom_values, p.atom_cum_count, p.atom_cum_sum,
                                                    p.cell_cum_count, p.cell_cum_sum, p.density,
                                                    coalesce(added, '{}'), coalesce(removed, '{}')) d
        WHERE p.relid = TG_RELID::regclass AND p.cols = r.cols;
        IF delta.problem IS NOT NULL THEN
            -- Stale with the reason, until a refresh (which stores the table's own storage id again).
            UPDATE @extschema@.kde_catalog k SET storage_id = 'untracked: ' || delta.problem
            WHERE k.relid = TG_RELID::regclass AND k.cols = r.cols;
            CONTINUE;
        END IF;
        UPDATE @extschema@.kde_synopsis p
        SET grid = delta.new_grid, atom_cum_count = delta.new_atom_cum_count, atom_cum_sum = delta.new_atom_cum_sum,
            cell_cum_count = delta.new_cell_cum_count, cell_cum_sum = delta.new_cell_cum_sum,
            density = delta.new_density, kde_rows = p.kde_rows + delta.kde_rows
        WHERE p.relid = TG_RELID::regclass AND p.cols = r.cols;
        -- Up to date with this statement: its rows count as seen (the activity counters move by one a row
        -- inserted, updated or deleted; writes the triggers did not see still count), and the size is now.
        UPDATE @extschema@.kde_catalog k
        SET n_rows = k.n_rows + delta.non_null, n_null = k.n_null + delta.nulls,
            mod_count = k.mod_count + CASE TG_OP WHEN 'UPDATE' THEN cardinality(added)
                                                 ELSE coalesce(cardinality(added), 0) + coalesce(cardinality(removed), 0) END,
            pages = size_now
        WHERE k.relid = TG_RELID::regclass AND k.cols = r.cols;
    END LOOP;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION _kde_track_apply() IS 'pg_kde internal: the tracking triggers'' function';
-- Track a table's 1-D synopses: the caller must be allowed to write the catalog (tracking lets the table's
-- writers change its synopses) and to create triggers on the table. Returns how many synopses are tracked.
CREATE OR REPLACE FUNCTION kde_track(tbl regclass) RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    kind char;
    n integer;
BEGIN
    SELECT c.relkind INTO kind FROM pg_class c WHERE c.oid = tbl;
    IF kind IS DISTINCT FROM 'r' THEN
        RAISE EXCEPTION 'pg_kde: % is not a plain table; only tables'' synopses are tracked', tbl
            USING ERRCODE = 'wrong_object_type',
                  HINT = 'A partitioned table''s synopsis merges its partitions'': refresh it with kde_refresh.';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = tbl OR i.inhparent = tbl) THEN
        RAISE EXCEPTION 'pg_kde: % is a partition or in an inheritance tree; writes through its parent or children would not reach the tracking triggers', tbl
            USING ERRCODE = 'wrong_object_type',
                  HINT = 'Refresh it with kde_refresh (or kde_refresh_stale on a schedule).';
    END IF;
    IF NOT has_table_privilege('@extschema@.kde_synopsis', 'UPDATE') THEN
        RAISE EXCEPTION 'pg_kde: tracking % lets its writers change its synopses; it needs UPDATE on the catalog', tbl
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'GRANT INSERT, UPDATE, DELETE ON kde_catalog, kde_synopsis, kde_synopsis_2d to the role.';
    END IF;
    PERFORM @extschema@.kde_untrack(tbl);
    EXECUTE format('CREATE TRIGGER kde_track_insert AFTER INSERT ON %s REFERENCING NEW TABLE AS kde_new '
                   'FOR EACH STATEMENT EXECUTE FUNCTION @extschema@._kde_track_apply()', tbl);
    EXECUTE format('CREATE TRIGGER kde_track_update AFTER UPDATE ON %s REFERENCING OLD TABLE AS kde_old '
                   'NEW TABLE AS kde_new FOR EACH STATEMENT EXECUTE FUNCTION @extschema@._kde_track_apply()', tbl);
    EXECUTE format('CREATE TRIGGER kde_track_delete AFTER DELETE ON %s REFERENCING OLD TABLE AS kde_old '
                   'FOR EACH STATEMENT EXECUTE FUNCTION @extschema@._kde_track_apply()', tbl);
    SELECT count(*) INTO n FROM @extschema@.kde_catalog k WHERE k.relid = tbl AND k.kind = '1d';
    RETURN n;
END
$$;
COMMENT ON FUNCTION kde_track(regclass) IS
    'Keep a table''s 1-D synopses up to date as rows are written (statement triggers); returns how many are tracked';
CREATE OR REPLACE FUNCTION kde_untrack(tbl regclass) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    EXECUTE format('DROP TRIGGER IF EXISTS kde_track_insert ON %s', tbl);
    EXECUTE format('DROP TRIGGER IF EXISTS kde_track_update ON %s', tbl);
    EXECUTE format('DROP TRIGGER IF EXISTS kde_track_delete ON %s', tbl);
END
$$;
COMMENT ON FUNCTION kde_untrack(regclass) IS 'Stop tracking a table (drop kde_track''s triggers)';
-- ---------------------------------------------------------------------------------------------- staleness
-- Why a synopsis no longer describes its table (NULL while it does): a write kde_track's triggers could not
-- apply (60_track.sql), or from _kde_table_state now against the same at the build (or at the last tracked
-- write): new storage files (TRUNCATE, a rewrite, partitions attached or detached, a restore);
-- counters below their value at the build (statistics reset, e.g. by crash recovery: what happened since
-- is unknown); at least 10% of the rows inserted, updated or deleted; the size in pages changed by more
-- than 10% (what the counters miss once reset).
CREATE OR REPLACE FUNCTION _kde_stale_reason(tbl regclass, rows bigint, built_mod_count bigint, built_storage text,
                                  built_pages bigint) RETURNS text
LANGUAGE sql STABLE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE
        WHEN built_storage LIKE 'untracked: %' THEN 'tracking could not apply a write: ' || substr(built_storage, 12)
        WHEN st.storage_id IS DISTINCT FROM built_storage THEN 'truncated, rewritten, repartitioned or restored'
        WHEN st.mod_count < built_mod_count THEN 'activity statistics were reset since the build'
        WHEN st.mod_count - built_mod_count >= 0.1 * greatest(rows, 1) THEN 'at least 10% of the rows modified'
        WHEN abs(st.pages - built_pages) > greatest(0.1 * built_pages, 1) THEN 'size changed by more than 10%'
    END
    FROM @extschema@._kde_table_state(tbl) st
$$;
CREATE OR REPLACE VIEW kde_synopses WITH (security_invoker = true) AS
SELECT k.relid,
       k.cols,
       k.method,
       k.n_rows,
       coalesce(cardinality(p1.atom_values), 0) AS heavy_values,
       coalesce(p1.kde_rows, k.n_rows) AS kde_rows,
       pg_column_size(k.*) + coalesce(pg_column_size(p1.*), 0) + coalesce(pg_column_size(p2.*), 0) AS bytes,
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
CROSS JOIN LATERAL @extschema@._kde_table_state(k.relid) st
CROSS JOIN LATERAL (SELECT @extschema@._kde_stale_reason(k.relid, k.n_rows + k.n_null, k.mod_count, k.storage_id,
                                                         k.pages) AS reason) r;
COMMENT ON VIEW kde_synopses IS
    'Every synopsis the current role may read, with its size, age, rows modified since its build (NULL when statistics were reset), a stale flag and its reason, and whether kde_track keeps it up to date';
-- Each stale synopsis the current role may read is rebuilt on its own (a subtransaction each): one that
-- fails is reported as a WARNING and left as it was, the others land. Synopses of views and foreign tables
-- the role does not own are skipped with a WARNING. A cancel stops the whole call.
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
                '0.5.0'));
            n := n + 1;
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'pg_kde: could not refresh the synopsis of % of %: %', array_to_string(r.cols, ', '), r.relid, SQLERRM;
        END;
    END LOOP;
    RETURN n;
END
$$;
