-- pg_kde 0.4.0 -> 0.5.0: the refresh reads a column in one parallel pass of a C aggregate (_kde_cells, in
-- the extension's library, with _kde_float8); every function that names the version is replaced.
\echo Use "ALTER EXTENSION pg_kde UPDATE TO '0.5.0'" to load this file. \quit

-- The refresh's one scan (extension/cells.c): per cell of a grid, its rows and the exact sum of its values in
-- whole quanta; per candidate heavy value, its rows; and the column's facts. Parallel safe with combine,
-- serialize and deserialize functions: PostgreSQL's parallel query runs it on every core, and the states of
-- parts of a table merge with the same combine. Time columns are read as epoch seconds, as
-- extract(epoch from ...)::float8 reads them (a timestamp's or a date's wall-clock time as UTC).
-- A numeric column is read as _kde_float8 reads it: the same float8 as numeric's own cast, without its text.
CREATE OR REPLACE FUNCTION _kde_float8(numeric) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_float8' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_float8(numeric) IS 'pg_kde internal: numeric to float8, as the cast, faster';
CREATE OR REPLACE FUNCTION _kde_cells_step(internal, float8, float8[], float8[], float8) RETURNS internal
AS 'MODULE_PATHNAME', 'kde_cells_step_float8' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION _kde_cells_step(internal, numeric, float8[], float8[], float8) RETURNS internal
AS 'MODULE_PATHNAME', 'kde_cells_step_numeric' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION _kde_cells_step(internal, timestamptz, float8[], float8[], float8) RETURNS internal
AS 'MODULE_PATHNAME', 'kde_cells_step_timestamp' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION _kde_cells_step(internal, timestamp, float8[], float8[], float8) RETURNS internal
AS 'MODULE_PATHNAME', 'kde_cells_step_timestamp' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION _kde_cells_step(internal, date, float8[], float8[], float8) RETURNS internal
AS 'MODULE_PATHNAME', 'kde_cells_step_date' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION _kde_cells_combine(internal, internal) RETURNS internal
AS 'MODULE_PATHNAME', 'kde_cells_combine' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION _kde_cells_serialize(internal) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_cells_serialize' LANGUAGE C STRICT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION _kde_cells_deserialize(bytea, internal) RETURNS internal
AS 'MODULE_PATHNAME', 'kde_cells_deserialize' LANGUAGE C STRICT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION _kde_cells_final(internal) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_cells_final' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE AGGREGATE _kde_cells(float8, float8[], float8[], float8) (
    SFUNC = _kde_cells_step, STYPE = internal, FINALFUNC = _kde_cells_final, COMBINEFUNC = _kde_cells_combine,
    SERIALFUNC = _kde_cells_serialize, DESERIALFUNC = _kde_cells_deserialize, PARALLEL = SAFE);
CREATE AGGREGATE _kde_cells(numeric, float8[], float8[], float8) (
    SFUNC = _kde_cells_step, STYPE = internal, FINALFUNC = _kde_cells_final, COMBINEFUNC = _kde_cells_combine,
    SERIALFUNC = _kde_cells_serialize, DESERIALFUNC = _kde_cells_deserialize, PARALLEL = SAFE);
CREATE AGGREGATE _kde_cells(timestamptz, float8[], float8[], float8) (
    SFUNC = _kde_cells_step, STYPE = internal, FINALFUNC = _kde_cells_final, COMBINEFUNC = _kde_cells_combine,
    SERIALFUNC = _kde_cells_serialize, DESERIALFUNC = _kde_cells_deserialize, PARALLEL = SAFE);
CREATE AGGREGATE _kde_cells(timestamp, float8[], float8[], float8) (
    SFUNC = _kde_cells_step, STYPE = internal, FINALFUNC = _kde_cells_final, COMBINEFUNC = _kde_cells_combine,
    SERIALFUNC = _kde_cells_serialize, DESERIALFUNC = _kde_cells_deserialize, PARALLEL = SAFE);
CREATE AGGREGATE _kde_cells(date, float8[], float8[], float8) (
    SFUNC = _kde_cells_step, STYPE = internal, FINALFUNC = _kde_cells_final, COMBINEFUNC = _kde_cells_combine,
    SERIALFUNC = _kde_cells_serialize, DESERIALFUNC = _kde_cells_deserialize, PARALLEL = SAFE);
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
        IF r.relkind NOT IN ('r', 'p', 'm') AND NOT r.owned THEN
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
