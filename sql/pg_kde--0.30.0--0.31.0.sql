-- pg_kde 0.30.0 -> 0.31.0: a tracked write of values near float8's largest no longer fails. The tracking
-- triggers' sum slack (kde_synopsis.sum_slack) was float8 arithmetic in SQL, whose operators raise "value out of
-- range: overflow" past float8's range: an INSERT of -1.5e308 and -1.6e308 into a tracked table of values near
-- ±1.7e308 was rejected (a red team on 0.30.0). _kde_track_slack (new, C) computes it in IEEE arithmetic,
-- +Infinity there; _kde_track_apply calls it. A numeric value beyond float8's range written to a tracked table
-- (1e400, 1e-400) raised in the trigger's conversion and rolled the write back; _kde_track_apply now reads it
-- with _kde_numeric_bound and leaves the synopsis stale, as the refresh refuses such values. Every function
-- that names the version is replaced. Tracked writes cost about half as much a statement: the catalog's shape
-- check _kde_is_vector is C (a SQL function's body was parsed at every call, a dozen times a write of a
-- synopsis' row), _kde_resolve and _kde_track_intact are PL/pgSQL (planned once a session, where SQL
-- functions with a SET clause were planned at every call), and the trigger keeps the stored grid and densities
-- where a write leaves them as they were. A dump restored with pg_restore keeps tracking: the event trigger
-- ended it when the restore's first CREATE TRIGGER found the set incomplete (_kde_track_triggers, new, counts
-- the triggers there as kde_track makes them; _kde_on_ddl_end lets a CREATE TRIGGER leave the set incomplete,
-- the table's synopses stale until a refresh: _kde_track_stale, new, which _kde_track_broken and the trigger
-- function's TRUNCATE also call). The refresh's scan _kde_cells takes a fifth argument, the cell values it keeps
-- at each end (its state, version 3, holds them): a lattice frequency table's scan keeps as many as its cells are
-- expected to hold, so that the values the sample missed join the table (a Zipf-like quantity exact at 8 KB).
-- The four-argument aggregates and their step functions are dropped; a Citus table's stored shard answers
-- (kde_parts) were read by the old command, so its next refresh reads every shard again.
\echo Use "ALTER EXTENSION pg_kde UPDATE TO '0.31.0'" to load this file. \quit

CREATE FUNCTION _kde_track_slack(slack float8, added float8[], removed float8[], old_sums float8[], new_sums float8[],
                                 boundaries integer, quantum float8) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_track_slack' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_track_slack(float8, float8[], float8[], float8[], float8[], integer, float8)
    IS 'pg_kde internal: a synopsis'' sum slack after a tracked write';
REVOKE EXECUTE ON FUNCTION _kde_track_slack(float8, float8[], float8[], float8[], float8[], integer, float8) FROM PUBLIC;

CREATE FUNCTION _kde_track_triggers(tbl regclass) RETURNS integer
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = tbl OR i.inhparent = tbl) THEN
        RETURN -1;
    END IF;
    RETURN (SELECT CASE WHEN count(w.name) = count(*) THEN count(*) ELSE -1 END
            FROM pg_trigger t
            LEFT JOIN (VALUES ('kde_track_insert', 4, NULL, 'kde_new'), ('kde_track_update', 16, 'kde_old', 'kde_new'),
                              ('kde_track_delete', 8, 'kde_old', NULL), ('kde_track_truncate', 32, NULL, NULL))
                      AS w(name, type, old, new)
                   ON t.tgname = w.name AND t.tgtype = w.type
                  AND t.tgoldtable IS NOT DISTINCT FROM w.old AND t.tgnewtable IS NOT DISTINCT FROM w.new
                  AND t.tgfoid = '@extschema@._kde_track_apply()'::regprocedure AND t.tgenabled IN ('O', 'A')
                  AND t.tgqual IS NULL AND t.tgnargs = 0 AND cardinality(t.tgattr::int2[]) = 0
            WHERE t.tgrelid = tbl
              AND t.tgname IN ('kde_track_insert', 'kde_track_update', 'kde_track_delete', 'kde_track_truncate'));
