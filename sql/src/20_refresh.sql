-- ---------------------------------------------------------------------------------------------- refresh
-- The PL/Python entry points return {"error": {message, sqlstate, detail, hint}} for errors a user can fix,
-- raised here as one clean PostgreSQL error (no Python traceback in its context).
CREATE FUNCTION _kde_raise_if_error(result jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    e jsonb := result -> 'error';
    code text;
BEGIN
    IF e IS NULL THEN
        RETURN result;
    END IF;
    code := coalesce(e ->> 'sqlstate', 'P0001');
    IF e ->> 'hint' IS NULL AND e ->> 'detail' IS NULL THEN
        RAISE EXCEPTION USING MESSAGE = e ->> 'message', ERRCODE = code;
    ELSIF e ->> 'detail' IS NULL THEN
        RAISE EXCEPTION USING MESSAGE = e ->> 'message', ERRCODE = code, HINT = e ->> 'hint';
    ELSIF e ->> 'hint' IS NULL THEN
        RAISE EXCEPTION USING MESSAGE = e ->> 'message', ERRCODE = code, DETAIL = e ->> 'detail';
    END IF;
    RAISE EXCEPTION USING MESSAGE = e ->> 'message', ERRCODE = code, DETAIL = e ->> 'detail', HINT = e ->> 'hint';
END
$$;
COMMENT ON FUNCTION _kde_raise_if_error(jsonb) IS 'pg_kde internal: raise the error a PL/Python entry point returned';

-- The refresh's sample (extension/sample.c): each row kept with probability share by a hash of its ctid,
-- tableoid and the seed (the same rows for unchanged data, in any scan order), and the column's facts over every row
-- (non-NULL and non-finite values, min and max), in one parallel pass; a bytea state with a combine function.
CREATE FUNCTION _kde_sample_step(bytea, float8, tid, oid, float8, int8) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_sample_step_float8' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION _kde_sample_step(bytea, numeric, tid, oid, float8, int8) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_sample_step_numeric' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION _kde_sample_step(bytea, timestamptz, tid, oid, float8, int8) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_sample_step_timestamp' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION _kde_sample_step(bytea, timestamp, tid, oid, float8, int8) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_sample_step_timestamp' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION _kde_sample_step(bytea, date, tid, oid, float8, int8) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_sample_step_date' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION _kde_sample_combine(bytea, bytea) RETURNS bytea
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
CREATE FUNCTION _kde_float8(numeric) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_float8' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_float8(numeric) IS 'pg_kde internal: numeric to float8, as the cast, faster';
-- Whether the float8 of a numeric may stand for another numeric too (more than 15 significant digits, or a
-- magnitude float8 holds only as a subnormal or near its largest): the refresh's scan counts such rows, and a
-- synopsis that holds one treats rows on a bound's float8 as on either side of it (0.30.0, docs/math.md §7).
CREATE FUNCTION _kde_numeric_coarse(numeric) RETURNS boolean
AS 'MODULE_PATHNAME', 'kde_numeric_coarse_sql' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_numeric_coarse(numeric) IS 'pg_kde internal: whether float8 may not tell this numeric from another';
-- The refresh's scan (extension/cells.c): value, grid, candidates, quantum, and the cell values it keeps at each
-- end (0.31.0: the tail, 256 unless the build expects its cells to hold more rows and would keep each value).
CREATE FUNCTION _kde_cells_step(bytea, float8, float8[], float8[], float8, int4) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_cells_step_float8' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION _kde_cells_step(bytea, numeric, float8[], float8[], float8, int4) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_cells_step_numeric' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION _kde_cells_step(bytea, timestamptz, float8[], float8[], float8, int4) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_cells_step_timestamp' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION _kde_cells_step(bytea, timestamp, float8[], float8[], float8, int4) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_cells_step_timestamp' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION _kde_cells_step(bytea, date, float8[], float8[], float8, int4) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_cells_step_date' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION _kde_cells_combine(bytea, bytea) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_cells_combine' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE AGGREGATE _kde_cells(float8, float8[], float8[], float8, int4) (
    SFUNC = _kde_cells_step, STYPE = bytea, COMBINEFUNC = _kde_cells_combine, PARALLEL = SAFE);
CREATE AGGREGATE _kde_cells(numeric, float8[], float8[], float8, int4) (
    SFUNC = _kde_cells_step, STYPE = bytea, COMBINEFUNC = _kde_cells_combine, PARALLEL = SAFE);
CREATE AGGREGATE _kde_cells(timestamptz, float8[], float8[], float8, int4) (
    SFUNC = _kde_cells_step, STYPE = bytea, COMBINEFUNC = _kde_cells_combine, PARALLEL = SAFE);
CREATE AGGREGATE _kde_cells(timestamp, float8[], float8[], float8, int4) (
    SFUNC = _kde_cells_step, STYPE = bytea, COMBINEFUNC = _kde_cells_combine, PARALLEL = SAFE);
CREATE AGGREGATE _kde_cells(date, float8[], float8[], float8, int4) (
    SFUNC = _kde_cells_step, STYPE = bytea, COMBINEFUNC = _kde_cells_combine, PARALLEL = SAFE);
REVOKE EXECUTE ON FUNCTION _kde_cells_step(bytea, float8, float8[], float8[], float8, int4),
    _kde_cells_step(bytea, numeric, float8[], float8[], float8, int4), _kde_cells_step(bytea, timestamptz, float8[], float8[], float8, int4),
    _kde_cells_step(bytea, timestamp, float8[], float8[], float8, int4), _kde_cells_step(bytea, date, float8[], float8[], float8, int4),
    _kde_cells_combine(bytea, bytea) FROM PUBLIC;
COMMENT ON AGGREGATE _kde_cells(float8, float8[], float8[], float8, int4) IS 'pg_kde internal: the refresh''s scan of a column';
COMMENT ON AGGREGATE _kde_cells(numeric, float8[], float8[], float8, int4) IS 'pg_kde internal: the refresh''s scan of a column';
COMMENT ON AGGREGATE _kde_cells(timestamptz, float8[], float8[], float8, int4) IS 'pg_kde internal: the refresh''s scan of a column';
COMMENT ON AGGREGATE _kde_cells(timestamp, float8[], float8[], float8, int4) IS 'pg_kde internal: the refresh''s scan of a column';
COMMENT ON AGGREGATE _kde_cells(date, float8[], float8[], float8, int4) IS 'pg_kde internal: the refresh''s scan of a column';

-- A value of any type the scans take as they read it: _kde_float8's float8 of a numeric, a float8 itself, a
-- time's epoch seconds (a timestamp's or a date's wall-clock time as UTC).
CREATE FUNCTION _kde_value(numeric) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_float8' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION _kde_value(float8) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_float8_float8' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION _kde_value(timestamptz) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_float8_timestamp' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION _kde_value(timestamp) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_float8_timestamp' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION _kde_value(date) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_float8_date' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_value(numeric) IS 'pg_kde internal: a value as the scans read it';
COMMENT ON FUNCTION _kde_value(float8) IS 'pg_kde internal: a value as the scans read it';
COMMENT ON FUNCTION _kde_value(timestamptz) IS 'pg_kde internal: epoch seconds, as the scans read them';
COMMENT ON FUNCTION _kde_value(timestamp) IS 'pg_kde internal: epoch seconds, as the scans read them';
COMMENT ON FUNCTION _kde_value(date) IS 'pg_kde internal: epoch seconds, as the scans read them';

-- A scan that reads a column at a power-of-two scale below 1 (values near float8's largest, whose sums must stay
-- finite) would round a nonzero value below 2^-1022 / scale, whose product is subnormal: it calls this instead,
-- which says so (0.27.0; 0.26.0 stored such values rounded, or PostgreSQL's product raised "value out of range:
-- underflow" where they rounded to 0).
CREATE FUNCTION _kde_scale_loses(x float8, scale float8) RETURNS float8
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'pg_kde: the column holds % beside values near float8''s largest, which a synopsis reads at the scale % that would round it', x, scale
        USING ERRCODE = 'numeric_value_out_of_range',
              HINT = 'A synopsis keeps values within 2^1982 of each other in magnitude: exclude the tiny (or huge) values, e.g. through a view.';
END
$$;
COMMENT ON FUNCTION _kde_scale_loses(float8, float8) IS 'pg_kde internal: a value a scaled scan would round';

-- The 2-D refresh's scan (extension/cells2.c): per cell of two grids' product, its rows, the exact sums of its
-- values in whole quanta of each axis and the sums of their offsets in the cell (t1, t2, t1 t2, in units of
-- 2^-60); per cell of each axis the min and max of its values; the pair's facts; and, given each row's ctid
-- and table, a share and a seed, the repeatable row sample of pairs _kde_sample's hash keeps. A bytea state
-- with a combine function, as _kde_cells'.
CREATE FUNCTION _kde_cells2_step(bytea, float8, float8, float8[], float8[], float8, float8, tid, oid, float8, int8)
RETURNS bytea AS 'MODULE_PATHNAME', 'kde_cells2_step' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION _kde_cells2_combine(bytea, bytea) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_cells2_combine' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE AGGREGATE _kde_cells2(float8, float8, float8[], float8[], float8, float8, tid, oid, float8, int8) (
    SFUNC = _kde_cells2_step, STYPE = bytea, COMBINEFUNC = _kde_cells2_combine, PARALLEL = SAFE);
REVOKE EXECUTE ON FUNCTION _kde_cells2_step(bytea, float8, float8, float8[], float8[], float8, float8, tid, oid, float8, int8),
    _kde_cells2_combine(bytea, bytea) FROM PUBLIC;
COMMENT ON AGGREGATE _kde_cells2(float8, float8, float8[], float8[], float8, float8, tid, oid, float8, int8) IS 'pg_kde internal: the refresh''s scan of a pair of columns';

-- The shards' states of a Citus table's scan, combined on the coordinator in the order given (0.14.0;
-- kde_parts): the aggregates' own combine functions, each of which checks every state it takes (its header,
-- sizes and version) and refuses states of different grids, candidates, quanta or tails.
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
    _kde_cells_step(bytea, float8, float8[], float8[], float8, int4),
    _kde_cells_step(bytea, numeric, float8[], float8[], float8, int4), _kde_cells_step(bytea, timestamptz, float8[], float8[], float8, int4),
    _kde_cells_step(bytea, timestamp, float8[], float8[], float8, int4), _kde_cells_step(bytea, date, float8[], float8[], float8, int4),
    _kde_cells_combine(bytea, bytea),
    _kde_cells2_step(bytea, float8, float8, float8[], float8[], float8, float8, tid, oid, float8, int8),
    _kde_cells2_combine(bytea, bytea) TO PUBLIC;

