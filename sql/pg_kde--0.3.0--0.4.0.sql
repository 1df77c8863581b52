-- pg_kde 0.3.0 -> 0.4.0: synopsis format 2 for one column. Cells on the column's value lattice (integers,
-- cents, seconds, days: step), heavy values of a lattice in cells of their own, the KDE's density at the cell
-- boundaries (density, float4) and the shape's error the sample showed (shape_var); cell_cum_offset (the
-- cell's mean comes from its exact sum), lattice, integer_valued and cell_discrete go. A byte budget sizes
-- new synopses (kde_refresh's budget, default 8192 and 65536), and date, timestamp and timestamptz columns
-- get synopses. Synopses built by 0.3.0 are kept and converted: integer columns get step 1, others step 0
-- (continuous); their KDE masses become densities. A request that named the old default grid (2048 points
-- for one column, 256 for a pair, which 0.3.0 wrote into every request) now takes the budget's default.
\echo Use "ALTER EXTENSION pg_kde UPDATE TO '0.4.0'" to load this file. \quit

-- What reads the old payload goes first; it is created anew below.
DROP FUNCTION _kde_range(kde_synopsis, float8, float8, integer);
DROP FUNCTION _kde_smooth(kde_synopsis, float8, float8, integer);
DROP FUNCTION _kde_cell_share(float8, float8, float8, float8);
DROP FUNCTION _kde_cell_mean(float8, float8, float8, float8);
DROP FUNCTION kde_refresh(regclass, text, text, integer, integer, text);
DROP FUNCTION kde_refresh(regclass, text[], text, integer, integer, text);
DROP FUNCTION _kde_refresh(oid, text[], text, integer, integer, text, text);

ALTER TABLE kde_synopsis DROP CONSTRAINT kde_synopsis_well_formed;
ALTER TABLE kde_synopsis ADD COLUMN step float8, ADD COLUMN density float4[], ADD COLUMN shape_var float8;
-- The KDE's mass at a grid point (0.3.0: the sum of Gaussian kernels exp(-u^2/2) over the binned rows) is
-- the density in rows per unit times h sqrt(2 pi); 0.4.0 keeps it relative to the grid's mean density,
-- kde_rows / range (halves: no difference of values near the ends of float8 overflows).
UPDATE kde_synopsis p
SET step = CASE WHEN p.integer_valued THEN 1 ELSE 0 END,
    density = ARRAY(SELECT CASE WHEN k.bandwidth[1] > 0 AND p.kde_rows > 0
                                THEN m / (k.bandwidth[1] * sqrt(2 * pi())) / p.kde_rows
                                     * 2 * (p.grid[p.grid_size] / 2 - p.grid[1] / 2)
                                ELSE 0 END
                    FROM unnest(p.kde_mass) WITH ORDINALITY AS u(m, i) ORDER BY i)::float4[],
    shape_var = 0
FROM kde_catalog k WHERE k.relid = p.relid AND k.cols = p.cols;
ALTER TABLE kde_synopsis ALTER COLUMN step SET NOT NULL, ALTER COLUMN density SET NOT NULL,
    ALTER COLUMN shape_var SET NOT NULL, ALTER COLUMN density SET STORAGE EXTERNAL;
ALTER TABLE kde_synopsis DROP COLUMN integer_valued, DROP COLUMN lattice, DROP COLUMN cell_cum_offset,
    DROP COLUMN kde_mass, DROP COLUMN cell_discrete;
ALTER TABLE kde_synopsis ADD CONSTRAINT kde_synopsis_well_formed CHECK (
    cardinality(cols) = 1 AND kde_rows >= 0 AND step >= 0 AND step < 'Infinity'
    AND shape_var >= 0 AND shape_var < 'Infinity'
    AND grid_size >= 0 AND (grid_size >= 2 OR kde_rows = 0)
    AND cardinality(grid) = grid_size AND cardinality(cell_cum_count) = grid_size
    AND cardinality(cell_cum_sum) = grid_size AND cardinality(density) = grid_size
    AND cardinality(atom_cum_count) = cardinality(atom_values) AND cardinality(atom_cum_sum) = cardinality(atom_values)
    AND @extschema@._kde_is_vector(atom_values)
    AND @extschema@._kde_is_vector(atom_cum_count) AND @extschema@._kde_is_vector(atom_cum_sum)
    AND @extschema@._kde_is_vector(grid)
    AND @extschema@._kde_is_vector(cell_cum_count) AND @extschema@._kde_is_vector(cell_cum_sum)
    AND @extschema@._kde_is_vector(density));
COMMENT ON TABLE kde_synopsis IS 'pg_kde 1-D synopsis payloads: exact heavy values and cells, shaped inside by a KDE';

-- Requests: the old default grid sizes were written into every request; they now leave the grid to the budget.
UPDATE kde_catalog SET requested = requested - 'grid_size'
WHERE (kind = '1d' AND requested ->> 'grid_size' = '2048') OR (kind = '2d' AND requested ->> 'grid_size' = '256');

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
        n := s.cell_cum_count[c + 2] - s.cell_cum_count[c + 1];
        -- (On a lattice no row sits on a boundary; a continuous column's rows may sit on b.)
        CONTINUE WHEN n <= 0 OR t1 < t0 OR (t1 = t0 AND q > 0);
        IF t0 = 0 AND t1 = 1 THEN  -- the range holds this cell whole: exact
            estimate := estimate + cells[c + 2] - cells[c + 1];
            low := low + cells[c + 2] - cells[c + 1];
            high := high + cells[c + 2] - cells[c + 1];
            CONTINUE;
        END IF;
        -- The KDE's densities at the ends relative to the cell's mean density (stored relative to the grid's).
        -- The cell's mean position from its exact sum (½ where sums ran past float8's range).
        mean := (((s.cell_cum_sum[c + 2] - s.cell_cum_sum[c + 1]) / n) / 2 - g0 / 2) / w;
        mean := CASE WHEN mean > '-Infinity' AND mean < 'Infinity' THEN least(1, greatest(0, mean)) ELSE 0.5 END;
        cut := @extschema@._kde_cut(s.density[c + 1] * (w / half_range) * (s.kde_rows / n),
            s.density[c + 2] * (w / half_range) * (s.kde_rows / n), mean, t0, t1);
        share := cut.share;
        -- Binomial, plus the shape's error. A cut cell is never certain: its share counts as at least one
        -- row's each side.
        spread := least(greatest(share, 1 / (n + 1)), n / (n + 1));
        spread := spread * (1 - spread) * (n + 4 * n * n * s.shape_var);
        IF moment = 0 THEN
            estimate := estimate + n * share;
            variance := variance + spread;
            doubt := doubt + n * cut.apart;
            high := high + n;
        ELSE
            pos := cut.pos;
            -- Points inside a cell as weighted means of its ends (no difference of values to overflow).
            x := g0 * (1 - pos) + g1 * pos;
            estimate := estimate + n * share * x;
            variance := variance + spread * x * x;
            doubt := doubt + n * cut.apart * abs(x);
            low := low + least(0, n * (g0 * (1 - t0) + g1 * t0));
            high := high + greatest(0, n * (g0 * (1 - t1) + g1 * t1));
        END IF;
    END LOOP;
    -- The shape's own uncertainty: half of how far its shares are from the straight line's.
    variance := variance + (0.5 * doubt) ^ 2;
END
$$;
COMMENT ON FUNCTION _kde_range(kde_synopsis, float8, float8, integer) IS 'pg_kde internal: a moment over a range';

CREATE FUNCTION _kde_refresh(relid oid, cols text[], method text, sample_size integer, grid_size integer,
                             backend text, budget integer, extversion text) RETURNS jsonb
LANGUAGE plpython3u VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
from pg_kde import sql_entry
return sql_entry.refresh(plpy, GD, relid, cols, method, sample_size, grid_size, backend, budget, extversion)
$$;
COMMENT ON FUNCTION _kde_refresh(oid, text[], text, integer, integer, text, integer, text) IS 'pg_kde internal: build a synopsis';

CREATE FUNCTION kde_refresh(tbl regclass, col text, method text DEFAULT 'auto', sample_size integer DEFAULT 50000,
                            grid_size integer DEFAULT NULL, backend text DEFAULT 'auto',
                            budget integer DEFAULT NULL) RETURNS jsonb
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@._kde_raise_if_error(
        @extschema@._kde_refresh(tbl::oid, ARRAY[col], method, sample_size, grid_size, backend, budget, '0.4.0'))
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
        @extschema@._kde_refresh(tbl::oid, cols, method, sample_size, grid_size, backend, budget, '0.4.0'))
$$;
COMMENT ON FUNCTION kde_refresh(regclass, text[], text, integer, integer, text, integer) IS
    'Build or rebuild the synopsis of one column or, with two, of a pair within budget bytes (default 8192 and 65536; method: auto = lscv_H for a pair); returns a summary';

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
    half := -@extschema@._kde_normal_quantile((1 - confidence) / 2) * sqrt(r.variance);
    estimate := r.estimate;
    low := greatest(r.low, r.estimate - half);
    high := least(r.high, r.estimate + half);
END
$$;
COMMENT ON FUNCTION _kde_interval(regclass, text, float8, float8, float8, integer) IS 'pg_kde internal: an interval';

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
                '0.4.0'));
            n := n + 1;
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'pg_kde: could not refresh the synopsis of % of %: %', array_to_string(r.cols, ', '), r.relid, SQLERRM;
        END;
    END LOOP;
    RETURN n;
