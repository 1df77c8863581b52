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

-- Share of a grid cell's rows between fractions t0 < t1 of the cell, when the density runs linearly from
-- d0 to d1 across it: F(t) = (d0 t + (d1 - d0) t^2 / 2) / ((d0 + d1) / 2).
CREATE FUNCTION _kde_cell_share(d0 float8, d1 float8, t0 float8, t1 float8) RETURNS float8
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN d0 + d1 <= 0 THEN t1 - t0
                ELSE (d0 * (t1 - t0) + (d1 - d0) * (t1 * t1 - t0 * t0) / 2) / ((d0 + d1) / 2) END
$$;
COMMENT ON FUNCTION _kde_cell_share(float8, float8, float8, float8) IS 'pg_kde internal: share of a cell';

-- Mean position (as a fraction of the cell) of the rows between t0 and t1 under the same linear density.
CREATE FUNCTION _kde_cell_mean(d0 float8, d1 float8, t0 float8, t1 float8) RETURNS float8
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN d0 * (t1 - t0) + (d1 - d0) * (t1 * t1 - t0 * t0) / 2 <= 0 THEN (t0 + t1) / 2
                ELSE (d0 * (t1 * t1 - t0 * t0) / 2 + (d1 - d0) * (t1 ^ 3 - t0 ^ 3) / 3)
                     / (d0 * (t1 - t0) + (d1 - d0) * (t1 * t1 - t0 * t0) / 2) END
$$;
COMMENT ON FUNCTION _kde_cell_mean(float8, float8, float8, float8) IS 'pg_kde internal: mean position in a cell';

-- The smooth part's count (moment 0) or sum (moment 1) over a <= x <= b: whole cells exactly from the
-- cumulative cell arrays; the (at most two) cells the range cuts by the share of their rows that the
-- linear density with the cell's exact mean offset puts inside. Also the variance of that share (each cut
-- cell's rows Binomial(n, share)), a smoothing-bias allowance (how far the KDE's share differs from it),
-- and hard bounds (none to all of a cut cell's rows inside). docs/math.md §7.
CREATE FUNCTION _kde_smooth(s kde_synopsis, a float8, b float8, moment integer,
                            OUT estimate float8, OUT variance float8, OUT bias float8, OUT low float8,
                            OUT high float8)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    m integer := s.grid_size;
    cells float8[] := CASE WHEN moment = 0 THEN s.cell_cum_count ELSE s.cell_cum_sum END;
    counts float8[] := s.cell_cum_count;
    offsets float8[] := s.cell_cum_offset;
    mass float8[] := s.kde_mass;
    grid float8[] := s.grid;
    slope float8;
    kde_share float8;
    pa float8;
    pb float8;
    ka integer;
    kb integer;
    c integer;
    t0 float8;
    t1 float8;
    n float8;
    share float8;
    x float8;
BEGIN
    estimate := 0; variance := 0; bias := 0; low := 0; high := 0;
    IF s.kde_rows = 0 THEN
        RETURN;
    END IF;
    IF cardinality(s.lattice) > 0 THEN  -- keep every value's rows on one side of the bounds
        a := @extschema@._kde_lattice_bound(s.lattice, grid, a, false);
        b := @extschema@._kde_lattice_bound(s.lattice, grid, b, true);
    END IF;
    pa := @extschema@._kde_grid_pos(grid, a);
    pb := @extschema@._kde_grid_pos(grid, b);
    IF pa >= pb THEN
        RETURN;
    END IF;
    ka := least(floor(pa)::integer, m - 2);
    kb := least(floor(pb)::integer, m - 2);
    IF kb > ka + 1 THEN  -- whole cells ka+1 .. kb-1 (cell k holds cells[k + 2] - cells[k + 1])
        estimate := cells[kb + 1] - cells[ka + 2];
    END IF;
    low := estimate;
    high := estimate;
    FOR c IN SELECT DISTINCT unnest(ARRAY[ka, kb]) LOOP
        t0 := CASE WHEN c = ka THEN pa - ka ELSE 0 END;
        t1 := CASE WHEN c = kb THEN least(pb - kb, 1) ELSE 1 END;
        n := counts[c + 2] - counts[c + 1];
        CONTINUE WHEN n <= 0 OR t1 <= t0;
        IF t0 = 0 AND t1 = 1 THEN  -- the range covers this cell whole: exact
            estimate := estimate + cells[c + 2] - cells[c + 1];
            low := low + cells[c + 2] - cells[c + 1];
            high := high + cells[c + 2] - cells[c + 1];
            CONTINUE;
        END IF;
        -- The cell's rows as a linear density with their exact mean offset (slope 12 (mean - 1/2), kept
        -- non-negative); the KDE's density across the cell is the second opinion, and the two shares'
        -- difference is the smoothing-bias allowance.
        slope := greatest(-2, least(2, 12 * ((offsets[c + 2] - offsets[c + 1]) / n - 0.5)));
        share := @extschema@._kde_cell_share(1 - slope / 2, 1 + slope / 2, t0, t1);
        kde_share := @extschema@._kde_cell_share(mass[c + 1], mass[c + 2], t0, t1);
        IF moment = 0 THEN
            estimate := estimate + n * share;
            variance := variance + n * share * (1 - share);
            bias := bias + n * abs(share - kde_share);
            high := high + n;
        ELSE
            -- Points inside a cell as weighted means of its ends (no difference of values to overflow).
            x := @extschema@._kde_cell_mean(1 - slope / 2, 1 + slope / 2, t0, t1);
            x := grid[c + 1] * (1 - x) + grid[c + 2] * x;
            estimate := estimate + n * share * x;
            variance := variance + n * share * (1 - share) * x * x;
            bias := bias + n * abs(share - kde_share) * abs(x);
            low := low + least(0, n * (grid[c + 1] * (1 - t0) + grid[c + 2] * t0));
            high := high + greatest(0, n * (grid[c + 1] * (1 - t1) + grid[c + 2] * t1));
        END IF;
    END LOOP;