-- A time column's periodic profile, counted in the same scan (0.16.0; extension/profile.c): per bin of the
-- period, the finite values whose phase ((v + shift) mod period) / period falls in it. The build takes the
-- heavy values' rows out and stores the profile of every other row. Its support functions are executable by
-- every role, as the scan's are (0.14.0, for Citus); each checks the states it takes.
CREATE FUNCTION _kde_phases_step(bytea, timestamptz, float8, int4, float8) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_phases_step_timestamp' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION _kde_phases_step(bytea, timestamp, float8, int4, float8) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_phases_step_timestamp' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION _kde_phases_step(bytea, date, float8, int4, float8) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_phases_step_date' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION _kde_phases_combine(bytea, bytea) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_phases_combine' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE AGGREGATE _kde_phases(timestamptz, float8, int4, float8) (
    SFUNC = _kde_phases_step, STYPE = bytea, COMBINEFUNC = _kde_phases_combine, PARALLEL = SAFE);
CREATE AGGREGATE _kde_phases(timestamp, float8, int4, float8) (
    SFUNC = _kde_phases_step, STYPE = bytea, COMBINEFUNC = _kde_phases_combine, PARALLEL = SAFE);
CREATE AGGREGATE _kde_phases(date, float8, int4, float8) (
    SFUNC = _kde_phases_step, STYPE = bytea, COMBINEFUNC = _kde_phases_combine, PARALLEL = SAFE);
