-- pg_kde 0.9.0 -> 0.10.0: a pair whose two axes are discretised and whose distinct values fit the budget is
-- stored as its exact frequency table (kde_synopsis_2d.pair_pack, read by _kde_pair_box in the library):
-- every box is exact; synopses built by 0.9.0 answer as before (their packs are empty) until their next
-- refresh. A count's interval (approx_count_ci) is widened by half a row on each side, the continuity
-- correction of the normal approximation to a whole number (where a range's expected rows are below one, a
-- second of a timestamp column, the interval now holds two rows for an estimate of 0.35). The variance of a
-- range inside one cell, which extension/range.c computes, changes with the library, not here. Every
-- function that names the version is replaced.
\echo Use "ALTER EXTENSION pg_kde UPDATE TO '0.10.0'" to load this file. \quit

ALTER TABLE kde_synopsis_2d ADD COLUMN pair_pack bytea NOT NULL DEFAULT '';
ALTER TABLE kde_synopsis_2d ALTER COLUMN pair_pack SET STORAGE EXTERNAL;
ALTER TABLE kde_synopsis_2d ADD CONSTRAINT kde_synopsis_2d_pairs_well_formed CHECK (
    octet_length(pair_pack) = 0
    OR (cardinality(lattice1) > 0 AND cardinality(lattice2) > 0 AND grid_size = ARRAY[2, 2]));

CREATE FUNCTION _kde_pair_box(pack bytea, lattice1 float8[], lattice2 float8[], a1 float8, b1 float8, a2 float8,
                              b2 float8, moment integer) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_pair_box' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_pair_box(bytea, float8[], float8[], float8, float8, float8, float8, integer) IS
    'pg_kde internal: a box of a pair''s exact frequency table';

CREATE OR REPLACE FUNCTION _kde_box(s kde_synopsis_2d, a1 float8, b1 float8, a2 float8, b2 float8, moment integer) RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    m1 integer := s.grid_size[1];
    m2 integer := s.grid_size[2];
    counts float8[] := s.sat_count;
    kde float8[] := s.kde_sat;
    sums float8[];
    pa1 float8; pb1 float8; pa2 float8; pb2 float8;
    ia1 integer; ib1 integer; ia2 integer; ib2 integer;
    inner_exact float8 := 0;
    inner_kde float8 := 0;
    box_kde float8;
    outer_exact float8;
BEGIN
    IF octet_length(s.pair_pack) > 0 THEN
        RETURN @extschema@._kde_pair_box(s.pair_pack, s.lattice1, s.lattice2, a1, b1, a2, b2, moment);
    END IF;
    IF s.integer_valued[1] THEN a1 := ceil(a1) - 0.5; b1 := floor(b1) + 0.5; END IF;
    IF s.integer_valued[2] THEN a2 := ceil(a2) - 0.5; b2 := floor(b2) + 0.5; END IF;
    IF a1 > b1 OR a2 > b2 THEN
        RETURN 0;
    END IF;
    IF cardinality(s.lattice1) > 0 THEN
        a1 := @extschema@._kde_lattice_bound(s.lattice1, s.grid1, a1, false);
        b1 := @extschema@._kde_lattice_bound(s.lattice1, s.grid1, b1, true);
    END IF;
    IF cardinality(s.lattice2) > 0 THEN
        a2 := @extschema@._kde_lattice_bound(s.lattice2, s.grid2, a2, false);
        b2 := @extschema@._kde_lattice_bound(s.lattice2, s.grid2, b2, true);
    END IF;
    -- (a point [v, v] on a continuous axis holds v's rows where v has a cell of its own: _kde_upper_pos)
    IF a1 > b1 OR a2 > b2 OR (cardinality(s.lattice1) > 0 AND a1 = b1) OR (cardinality(s.lattice2) > 0 AND a2 = b2) THEN
        RETURN 0;
    END IF;
    pa1 := @extschema@._kde_grid_pos(s.grid1, a1);
    pb1 := @extschema@._kde_upper_pos(s.grid1, b1);
    pa2 := @extschema@._kde_grid_pos(s.grid2, a2);
    pb2 := @extschema@._kde_upper_pos(s.grid2, b2);
    IF pa1 >= pb1 OR pa2 >= pb2 THEN
        RETURN 0;
    END IF;
    IF moment > 0 THEN
        sums := s.sat_sum;
        RETURN @extschema@._kde_sat_at(sums, m1, m2, (moment - 1) * m1 * m2, pb1, pb2)
             - @extschema@._kde_sat_at(sums, m1, m2, (moment - 1) * m1 * m2, pa1, pb2)
             - @extschema@._kde_sat_at(sums, m1, m2, (moment - 1) * m1 * m2, pb1, pa2)
             + @extschema@._kde_sat_at(sums, m1, m2, (moment - 1) * m1 * m2, pa1, pa2);
    END IF;
    box_kde := @extschema@._kde_sat_at(kde, m1, m2, 0, pb1, pb2) - @extschema@._kde_sat_at(kde, m1, m2, 0, pa1, pb2)
             - @extschema@._kde_sat_at(kde, m1, m2, 0, pb1, pa2) + @extschema@._kde_sat_at(kde, m1, m2, 0, pa1, pa2);
    ia1 := ceil(pa1)::integer; ib1 := floor(pb1)::integer; ia2 := ceil(pa2)::integer; ib2 := floor(pb2)::integer;
    IF ia1 < ib1 AND ia2 < ib2 THEN
        inner_exact := counts[ib1 * m2 + ib2 + 1] - counts[ia1 * m2 + ib2 + 1] - counts[ib1 * m2 + ia2 + 1]
                     + counts[ia1 * m2 + ia2 + 1];
        inner_kde := kde[ib1 * m2 + ib2 + 1] - kde[ia1 * m2 + ib2 + 1] - kde[ib1 * m2 + ia2 + 1] + kde[ia1 * m2 + ia2 + 1];
    END IF;
    ia1 := floor(pa1)::integer; ib1 := ceil(pb1)::integer; ia2 := floor(pa2)::integer; ib2 := ceil(pb2)::integer;
    outer_exact := counts[ib1 * m2 + ib2 + 1] - counts[ia1 * m2 + ib2 + 1] - counts[ib1 * m2 + ia2 + 1]
                 + counts[ia1 * m2 + ia2 + 1];
    RETURN least(greatest(inner_exact + (box_kde - inner_kde), inner_exact), outer_exact);
END
$$;

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
