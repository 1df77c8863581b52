-- pg_kde 0.2.0 -> 0.3.0: one catalog header table (kde_catalog) for every kind of synopsis; kde_synopsis and
-- kde_synopsis_2d keep only their payloads, each row following its header (ON UPDATE/DELETE CASCADE).
-- Synopses built by 0.2.0 are kept: their shared columns move to kde_catalog (options becomes requested).
\echo Use "ALTER EXTENSION pg_kde UPDATE TO '0.3.0'" to load this file. \quit

-- What reads the old columns goes first; it is created anew below.
DROP VIEW kde_synopses;
DROP POLICY kde_synopsis_column_privilege ON kde_synopsis;
DROP POLICY kde_synopsis_2d_column_privilege ON kde_synopsis_2d;
ALTER TABLE kde_synopsis DROP CONSTRAINT kde_synopsis_well_formed;
ALTER TABLE kde_synopsis_2d DROP CONSTRAINT kde_synopsis_2d_well_formed, DROP CONSTRAINT kde_synopsis_2d_cols_check;

CREATE TABLE kde_catalog (
    relid           regclass    NOT NULL,
    cols            text[]      NOT NULL,
    kind            text        NOT NULL,
    attnums         int2[]      NOT NULL,
    coltypes        text[]      NOT NULL,
    built_relid     oid         NOT NULL,
    requested       jsonb       NOT NULL,
    method          text        NOT NULL,
    backend         text        NOT NULL,
    bandwidth       float8[]    NOT NULL,
    sample_size     integer     NOT NULL,
    n_rows          bigint      NOT NULL,
    n_null          bigint      NOT NULL,
    built_at        timestamptz NOT NULL DEFAULT now(),
    build_seconds   float8      NOT NULL,
    mod_count       bigint      NOT NULL,
    storage_id      text,
    pages           bigint      NOT NULL,
    PRIMARY KEY (relid, cols)
);
COMMENT ON TABLE kde_catalog IS 'pg_kde synopses: one header row each (relation, columns by identity, kind, build and staleness facts)';
SELECT pg_catalog.pg_extension_config_dump('kde_catalog', '');
INSERT INTO kde_catalog (relid, cols, kind, attnums, coltypes, built_relid, requested, method, backend, bandwidth, sample_size, n_rows, n_null, built_at, build_seconds, mod_count, storage_id, pages)
SELECT relid, cols, '1d', attnums, coltypes, built_relid, options, method, backend, bandwidth, sample_size, n_rows, n_null, built_at, build_seconds, mod_count, storage_id, pages FROM kde_synopsis;
INSERT INTO kde_catalog (relid, cols, kind, attnums, coltypes, built_relid, requested, method, backend, bandwidth, sample_size, n_rows, n_null, built_at, build_seconds, mod_count, storage_id, pages)
SELECT relid, cols, '2d', attnums, coltypes, built_relid, options, method, backend, bandwidth, sample_size, n_rows, n_null, built_at, build_seconds, mod_count, storage_id, pages FROM kde_synopsis_2d;
-- Roles that could write the old catalog tables may write the header table too, with the privileges they
-- held (INSERT, UPDATE, DELETE on either table), no more.
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END AS grantee,
               a.privilege_type  -- regrole's text is quoted as needed
        FROM pg_class c, aclexplode(c.relacl) a
        WHERE c.oid IN ('@extschema@.kde_synopsis'::regclass, '@extschema@.kde_synopsis_2d'::regclass)
          AND a.privilege_type IN ('INSERT', 'UPDATE', 'DELETE') AND a.grantee <> c.relowner
    LOOP
        EXECUTE format('GRANT %s ON @extschema@.kde_catalog TO %s', r.privilege_type, r.grantee);
    END LOOP;
END
$$;

