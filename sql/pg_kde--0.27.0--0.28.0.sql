-- pg_kde 0.27.0 -> 0.28.0: a 2-D synopsis' sum over a box whose running sums of the summed column run past
-- float8's range (stored as +-inf) is a clear error (_kde_box), where it read NaN, an infinity of either sign,
-- or failed with "value out of range: overflow". No table changes; synopses stored before are read as before.
-- approx_count_ci gains a text form (untyped literals and NULLs). Every function that names the version is
-- replaced.
\echo Use "ALTER EXTENSION pg_kde UPDATE TO '0.28.0'" to load this file. \quit

-- What a box [a1, b1] x [a2, b2] holds: moment 0 the row count, moment k (1 or 2) the sum of column k.
-- A pair stored as its exact frequency table answers from it, exactly. Otherwise counts: whole cells inside
-- the box exactly, the strip of cells the box cuts shaped by the KDE; sums: the exact summed-area table of
-- values, uniform within cells.
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
    offs integer;
    base integer;
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
        offs := (moment - 1) * m1 * m2;
        -- The four reads take 16 running sums; each below 2^1021 in magnitude, they and the box stay finite.
        -- Beyond (a column's sums near or past float8's range; stored as +-inf past it) the box could overflow or
        -- read inf - inf: a clear error (0.28.0; before, NaN, or "value out of range: overflow").
        FOR c IN 0..3 LOOP
            base := offs + least(floor(CASE WHEN c < 2 THEN pa1 ELSE pb1 END)::integer, m1 - 2) * m2
                  + least(floor(CASE WHEN c % 2 = 0 THEN pa2 ELSE pb2 END)::integer, m2 - 2) + 1;
            IF NOT (abs(sums[base]) < 2.247116418577895e307 AND abs(sums[base + 1]) < 2.247116418577895e307
                    AND abs(sums[base + m2]) < 2.247116418577895e307 AND abs(sums[base + m2 + 1]) < 2.247116418577895e307) THEN
                RAISE EXCEPTION 'pg_kde: the 2-D synopsis of %, % holds running sums of % near or past float8''s largest (2^1021 or more) where this box reads them',
                    s.cols[1], s.cols[2], s.cols[moment]
                    USING ERRCODE = 'numeric_value_out_of_range',
                          HINT = format('Sum %I from its 1-D synopsis (approx_sum), or over a synopsis of 3 or more columns.', s.cols[moment]);
            END IF;
        END LOOP;
        RETURN @extschema@._kde_sat_at(sums, m1, m2, offs, pb1, pb2) - @extschema@._kde_sat_at(sums, m1, m2, offs, pa1, pb2)
             - @extschema@._kde_sat_at(sums, m1, m2, offs, pb1, pa2) + @extschema@._kde_sat_at(sums, m1, m2, offs, pa1, pa2);
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
COMMENT ON FUNCTION _kde_box(kde_synopsis_2d, float8, float8, float8, float8, integer) IS 'pg_kde internal: a box query';

-- Bounds as text (untyped literals, or untyped NULLs: open), read as the column's own type, as approx_count's
-- text form (0.28.0: approx_count_ci('t', 'v', NULL, NULL) and untyped literal bounds were "function ... is
-- not unique" between the float8 and time forms).
CREATE FUNCTION approx_count_ci(tbl regclass, col text, lo text, hi text, confidence float8 DEFAULT 0.95,
                                OUT estimate float8, OUT low float8, OUT high float8)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT i.* FROM @extschema@.approx_count_ci(tbl, col, @extschema@._kde_text_bound(tbl, col, lo),
                                                  @extschema@._kde_text_bound(tbl, col, hi), confidence) i $$;
COMMENT ON FUNCTION approx_count_ci(regclass, text, text, text, float8) IS
    'approx_count_ci with bounds given as text (untyped literals), read as the column''s own type';

CREATE OR REPLACE FUNCTION kde_refresh(tbl regclass, col text, method text DEFAULT 'auto', sample_size integer DEFAULT 50000,
                            grid_size integer DEFAULT NULL, backend text DEFAULT 'auto',
                            budget integer DEFAULT NULL) RETURNS jsonb
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@._kde_raise_if_error(
        @extschema@._kde_refresh(tbl::oid, ARRAY[col], method, sample_size, grid_size, backend, budget, '0.28.0'))
$$;

CREATE OR REPLACE FUNCTION kde_refresh(tbl regclass, cols text[], method text DEFAULT 'auto', sample_size integer DEFAULT 5000,
                            grid_size integer DEFAULT NULL, backend text DEFAULT 'auto',
                            budget integer DEFAULT NULL) RETURNS jsonb
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@._kde_raise_if_error(
        @extschema@._kde_refresh(tbl::oid, cols, method, sample_size, grid_size, backend, budget, '0.28.0'))
$$;

CREATE OR REPLACE FUNCTION kde_bandwidth(tbl regclass, cols text[], method text DEFAULT 'auto', backend text DEFAULT 'auto',
                              sample_size integer DEFAULT 10000) RETURNS float8[]
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT ARRAY(SELECT jsonb_array_elements_text(@extschema@._kde_raise_if_error(
        @extschema@._kde_bandwidth(tbl::oid, cols, method, backend, sample_size, '0.28.0')) -> 'bandwidth')::float8)
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
                '0.28.0'));
            n := n + 1;
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'pg_kde: could not refresh the synopsis of % of %: %', array_to_string(r.cols, ', '), r.relid, SQLERRM;
        END;
    END LOOP;
    RETURN n;
END
$$;
