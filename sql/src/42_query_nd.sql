-- ---------------------------------------------------------------------------------------------- 3 to 16 columns
-- A box over some columns of a multi-column synopsis (pg_kde/synopsis/multi.py, docs/math.md §13): the
-- columns named are constrained, the synopsis' other columns are not. Bounds are float8 (a date, timestamp
-- or timestamptz column's epoch seconds, as its synopsis holds them); a NULL element leaves that side open.

-- The synopsis of 3 to 16 columns that covers the named ones (the one of most points, the most accurate; then
-- of fewest columns; then the newest),
-- checked as _kde_synopsis_for: the role may read the named columns and every column of the synopsis, no
-- row-level security hides rows, and the synopsis still describes its columns. pos: each named column's
-- place in the synopsis.
CREATE FUNCTION _kde_synopsis_nd_for(tbl regclass, cols text[], OUT s kde_synopsis_nd, OUT widths float8[],
                                     OUT n_rows float8, OUT pos integer[])
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    h record;
    ident record;
BEGIN
    PERFORM @extschema@._kde_columns(tbl, cols);
    IF (SELECT count(DISTINCT c) FROM unnest(cols) c) <> cardinality(cols) THEN
        RAISE EXCEPTION 'pg_kde: a column is named twice in %', cols USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT k.cols, k.built_relid, k.attnums, k.coltypes, k.bandwidth, k.n_rows INTO h
    FROM @extschema@.kde_catalog k
    JOIN @extschema@.kde_synopsis_nd p ON p.relid = k.relid AND p.cols = k.cols
    WHERE k.relid = tbl AND k.kind = 'nd' AND k.cols @> _kde_synopsis_nd_for.cols
    ORDER BY p.n_points DESC, cardinality(k.cols), k.built_at DESC, k.cols LIMIT 1;
    IF FOUND THEN
        -- (by key, after the choice: a whole-row reference in the choosing query read every candidate's payload
        -- whole, twice as slow)
        SELECT * INTO s FROM @extschema@.kde_synopsis_nd p WHERE p.relid = tbl AND p.cols = h.cols;
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no pg_kde synopsis of % covers columns %', tbl, array_to_string(cols, ', ')
            USING ERRCODE = 'undefined_object',
                  HINT = CASE WHEN cardinality(cols) >= 3
                              THEN format('Build one with: SELECT @extschema@.kde_refresh(%L, %L::text[]);', tbl::text, cols::text)
                              ELSE format('Build a synopsis of 3 to 16 columns that include %s, e.g. SELECT @extschema@.kde_refresh(%L, '
                                          'ARRAY[%s, <more columns>]);', array_to_string(cols, ', '), tbl::text,
                                          (SELECT string_agg(quote_literal(c), ', ') FROM unnest(cols) c)) END;
    END IF;
    ident := @extschema@._kde_columns(tbl, h.cols);
    PERFORM @extschema@._kde_check_identity(tbl, h.cols, h.built_relid, h.attnums, h.coltypes, ident.attnums,
                                            ident.coltypes);
    widths := h.bandwidth;
    n_rows := h.n_rows;
    pos := ARRAY(SELECT array_position(h.cols, c) FROM unnest(cols) WITH ORDINALITY u(c, i) ORDER BY u.i);
END
$$;
COMMENT ON FUNCTION _kde_synopsis_nd_for(regclass, text[]) IS 'pg_kde internal: a multi-column synopsis, privilege-checked';

-- {estimate, variance} of a box of a multi-column synopsis (extension/multi.c; multi.box is its reference);
-- with group_col > 0, one pair per knot of that column, then one for its NULLs.
CREATE FUNCTION _kde_box_nd(s kde_synopsis_nd, widths float8[], n_rows float8, lo float8[], hi float8[],
                            sum_col integer, group_col integer) RETURNS float8[]
AS 'MODULE_PATHNAME', 'kde_box_nd' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_box_nd(kde_synopsis_nd, float8[], float8, float8[], float8[], integer, integer) IS
    'pg_kde internal: a box of a multi-column synopsis';