CREATE AGGREGATE _kde_phases_union(bytea) (SFUNC = _kde_phases_combine, STYPE = bytea);
COMMENT ON AGGREGATE _kde_phases(timestamptz, float8, int4, float8) IS 'pg_kde internal: the refresh''s count of a time column''s periodic profile';
COMMENT ON AGGREGATE _kde_phases(timestamp, float8, int4, float8) IS 'pg_kde internal: the refresh''s count of a time column''s periodic profile';
COMMENT ON AGGREGATE _kde_phases(date, float8, int4, float8) IS 'pg_kde internal: the refresh''s count of a time column''s periodic profile';
COMMENT ON AGGREGATE _kde_phases_union(bytea) IS 'pg_kde internal: the shards'' _kde_phases states, combined';
GRANT EXECUTE ON FUNCTION _kde_phases_step(bytea, timestamptz, float8, int4, float8),
    _kde_phases_step(bytea, timestamp, float8, int4, float8), _kde_phases_step(bytea, date, float8, int4, float8),
    _kde_phases_combine(bytea, bytea) TO PUBLIC;

CREATE FUNCTION _kde_refresh(relid oid, cols text[], method text, sample_size integer, grid_size integer,
                             backend text, budget integer, extversion text) RETURNS jsonb
LANGUAGE plpython3u VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
from pg_kde import sql_entry
return sql_entry.refresh(plpy, GD, relid, cols, method, sample_size, grid_size, backend, budget, extversion)
$$;
COMMENT ON FUNCTION _kde_refresh(oid, text[], text, integer, integer, text, integer, text) IS 'pg_kde internal: build a synopsis';