-- The functions that read the catalog, before its old columns go (the event triggers run during this script).
CREATE OR REPLACE FUNCTION _kde_reconcile(relids oid[]) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM @extschema@.kde_catalog k
    WHERE (relids IS NULL OR k.relid::oid = ANY (relids)) AND NOT EXISTS (
        SELECT 1 FROM (SELECT bool_and(r.attnum IS NOT NULL AND r.type = k.coltypes[r.i]) AS ok
                       FROM @extschema@._kde_resolve(k.relid, k.cols, k.attnums, k.built_relid) r) q WHERE q.ok);
    UPDATE @extschema@.kde_catalog k SET cols = q.names, attnums = q.nums, built_relid = k.relid::oid
    FROM (SELECT s.relid, s.cols, array_agg(r.name ORDER BY r.i) AS names, array_agg(r.attnum ORDER BY r.i) AS nums
          FROM @extschema@.kde_catalog s, @extschema@._kde_resolve(s.relid, s.cols, s.attnums, s.built_relid) r
          WHERE relids IS NULL OR s.relid::oid = ANY (relids) GROUP BY s.relid, s.cols) q
    WHERE k.relid = q.relid AND k.cols = q.cols
      AND (k.cols <> q.names OR k.attnums <> q.nums OR k.built_relid <> k.relid::oid);
END
$$;

CREATE OR REPLACE FUNCTION _kde_synopsis_for(tbl regclass, cols text[]) RETURNS kde_synopsis
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s @extschema@.kde_synopsis;
    r record;
    h record;
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
    SELECT k.built_relid, k.attnums, k.coltypes INTO h
    FROM @extschema@.kde_catalog k WHERE k.relid = tbl AND k.cols = _kde_synopsis_for.cols;
    IF FOUND THEN
        SELECT * INTO s FROM @extschema@.kde_synopsis p WHERE p.relid = tbl AND p.cols = _kde_synopsis_for.cols;
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no pg_kde synopsis for column % of %', array_to_string(cols, ', '), tbl
            USING ERRCODE = 'undefined_object',
                  HINT = format('Build it with: SELECT kde_refresh(%L, %L);', tbl::text, cols[1]);
    END IF;
    IF h.coltypes IS DISTINCT FROM ARRAY[r.type] OR (h.built_relid = tbl::oid AND h.attnums IS DISTINCT FROM ARRAY[r.attnum]) THEN
        PERFORM @extschema@._kde_check_identity(tbl, cols, h.built_relid, h.attnums, h.coltypes, ARRAY[r.attnum], ARRAY[r.type]);
    END IF;
    RETURN s;
END
$$;

CREATE OR REPLACE FUNCTION _kde_synopsis2_for(tbl regclass, col1 text, col2 text, OUT s kde_synopsis_2d, OUT swapped boolean)
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
                  HINT = format('Build it with: SELECT kde_refresh(%L, ARRAY[%L, %L]);', tbl::text, col1, col2);
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

CREATE OR REPLACE FUNCTION kde_refresh(tbl regclass, col text, method text DEFAULT 'auto', sample_size integer DEFAULT 50000,
                            grid_size integer DEFAULT 2048, backend text DEFAULT 'auto') RETURNS jsonb
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@._kde_raise_if_error(
        @extschema@._kde_refresh(tbl::oid, ARRAY[col], method, sample_size, grid_size, backend, '0.3.0'))
$$;

CREATE OR REPLACE FUNCTION kde_refresh(tbl regclass, cols text[], method text DEFAULT 'auto', sample_size integer DEFAULT 5000,
                            grid_size integer DEFAULT 256, backend text DEFAULT 'auto') RETURNS jsonb
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@._kde_raise_if_error(
        @extschema@._kde_refresh(tbl::oid, cols, method, sample_size, grid_size, backend, '0.3.0'))
$$;

CREATE OR REPLACE FUNCTION kde_bandwidth(tbl regclass, cols text[], method text DEFAULT 'auto', backend text DEFAULT 'auto',
                              sample_size integer DEFAULT 10000) RETURNS float8[]
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT ARRAY(SELECT jsonb_array_elements_text(@extschema@._kde_raise_if_error(
        @extschema@._kde_bandwidth(tbl::oid, cols, method, backend, sample_size, '0.3.0')) -> 'bandwidth')::float8)