-- A categorical column's labels (its knots' places 0, 1, ... in order), from the synopsis' labels.
CREATE FUNCTION _kde_labels(s kde_synopsis_nd, k integer) RETURNS text[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT s.labels[o.first + 1 : o.first + s.knot_counts[k]]
    FROM (SELECT coalesce(sum(s.knot_counts[i]) FILTER (WHERE s.categorical[i]), 0)::integer AS first
          FROM generate_series(1, k - 1) i) o
$$;
COMMENT ON FUNCTION _kde_labels(kde_synopsis_nd, integer) IS 'pg_kde internal: a categorical column''s labels';

-- What a query of a multi-column synopsis passes to _kde_box_nd: the synopsis that covers the columns of the
-- box (cols with their bounds lo, hi; eq_cols with the values eq_vals, a category's label or a number's text)
-- and the extra ones (a sum's or a group's); the bounds a, b in its order (a category by its place; empty
-- when a label is one its sample never held), and where each extra column is (1-based).
CREATE FUNCTION _kde_nd_args(tbl regclass, cols text[], lo float8[], hi float8[], eq_cols text[], eq_vals text[],
                             extra text[], OUT s kde_synopsis_nd, OUT widths float8[], OUT n_rows float8,
                             OUT a float8[], OUT b float8[], OUT extra_pos integer[], OUT empty boolean)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r record;
    names text[];
    k integer;
    place integer;
    label text;
    v float8;
BEGIN
    IF cols IS NULL OR lo IS NULL OR hi IS NULL THEN
        RAISE EXCEPTION 'pg_kde: cols, lo and hi must not be NULL (a NULL element of lo or hi leaves that side open)'
            USING ERRCODE = 'null_value_not_allowed';
    ELSIF (cardinality(cols) > 0 AND array_ndims(cols) <> 1) OR cardinality(lo) <> cardinality(cols)
          OR cardinality(hi) <> cardinality(cols) OR (cardinality(cols) > 0
          AND (array_ndims(lo) IS DISTINCT FROM 1 OR array_ndims(hi) IS DISTINCT FROM 1)) THEN
        RAISE EXCEPTION 'pg_kde: lo and hi need one bound for each of the % column(s) named', cardinality(cols)
            USING ERRCODE = 'array_subscript_error';
    ELSIF (eq_cols IS NULL) <> (eq_vals IS NULL) OR cardinality(eq_cols) <> cardinality(eq_vals) THEN
        RAISE EXCEPTION 'pg_kde: eq_vals need one value for each of the eq_cols'
            USING ERRCODE = 'array_subscript_error';
    ELSIF array_position(eq_vals, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'pg_kde: eq_vals must not hold NULL (col = NULL holds no row)'
            USING ERRCODE = 'null_value_not_allowed';
    ELSIF eq_cols IS NOT NULL AND NOT (@extschema@._kde_is_vector(eq_cols) AND @extschema@._kde_is_vector(eq_vals)) THEN
        RAISE EXCEPTION 'pg_kde: eq_cols and eq_vals must be one-dimensional arrays from 1 without NULLs'
            USING ERRCODE = 'array_subscript_error';
    END IF;
    names := cols || coalesce(eq_cols, '{}');
    FOR i IN 1 .. coalesce(cardinality(extra), 0) LOOP
        IF extra[i] IS NOT NULL AND array_position(names, extra[i]) IS NULL THEN
            names := names || extra[i];
        END IF;
    END LOOP;
    IF cardinality(names) = 0 THEN
        RAISE EXCEPTION 'pg_kde: name at least one column' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    r := @extschema@._kde_synopsis_nd_for(tbl, names);
    s := r.s;
    widths := r.widths;
    n_rows := r.n_rows;
    empty := false;
    a := array_fill(NULL::float8, ARRAY[cardinality(s.cols)]);
    b := array_fill(NULL::float8, ARRAY[cardinality(s.cols)]);
    FOR i IN 1 .. cardinality(cols) LOOP
        k := r.pos[i];
        IF lo[array_lower(lo, 1) + i - 1] = 'NaN' OR hi[array_lower(hi, 1) + i - 1] = 'NaN' THEN
            RAISE EXCEPTION 'pg_kde: bounds must not be NaN (a NULL element leaves that side open)'
                USING ERRCODE = 'invalid_parameter_value';
        ELSIF s.categorical[k] THEN
            RAISE EXCEPTION 'pg_kde: column % is a category: name it in eq_cols, with its value in eq_vals', cols[i]
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        a[k] := lo[array_lower(lo, 1) + i - 1];
        b[k] := hi[array_lower(hi, 1) + i - 1];
    END LOOP;
    FOR i IN 1 .. coalesce(cardinality(eq_cols), 0) LOOP
        k := r.pos[cardinality(cols) + i];
        IF s.categorical[k] THEN
            -- a boolean's value as the column prints it ('t', 'yes', 'TRUE': 'true'); text and enums as given
            label := CASE WHEN @extschema@._kde_coltype(tbl, eq_cols[i]) = 'boolean'
                          THEN eq_vals[i]::boolean::text ELSE eq_vals[i] END;
            place := array_position(@extschema@._kde_labels(s, k), label);
            IF place IS NULL THEN
                empty := true;
            ELSE
                a[k] := place - 1;
                b[k] := place - 1;
            END IF;
        ELSE
            -- read as the column's type, as text bounds are (a date's '2024-03-01', a number's '5')
            v := @extschema@._kde_text_bound(tbl, eq_cols[i], eq_vals[i]);
            a[k] := v;
            b[k] := v;
        END IF;
    END LOOP;
    extra_pos := ARRAY(SELECT array_position(s.cols, e) FROM unnest(extra) WITH ORDINALITY u(e, i) ORDER BY u.i);
END
$$;
COMMENT ON FUNCTION _kde_nd_args(regclass, text[], float8[], float8[], text[], text[], text[]) IS
    'pg_kde internal: a query of a multi-column synopsis, its bounds in the synopsis'' order';

-- {estimate, variance} of a box; with sum_col, of the sum of its values over the box's rows (its NULLs add
-- nothing), and with not_null its rows with sum_col non-NULL counted (what avg divides by).
CREATE FUNCTION _kde_query_nd(tbl regclass, cols text[], lo float8[], hi float8[], eq_cols text[], eq_vals text[],
                              sum_col text, not_null boolean) RETURNS float8[]
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r record;
    a float8[];
    k integer;
BEGIN
    r := @extschema@._kde_nd_args(tbl, cols, lo, hi, eq_cols, eq_vals, ARRAY[sum_col]);
    IF r.empty THEN
        RETURN ARRAY[0, 0]::float8[];
    END IF;
    k := coalesce(r.extra_pos[1], 0);
    a := r.a;
    IF not_null AND a[k] IS NULL AND (r.b)[k] IS NULL THEN
        a[k] := '-Infinity';
    END IF;
    IF k > 0 AND (r.s).categorical[k] THEN
        RAISE EXCEPTION 'pg_kde: column % is a category: it has no sum', sum_col USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN @extschema@._kde_box_nd(r.s, r.widths, r.n_rows, a, r.b, CASE WHEN not_null THEN 0 ELSE k END, 0);
END
$$;
COMMENT ON FUNCTION _kde_query_nd(regclass, text[], float8[], float8[], text[], text[], text, boolean) IS
    'pg_kde internal: a box of a multi-column synopsis, its bounds by column name';

-- A required argument: its value, or an error naming it.
CREATE FUNCTION _kde_required(name text, value text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF value IS NULL THEN
        RAISE EXCEPTION 'pg_kde: % must not be NULL', name USING ERRCODE = 'null_value_not_allowed';
    END IF;
    RETURN value;
END
$$;
COMMENT ON FUNCTION _kde_required(text, text) IS 'pg_kde internal: a required argument';

CREATE FUNCTION approx_count(tbl regclass, cols text[], lo float8[], hi float8[]) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT (@extschema@._kde_query_nd(tbl, cols, lo, hi, NULL, NULL, NULL, false))[1] $$;
COMMENT ON FUNCTION approx_count(regclass, text[], float8[], float8[]) IS
    'Approximate count of rows with lo[i] <= cols[i] <= hi[i] for every i (NULL element: that side open), from a synopsis of 3 to 16 columns that covers them';

CREATE FUNCTION approx_count(tbl regclass, cols text[], lo float8[], hi float8[], eq_cols text[], eq_vals text[])
RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT (@extschema@._kde_query_nd(tbl, cols, lo, hi, eq_cols, eq_vals, NULL, false))[1] $$;
COMMENT ON FUNCTION approx_count(regclass, text[], float8[], float8[], text[], text[]) IS
    'approx_count of a box that also holds eq_cols[i] = eq_vals[i] (a category''s label, or a number as text) for every i';

CREATE FUNCTION approx_sum(tbl regclass, sum_col text, cols text[], lo float8[], hi float8[]) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT (@extschema@._kde_query_nd(tbl, cols, lo, hi, NULL, NULL, @extschema@._kde_required('sum_col', sum_col), false))[1] $$;
COMMENT ON FUNCTION approx_sum(regclass, text, text[], float8[], float8[]) IS
    'Approximate sum of sum_col over the rows of a box of cols, from a synopsis of 3 to 16 columns that covers them all';

CREATE FUNCTION approx_avg(tbl regclass, avg_col text, cols text[], lo float8[], hi float8[]) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN c > 0 THEN s / c END
    FROM (SELECT (@extschema@._kde_query_nd(tbl, cols, lo, hi, NULL, NULL, @extschema@._kde_required('avg_col', avg_col), false))[1] AS s,
                 (@extschema@._kde_query_nd(tbl, cols, lo, hi, NULL, NULL, avg_col, true))[1] AS c) q
$$;
COMMENT ON FUNCTION approx_avg(regclass, text, text[], float8[], float8[]) IS
    'Approximate average of avg_col over the rows of a box of cols (NULL when none), from a synopsis of 3 to 16 columns that covers them all';

-- The interval of a sample's estimate: estimate ± z·sd, each point's weight read as the chance that its row
-- is in the box (docs/math.md §13), clipped to 0 .. the table's rows; low and high are not hard bounds.
CREATE FUNCTION approx_count_ci(tbl regclass, cols text[], lo float8[], hi float8[], confidence float8 DEFAULT 0.95,
                                OUT estimate float8, OUT low float8, OUT high float8)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    z float8 := @extschema@._kde_z(confidence);
    r record;
    e float8[];
    half float8;
BEGIN
    r := @extschema@._kde_nd_args(tbl, cols, lo, hi, NULL, NULL, NULL);
    e := @extschema@._kde_box_nd(r.s, r.widths, r.n_rows, r.a, r.b, 0, 0);
    half := z * sqrt(e[2]);
    estimate := e[1];
    low := greatest(e[1] - half, 0);
    high := least(e[1] + half, r.n_rows);
END
$$;
COMMENT ON FUNCTION approx_count_ci(regclass, text[], float8[], float8[], float8) IS
    'approx_count over a box of a multi-column synopsis with the sample''s interval at the given confidence (not hard bounds)';

-- GROUP BY: the box's rows (or the sum of sum_col over them) per value of group_col, a category or a column
-- whose sample holds few values, with 95% intervals as approx_count_ci's; groups the sample holds no row of
-- in the box are left out, a NULL group is reported as grp NULL.
CREATE FUNCTION _kde_by_nd(tbl regclass, sum_col text, group_col text, cols text[], lo float8[], hi float8[],
                           eq_cols text[], eq_vals text[])
RETURNS TABLE (grp text, estimate float8, low float8, high float8)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r record;
    e float8[];
    rows_in float8[];
    g integer;
    s integer;
    t text;
    names text[];
    z float8 := @extschema@._kde_z(0.95);
BEGIN
    IF group_col IS NULL THEN
        RAISE EXCEPTION 'pg_kde: group_col must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    r := @extschema@._kde_nd_args(tbl, cols, lo, hi, eq_cols, eq_vals, ARRAY[group_col, sum_col]);
    IF r.empty THEN
        RETURN;
    END IF;
    g := r.extra_pos[1];
    s := coalesce(r.extra_pos[2], 0);
    IF s > 0 AND (r.s).categorical[s] THEN
        RAISE EXCEPTION 'pg_kde: column % is a category: it has no sum', sum_col USING ERRCODE = 'invalid_parameter_value';
    ELSIF NOT (r.s).complete[g] THEN
        RAISE EXCEPTION 'pg_kde: column % has too many values to group by', group_col
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Group by a text, enum or boolean column, or a number with few values.';
    END IF;
    e := @extschema@._kde_box_nd(r.s, r.widths, r.n_rows, r.a, r.b, s, g);
    -- the groups that hold rows of the box (a sum may be 0 where rows are)
    rows_in := CASE WHEN s = 0 THEN e ELSE @extschema@._kde_box_nd(r.s, r.widths, r.n_rows, r.a, r.b, 0, g) END;
    IF (r.s).categorical[g] THEN
        names := @extschema@._kde_labels(r.s, g);
    ELSE
        t := @extschema@._kde_coltype(tbl, group_col);
        -- a time column's groups in its own type (a timestamptz in the session's time zone, as it prints)
        names := ARRAY(SELECT CASE WHEN t = 'date' THEN (to_timestamp(v) AT TIME ZONE 'UTC')::date::text
                                   WHEN t LIKE 'timestamp%with time zone' THEN to_timestamp(v)::text
                                   WHEN t LIKE 'timestamp%' THEN (to_timestamp(v) AT TIME ZONE 'UTC')::text
                                   ELSE v::text END
                       FROM unnest((r.s).knot_values[
            (SELECT coalesce(sum((r.s).knot_counts[i]), 0)::integer FROM generate_series(1, g - 1) i) + 1 :
            (SELECT sum((r.s).knot_counts[i])::integer FROM generate_series(1, g) i)]) WITH ORDINALITY u(v, i) ORDER BY u.i);
    END IF;
    FOR i IN 1 .. cardinality(names) + 1 LOOP
        IF rows_in[2 * i - 1] <> 0 THEN
            grp := names[i];  -- NULL past the labels: the NULL group
            estimate := e[2 * i - 1];
            low := estimate - z * sqrt(e[2 * i]);
            high := estimate + z * sqrt(e[2 * i]);
            IF s = 0 THEN
                low := greatest(low, 0);
                high := least(high, r.n_rows);
            END IF;
            RETURN NEXT;
        END IF;
    END LOOP;
END
$$;
COMMENT ON FUNCTION _kde_by_nd(regclass, text, text, text[], float8[], float8[], text[], text[]) IS
    'pg_kde internal: a box of a multi-column synopsis per group';

CREATE FUNCTION approx_count_by(tbl regclass, group_col text, cols text[], lo float8[], hi float8[],
                                eq_cols text[] DEFAULT NULL, eq_vals text[] DEFAULT NULL)
RETURNS TABLE (grp text, estimate float8, low float8, high float8)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM @extschema@._kde_by_nd(tbl, NULL, group_col, cols, lo, hi, eq_cols, eq_vals) $$;
COMMENT ON FUNCTION approx_count_by(regclass, text, text[], float8[], float8[], text[], text[]) IS
    'Approximate count of the rows of a box per value of group_col (GROUP BY), with 95% intervals, from a synopsis of 3 to 16 columns';

CREATE FUNCTION approx_sum_by(tbl regclass, sum_col text, group_col text, cols text[], lo float8[], hi float8[],
                              eq_cols text[] DEFAULT NULL, eq_vals text[] DEFAULT NULL)
RETURNS TABLE (grp text, estimate float8, low float8, high float8)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM @extschema@._kde_by_nd(tbl, @extschema@._kde_required('sum_col', sum_col), group_col, cols, lo, hi, eq_cols, eq_vals) $$;
COMMENT ON FUNCTION approx_sum_by(regclass, text, text, text[], float8[], float8[], text[], text[]) IS
    'Approximate sum of sum_col over the rows of a box per value of group_col (GROUP BY), with 95% intervals';

-- Bounds given as text, each read as its column's type (a date's, a timestamp's: '2024-03-01'; a number's):
-- ARRAY['2024-03-01', '10'] for a time column and an amount. (docs: README, time types.)
CREATE FUNCTION _kde_text_bounds(tbl regclass, cols text[], x text[]) RETURNS float8[]
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    category text;
BEGIN
    IF cols IS NULL OR x IS NULL THEN
        RAISE EXCEPTION 'pg_kde: cols, lo and hi must not be NULL (a NULL element of lo or hi leaves that side open)'
            USING ERRCODE = 'null_value_not_allowed';
    ELSIF cardinality(x) <> cardinality(cols) THEN
        RAISE EXCEPTION 'pg_kde: lo and hi need one bound for each of the % column(s) named', cardinality(cols)
            USING ERRCODE = 'array_subscript_error';
    END IF;
    SELECT u.c INTO category FROM unnest(cols) u(c)
    JOIN pg_attribute a ON a.attrelid = tbl AND a.attname = u.c AND a.attnum > 0 AND NOT a.attisdropped
    JOIN pg_type t ON t.oid = a.atttypid WHERE t.typcategory IN ('S', 'E', 'B') LIMIT 1;
    IF category IS NOT NULL THEN
        RAISE EXCEPTION 'pg_kde: column % is a category: name it in eq_cols, with its value in eq_vals', category
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN ARRAY(SELECT @extschema@._kde_text_bound(tbl, u.c, u.v)
                 FROM unnest(cols, x) WITH ORDINALITY AS u(c, v, i) ORDER BY u.i);
