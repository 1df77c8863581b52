-- pg_kde 0.1.0: approximate range aggregates from kernel density synopses.
\echo Use "CREATE EXTENSION pg_kde CASCADE" to load this file. \quit

-- ---------------------------------------------------------------------------------------------- catalog
-- One row per (table, column set). A synopsis is two parts that add up:
--   heavy values ("atoms"): values holding >= 0.1% of the rows, kept exactly (sorted, with cumulative
--     counts, sums and sums of squares over the whole table); a column with few distinct values is all atoms;
--   the smooth part: a Gaussian KDE of the remaining rows on grid_size points over [grid_lo, grid_hi],
--     stored as cumulative integrals of f, x f and x² f scaled to row counts.
CREATE TABLE kde_synopsis (
    relid           regclass    NOT NULL,
    cols            text[]      NOT NULL,
    method          text        NOT NULL,
    bandwidth       float8[]    NOT NULL,
    sample_size     integer     NOT NULL,
    n_rows          bigint      NOT NULL,
    n_null          bigint      NOT NULL,
    integer_valued  boolean     NOT NULL,
    atom_values     float8[]    NOT NULL,
    atom_cum_count  float8[]    NOT NULL,
    atom_cum_sum    float8[]    NOT NULL,
    atom_cum_sumsq  float8[]    NOT NULL,
    kde_rows        bigint      NOT NULL,
    grid_lo         float8,
    grid_hi         float8,
    grid_size       integer     NOT NULL,
    cum_count       float8[]    NOT NULL,
    cum_sum         float8[]    NOT NULL,
    cum_sumsq       float8[]    NOT NULL,
    built_at        timestamptz NOT NULL DEFAULT now(),
    build_seconds   float8      NOT NULL,
    backend         text        NOT NULL,
    mod_count       bigint      NOT NULL,
    options         jsonb       NOT NULL,
    PRIMARY KEY (relid, cols)
);
COMMENT ON TABLE kde_synopsis IS 'pg_kde synopses: exact heavy values plus a KDE of the other rows, per table and column set';
SELECT pg_catalog.pg_extension_config_dump('kde_synopsis', '');

-- True when the current role may SELECT every column in cols of tbl (false for dropped columns).
CREATE FUNCTION _kde_can_read(tbl regclass, cols text[]) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(bool_and(coalesce(has_column_privilege(tbl, a.attnum, 'SELECT'), false)), false)
    FROM unnest(cols) AS c(name)
    LEFT JOIN pg_attribute a ON a.attrelid = tbl AND a.attname = c.name AND a.attnum > 0 AND NOT a.attisdropped
$$;
COMMENT ON FUNCTION _kde_can_read(regclass, text[]) IS 'pg_kde internal: may the current role read these columns';

-- Row-level security: a role sees, and may write, only synopses of columns it can SELECT. PUBLIC may
-- read; writing (kde_refresh) needs an explicit GRANT INSERT, UPDATE, DELETE ON kde_synopsis.
ALTER TABLE kde_synopsis ENABLE ROW LEVEL SECURITY;
CREATE POLICY kde_synopsis_column_privilege ON kde_synopsis
    USING (@extschema@._kde_can_read(relid, cols))
    WITH CHECK (@extschema@._kde_can_read(relid, cols));
GRANT SELECT ON kde_synopsis TO PUBLIC;

-- ---------------------------------------------------------------------------------------------- refresh
CREATE FUNCTION _kde_refresh(relid oid, cols text[], method text, sample_size integer, grid_size integer,
                             backend text, extversion text) RETURNS jsonb
LANGUAGE plpython3u VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
from pg_kde import sql_entry
return sql_entry.refresh(plpy, GD, relid, cols, method, sample_size, grid_size, backend, extversion)
$$;
COMMENT ON FUNCTION _kde_refresh(oid, text[], text, integer, integer, text, text) IS 'pg_kde internal: build a synopsis';

CREATE FUNCTION kde_refresh(tbl regclass, col text, method text DEFAULT 'auto', sample_size integer DEFAULT 50000,
                            grid_size integer DEFAULT 2048, backend text DEFAULT 'auto') RETURNS jsonb
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@._kde_refresh(tbl::oid, ARRAY[col], method, sample_size, grid_size, backend, '0.1.0') $$;
COMMENT ON FUNCTION kde_refresh(regclass, text, text, integer, integer, text) IS
    'Build or rebuild the synopsis of one numeric column (method: auto = plugin_cdf | plugin | lscv_h | lscv_H | normal_reference); returns a summary';

