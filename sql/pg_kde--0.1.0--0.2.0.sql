-- pg_kde 0.1.0 -> 0.2.0: synopses bound to their columns' identity (attnum, type) and kept in step by event
-- triggers; not served or written under row-level security; schema USAGE checked; validated catalog rows;
-- staleness from storage files, sizes and counters; clean errors; kde_refresh_stale refreshes each synopsis
-- on its own. Frozen once released: later changes go into a new update script.
\echo Use "ALTER EXTENSION pg_kde UPDATE TO '0.2.0'" to load this file. \quit

-- The old row filter goes first: the new one reads the identity columns.
DROP POLICY kde_synopsis_column_privilege ON kde_synopsis;
DROP POLICY kde_synopsis_2d_column_privilege ON kde_synopsis_2d;
DROP FUNCTION _kde_can_read(regclass, text[]);

ALTER TABLE kde_synopsis ADD COLUMN attnums int2[], ADD COLUMN coltypes text[], ADD COLUMN built_relid oid,
    ADD COLUMN storage_id text, ADD COLUMN pages bigint;
ALTER TABLE kde_synopsis_2d ADD COLUMN attnums int2[], ADD COLUMN coltypes text[], ADD COLUMN built_relid oid,
    ADD COLUMN storage_id text, ADD COLUMN pages bigint;

-- An array readers can index from 1 with no NULL element (the shape checks below).
CREATE FUNCTION _kde_is_vector(a anyarray) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT (array_ndims(a) IS NULL OR (array_ndims(a) = 1 AND array_lower(a, 1) = 1)) AND array_position(a, NULL) IS NULL $$;
COMMENT ON FUNCTION _kde_is_vector(anyarray) IS 'pg_kde internal: a one-dimensional array from 1 without NULLs';

-- What staleness compares: the relation's modification counters (inserted + updated + deleted rows over its
-- leaf partitions, this backend's counts not yet reported included), its storage files (a TRUNCATE, a
-- rewrite or a change of partitions gives new ones) and its size in pages.
CREATE FUNCTION _kde_table_state(tbl regclass, OUT mod_count bigint, OUT storage_id text, OUT pages bigint)
LANGUAGE sql STABLE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp
AS $$
    WITH leaves AS (
        SELECT p.relid FROM pg_partition_tree(tbl) p WHERE p.isleaf
        UNION ALL
        SELECT tbl WHERE NOT EXISTS (SELECT 1 FROM pg_partition_tree(tbl))
    )
    SELECT coalesce(sum(pg_stat_get_tuples_inserted(l.relid) + pg_stat_get_tuples_updated(l.relid)
                        + pg_stat_get_tuples_deleted(l.relid) + pg_stat_get_xact_tuples_inserted(l.relid)
                        + pg_stat_get_xact_tuples_updated(l.relid) + pg_stat_get_xact_tuples_deleted(l.relid)), 0)::bigint,
           string_agg(l.relid::oid::text || ':' || pg_relation_filenode(l.relid)::text, ',' ORDER BY l.relid::oid),
           coalesce(sum(pg_relation_size(l.relid) / current_setting('block_size')::bigint), 0)::bigint
    FROM leaves l
$$;
COMMENT ON FUNCTION _kde_table_state(regclass) IS 'pg_kde internal: what staleness compares';

-- Bind each row to its columns by name as they are now (rows of dropped tables or columns go), with the
-- table's state now as its staleness baseline.
DO $bind$
DECLARE
    catalog text;
BEGIN
    FOREACH catalog IN ARRAY ARRAY['kde_synopsis', 'kde_synopsis_2d'] LOOP
        EXECUTE format($q$
            UPDATE %1$I k SET attnums = q.nums, coltypes = q.types, built_relid = k.relid::oid,
                storage_id = q.storage_id, pages = q.pages
            FROM (SELECT s.relid, s.cols, array_agg(a.attnum ORDER BY u.i) AS nums,
                         array_agg(format_type(a.atttypid, a.atttypmod) ORDER BY u.i) AS types,
                         count(a.attnum) AS found, min(st.storage_id) AS storage_id, min(st.pages) AS pages
                  FROM %1$I s CROSS JOIN LATERAL unnest(s.cols) WITH ORDINALITY AS u(name, i)
                  CROSS JOIN LATERAL _kde_table_state(s.relid) st
                  LEFT JOIN pg_catalog.pg_attribute a
                         ON a.attrelid = s.relid AND a.attname = u.name AND a.attnum > 0 AND NOT a.attisdropped
                  GROUP BY s.relid, s.cols) q
            WHERE k.relid = q.relid AND k.cols = q.cols AND q.found = cardinality(k.cols)
            $q$, catalog);
        EXECUTE format('DELETE FROM %I WHERE attnums IS NULL', catalog);
        EXECUTE format('ALTER TABLE %I ALTER COLUMN attnums SET NOT NULL, ALTER COLUMN coltypes SET NOT NULL, '
                       'ALTER COLUMN built_relid SET NOT NULL, ALTER COLUMN pages SET NOT NULL', catalog);
    END LOOP;
END
$bind$;

