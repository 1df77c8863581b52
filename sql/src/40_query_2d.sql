-- 2-D: the synopsis of a pair in either order (swapped tells which), checked as _kde_synopsis_for.
CREATE FUNCTION _kde_synopsis2_for(tbl regclass, col1 text, col2 text, OUT s kde_synopsis_2d, OUT swapped boolean)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ident record;
    h record;
BEGIN
    ident := @extschema@._kde_columns(tbl, ARRAY[col1, col2]);
    SELECT k.cols, k.built_relid, k.attnums, k.coltypes, k.cols <> ARRAY[col1, col2] AS swapped INTO h
    FROM @extschema@.kde_catalog k WHERE k.relid = tbl AND k.cols IN (ARRAY[col1, col2], ARRAY[col2, col1])
    ORDER BY k.cols <> ARRAY[col1, col2] LIMIT 1;  -- the pair as named first
    IF FOUND THEN
        SELECT * INTO s FROM @extschema@.kde_synopsis_2d p WHERE p.relid = tbl AND p.cols = h.cols;
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no pg_kde synopsis for columns %, % of %', col1, col2, tbl
            USING ERRCODE = 'undefined_object',
                  HINT = format('Build it with: SELECT @extschema@.kde_refresh(%L, ARRAY[%L, %L]);', tbl::text, col1, col2);
    END IF;
    swapped := h.swapped;
    IF swapped THEN
        PERFORM @extschema@._kde_check_identity(tbl, h.cols, h.built_relid, h.attnums, h.coltypes,
                                                ARRAY[ident.attnums[2], ident.attnums[1]],
                                                ARRAY[ident.coltypes[2], ident.coltypes[1]]);
    ELSE
        PERFORM @extschema@._kde_check_identity(tbl, h.cols, h.built_relid, h.attnums, h.coltypes, ident.attnums, ident.coltypes);
    END IF;
END
$$;
COMMENT ON FUNCTION _kde_synopsis2_for(regclass, text, text) IS 'pg_kde internal: a 2-D synopsis, privilege-checked';

-- A summed-area table (m1 x m2, row-major, starting at offset) interpolated bilinearly at fractional grid
-- coordinates: exact at grid points, and exact for a density uniform within each cell.
CREATE FUNCTION _kde_sat_at(sat float8[], m1 integer, m2 integer, offs integer, p1 float8, p2 float8) RETURNS float8
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    i integer := least(floor(p1)::integer, m1 - 2);
    j integer := least(floor(p2)::integer, m2 - 2);
    f float8 := p1 - i;
    g float8 := p2 - j;
    base integer := offs + i * m2 + j + 1;
BEGIN
    RETURN (1 - f) * (1 - g) * sat[base] + (1 - f) * g * sat[base + 1]
         + f * (1 - g) * sat[base + m2] + f * g * sat[base + m2 + 1];
END
$$;
COMMENT ON FUNCTION _kde_sat_at(float8[], integer, integer, integer, float8, float8) IS 'pg_kde internal: summed-area lookup';

-- A box of a pair's exact frequency table (pair_pack): its rows counted, or their values of column 1 or 2
-- summed (extension/atoms.c; query.pairs_box).
CREATE FUNCTION _kde_pair_box(pack bytea, lattice1 float8[], lattice2 float8[], a1 float8, b1 float8, a2 float8,
                              b2 float8, moment integer) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_pair_box' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_pair_box(bytea, float8[], float8[], float8, float8, float8, float8, integer) IS
    'pg_kde internal: a box of a pair''s exact frequency table';

-- What a box [a1, b1] x [a2, b2] holds: moment 0 the row count, moment k (1 or 2) the sum of column k.
-- A pair stored as its exact frequency table answers from it, exactly. Otherwise counts: whole cells inside
-- the box exactly, the strip of cells the box cuts shaped by the KDE; sums: the exact summed-area table of
-- values, uniform within cells.
CREATE FUNCTION _kde_box(s kde_synopsis_2d, a1 float8, b1 float8, a2 float8, b2 float8, moment integer) RETURNS float8
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

CREATE FUNCTION approx_count(tbl regclass, col1 text, lo1 float8, hi1 float8, col2 text, lo2 float8, hi2 float8)
RETURNS float8
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r record;
    a1 float8 := coalesce(lo1, '-Infinity'); b1 float8 := coalesce(hi1, 'Infinity');
    a2 float8 := coalesce(lo2, '-Infinity'); b2 float8 := coalesce(hi2, 'Infinity');
