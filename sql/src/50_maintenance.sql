-- ---------------------------------------------------------------------------------------------- staleness
-- Why a synopsis no longer describes its table (NULL while it does): a write kde_track's triggers could not
-- apply (60_track.sql), or from _kde_table_state now against the same at the build (or at the last tracked
-- write): new storage files (TRUNCATE, a rewrite, partitions attached or detached, a restore);
-- counters below their value at the build (statistics reset, e.g. by crash recovery: what happened since
-- is unknown); at least 10% of the rows inserted, updated or deleted; the size in pages changed by more
-- than 10% (what the counters miss once reset).
CREATE FUNCTION _kde_stale_why(mod_count bigint, storage_id text, pages bigint, rows bigint, built_mod_count bigint,
                               built_storage text, built_pages bigint) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE
        WHEN built_storage LIKE 'untracked: %' THEN 'tracking could not apply a write: ' || substr(built_storage, 12)
        WHEN storage_id LIKE '%?%' THEN 'could not read ' || (length(storage_id) - length(replace(storage_id, '?', '')))
                                        || ' shard(s) of the Citus table on the workers'
        WHEN storage_id IS DISTINCT FROM built_storage THEN 'truncated, rewritten, repartitioned, restored or (a view) redefined'
        WHEN mod_count < built_mod_count THEN 'activity statistics were reset since the build'
        WHEN mod_count - built_mod_count >= 0.1 * greatest(rows, 1) THEN 'at least 10% of the rows modified'
        WHEN abs(pages - built_pages) > greatest(0.1 * built_pages, 1) THEN 'size changed by more than 10%'
    END
$$;
COMMENT ON FUNCTION _kde_stale_why(bigint, text, bigint, bigint, bigint, text, bigint) IS
    'pg_kde internal: why a synopsis is stale, from its table''s state now and at the build';

CREATE VIEW kde_synopses WITH (security_invoker = true) AS
SELECT k.relid,
       k.cols,
       k.method,
       k.n_rows,
       CASE WHEN octet_length(p1.atom_pack) > 0 THEN @extschema@._kde_atom_count(p1.atom_pack)
            ELSE coalesce(cardinality(p1.atom_values), 0) END AS heavy_values,
       coalesce(p1.kde_rows, k.n_rows) AS kde_rows,
       pg_column_size(k.*) + coalesce(pg_column_size(p1.*), 0) + coalesce(pg_column_size(p2.*), 0)
           + coalesce(pg_column_size(p3.*), 0) AS bytes,
       k.built_at,
       now() - k.built_at AS age,
       k.build_seconds,
       k.backend,
       CASE WHEN st.mod_count >= k.mod_count THEN st.mod_count - k.mod_count END AS rows_modified,
       r.reason IS NOT NULL AS stale,
       r.reason AS stale_reason,
       k.kind = '1d' AND EXISTS (SELECT 1 FROM @extschema@.kde_tracked t WHERE t.relid = k.relid)
           AND @extschema@._kde_track_intact(k.relid) AS tracked
FROM @extschema@.kde_catalog k
LEFT JOIN @extschema@.kde_synopsis p1 ON k.kind = '1d' AND p1.relid = k.relid AND p1.cols = k.cols
LEFT JOIN @extschema@.kde_synopsis_2d p2 ON k.kind = '2d' AND p2.relid = k.relid AND p2.cols = k.cols
LEFT JOIN @extschema@.kde_synopsis_nd p3 ON k.kind = 'nd' AND p3.relid = k.relid AND p3.cols = k.cols
CROSS JOIN LATERAL @extschema@._kde_table_state(k.relid) st
CROSS JOIN LATERAL (SELECT @extschema@._kde_stale_why(st.mod_count, st.storage_id, st.pages, k.n_rows + k.n_null,
                                                      k.mod_count, k.storage_id, k.pages) AS reason) r;
COMMENT ON VIEW kde_synopses IS
    'Every synopsis the current role may read, with its size, age, rows modified since its build (NULL when statistics were reset), a stale flag and its reason, and whether kde_track keeps it up to date';
GRANT SELECT ON kde_synopses TO PUBLIC;

-- Each stale synopsis the current role may read is rebuilt on its own (a subtransaction each): one that
-- fails is reported as a WARNING and left as it was, the others land. Synopses of views and foreign tables
-- the role does not own are skipped with a WARNING. A cancel stops the whole call.
CREATE FUNCTION kde_refresh_stale() RETURNS integer
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
                '@PG_KDE_VERSION@'));
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
BEGIN
    DELETE FROM @extschema@.kde_catalog k USING pg_event_trigger_dropped_objects() d
    WHERE d.classid = 'pg_class'::regclass AND d.objid = k.relid::oid
      AND (d.objsubid = 0 OR d.objsubid = ANY (k.attnums));
    -- a tracked table dropped, or one of its tracking triggers: no longer tracked (0.29.0)
    IF EXISTS (SELECT 1 FROM pg_event_trigger_dropped_objects() d WHERE d.object_type IN ('table', 'trigger')) THEN
        PERFORM @extschema@._kde_track_broken(t.relid) FROM @extschema@.kde_tracked t
        WHERE NOT @extschema@._kde_track_intact(t.relid);
    END IF;
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

CREATE EVENT TRIGGER kde_sql_drop ON sql_drop EXECUTE FUNCTION _kde_on_sql_drop();
CREATE EVENT TRIGGER kde_ddl_end ON ddl_command_end
    WHEN TAG IN ('ALTER TABLE', 'ALTER VIEW', 'ALTER MATERIALIZED VIEW', 'ALTER FOREIGN TABLE', 'CREATE VIEW',
                 'CREATE TRIGGER', 'ALTER TRIGGER')
    EXECUTE FUNCTION _kde_on_ddl_end();