-- Catalog rows are validated on write: a malformed row (written by hand by a granted role) is refused
-- instead of breaking every reader.
ALTER TABLE kde_synopsis ADD CONSTRAINT kde_synopsis_well_formed CHECK (
    cardinality(cols) = 1 AND cardinality(attnums) = 1 AND cardinality(coltypes) = 1 AND attnums[1] > 0
    AND n_rows >= 0 AND n_null >= 0 AND kde_rows BETWEEN 0 AND n_rows AND sample_size >= 0 AND pages >= 0
    AND cardinality(bandwidth) = 1 AND bandwidth[1] >= 0 AND bandwidth[1] < 'Infinity'
    AND grid_size >= 0 AND (grid_size >= 2 OR kde_rows = 0)
    AND cardinality(grid) = grid_size AND cardinality(cell_cum_count) = grid_size
    AND cardinality(cell_cum_sum) = grid_size AND cardinality(cell_cum_offset) = grid_size
    AND cardinality(kde_mass) = grid_size
    AND cardinality(atom_cum_count) = cardinality(atom_values) AND cardinality(atom_cum_sum) = cardinality(atom_values)
    AND @extschema@._kde_is_vector(cols) AND @extschema@._kde_is_vector(attnums) AND @extschema@._kde_is_vector(coltypes)
    AND @extschema@._kde_is_vector(bandwidth) AND @extschema@._kde_is_vector(atom_values)
    AND @extschema@._kde_is_vector(atom_cum_count) AND @extschema@._kde_is_vector(atom_cum_sum)
    AND @extschema@._kde_is_vector(grid) AND @extschema@._kde_is_vector(lattice)
    AND @extschema@._kde_is_vector(cell_cum_count) AND @extschema@._kde_is_vector(cell_cum_sum)
    AND @extschema@._kde_is_vector(cell_cum_offset) AND @extschema@._kde_is_vector(kde_mass));
ALTER TABLE kde_synopsis_2d ADD CONSTRAINT kde_synopsis_2d_well_formed CHECK (
    cardinality(attnums) = 2 AND cardinality(coltypes) = 2 AND attnums[1] > 0 AND attnums[2] > 0
    AND n_rows >= 0 AND n_null >= 0 AND sample_size >= 0 AND pages >= 0
    AND cardinality(integer_valued) = 2 AND cardinality(grid_size) = 2 AND grid_size[1] >= 2 AND grid_size[2] >= 2
    AND cardinality(bandwidth) = 4 AND cardinality(grid1) = grid_size[1] AND cardinality(grid2) = grid_size[2]
    AND cardinality(sat_count) = grid_size[1]::bigint * grid_size[2]
    AND cardinality(kde_sat) = grid_size[1]::bigint * grid_size[2]
    AND cardinality(sat_sum) = 2 * grid_size[1]::bigint * grid_size[2]
    AND @extschema@._kde_is_vector(cols) AND @extschema@._kde_is_vector(attnums) AND @extschema@._kde_is_vector(coltypes)
    AND @extschema@._kde_is_vector(integer_valued) AND @extschema@._kde_is_vector(grid_size)
    AND @extschema@._kde_is_vector(bandwidth) AND @extschema@._kde_is_vector(grid1) AND @extschema@._kde_is_vector(grid2)
    AND @extschema@._kde_is_vector(lattice1) AND @extschema@._kde_is_vector(lattice2)
    AND @extschema@._kde_is_vector(sat_count) AND @extschema@._kde_is_vector(sat_sum)
    AND @extschema@._kde_is_vector(kde_sat));

-- True when row-level security may hide rows of tbl from the current role: its policies apply to the role
-- (row_security_active), or tbl is a view over (views over) a table with row-level security enabled, whose
-- policies filter by the role reading through the view.
CREATE FUNCTION _kde_rows_hidden(tbl regclass) RETURNS boolean
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF row_security_active(tbl) THEN
        RETURN true;
    ELSIF NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = tbl AND c.relkind = 'v') THEN
        RETURN false;
    END IF;
    RETURN EXISTS (
        WITH RECURSIVE used(oid, kind, rls) AS (
            SELECT c.oid, c.relkind, c.relrowsecurity FROM pg_class c WHERE c.oid = tbl
            UNION
            SELECT c.oid, c.relkind, c.relrowsecurity
            FROM used
            JOIN pg_rewrite r ON r.ev_class = used.oid
            JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid AND d.refclassid = 'pg_class'::regclass
            JOIN pg_class c ON c.oid = d.refobjid AND c.oid <> used.oid
            WHERE used.kind = 'v'
        )
        SELECT 1 FROM used WHERE used.rls);
END
$$;
COMMENT ON FUNCTION _kde_rows_hidden(regclass) IS 'pg_kde internal: may row-level security hide rows of tbl from the current role';

-- The catalog's row filter: the role may read the relation's schema and every column of the synopsis (by
-- name, and by number unless the row came through a dump and restore), and sees every row.
CREATE FUNCTION _kde_can_read(tbl regclass, cols text[], attnums int2[], built_relid oid) RETURNS boolean
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    readable boolean;
BEGIN
    SELECT has_schema_privilege(c.relnamespace, 'USAGE') AND NOT row_security_active(tbl)
           AND (c.relkind <> 'v' OR NOT @extschema@._kde_rows_hidden(tbl))
           AND (SELECT coalesce(bool_and(a.attnum IS NOT NULL AND coalesce(has_column_privilege(tbl, a.attnum, 'SELECT'), false)
                                         AND (built_relid <> tbl::oid OR a.attnum = u.n)), false)
                FROM unnest(cols, attnums) AS u(name, n)
                LEFT JOIN pg_attribute a ON a.attrelid = tbl AND a.attname = u.name AND a.attnum > 0 AND NOT a.attisdropped)
    INTO readable
    FROM pg_class c WHERE c.oid = tbl;
    RETURN coalesce(readable, false);
