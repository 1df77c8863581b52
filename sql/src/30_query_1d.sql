-- ---------------------------------------------------------------------------------------------- queries
-- The synopsis of (tbl, cols), after checking the caller may read the columns and every row, and that the
-- synopsis still describes those columns; a clear error otherwise. Identity comes from the header row
-- (kde_catalog), the maths from the payload (kde_synopsis).
CREATE FUNCTION _kde_synopsis_for(tbl regclass, cols text[]) RETURNS kde_synopsis
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s @extschema@.kde_synopsis;
    r record;
    h record;
BEGIN
    -- One lookup on the hot path: the relation, the column and the catalog row together; the checks of
    -- _kde_columns in the same order (it raises the errors, so the messages are the same).
    SELECT has_schema_privilege(c.relnamespace, 'USAGE') AS usable, a.attnum,
           format_type(a.atttypid, a.atttypmod) AS type, has_column_privilege(tbl, a.attnum, 'SELECT') AS readable,
           row_security_active(tbl) OR ((c.relkind IN ('v', 'f', 'p') OR c.relhassubclass)
                                        AND @extschema@._kde_rows_hidden(tbl)) AS hidden INTO r
    FROM pg_class c
    LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = cols[1] AND a.attnum > 0 AND NOT a.attisdropped
    WHERE c.oid = tbl AND cardinality(cols) = 1;
    IF NOT FOUND OR NOT r.usable OR r.attnum IS NULL OR NOT r.readable OR r.hidden THEN
        PERFORM @extschema@._kde_columns(tbl, cols);
    END IF;
    SELECT k.built_relid, k.attnums, k.coltypes INTO h
    FROM @extschema@.kde_catalog k WHERE k.relid = tbl AND k.cols = _kde_synopsis_for.cols;
    IF FOUND THEN
        SELECT * INTO s FROM @extschema@.kde_synopsis p WHERE p.relid = tbl AND p.cols = _kde_synopsis_for.cols;
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no pg_kde synopsis for column % of %', array_to_string(cols, ', '), tbl
            USING ERRCODE = 'undefined_object',
                  HINT = format('Build it with: SELECT @extschema@.kde_refresh(%L, %L);', tbl::text, cols[1]);
    END IF;
    IF h.coltypes IS DISTINCT FROM ARRAY[r.type] OR (h.built_relid = tbl::oid AND h.attnums IS DISTINCT FROM ARRAY[r.attnum]) THEN
        PERFORM @extschema@._kde_check_identity(tbl, cols, h.built_relid, h.attnums, h.coltypes, ARRAY[r.attnum], ARRAY[r.type]);
    END IF;
    RETURN s;
END
$$;
COMMENT ON FUNCTION _kde_synopsis_for(regclass, text[]) IS 'pg_kde internal: the synopsis row, privilege-checked';

-- Fractional grid-index coordinate of x on a grid (0 at grid[1], cardinality - 1 at the last point).
CREATE FUNCTION _kde_grid_pos(grid float8[], x float8) RETURNS float8
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    m integer := cardinality(grid);
    k integer;
    p float8;
BEGIN
    IF abs(x) < 2.2250738585072014e-308 THEN
        x := 0;  -- a subnormal bound reads as 0 (no grid point is subnormal; x / 2 would underflow)
    END IF;
    IF x <= grid[1] THEN
        RETURN 0;
    ELSIF x >= grid[m] THEN
        RETURN m - 1;
    END IF;
    k := width_bucket(x, grid);
    -- A bound within two ulps of a grid point is on it (a lattice's midpoint rounds as (a + b) / 2 or
    -- a / 2 + b / 2); not one within 1e-9 of a cell's width, which in a cell 1e12 wide is 1000 values away.
    -- (halves: no difference of values near the ends of float8 overflows; 1e-290: no product underflows)
    IF x = grid[k] OR (abs(grid[k]) > 1e-290 AND abs(x / 2 - grid[k] / 2) <= 2.25e-16 * abs(grid[k])) THEN
        RETURN k - 1;
    ELSIF abs(grid[k + 1]) > 1e-290 AND abs(grid[k + 1] / 2 - x / 2) <= 2.25e-16 * abs(grid[k + 1]) THEN
        RETURN k;
    END IF;
    -- Halves first: differences of values near the ends of float8 would overflow.
    p := (k - 1) + (x / 2 - grid[k] / 2) / (grid[k + 1] / 2 - grid[k] / 2);
    RETURN p;
END
$$;
COMMENT ON FUNCTION _kde_grid_pos(float8[], float8) IS 'pg_kde internal: position on a grid';

-- The position of an upper bound (0.9.0): _kde_grid_pos, and past a heavy value's cell of its own on a 2-D
-- continuous axis ([v, next float): one ulp wide, or [0, smallest normal)) when x is at least v on its
-- start: x <= v holds the rows at v, which the half-open cell starting at v keeps.
-- (pg_kde.synopsis.query.upper_pos and maths.is_tie_cell, as written here)
CREATE FUNCTION _kde_upper_pos(grid float8[], x float8) RETURNS float8
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p float8 := @extschema@._kde_grid_pos(grid, x);
    k integer;