$$;

CREATE OR REPLACE FUNCTION kde_bandwidth(tbl regclass, col text, method text DEFAULT 'auto', backend text DEFAULT 'auto',
                              sample_size integer DEFAULT 10000) RETURNS float8[]
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.kde_bandwidth(tbl, ARRAY[col], method, backend, sample_size) $$;

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
        IF r.relkind NOT IN ('r', 'p', 'm') AND NOT r.owned THEN
            RAISE WARNING 'pg_kde: skipped the synopsis of % of %: reading it runs code of its owner, not yours',
                          array_to_string(r.cols, ', '), r.relid
                USING HINT = 'Refresh it as its owner, or with kde_refresh once you trust that code.';
            CONTINUE;
        END IF;
        BEGIN
            -- The same request as the last refresh (requested holds its arguments, not what was built).
            PERFORM @extschema@._kde_raise_if_error(@extschema@._kde_refresh(
                r.relid::oid, r.cols, r.requested ->> 'method', (r.requested ->> 'sample_size')::integer,
                (r.requested ->> 'grid_size')::integer, r.requested ->> 'backend', '0.3.0'));
            n := n + 1;
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'pg_kde: could not refresh the synopsis of % of %: %', array_to_string(r.cols, ', '), r.relid, SQLERRM;
        END;
    END LOOP;
    RETURN n;
END
$$;

CREATE OR REPLACE FUNCTION _kde_on_sql_drop() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM @extschema@.kde_catalog k USING pg_event_trigger_dropped_objects() d
    WHERE d.classid = 'pg_class'::regclass AND d.objid = k.relid::oid
      AND (d.objsubid = 0 OR d.objsubid = ANY (k.attnums));
EXCEPTION WHEN undefined_table OR insufficient_privilege OR integrity_constraint_violation THEN
    RAISE WARNING 'pg_kde: could not remove the synopses of dropped objects: %', SQLERRM;
END
$$;

ALTER TABLE kde_synopsis DROP COLUMN method, DROP COLUMN bandwidth, DROP COLUMN sample_size, DROP COLUMN n_rows, DROP COLUMN n_null, DROP COLUMN built_at, DROP COLUMN build_seconds, DROP COLUMN backend, DROP COLUMN mod_count, DROP COLUMN options, DROP COLUMN attnums, DROP COLUMN coltypes, DROP COLUMN built_relid, DROP COLUMN storage_id, DROP COLUMN pages;
ALTER TABLE kde_synopsis_2d DROP COLUMN method, DROP COLUMN bandwidth, DROP COLUMN sample_size, DROP COLUMN n_rows, DROP COLUMN n_null, DROP COLUMN built_at, DROP COLUMN build_seconds, DROP COLUMN backend, DROP COLUMN mod_count, DROP COLUMN options, DROP COLUMN attnums, DROP COLUMN coltypes, DROP COLUMN built_relid, DROP COLUMN storage_id, DROP COLUMN pages;
ALTER TABLE kde_synopsis ADD FOREIGN KEY (relid, cols) REFERENCES kde_catalog (relid, cols) ON UPDATE CASCADE ON DELETE CASCADE;
ALTER TABLE kde_synopsis_2d ADD FOREIGN KEY (relid, cols) REFERENCES kde_catalog (relid, cols) ON UPDATE CASCADE ON DELETE CASCADE;
COMMENT ON TABLE kde_synopsis IS 'pg_kde 1-D synopsis payloads: exact heavy values plus a KDE of the other rows';
COMMENT ON TABLE kde_synopsis_2d IS 'pg_kde 2-D synopsis payloads: exact summed-area tables of grid cells plus a KDE';

