-- pg_kde 0.29.0 -> 0.30.0: values float8 cannot tell apart (found by a red team on 0.28.0). A synopsis keeps
-- each column's values as float8s: a bigint from 2^53, a numeric of more than 15 significant digits or a
-- timestamp from 2^33 epoch seconds may share its float8 with other values of its type, and rows on a bound's
-- float8 may then lie on either side of the bound. kde_synopsis.coarse (new) says whether a column may hold
-- such values (the refresh's scan counts them; _kde_numeric_coarse, new); approx_count_ci and approx_sum_ci
-- count rows on such a bound's float8 on both sides in their hard bounds, and a coarse column's sums allow for
-- each row's rounding (_kde_interval gains lo_loose, hi_loose for bounds that lose digits to float8 and
-- lo_fuzz, hi_fuzz for timestamptz bounds of date and timestamp columns about a change of the UTC offset;
-- new: _kde_text_loose, _kde_time_loose, _kde_time_fuzz, _kde_base_type, _kde_text_value, _kde_numeric_bound,
-- _kde_next_float8, _kde_coarse_widen). Text bounds are read as the column's type; approx_sum_ci gets a text
-- form. The tracking triggers mark a synopsis coarse when a written value is. Every function that names the
-- version is replaced.
\echo Use "ALTER EXTENSION pg_kde UPDATE TO '0.30.0'" to load this file. \quit

CREATE FUNCTION _kde_numeric_coarse(numeric) RETURNS boolean
AS 'MODULE_PATHNAME', 'kde_numeric_coarse_sql' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_numeric_coarse(numeric) IS 'pg_kde internal: whether float8 may not tell this numeric from another';

ALTER TABLE kde_synopsis ADD COLUMN coarse boolean;

CREATE FUNCTION _kde_base_type(tbl regclass, col text) RETURNS regtype
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t oid;
    base oid;
BEGIN
    SELECT a.atttypid INTO t FROM pg_attribute a
    WHERE a.attrelid = tbl AND a.attname = col AND a.attnum > 0 AND NOT a.attisdropped;
    LOOP
        SELECT y.typbasetype INTO base FROM pg_type y WHERE y.oid = t AND y.typtype = 'd';
        EXIT WHEN NOT FOUND;
        t := base;
    END LOOP;
    RETURN t::regtype;
END
$$;
COMMENT ON FUNCTION _kde_base_type(regclass, text) IS 'pg_kde internal: a column''s type, a domain''s base type''s';

CREATE FUNCTION _kde_numeric_bound(numeric) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_numeric_bound' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_numeric_bound(numeric) IS 'pg_kde internal: a numeric bound as a synopsis reads it';

CREATE FUNCTION _kde_coarse_rule(tbl regclass, col text, OUT digits boolean, OUT magnitude float8)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t regtype := @extschema@._kde_base_type(tbl, col);
    m integer;