-- budget: bytes the synopsis may take (its catalog rows, as pg_column_size counts them); NULL: 8192 for one
-- column, 65536 for a pair. grid_size (points per axis), when given, sets the grid instead.
CREATE FUNCTION kde_refresh(tbl regclass, col text, method text DEFAULT 'auto', sample_size integer DEFAULT 50000,
                            grid_size integer DEFAULT NULL, backend text DEFAULT 'auto',
                            budget integer DEFAULT NULL) RETURNS jsonb
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@._kde_raise_if_error(
        @extschema@._kde_refresh(tbl::oid, ARRAY[col], method, sample_size, grid_size, backend, budget, '@PG_KDE_VERSION@'))
$$;
COMMENT ON FUNCTION kde_refresh(regclass, text, text, integer, integer, text, integer) IS
    'Build or rebuild the synopsis of one numeric, date or timestamp column within budget bytes (default 8192; method: auto = plugin_cdf | plugin | lscv_h | lscv_H | normal_reference); returns a summary';

CREATE FUNCTION kde_refresh(tbl regclass, cols text[], method text DEFAULT 'auto', sample_size integer DEFAULT 5000,
                            grid_size integer DEFAULT NULL, backend text DEFAULT 'auto',
                            budget integer DEFAULT NULL) RETURNS jsonb
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@._kde_raise_if_error(
        @extschema@._kde_refresh(tbl::oid, cols, method, sample_size, grid_size, backend, budget, '@PG_KDE_VERSION@'))
$$;
COMMENT ON FUNCTION kde_refresh(regclass, text[], text, integer, integer, text, integer) IS
    'Build or rebuild the synopsis of one column or, with two, of a pair within budget bytes (default 8192 and 65536; method: auto = lscv_H for a pair); returns a summary';

CREATE FUNCTION _kde_bandwidth(relid oid, cols text[], method text, backend text, sample_size integer,
                               extversion text) RETURNS jsonb
LANGUAGE plpython3u VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
from pg_kde import sql_entry
return sql_entry.choose_bandwidth(plpy, GD, relid, cols, method, backend, sample_size, extversion)
$$;
COMMENT ON FUNCTION _kde_bandwidth(oid, text[], text, text, integer, text) IS 'pg_kde internal: bandwidth of a sample';

CREATE FUNCTION kde_bandwidth(tbl regclass, cols text[], method text DEFAULT 'auto', backend text DEFAULT 'auto',
                              sample_size integer DEFAULT 10000) RETURNS float8[]
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT ARRAY(SELECT jsonb_array_elements_text(@extschema@._kde_raise_if_error(
        @extschema@._kde_bandwidth(tbl::oid, cols, method, backend, sample_size, '@PG_KDE_VERSION@')) -> 'bandwidth')::float8)
$$;
COMMENT ON FUNCTION kde_bandwidth(regclass, text[], text, text, integer) IS
    'Bandwidth of a sample of rows with all columns non-NULL: {h} for one column (data units), else H row-major';

CREATE FUNCTION kde_bandwidth(tbl regclass, col text, method text DEFAULT 'auto', backend text DEFAULT 'auto',
                              sample_size integer DEFAULT 10000) RETURNS float8[]
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.kde_bandwidth(tbl, ARRAY[col], method, backend, sample_size) $$;
COMMENT ON FUNCTION kde_bandwidth(regclass, text, text, text, integer) IS
    'Bandwidth h (data units) of a sample of one column''s non-NULL values';