END
$$;
COMMENT ON FUNCTION _kde_track_triggers(regclass) IS
    'pg_kde internal: how many of kde_track''s four triggers a table has as kde_track makes them (-1: one is not)';

CREATE FUNCTION _kde_track_stale(tbl regclass, why text) RETURNS void
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    UPDATE @extschema@.kde_catalog k SET storage_id = 'untracked: ' || why
    WHERE k.relid = tbl AND k.kind = '1d' AND coalesce(k.storage_id, '') NOT LIKE 'untracked:%';
$$;
COMMENT ON FUNCTION _kde_track_stale(regclass, text) IS 'pg_kde internal: a table''s 1-D synopses stale until a refresh, with the reason';
REVOKE EXECUTE ON FUNCTION _kde_track_stale(regclass, text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION _kde_is_vector(a anyarray) RETURNS boolean
AS 'MODULE_PATHNAME', 'kde_is_vector' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_is_vector(anyarray) IS 'pg_kde internal: a one-dimensional array from 1 without NULLs';

CREATE OR REPLACE FUNCTION _kde_resolve(tbl regclass, cols text[], attnums int2[], built_relid oid)
RETURNS TABLE (i bigint, name text, attnum int2, type text)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY
    SELECT u.i, a.attname::text, a.attnum, format_type(a.atttypid, a.atttypmod)
    FROM unnest(cols, attnums) WITH ORDINALITY AS u(name, n, i)
    LEFT JOIN pg_attribute a ON a.attrelid = tbl AND a.attnum > 0 AND NOT a.attisdropped
                            AND CASE WHEN built_relid = tbl::oid THEN a.attnum = u.n ELSE a.attname = u.name END;
END
$$;
COMMENT ON FUNCTION _kde_resolve(regclass, text[], int2[], oid) IS 'pg_kde internal: a synopsis''s columns as they are now';

CREATE OR REPLACE FUNCTION _kde_track_intact(tbl regclass) RETURNS boolean
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN @extschema@._kde_track_triggers(tbl) = 4;
END
$$;
COMMENT ON FUNCTION _kde_track_intact(regclass) IS 'pg_kde internal: are a table''s four tracking triggers in place and enabled';

CREATE OR REPLACE FUNCTION _kde_track_broken(tbl regclass) RETURNS void
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    DELETE FROM @extschema@.kde_tracked k WHERE k.relid = tbl;
    SELECT @extschema@._kde_track_stale(tbl, 'its tracking triggers were disabled, dropped or changed');
$$;
COMMENT ON FUNCTION _kde_track_broken(regclass) IS 'pg_kde internal: stop tracking a table whose triggers were disabled or dropped, its synopses stale';
REVOKE EXECUTE ON FUNCTION _kde_track_broken(regclass) FROM PUBLIC;

CREATE OR REPLACE FUNCTION _kde_on_ddl_end() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    touched oid[];
    creating boolean;
    tracked record;
BEGIN
    -- The relations the command touched and, since renames and type changes recurse, their descendants.
    WITH RECURSIVE rels(oid) AS (
        SELECT c.objid FROM pg_event_trigger_ddl_commands() c WHERE c.classid = 'pg_class'::regclass
        UNION
        -- (a trigger created, replaced or renamed: its table, for tracking's check below)
        SELECT t.tgrelid FROM pg_event_trigger_ddl_commands() c JOIN pg_trigger t ON t.oid = c.objid
        WHERE c.classid = 'pg_trigger'::regclass
        UNION
        SELECT i.inhrelid FROM pg_inherits i JOIN rels ON i.inhparent = rels.oid
    )
    SELECT array_agg(oid) INTO touched FROM rels;
    IF touched IS NOT NULL THEN
        PERFORM @extschema@._kde_reconcile(touched);
        -- a tracked table whose triggers were disabled (ALTER TABLE ... DISABLE TRIGGER) is no longer tracked:
        -- writes they miss would otherwise be followed by writes they apply (0.29.0). A restore (pg_restore:
        -- kde_tracked's rows come with the data, the triggers after it, one command each) creates them one by
        -- one: CREATE TRIGGER alone, leaving the set incomplete with each trigger there as kde_track makes it,
        -- keeps the table tracked (0.31.0), its synopses stale until a refresh reads the rows again (a write
        -- before the set is whole may have fired none of them; the trigger function applies none to a stale
        -- synopsis, and ends tracking at a write that fires one). No CREATE TRIGGER can take a trigger out of a
        -- whole set, and one that replaces a trigger otherwise than as kde_track makes it still ends tracking.
        SELECT bool_and(c.command_tag = 'CREATE TRIGGER') INTO creating FROM pg_event_trigger_ddl_commands() c;
        FOR tracked IN SELECT t.relid, @extschema@._kde_track_triggers(t.relid) AS made FROM @extschema@.kde_tracked t
                       WHERE t.relid::oid = ANY (touched) LOOP
            IF tracked.made = 4 THEN
                CONTINUE;  -- (intact)
            ELSIF creating AND tracked.made >= 0 THEN
                PERFORM @extschema@._kde_track_stale(tracked.relid,
                                                     'its tracking triggers were created after its rows (a restore)');
            ELSE
                PERFORM @extschema@._kde_track_broken(tracked.relid);
            END IF;
        END LOOP;
    END IF;
EXCEPTION WHEN undefined_table OR insufficient_privilege OR integrity_constraint_violation THEN
    RAISE WARNING 'pg_kde: could not bring synopses in step with the change: %', SQLERRM;
END
$$;
COMMENT ON FUNCTION _kde_on_ddl_end() IS 'pg_kde internal: follow renamed columns, drop synopses of retyped ones';

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
    far_expr text;
    far_added boolean;
    far_removed boolean;
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
        PERFORM @extschema@._kde_track_stale(TG_RELID::regclass, 'the table was truncated');
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
        -- A numeric (or a domain over one) as _kde_numeric_bound reads it: _kde_float8's float8 where float8
        -- holds it, and +-Infinity or +-0 beyond float8's range (about 4.9e-324 to 1.8e308 in magnitude), which
        -- the refresh refuses: such a write leaves the synopsis stale (far_expr) where the conversion raised and
        -- rolled the user's write back (0.31.0, a red team).
        -- The conditions below read each row's value once converted (s.kde_v) and the column itself (s.kde_c), from
        -- a subquery that OFFSET 0 keeps from being flattened (which would convert a value once a reference).
        far_expr := 'false';
        IF @extschema@._kde_base_type(TG_RELID::regclass, r.attname) = 'numeric'::regtype THEN
            expr := format('@extschema@._kde_numeric_bound((%I)::numeric)', r.attname);
            far_expr := '((s.kde_c)::numeric <> 0 AND (s.kde_c)::numeric NOT IN (''Infinity'', ''-Infinity'', ''NaN'') '
                        'AND abs(s.kde_v) IN (0, ''Infinity''))';
        ELSIF r.typcategory = 'N' THEN
            expr := format('(%I)::float8', r.attname);
        ELSE
            expr := format('extract(epoch FROM %I)::float8', r.attname);
        END IF;
        -- Whether the written rows hold a value whose float8 may also stand for another of its type, as the
        -- refresh's scan tells (kde_synopsis.coarse, _kde_coarse_rule).
        rule := @extschema@._kde_coarse_rule(TG_RELID::regclass, r.attname);
        coarse_expr := CASE WHEN rule.digits THEN '@extschema@._kde_numeric_coarse((s.kde_c)::numeric)'
                            WHEN rule.magnitude IS NOT NULL THEN format('abs(s.kde_v) >= %s', rule.magnitude)
                            ELSE 'false' END;
        added := NULL;
        added_coarse := false;
        removed := NULL;
        far_added := false;
        far_removed := false;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            EXECUTE format('SELECT array_agg(s.kde_v), coalesce(bool_or(%s), false), coalesce(bool_or(%s), false) '
                           'FROM (SELECT %s AS kde_v, %I AS kde_c FROM kde_new OFFSET 0) s', coarse_expr, far_expr, expr,
                           r.attname)
                INTO added, added_coarse, far_added;
        END IF;
        IF TG_OP IN ('DELETE', 'UPDATE') THEN
            EXECUTE format('SELECT array_agg(s.kde_v), coalesce(bool_or(%s), false) '
                           'FROM (SELECT %s AS kde_v, %I AS kde_c FROM kde_old OFFSET 0) s', far_expr, expr, r.attname)
                INTO removed, far_removed;
        END IF;
        IF far_added OR far_removed THEN
            UPDATE @extschema@.kde_catalog k
            SET storage_id = 'untracked: a numeric value beyond float8''s range was written (about 4.9e-324 to 1.8e308 in magnitude)'
            WHERE k.relid = TG_RELID::regclass AND k.cols = r.cols;
            CONTINUE;
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
        -- Arrays the write leaves as they were keep the stored value (the grid and the densities move only where a
        -- written value passed the grid's ends, the heavy values never do): TOAST then keeps their stored copy
        -- instead of writing it again at every statement (0.31.0).
        UPDATE @extschema@.kde_synopsis p
        SET grid = CASE WHEN delta.new_grid = p.grid THEN p.grid ELSE delta.new_grid END,
            atom_values = CASE WHEN delta.pack IS NOT NULL THEN '{}'
                               WHEN delta.atom_values = p.atom_values THEN p.atom_values ELSE delta.atom_values END,
            atom_cum_count = CASE WHEN delta.pack IS NULL THEN delta.new_atom_cum_count ELSE '{}' END,
            atom_cum_sum = CASE WHEN delta.pack IS NULL THEN delta.new_atom_cum_sum ELSE '{}' END,
            atom_pack = coalesce(delta.pack, ''),
            cell_cum_count = delta.new_cell_cum_count, cell_cum_sum = delta.new_cell_cum_sum,
            density = CASE WHEN delta.new_density = p.density THEN p.density ELSE delta.new_density END,
            kde_rows = p.kde_rows + delta.kde_rows,
            coarse = CASE WHEN added_coarse THEN true ELSE p.coarse END,
            -- each written value's addition, each prefix's and each cell's, rounds within one ulp of the
            -- largest magnitude added (2^-51 of it: twice that); a removed row takes its exact value out of
            -- a sum that holds it rounded to the build's quantum (half of it, twice); in IEEE arithmetic, where
            -- float8's operators would raise past its range and reject the user's write (0.31.0)
            sum_slack = @extschema@._kde_track_slack(p.sum_slack, coalesce(added, '{}'), coalesce(removed, '{}'),
                                                     p.cell_cum_sum, delta.new_cell_cum_sum, cardinality(p.grid),
                                                     p.sum_quantum)
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
        @extschema@._kde_refresh(tbl::oid, ARRAY[col], method, sample_size, grid_size, backend, budget, '0.31.0'))
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
        @extschema@._kde_refresh(tbl::oid, cols, method, sample_size, grid_size, backend, budget, '0.31.0'))
$$;
COMMENT ON FUNCTION kde_refresh(regclass, text[], text, integer, integer, text, integer) IS
    'Build or rebuild the synopsis of one column or, with two, of a pair within budget bytes (default 8192 and 65536; method: auto = lscv_H for a pair); returns a summary';

CREATE OR REPLACE FUNCTION kde_bandwidth(tbl regclass, cols text[], method text DEFAULT 'auto', backend text DEFAULT 'auto',
                              sample_size integer DEFAULT 10000) RETURNS float8[]
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT ARRAY(SELECT jsonb_array_elements_text(@extschema@._kde_raise_if_error(
        @extschema@._kde_bandwidth(tbl::oid, cols, method, backend, sample_size, '0.31.0')) -> 'bandwidth')::float8)
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
                '0.31.0'));
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

