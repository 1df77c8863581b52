-- pg_kde 0.9.0 -> 0.10.0: a count's interval (approx_count_ci) is widened by half a row on each side, the
-- continuity correction of the normal approximation to a whole number (where a range's expected rows are
-- below one, a second of a timestamp column, the interval now holds two rows for an estimate of 0.35). The
-- variance of a range inside one cell, which extension/range.c computes, changes with the library, not
-- here. Every function that names the version is replaced.
\echo Use "ALTER EXTENSION pg_kde UPDATE TO '0.10.0'" to load this file. \quit

CREATE OR REPLACE FUNCTION kde_refresh(tbl regclass, col text, method text DEFAULT 'auto', sample_size integer DEFAULT 50000,
                            grid_size integer DEFAULT NULL, backend text DEFAULT 'auto',
                            budget integer DEFAULT NULL) RETURNS jsonb
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@._kde_raise_if_error(
        @extschema@._kde_refresh(tbl::oid, ARRAY[col], method, sample_size, grid_size, backend, budget, '0.10.0'))
$$;

CREATE OR REPLACE FUNCTION kde_refresh(tbl regclass, cols text[], method text DEFAULT 'auto', sample_size integer DEFAULT 5000,
                            grid_size integer DEFAULT NULL, backend text DEFAULT 'auto',
                            budget integer DEFAULT NULL) RETURNS jsonb
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@._kde_raise_if_error(
        @extschema@._kde_refresh(tbl::oid, cols, method, sample_size, grid_size, backend, budget, '0.10.0'))
$$;

CREATE OR REPLACE FUNCTION kde_bandwidth(tbl regclass, cols text[], method text DEFAULT 'auto', backend text DEFAULT 'auto',
                              sample_size integer DEFAULT 10000) RETURNS float8[]
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT ARRAY(SELECT jsonb_array_elements_text(@extschema@._kde_raise_if_error(
        @extschema@._kde_bandwidth(tbl::oid, cols, method, backend, sample_size, '0.10.0')) -> 'bandwidth')::float8)
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
                '0.10.0'));
            n := n + 1;
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'pg_kde: could not refresh the synopsis of % of %: %', array_to_string(r.cols, ', '), r.relid, SQLERRM;
        END;
    END LOOP;
    RETURN n;
END
$$;

CREATE OR REPLACE FUNCTION _kde_interval(tbl regclass, col text, lo float8, hi float8, confidence float8, moment integer,
                              OUT estimate float8, OUT low float8, OUT high float8)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r record;
    half float8;
BEGIN
    IF confidence IS NULL OR NOT (confidence > 0 AND confidence < 1) THEN
        RAISE EXCEPTION 'confidence must be between 0 and 1 (exclusive), got %', confidence
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    r := @extschema@._kde_range(@extschema@._kde_synopsis_for(tbl, ARRAY[col]), lo, hi, moment);
    -- -quantile((1 - c) / 2), not quantile((1 + c) / 2): 1 + c rounds to 2 for c near 1.
    half := -@extschema@._kde_normal_quantile((1 - confidence) / 2) * sqrt(r.variance)
            + CASE WHEN moment = 0 THEN 0.5 ELSE 0 END;
    estimate := r.estimate;
    low := greatest(r.low, r.estimate - half);
    high := least(r.high, r.estimate + half);
END
$$;
COMMENT ON FUNCTION approx_count_ci(regclass, text, float8, float8, float8) IS
    'approx_count with an interval: heavy values and whole cells are exact; only the cells the range cuts are uncertain (estimate ± (z·sd + half a row) at the given confidence, within hard bounds that always hold the answer as of the build)';
