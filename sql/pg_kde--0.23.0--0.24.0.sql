-- pg_kde 0.23.0 -> 0.24.0: a cut cell's hard bounds on a lattice know that its rows sit on its slots, none on
-- the slots of whole heavy values at its ends (_kde_range in the library), and a point's interval on a lattice
-- takes the law of a value drawn from the rows within its cut cell, 1 + Binomial(n - 1, lambda / n)
-- (_kde_held_interval, _kde_interval; docs/math.md §7). No table changes; every function that names the
-- version is replaced.
\echo Use "ALTER EXTENSION pg_kde UPDATE TO '0.24.0'" to load this file. \quit

CREATE OR REPLACE FUNCTION kde_refresh(tbl regclass, col text, method text DEFAULT 'auto', sample_size integer DEFAULT 50000,
                            grid_size integer DEFAULT NULL, backend text DEFAULT 'auto',
                            budget integer DEFAULT NULL) RETURNS jsonb
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@._kde_raise_if_error(
        @extschema@._kde_refresh(tbl::oid, ARRAY[col], method, sample_size, grid_size, backend, budget, '0.24.0'))
$$;

CREATE OR REPLACE FUNCTION kde_refresh(tbl regclass, cols text[], method text DEFAULT 'auto', sample_size integer DEFAULT 5000,
                            grid_size integer DEFAULT NULL, backend text DEFAULT 'auto',
                            budget integer DEFAULT NULL) RETURNS jsonb
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@._kde_raise_if_error(
        @extschema@._kde_refresh(tbl::oid, cols, method, sample_size, grid_size, backend, budget, '0.24.0'))
$$;

CREATE OR REPLACE FUNCTION kde_bandwidth(tbl regclass, cols text[], method text DEFAULT 'auto', backend text DEFAULT 'auto',
                              sample_size integer DEFAULT 10000) RETURNS float8[]
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT ARRAY(SELECT jsonb_array_elements_text(@extschema@._kde_raise_if_error(
        @extschema@._kde_bandwidth(tbl::oid, cols, method, backend, sample_size, '0.24.0')) -> 'bandwidth')::float8)
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
                '0.24.0'));
            n := n + 1;
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'pg_kde: could not refresh the synopsis of % of %: %', array_to_string(r.cols, ', '), r.relid, SQLERRM;
        END;
    END LOOP;
    RETURN n;
END
$$;

-- the point's law now takes its cut cell's rows (0.19.0-0.23.0: 1 + Poisson(lambda))
DROP FUNCTION _kde_held_interval(float8, float8);

-- The whole counts a point's interval holds where its lattice slot's cells expect lambda rows (0 <= lambda < 10)
-- of its cut cell's rows, as half-rows about them: a value asked about because a row holds it has that row and
-- each of the cell's rows - 1 others there with chance lambda / rows, 1 + Binomial(rows - 1, lambda / rows)
-- rows (0.24.0; 1 + Poisson(lambda) in 0.19.0-0.23.0); its likeliest counts are taken from the law's mode
-- outward, the likelier neighbour first, until their chance reaches the confidence, and the last one is left
-- out again where the chance without it is nearer the confidence (never the mode). query.held_interval, step
-- for step; docs/math.md §7, "Points".
CREATE FUNCTION _kde_held_interval(lambda float8, rows float8, confidence float8, OUT low float8, OUT high float8)
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p float8[];  -- p[j + 1] = P(Binomial(others, share) = j), up to the mode, then as the counts are taken
    others float8;  -- the cell's other rows
    share float8;
    odds float8;
    more boolean;  -- whether the law goes on past the last count computed
    a integer;
    b integer;
    chance float8;
    kept_a integer;
    kept_b integer;
    kept float8;
BEGIN
    lambda := greatest(lambda, 0);
    others := greatest(rows - 1, 0);
    share := CASE WHEN rows > 0 THEN least(lambda / rows, 1) ELSE 0 END;
    IF share >= 1 OR others = 0 THEN  -- (every other row there, or none: one count)
        low := others * share + 0.5;
        high := others * share + 1.5;
        RETURN;
    END IF;
    odds := share / (1 - share);
    a := least(floor(lambda), floor(others))::integer;  -- the mode, at most others
    b := a;
    p := ARRAY[exp(others * ln(1 - share))];
    WHILE cardinality(p) <= a LOOP
        p := p || p[cardinality(p)] * (others - (cardinality(p) - 1)) / cardinality(p) * odds;
    END LOOP;
    chance := p[a + 1];
    LOOP
        -- counts j = 0 .. min(64, others) (query.HELD_LAW_COUNTS), none past a chance below 1e-150
        -- (HELD_LAW_FLOOR), nor where lambda is below it: float8's product raises an error where it underflows
        more := cardinality(p) <= least(64, others) AND p[cardinality(p)] >= 1e-150 AND lambda >= 1e-150;
        EXIT WHEN NOT (chance < confidence AND (a > 0 OR b + 1 < cardinality(p) OR more));
        kept_a := a;
        kept_b := b;
        kept := chance;
        IF b + 1 = cardinality(p) AND more THEN
            p := p || p[cardinality(p)] * (others - (cardinality(p) - 1)) / cardinality(p) * odds;
        END IF;
        IF b + 1 < cardinality(p) AND (a = 0 OR p[b + 2] > p[a]) THEN
            b := b + 1;
            chance := chance + p[b + 1];
        ELSE
            a := a - 1;
            chance := chance + p[a + 1];
        END IF;
    END LOOP;
    IF kept IS NOT NULL AND confidence - kept < chance - confidence THEN
        a := kept_a;
        b := kept_b;
    END IF;
    low := a + 0.5;
    high := b + 1.5;
END
$$;
COMMENT ON FUNCTION _kde_held_interval(float8, float8, float8) IS 'pg_kde internal: the whole counts of a point''s interval';

-- An interval at the given confidence: estimate ± z sqrt(variance), never outside the hard bounds (which
-- always hold the answer of the table as of the build); a point query's count (lo = hi) has half a row more
-- each side, for the value's own rows (query.COUNT_CONTINUITY, 0.15.0; up to 0.14.0 every count's had), and
-- on a lattice, where it is not exact, the law of a value a row holds instead: 1 + Binomial(n - 1, lambda / n),
-- its slot's cells expecting lambda rows of its cut cell's n; below 10 its likeliest whole counts
-- (_kde_held_interval, 0.19.0), from there z standard deviations about its mean (0.24.0). Widened to hold
-- the estimate. docs/math.md §7.
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
    -- within the hard bounds, widened to hold the estimate (query.within_bounds)
    estimate := r.estimate;
    low := least(greatest(r.low, low), r.estimate);
    high := greatest(least(r.high, high), r.estimate);
END
$$;
COMMENT ON FUNCTION _kde_interval(regclass, text, float8, float8, float8, integer) IS 'pg_kde internal: an interval';