END
$$;
COMMENT ON FUNCTION _kde_text_bounds(regclass, text[], text[]) IS 'pg_kde internal: text bounds read as their columns'' types';

CREATE FUNCTION approx_count(tbl regclass, cols text[], lo text[], hi text[]) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@.approx_count(tbl, cols, @extschema@._kde_text_bounds(tbl, cols, lo),
                                    @extschema@._kde_text_bounds(tbl, cols, hi))
$$;
COMMENT ON FUNCTION approx_count(regclass, text[], text[], text[]) IS
    'approx_count of a box of a multi-column synopsis with bounds given as text, each read as its column''s type (a time column''s too)';

CREATE FUNCTION approx_count(tbl regclass, cols text[], lo text[], hi text[], eq_cols text[], eq_vals text[])
RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@.approx_count(tbl, cols, @extschema@._kde_text_bounds(tbl, cols, lo),
                                    @extschema@._kde_text_bounds(tbl, cols, hi), eq_cols, eq_vals)
$$;
COMMENT ON FUNCTION approx_count(regclass, text[], text[], text[], text[], text[]) IS
    'approx_count of a box with bounds given as text and equalities eq_cols[i] = eq_vals[i]';

CREATE FUNCTION approx_count_by(tbl regclass, group_col text, cols text[], lo text[], hi text[],
                                eq_cols text[] DEFAULT NULL, eq_vals text[] DEFAULT NULL)
RETURNS TABLE (grp text, estimate float8, low float8, high float8)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT * FROM @extschema@._kde_by_nd(tbl, NULL, group_col, cols, @extschema@._kde_text_bounds(tbl, cols, lo),
                                         @extschema@._kde_text_bounds(tbl, cols, hi), eq_cols, eq_vals)
$$;
COMMENT ON FUNCTION approx_count_by(regclass, text, text[], text[], text[], text[], text[]) IS
    'approx_count_by with bounds given as text, each read as its column''s type';
