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
           row_security_active(tbl) OR (c.relkind = 'v' AND @extschema@._kde_rows_hidden(tbl)) AS hidden INTO r
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
                  HINT = format('Build it with: SELECT kde_refresh(%L, %L);', tbl::text, cols[1]);
    END IF;
    IF h.coltypes IS DISTINCT FROM ARRAY[r.type] OR (h.built_relid = tbl::oid AND h.attnums IS DISTINCT FROM ARRAY[r.attnum]) THEN
        PERFORM @extschema@._kde_check_identity(tbl, cols, h.built_relid, h.attnums, h.coltypes, ARRAY[r.attnum], ARRAY[r.type]);
    END IF;
    RETURN s;
END
$$;
COMMENT ON FUNCTION _kde_synopsis_for(regclass, text[]) IS 'pg_kde internal: the synopsis row, privilege-checked';

-- Sum of the first k entries of a cumulative array where k = number of sorted values <= x (or < x).
CREATE FUNCTION _kde_atoms_upto(vals float8[], cum float8[], x float8, inclusive boolean) RETURNS float8
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k integer;
BEGIN
    IF cardinality(vals) = 0 THEN
        RETURN 0;
    END IF;
    k := width_bucket(x, vals);
    IF NOT inclusive AND k > 0 AND vals[k] = x THEN
        k := k - 1;
    END IF;
    RETURN CASE WHEN k = 0 THEN 0 ELSE cum[k] END;
END
$$;
COMMENT ON FUNCTION _kde_atoms_upto(float8[], float8[], float8, boolean) IS 'pg_kde internal: cumulative atom lookup';

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
    IF x <= grid[1] THEN
        RETURN 0;
    ELSIF x >= grid[m] THEN
        RETURN m - 1;
    END IF;
    k := width_bucket(x, grid);
    -- Halves first: differences of values near the ends of float8 would overflow.
    p := (k - 1) + (x / 2 - grid[k] / 2) / (grid[k + 1] / 2 - grid[k] / 2);
    RETURN CASE WHEN abs(p - round(p)) < 1e-9 THEN round(p) ELSE p END;
END
$$;
COMMENT ON FUNCTION _kde_grid_pos(float8[], float8) IS 'pg_kde internal: position on a grid';

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

-- The share of a cut cell's rows between fractions t0 <= t1 of the cell, and their mean position there, under
-- the cell's shape (pg_kde.synopsis.cells.cell_shape): the cubic with the KDE's relative densities d0, d1 at
-- the ends, total 1 and the cell's exact mean; where it goes negative and |mean - 1/2| > 1/6, the
-- exponential density with that mean; otherwise the linear density with that mean. docs/math.md §7.
CREATE FUNCTION _kde_cut(d0 float8, d1 float8, mean float8, t0 float8, t1 float8,
                         OUT share float8, OUT pos float8, OUT apart float8)
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    b float8 := -9 * d0 + 3 * d1 - 60 * mean + 36;
    c float8 := 18 * d0 - 12 * d1 + 180 * mean - 96;
    e float8 := -10 * d0 + 10 * d1 - 120 * mean + 60;
    disc float8;
    r float8;
    ok boolean := d0 >= 0 AND d1 >= 0;
    m float8;
    lam float8;
    nxt float8;
    x float8;