BEGIN
    digits := false;
    IF t = 'numeric'::regtype THEN
        SELECT a.atttypmod INTO m FROM pg_attribute a
        WHERE a.attrelid = tbl AND a.attname = col AND a.attnum > 0 AND a.atttypid = 'numeric'::regtype;
        digits := NOT coalesce(m >= 4 AND (m - 4) >> 16 <= 15 AND (((m - 4) & 2047) # 1024) - 1024 <= 307, false);
    ELSIF t = 'bigint'::regtype THEN
        magnitude := 9007199254740992;
    ELSIF t IN ('timestamp'::regtype, 'timestamptz'::regtype) THEN
        magnitude := 8589934592;
    END IF;
END
$$;
COMMENT ON FUNCTION _kde_coarse_rule(regclass, text) IS 'pg_kde internal: where a column''s float8s may stand for more than one of its values';

CREATE FUNCTION _kde_text_value(t regtype, x text) RETURNS float8
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF x IS NULL THEN
        RETURN NULL;
    ELSIF t = 'date'::regtype THEN
        RETURN extract(epoch FROM x::date)::float8;
    ELSIF t = 'timestamptz'::regtype THEN
        RETURN extract(epoch FROM x::timestamptz)::float8;
    ELSIF t = 'timestamp'::regtype THEN
        RETURN extract(epoch FROM x::timestamp)::float8;
    ELSIF t = 'real'::regtype THEN
        RETURN x::real::float8;
    ELSIF t = 'numeric'::regtype THEN
        -- past float8's range: beyond every value a synopsis holds, or on the zero side of every one (and loose:
        -- _kde_text_loose), where the cast raised "out of range"
        RETURN @extschema@._kde_numeric_bound(x::numeric);
    ELSIF t = 'smallint'::regtype THEN  -- (integers as SQL reads them: '5.5' and ' 1e3 ' are errors)
        RETURN x::int2::float8;
    ELSIF t = 'integer'::regtype THEN
        RETURN x::int4::float8;
    ELSIF t = 'bigint'::regtype THEN
        RETURN x::int8::float8;
    END IF;
    RETURN x::float8;
END
$$;
COMMENT ON FUNCTION _kde_text_value(regtype, text) IS 'pg_kde internal: a text bound read as a type';

CREATE OR REPLACE FUNCTION _kde_text_bound(tbl regclass, col text, x text) RETURNS float8
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ BEGIN RETURN @extschema@._kde_text_value(@extschema@._kde_base_type(tbl, col), x); END $$;
COMMENT ON FUNCTION _kde_text_bound(regclass, text, text) IS 'pg_kde internal: a text bound read as the column''s type';

CREATE FUNCTION _kde_time_loose(x float8) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT coalesce(abs(x) >= 8589934592, false) $$;
COMMENT ON FUNCTION _kde_time_loose(float8) IS 'pg_kde internal: whether a time bound''s float8 may have lost microseconds';

CREATE FUNCTION _kde_text_loose(t regtype, x text) RETURNS boolean
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF x IS NULL THEN
        RETURN false;
    ELSIF t = 'numeric'::regtype THEN
        RETURN @extschema@._kde_numeric_coarse(x::numeric);
    ELSIF t IN ('timestamp'::regtype, 'timestamptz'::regtype) THEN
        RETURN @extschema@._kde_time_loose(@extschema@._kde_text_value(t, x));
    END IF;
    RETURN false;
END
$$;
COMMENT ON FUNCTION _kde_text_loose(regtype, text) IS 'pg_kde internal: whether a text bound has more digits than float8 keeps';

CREATE FUNCTION _kde_time_fuzz(tbl regclass, col text, x timestamptz) RETURNS float8
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- (within 26 hours of timestamptz's ends, where the probes would leave its range, no offset changes)
    IF x IS NULL OR NOT isfinite(x) OR x < '4714-11-26 00:00:00+00 BC'::timestamptz
       OR x > '294276-12-29 00:00:00+00'::timestamptz
       OR @extschema@._kde_base_type(tbl, col) NOT IN ('date'::regtype, 'timestamp'::regtype) THEN
        RETURN 0;
    END IF;
    RETURN abs(extract(timezone FROM x - interval '26 hours') - extract(timezone FROM x + interval '26 hours'))::float8;
END
$$;
COMMENT ON FUNCTION _kde_time_fuzz(regclass, text, timestamptz) IS 'pg_kde internal: how far a timestamptz bound is uncertain on a date or timestamp column';

CREATE FUNCTION _kde_next_float8(x float8, up boolean) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_next_float8' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_next_float8(float8, boolean) IS 'pg_kde internal: the next float8';

CREATE FUNCTION _kde_coarse_widen(x float8, rows float8, biggest float8, up boolean) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_coarse_widen' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_coarse_widen(float8, float8, float8, boolean) IS 'pg_kde internal: a coarse column''s sum bound, widened';

CREATE FUNCTION _kde_ieee_add(x float8, y float8) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_ieee_add' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_ieee_add(float8, float8) IS 'pg_kde internal: a float8 sum, infinite where it overflows';

DROP FUNCTION _kde_interval(regclass, text, float8, float8, float8, integer);

CREATE FUNCTION _kde_interval(tbl regclass, col text, lo float8, hi float8, confidence float8, moment integer,
                              lo_loose boolean DEFAULT false, hi_loose boolean DEFAULT false,
                              lo_fuzz float8 DEFAULT 0, hi_fuzz float8 DEFAULT 0,
                              OUT estimate float8, OUT low float8, OUT high float8)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    z float8 := @extschema@._kde_z(confidence);
    s @extschema@.kde_synopsis;
    r record;
    held record;
    slot boolean;  -- a point's count on a lattice, not exact
    centre float8;
    half float8;
    cell integer;
    rows float8;  -- the rows of the point's cut cell
    hard_low float8;
    hard_high float8;
    a float8;
    b float8;
    corner record;
    biggest float8;  -- a coarse column's sum: the largest magnitude a row in the range may have
    most float8;  -- ... and the most rows it may hold
BEGIN
    s := @extschema@._kde_synopsis_for(tbl, ARRAY[col]);
    r := @extschema@._kde_range(s, lo, hi, moment);
    hard_low := r.low;
    hard_high := r.high;
    lo_loose := coalesce((lo_loose OR coalesce(s.coarse, true)) AND lo > '-Infinity', false);
    hi_loose := coalesce((hi_loose OR coalesce(s.coarse, true)) AND hi < 'Infinity', false);
    lo_fuzz := CASE WHEN lo > '-Infinity' AND lo < 'Infinity' AND lo_fuzz > 0 THEN lo_fuzz ELSE 0 END;
    hi_fuzz := CASE WHEN hi > '-Infinity' AND hi < 'Infinity' AND hi_fuzz > 0 THEN hi_fuzz ELSE 0 END;
    IF lo_loose OR hi_loose OR lo_fuzz > 0 OR hi_fuzz > 0 THEN
        FOREACH a IN ARRAY ARRAY[lo] || CASE WHEN lo_loose THEN ARRAY[@extschema@._kde_next_float8(lo, true)] END
                           || CASE WHEN lo_fuzz > 0 THEN ARRAY[lo - lo_fuzz, @extschema@._kde_next_float8(lo + lo_fuzz, true)] END
        LOOP
            FOREACH b IN ARRAY ARRAY[hi] || CASE WHEN hi_loose THEN ARRAY[@extschema@._kde_next_float8(hi, false)] END
                               || CASE WHEN hi_fuzz > 0 THEN ARRAY[@extschema@._kde_next_float8(hi - hi_fuzz, false), hi + hi_fuzz] END
            LOOP
                CONTINUE WHEN a IS NOT DISTINCT FROM lo AND b IS NOT DISTINCT FROM hi;
                corner := @extschema@._kde_range(s, a, b, moment);
                hard_low := least(hard_low, corner.low);
                hard_high := greatest(hard_high, corner.high);
            END LOOP;
        END LOOP;
    END IF;
    IF moment = 1 AND coalesce(s.coarse, true) THEN
        -- each row's value lies up to half an ulp from the float8 the sums hold (query.coarse_widened; a red team
        -- on 0.30.0's first build: 1,000 rows of 2^62 + 511 beside 1,000 of -2^62 summed to [0, 0], exact 511,000):
        -- as many rows as the range may hold, at the largest magnitude one of them may have
        biggest := (SELECT max(abs(v)) FROM unnest(s.grid || (@extschema@._kde_atoms(s)).atom_values) v);
        IF lo > '-Infinity' AND hi < 'Infinity' THEN
            biggest := least(biggest, greatest(abs(lo), abs(hi)));
        END IF;
        most := (@extschema@._kde_range(s, lo, hi, 0)).high;
        hard_low := @extschema@._kde_coarse_widen(hard_low, most, coalesce(biggest, 0), false);
        hard_high := @extschema@._kde_coarse_widen(hard_high, most, coalesce(biggest, 0), true);
    END IF;
    slot := coalesce(moment = 0 AND lo = hi AND s.step > 0 AND r.low < r.high, false);
    centre := r.estimate;
    IF slot THEN
        -- A point's count estimates the rows of a value the column holds; its slot's cells expect centre rows
        -- there (the slot asked as a range) of its cut cell's rows (query.cell_of: grid[k] <= lo < grid[k + 1],
        -- the outer cells what lies beyond). Below 10 (query.HELD_MEDIAN_BELOW) its interval holds the whole
        -- counts of 1 + Binomial(rows - 1, centre / rows) (0.19.0, the binomial 0.24.0); from there it lies
        -- about that law's mean, centre + 1 - centre / rows, z standard deviations each side (0.24.0;
        -- query.interval_1d).
        centre := (@extschema@._kde_range(s, lo, lo + s.step / 4, 0)).estimate;
        cell := least(greatest(width_bucket(lo, s.grid), 1), cardinality(s.grid) - 1);
        rows := s.cell_cum_count[cell + 1] - s.cell_cum_count[cell];
    END IF;
    IF slot AND centre < 10 THEN
        held := @extschema@._kde_held_interval(centre, rows, confidence);
        low := held.low;
        high := held.high;
    ELSIF slot THEN
        half := z * sqrt(r.variance);
        centre := centre + 1 - centre / rows;
        low := centre - half;
        high := centre + half;
    ELSE
        half := z * sqrt(r.variance) + CASE WHEN moment = 0 AND lo = hi THEN 0.5 ELSE 0 END;
        low := centre - half;
        high := centre + half;
    END IF;
    -- within the hard bounds, widened to hold the estimate (query.within_bounds); zero width only where the
    -- hard bounds are (0.27.0: a sum over whole cells has no variance, but its stored sums' rounding leaves
    -- it within its hard bounds, not on its estimate)
    -- (rows on a loose bound's float8 are not modelled: the interval widens by all of them; in IEEE arithmetic,
    -- where PostgreSQL's raised "value out of range: overflow" on a coarse sum near float8's largest)
    IF hard_low < r.low THEN
        low := @extschema@._kde_ieee_add(low, @extschema@._kde_ieee_add(hard_low, -r.low));
    END IF;
    IF hard_high > r.high THEN
        high := @extschema@._kde_ieee_add(high, @extschema@._kde_ieee_add(hard_high, -r.high));
    END IF;
    estimate := r.estimate;
    low := least(greatest(hard_low, low), r.estimate);
    high := greatest(least(hard_high, high), r.estimate);
    IF low = high AND hard_low < hard_high THEN
        low := hard_low;
        high := hard_high;
    END IF;