BEGIN
    IF p = floor(p) AND p < cardinality(grid) - 1 THEN
        k := p::integer + 1;  -- grid[k] is the point at p
        IF x >= grid[k] AND (grid[k + 1] - grid[k] <= abs(grid[k]) * 2.220446049250313e-16
                             OR (grid[k] = 0 AND grid[k + 1] <= 2.2250738585072014e-308)) THEN
            RETURN p + 1;
        END IF;
    END IF;
    RETURN p;
END
$$;
COMMENT ON FUNCTION _kde_upper_pos(float8[], float8) IS 'pg_kde internal: position of an upper bound on a grid';

-- A bound moved onto a discretised axis's lattice: the midpoint just below the smallest value >= x (lower
-- bound) or just above the largest value <= x (upper bound); the grid's points are those midpoints, so
-- every value's rows stay whole. Beyond the ends: the grid's ends.
CREATE FUNCTION _kde_lattice_bound(lattice float8[], grid float8[], x float8, upper boolean) RETURNS float8
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    m integer := cardinality(lattice);
    k integer := width_bucket(x, lattice);  -- values <= x
BEGIN
    IF NOT upper AND k > 0 AND lattice[k] = x THEN
        k := k - 1;  -- values < x
    END IF;
    IF k = 0 THEN
        RETURN grid[1];
    ELSIF k = m THEN
        RETURN grid[cardinality(grid)];
    END IF;
    RETURN lattice[k] / 2 + lattice[k + 1] / 2;
END
$$;
COMMENT ON FUNCTION _kde_lattice_bound(float8[], float8[], float8, boolean) IS 'pg_kde internal: snap a bound';

-- The share of a cut cell [g0, g1]'s rows between fractions t0 <= t1 of the cell, their mean position there,
-- and the variance of the share's error from the profile's own sample (per unit of share (1 - share)), under
-- the periodic profile of a time column tilted to the cell's exact mean position (extension/profile.c; its
-- float64 reference is pg_kde.synopsis.cells.profile_cut): the profile's mass and first two moments about the
-- cell's start (whole periods in closed form, the rest bin by bin), of x + step/2 (a lattice value's rows
-- sit in the bin of its half-steps). docs/math.md §7.
CREATE FUNCTION _kde_profile_cut(profile float4[], period float8, step float8, g0 float8, g1 float8, t0 float8,
                                 t1 float8, mean float8, OUT share float8, OUT pos float8, OUT doubt float8)
AS 'MODULE_PATHNAME', 'kde_profile_cut' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_profile_cut(float4[], float8, float8, float8, float8, float8, float8, float8) IS 'pg_kde internal: the share of a cut cell in a range under a periodic profile';

-- Count (moment 0) or sum (moment 1) of the rows with lo <= x <= hi, NULL bounds open (a NaN bound is an
-- error), with the variance and hard bounds of the estimate; extension/range.c, as
-- pg_kde.synopsis.query.range_1d, step for step (docs/math.md §7):
--   heavy values exactly;
--   on a value lattice (step q > 0; the lattice value k is k * q for q >= 1 and k / (1/q) below, the correctly
--     rounded decimal, as numeric and float8 input give it), the bounds move out to the half-steps around
--     the values they include;
--   cells: whole ones exactly from the cumulative arrays; the (at most two) a range cuts by the share of
--     their rows their shape (the cubic with the KDE's densities at the ends, an exponential or straight
--     line where that goes negative, or a time column's periodic profile, _kde_profile_cut) puts inside,
--     with its variance (binomial less what the cell's exact count and mean pin down,
--     n s (1 - s) (1 - 3 s (1 - s)), plus the shape's error n^2 tau^2 4 s (1 - s), or for a range inside
--     one cell under the KDE's shape the two cuts' errors added, n^2 tau^2 4 (a (1 - a) + b (1 - b)) with
--     a, b the shares below its ends, when larger; the profile's sampling error, and the shares' distance
--     from the straight line's, squared) and hard bounds (none to all of a cut cell's rows; on a continuous
--     column a row may sit on the upper bound itself).
-- In C: its float8 arithmetic follows IEEE 754 (the variance of a sum of values near 1e300 is infinite, the
-- squares of values near 1e-300 vanish) where PL/pgSQL raised "value out of range".
CREATE FUNCTION _kde_range(s kde_synopsis, lo float8, hi float8, moment integer,
                           OUT estimate float8, OUT variance float8, OUT low float8, OUT high float8)
AS 'MODULE_PATHNAME', 'kde_range' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION _kde_range(kde_synopsis, float8, float8, integer) IS 'pg_kde internal: a moment over a range';

-- A payload row's heavy values as arrays: its own, or its atom_pack's (extension/atoms.c), which holds them
-- on the column's lattice where the arrays are empty. And the pack of heavy values (NULL where they do not
-- pack: off a lattice, counts that are not whole); the tracking triggers store their new counts so.
CREATE FUNCTION _kde_atoms(s kde_synopsis, OUT atom_values float8[], OUT atom_cum_count float8[],
                           OUT atom_cum_sum float8[])
AS 'MODULE_PATHNAME', 'kde_atoms' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_atoms(kde_synopsis) IS 'pg_kde internal: a 1-D synopsis'' heavy values, unpacked';
CREATE FUNCTION _kde_atoms_pack(atom_values float8[], atom_cum_count float8[], step float8) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_atoms_pack' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_atoms_pack(float8[], float8[], float8) IS 'pg_kde internal: heavy values on a lattice, packed';
CREATE FUNCTION _kde_atom_count(pack bytea) RETURNS integer
AS 'MODULE_PATHNAME', 'kde_atom_count' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_atom_count(bytea) IS 'pg_kde internal: how many heavy values a pack holds (NULL: a malformed header)';