END
$$;
COMMENT ON FUNCTION _kde_can_read(regclass, text[], int2[], oid) IS 'pg_kde internal: may the current role read this synopsis';

-- Row-level security on the catalog: a role sees, and may write, only synopses it could compute itself.
-- PUBLIC may read; writing (kde_refresh) needs an explicit GRANT INSERT, UPDATE, DELETE ON kde_synopsis.
ALTER TABLE kde_synopsis ENABLE ROW LEVEL SECURITY;
CREATE POLICY kde_synopsis_column_privilege ON kde_synopsis
    USING (@extschema@._kde_can_read(relid, cols, attnums, built_relid))
    WITH CHECK (@extschema@._kde_can_read(relid, cols, attnums, built_relid));
GRANT SELECT ON kde_synopsis TO PUBLIC;
ALTER TABLE kde_synopsis_2d ENABLE ROW LEVEL SECURITY;
CREATE POLICY kde_synopsis_2d_column_privilege ON kde_synopsis_2d
    USING (@extschema@._kde_can_read(relid, cols, attnums, built_relid))
    WITH CHECK (@extschema@._kde_can_read(relid, cols, attnums, built_relid));
GRANT SELECT ON kde_synopsis_2d TO PUBLIC;

-- The columns' numbers and types, after checking that the current role may read them: the relation's
-- schema (USAGE), each column (SELECT), every row (no row-level security applies). Clear errors otherwise.
CREATE FUNCTION _kde_columns(tbl regclass, cols text[], OUT attnums int2[], OUT coltypes text[])
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rel record;
    col record;
    found_all boolean;
    readable boolean;