END
$$;
COMMENT ON FUNCTION kde_refresh_stale() IS
    'Refresh every stale synopsis the current role may read, each on its own (failures are warnings); returns how many were refreshed';

CREATE OR REPLACE FUNCTION kde_bandwidth(tbl regclass, cols text[], method text DEFAULT 'auto', backend text DEFAULT 'auto',
                              sample_size integer DEFAULT 10000) RETURNS float8[]
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT ARRAY(SELECT jsonb_array_elements_text(@extschema@._kde_raise_if_error(
        @extschema@._kde_bandwidth(tbl::oid, cols, method, backend, sample_size, '0.4.0')) -> 'bandwidth')::float8)
$$;
COMMENT ON FUNCTION kde_bandwidth(regclass, text[], text, text, integer) IS
    'Bandwidth of a sample of rows with all columns non-NULL: {h} for one column (data units), else H row-major';

COMMENT ON FUNCTION approx_count_ci(regclass, text, float8, float8, float8) IS
    'approx_count with an interval: heavy values and whole cells are exact; only the cells the range cuts are uncertain (estimate ± z·sd at the given confidence, within hard bounds that always hold the answer as of the build)';

CREATE FUNCTION approx_avg(tbl regclass, avg_col text, pred_col text, lo float8, hi float8) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN c > 0 THEN s / c END
    FROM (SELECT @extschema@.approx_sum(tbl, avg_col, pred_col, lo, hi) AS s,
                 @extschema@.approx_count(tbl, pred_col, lo, hi, avg_col, NULL, NULL) AS c) q