DROP AGGREGATE _kde_cells(float8, float8[], float8[], float8);
DROP AGGREGATE _kde_cells(numeric, float8[], float8[], float8);
DROP AGGREGATE _kde_cells(timestamptz, float8[], float8[], float8);
DROP AGGREGATE _kde_cells(timestamp, float8[], float8[], float8);
DROP AGGREGATE _kde_cells(date, float8[], float8[], float8);
DROP FUNCTION _kde_cells_step(bytea, float8, float8[], float8[], float8);
DROP FUNCTION _kde_cells_step(bytea, numeric, float8[], float8[], float8);
DROP FUNCTION _kde_cells_step(bytea, timestamptz, float8[], float8[], float8);
DROP FUNCTION _kde_cells_step(bytea, timestamp, float8[], float8[], float8);
DROP FUNCTION _kde_cells_step(bytea, date, float8[], float8[], float8);

-- The refresh's scan (extension/cells.c): value, grid, candidates, quantum, and the cell values it keeps at each
-- end (0.31.0: the tail, 256 unless the build expects its cells to hold more rows and would keep each value).
CREATE FUNCTION _kde_cells_step(bytea, float8, float8[], float8[], float8, int4) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_cells_step_float8' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION _kde_cells_step(bytea, numeric, float8[], float8[], float8, int4) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_cells_step_numeric' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION _kde_cells_step(bytea, timestamptz, float8[], float8[], float8, int4) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_cells_step_timestamp' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION _kde_cells_step(bytea, timestamp, float8[], float8[], float8, int4) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_cells_step_timestamp' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION _kde_cells_step(bytea, date, float8[], float8[], float8, int4) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_cells_step_date' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE AGGREGATE _kde_cells(float8, float8[], float8[], float8, int4) (
    SFUNC = _kde_cells_step, STYPE = bytea, COMBINEFUNC = _kde_cells_combine, PARALLEL = SAFE);
