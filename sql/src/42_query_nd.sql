-- ---------------------------------------------------------------------------------------------- 3 to 16 columns
-- A box over some columns of a multi-column synopsis (pg_kde/synopsis/multi.py, docs/math.md §13): the
-- columns named are constrained, the synopsis' other columns are not. Bounds are float8 (a date, timestamp
-- or timestamptz column's epoch seconds, as its synopsis holds them); a NULL element leaves that side open.

-- The synopsis of 3 to 16 columns that covers the named ones (the one of fewest columns, then by name),
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
    WHERE k.relid = tbl AND k.kind = 'nd' AND k.cols @> _kde_synopsis_nd_for.cols
    ORDER BY cardinality(k.cols), k.cols LIMIT 1;
    IF FOUND THEN
        SELECT * INTO s FROM @extschema@.kde_synopsis_nd p WHERE p.relid = tbl AND p.cols = h.cols;
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no pg_kde synopsis of % covers columns %', tbl, array_to_string(cols, ', ')
            USING ERRCODE = 'undefined_object',
                  HINT = format('Build one with: SELECT kde_refresh(%L, %L::text[]);', tbl::text, cols::text);
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

-- {estimate, variance} of a box of a multi-column synopsis (extension/multi.c; multi.box is its reference).
CREATE FUNCTION _kde_box_nd(s kde_synopsis_nd, widths float8[], n_rows float8, lo float8[], hi float8[],
                            sum_col integer) RETURNS float8[]
AS 'MODULE_PATHNAME', 'kde_box_nd' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_box_nd(kde_synopsis_nd, float8[], float8, float8[], float8[], integer) IS
    'pg_kde internal: a box of a multi-column synopsis';

-- The box's {estimate, variance}: the named columns' bounds put in the synopsis' order; with sum_col, the
-- sum of its values over the box's rows (its NULLs add nothing), and with not_null also its NULL rows left
-- out of a count (what avg divides by).
CREATE FUNCTION _kde_query_nd(tbl regclass, cols text[], lo float8[], hi float8[], sum_col text, not_null boolean)
RETURNS float8[]
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r record;
    names text[] := cols;
    a float8[];
    b float8[];
    d integer;
    k integer;
BEGIN
    IF cols IS NULL OR lo IS NULL OR hi IS NULL THEN
        RAISE EXCEPTION 'pg_kde: cols, lo and hi must not be NULL (a NULL element of lo or hi leaves that side open)'
            USING ERRCODE = 'null_value_not_allowed';
    ELSIF cardinality(cols) = 0 OR array_ndims(cols) <> 1 OR array_ndims(lo) IS DISTINCT FROM 1
          OR array_ndims(hi) IS DISTINCT FROM 1 OR cardinality(lo) <> cardinality(cols)
          OR cardinality(hi) <> cardinality(cols) THEN
        RAISE EXCEPTION 'pg_kde: lo and hi need one bound for each of the % column(s) named', cardinality(cols)
            USING ERRCODE = 'array_subscript_error';
    END IF;
    IF sum_col IS NOT NULL AND array_position(cols, sum_col) IS NULL THEN
        names := cols || sum_col;
    END IF;
    r := @extschema@._kde_synopsis_nd_for(tbl, names);
    d := cardinality((r.s).cols);
    a := array_fill(NULL::float8, ARRAY[d]);
    b := array_fill(NULL::float8, ARRAY[d]);
    FOR i IN 1 .. cardinality(cols) LOOP
        IF lo[array_lower(lo, 1) + i - 1] = 'NaN' OR hi[array_lower(hi, 1) + i - 1] = 'NaN' THEN
            RAISE EXCEPTION 'pg_kde: bounds must not be NaN (a NULL element leaves that side open)'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        a[r.pos[i]] := lo[array_lower(lo, 1) + i - 1];
        b[r.pos[i]] := hi[array_lower(hi, 1) + i - 1];
    END LOOP;
    k := CASE WHEN sum_col IS NULL THEN 0 ELSE array_position((r.s).cols, sum_col) END;
    IF not_null AND a[k] IS NULL THEN
        a[k] := '-Infinity';
    END IF;
    RETURN @extschema@._kde_box_nd(r.s, r.widths, r.n_rows, a, b, CASE WHEN not_null THEN 0 ELSE k END);
END
$$;
COMMENT ON FUNCTION _kde_query_nd(regclass, text[], float8[], float8[], text, boolean) IS
    'pg_kde internal: a box of a multi-column synopsis, its bounds by column name';

CREATE FUNCTION approx_count(tbl regclass, cols text[], lo float8[], hi float8[]) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT (@extschema@._kde_query_nd(tbl, cols, lo, hi, NULL, false))[1] $$;
COMMENT ON FUNCTION approx_count(regclass, text[], float8[], float8[]) IS
    'Approximate count of rows with lo[i] <= cols[i] <= hi[i] for every i (NULL element: that side open), from a synopsis of 3 to 16 columns that covers them';

CREATE FUNCTION approx_sum(tbl regclass, sum_col text, cols text[], lo float8[], hi float8[]) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT (@extschema@._kde_query_nd(tbl, cols, lo, hi, sum_col, false))[1] $$;
COMMENT ON FUNCTION approx_sum(regclass, text, text[], float8[], float8[]) IS
    'Approximate sum of sum_col over the rows of a box of cols, from a synopsis of 3 to 16 columns that covers them all';

CREATE FUNCTION approx_avg(tbl regclass, avg_col text, cols text[], lo float8[], hi float8[]) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN c > 0 THEN s / c END
    FROM (SELECT (@extschema@._kde_query_nd(tbl, cols, lo, hi, avg_col, false))[1] AS s,
                 (@extschema@._kde_query_nd(tbl, cols, lo, hi, avg_col, true))[1] AS c) q
$$;
COMMENT ON FUNCTION approx_avg(regclass, text, text[], float8[], float8[]) IS
    'Approximate average of avg_col over the rows of a box of cols (NULL when none), from a synopsis of 3 to 16 columns that covers them all';

-- The interval of a sample's estimate: estimate ± z·sd (sd from the points' weights, docs/math.md §13),
-- clipped to what a count or a sum can be (0 to the table's rows for a count); low and high are not hard bounds.
CREATE FUNCTION approx_count_ci(tbl regclass, cols text[], lo float8[], hi float8[], confidence float8 DEFAULT 0.95,
                                OUT estimate float8, OUT low float8, OUT high float8)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r float8[];
    half float8;
    total float8;
BEGIN
    IF confidence IS NULL OR NOT (confidence > 0 AND confidence < 1) THEN
        RAISE EXCEPTION 'confidence must be between 0 and 1 (exclusive), got %', confidence
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    r := @extschema@._kde_query_nd(tbl, cols, lo, hi, NULL, false);
    SELECT k.n_rows INTO total FROM @extschema@.kde_catalog k
    WHERE k.relid = tbl AND k.kind = 'nd' AND k.cols @> approx_count_ci.cols ORDER BY cardinality(k.cols), k.cols LIMIT 1;
    half := -@extschema@._kde_normal_quantile((1 - confidence) / 2) * sqrt(r[2]);
    estimate := r[1];
    low := greatest(r[1] - half, 0);
    high := least(r[1] + half, total);
END
$$;
COMMENT ON FUNCTION approx_count_ci(regclass, text[], float8[], float8[], float8) IS
    'approx_count over a box of a multi-column synopsis with the sample''s interval at the given confidence (not hard bounds)';