CREATE FUNCTION _kde_bandwidth(relid oid, cols text[], method text, backend text, sample_size integer,
                               extversion text) RETURNS float8[]
LANGUAGE plpython3u VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
from pg_kde import sql_entry
return sql_entry.choose_bandwidth(plpy, GD, relid, cols, method, backend, sample_size, extversion)
$$;
COMMENT ON FUNCTION _kde_bandwidth(oid, text[], text, text, integer, text) IS 'pg_kde internal: bandwidth of a sample';

CREATE FUNCTION kde_bandwidth(tbl regclass, cols text[], method text DEFAULT 'auto', backend text DEFAULT 'auto',
                              sample_size integer DEFAULT 10000) RETURNS float8[]
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@._kde_bandwidth(tbl::oid, cols, method, backend, sample_size, '0.1.0') $$;
COMMENT ON FUNCTION kde_bandwidth(regclass, text[], text, text, integer) IS
    'Bandwidth of a sample of rows with all columns non-NULL: {h} for one column (data units), else H row-major';

CREATE FUNCTION kde_bandwidth(tbl regclass, col text, method text DEFAULT 'auto', backend text DEFAULT 'auto',
                              sample_size integer DEFAULT 10000) RETURNS float8[]
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@._kde_bandwidth(tbl::oid, ARRAY[col], method, backend, sample_size, '0.1.0') $$;
COMMENT ON FUNCTION kde_bandwidth(regclass, text, text, text, integer) IS
    'Bandwidth h (data units) of a sample of one column''s non-NULL values';

-- ---------------------------------------------------------------------------------------------- queries
-- The synopsis of (tbl, cols), after checking the caller may read the columns; a clear error otherwise.
CREATE FUNCTION _kde_synopsis_for(tbl regclass, cols text[]) RETURNS kde_synopsis
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s @extschema@.kde_synopsis;
    c text;
BEGIN
    FOREACH c IN ARRAY cols LOOP
        IF NOT has_column_privilege(tbl, c, 'SELECT') THEN
            RAISE EXCEPTION 'permission denied for column % of relation %', quote_ident(c), tbl
                USING ERRCODE = 'insufficient_privilege';
        END IF;
    END LOOP;
    SELECT * INTO s FROM @extschema@.kde_synopsis k WHERE k.relid = tbl AND k.cols = _kde_synopsis_for.cols;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no pg_kde synopsis for column % of %', array_to_string(cols, ', '), tbl
            USING ERRCODE = 'undefined_object',
                  HINT = format('Build it with: SELECT kde_refresh(%L, %L);', tbl::text, cols[1]);
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

-- A cumulative grid array [lo, hi] evaluated at x, linear between grid points, 0 below and total above.
CREATE FUNCTION _kde_grid_upto(cum float8[], lo float8, hi float8, x float8) RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    m integer := cardinality(cum);
    p float8;
    i integer;
BEGIN
    IF m IS NULL OR m = 0 OR x <= lo THEN
        RETURN 0;
    ELSIF x >= hi THEN
        RETURN cum[m];
    END IF;
    p := (x - lo) / (hi - lo) * (m - 1);
    i := least(floor(p)::integer, m - 2);
    RETURN cum[i + 1] + (p - i) * (cum[i + 2] - cum[i + 1]);
END
$$;
COMMENT ON FUNCTION _kde_grid_upto(float8[], float8, float8, float8) IS 'pg_kde internal: cumulative grid lookup';

-- Moment 0, 1 or 2 (count, sum, sum of squares) of the rows with lo <= x <= hi; NULL bounds are open.
CREATE FUNCTION _kde_range(s kde_synopsis, lo float8, hi float8, moment integer) RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    a float8 := coalesce(lo, '-Infinity');
    b float8 := coalesce(hi, 'Infinity');
    atoms float8[];
    grid float8[];
    total float8;
