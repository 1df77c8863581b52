-- pg_kde 0.15.0 -> 0.16.0: a time column's periodic profile is counted over every row in the refresh's scan
-- (the aggregate _kde_phases and its union for Citus shards), not from the row sample (docs/math.md §7).
-- Synopses built before keep their sampled profiles until their next refresh. A point's count interval stays
-- about its lattice slot's expected rows while its estimate is the rows of a value the column holds
-- (_kde_interval). Every function that names the version is replaced.
\echo Use "ALTER EXTENSION pg_kde UPDATE TO '0.16.0'" to load this file. \quit

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

CREATE OR REPLACE FUNCTION _kde_interval(tbl regclass, col text, lo float8, hi float8, confidence float8, moment integer,
                              OUT estimate float8, OUT low float8, OUT high float8)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    z float8 := @extschema@._kde_z(confidence);
    s @extschema@.kde_synopsis;
    r record;
    centre float8;
    half float8;
BEGIN
    s := @extschema@._kde_synopsis_for(tbl, ARRAY[col]);
    r := @extschema@._kde_range(s, lo, hi, moment);
    centre := r.estimate;
    IF moment = 0 AND lo = hi AND s.step > 0 AND r.low < r.high THEN
        -- A point's count estimates the rows of a value the column holds; its interval stays about the rows
        -- its lattice slot's cells expect (the slot asked as a range), with half a row each side (0.16.0;
        -- query.interval_1d).
        centre := (@extschema@._kde_range(s, lo, lo + s.step / 4, 0)).estimate;
    END IF;
    half := z * sqrt(r.variance) + CASE WHEN moment = 0 AND lo = hi THEN 0.5 ELSE 0 END;
    estimate := r.estimate;
    low := least(greatest(r.low, centre - half), r.estimate);
    high := greatest(least(r.high, centre + half), r.estimate);
END
$$;

CREATE OR REPLACE FUNCTION kde_refresh(tbl regclass, col text, method text DEFAULT 'auto', sample_size integer DEFAULT 50000,
                            grid_size integer DEFAULT NULL, backend text DEFAULT 'auto',
                            budget integer DEFAULT NULL) RETURNS jsonb
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@._kde_raise_if_error(
        @extschema@._kde_refresh(tbl::oid, ARRAY[col], method, sample_size, grid_size, backend, budget, '0.16.0'))
$$;

CREATE OR REPLACE FUNCTION kde_refresh(tbl regclass, cols text[], method text DEFAULT 'auto', sample_size integer DEFAULT 5000,
                            grid_size integer DEFAULT NULL, backend text DEFAULT 'auto',
                            budget integer DEFAULT NULL) RETURNS jsonb
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@._kde_raise_if_error(
        @extschema@._kde_refresh(tbl::oid, cols, method, sample_size, grid_size, backend, budget, '0.16.0'))
$$;

CREATE OR REPLACE FUNCTION kde_bandwidth(tbl regclass, cols text[], method text DEFAULT 'auto', backend text DEFAULT 'auto',
                              sample_size integer DEFAULT 10000) RETURNS float8[]
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT ARRAY(SELECT jsonb_array_elements_text(@extschema@._kde_raise_if_error(
        @extschema@._kde_bandwidth(tbl::oid, cols, method, backend, sample_size, '0.16.0')) -> 'bandwidth')::float8)
$$;

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
                '0.16.0'));
            n := n + 1;
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'pg_kde: could not refresh the synopsis of % of %: %', array_to_string(r.cols, ', '), r.relid, SQLERRM;
        END;
    END LOOP;
    RETURN n;
END
$$;