END
$$;
COMMENT ON FUNCTION _kde_interval(regclass, text, float8, float8, float8, integer, boolean, boolean, float8, float8) IS 'pg_kde internal: an interval';

CREATE OR REPLACE FUNCTION approx_count(tbl regclass, col text, lo text, hi text) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.approx_count(tbl, col, @extschema@._kde_text_value(b.t, lo), @extschema@._kde_text_value(b.t, hi))
      FROM (SELECT @extschema@._kde_base_type(tbl, col) AS t) b $$;
COMMENT ON FUNCTION approx_count(regclass, text, text, text) IS
    'approx_count with bounds given as text (untyped literals), read as the column''s own type';

CREATE OR REPLACE FUNCTION approx_count_ci(tbl regclass, col text, lo text, hi text, confidence float8 DEFAULT 0.95,
                                OUT estimate float8, OUT low float8, OUT high float8)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT i.* FROM (SELECT @extschema@._kde_base_type(tbl, col) AS t) b,
                     @extschema@._kde_interval(tbl, col, @extschema@._kde_text_value(b.t, lo),
                                               @extschema@._kde_text_value(b.t, hi), confidence, 0,
                                               @extschema@._kde_text_loose(b.t, lo),
                                               @extschema@._kde_text_loose(b.t, hi)) i $$;
