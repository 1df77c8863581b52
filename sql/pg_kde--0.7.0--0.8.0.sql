-- pg_kde 0.7.0 -> 0.8.0: a range's count and sum (_kde_range) are computed in C (extension/range.c), with
-- float8 arithmetic as IEEE 754 has it: sums of values near 1e300 and near 1e-300 no longer fail with "value
-- out of range", and a NaN bound is an error; _kde_cut and _kde_atoms_upto, which only _kde_range called, go.
-- A 2-D refresh scans its table with the aggregate _kde_cells2 (extension/cells2.c), reading each column
-- through _kde_value; a box's bound is on a grid line only within two ulps of it (_kde_grid_pos). Every
-- function that names the version is replaced. The catalog is unchanged: synopses built by 0.7.0 answer as
-- before.
\echo Use "ALTER EXTENSION pg_kde UPDATE TO '0.8.0'" to load this file. \quit

-- A value of any type the scans take as they read it: _kde_float8's float8 of a numeric, a float8 itself, a
-- time's epoch seconds (a timestamp's or a date's wall-clock time as UTC).
CREATE OR REPLACE FUNCTION _kde_value(numeric) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_float8' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION _kde_value(float8) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_float8_float8' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION _kde_value(timestamptz) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_float8_timestamp' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION _kde_value(timestamp) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_float8_timestamp' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION _kde_value(date) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_float8_date' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_value(numeric) IS 'pg_kde internal: a value as the scans read it';
COMMENT ON FUNCTION _kde_value(float8) IS 'pg_kde internal: a value as the scans read it';
COMMENT ON FUNCTION _kde_value(timestamptz) IS 'pg_kde internal: epoch seconds, as the scans read them';
COMMENT ON FUNCTION _kde_value(timestamp) IS 'pg_kde internal: epoch seconds, as the scans read them';
COMMENT ON FUNCTION _kde_value(date) IS 'pg_kde internal: epoch seconds, as the scans read them';
-- The 2-D refresh's scan (extension/cells2.c): per cell of two grids' product, its rows, the exact sums of its
-- values in whole quanta of each axis and the sums of their offsets in the cell (t1, t2, t1 t2, in units of
-- 2^-60); per cell of each axis the min and max of its values; the pair's facts; and, given each row's ctid
-- and table, a share and a seed, the repeatable row sample of pairs _kde_sample's hash keeps. A bytea state
-- with a combine function, as _kde_cells'.
CREATE OR REPLACE FUNCTION _kde_cells2_step(bytea, float8, float8, float8[], float8[], float8, float8, tid, oid, float8, int8)
RETURNS bytea AS 'MODULE_PATHNAME', 'kde_cells2_step' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE OR REPLACE FUNCTION _kde_cells2_combine(bytea, bytea) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_cells2_combine' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE AGGREGATE _kde_cells2(float8, float8, float8[], float8[], float8, float8, tid, oid, float8, int8) (
    SFUNC = _kde_cells2_step, STYPE = bytea, COMBINEFUNC = _kde_cells2_combine, PARALLEL = SAFE);
REVOKE EXECUTE ON FUNCTION _kde_cells2_step(bytea, float8, float8, float8[], float8[], float8, float8, tid, oid, float8, int8),
    _kde_cells2_combine(bytea, bytea) FROM PUBLIC;
COMMENT ON AGGREGATE _kde_cells2(float8, float8, float8[], float8[], float8, float8, tid, oid, float8, int8) IS 'pg_kde internal: the refresh''s scan of a pair of columns';
-- budget: bytes the synopsis may take (its catalog rows, as pg_column_size counts them); NULL: 8192 for one
-- column, 65536 for a pair. grid_size (points per axis), when given, sets the grid instead.
CREATE OR REPLACE FUNCTION kde_refresh(tbl regclass, col text, method text DEFAULT 'auto', sample_size integer DEFAULT 50000,
                            grid_size integer DEFAULT NULL, backend text DEFAULT 'auto',
                            budget integer DEFAULT NULL) RETURNS jsonb
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@._kde_raise_if_error(
        @extschema@._kde_refresh(tbl::oid, ARRAY[col], method, sample_size, grid_size, backend, budget, '0.8.0'))
$$;
CREATE OR REPLACE FUNCTION kde_refresh(tbl regclass, cols text[], method text DEFAULT 'auto', sample_size integer DEFAULT 5000,
                            grid_size integer DEFAULT NULL, backend text DEFAULT 'auto',
                            budget integer DEFAULT NULL) RETURNS jsonb
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@._kde_raise_if_error(
        @extschema@._kde_refresh(tbl::oid, cols, method, sample_size, grid_size, backend, budget, '0.8.0'))
$$;
CREATE OR REPLACE FUNCTION kde_bandwidth(tbl regclass, cols text[], method text DEFAULT 'auto', backend text DEFAULT 'auto',
                              sample_size integer DEFAULT 10000) RETURNS float8[]
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT ARRAY(SELECT jsonb_array_elements_text(@extschema@._kde_raise_if_error(
        @extschema@._kde_bandwidth(tbl::oid, cols, method, backend, sample_size, '0.8.0')) -> 'bandwidth')::float8)
$$;
-- Fractional grid-index coordinate of x on a grid (0 at grid[1], cardinality - 1 at the last point).
CREATE OR REPLACE FUNCTION _kde_grid_pos(grid float8[], x float8) RETURNS float8
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
CREATE OR REPLACE FUNCTION _kde_range(s kde_synopsis, lo float8, hi float8, moment integer,
                           OUT estimate float8, OUT variance float8, OUT low float8, OUT high float8)
AS 'MODULE_PATHNAME', 'kde_range' LANGUAGE C IMMUTABLE PARALLEL SAFE;
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
                '0.8.0'));
            n := n + 1;
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'pg_kde: could not refresh the synopsis of % of %: %', array_to_string(r.cols, ', '), r.relid, SQLERRM;
        END;
    END LOOP;
    RETURN n;
END
$$;

DROP FUNCTION _kde_cut(float8, float8, float8, float8, float8);
DROP FUNCTION _kde_atoms_upto(float8[], float8[], float8, boolean);