ALTER TABLE kde_catalog ADD CONSTRAINT kde_catalog_well_formed CHECK (
    kind IN ('1d', '2d') AND cardinality(cols) = CASE kind WHEN '1d' THEN 1 ELSE 2 END
    AND cardinality(attnums) = cardinality(cols) AND cardinality(coltypes) = cardinality(cols)
    AND 0 < ALL (attnums) AND n_rows >= 0 AND n_null >= 0 AND sample_size >= 0 AND pages >= 0
    AND cardinality(bandwidth) = CASE kind WHEN '1d' THEN 1 ELSE 4 END
    AND (kind <> '1d' OR (bandwidth[1] >= 0 AND bandwidth[1] < 'Infinity'))
    AND jsonb_typeof(requested) = 'object'
    AND @extschema@._kde_is_vector(cols) AND @extschema@._kde_is_vector(attnums) AND @extschema@._kde_is_vector(coltypes)
    AND @extschema@._kde_is_vector(bandwidth));
ALTER TABLE kde_synopsis ADD CONSTRAINT kde_synopsis_well_formed CHECK (
    cardinality(cols) = 1 AND kde_rows >= 0
    AND grid_size >= 0 AND (grid_size >= 2 OR kde_rows = 0)
    AND cardinality(grid) = grid_size AND cardinality(cell_cum_count) = grid_size
    AND cardinality(cell_cum_sum) = grid_size AND cardinality(cell_cum_offset) = grid_size
    AND cardinality(kde_mass) = grid_size
    AND cardinality(atom_cum_count) = cardinality(atom_values) AND cardinality(atom_cum_sum) = cardinality(atom_values)
    AND @extschema@._kde_is_vector(atom_values)
    AND @extschema@._kde_is_vector(atom_cum_count) AND @extschema@._kde_is_vector(atom_cum_sum)
    AND @extschema@._kde_is_vector(grid) AND @extschema@._kde_is_vector(lattice)
    AND @extschema@._kde_is_vector(cell_cum_count) AND @extschema@._kde_is_vector(cell_cum_sum)
    AND @extschema@._kde_is_vector(cell_cum_offset) AND @extschema@._kde_is_vector(kde_mass));
ALTER TABLE kde_synopsis_2d ADD CONSTRAINT kde_synopsis_2d_well_formed CHECK (
    cardinality(cols) = 2
    AND cardinality(integer_valued) = 2 AND cardinality(grid_size) = 2 AND grid_size[1] >= 2 AND grid_size[2] >= 2
    AND cardinality(grid1) = grid_size[1] AND cardinality(grid2) = grid_size[2]
    AND cardinality(sat_count) = grid_size[1]::bigint * grid_size[2]
    AND cardinality(kde_sat) = grid_size[1]::bigint * grid_size[2]
    AND cardinality(sat_sum) = 2 * grid_size[1]::bigint * grid_size[2]
    AND @extschema@._kde_is_vector(integer_valued) AND @extschema@._kde_is_vector(grid_size)
    AND @extschema@._kde_is_vector(grid1) AND @extschema@._kde_is_vector(grid2)
    AND @extschema@._kde_is_vector(lattice1) AND @extschema@._kde_is_vector(lattice2)
    AND @extschema@._kde_is_vector(sat_count) AND @extschema@._kde_is_vector(sat_sum)
    AND @extschema@._kde_is_vector(kde_sat));

ALTER TABLE kde_catalog ENABLE ROW LEVEL SECURITY;
CREATE POLICY kde_catalog_column_privilege ON kde_catalog
    USING (@extschema@._kde_can_read(relid, cols, attnums, built_relid))
    WITH CHECK (@extschema@._kde_can_read(relid, cols, attnums, built_relid));
GRANT SELECT ON kde_catalog TO PUBLIC;
ALTER TABLE kde_synopsis ENABLE ROW LEVEL SECURITY;
CREATE POLICY kde_synopsis_header ON kde_synopsis
    USING (EXISTS (SELECT 1 FROM @extschema@.kde_catalog h WHERE h.relid = kde_synopsis.relid AND h.cols = kde_synopsis.cols))
    WITH CHECK (EXISTS (SELECT 1 FROM @extschema@.kde_catalog h WHERE h.relid = kde_synopsis.relid AND h.cols = kde_synopsis.cols));