BEGIN
    IF a > b THEN
        RETURN 0;
    END IF;
    atoms := CASE moment WHEN 0 THEN s.atom_cum_count WHEN 1 THEN s.atom_cum_sum ELSE s.atom_cum_sumsq END;
    grid := CASE moment WHEN 0 THEN s.cum_count WHEN 1 THEN s.cum_sum ELSE s.cum_sumsq END;
    total := @extschema@._kde_atoms_upto(s.atom_values, atoms, b, true)
           - @extschema@._kde_atoms_upto(s.atom_values, atoms, a, false);
    IF s.integer_valued THEN
        -- Whole values only: x in [a, b] means x in [ceil(a), floor(b)], each value owning x ± 1/2.
        a := ceil(a) - 0.5;
        b := floor(b) + 0.5;
    END IF;
    IF a < b AND s.kde_rows > 0 THEN
        total := total + @extschema@._kde_grid_upto(grid, s.grid_lo, s.grid_hi, b)
                       - @extschema@._kde_grid_upto(grid, s.grid_lo, s.grid_hi, a);
    END IF;
    RETURN total;
END
$$;
COMMENT ON FUNCTION _kde_range(kde_synopsis, float8, float8, integer) IS 'pg_kde internal: a moment over a range';

CREATE FUNCTION approx_count(tbl regclass, col text, lo float8, hi float8) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@._kde_range(@extschema@._kde_synopsis_for(tbl, ARRAY[col]), lo, hi, 0) $$;
COMMENT ON FUNCTION approx_count(regclass, text, float8, float8) IS
    'Approximate count of rows with lo <= col <= hi (NULL or infinite bounds are open) from the synopsis';

CREATE FUNCTION approx_sum(tbl regclass, col text, lo float8, hi float8) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@._kde_range(@extschema@._kde_synopsis_for(tbl, ARRAY[col]), lo, hi, 1) $$;
COMMENT ON FUNCTION approx_sum(regclass, text, float8, float8) IS
    'Approximate sum of col over rows with lo <= col <= hi (NULL or infinite bounds are open) from the synopsis';

CREATE FUNCTION approx_avg(tbl regclass, col text, lo float8, hi float8) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN c > 0 THEN @extschema@._kde_range(s, lo, hi, 1) / c END
    FROM (SELECT @extschema@._kde_synopsis_for(tbl, ARRAY[col]) AS s) q,
         LATERAL (SELECT @extschema@._kde_range(q.s, lo, hi, 0) AS c) n
$$;
COMMENT ON FUNCTION approx_avg(regclass, text, float8, float8) IS
    'Approximate average of col over rows with lo <= col <= hi (NULL when the range holds no rows)';

-- ---------------------------------------------------------------------------------------------- staleness
CREATE VIEW kde_synopses WITH (security_invoker = true) AS
SELECT k.relid,
       k.cols,
       k.method,
       k.n_rows,
       cardinality(k.atom_values) AS heavy_values,
       k.kde_rows,
       pg_column_size(k.*) AS bytes,
       k.built_at,
       now() - k.built_at AS age,
       k.build_seconds,
       k.backend,
       greatest(coalesce(t.n_tup_ins + t.n_tup_upd + t.n_tup_del, k.mod_count) - k.mod_count, 0) AS rows_modified,
       greatest(coalesce(t.n_tup_ins + t.n_tup_upd + t.n_tup_del, k.mod_count) - k.mod_count, 0)
           > 0.1 * greatest(k.n_rows + k.n_null, 1) AS stale
FROM @extschema@.kde_synopsis k
LEFT JOIN pg_catalog.pg_stat_user_tables t ON t.relid = k.relid;
COMMENT ON VIEW kde_synopses IS
    'Every synopsis the current role may read, with its size, age, rows modified since its build and a stale flag (> 10% of the rows modified)';
GRANT SELECT ON kde_synopses TO PUBLIC;

CREATE FUNCTION kde_refresh_stale() RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r record;
    n integer := 0;
BEGIN
    FOR r IN SELECT k.relid, k.cols, k.options
             FROM @extschema@.kde_synopses v JOIN @extschema@.kde_synopsis k USING (relid, cols)
             WHERE v.stale AND cardinality(k.cols) = 1
    LOOP
        -- The same request as the last refresh (options holds its arguments).
        PERFORM @extschema@._kde_refresh(r.relid::oid, r.cols, r.options ->> 'method',
                                         (r.options ->> 'sample_size')::integer, (r.options ->> 'grid_size')::integer,
                                         r.options ->> 'backend', '0.1.0');
        n := n + 1;
    END LOOP;
    RETURN n;
END
$$;
COMMENT ON FUNCTION kde_refresh_stale() IS 'Refresh every stale synopsis the current role may refresh; returns how many';