BEGIN
    r := @extschema@._kde_synopsis2_for(tbl, col1, col2);
    IF 'NaN' IN (a1, b1, a2, b2) THEN  -- (as the 1-D and many-column forms; 0.28.0 read NaN as SQL's largest)
        RAISE EXCEPTION 'pg_kde: bounds must not be NaN (a NULL bound leaves that side open)'
            USING ERRCODE = 'invalid_parameter_value';
    ELSIF a1 > b1 OR a2 > b2 THEN
        RETURN 0;
    ELSIF r.swapped THEN
        RETURN @extschema@._kde_box(r.s, a2, b2, a1, b1, 0);
    END IF;
    RETURN @extschema@._kde_box(r.s, a1, b1, a2, b2, 0);
END
$$;
COMMENT ON FUNCTION approx_count(regclass, text, float8, float8, text, float8, float8) IS
    'Approximate count of rows with lo1 <= col1 <= hi1 and lo2 <= col2 <= hi2, jointly, from the pair''s 2-D synopsis';

CREATE FUNCTION approx_sum(tbl regclass, sum_col text, pred_col text, lo float8, hi float8) RETURNS float8
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r record;
    a float8 := coalesce(lo, '-Infinity');
    b float8 := coalesce(hi, 'Infinity');
BEGIN
    r := @extschema@._kde_synopsis2_for(tbl, sum_col, pred_col);
    IF 'NaN' IN (a, b) THEN
        RAISE EXCEPTION 'pg_kde: bounds must not be NaN (a NULL bound leaves that side open)'
            USING ERRCODE = 'invalid_parameter_value';
    ELSIF a > b THEN
        RETURN 0;
    ELSIF r.swapped THEN  -- stored as (pred_col, sum_col): sum column 2 over the box pred_col in [a, b]
        RETURN @extschema@._kde_box(r.s, a, b, '-Infinity', 'Infinity', 2);
    END IF;
    RETURN @extschema@._kde_box(r.s, '-Infinity', 'Infinity', a, b, 1);
END
$$;
COMMENT ON FUNCTION approx_sum(regclass, text, text, float8, float8) IS
    'Approximate sum of sum_col over rows with lo <= pred_col <= hi, from the pair''s 2-D synopsis';

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

-- Time axes (see the 1-D functions' time types): timestamptz bounds on a date, timestamp or timestamptz
-- column, text bounds (untyped literals) read as each column's own type.
CREATE FUNCTION approx_count(tbl regclass, col1 text, lo1 timestamptz, hi1 timestamptz, col2 text, lo2 float8, hi2 float8)
RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.approx_count(tbl, col1, t.a, t.b, col2, lo2, hi2) FROM @extschema@._kde_time_bounds(tbl, col1, lo1, hi1) t $$;
COMMENT ON FUNCTION approx_count(regclass, text, timestamptz, timestamptz, text, float8, float8) IS
    'approx_count of a box whose first column is a date, timestamp or timestamptz column';

CREATE FUNCTION approx_count(tbl regclass, col1 text, lo1 timestamp, hi1 timestamp, col2 text, lo2 float8, hi2 float8)
RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.approx_count(tbl, col1, t.a, t.b, col2, lo2, hi2) FROM @extschema@._kde_time_bounds(tbl, col1, lo1, hi1) t $$;
COMMENT ON FUNCTION approx_count(regclass, text, timestamp, timestamp, text, float8, float8) IS
    'approx_count of a box whose first column is a date, timestamp or timestamptz column, timestamp bounds';

CREATE FUNCTION approx_count(tbl regclass, col1 text, lo1 date, hi1 date, col2 text, lo2 float8, hi2 float8)
RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.approx_count(tbl, col1, t.a, t.b, col2, lo2, hi2) FROM @extschema@._kde_time_bounds(tbl, col1, lo1, hi1) t $$;
COMMENT ON FUNCTION approx_count(regclass, text, date, date, text, float8, float8) IS
    'approx_count of a box whose first column is a date, timestamp or timestamptz column, date bounds (0.29.0)';

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

CREATE FUNCTION approx_sum(tbl regclass, sum_col text, pred_col text, lo timestamp, hi timestamp) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.approx_sum(tbl, sum_col, pred_col, t.a, t.b) FROM @extschema@._kde_time_bounds(tbl, pred_col, lo, hi) t $$;
COMMENT ON FUNCTION approx_sum(regclass, text, text, timestamp, timestamp) IS
    'approx_sum of sum_col over a time range of pred_col (a date, timestamp or timestamptz column), timestamp bounds';

CREATE FUNCTION approx_sum(tbl regclass, sum_col text, pred_col text, lo date, hi date) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.approx_sum(tbl, sum_col, pred_col, t.a, t.b) FROM @extschema@._kde_time_bounds(tbl, pred_col, lo, hi) t $$;
COMMENT ON FUNCTION approx_sum(regclass, text, text, date, date) IS
    'approx_sum of sum_col over a time range of pred_col (a date, timestamp or timestamptz column), date bounds (0.29.0)';

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

CREATE FUNCTION approx_avg(tbl regclass, avg_col text, pred_col text, lo timestamp, hi timestamp) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.approx_avg(tbl, avg_col, pred_col, t.a, t.b) FROM @extschema@._kde_time_bounds(tbl, pred_col, lo, hi) t $$;
COMMENT ON FUNCTION approx_avg(regclass, text, text, timestamp, timestamp) IS
    'approx_avg of avg_col over a time range of pred_col (a date, timestamp or timestamptz column), timestamp bounds';

CREATE FUNCTION approx_avg(tbl regclass, avg_col text, pred_col text, lo date, hi date) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.approx_avg(tbl, avg_col, pred_col, t.a, t.b) FROM @extschema@._kde_time_bounds(tbl, pred_col, lo, hi) t $$;
COMMENT ON FUNCTION approx_avg(regclass, text, text, date, date) IS
    'approx_avg of avg_col over a time range of pred_col (a date, timestamp or timestamptz column), date bounds (0.29.0)';

CREATE FUNCTION approx_avg(tbl regclass, avg_col text, pred_col text, lo text, hi text) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@.approx_avg(tbl, avg_col, pred_col, @extschema@._kde_text_bound(tbl, pred_col, lo),
                                  @extschema@._kde_text_bound(tbl, pred_col, hi))
$$;
COMMENT ON FUNCTION approx_avg(regclass, text, text, text, text) IS
    'approx_avg with bounds given as text (untyped literals), read as pred_col''s own type';
