-- pg_kde 0.26.0 -> 0.27.0: a sum's hard bounds hold its exact answer where float8 rounding had put them a
-- float8 inside it or lost a small value's rows beside a large one (the heavy values' sum from their values and
-- counts, correctly rounded, in the library's _kde_range), and an interval has zero width only where its hard
-- bounds do (_kde_interval); a value a scaled scan would round is a clear error (_kde_scale_loses). No table
-- changes; synopses stored before are read as before. Every function that names the version is replaced.
\echo Use "ALTER EXTENSION pg_kde UPDATE TO '0.27.0'" to load this file. \quit

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

CREATE OR REPLACE FUNCTION _kde_interval(tbl regclass, col text, lo float8, hi float8, confidence float8, moment integer,
                              OUT estimate float8, OUT low float8, OUT high float8)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    z float8 := @extschema@._kde_z(confidence);
    s @extschema@.kde_synopsis;
    r record;
    held record;
    slot boolean;  -- a point's count on a lattice, not exact
    centre float8;
    half float8;
    cell integer;
    rows float8;  -- the rows of the point's cut cell
BEGIN
    s := @extschema@._kde_synopsis_for(tbl, ARRAY[col]);
    r := @extschema@._kde_range(s, lo, hi, moment);
    slot := coalesce(moment = 0 AND lo = hi AND s.step > 0 AND r.low < r.high, false);
    centre := r.estimate;
    IF slot THEN
        -- A point's count estimates the rows of a value the column holds; its slot's cells expect centre rows
        -- there (the slot asked as a range) of its cut cell's rows (query.cell_of: grid[k] <= lo < grid[k + 1],
        -- the outer cells what lies beyond). Below 10 (query.HELD_MEDIAN_BELOW) its interval holds the whole
        -- counts of 1 + Binomial(rows - 1, centre / rows) (0.19.0, the binomial 0.24.0); from there it lies
        -- about that law's mean, centre + 1 - centre / rows, z standard deviations each side (0.24.0;
        -- query.interval_1d).
        centre := (@extschema@._kde_range(s, lo, lo + s.step / 4, 0)).estimate;
        cell := least(greatest(width_bucket(lo, s.grid), 1), cardinality(s.grid) - 1);
        rows := s.cell_cum_count[cell + 1] - s.cell_cum_count[cell];
    END IF;
    IF slot AND centre < 10 THEN
        held := @extschema@._kde_held_interval(centre, rows, confidence);
        low := held.low;
        high := held.high;
    ELSIF slot THEN
        half := z * sqrt(r.variance);
        centre := centre + 1 - centre / rows;
        low := centre - half;
        high := centre + half;
    ELSE
        half := z * sqrt(r.variance) + CASE WHEN moment = 0 AND lo = hi THEN 0.5 ELSE 0 END;
        low := centre - half;
        high := centre + half;
    END IF;
    -- within the hard bounds, widened to hold the estimate (query.within_bounds); zero width only where the
    -- hard bounds are (0.27.0: a sum over whole cells has no variance, but its stored sums' rounding leaves
    -- it within its hard bounds, not on its estimate)
    estimate := r.estimate;
    low := least(greatest(r.low, low), r.estimate);
    high := greatest(least(r.high, high), r.estimate);
    IF low = high AND r.low < r.high THEN
        low := r.low;
        high := r.high;
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION kde_refresh(tbl regclass, col text, method text DEFAULT 'auto', sample_size integer DEFAULT 50000,
                            grid_size integer DEFAULT NULL, backend text DEFAULT 'auto',
                            budget integer DEFAULT NULL) RETURNS jsonb
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@._kde_raise_if_error(
        @extschema@._kde_refresh(tbl::oid, ARRAY[col], method, sample_size, grid_size, backend, budget, '0.27.0'))
$$;

CREATE OR REPLACE FUNCTION kde_refresh(tbl regclass, cols text[], method text DEFAULT 'auto', sample_size integer DEFAULT 5000,
                            grid_size integer DEFAULT NULL, backend text DEFAULT 'auto',
                            budget integer DEFAULT NULL) RETURNS jsonb
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@._kde_raise_if_error(
        @extschema@._kde_refresh(tbl::oid, cols, method, sample_size, grid_size, backend, budget, '0.27.0'))
$$;

CREATE OR REPLACE FUNCTION kde_bandwidth(tbl regclass, cols text[], method text DEFAULT 'auto', backend text DEFAULT 'auto',
                              sample_size integer DEFAULT 10000) RETURNS float8[]
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT ARRAY(SELECT jsonb_array_elements_text(@extschema@._kde_raise_if_error(
        @extschema@._kde_bandwidth(tbl::oid, cols, method, backend, sample_size, '0.27.0')) -> 'bandwidth')::float8)
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
                '0.27.0'));
            n := n + 1;
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'pg_kde: could not refresh the synopsis of % of %: %', array_to_string(r.cols, ', '), r.relid, SQLERRM;
        END;
    END LOOP;
    RETURN n;
END
$$;