BEGIN
    -- The cubic is a density where it is non-negative at the roots of its derivative inside (0, 1).
    IF ok AND abs(e) > 1e-12 THEN
        disc := 4 * c * c - 12 * e * b;
        IF disc >= 0 THEN
            r := (-2 * c + sqrt(disc)) / (6 * e);
            ok := NOT (r > 0 AND r < 1 AND d0 + r * (b + r * (c + r * e)) < 0);
            r := (-2 * c - sqrt(disc)) / (6 * e);
            ok := ok AND NOT (r > 0 AND r < 1 AND d0 + r * (b + r * (c + r * e)) < 0);
        END IF;
    ELSIF ok AND abs(c) > 1e-12 THEN
        r := -b / (2 * c);
        ok := NOT (r > 0 AND r < 1 AND d0 + r * (b + r * c) < 0);
    END IF;
    IF NOT ok AND abs(mean - 0.5) > 1.0 / 6 THEN
        -- Newton's method on 1/lambda - 1/(e^lambda - 1) = m, from 1/m (pg_kde.synopsis.cells.exponential_rate).
        m := least(greatest(mean, 1e-6), 1 - 1e-6);
        IF m > 0.5 THEN
            m := 1 - m;
        END IF;
        lam := least(500, 1 / m);
        FOR i IN 1 .. 30 LOOP
            x := exp(-lam);
            nxt := least(500, greatest(1e-6, lam - (1 / lam - x / (1 - x) - m) / (-1 / (lam * lam) + x / ((1 - x) ^ 2))));
            IF abs(nxt - lam) <= 1e-12 * lam THEN
                lam := nxt;
                EXIT;
            END IF;
            lam := nxt;
        END LOOP;
        IF mean > 0.5 THEN
            lam := -lam;
        END IF;
        share := (exp(-lam * t1) - 1) / (exp(-lam) - 1) - (exp(-lam * t0) - 1) / (exp(-lam) - 1);
        pos := (1 - exp(-lam * t1) * (1 + lam * t1)) / (lam * (1 - exp(-lam)))
             - (1 - exp(-lam * t0) * (1 + lam * t0)) / (lam * (1 - exp(-lam)));
    ELSE
        IF NOT ok THEN  -- the linear density with that mean, its slope within ±2
            e := greatest(-2, least(2, 12 * (mean - 0.5)));
            d0 := 1 - e / 2;
            b := e;
            c := 0;
            e := 0;
        END IF;
        share := t1 * (d0 + t1 * (b / 2 + t1 * (c / 3 + t1 * e / 4)))
               - t0 * (d0 + t0 * (b / 2 + t0 * (c / 3 + t0 * e / 4)));
        pos := t1 * t1 * (d0 / 2 + t1 * (b / 3 + t1 * (c / 4 + t1 * e / 5)))
             - t0 * t0 * (d0 / 2 + t0 * (b / 3 + t0 * (c / 4 + t0 * e / 5)));
    END IF;
    share := least(1, greatest(0, share));
    pos := least(t1, greatest(t0, CASE WHEN share > 0 THEN pos / share ELSE (t0 + t1) / 2 END));
    -- How far the straight line with the same mean would put the share (the shape's doubt).
    x := greatest(-2, least(2, 12 * (mean - 0.5)));
    apart := abs(share - (t1 * ((1 - x / 2) + t1 * x / 2) - t0 * ((1 - x / 2) + t0 * x / 2)));
END
$$;
COMMENT ON FUNCTION _kde_cut(float8, float8, float8, float8, float8) IS 'pg_kde internal: the share of a cut cell in a range, and how far the straight line would put it';

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

-- Count (moment 0) or sum (moment 1) of the rows with lo <= x <= hi, NULL bounds open, with the variance and
-- hard bounds of the estimate; as pg_kde.synopsis.query.range_1d, step for step (docs/math.md §7):
--   heavy values exactly;
--   on a value lattice (step q > 0; the lattice value k is k * q for q >= 1 and k / (1/q) below, the
--     correctly rounded decimal, as numeric and float8 input give it), the bounds move out to the half-steps
--     around the values they include;
--   cells: whole ones exactly from the cumulative arrays; the (at most two) a range cuts by the share of
--     their rows their shape (_kde_cut, or a time column's periodic profile, _kde_profile_cut) puts inside,
--     with its variance (binomial less what the cell's exact mean pins down, n s (1 - s) (1 - 3 s (1 - s)),
--     plus the shape's error n^2 tau^2 4 s (1 - s), or for a range inside one cell under the KDE's shape the
--     two cuts' errors added, n^2 tau^2 4 (a (1 - a) + b (1 - b)) with a, b the shares below its ends, when
--     larger; the profile's sampling error, and the shares' distance from the straight line's, squared) and
--     hard bounds (none to all of a cut cell's rows; on a continuous
--     column a row may sit on the upper bound itself).
CREATE FUNCTION _kde_range(s kde_synopsis, lo float8, hi float8, moment integer,
                           OUT estimate float8, OUT variance float8, OUT low float8, OUT high float8)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    a float8 := coalesce(lo, '-Infinity');
    b float8 := coalesce(hi, 'Infinity');
    q float8 := s.step;
    inv float8;
    m integer := s.grid_size;
    cells float8[];
    exact float8 := 0;
    ka float8;
    kb float8;
    ca integer;
    cb integer;
    c integer;
    g0 float8;
    g1 float8;
    w float8;
    t0 float8;
    t1 float8;
    n float8;
    cut record;
    doubt float8 := 0;
    mean float8;
    half_range float8 := s.grid[s.grid_size] / 2 - s.grid[1] / 2;
    share float8;
    spread float8;
    pos float8;
    apart float8;
    sampled float8;
    cuts float8;
    below float8;
    upto float8;
    d0 float8;
    d1 float8;
    x float8;
BEGIN
    estimate := 0; variance := 0; low := 0; high := 0;
    IF a > b THEN
        RETURN;
    END IF;
    IF cardinality(s.atom_values) > 0 THEN
        cells := CASE WHEN moment = 0 THEN s.atom_cum_count ELSE s.atom_cum_sum END;
        exact := @extschema@._kde_atoms_upto(s.atom_values, cells, b, true)
               - @extschema@._kde_atoms_upto(s.atom_values, cells, a, false);
    END IF;
    estimate := exact; low := exact; high := exact;
    IF s.kde_rows = 0 OR m < 2 THEN
        RETURN;
    END IF;
    IF q > 0 THEN  -- each value v owns [v - q/2, v + q/2]
        inv := CASE WHEN q < 1 THEN round(1 / q) END;
        IF a > '-Infinity' THEN
            ka := ceil(a / q);
            IF (CASE WHEN inv IS NULL THEN (ka - 1) * q ELSE (ka - 1) / inv END) >= a THEN
                ka := ka - 1;
            ELSIF (CASE WHEN inv IS NULL THEN ka * q ELSE ka / inv END) < a THEN
                ka := ka + 1;
            END IF;
            a := (ka - 0.5) * q;
        END IF;
        IF b < 'Infinity' THEN
            kb := floor(b / q);
            IF (CASE WHEN inv IS NULL THEN (kb + 1) * q ELSE (kb + 1) / inv END) <= b THEN
                kb := kb + 1;
            ELSIF (CASE WHEN inv IS NULL THEN kb * q ELSE kb / inv END) > b THEN
                kb := kb - 1;
            END IF;
            b := (kb + 0.5) * q;
        END IF;
        IF ka > kb THEN  -- no value of the lattice inside
            RETURN;
        END IF;
    END IF;
    a := greatest(a, s.grid[1]);
    b := least(b, s.grid[m]);
    IF a > b OR (a = b AND q > 0) THEN
        RETURN;
    END IF;
    cells := CASE WHEN moment = 0 THEN s.cell_cum_count ELSE s.cell_cum_sum END;
    -- The cells holding a and b (grid[k] <= x < grid[k + 1], 0-based; the last cell holds its end).
    ca := least(greatest(width_bucket(a, s.grid) - 1, 0), m - 2);
    cb := least(greatest(width_bucket(b, s.grid) - 1, 0), m - 2);
    IF cb > ca + 1 THEN  -- whole cells ca+1 .. cb-1 (cell k holds cells[k + 2] - cells[k + 1])
        estimate := estimate + cells[cb + 1] - cells[ca + 2];
        low := estimate;
        high := estimate;
    END IF;
    FOREACH c IN ARRAY CASE WHEN ca = cb THEN ARRAY[ca] ELSE ARRAY[ca, cb] END LOOP
        g0 := s.grid[c + 1];
        g1 := s.grid[c + 2];
        w := g1 / 2 - g0 / 2;  -- halves: no difference of values near the ends of float8 overflows
        t0 := CASE WHEN c = ca THEN least(1, greatest(0, (a / 2 - g0 / 2) / w)) ELSE 0 END;
        t1 := CASE WHEN c = cb THEN least(1, greatest(0, (b / 2 - g0 / 2) / w)) ELSE 1 END;
        -- A bound inside the cell never makes it whole or empty, however the division rounds (a cell 1e300
        -- wide puts a bound near its end at t = 1 exactly): the hard bounds stay the cut cell's.
        IF c = cb AND b < g1 THEN
            t1 := least(t1, 0.9999999999999999);
        END IF;
        IF c = ca AND a > g0 THEN
            t0 := greatest(t0, 1e-300);
        END IF;
        n := s.cell_cum_count[c + 2] - s.cell_cum_count[c + 1];
        -- (On a lattice no row sits on a boundary; a continuous column's rows may sit on b.)
        CONTINUE WHEN n <= 0 OR t1 < t0 OR (t1 = t0 AND q > 0);
        IF t0 = 0 AND t1 = 1 THEN  -- the range holds this cell whole: exact
            estimate := estimate + cells[c + 2] - cells[c + 1];
            low := low + cells[c + 2] - cells[c + 1];
            high := high + cells[c + 2] - cells[c + 1];
            CONTINUE;
        END IF;
        -- The cell's mean position from its exact sum (½ where sums ran past float8's range).
        mean := (((s.cell_cum_sum[c + 2] - s.cell_cum_sum[c + 1]) / n) / 2 - g0 / 2) / w;
        mean := CASE WHEN mean > '-Infinity' AND mean < 'Infinity' THEN least(1, greatest(0, mean)) ELSE 0.5 END;
        IF s.period > 0 THEN
            -- The periodic profile's shape tilted to the cell's mean; its own sampling error adds
            -- n^2 f (1 - f) / (k M max(M, 1)) to the variance.
            cut := @extschema@._kde_profile_cut(s.profile, s.period, q, g0, g1, t0, t1, mean);
            share := cut.share;
            pos := cut.pos;
            apart := 0;
            sampled := cut.doubt;
        ELSE
            -- The KDE's densities at the ends relative to the cell's mean density (stored relative to the
            -- grid's).
            d0 := s.density[c + 1] * (w / half_range) * (s.kde_rows / n);
            d1 := s.density[c + 2] * (w / half_range) * (s.kde_rows / n);
            cut := @extschema@._kde_cut(d0, d1, mean, t0, t1);
            share := cut.share;
            pos := cut.pos;
            apart := cut.apart;
            sampled := 0;
        END IF;
        -- Binomial, less what the cell's exact count and mean pin down (a Brownian bridge conditioned on its
        -- integral), plus the shape's error. A cut cell is never certain: its share counts as at least one
        -- row's each side.
        spread := least(greatest(share, 1 / (n + 1)), n / (n + 1));
        cuts := spread * (1 - spread);  -- the shape's error at one cut, per 4 n^2 tau^2
        IF t0 > 0 AND t1 < 1 AND s.shape_var > 0 AND s.period = 0 THEN
            -- A range inside one cell cuts it twice: the KDE's shape errs at the two cuts apart (rows
            -- clustered on a few values make its error jump), each as at a cut from the cell's start, never
            -- less than the range's own share gives. (A periodic profile errs smoothly over the period: its
            -- errors at two cuts of one cell move together.)
            below := least(1, greatest(0, (@extschema@._kde_cut(d0, d1, mean, 0, t0)).share));
            upto := least(1, below + share);
            cuts := greatest(cuts, below * (1 - below) + upto * (1 - upto));
        END IF;
        spread := spread * (1 - spread) * (n * (1 - 3 * spread * (1 - spread)) + n * n * sampled)
                  + 4 * n * n * s.shape_var * cuts;
        IF moment = 0 THEN
            estimate := estimate + n * share;
            variance := variance + spread;
            doubt := doubt + n * apart;
            high := high + n;
        ELSE
            -- Points inside a cell as weighted means of its ends (no difference of values to overflow).
            x := g0 * (1 - pos) + g1 * pos;
            estimate := estimate + n * share * x;
            variance := variance + spread * x * x;
            doubt := doubt + n * apart * abs(x);
            low := low + least(0, n * (g0 * (1 - t0) + g1 * t0));
            high := high + greatest(0, n * (g0 * (1 - t1) + g1 * t1));
        END IF;
    END LOOP;
    -- The shape's own uncertainty: how far its shares are from the straight line's.
    variance := variance + doubt ^ 2;
END
$$;
COMMENT ON FUNCTION _kde_range(kde_synopsis, float8, float8, integer) IS 'pg_kde internal: a moment over a range';

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

-- An interval at the given confidence: estimate ± z sqrt(variance), never outside the hard bounds (which
-- always hold the answer of the table as of the build). docs/math.md §7.
CREATE FUNCTION _kde_interval(tbl regclass, col text, lo float8, hi float8, confidence float8, moment integer,
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
    half := -@extschema@._kde_normal_quantile((1 - confidence) / 2) * sqrt(r.variance);
    estimate := r.estimate;
    low := greatest(r.low, r.estimate - half);
    high := least(r.high, r.estimate + half);
END
$$;
COMMENT ON FUNCTION _kde_interval(regclass, text, float8, float8, float8, integer) IS 'pg_kde internal: an interval';

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
    'approx_count with an interval: heavy values and whole cells are exact; only the cells the range cuts are uncertain (estimate ± z·sd at the given confidence, within hard bounds that always hold the answer as of the build)';

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

CREATE FUNCTION _kde_text_bound(tbl regclass, col text, x text) RETURNS float8
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t text := @extschema@._kde_coltype(tbl, col);
BEGIN
    IF x IS NULL THEN
        RETURN NULL;
    ELSIF t = 'date' THEN
        RETURN extract(epoch FROM x::date)::float8;
    ELSIF t LIKE 'timestamp%with time zone' THEN
        RETURN extract(epoch FROM x::timestamptz)::float8;
    ELSIF t LIKE 'timestamp%' THEN
        RETURN extract(epoch FROM x::timestamp)::float8;
    END IF;
    RETURN x::float8;
END
$$;
COMMENT ON FUNCTION _kde_text_bound(regclass, text, text) IS 'pg_kde internal: a text bound read as the column''s type';

CREATE FUNCTION approx_count(tbl regclass, col text, lo timestamptz, hi timestamptz) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.approx_count(tbl, col, t.a, t.b) FROM @extschema@._kde_time_bounds(tbl, col, lo, hi) t $$;
COMMENT ON FUNCTION approx_count(regclass, text, timestamptz, timestamptz) IS
    'Approximate count of rows with lo <= col <= hi for a date, timestamp or timestamptz column (NULL bounds are open)';

CREATE FUNCTION approx_count(tbl regclass, col text, lo text, hi text) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.approx_count(tbl, col, @extschema@._kde_text_bound(tbl, col, lo), @extschema@._kde_text_bound(tbl, col, hi)) $$;
COMMENT ON FUNCTION approx_count(regclass, text, text, text) IS
    'approx_count with bounds given as text (untyped literals), read as the column''s own type';

CREATE FUNCTION approx_count_ci(tbl regclass, col text, lo timestamptz, hi timestamptz, confidence float8 DEFAULT 0.95,
                                OUT estimate float8, OUT low float8, OUT high float8)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT i.* FROM @extschema@._kde_time_bounds(tbl, col, lo, hi) t,
                     @extschema@._kde_interval(tbl, col, t.a, t.b, confidence, 0) i $$;
COMMENT ON FUNCTION approx_count_ci(regclass, text, timestamptz, timestamptz, float8) IS
    'approx_count_ci for a date, timestamp or timestamptz column';

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