$$;
COMMENT ON FUNCTION approx_avg(regclass, text, text, float8, float8) IS
    'Approximate average of avg_col over rows with lo <= pred_col <= hi (NULL when none), from the pair''s 2-D synopsis';

CREATE FUNCTION approx_count(tbl regclass, col1 text, lo1 timestamptz, hi1 timestamptz, col2 text, lo2 float8, hi2 float8)
RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.approx_count(tbl, col1, t.a, t.b, col2, lo2, hi2) FROM @extschema@._kde_time_bounds(tbl, col1, lo1, hi1) t $$;
COMMENT ON FUNCTION approx_count(regclass, text, timestamptz, timestamptz, text, float8, float8) IS
    'approx_count of a box whose first column is a date, timestamp or timestamptz column';

CREATE FUNCTION approx_count(tbl regclass, col1 text, lo1 text, hi1 text, col2 text, lo2 text, hi2 text) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@.approx_count(tbl, col1, @extschema@._kde_text_bound(tbl, col1, lo1),
                                    @extschema@._kde_text_bound(tbl, col1, hi1), col2,
                                    @extschema@._kde_text_bound(tbl, col2, lo2), @extschema@._kde_text_bound(tbl, col2, hi2))
$$;
COMMENT ON FUNCTION approx_count(regclass, text, text, text, text, text, text) IS
    'approx_count of a box with bounds given as text (untyped literals), read as each column''s own type';

CREATE FUNCTION approx_sum(tbl regclass, sum_col text, pred_col text, lo timestamptz, hi timestamptz) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.approx_sum(tbl, sum_col, pred_col, t.a, t.b) FROM @extschema@._kde_time_bounds(tbl, pred_col, lo, hi) t $$;
COMMENT ON FUNCTION approx_sum(regclass, text, text, timestamptz, timestamptz) IS
    'approx_sum of sum_col over a time range of pred_col (a date, timestamp or timestamptz column)';

CREATE FUNCTION approx_sum(tbl regclass, sum_col text, pred_col text, lo text, hi text) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@.approx_sum(tbl, sum_col, pred_col, @extschema@._kde_text_bound(tbl, pred_col, lo),
                                  @extschema@._kde_text_bound(tbl, pred_col, hi))
$$;
COMMENT ON FUNCTION approx_sum(regclass, text, text, text, text) IS
    'approx_sum with bounds given as text (untyped literals), read as pred_col''s own type';

CREATE FUNCTION approx_avg(tbl regclass, avg_col text, pred_col text, lo timestamptz, hi timestamptz) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.approx_avg(tbl, avg_col, pred_col, t.a, t.b) FROM @extschema@._kde_time_bounds(tbl, pred_col, lo, hi) t $$;
COMMENT ON FUNCTION approx_avg(regclass, text, text, timestamptz, timestamptz) IS
    'approx_avg of avg_col over a time range of pred_col (a date, timestamp or timestamptz column)';

CREATE FUNCTION approx_avg(tbl regclass, avg_col text, pred_col text, lo text, hi text) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@.approx_avg(tbl, avg_col, pred_col, @extschema@._kde_text_bound(tbl, pred_col, lo),
                                  @extschema@._kde_text_bound(tbl, pred_col, hi))
$$;
COMMENT ON FUNCTION approx_avg(regclass, text, text, text, text) IS
    'approx_avg with bounds given as text (untyped literals), read as pred_col''s own type';