GRANT SELECT ON kde_synopsis TO PUBLIC;
ALTER TABLE kde_synopsis_2d ENABLE ROW LEVEL SECURITY;
CREATE POLICY kde_synopsis_2d_header ON kde_synopsis_2d
    USING (EXISTS (SELECT 1 FROM @extschema@.kde_catalog h WHERE h.relid = kde_synopsis_2d.relid AND h.cols = kde_synopsis_2d.cols))
    WITH CHECK (EXISTS (SELECT 1 FROM @extschema@.kde_catalog h WHERE h.relid = kde_synopsis_2d.relid AND h.cols = kde_synopsis_2d.cols));
GRANT SELECT ON kde_synopsis_2d TO PUBLIC;

-- A header's relation and columns are its identity: only pg_kde itself changes them (renames that follow
-- the columns, run by the event triggers as the extension's owner). A writer re-pointing a header would
-- carry its payload (ON UPDATE CASCADE runs as the table's owner) onto another column, whose queries would
-- then answer with the first column's numbers.
CREATE FUNCTION _kde_keep_key() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF (NEW.relid, NEW.cols) IS DISTINCT FROM (OLD.relid, OLD.cols)
       AND NOT pg_has_role((SELECT e.extowner FROM pg_extension e WHERE e.extname = 'pg_kde'), 'MEMBER') THEN
        RAISE EXCEPTION 'pg_kde: the relation and columns of a synopsis cannot be changed'
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Build a synopsis of the other columns with kde_refresh; renames are followed by pg_kde itself.';
    END IF;
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION _kde_keep_key() IS 'pg_kde internal: only pg_kde changes a synopsis''s relation and columns';
CREATE TRIGGER kde_catalog_keep_key BEFORE UPDATE OF relid, cols ON kde_catalog
    FOR EACH ROW EXECUTE FUNCTION _kde_keep_key();

CREATE VIEW kde_synopses WITH (security_invoker = true) AS
SELECT k.relid,
       k.cols,
       k.method,
       k.n_rows,
       coalesce(cardinality(p1.atom_values), 0) AS heavy_values,
       coalesce(p1.kde_rows, k.n_rows) AS kde_rows,
       pg_column_size(k.*) + coalesce(pg_column_size(p1.*), 0) + coalesce(pg_column_size(p2.*), 0) AS bytes,
       k.built_at,
       now() - k.built_at AS age,
       k.build_seconds,
       k.backend,
       CASE WHEN st.mod_count >= k.mod_count THEN st.mod_count - k.mod_count END AS rows_modified,
       r.reason IS NOT NULL AS stale,
       r.reason AS stale_reason
FROM @extschema@.kde_catalog k
LEFT JOIN @extschema@.kde_synopsis p1 ON k.kind = '1d' AND p1.relid = k.relid AND p1.cols = k.cols
LEFT JOIN @extschema@.kde_synopsis_2d p2 ON k.kind = '2d' AND p2.relid = k.relid AND p2.cols = k.cols
CROSS JOIN LATERAL @extschema@._kde_table_state(k.relid) st
CROSS JOIN LATERAL (SELECT @extschema@._kde_stale_reason(k.relid, k.n_rows + k.n_null, k.mod_count, k.storage_id,
                                                         k.pages) AS reason) r;
COMMENT ON VIEW kde_synopses IS
    'Every synopsis the current role may read, with its size, age, rows modified since its build (NULL when statistics were reset), a stale flag and its reason';
GRANT SELECT ON kde_synopses TO PUBLIC;
COMMENT ON VIEW kde_synopses IS
    'Every synopsis the current role may read, with its size, age, rows modified since its build (NULL when statistics were reset), a stale flag and its reason';