COMMENT ON FUNCTION approx_count_ci(regclass, text, text, text, float8) IS
    'approx_count_ci with bounds given as text (untyped literals), read as the column''s own type';

CREATE FUNCTION approx_sum_ci(tbl regclass, col text, lo text, hi text, confidence float8 DEFAULT 0.95,
                              OUT estimate float8, OUT low float8, OUT high float8)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT i.* FROM (SELECT @extschema@._kde_base_type(tbl, col) AS t) b,
                     @extschema@._kde_interval(tbl, col, @extschema@._kde_text_value(b.t, lo),
                                               @extschema@._kde_text_value(b.t, hi), confidence, 1,
                                               @extschema@._kde_text_loose(b.t, lo),
                                               @extschema@._kde_text_loose(b.t, hi)) i $$;
COMMENT ON FUNCTION approx_sum_ci(regclass, text, text, text, float8) IS
    'approx_sum_ci with bounds given as text (untyped literals), read as the column''s own type (0.30.0)';

CREATE OR REPLACE FUNCTION approx_count_ci(tbl regclass, col text, lo timestamptz, hi timestamptz, confidence float8 DEFAULT 0.95,
                                OUT estimate float8, OUT low float8, OUT high float8)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT i.* FROM @extschema@._kde_time_bounds(tbl, col, lo, hi) t,
                     @extschema@._kde_interval(tbl, col, t.a, t.b, confidence, 0, @extschema@._kde_time_loose(t.a),
                                               @extschema@._kde_time_loose(t.b), @extschema@._kde_time_fuzz(tbl, col, lo),
                                               @extschema@._kde_time_fuzz(tbl, col, hi)) i $$;