BEGIN
    IF tbl IS NULL OR cols IS NULL OR cardinality(cols) = 0 OR array_position(cols, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'pg_kde: the table and column arguments must not be NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT n.nspname, has_schema_privilege(c.relnamespace, 'USAGE') AS usable,
           row_security_active(tbl) OR (c.relkind = 'v' AND @extschema@._kde_rows_hidden(tbl)) AS hidden INTO rel
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = tbl;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'pg_kde: relation with oid % does not exist', tbl::oid USING ERRCODE = 'undefined_table';
    ELSIF NOT rel.usable THEN
        RAISE EXCEPTION 'permission denied for schema %', quote_ident(rel.nspname) USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- All columns in one lookup; on a failure, the first column at fault names the error.
    SELECT array_agg(a.attnum ORDER BY u.i), array_agg(format_type(a.atttypid, a.atttypmod) ORDER BY u.i),
           count(a.attnum) = cardinality(cols), coalesce(bool_and(has_column_privilege(tbl, a.attnum, 'SELECT')), false)
    INTO attnums, coltypes, found_all, readable
    FROM unnest(cols) WITH ORDINALITY AS u(name, i)
    LEFT JOIN pg_attribute a ON a.attrelid = tbl AND a.attname = u.name AND a.attnum > 0 AND NOT a.attisdropped;
    IF NOT (found_all AND readable) THEN
        FOR col IN SELECT u.name, a.attnum, has_column_privilege(tbl, a.attnum, 'SELECT') AS ok
                   FROM unnest(cols) WITH ORDINALITY AS u(name, i)
                   LEFT JOIN pg_attribute a ON a.attrelid = tbl AND a.attname = u.name AND a.attnum > 0 AND NOT a.attisdropped
                   ORDER BY u.i LOOP
            IF col.attnum IS NULL THEN
                RAISE EXCEPTION 'column % of relation % does not exist', quote_ident(col.name), tbl
                    USING ERRCODE = 'undefined_column';
            ELSIF NOT col.ok THEN
                RAISE EXCEPTION 'permission denied for column % of relation %', quote_ident(col.name), tbl
                    USING ERRCODE = 'insufficient_privilege';
            END IF;
        END LOOP;
    END IF;
    IF rel.hidden THEN
        RAISE EXCEPTION 'pg_kde: row-level security hides rows of % from role %', tbl, current_user
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'A synopsis summarises every row of the table, so it is not served where policies filter rows.',
                  HINT = 'Query the table itself, or use a role its policies do not apply to (its owner, or a role with BYPASSRLS).';
    END IF;
END
$$;
COMMENT ON FUNCTION _kde_columns(regclass, text[]) IS 'pg_kde internal: the columns'' identity, privilege-checked';

-- A catalog row found by name still describes those columns: same numbers (unless the relation came
-- through a dump and restore, which keeps names but not numbers) and same types.
CREATE FUNCTION _kde_check_identity(tbl regclass, cols text[], built_relid oid, built_attnums int2[],
                                    built_types text[], attnums int2[], coltypes text[]) RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF built_types IS DISTINCT FROM coltypes OR (built_relid = tbl::oid AND built_attnums IS DISTINCT FROM attnums) THEN
        RAISE EXCEPTION 'pg_kde: the synopsis of % of % was built for a column that has since been dropped, replaced or changed type',
                        array_to_string(cols, ', '), tbl
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Rebuild it with kde_refresh.';
    END IF;
END
$$;
COMMENT ON FUNCTION _kde_check_identity(regclass, text[], oid, int2[], text[], int2[], text[]) IS
    'pg_kde internal: does a synopsis still describe its columns';

-- Each column of a catalog row as the relation holds it now: by number, or by name for a row restored from a
-- dump (built_relid differs from the relation's oid); NULL attnum where the column is gone.
CREATE FUNCTION _kde_resolve(tbl regclass, cols text[], attnums int2[], built_relid oid)
RETURNS TABLE (i bigint, name text, attnum int2, type text)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT u.i, a.attname::text, a.attnum, format_type(a.atttypid, a.atttypmod)
    FROM unnest(cols, attnums) WITH ORDINALITY AS u(name, n, i)
    LEFT JOIN pg_attribute a ON a.attrelid = tbl AND a.attnum > 0 AND NOT a.attisdropped
                            AND CASE WHEN built_relid = tbl::oid THEN a.attnum = u.n ELSE a.attname = u.name END
$$;
COMMENT ON FUNCTION _kde_resolve(regclass, text[], int2[], oid) IS 'pg_kde internal: a synopsis''s columns as they are now';

-- Synopses follow their columns (run by the event triggers below, for the relations a command touched, or
-- every relation when relids is NULL): a synopsis whose column is gone or changed type is removed; a
-- renamed column's synopses take its new name; rows restored from a dump are bound to the columns' numbers.
CREATE FUNCTION _kde_reconcile(relids oid[]) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    catalog text;
BEGIN
    FOREACH catalog IN ARRAY ARRAY['kde_synopsis', 'kde_synopsis_2d'] LOOP
        EXECUTE format($q$
            DELETE FROM %1$I.%2$I k
            WHERE ($1 IS NULL OR k.relid::oid = ANY ($1)) AND NOT EXISTS (
                SELECT 1 FROM (SELECT bool_and(r.attnum IS NOT NULL AND r.type = k.coltypes[r.i]) AS ok
                               FROM %1$I._kde_resolve(k.relid, k.cols, k.attnums, k.built_relid) r) q WHERE q.ok)
            $q$, '@extschema@', catalog) USING relids;
        EXECUTE format($q$
            UPDATE %1$I.%2$I k SET cols = q.names, attnums = q.nums, built_relid = k.relid::oid
            FROM (SELECT s.relid, s.cols, array_agg(r.name ORDER BY r.i) AS names, array_agg(r.attnum ORDER BY r.i) AS nums
                  FROM %1$I.%2$I s, %1$I._kde_resolve(s.relid, s.cols, s.attnums, s.built_relid) r
                  WHERE $1 IS NULL OR s.relid::oid = ANY ($1) GROUP BY s.relid, s.cols) q
            WHERE k.relid = q.relid AND k.cols = q.cols
              AND (k.cols <> q.names OR k.attnums <> q.nums OR k.built_relid <> k.relid::oid)
            $q$, '@extschema@', catalog) USING relids;
    END LOOP;
END
$$;
COMMENT ON FUNCTION _kde_reconcile(oid[]) IS 'pg_kde internal: keep catalog rows in step with their columns';

-- ---------------------------------------------------------------------------------------------- refresh
-- The PL/Python entry points return {"error": {message, sqlstate, detail, hint}} for errors a user can fix,
-- raised here as one clean PostgreSQL error (no Python traceback in its context).
CREATE FUNCTION _kde_raise_if_error(result jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    e jsonb := result -> 'error';
    code text;
BEGIN
    IF e IS NULL THEN
        RETURN result;
    END IF;
    code := coalesce(e ->> 'sqlstate', 'P0001');
    IF e ->> 'hint' IS NULL AND e ->> 'detail' IS NULL THEN
        RAISE EXCEPTION USING MESSAGE = e ->> 'message', ERRCODE = code;
    ELSIF e ->> 'detail' IS NULL THEN
        RAISE EXCEPTION USING MESSAGE = e ->> 'message', ERRCODE = code, HINT = e ->> 'hint';
    ELSIF e ->> 'hint' IS NULL THEN
        RAISE EXCEPTION USING MESSAGE = e ->> 'message', ERRCODE = code, DETAIL = e ->> 'detail';
    END IF;
    RAISE EXCEPTION USING MESSAGE = e ->> 'message', ERRCODE = code, DETAIL = e ->> 'detail', HINT = e ->> 'hint';
END
$$;
COMMENT ON FUNCTION _kde_raise_if_error(jsonb) IS 'pg_kde internal: raise the error a PL/Python entry point returned';

CREATE OR REPLACE FUNCTION kde_refresh(tbl regclass, col text, method text DEFAULT 'auto', sample_size integer DEFAULT 50000,
                            grid_size integer DEFAULT 2048, backend text DEFAULT 'auto') RETURNS jsonb
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@._kde_raise_if_error(
        @extschema@._kde_refresh(tbl::oid, ARRAY[col], method, sample_size, grid_size, backend, '0.2.0'))
$$;
COMMENT ON FUNCTION kde_refresh(regclass, text, text, integer, integer, text) IS
    'Build or rebuild the synopsis of one numeric column (method: auto = plugin_cdf | plugin | lscv_h | lscv_H | normal_reference); returns a summary';

CREATE OR REPLACE FUNCTION kde_refresh(tbl regclass, cols text[], method text DEFAULT 'auto', sample_size integer DEFAULT 5000,
                            grid_size integer DEFAULT 256, backend text DEFAULT 'auto') RETURNS jsonb
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@._kde_raise_if_error(
        @extschema@._kde_refresh(tbl::oid, cols, method, sample_size, grid_size, backend, '0.2.0'))
$$;
COMMENT ON FUNCTION kde_refresh(regclass, text[], text, integer, integer, text) IS
    'Build or rebuild the synopsis of one column or, with two, of a pair (method: auto = lscv_H for a pair); returns a summary';

-- _kde_bandwidth now returns jsonb (errors come back as values, raised by _kde_raise_if_error).
DROP FUNCTION _kde_bandwidth(oid, text[], text, text, integer, text);

CREATE FUNCTION _kde_bandwidth(relid oid, cols text[], method text, backend text, sample_size integer,
                               extversion text) RETURNS jsonb
LANGUAGE plpython3u VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
from pg_kde import sql_entry
return sql_entry.choose_bandwidth(plpy, GD, relid, cols, method, backend, sample_size, extversion)
$$;
COMMENT ON FUNCTION _kde_bandwidth(oid, text[], text, text, integer, text) IS 'pg_kde internal: bandwidth of a sample';

CREATE OR REPLACE FUNCTION kde_bandwidth(tbl regclass, cols text[], method text DEFAULT 'auto', backend text DEFAULT 'auto',
                              sample_size integer DEFAULT 10000) RETURNS float8[]
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT ARRAY(SELECT jsonb_array_elements_text(@extschema@._kde_raise_if_error(
        @extschema@._kde_bandwidth(tbl::oid, cols, method, backend, sample_size, '0.2.0')) -> 'bandwidth')::float8)
$$;
COMMENT ON FUNCTION kde_bandwidth(regclass, text[], text, text, integer) IS
    'Bandwidth of a sample of rows with all columns non-NULL: {h} for one column (data units), else H row-major';

CREATE OR REPLACE FUNCTION kde_bandwidth(tbl regclass, col text, method text DEFAULT 'auto', backend text DEFAULT 'auto',
                              sample_size integer DEFAULT 10000) RETURNS float8[]
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.kde_bandwidth(tbl, ARRAY[col], method, backend, sample_size) $$;
COMMENT ON FUNCTION kde_bandwidth(regclass, text, text, text, integer) IS
    'Bandwidth h (data units) of a sample of one column''s non-NULL values';

-- ---------------------------------------------------------------------------------------------- queries
-- The synopsis of (tbl, cols), after checking the caller may read the columns and every row, and that the
-- synopsis still describes those columns; a clear error otherwise.
CREATE OR REPLACE FUNCTION _kde_synopsis_for(tbl regclass, cols text[]) RETURNS kde_synopsis
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s @extschema@.kde_synopsis;
    r record;
BEGIN
    -- One lookup on the hot path: the relation, the column and the catalog row together; the checks of
    -- _kde_columns in the same order (it raises the errors, so the messages are the same).
    SELECT has_schema_privilege(c.relnamespace, 'USAGE') AS usable, a.attnum,
           format_type(a.atttypid, a.atttypmod) AS type, has_column_privilege(tbl, a.attnum, 'SELECT') AS readable,
           row_security_active(tbl) OR (c.relkind = 'v' AND @extschema@._kde_rows_hidden(tbl)) AS hidden INTO r
    FROM pg_class c
    LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = cols[1] AND a.attnum > 0 AND NOT a.attisdropped
    WHERE c.oid = tbl AND cardinality(cols) = 1;
    IF NOT FOUND OR NOT r.usable OR r.attnum IS NULL OR NOT r.readable OR r.hidden THEN
        PERFORM @extschema@._kde_columns(tbl, cols);
    END IF;
    SELECT * INTO s FROM @extschema@.kde_synopsis k WHERE k.relid = tbl AND k.cols = _kde_synopsis_for.cols;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no pg_kde synopsis for column % of %', array_to_string(cols, ', '), tbl
            USING ERRCODE = 'undefined_object',
                  HINT = format('Build it with: SELECT kde_refresh(%L, %L);', tbl::text, cols[1]);
    END IF;
    IF s.coltypes IS DISTINCT FROM ARRAY[r.type] OR (s.built_relid = tbl::oid AND s.attnums IS DISTINCT FROM ARRAY[r.attnum]) THEN
        PERFORM @extschema@._kde_check_identity(tbl, cols, s.built_relid, s.attnums, s.coltypes, ARRAY[r.attnum], ARRAY[r.type]);
    END IF;
    RETURN s;
END
$$;
COMMENT ON FUNCTION _kde_synopsis_for(regclass, text[]) IS 'pg_kde internal: the synopsis row, privilege-checked';

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
    -- Halves first: differences of values near the ends of float8 would overflow.
    p := (k - 1) + (x / 2 - grid[k] / 2) / (grid[k + 1] / 2 - grid[k] / 2);
    RETURN CASE WHEN abs(p - round(p)) < 1e-9 THEN round(p) ELSE p END;
END
$$;
COMMENT ON FUNCTION _kde_grid_pos(float8[], float8) IS 'pg_kde internal: position on a grid';

-- A bound moved onto a discretised axis's lattice: the midpoint just below the smallest value >= x (lower
-- bound) or just above the largest value <= x (upper bound); the grid's points are those midpoints, so
-- every value's rows stay whole. Beyond the ends: the grid's ends.
CREATE OR REPLACE FUNCTION _kde_lattice_bound(lattice float8[], grid float8[], x float8, upper boolean) RETURNS float8
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    m integer := cardinality(lattice);
    k integer := width_bucket(x, lattice);  -- values <= x
BEGIN
    IF NOT upper AND k > 0 AND lattice[k] = x THEN
        k := k - 1;  -- values < x
    END IF;
    IF k = 0 THEN
        RETURN grid[1];
    ELSIF k = m THEN
        RETURN grid[cardinality(grid)];
    END IF;
    RETURN lattice[k] / 2 + lattice[k + 1] / 2;
END
$$;
COMMENT ON FUNCTION _kde_lattice_bound(float8[], float8[], float8, boolean) IS 'pg_kde internal: snap a bound';

-- The smooth part's count (moment 0) or sum (moment 1) over a <= x <= b: whole cells exactly from the
-- cumulative cell arrays; the (at most two) cells the range cuts by the share of their rows that the
-- linear density with the cell's exact mean offset puts inside. Also the variance of that share (each cut
-- cell's rows Binomial(n, share)), a smoothing-bias allowance (how far the KDE's share differs from it),
-- and hard bounds (none to all of a cut cell's rows inside). docs/math.md §7.
CREATE OR REPLACE FUNCTION _kde_smooth(s kde_synopsis, a float8, b float8, moment integer,
                            OUT estimate float8, OUT variance float8, OUT bias float8, OUT low float8,
                            OUT high float8)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    m integer := s.grid_size;
    cells float8[] := CASE WHEN moment = 0 THEN s.cell_cum_count ELSE s.cell_cum_sum END;
    counts float8[] := s.cell_cum_count;
    offsets float8[] := s.cell_cum_offset;
    mass float8[] := s.kde_mass;
    grid float8[] := s.grid;
    slope float8;
    kde_share float8;
    pa float8;
    pb float8;
    ka integer;
    kb integer;
    c integer;
    t0 float8;
    t1 float8;
    n float8;
    share float8;
    x float8;
BEGIN
    estimate := 0; variance := 0; bias := 0; low := 0; high := 0;
    IF s.kde_rows = 0 THEN
        RETURN;
    END IF;
    IF cardinality(s.lattice) > 0 THEN  -- keep every value's rows on one side of the bounds
        a := @extschema@._kde_lattice_bound(s.lattice, grid, a, false);
        b := @extschema@._kde_lattice_bound(s.lattice, grid, b, true);
    END IF;
    pa := @extschema@._kde_grid_pos(grid, a);
    pb := @extschema@._kde_grid_pos(grid, b);
    IF pa >= pb THEN
        RETURN;
    END IF;
    ka := least(floor(pa)::integer, m - 2);
    kb := least(floor(pb)::integer, m - 2);
    IF kb > ka + 1 THEN  -- whole cells ka+1 .. kb-1 (cell k holds cells[k + 2] - cells[k + 1])
        estimate := cells[kb + 1] - cells[ka + 2];
    END IF;
    low := estimate;
    high := estimate;
    FOR c IN SELECT DISTINCT unnest(ARRAY[ka, kb]) LOOP
        t0 := CASE WHEN c = ka THEN pa - ka ELSE 0 END;
        t1 := CASE WHEN c = kb THEN least(pb - kb, 1) ELSE 1 END;
        n := counts[c + 2] - counts[c + 1];
        CONTINUE WHEN n <= 0 OR t1 <= t0;
        IF t0 = 0 AND t1 = 1 THEN  -- the range covers this cell whole: exact
            estimate := estimate + cells[c + 2] - cells[c + 1];
            low := low + cells[c + 2] - cells[c + 1];
            high := high + cells[c + 2] - cells[c + 1];
            CONTINUE;
        END IF;
        -- The cell's rows as a linear density with their exact mean offset (slope 12 (mean - 1/2), kept
        -- non-negative); the KDE's density across the cell is the second opinion, and the two shares'
        -- difference is the smoothing-bias allowance.
        slope := greatest(-2, least(2, 12 * ((offsets[c + 2] - offsets[c + 1]) / n - 0.5)));
        share := @extschema@._kde_cell_share(1 - slope / 2, 1 + slope / 2, t0, t1);
        kde_share := @extschema@._kde_cell_share(mass[c + 1], mass[c + 2], t0, t1);
        IF moment = 0 THEN
            estimate := estimate + n * share;
            variance := variance + n * share * (1 - share);
            bias := bias + n * abs(share - kde_share);
            high := high + n;
        ELSE
            -- Points inside a cell as weighted means of its ends (no difference of values to overflow).
            x := @extschema@._kde_cell_mean(1 - slope / 2, 1 + slope / 2, t0, t1);
            x := grid[c + 1] * (1 - x) + grid[c + 2] * x;
            estimate := estimate + n * share * x;
            variance := variance + n * share * (1 - share) * x * x;
            bias := bias + n * abs(share - kde_share) * abs(x);
            low := low + least(0, n * (grid[c + 1] * (1 - t0) + grid[c + 2] * t0));
            high := high + greatest(0, n * (grid[c + 1] * (1 - t1) + grid[c + 2] * t1));
        END IF;
    END LOOP;
END
$$;
COMMENT ON FUNCTION _kde_smooth(kde_synopsis, float8, float8, integer) IS 'pg_kde internal: the smooth part of a range';

-- An interval at the given confidence: estimate ± (z sqrt(variance) + smoothing-bias allowance), never
-- outside the hard bounds.
CREATE OR REPLACE FUNCTION _kde_interval(tbl regclass, col text, lo float8, hi float8, confidence float8, moment integer,
                              OUT estimate float8, OUT low float8, OUT high float8)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s @extschema@.kde_synopsis;
    r record;
    half float8;
BEGIN
    IF confidence IS NULL OR NOT (confidence > 0 AND confidence < 1) THEN
        RAISE EXCEPTION 'confidence must be between 0 and 1 (exclusive), got %', confidence
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    s := @extschema@._kde_synopsis_for(tbl, ARRAY[col]);
    r := @extschema@._kde_range(s, lo, hi, moment);
    -- Discretised data (a cell spans few possible values) clusters on them: the binomial model would be
    -- too narrow, so the interval is the hard bounds.
    half := CASE WHEN s.cell_discrete THEN 'Infinity'::float8
                 -- -quantile((1 - c) / 2), not quantile((1 + c) / 2): 1 + c rounds to 2 for c near 1.
                 ELSE -@extschema@._kde_normal_quantile((1 - confidence) / 2) * sqrt(r.variance) + r.bias END;
    estimate := r.estimate;
    low := greatest(r.low, r.estimate - half);
    high := least(r.high, r.estimate + half);
END
$$;
COMMENT ON FUNCTION _kde_interval(regclass, text, float8, float8, float8, integer) IS 'pg_kde internal: an interval';

-- 2-D: the synopsis of a pair in either order (swapped tells which), checked as _kde_synopsis_for.
CREATE OR REPLACE FUNCTION _kde_synopsis2_for(tbl regclass, col1 text, col2 text, OUT s kde_synopsis_2d, OUT swapped boolean)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ident record;
BEGIN
    ident := @extschema@._kde_columns(tbl, ARRAY[col1, col2]);
    swapped := false;
    SELECT * INTO s FROM @extschema@.kde_synopsis_2d k WHERE k.relid = tbl AND k.cols = ARRAY[col1, col2];
    IF NOT FOUND THEN
        swapped := true;
        SELECT * INTO s FROM @extschema@.kde_synopsis_2d k WHERE k.relid = tbl AND k.cols = ARRAY[col2, col1];
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no pg_kde synopsis for columns %, % of %', col1, col2, tbl
            USING ERRCODE = 'undefined_object',
                  HINT = format('Build it with: SELECT kde_refresh(%L, ARRAY[%L, %L]);', tbl::text, col1, col2);
    END IF;
    IF swapped THEN
        PERFORM @extschema@._kde_check_identity(tbl, s.cols, s.built_relid, s.attnums, s.coltypes,
                                                ARRAY[ident.attnums[2], ident.attnums[1]],
                                                ARRAY[ident.coltypes[2], ident.coltypes[1]]);
    ELSE
        PERFORM @extschema@._kde_check_identity(tbl, s.cols, s.built_relid, s.attnums, s.coltypes, ident.attnums, ident.coltypes);
    END IF;
END
$$;
COMMENT ON FUNCTION _kde_synopsis2_for(regclass, text, text) IS 'pg_kde internal: a 2-D synopsis, privilege-checked';

-- ---------------------------------------------------------------------------------------------- staleness
-- Why a synopsis no longer describes its table (NULL while it does), from _kde_table_state now against the
-- same at the build: new storage files (TRUNCATE, a rewrite, partitions attached or detached, a restore);
-- counters below their value at the build (statistics reset, e.g. by crash recovery: what happened since
-- is unknown); at least 10% of the rows inserted, updated or deleted; the size in pages changed by more
-- than 10% (what the counters miss once reset).
CREATE FUNCTION _kde_stale_reason(tbl regclass, rows bigint, built_mod_count bigint, built_storage text,
                                  built_pages bigint) RETURNS text
LANGUAGE sql STABLE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE
        WHEN st.storage_id IS DISTINCT FROM built_storage THEN 'truncated, rewritten, repartitioned or restored'
        WHEN st.mod_count < built_mod_count THEN 'activity statistics were reset since the build'
        WHEN st.mod_count - built_mod_count >= 0.1 * greatest(rows, 1) THEN 'at least 10% of the rows modified'
        WHEN abs(st.pages - built_pages) > greatest(0.1 * built_pages, 1) THEN 'size changed by more than 10%'
    END
    FROM @extschema@._kde_table_state(tbl) st
$$;
COMMENT ON FUNCTION _kde_stale_reason(regclass, bigint, bigint, text, bigint) IS 'pg_kde internal: why a synopsis is stale';

CREATE OR REPLACE VIEW kde_synopses WITH (security_invoker = true) AS
SELECT k.relid,
       k.cols,
       k.method,
       k.n_rows,
       k.heavy_values,
       k.kde_rows,
       k.bytes,
       k.built_at,
       now() - k.built_at AS age,
       k.build_seconds,
       k.backend,
       CASE WHEN st.mod_count >= k.mod_count THEN st.mod_count - k.mod_count END AS rows_modified,
       r.reason IS NOT NULL AS stale,
       r.reason AS stale_reason
FROM (SELECT relid, cols, method, n_rows, n_null, cardinality(atom_values) AS heavy_values, kde_rows,
             pg_column_size(s.*) AS bytes, built_at, build_seconds, backend, mod_count, storage_id, pages
      FROM @extschema@.kde_synopsis s
      UNION ALL
      SELECT relid, cols, method, n_rows, n_null, 0, n_rows, pg_column_size(d.*), built_at, build_seconds, backend,
             mod_count, storage_id, pages
      FROM @extschema@.kde_synopsis_2d d) k
CROSS JOIN LATERAL @extschema@._kde_table_state(k.relid) st
CROSS JOIN LATERAL (SELECT @extschema@._kde_stale_reason(k.relid, k.n_rows + k.n_null, k.mod_count, k.storage_id,
                                                         k.pages) AS reason) r;
COMMENT ON VIEW kde_synopses IS
    'Every synopsis the current role may read, with its size, age, rows modified since its build (NULL when statistics were reset), a stale flag and its reason';

-- Each stale synopsis the current role may read is rebuilt on its own (a subtransaction each): one that
-- fails is reported as a WARNING and left as it was, the others land. A cancel stops the whole call.
CREATE OR REPLACE FUNCTION kde_refresh_stale() RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r record;
    n integer := 0;
BEGIN
    FOR r IN SELECT k.relid, k.cols, k.options
             FROM @extschema@.kde_synopses v
             JOIN (SELECT relid, cols, options FROM @extschema@.kde_synopsis
                   UNION ALL SELECT relid, cols, options FROM @extschema@.kde_synopsis_2d) k USING (relid, cols)
             WHERE v.stale
             ORDER BY k.relid::oid, k.cols
    LOOP
        BEGIN
            -- The same request as the last refresh (options holds its arguments).
            PERFORM @extschema@._kde_raise_if_error(@extschema@._kde_refresh(
                r.relid::oid, r.cols, r.options ->> 'method', (r.options ->> 'sample_size')::integer,
                (r.options ->> 'grid_size')::integer, r.options ->> 'backend', '0.2.0'));
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

-- ---------------------------------------------------------------------------------------------- schema changes
-- Event triggers keep the catalog in step with the relations (as the catalog's owner: the role running the
-- DDL may not be allowed to write it). A failure here warns instead of failing the user's command: the
-- query-time identity check (_kde_check_identity) still refuses a synopsis that no longer fits.
CREATE FUNCTION _kde_on_sql_drop() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    catalog text;
BEGIN
    FOREACH catalog IN ARRAY ARRAY['kde_synopsis', 'kde_synopsis_2d'] LOOP
        EXECUTE format($q$
            DELETE FROM %1$I.%2$I k USING pg_event_trigger_dropped_objects() d
            WHERE d.classid = 'pg_class'::regclass AND d.objid = k.relid::oid
              AND (d.objsubid = 0 OR d.objsubid = ANY (k.attnums))
            $q$, '@extschema@', catalog);
    END LOOP;
EXCEPTION WHEN undefined_table OR insufficient_privilege OR integrity_constraint_violation THEN
    RAISE WARNING 'pg_kde: could not remove the synopses of dropped objects: %', SQLERRM;
END
$$;
COMMENT ON FUNCTION _kde_on_sql_drop() IS 'pg_kde internal: drop the synopses of dropped tables and columns';

CREATE FUNCTION _kde_on_ddl_end() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    touched oid[];
BEGIN
    -- The relations the command touched and, since renames and type changes recurse, their descendants.
    WITH RECURSIVE rels(oid) AS (
        SELECT c.objid FROM pg_event_trigger_ddl_commands() c WHERE c.classid = 'pg_class'::regclass
        UNION
        SELECT i.inhrelid FROM pg_inherits i JOIN rels ON i.inhparent = rels.oid
    )
    SELECT array_agg(oid) INTO touched FROM rels;
    IF touched IS NOT NULL THEN
        PERFORM @extschema@._kde_reconcile(touched);
    END IF;
EXCEPTION WHEN undefined_table OR insufficient_privilege OR integrity_constraint_violation THEN
    RAISE WARNING 'pg_kde: could not bring synopses in step with the change: %', SQLERRM;
END
$$;
COMMENT ON FUNCTION _kde_on_ddl_end() IS 'pg_kde internal: follow renamed columns, drop synopses of retyped ones';

CREATE EVENT TRIGGER kde_sql_drop ON sql_drop EXECUTE FUNCTION _kde_on_sql_drop();
CREATE EVENT TRIGGER kde_ddl_end ON ddl_command_end
    WHEN TAG IN ('ALTER TABLE', 'ALTER VIEW', 'ALTER MATERIALIZED VIEW', 'ALTER FOREIGN TABLE', 'CREATE VIEW')
    EXECUTE FUNCTION _kde_on_ddl_end();