-- Standard normal quantile (Acklam's rational approximation, relative error < 1.2e-9).
CREATE FUNCTION _kde_normal_quantile(p float8) RETURNS float8
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    a float8[] := ARRAY[-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                        1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00];
    b float8[] := ARRAY[-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                        6.680131188771972e+01, -1.328068155288572e+01];
    c float8[] := ARRAY[-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                        -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00];
    d float8[] := ARRAY[7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                        3.754408661907416e+00];
    q float8;
    r float8;
BEGIN
    IF p <= 0 OR p >= 1 THEN
        RAISE EXCEPTION 'probability must be between 0 and 1, got %', p;
    ELSIF p < 0.02425 THEN
        q := sqrt(-2 * ln(p));
        RETURN (((((c[1] * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) * q + c[6])
             / ((((d[1] * q + d[2]) * q + d[3]) * q + d[4]) * q + 1);
    ELSIF p > 1 - 0.02425 THEN
        RETURN -@extschema@._kde_normal_quantile(1 - p);
    END IF;
    q := p - 0.5;
    r := q * q;
    RETURN (((((a[1] * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * r + a[6]) * q
         / (((((b[1] * r + b[2]) * r + b[3]) * r + b[4]) * r + b[5]) * r + 1);
END
$$;
COMMENT ON FUNCTION _kde_normal_quantile(float8) IS 'pg_kde internal: inverse of the standard normal CDF';

-- z of a two-sided interval at the given confidence, which must lie strictly between 0 and 1:
-- -quantile((1 - c) / 2), not quantile((1 + c) / 2): 1 + c rounds to 2 for c near 1.
CREATE FUNCTION _kde_z(confidence float8) RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF confidence IS NULL OR NOT (confidence > 0 AND confidence < 1) THEN
        RAISE EXCEPTION 'confidence must be between 0 and 1 (exclusive), got %', confidence
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN -@extschema@._kde_normal_quantile((1 - confidence) / 2);
END
$$;
COMMENT ON FUNCTION _kde_z(float8) IS 'pg_kde internal: z of a two-sided interval at a confidence';

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
--
-- Rows on a bound's float8 that may lie on either side of the bound (0.30.0, query.loose_bounds; docs/math.md §7,
-- "Values float8 cannot tell apart"): on a column whose float8s may stand for more than one value of its type
-- (kde_synopsis.coarse; NULL, not known, as true) every finite bound, and a bound given with more digits than
-- float8 holds (lo_loose, hi_loose: the text forms' numeric bounds). The hard bounds are then the widest of the
-- ranges with each such bound also moved to the next float8 inwards (its float8's rows left out). lo_fuzz,
-- hi_fuzz (seconds): a bound the column's values may lie on either side of within that much (a timestamptz bound
-- of a date or timestamp column by a change of the UTC offset, _kde_time_fuzz): the ranges with it moved that
-- much each way too (inwards, past that: a row that far may still be on the other side).
CREATE FUNCTION _kde_interval(tbl regclass, col text, lo float8, hi float8, confidence float8, moment integer,
                              lo_loose boolean DEFAULT false, hi_loose boolean DEFAULT false,
                              lo_fuzz float8 DEFAULT 0, hi_fuzz float8 DEFAULT 0,
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
    hard_low float8;
    hard_high float8;
    a float8;
    b float8;
    corner record;
    biggest float8;  -- a coarse column's sum: the largest magnitude a row in the range may have
    most float8;  -- ... and the most rows it may hold
BEGIN
    s := @extschema@._kde_synopsis_for(tbl, ARRAY[col]);
    r := @extschema@._kde_range(s, lo, hi, moment);
    hard_low := r.low;
    hard_high := r.high;
    lo_loose := coalesce((lo_loose OR coalesce(s.coarse, true)) AND lo > '-Infinity', false);
    hi_loose := coalesce((hi_loose OR coalesce(s.coarse, true)) AND hi < 'Infinity', false);
    lo_fuzz := CASE WHEN lo > '-Infinity' AND lo < 'Infinity' AND lo_fuzz > 0 THEN lo_fuzz ELSE 0 END;
    hi_fuzz := CASE WHEN hi > '-Infinity' AND hi < 'Infinity' AND hi_fuzz > 0 THEN hi_fuzz ELSE 0 END;
    IF lo_loose OR hi_loose OR lo_fuzz > 0 OR hi_fuzz > 0 THEN
        FOREACH a IN ARRAY ARRAY[lo] || CASE WHEN lo_loose THEN ARRAY[@extschema@._kde_next_float8(lo, true)] END
                           || CASE WHEN lo_fuzz > 0 THEN ARRAY[lo - lo_fuzz, @extschema@._kde_next_float8(lo + lo_fuzz, true)] END
        LOOP
            FOREACH b IN ARRAY ARRAY[hi] || CASE WHEN hi_loose THEN ARRAY[@extschema@._kde_next_float8(hi, false)] END
                               || CASE WHEN hi_fuzz > 0 THEN ARRAY[@extschema@._kde_next_float8(hi - hi_fuzz, false), hi + hi_fuzz] END
            LOOP
                CONTINUE WHEN a IS NOT DISTINCT FROM lo AND b IS NOT DISTINCT FROM hi;
                corner := @extschema@._kde_range(s, a, b, moment);
                hard_low := least(hard_low, corner.low);
                hard_high := greatest(hard_high, corner.high);
            END LOOP;
        END LOOP;
    END IF;
    IF moment = 1 AND coalesce(s.coarse, true) THEN
        -- each row's value lies up to half an ulp from the float8 the sums hold (query.coarse_widened; a red team
        -- on 0.30.0's first build: 1,000 rows of 2^62 + 511 beside 1,000 of -2^62 summed to [0, 0], exact 511,000):
        -- as many rows as the range may hold, at the largest magnitude one of them may have
        biggest := (SELECT max(abs(v)) FROM unnest(s.grid || (@extschema@._kde_atoms(s)).atom_values) v);
        IF lo > '-Infinity' AND hi < 'Infinity' THEN
            biggest := least(biggest, greatest(abs(lo), abs(hi)));
        END IF;
        most := (@extschema@._kde_range(s, lo, hi, 0)).high;
        hard_low := @extschema@._kde_coarse_widen(hard_low, most, coalesce(biggest, 0), false);
        hard_high := @extschema@._kde_coarse_widen(hard_high, most, coalesce(biggest, 0), true);
    END IF;
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
    -- (rows on a loose bound's float8 are not modelled: the interval widens by all of them; in IEEE arithmetic,
    -- where PostgreSQL's raised "value out of range: overflow" on a coarse sum near float8's largest)
    IF hard_low < r.low THEN
        low := @extschema@._kde_ieee_add(low, @extschema@._kde_ieee_add(hard_low, -r.low));
    END IF;
    IF hard_high > r.high THEN
        high := @extschema@._kde_ieee_add(high, @extschema@._kde_ieee_add(hard_high, -r.high));
    END IF;
    estimate := r.estimate;
    low := least(greatest(hard_low, low), r.estimate);
    high := greatest(least(hard_high, high), r.estimate);
    IF low = high AND hard_low < hard_high THEN
        low := hard_low;
        high := hard_high;
    END IF;
END
$$;
COMMENT ON FUNCTION _kde_interval(regclass, text, float8, float8, float8, integer, boolean, boolean, float8, float8) IS 'pg_kde internal: an interval';

-- A sum's hard bound moved out by what rows' values may lie from their float8s on a coarse column (0.30.0).
CREATE FUNCTION _kde_coarse_widen(x float8, rows float8, biggest float8, up boolean) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_coarse_widen' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_coarse_widen(float8, float8, float8, boolean) IS 'pg_kde internal: a coarse column''s sum bound, widened';

-- A numeric bound's float8, +-Infinity or +-0 beyond float8's range (_kde_text_value).
CREATE FUNCTION _kde_numeric_bound(numeric) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_numeric_bound' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_numeric_bound(numeric) IS 'pg_kde internal: a numeric bound as a synopsis reads it';

-- x + y as IEEE 754 adds them (an overflow is infinite, not an error).
CREATE FUNCTION _kde_ieee_add(x float8, y float8) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_ieee_add' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_ieee_add(float8, float8) IS 'pg_kde internal: a float8 sum, infinite where it overflows';

-- The float8 next to x, above it where up, below it otherwise (C's nextafter).
CREATE FUNCTION _kde_next_float8(x float8, up boolean) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_next_float8' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_next_float8(float8, boolean) IS 'pg_kde internal: the next float8';

CREATE FUNCTION approx_count(tbl regclass, col text, lo float8, hi float8) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT (@extschema@._kde_range(@extschema@._kde_synopsis_for(tbl, ARRAY[col]), lo, hi, 0)).estimate $$;
COMMENT ON FUNCTION approx_count(regclass, text, float8, float8) IS
    'Approximate count of rows with lo <= col <= hi (NULL or infinite bounds are open) from the synopsis';

CREATE FUNCTION approx_sum(tbl regclass, col text, lo float8, hi float8) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT (@extschema@._kde_range(@extschema@._kde_synopsis_for(tbl, ARRAY[col]), lo, hi, 1)).estimate $$;
COMMENT ON FUNCTION approx_sum(regclass, text, float8, float8) IS
    'Approximate sum of col over rows with lo <= col <= hi (NULL or infinite bounds are open) from the synopsis';

CREATE FUNCTION approx_avg(tbl regclass, col text, lo float8, hi float8) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN c > 0 THEN (@extschema@._kde_range(s, lo, hi, 1)).estimate / c END
    FROM (SELECT @extschema@._kde_synopsis_for(tbl, ARRAY[col]) AS s) q,
         LATERAL (SELECT (@extschema@._kde_range(q.s, lo, hi, 0)).estimate AS c) n
$$;
COMMENT ON FUNCTION approx_avg(regclass, text, float8, float8) IS
    'Approximate average of col over rows with lo <= col <= hi (NULL when the range holds no rows)';

CREATE FUNCTION approx_count_ci(tbl regclass, col text, lo float8, hi float8, confidence float8 DEFAULT 0.95,
                                OUT estimate float8, OUT low float8, OUT high float8)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM @extschema@._kde_interval(tbl, col, lo, hi, confidence, 0) $$;
COMMENT ON FUNCTION approx_count_ci(regclass, text, float8, float8, float8) IS
    'approx_count with an interval: heavy values and whole cells are exact; only the cells the range cuts are uncertain (estimate ± z·sd at the given confidence, half a row more for a point query lo = hi, or on a lattice where its value is expected to hold fewer than 10 rows the likeliest whole counts of a value a row holds; within hard bounds that always hold the answer as of the build)';

CREATE FUNCTION approx_sum_ci(tbl regclass, col text, lo float8, hi float8, confidence float8 DEFAULT 0.95,
                              OUT estimate float8, OUT low float8, OUT high float8)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM @extschema@._kde_interval(tbl, col, lo, hi, confidence, 1) $$;
COMMENT ON FUNCTION approx_sum_ci(regclass, text, float8, float8, float8) IS
    'approx_sum with an interval, as approx_count_ci';

-- ---------------------------------------------------------------------------------------------- time types
-- A synopsis of a date, timestamp or timestamptz column holds epoch seconds: a timestamptz's own, and a date's
-- or timestamp's wall-clock time read as UTC (extract(epoch from ...)). A bound of a time type becomes the
-- same number: for timestamptz columns its epoch, for date and timestamp columns its wall-clock time in the
-- session's TimeZone, as comparing the column with it in SQL would (a date or timestamp argument reaches
-- the timestamptz functions in the session's TimeZone and comes back unchanged). Text bounds (untyped
-- literals) are read as the column's own type; NULL stays an open bound.
-- (The column's type now: the synopsis is served only while it is the type it was built on.)
CREATE FUNCTION _kde_coltype(tbl regclass, col text) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
    WHERE a.attrelid = tbl AND a.attname = col AND a.attnum > 0 AND NOT a.attisdropped
$$;
COMMENT ON FUNCTION _kde_coltype(regclass, text) IS 'pg_kde internal: the type of a column';

CREATE FUNCTION _kde_time_bounds(tbl regclass, col text, lo timestamptz, hi timestamptz, OUT a float8, OUT b float8)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t text := @extschema@._kde_coltype(tbl, col);
BEGIN
    IF t IS NULL OR t LIKE 'timestamp%with time zone' THEN  -- (no synopsis: the query itself says so)
        a := extract(epoch FROM lo)::float8;
        b := extract(epoch FROM hi)::float8;
    ELSIF t = 'date' OR t LIKE 'timestamp%' THEN
        a := extract(epoch FROM lo::timestamp)::float8;
        b := extract(epoch FROM hi::timestamp)::float8;
    ELSE
        RAISE EXCEPTION 'pg_kde: column % of % has type %; give bounds of that type, not timestamps', col, tbl, t
            USING ERRCODE = 'datatype_mismatch';
    END IF;
END
$$;
COMMENT ON FUNCTION _kde_time_bounds(regclass, text, timestamptz, timestamptz) IS 'pg_kde internal: time bounds as the synopsis reads them';

-- A column's type, a domain's base type's (NULL: no such column). (PL/pgSQL, as the others the text forms call
-- on each read: their plans are kept for the session, where a SQL function's are made again on each call.)
CREATE FUNCTION _kde_base_type(tbl regclass, col text) RETURNS regtype
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t oid;
    base oid;
BEGIN
    SELECT a.atttypid INTO t FROM pg_attribute a
    WHERE a.attrelid = tbl AND a.attname = col AND a.attnum > 0 AND NOT a.attisdropped;
    LOOP
        SELECT y.typbasetype INTO base FROM pg_type y WHERE y.oid = t AND y.typtype = 'd';
        EXIT WHEN NOT FOUND;
        t := base;
    END LOOP;
    RETURN t::regtype;
END
$$;
COMMENT ON FUNCTION _kde_base_type(regclass, text) IS 'pg_kde internal: a column''s type, a domain''s base type''s';

-- Where a column's float8s may stand for more than one value of its type (0.30.0, docs/math.md §7, "Values
-- float8 cannot tell apart"; kde_synopsis.coarse): digits, a numeric column whose values' significant digits
-- are counted row by row (_kde_numeric_coarse), but for numeric(p, s) with p <= 15 and s <= 307, whose values
-- float8 tells apart (a larger scale holds subnormals: numeric(1, 324)'s 3e-324 and 6e-324 share a float8);
-- magnitude, the magnitude from which it may (a bigint's 2^53; a timestamp's 2^33 epoch seconds, about the
-- year 2242, where microseconds apart may share a float8); neither for the other types, whose values are their
-- float8s (smallint, integer, real, double precision, date). The refresh's scan, the tracking triggers and the
-- update to 0.30.0 read it.
CREATE FUNCTION _kde_coarse_rule(tbl regclass, col text, OUT digits boolean, OUT magnitude float8)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t regtype := @extschema@._kde_base_type(tbl, col);
    m integer;
BEGIN
    digits := false;
    IF t = 'numeric'::regtype THEN
        SELECT a.atttypmod INTO m FROM pg_attribute a
        WHERE a.attrelid = tbl AND a.attname = col AND a.attnum > 0 AND a.atttypid = 'numeric'::regtype;
        digits := NOT coalesce(m >= 4 AND (m - 4) >> 16 <= 15 AND (((m - 4) & 2047) # 1024) - 1024 <= 307, false);
    ELSIF t = 'bigint'::regtype THEN
        magnitude := 9007199254740992;
    ELSIF t IN ('timestamp'::regtype, 'timestamptz'::regtype) THEN
        magnitude := 8589934592;
    END IF;
END
$$;
COMMENT ON FUNCTION _kde_coarse_rule(regclass, text) IS 'pg_kde internal: where a column''s float8s may stand for more than one of its values';

-- A text bound read as a column of (base) type t reads it, as the synopsis holds it: a time's epoch seconds, a
-- real's float8 (0.30.0: '0.1' is the real 0.100000001490116, which SQL compares a real column with; read as a
-- float8 before, a red team's approx_count_ci of a real column's rows of 0.1 read [0, 0] for 1,000), other
-- numbers' float8.
CREATE FUNCTION _kde_text_value(t regtype, x text) RETURNS float8
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF x IS NULL THEN
        RETURN NULL;
    ELSIF t = 'date'::regtype THEN
        RETURN extract(epoch FROM x::date)::float8;
    ELSIF t = 'timestamptz'::regtype THEN
        RETURN extract(epoch FROM x::timestamptz)::float8;
    ELSIF t = 'timestamp'::regtype THEN
        RETURN extract(epoch FROM x::timestamp)::float8;
    ELSIF t = 'real'::regtype THEN
        RETURN x::real::float8;
    ELSIF t = 'numeric'::regtype THEN
        -- past float8's range: beyond every value a synopsis holds, or on the zero side of every one (and loose:
        -- _kde_text_loose), where the cast raised "out of range"
        RETURN @extschema@._kde_numeric_bound(x::numeric);
    ELSIF t = 'smallint'::regtype THEN  -- (integers as SQL reads them: '5.5' and ' 1e3 ' are errors)
        RETURN x::int2::float8;
    ELSIF t = 'integer'::regtype THEN
        RETURN x::int4::float8;
    ELSIF t = 'bigint'::regtype THEN
        RETURN x::int8::float8;
    END IF;
    RETURN x::float8;
END
$$;
COMMENT ON FUNCTION _kde_text_value(regtype, text) IS 'pg_kde internal: a text bound read as a type';

CREATE FUNCTION _kde_text_bound(tbl regclass, col text, x text) RETURNS float8
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ BEGIN RETURN @extschema@._kde_text_value(@extschema@._kde_base_type(tbl, col), x); END $$;
COMMENT ON FUNCTION _kde_text_bound(regclass, text, text) IS 'pg_kde internal: a text bound read as the column''s type';

-- Whether a time bound's epoch seconds may have lost microseconds to float8 (0.30.0): from 2^33 seconds (the
-- year 2242, and before 1697), where float8's spacing passes a microsecond. A date column's rows (midnights,
-- exact) may then share the bound's float8: a red team's count of a date column's day 2600-01-01 up to
-- 23:59:59.999999 read [1010, 1010] for its 10 rows, the bound rounded to the next midnight.
CREATE FUNCTION _kde_time_loose(x float8) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT coalesce(abs(x) >= 8589934592, false) $$;
COMMENT ON FUNCTION _kde_time_loose(float8) IS 'pg_kde internal: whether a time bound''s float8 may have lost microseconds';

-- How far (in seconds) a date or timestamp column's values may lie on either side of a timestamptz bound
-- (0.30.0): SQL compares them as the column's values cast to timestamptz in the session's TimeZone, the
-- synopsis as the bound's wall-clock time there, and the two disagree only about a change of the UTC offset: a
-- wall-clock time a spring-forward skips is read an hour on, one a fall-back repeats as either (a red team: in
-- America/Sao_Paulo, a date column's rows of 2018-11-04, whose midnight is 01:00, read [0, 0] from
-- '2018-11-04 01:00-02' up to itself, for 1,010 rows). Where the offset 26 hours before and after the bound
-- differ, their difference; else 0.
CREATE FUNCTION _kde_time_fuzz(tbl regclass, col text, x timestamptz) RETURNS float8
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- (within 26 hours of timestamptz's ends, where the probes would leave its range, no offset changes)
    IF x IS NULL OR NOT isfinite(x) OR x < '4714-11-26 00:00:00+00 BC'::timestamptz
       OR x > '294276-12-29 00:00:00+00'::timestamptz
       OR @extschema@._kde_base_type(tbl, col) NOT IN ('date'::regtype, 'timestamp'::regtype) THEN
        RETURN 0;
    END IF;
    RETURN abs(extract(timezone FROM x - interval '26 hours') - extract(timezone FROM x + interval '26 hours'))::float8;
END
$$;
COMMENT ON FUNCTION _kde_time_fuzz(regclass, text, timestamptz) IS 'pg_kde internal: how far a timestamptz bound is uncertain on a date or timestamp column';

-- Whether a text bound read as type t (_kde_text_value) holds more than its float8 keeps (0.30.0): a numeric's
-- of more than 15 significant digits, whose float8 may be that of rows on either side of it; a timestamp's
-- from 2^33 epoch seconds (_kde_time_loose). _kde_interval's lo_loose and hi_loose. Other types' text bounds
-- are their float8s, or those of a column whose float8s tell its values apart (or whose synopsis counts every
-- bound so: kde_synopsis.coarse).
CREATE FUNCTION _kde_text_loose(t regtype, x text) RETURNS boolean
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF x IS NULL THEN
        RETURN false;
    ELSIF t = 'numeric'::regtype THEN
        RETURN @extschema@._kde_numeric_coarse(x::numeric);
    ELSIF t IN ('timestamp'::regtype, 'timestamptz'::regtype) THEN
        RETURN @extschema@._kde_time_loose(@extschema@._kde_text_value(t, x));
    END IF;
    RETURN false;
END
$$;
COMMENT ON FUNCTION _kde_text_loose(regtype, text) IS 'pg_kde internal: whether a text bound has more digits than float8 keeps';

-- Timestamp bounds (0.13.0): passed to the timestamptz forms, a timestamp bound was cast to timestamptz in the
-- session's TimeZone and back, which moves a wall-clock time in a daylight-saving gap by an hour. Here they are
-- read as SQL compares them: a date or timestamp column's wall-clock time as it is, a timestamptz column's
-- bound cast to timestamptz (in the session's TimeZone).
CREATE FUNCTION _kde_time_bounds(tbl regclass, col text, lo timestamp, hi timestamp, OUT a float8, OUT b float8)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t text := @extschema@._kde_coltype(tbl, col);
BEGIN
    IF t = 'date' OR (t LIKE 'timestamp%' AND t NOT LIKE '%with time zone') THEN
        a := extract(epoch FROM lo)::float8;
        b := extract(epoch FROM hi)::float8;
    ELSE  -- a timestamptz column (or another type, refused there)
        SELECT q.a, q.b INTO a, b FROM @extschema@._kde_time_bounds(tbl, col, lo::timestamptz, hi::timestamptz) q;
    END IF;
END
$$;
COMMENT ON FUNCTION _kde_time_bounds(regclass, text, timestamp, timestamp) IS 'pg_kde internal: timestamp bounds as the synopsis reads them';

-- Date bounds (0.29.0) as their midnight's wall-clock time, the timestamp form's: given to the timestamptz
-- forms, which SQL picks for a date otherwise, a date was cast to timestamptz in the session's TimeZone, and
-- where daylight-saving time starts at midnight (America/Sao_Paulo until 2019) that midnight is 01:00: a red
-- team's approx_count_ci of a date column over one such day read [0, 0] for 1,000 rows. A timestamptz column
-- reads a date bound as SQL compares them, cast in the session's TimeZone.
CREATE FUNCTION _kde_time_bounds(tbl regclass, col text, lo date, hi date, OUT a float8, OUT b float8)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT q.a, q.b FROM @extschema@._kde_time_bounds(tbl, col, lo::timestamp, hi::timestamp) q $$;
COMMENT ON FUNCTION _kde_time_bounds(regclass, text, date, date) IS 'pg_kde internal: date bounds as the synopsis reads them';

CREATE FUNCTION approx_count(tbl regclass, col text, lo date, hi date) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.approx_count(tbl, col, t.a, t.b) FROM @extschema@._kde_time_bounds(tbl, col, lo, hi) t $$;
COMMENT ON FUNCTION approx_count(regclass, text, date, date) IS
    'Approximate count of rows with lo <= col <= hi for a date, timestamp or timestamptz column (NULL bounds are open), date bounds';

CREATE FUNCTION approx_count_ci(tbl regclass, col text, lo date, hi date, confidence float8 DEFAULT 0.95,
                                OUT estimate float8, OUT low float8, OUT high float8)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT i.* FROM @extschema@._kde_time_bounds(tbl, col, lo, hi) t,
                     @extschema@._kde_interval(tbl, col, t.a, t.b, confidence, 0) i $$;
COMMENT ON FUNCTION approx_count_ci(regclass, text, date, date, float8) IS
    'approx_count_ci for a date, timestamp or timestamptz column, date bounds';

CREATE FUNCTION approx_avg(tbl regclass, col text, lo date, hi date) RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.approx_avg(tbl, col, lo::timestamp, hi::timestamp) $$;
COMMENT ON FUNCTION approx_avg(regclass, text, date, date) IS
    'Approximate average of a date, timestamp or timestamptz column over rows with lo <= col <= hi, as a timestamptz (date bounds)';

CREATE FUNCTION approx_count(tbl regclass, col text, lo timestamptz, hi timestamptz) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.approx_count(tbl, col, t.a, t.b) FROM @extschema@._kde_time_bounds(tbl, col, lo, hi) t $$;
COMMENT ON FUNCTION approx_count(regclass, text, timestamptz, timestamptz) IS
    'Approximate count of rows with lo <= col <= hi for a date, timestamp or timestamptz column (NULL bounds are open)';

CREATE FUNCTION approx_count(tbl regclass, col text, lo timestamp, hi timestamp) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.approx_count(tbl, col, t.a, t.b) FROM @extschema@._kde_time_bounds(tbl, col, lo, hi) t $$;
COMMENT ON FUNCTION approx_count(regclass, text, timestamp, timestamp) IS
    'Approximate count of rows with lo <= col <= hi for a date, timestamp or timestamptz column (NULL bounds are open), timestamp bounds';

CREATE FUNCTION approx_count(tbl regclass, col text, lo text, hi text) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.approx_count(tbl, col, @extschema@._kde_text_value(b.t, lo), @extschema@._kde_text_value(b.t, hi))
      FROM (SELECT @extschema@._kde_base_type(tbl, col) AS t) b $$;
COMMENT ON FUNCTION approx_count(regclass, text, text, text) IS
    'approx_count with bounds given as text (untyped literals), read as the column''s own type';

CREATE FUNCTION approx_count_ci(tbl regclass, col text, lo timestamptz, hi timestamptz, confidence float8 DEFAULT 0.95,
                                OUT estimate float8, OUT low float8, OUT high float8)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT i.* FROM @extschema@._kde_time_bounds(tbl, col, lo, hi) t,
                     @extschema@._kde_interval(tbl, col, t.a, t.b, confidence, 0, @extschema@._kde_time_loose(t.a),
                                               @extschema@._kde_time_loose(t.b), @extschema@._kde_time_fuzz(tbl, col, lo),
                                               @extschema@._kde_time_fuzz(tbl, col, hi)) i $$;
COMMENT ON FUNCTION approx_count_ci(regclass, text, timestamptz, timestamptz, float8) IS
    'approx_count_ci for a date, timestamp or timestamptz column';

CREATE FUNCTION approx_count_ci(tbl regclass, col text, lo timestamp, hi timestamp, confidence float8 DEFAULT 0.95,
                                OUT estimate float8, OUT low float8, OUT high float8)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT i.* FROM @extschema@._kde_time_bounds(tbl, col, lo, hi) t,
                     @extschema@._kde_interval(tbl, col, t.a, t.b, confidence, 0, @extschema@._kde_time_loose(t.a),
                                               @extschema@._kde_time_loose(t.b)) i $$;
COMMENT ON FUNCTION approx_count_ci(regclass, text, timestamp, timestamp, float8) IS
    'approx_count_ci for a date, timestamp or timestamptz column, timestamp bounds';

-- Bounds as text (untyped literals, or untyped NULLs: open), read as the column's own type, as approx_count's
-- text form (0.28.0: approx_count_ci('t', 'v', NULL, NULL) and untyped literal bounds were "function ... is
-- not unique" between the float8 and time forms).
CREATE FUNCTION approx_count_ci(tbl regclass, col text, lo text, hi text, confidence float8 DEFAULT 0.95,
                                OUT estimate float8, OUT low float8, OUT high float8)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT i.* FROM (SELECT @extschema@._kde_base_type(tbl, col) AS t) b,
                     @extschema@._kde_interval(tbl, col, @extschema@._kde_text_value(b.t, lo),
                                               @extschema@._kde_text_value(b.t, hi), confidence, 0,
                                               @extschema@._kde_text_loose(b.t, lo),
                                               @extschema@._kde_text_loose(b.t, hi)) i $$;
COMMENT ON FUNCTION approx_count_ci(regclass, text, text, text, float8) IS
    'approx_count_ci with bounds given as text (untyped literals), read as the column''s own type';

CREATE FUNCTION approx_sum_ci(tbl regclass, col text, lo text, hi text, confidence float8 DEFAULT 0.95,
                              OUT estimate float8, OUT low float8, OUT high float8)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT i.* FROM (SELECT @extschema@._kde_base_type(tbl, col) AS t) b,
                     @extschema@._kde_interval(tbl, col, @extschema@._kde_text_value(b.t, lo),
                                               @extschema@._kde_text_value(b.t, hi), confidence, 1,
                                               @extschema@._kde_text_loose(b.t, lo),
                                               @extschema@._kde_text_loose(b.t, hi)) i $$;
COMMENT ON FUNCTION approx_sum_ci(regclass, text, text, text, float8) IS
    'approx_sum_ci with bounds given as text (untyped literals), read as the column''s own type (0.30.0)';

-- The average of a time column over a time range, as a timestamptz (a date or timestamp column's average is
-- its wall-clock time in the session's TimeZone: cast it back to the column's type).
CREATE FUNCTION approx_avg(tbl regclass, col text, lo timestamptz, hi timestamptz) RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN t LIKE 'timestamp%with time zone' THEN to_timestamp(a)
                ELSE (to_timestamp(a) AT TIME ZONE 'UTC')::timestamptz END
    FROM (SELECT @extschema@.approx_avg(tbl, col, b.a, b.b) AS a, @extschema@._kde_coltype(tbl, col) AS t
          FROM @extschema@._kde_time_bounds(tbl, col, lo, hi) b) q
$$;
COMMENT ON FUNCTION approx_avg(regclass, text, timestamptz, timestamptz) IS
    'Approximate average of a date, timestamp or timestamptz column over rows with lo <= col <= hi, as a timestamptz';

CREATE FUNCTION approx_avg(tbl regclass, col text, lo timestamp, hi timestamp) RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN t LIKE 'timestamp%with time zone' THEN to_timestamp(a)
                ELSE (to_timestamp(a) AT TIME ZONE 'UTC')::timestamptz END
    FROM (SELECT @extschema@.approx_avg(tbl, col, b.a, b.b) AS a, @extschema@._kde_coltype(tbl, col) AS t
          FROM @extschema@._kde_time_bounds(tbl, col, lo, hi) b) q
$$;
COMMENT ON FUNCTION approx_avg(regclass, text, timestamp, timestamp) IS
    'Approximate average of a date, timestamp or timestamptz column over rows with lo <= col <= hi, as a timestamptz (timestamp bounds)';