END
$$;
COMMENT ON FUNCTION _kde_smooth(kde_synopsis, float8, float8, integer) IS 'pg_kde internal: the smooth part of a range';

-- Count (moment 0) or sum (moment 1) of the rows with lo <= x <= hi, NULL bounds open, with the
-- variance, smoothing-bias allowance and hard bounds of the estimate.
CREATE FUNCTION _kde_range(s kde_synopsis, lo float8, hi float8, moment integer,
                           OUT estimate float8, OUT variance float8, OUT bias float8, OUT low float8,
                           OUT high float8)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    a float8 := coalesce(lo, '-Infinity');
    b float8 := coalesce(hi, 'Infinity');
    atoms float8[] := CASE WHEN moment = 0 THEN s.atom_cum_count ELSE s.atom_cum_sum END;
    exact float8;
    smooth record;
BEGIN
    estimate := 0; variance := 0; bias := 0; low := 0; high := 0;
    IF a > b THEN
        RETURN;
    END IF;
    exact := @extschema@._kde_atoms_upto(s.atom_values, atoms, b, true)
           - @extschema@._kde_atoms_upto(s.atom_values, atoms, a, false);
    IF s.integer_valued THEN
        -- Whole values only: x in [a, b] means x in [ceil(a), floor(b)], each value owning x ± 1/2.
        a := ceil(a) - 0.5;
        b := floor(b) + 0.5;
    END IF;
    smooth := @extschema@._kde_smooth(s, a, b, moment);
    estimate := exact + smooth.estimate;
    variance := smooth.variance;
    bias := smooth.bias;
    low := exact + smooth.low;
    high := exact + smooth.high;
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

-- An interval at the given confidence: estimate ± (z sqrt(variance) + smoothing-bias allowance), never
-- outside the hard bounds.
CREATE FUNCTION _kde_interval(tbl regclass, col text, lo float8, hi float8, confidence float8, moment integer,
                              OUT estimate float8, OUT low float8, OUT high float8)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s @extschema@.kde_synopsis;
    r record;
    half float8;
BEGIN
    IF confidence IS NULL OR NOT (confidence > 0 AND confidence < 1) THEN
        RAISE EXCEPTION 'confidence must be between 0 and 1 (exclusive), got %', confidence
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    s := @extschema@._kde_synopsis_for(tbl, ARRAY[col]);
    r := @extschema@._kde_range(s, lo, hi, moment);
    -- Discretised data (a cell spans few possible values) clusters on them: the binomial model would be
    -- too narrow, so the interval is the hard bounds.
    half := CASE WHEN s.cell_discrete THEN 'Infinity'::float8
                 -- -quantile((1 - c) / 2), not quantile((1 + c) / 2): 1 + c rounds to 2 for c near 1.
                 ELSE -@extschema@._kde_normal_quantile((1 - confidence) / 2) * sqrt(r.variance) + r.bias END;
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
    'approx_count with an interval: heavy values and whole grid cells are exact; only the cells the range cuts are uncertain (binomial spread at the given confidence, within hard bounds)';

CREATE FUNCTION approx_sum_ci(tbl regclass, col text, lo float8, hi float8, confidence float8 DEFAULT 0.95,
                              OUT estimate float8, OUT low float8, OUT high float8)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM @extschema@._kde_interval(tbl, col, lo, hi, confidence, 1) $$;
COMMENT ON FUNCTION approx_sum_ci(regclass, text, float8, float8, float8) IS
    'approx_sum with an interval, as approx_count_ci';
