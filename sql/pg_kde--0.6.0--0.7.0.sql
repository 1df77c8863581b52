-- pg_kde 0.6.0 -> 0.7.0: intervals of a range inside one cut cell add the shape's errors at its two cuts
-- (_kde_range); every function that names the version is replaced. The catalog is unchanged: synopses
-- built by 0.6.0 answer as before, with those intervals.
\echo Use "ALTER EXTENSION pg_kde UPDATE TO '0.7.0'" to load this file. \quit

-- budget: bytes the synopsis may take (its catalog rows, as pg_column_size counts them); NULL: 8192 for one
-- column, 65536 for a pair. grid_size (points per axis), when given, sets the grid instead.
CREATE OR REPLACE FUNCTION kde_refresh(tbl regclass, col text, method text DEFAULT 'auto', sample_size integer DEFAULT 50000,
                            grid_size integer DEFAULT NULL, backend text DEFAULT 'auto',
                            budget integer DEFAULT NULL) RETURNS jsonb
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@._kde_raise_if_error(
        @extschema@._kde_refresh(tbl::oid, ARRAY[col], method, sample_size, grid_size, backend, budget, '0.7.0'))
$$;
CREATE OR REPLACE FUNCTION kde_refresh(tbl regclass, cols text[], method text DEFAULT 'auto', sample_size integer DEFAULT 5000,
                            grid_size integer DEFAULT NULL, backend text DEFAULT 'auto',
                            budget integer DEFAULT NULL) RETURNS jsonb
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@._kde_raise_if_error(
        @extschema@._kde_refresh(tbl::oid, cols, method, sample_size, grid_size, backend, budget, '0.7.0'))
$$;
CREATE OR REPLACE FUNCTION kde_bandwidth(tbl regclass, cols text[], method text DEFAULT 'auto', backend text DEFAULT 'auto',
                              sample_size integer DEFAULT 10000) RETURNS float8[]
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT ARRAY(SELECT jsonb_array_elements_text(@extschema@._kde_raise_if_error(
        @extschema@._kde_bandwidth(tbl::oid, cols, method, backend, sample_size, '0.7.0')) -> 'bandwidth')::float8)
$$;
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
CREATE OR REPLACE FUNCTION _kde_range(s kde_synopsis, lo float8, hi float8, moment integer,
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
                '0.7.0'));
            n := n + 1;
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'pg_kde: could not refresh the synopsis of % of %: %', array_to_string(r.cols, ', '), r.relid, SQLERRM;
        END;
    END LOOP;
    RETURN n;
END
$$;