CREATE AGGREGATE _kde_cells(numeric, float8[], float8[], float8, int4) (
    SFUNC = _kde_cells_step, STYPE = bytea, COMBINEFUNC = _kde_cells_combine, PARALLEL = SAFE);
CREATE AGGREGATE _kde_cells(timestamptz, float8[], float8[], float8, int4) (
    SFUNC = _kde_cells_step, STYPE = bytea, COMBINEFUNC = _kde_cells_combine, PARALLEL = SAFE);
CREATE AGGREGATE _kde_cells(timestamp, float8[], float8[], float8, int4) (
    SFUNC = _kde_cells_step, STYPE = bytea, COMBINEFUNC = _kde_cells_combine, PARALLEL = SAFE);
CREATE AGGREGATE _kde_cells(date, float8[], float8[], float8, int4) (
    SFUNC = _kde_cells_step, STYPE = bytea, COMBINEFUNC = _kde_cells_combine, PARALLEL = SAFE);
REVOKE EXECUTE ON FUNCTION _kde_cells_step(bytea, float8, float8[], float8[], float8, int4),
    _kde_cells_step(bytea, numeric, float8[], float8[], float8, int4), _kde_cells_step(bytea, timestamptz, float8[], float8[], float8, int4),
    _kde_cells_step(bytea, timestamp, float8[], float8[], float8, int4), _kde_cells_step(bytea, date, float8[], float8[], float8, int4),
    _kde_cells_combine(bytea, bytea) FROM PUBLIC;
