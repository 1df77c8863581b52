-- ---------------------------------------------------------------------------------------------- tracking
-- Opt-in incremental maintenance of a table's 1-D synopses (docs/math.md §12): kde_track(tbl) installs
-- statement-level AFTER INSERT, UPDATE, DELETE (and TRUNCATE, 0.29.0) triggers whose transition tables add the rows written to
-- the cells and heavy values they fall in, and subtract the rows deleted, exactly; the grid stays as built
-- (its outer boundaries move out to rows beyond them) until the next full refresh. A write the synopsis
-- cannot take exactly (a NaN or infinite value, a value off its lattice, a new value of an exact frequency
-- table) marks it stale with that reason instead; kde_refresh_stale() rebuilds it.
--
-- The trigger function runs as the catalog's owner (SECURITY DEFINER): the roles writing the table need no
-- grant on the catalog, and a row of theirs can only ever change the synopsis of the table they wrote. It
-- runs only as one of the four triggers kde_track installs (checked against pg_trigger: their names, AFTER
-- ... FOR EACH STATEMENT, and the transition tables they declare), so the relations it reads are the
-- statement's own rows. Writers of one tracked table queue on its synopses' catalog rows at the end of each
-- statement (row locks held to commit): tracking serializes their commits, two REPEATABLE READ writers get a
-- serialization failure, and writers of two tracked tables in opposite orders can deadlock. Sums are kept
-- in float8 and rounded once per statement (a scan's are exact integers rounded once). 2-D synopses,
-- partitions and tables in an inheritance tree are not tracked (a write through a parent or a child would
-- not reach the triggers).

-- Which tables are tracked is kde_tracked's to say (0.29.0), not the triggers': a table's owner may create
-- triggers of the same names and shape, or disable one of kde_track's, without the catalog's grants. A red
-- team did both on 0.28.0 (a delete trigger of its own, writes the triggers did not all see) and left a
-- synopsis whose hard bounds read [1070, 1144] rows for 2,000, neither stale nor tracked. So the triggers
-- apply writes only to a table kde_tracked holds, whose four triggers are all in place and enabled
-- (_kde_track_intact); a table whose triggers are disabled, dropped or changed leaves kde_tracked there (the
-- event triggers, and the trigger function itself, take it out), its synopses then as of the last write
-- tracking applied, stale once the activity counters show the writes since. A TRUNCATE of a tracked table
-- leaves its synopses stale with that reason (the next refresh takes them up again). A superuser who sets
-- session_replication_role = replica skips every trigger: tracking cannot see that.
CREATE TABLE kde_tracked (
    relid           regclass    PRIMARY KEY,
    tracked_at      timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE kde_tracked IS 'pg_kde: the tables kde_track keeps up to date';
SELECT pg_catalog.pg_extension_config_dump('kde_tracked', '');
GRANT SELECT ON kde_tracked TO PUBLIC;

-- The values a statement wrote (added) and deleted (removed), applied to one 1-D synopsis' arrays
-- (extension/track.c): the new arrays and the changes to its rows, or the problem that keeps it from taking
-- them exactly.
CREATE FUNCTION _kde_track_delta(grid float8[], step float8, atom_values float8[], atom_cum_count float8[],
                                 atom_cum_sum float8[], cell_cum_count float8[], cell_cum_sum float8[],
                                 density float4[], added float8[], removed float8[],
                                 OUT problem text, OUT nulls bigint, OUT non_null bigint, OUT kde_rows bigint,
                                 OUT applied bigint, OUT new_grid float8[], OUT new_atom_cum_count float8[],
                                 OUT new_atom_cum_sum float8[], OUT new_cell_cum_count float8[],
                                 OUT new_cell_cum_sum float8[], OUT new_density float4[])
AS 'MODULE_PATHNAME', 'kde_track_delta' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION _kde_track_delta(float8[], float8, float8[], float8[], float8[], float8[], float8[], float4[],
                                     float8[], float8[]) IS
    'pg_kde internal: apply the values a statement wrote and deleted to one 1-D synopsis';
REVOKE EXECUTE ON FUNCTION _kde_track_delta(float8[], float8, float8[], float8[], float8[], float8[], float8[], float4[],
                                            float8[], float8[]) FROM PUBLIC;

-- kde_synopsis.sum_slack after a tracked write, in IEEE arithmetic (0.31.0; extension/track.c): +Infinity past
-- float8's range, where the trigger's float8 arithmetic raised "value out of range" and rejected the write.
CREATE FUNCTION _kde_track_slack(slack float8, added float8[], removed float8[], old_sums float8[], new_sums float8[],
                                 boundaries integer, quantum float8) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_track_slack' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_track_slack(float8, float8[], float8[], float8[], float8[], integer, float8)
    IS 'pg_kde internal: a synopsis'' sum slack after a tracked write';
REVOKE EXECUTE ON FUNCTION _kde_track_slack(float8, float8[], float8[], float8[], float8[], integer, float8) FROM PUBLIC;

CREATE FUNCTION _kde_track_apply() RETURNS trigger
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

-- How many of kde_track's four triggers tbl has, each as kde_track makes it: its name, on _kde_track_apply,
-- enabled (as origin or always), AFTER ... FOR EACH STATEMENT (tgtype: the event's bit alone) with its
-- transition tables, for every row (no WHEN condition, no UPDATE OF columns, no arguments); -1 where a trigger
-- of one of those names is not so, or tbl is in an inheritance tree (a write through a parent it joined later
-- does not fire them). A red team on 0.29.0's first build replaced the insert trigger by one WHEN a setting was
-- off, and attached a tracked table to a parent.
--
-- PL/pgSQL rather than SQL (0.31.0): a SQL function with a SET clause is planned again at every call, a tenth of a
-- millisecond of every tracked write's statement; PL/pgSQL keeps the plan for the session.
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

-- Are tbl's four tracking triggers in place and enabled, as kde_track makes them (the trigger function and
-- kde_tracked's policies ask).
CREATE FUNCTION _kde_track_intact(tbl regclass) RETURNS boolean
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN @extschema@._kde_track_triggers(tbl) = 4;
END
$$;
COMMENT ON FUNCTION _kde_track_intact(regclass) IS 'pg_kde internal: are a table''s four tracking triggers in place and enabled';

-- A table's 1-D synopses stale with the reason (kde_synopses: "tracking could not apply a write: " and it)
-- until a refresh stores the table's own storage id again; the trigger function applies no write to them. One
-- already so keeps its first reason. Run by the trigger function (a TRUNCATE), _kde_track_broken and the event
-- triggers (a restore's triggers created after its rows), as the catalog's owner.
CREATE FUNCTION _kde_track_stale(tbl regclass, why text) RETURNS void
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    UPDATE @extschema@.kde_catalog k SET storage_id = 'untracked: ' || why
    WHERE k.relid = tbl AND k.kind = '1d' AND coalesce(k.storage_id, '') NOT LIKE 'untracked:%';
$$;
COMMENT ON FUNCTION _kde_track_stale(regclass, text) IS 'pg_kde internal: a table''s 1-D synopses stale until a refresh, with the reason';
REVOKE EXECUTE ON FUNCTION _kde_track_stale(regclass, text) FROM PUBLIC;

-- A tracked table whose triggers are no longer all in place and enabled (disabled, dropped, renamed) is no
-- longer tracked, and its synopses are stale with that reason: a write the triggers missed may be in the table
-- (kde_untrack takes the table out of kde_tracked first, so that stopping on purpose leaves them fresh). Run
-- by the event triggers and the trigger function, as the catalog's owner.
CREATE FUNCTION _kde_track_broken(tbl regclass) RETURNS void
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    DELETE FROM @extschema@.kde_tracked k WHERE k.relid = tbl;
    SELECT @extschema@._kde_track_stale(tbl, 'its tracking triggers were disabled, dropped or changed');
$$;
COMMENT ON FUNCTION _kde_track_broken(regclass) IS 'pg_kde internal: stop tracking a table whose triggers were disabled or dropped, its synopses stale';
REVOKE EXECUTE ON FUNCTION _kde_track_broken(regclass) FROM PUBLIC;

-- kde_tracked's writers: kde_track (a role that may write the catalog, the triggers in place) and
-- kde_untrack (that, or the table's owner), with the caller's rights; the event triggers and the trigger
-- function, as the catalog's owner, take out tables whose triggers are gone.
ALTER TABLE kde_tracked ENABLE ROW LEVEL SECURITY;
CREATE POLICY kde_tracked_read ON kde_tracked FOR SELECT USING (true);
CREATE POLICY kde_tracked_add ON kde_tracked FOR INSERT
    WITH CHECK (has_table_privilege('@extschema@.kde_synopsis', 'UPDATE') AND @extschema@._kde_track_intact(relid));
CREATE POLICY kde_tracked_renew ON kde_tracked FOR UPDATE
    USING (has_table_privilege('@extschema@.kde_synopsis', 'UPDATE'))
    WITH CHECK (has_table_privilege('@extschema@.kde_synopsis', 'UPDATE') AND @extschema@._kde_track_intact(relid));
CREATE POLICY kde_tracked_remove ON kde_tracked FOR DELETE
    USING (has_table_privilege('@extschema@.kde_synopsis', 'UPDATE')
           OR EXISTS (SELECT 1 FROM pg_catalog.pg_class c WHERE c.oid = relid AND pg_catalog.pg_has_role(c.relowner, 'USAGE')));
GRANT INSERT, UPDATE, DELETE ON kde_tracked TO PUBLIC;

-- Track a table's 1-D synopses: the caller must be allowed to write the catalog (tracking lets the table's
-- writers change its synopses) and to create triggers on the table. Returns how many synopses are tracked.
CREATE FUNCTION kde_track(tbl regclass) RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    kind char;
    n integer;
BEGIN
    SELECT c.relkind INTO kind FROM pg_class c WHERE c.oid = tbl;
    IF kind IS DISTINCT FROM 'r' THEN
        RAISE EXCEPTION 'pg_kde: % is not a plain table; only tables'' synopses are tracked', tbl
            USING ERRCODE = 'wrong_object_type',
                  HINT = 'A partitioned table''s synopsis merges its partitions'': refresh it with kde_refresh.';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = tbl OR i.inhparent = tbl) THEN
        RAISE EXCEPTION 'pg_kde: % is a partition or in an inheritance tree; writes through its parent or children would not reach the tracking triggers', tbl
            USING ERRCODE = 'wrong_object_type',
                  HINT = 'Refresh it with kde_refresh (or kde_refresh_stale on a schedule).';
    END IF;
    IF NOT has_table_privilege('@extschema@.kde_synopsis', 'UPDATE') THEN
        RAISE EXCEPTION 'pg_kde: tracking % lets its writers change its synopses; it needs UPDATE on the catalog', tbl
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'GRANT INSERT, UPDATE, DELETE ON @extschema@.kde_catalog, @extschema@.kde_synopsis TO the role (kde_synopsis_2d and kde_synopsis_nd too, for it to refresh pairs and 3 to 16 columns).';
    END IF;
    PERFORM @extschema@.kde_untrack(tbl);
    EXECUTE format('CREATE TRIGGER kde_track_insert AFTER INSERT ON %s REFERENCING NEW TABLE AS kde_new '
                   'FOR EACH STATEMENT EXECUTE FUNCTION @extschema@._kde_track_apply()', tbl);
    EXECUTE format('CREATE TRIGGER kde_track_update AFTER UPDATE ON %s REFERENCING OLD TABLE AS kde_old '
                   'NEW TABLE AS kde_new FOR EACH STATEMENT EXECUTE FUNCTION @extschema@._kde_track_apply()', tbl);
    EXECUTE format('CREATE TRIGGER kde_track_delete AFTER DELETE ON %s REFERENCING OLD TABLE AS kde_old '
                   'FOR EACH STATEMENT EXECUTE FUNCTION @extschema@._kde_track_apply()', tbl);
    EXECUTE format('CREATE TRIGGER kde_track_truncate AFTER TRUNCATE ON %s '
                   'FOR EACH STATEMENT EXECUTE FUNCTION @extschema@._kde_track_apply()', tbl);
    INSERT INTO @extschema@.kde_tracked AS k (relid) VALUES (tbl) ON CONFLICT (relid) DO UPDATE SET tracked_at = now();
    SELECT count(*) INTO n FROM @extschema@.kde_catalog k WHERE k.relid = tbl AND k.kind = '1d';
    RETURN n;
END
$$;
COMMENT ON FUNCTION kde_track(regclass) IS
    'Keep a table''s 1-D synopses up to date as rows are written (statement triggers); returns how many are tracked';

CREATE FUNCTION kde_untrack(tbl regclass) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM @extschema@.kde_tracked k WHERE k.relid = tbl;  -- (first: the triggers' drop then breaks nothing)
    EXECUTE format('DROP TRIGGER IF EXISTS kde_track_insert ON %s', tbl);
    EXECUTE format('DROP TRIGGER IF EXISTS kde_track_update ON %s', tbl);
    EXECUTE format('DROP TRIGGER IF EXISTS kde_track_delete ON %s', tbl);
    EXECUTE format('DROP TRIGGER IF EXISTS kde_track_truncate ON %s', tbl);
END
$$;
COMMENT ON FUNCTION kde_untrack(regclass) IS 'Stop tracking a table (drop kde_track''s triggers)';