COMMENT ON FUNCTION approx_count_ci(regclass, text, timestamptz, timestamptz, float8) IS
    'approx_count_ci for a date, timestamp or timestamptz column';

CREATE OR REPLACE FUNCTION approx_count_ci(tbl regclass, col text, lo timestamp, hi timestamp, confidence float8 DEFAULT 0.95,
                                OUT estimate float8, OUT low float8, OUT high float8)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT i.* FROM @extschema@._kde_time_bounds(tbl, col, lo, hi) t,
                     @extschema@._kde_interval(tbl, col, t.a, t.b, confidence, 0, @extschema@._kde_time_loose(t.a),
                                               @extschema@._kde_time_loose(t.b)) i $$;
COMMENT ON FUNCTION approx_count_ci(regclass, text, timestamp, timestamp, float8) IS
    'approx_count_ci for a date, timestamp or timestamptz column, timestamp bounds';

CREATE OR REPLACE FUNCTION _kde_track_apply() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r record;
    size_now bigint;
    expr text;
    added float8[];
    added_coarse boolean;  -- a written value whose float8 may stand for others of its type too (0.30.0)
    coarse_expr text;
    rule record;
    removed float8[];
    delta record;
    problem text;
BEGIN
    IF TG_LEVEL <> 'STATEMENT' OR TG_WHEN <> 'AFTER' OR NOT EXISTS (
        SELECT 1 FROM pg_trigger t
        WHERE t.tgrelid = TG_RELID AND t.tgname = TG_NAME
          AND t.tgname IN ('kde_track_insert', 'kde_track_update', 'kde_track_delete', 'kde_track_truncate')
          AND t.tgnewtable IS NOT DISTINCT FROM (CASE WHEN TG_OP IN ('INSERT', 'UPDATE') THEN 'kde_new' END)
          AND t.tgoldtable IS NOT DISTINCT FROM (CASE WHEN TG_OP IN ('DELETE', 'UPDATE') THEN 'kde_old' END)) THEN
        RAISE EXCEPTION 'pg_kde: _kde_track_apply runs only as the triggers kde_track installs'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- Only a table kde_track tracks, with all four triggers in place (a write one of them missed would leave
    -- its synopses off from then on: they stay as of the last write applied, stale once the counters show it).
    IF NOT EXISTS (SELECT 1 FROM @extschema@.kde_tracked k WHERE k.relid = TG_RELID) THEN
        RETURN NULL;
    ELSIF NOT @extschema@._kde_track_intact(TG_RELID::regclass) THEN
        PERFORM @extschema@._kde_track_broken(TG_RELID::regclass);
        RETURN NULL;
    ELSIF TG_OP = 'TRUNCATE' THEN
        UPDATE @extschema@.kde_catalog k SET storage_id = 'untracked: the table was truncated'
        WHERE k.relid = TG_RELID::regclass AND k.kind = '1d' AND coalesce(k.storage_id, '') NOT LIKE 'untracked:%';
        RETURN NULL;
    END IF;
    size_now := pg_relation_size(TG_RELID) / current_setting('block_size')::bigint;
    -- Each synopsis' column by identity (as queries resolve it), while its type is the one it was built on.
    FOR r IN SELECT k.cols, c.name AS attname, t.typname, t.typcategory, pg_column_size(k.*) AS header_bytes,
                    coalesce((k.requested ->> 'budget')::bigint, 8192) AS budget FROM @extschema@.kde_catalog k
             CROSS JOIN LATERAL @extschema@._kde_resolve(k.relid, k.cols, k.attnums, k.built_relid) c
             JOIN pg_attribute a ON a.attrelid = k.relid AND a.attnum = c.attnum
             JOIN pg_type t ON t.oid = a.atttypid
             WHERE k.relid = TG_RELID::regclass AND k.kind = '1d' AND c.type = k.coltypes[1]
               AND coalesce(k.storage_id, '') NOT LIKE 'untracked:%'
             ORDER BY k.cols FOR UPDATE OF k
    LOOP
        -- The value as the refresh's scan reads it (_kde_cells): the same float8 for every type.
        expr := CASE WHEN r.typname = 'numeric' THEN format('@extschema@._kde_float8(%I)', r.attname)
                     WHEN r.typcategory = 'N' THEN format('(%I)::float8', r.attname)
                     ELSE format('extract(epoch FROM %I)::float8', r.attname) END;
        -- Whether the written rows hold a value whose float8 may also stand for another of its type, as the
        -- refresh's scan tells (kde_synopsis.coarse, _kde_coarse_rule).
        rule := @extschema@._kde_coarse_rule(TG_RELID::regclass, r.attname);
        coarse_expr := CASE WHEN rule.digits THEN format('@extschema@._kde_numeric_coarse((%I)::numeric)', r.attname)
                            WHEN rule.magnitude IS NOT NULL THEN format('abs(%s) >= %s', expr, rule.magnitude)
                            ELSE 'false' END;
        added := NULL;
        added_coarse := false;
        removed := NULL;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            EXECUTE format('SELECT array_agg(%s), coalesce(bool_or(%s), false) FROM kde_new', expr, coarse_expr)
                INTO added, added_coarse;
        END IF;
        IF TG_OP IN ('DELETE', 'UPDATE') THEN
            EXECUTE format('SELECT array_agg(%s) FROM kde_old', expr) INTO removed;
        END IF;
        -- (heavy values packed on a lattice are unpacked, and their new counts packed again: 0.9.0)
        SELECT d.*, h.atom_values, @extschema@._kde_atoms_pack(h.atom_values, d.new_atom_cum_count, p.step) AS pack,
               octet_length(p.atom_pack) AS old_pack, pg_column_size(p.*) AS payload_bytes
        INTO delta FROM @extschema@.kde_synopsis p, LATERAL @extschema@._kde_atoms(p) h,
               LATERAL @extschema@._kde_track_delta(p.grid, p.step, h.atom_values, h.atom_cum_count, h.atom_cum_sum,
                                                    p.cell_cum_count, p.cell_cum_sum, p.density,
                                                    coalesce(added, '{}'), coalesce(removed, '{}')) d
        WHERE p.relid = TG_RELID::regclass AND p.cols = r.cols;
        problem := delta.problem;
        -- A pack whose counts no longer pack (a running sum past 2^53) or that outgrows the budget: stale, so
        -- that the next refresh lays the synopsis out again within it.
        IF problem IS NULL AND delta.old_pack > 0 THEN
            IF delta.pack IS NULL THEN
                problem := 'the heavy values no longer pack (a running sum past 2^53)';
            ELSIF r.header_bytes + delta.payload_bytes + octet_length(delta.pack) - delta.old_pack > r.budget THEN
                problem := format('the heavy values'' pack would take the synopsis past its budget (%s bytes)',
                                  r.budget);
            END IF;
        END IF;
        IF problem IS NOT NULL THEN
            -- Stale with the reason, until a refresh (which stores the table's own storage id again).
            UPDATE @extschema@.kde_catalog k SET storage_id = 'untracked: ' || problem
            WHERE k.relid = TG_RELID::regclass AND k.cols = r.cols;
            CONTINUE;
        END IF;
        UPDATE @extschema@.kde_synopsis p
        SET grid = delta.new_grid,
            atom_values = CASE WHEN delta.pack IS NULL THEN delta.atom_values ELSE '{}' END,
            atom_cum_count = CASE WHEN delta.pack IS NULL THEN delta.new_atom_cum_count ELSE '{}' END,
            atom_cum_sum = CASE WHEN delta.pack IS NULL THEN delta.new_atom_cum_sum ELSE '{}' END,
            atom_pack = coalesce(delta.pack, ''),
            cell_cum_count = delta.new_cell_cum_count, cell_cum_sum = delta.new_cell_cum_sum,
            density = delta.new_density, kde_rows = p.kde_rows + delta.kde_rows,
            coarse = CASE WHEN added_coarse THEN true ELSE p.coarse END,
            -- each written value's addition, each prefix's and each cell's, rounds within one ulp of the
            -- largest magnitude added (2^-51 of it: twice that); a removed row takes its exact value out of
            -- a sum that holds it rounded to the build's quantum (half of it, twice)
            sum_slack = p.sum_slack + (coalesce(cardinality(added), 0) + coalesce(cardinality(removed), 0)
                                       + 2 * cardinality(p.grid) + 2) * 4.440892098500626e-16
                                      * greatest((SELECT max(abs(x)) FROM unnest(p.cell_cum_sum) x),
                                                 (SELECT max(abs(x)) FROM unnest(delta.new_cell_cum_sum) x),
                                                 coalesce((SELECT sum(abs(x)) FROM unnest(added) x), 0)
                                                 + coalesce((SELECT sum(abs(x)) FROM unnest(removed) x), 0))
                        + coalesce(cardinality(removed), 0) * p.sum_quantum
        WHERE p.relid = TG_RELID::regclass AND p.cols = r.cols;
        -- Up to date with this statement: its rows count as seen (the activity counters move by one a row
        -- inserted, updated or deleted; writes the triggers did not see still count), and the size is now.
        UPDATE @extschema@.kde_catalog k
        SET n_rows = k.n_rows + delta.non_null, n_null = k.n_null + delta.nulls,
            mod_count = k.mod_count + CASE TG_OP WHEN 'UPDATE' THEN coalesce(cardinality(added), 0)
                                                 ELSE coalesce(cardinality(added), 0) + coalesce(cardinality(removed), 0) END,
            pages = size_now
        WHERE k.relid = TG_RELID::regclass AND k.cols = r.cols;
    END LOOP;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION _kde_track_apply() IS 'pg_kde internal: the tracking triggers'' function';

CREATE OR REPLACE FUNCTION kde_refresh(tbl regclass, col text, method text DEFAULT 'auto', sample_size integer DEFAULT 50000,
                            grid_size integer DEFAULT NULL, backend text DEFAULT 'auto',
                            budget integer DEFAULT NULL) RETURNS jsonb
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@._kde_raise_if_error(
        @extschema@._kde_refresh(tbl::oid, ARRAY[col], method, sample_size, grid_size, backend, budget, '0.30.0'))
$$;
COMMENT ON FUNCTION kde_refresh(regclass, text, text, integer, integer, text, integer) IS
    'Build or rebuild the synopsis of one numeric, date or timestamp column within budget bytes (default 8192; method: auto = plugin_cdf | plugin | lscv_h | lscv_H | normal_reference); returns a summary';

CREATE OR REPLACE FUNCTION kde_refresh(tbl regclass, cols text[], method text DEFAULT 'auto', sample_size integer DEFAULT 5000,
                            grid_size integer DEFAULT NULL, backend text DEFAULT 'auto',
                            budget integer DEFAULT NULL) RETURNS jsonb
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@._kde_raise_if_error(
        @extschema@._kde_refresh(tbl::oid, cols, method, sample_size, grid_size, backend, budget, '0.30.0'))
$$;
COMMENT ON FUNCTION kde_refresh(regclass, text[], text, integer, integer, text, integer) IS
    'Build or rebuild the synopsis of one column or, with two, of a pair within budget bytes (default 8192 and 65536; method: auto = lscv_H for a pair); returns a summary';

CREATE OR REPLACE FUNCTION kde_bandwidth(tbl regclass, cols text[], method text DEFAULT 'auto', backend text DEFAULT 'auto',
                              sample_size integer DEFAULT 10000) RETURNS float8[]
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT ARRAY(SELECT jsonb_array_elements_text(@extschema@._kde_raise_if_error(
        @extschema@._kde_bandwidth(tbl::oid, cols, method, backend, sample_size, '0.30.0')) -> 'bandwidth')::float8)
$$;
COMMENT ON FUNCTION kde_bandwidth(regclass, text[], text, text, integer) IS
    'Bandwidth of a sample of rows with all columns non-NULL: {h} for one column (data units), else H row-major';

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
                '0.30.0'));
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

-- The synopses built before, by _kde_coarse_rule: a column of a type whose values are their float8s (or a
-- numeric(p <= 15, s <= 307)) is not coarse; a bigint or timestamp column is where its stored values reach the
-- rule's magnitude (the grid's ends and the heavy values hold its extremes); any other numeric column is not
-- known (NULL, read as coarse) until its next refresh counts its digits.
UPDATE @extschema@.kde_synopsis p
SET coarse = CASE
        WHEN (c.rule).digits THEN NULL
        WHEN (c.rule).magnitude IS NOT NULL THEN
            coalesce((SELECT max(abs(v)) FROM unnest(p.grid || (@extschema@._kde_atoms(p)).atom_values) v)
                     >= (c.rule).magnitude, false)
        ELSE false END
FROM @extschema@.kde_catalog k
CROSS JOIN LATERAL (SELECT @extschema@._kde_coarse_rule(k.relid, a.attname) AS rule
                    FROM pg_catalog.pg_attribute a
                    WHERE a.attrelid = k.relid AND a.attnum = k.attnums[1] AND NOT a.attisdropped) c
WHERE k.relid = p.relid AND k.cols = p.cols;