COMMENT ON AGGREGATE _kde_cells(float8, float8[], float8[], float8, int4) IS 'pg_kde internal: the refresh''s scan of a column';
COMMENT ON AGGREGATE _kde_cells(numeric, float8[], float8[], float8, int4) IS 'pg_kde internal: the refresh''s scan of a column';
COMMENT ON AGGREGATE _kde_cells(timestamptz, float8[], float8[], float8, int4) IS 'pg_kde internal: the refresh''s scan of a column';
COMMENT ON AGGREGATE _kde_cells(timestamp, float8[], float8[], float8, int4) IS 'pg_kde internal: the refresh''s scan of a column';
COMMENT ON AGGREGATE _kde_cells(date, float8[], float8[], float8, int4) IS 'pg_kde internal: the refresh''s scan of a column';
GRANT EXECUTE ON FUNCTION _kde_cells_step(bytea, float8, float8[], float8[], float8, int4),
    _kde_cells_step(bytea, numeric, float8[], float8[], float8, int4), _kde_cells_step(bytea, timestamptz, float8[], float8[], float8, int4),
    _kde_cells_step(bytea, timestamp, float8[], float8[], float8, int4), _kde_cells_step(bytea, date, float8[], float8[], float8, int4),
    _kde_cells_combine(bytea, bytea) TO PUBLIC;
