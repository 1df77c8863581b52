-- pg_kde 0.28.0 -> 0.29.0 (found by a red team on 0.28.0):
--   views whose rows depend on their reader get no synopsis (_kde_rows_depend): security_invoker views read
--     by a role that may not read their tables, views that read who their reader is (CURRENT_USER,
--     current_setting(), privilege tests, *_to_xml, their own non-IMMUTABLE functions), foreign tables
--     whose server has user mappings, none for the reader;
--   tracking is kde_tracked's record (new table), so that an owner's own triggers or disabled ones cannot
--     change a synopsis; kde_track adds a TRUNCATE trigger; the DDL event trigger also watches CREATE and
--     ALTER TRIGGER; tables tracked before are carried over;
--   date forms of approx_count, approx_count_ci, approx_avg and the pair functions (date bounds read as
--     their midnight's wall-clock time);
--   NaN bounds of the pair functions are an error; staleness counts inheritance children and a view's
--     tables and definitions (not a materialized view's); hints name the extension's schema. Every function that names the version is
--     replaced. No payload changes.
\echo Use "ALTER EXTENSION pg_kde UPDATE TO '0.29.0'" to load this file. \quit

CREATE FUNCTION _kde_reads(tbl regclass) RETURNS TABLE (relid oid, parent oid)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- (PL/pgSQL: its plan is kept for the session; a SQL function's, planned again on each read of a view,
    -- took a view's approx_count from about 0.15 to 0.34 ms a call)
    RETURN QUERY WITH RECURSIVE used(oid, parent) AS (
        SELECT tbl::oid, NULL::oid
        UNION
        SELECT x.oid, x.parent FROM used CROSS JOIN LATERAL (
            SELECT d.refobjid AS oid, used.oid AS parent
            FROM pg_class v
            JOIN pg_rewrite r ON r.ev_class = v.oid
            JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid
                            AND d.refclassid = 'pg_class'::regclass AND d.refobjid <> v.oid
            WHERE v.oid = used.oid AND v.relkind = 'v'
            UNION ALL
            SELECT i.inhrelid, NULL::oid FROM pg_inherits i WHERE i.inhparent = used.oid
        ) x
    )
    SELECT used.oid, used.parent FROM used;
END
$$;
COMMENT ON FUNCTION _kde_reads(regclass) IS 'pg_kde internal: the relations a relation reads, through views, partitions and inheritance';

CREATE FUNCTION _kde_rows_depend(tbl regclass) RETURNS text
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rels oid[];
    parents oid[];
    why text;
BEGIN
    IF row_security_active(tbl) THEN
        RETURN format('row-level security hides rows of %s from role %s', tbl, quote_ident(current_user::text));
    END IF;
    SELECT array_agg(u.relid), array_agg(u.parent) INTO rels, parents FROM @extschema@._kde_reads(tbl) u;
    SELECT format('%s reads foreign table %s, whose server %s has no user mapping for role %s',
                  CASE WHEN c.oid = tbl THEN 'a synopsis of ' || tbl::text ELSE tbl::text END, c.oid::regclass,
                  quote_ident(s.srvname), quote_ident(current_user::text))
    INTO why
    FROM pg_class c JOIN pg_foreign_table f ON f.ftrelid = c.oid JOIN pg_foreign_server s ON s.oid = f.ftserver
    WHERE c.oid = ANY (rels)
      AND EXISTS (SELECT 1 FROM pg_user_mappings m WHERE m.srvid = s.oid)  -- (a wrapper that uses them)
      AND NOT EXISTS (SELECT 1 FROM pg_user_mappings m WHERE m.srvid = s.oid AND (m.umuser = 0 OR m.usename = current_user))
    ORDER BY c.oid LIMIT 1;
    IF why IS NOT NULL THEN
        RETURN why;
    ELSIF NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = tbl AND c.relkind = 'v') THEN
        RETURN NULL;
    END IF;
    SELECT format('row-level security hides rows of %s from role %s (row-level security is enabled on %s, which it reads)',
                  tbl, quote_ident(current_user::text), c.oid::regclass)
    INTO why
    FROM unnest(rels, parents) AS e(oid, parent) JOIN pg_class c ON c.oid = e.oid
    WHERE e.parent IS NOT NULL AND c.relrowsecurity ORDER BY c.oid LIMIT 1;
    IF why IS NOT NULL THEN
        RETURN why;
    END IF;
    SELECT format('view %s reads %s with its reader''s privileges (security_invoker), and role %s may not read %s',
                  v.oid::regclass, e.oid::regclass, quote_ident(current_user::text), e.oid::regclass)
    INTO why
    FROM unnest(rels, parents) AS e(oid, parent)
    JOIN pg_class v ON v.oid = e.parent
    WHERE EXISTS (SELECT 1 FROM pg_options_to_table(v.reloptions) o
                  WHERE o.option_name = 'security_invoker' AND o.option_value::boolean)
      AND NOT has_table_privilege(e.oid, 'SELECT')
    ORDER BY e.parent, e.oid LIMIT 1;
    IF why IS NOT NULL THEN
        RETURN why;
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION _kde_rows_depend(regclass) IS 'pg_kde internal: why the rows of tbl may depend on who reads them (NULL: they do not)';

CREATE FUNCTION _kde_view_reads_reader(tbl regclass) RETURNS text
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rels oid[];
    why text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = tbl AND c.relkind = 'v') THEN
        RETURN NULL;
    END IF;
    SELECT array_agg(u.relid) INTO rels FROM @extschema@._kde_reads(tbl) u;  -- (its views, and the relations they read)
    -- What the views' definitions call, from their stored node trees (pg_rewrite.ev_action): a function,
    -- operator's function or aggregate by its oid, a SQL value function by its op (PostgreSQL 15: 9
    -- CURRENT_ROLE, 10 CURRENT_USER, 11 USER, 12 SESSION_USER).
    SELECT format('view %s reads who its reader is (%s): its rows depend on the role reading it',
                  tbl, string_agg(DISTINCT f.what, ', '))
    INTO why
    FROM (SELECT r.ev_action::text AS tree FROM pg_rewrite r JOIN pg_class v ON v.oid = r.ev_class AND v.relkind = 'v'
          WHERE r.ev_class = ANY (rels)) d
    CROSS JOIN LATERAL (
        SELECT (ARRAY['CURRENT_ROLE', 'CURRENT_USER', 'USER', 'SESSION_USER'])[m[1]::integer - 8] AS what
        FROM regexp_matches(d.tree, 'SQLVALUEFUNCTION :op (9|10|11|12) ', 'g') m
        UNION ALL
        SELECT p.oid::regprocedure::text
        FROM regexp_matches(d.tree, ':(?:funcid|opfuncid|aggfnoid|winfnoid) ([0-9]+)', 'g') m
        JOIN pg_proc p ON p.oid = m[1]::oid
        LEFT JOIN pg_aggregate g ON g.aggfnoid = p.oid
        WHERE CASE WHEN p.pronamespace = 'pg_catalog'::regnamespace
                   THEN p.proname ~ ('^(current_setting|set_config|current_user|session_user|current_role|getpgusername'
                                     '|pg_has_role|has_[a-z_]+_privilege|row_security_active|pg_show_all_settings'
                                     '|[a-z_]*_to_xml[a-z_]*|pg_stat_get_activity|pg_stat_get_backend_[a-z_]+'
                                     '|inet_client_(addr|port)|pg_backend_pid|current_query)$')
                   ELSE p.provolatile <> 'i' OR EXISTS (
                       SELECT 1 FROM pg_proc s
                       WHERE s.oid IN (g.aggtransfn, g.aggfinalfn, g.aggcombinefn, g.aggserialfn, g.aggdeserialfn,
                                       g.aggmtransfn, g.aggminvtransfn, g.aggmfinalfn) AND s.provolatile <> 'i') END
    ) f
    HAVING count(*) > 0;
    RETURN why;
END
$$;
COMMENT ON FUNCTION _kde_view_reads_reader(regclass) IS 'pg_kde internal: why a view''s definition makes its rows depend on who reads it (NULL: it does not)';

CREATE OR REPLACE FUNCTION _kde_rows_hidden(tbl regclass) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@._kde_rows_depend(tbl) IS NOT NULL
$$;
COMMENT ON FUNCTION _kde_rows_hidden(regclass) IS 'pg_kde internal: may the rows of tbl depend on who reads them (_kde_rows_depend)';

CREATE OR REPLACE FUNCTION _kde_can_read(tbl regclass, cols text[], attnums int2[], built_relid oid) RETURNS boolean
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    readable boolean;
BEGIN
    SELECT has_schema_privilege(c.relnamespace, 'USAGE') AND NOT row_security_active(tbl)
           AND (c.relkind NOT IN ('v', 'f', 'p') AND NOT c.relhassubclass OR NOT @extschema@._kde_rows_hidden(tbl))
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

CREATE OR REPLACE FUNCTION _kde_columns(tbl regclass, cols text[], OUT attnums int2[], OUT coltypes text[])
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
           CASE WHEN row_security_active(tbl) OR c.relkind IN ('v', 'f', 'p') OR c.relhassubclass
                THEN @extschema@._kde_rows_depend(tbl) END AS hidden INTO rel
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
    IF rel.hidden IS NOT NULL THEN
        RAISE EXCEPTION 'pg_kde: %', rel.hidden
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'A synopsis summarises every row of the table, so it is not served where the rows depend on who reads them.',
                  HINT = 'Query the table itself, or use a role its policies do not apply to (its owner, or a role with BYPASSRLS); a view whose rows depend on its reader gets no synopsis.';
    END IF;
END
$$;
COMMENT ON FUNCTION _kde_columns(regclass, text[]) IS 'pg_kde internal: the columns'' identity, privilege-checked';

CREATE OR REPLACE FUNCTION _kde_table_state(tbl regclass, OUT mod_count bigint, OUT storage_id text, OUT pages bigint)
LANGUAGE plpgsql STABLE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    leaf regclass;
    shards record;
    defs text;
BEGIN
    -- The relations whose rows tbl shows: itself, its partitions and inheritance children (a parent's scan
    -- reads them), and through a view the relations it reads (0.29.0: a red team grew an inheritance child and
    -- a view's table twentyfold, neither stale); those with storage, or foreign, count. A view's definitions
    -- count too (CREATE OR REPLACE VIEW changes what it shows), less the parse positions they store (the same
    -- definition written again is the same). A materialized view is read as a table: its rows change when it
    -- is refreshed (new storage), not when its tables do.
    WITH RECURSIVE rel(relid) AS (
        SELECT tbl
        UNION
        SELECT x.relid FROM rel CROSS JOIN LATERAL (
            SELECT d.refobjid::regclass AS relid
            FROM pg_rewrite r
            JOIN pg_class v ON v.oid = r.ev_class AND v.relkind = 'v'
            JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid
                            AND d.refclassid = 'pg_class'::regclass AND d.refobjid <> r.ev_class
            WHERE r.ev_class = rel.relid AND r.rulename = '_RETURN'
            UNION ALL
            SELECT i.inhrelid::regclass FROM pg_inherits i WHERE i.inhparent = rel.relid
        ) x
    ), leaves AS (
        SELECT rel.relid FROM rel JOIN pg_class c ON c.oid = rel.relid WHERE c.relkind IN ('r', 'm', 'f')
    )
    SELECT coalesce(sum(pg_stat_get_tuples_inserted(l.relid) + pg_stat_get_tuples_updated(l.relid)
                        + pg_stat_get_tuples_deleted(l.relid) + pg_stat_get_xact_tuples_inserted(l.relid)
                        + pg_stat_get_xact_tuples_updated(l.relid) + pg_stat_get_xact_tuples_deleted(l.relid)), 0)::bigint,
           string_agg(l.relid::oid::text || ':' || coalesce(pg_relation_filenode(l.relid)::text, 'none'), ','
                      ORDER BY l.relid::oid),
           coalesce(sum(pg_relation_size(l.relid) / current_setting('block_size')::bigint), 0)::bigint,
           (SELECT md5(string_agg(regexp_replace(r.ev_action::text, ' :location -?[0-9]+', '', 'g'), ','
                                  ORDER BY r.ev_class))
            FROM pg_rewrite r JOIN pg_class v ON v.oid = r.ev_class AND v.relkind = 'v'
            WHERE r.rulename = '_RETURN' AND r.ev_class IN (SELECT rel.relid FROM rel))
    INTO mod_count, storage_id, pages, defs
    FROM leaves l;
    IF defs IS NOT NULL THEN
        storage_id := coalesce(storage_id, '') || ';views=' || defs;
    END IF;
    IF to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN;
    END IF;
    FOR leaf IN
        EXECUTE 'SELECT d.logicalrelid FROM pg_catalog.pg_dist_partition d WHERE d.logicalrelid IN ('
                'SELECT p.relid FROM pg_catalog.pg_partition_tree($1) p WHERE p.isleaf UNION ALL '
                'SELECT $1 WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_partition_tree($1))) '
                'ORDER BY d.logicalrelid::oid' USING tbl
    LOOP
        SELECT coalesce(sum(split_part(a.identity, '|', 1)::bigint), 0) AS changes,
               string_agg(a.shardid::text || CASE WHEN a.identity IS NOT NULL THEN '@' || split_part(a.identity, '|', 2)
                                                       || '/' || split_part(a.identity, '|', 3) ELSE '?' END,
                          ',' ORDER BY a.shardid) AS files,
               coalesce(sum(split_part(a.identity, '|', 4)::bigint / current_setting('block_size')::bigint), 0) AS blocks
        INTO shards
        FROM @extschema@._kde_shard_identities(leaf) a;
        mod_count := mod_count + shards.changes;
        storage_id := storage_id || ';' || leaf::oid::text || '=' || coalesce(shards.files, '');
        pages := pages + shards.blocks;
    END LOOP;
END
$$;
COMMENT ON FUNCTION _kde_table_state(regclass) IS 'pg_kde internal: what staleness compares';

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
           row_security_active(tbl) OR ((c.relkind IN ('v', 'f', 'p') OR c.relhassubclass)
                                        AND @extschema@._kde_rows_hidden(tbl)) AS hidden INTO r
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
                  HINT = format('Build it with: SELECT @extschema@.kde_refresh(%L, %L);', tbl::text, cols[1]);
    END IF;
    IF h.coltypes IS DISTINCT FROM ARRAY[r.type] OR (h.built_relid = tbl::oid AND h.attnums IS DISTINCT FROM ARRAY[r.attnum]) THEN
        PERFORM @extschema@._kde_check_identity(tbl, cols, h.built_relid, h.attnums, h.coltypes, ARRAY[r.attnum], ARRAY[r.type]);
    END IF;
    RETURN s;
END
$$;
COMMENT ON FUNCTION _kde_synopsis_for(regclass, text[]) IS 'pg_kde internal: the synopsis row, privilege-checked';

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

CREATE OR REPLACE FUNCTION approx_count(tbl regclass, col1 text, lo1 float8, hi1 float8, col2 text, lo2 float8, hi2 float8)
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

CREATE OR REPLACE FUNCTION approx_sum(tbl regclass, sum_col text, pred_col text, lo float8, hi float8) RETURNS float8
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

CREATE OR REPLACE FUNCTION _kde_synopsis_nd_for(tbl regclass, cols text[], OUT s kde_synopsis_nd, OUT widths float8[],
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

CREATE OR REPLACE FUNCTION _kde_stale_why(mod_count bigint, storage_id text, pages bigint, rows bigint, built_mod_count bigint,
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

CREATE FUNCTION _kde_time_bounds(tbl regclass, col text, lo date, hi date, OUT a float8, OUT b float8)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT q.a, q.b FROM @extschema@._kde_time_bounds(tbl, col, lo::timestamp, hi::timestamp) q $$;
COMMENT ON FUNCTION _kde_time_bounds(regclass, text, date, date) IS 'pg_kde internal: date bounds as the synopsis reads them';

CREATE FUNCTION approx_count(tbl regclass, col text, lo date, hi date) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.approx_count(tbl, col, t.a, t.b) FROM @extschema@._kde_time_bounds(tbl, col, lo, hi) t $$;
COMMENT ON FUNCTION approx_count(regclass, text, date, date) IS
    'Approximate count of rows with lo <= col <= hi for a date, timestamp or timestamptz column (NULL bounds are open), date bounds';

CREATE FUNCTION approx_count_ci(tbl regclass, col text, lo date, hi date, confidence float8 DEFAULT 0.95,
                                OUT estimate float8, OUT low float8, OUT high float8)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT i.* FROM @extschema@._kde_time_bounds(tbl, col, lo, hi) t,
                     @extschema@._kde_interval(tbl, col, t.a, t.b, confidence, 0) i $$;
COMMENT ON FUNCTION approx_count_ci(regclass, text, date, date, float8) IS
    'approx_count_ci for a date, timestamp or timestamptz column, date bounds';

CREATE FUNCTION approx_avg(tbl regclass, col text, lo date, hi date) RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.approx_avg(tbl, col, lo::timestamp, hi::timestamp) $$;
COMMENT ON FUNCTION approx_avg(regclass, text, date, date) IS
    'Approximate average of a date, timestamp or timestamptz column over rows with lo <= col <= hi, as a timestamptz (date bounds)';

CREATE FUNCTION approx_count(tbl regclass, col1 text, lo1 date, hi1 date, col2 text, lo2 float8, hi2 float8)
RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.approx_count(tbl, col1, t.a, t.b, col2, lo2, hi2) FROM @extschema@._kde_time_bounds(tbl, col1, lo1, hi1) t $$;
COMMENT ON FUNCTION approx_count(regclass, text, date, date, text, float8, float8) IS
    'approx_count of a box whose first column is a date, timestamp or timestamptz column, date bounds (0.29.0)';

CREATE FUNCTION approx_sum(tbl regclass, sum_col text, pred_col text, lo date, hi date) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.approx_sum(tbl, sum_col, pred_col, t.a, t.b) FROM @extschema@._kde_time_bounds(tbl, pred_col, lo, hi) t $$;
COMMENT ON FUNCTION approx_sum(regclass, text, text, date, date) IS
    'approx_sum of sum_col over a time range of pred_col (a date, timestamp or timestamptz column), date bounds (0.29.0)';

CREATE FUNCTION approx_avg(tbl regclass, avg_col text, pred_col text, lo date, hi date) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.approx_avg(tbl, avg_col, pred_col, t.a, t.b) FROM @extschema@._kde_time_bounds(tbl, pred_col, lo, hi) t $$;
COMMENT ON FUNCTION approx_avg(regclass, text, text, date, date) IS
    'approx_avg of avg_col over a time range of pred_col (a date, timestamp or timestamptz column), date bounds (0.29.0)';

CREATE TABLE kde_tracked (
    relid           regclass    PRIMARY KEY,
    tracked_at      timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE kde_tracked IS 'pg_kde: the tables kde_track keeps up to date';

SELECT pg_catalog.pg_extension_config_dump('kde_tracked', '');

GRANT SELECT ON kde_tracked TO PUBLIC;

CREATE OR REPLACE FUNCTION _kde_track_apply() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r record;
    size_now bigint;
    expr text;
    added float8[];
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
        added := NULL;
        removed := NULL;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
            EXECUTE format('SELECT array_agg(%s) FROM kde_new', expr) INTO added;
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

CREATE FUNCTION _kde_track_intact(tbl regclass) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT count(*) = 4 AND NOT EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = tbl OR i.inhparent = tbl)
    FROM (VALUES ('kde_track_insert', 4, NULL, 'kde_new'), ('kde_track_update', 16, 'kde_old', 'kde_new'),
                 ('kde_track_delete', 8, 'kde_old', NULL), ('kde_track_truncate', 32, NULL, NULL)) AS w(name, type, old, new)
    JOIN pg_trigger t ON t.tgrelid = tbl AND t.tgname = w.name AND t.tgtype = w.type
                     AND t.tgoldtable IS NOT DISTINCT FROM w.old AND t.tgnewtable IS NOT DISTINCT FROM w.new
    WHERE t.tgfoid = '@extschema@._kde_track_apply()'::regprocedure AND t.tgenabled IN ('O', 'A')
      AND t.tgqual IS NULL AND t.tgnargs = 0 AND cardinality(t.tgattr::int2[]) = 0
$$;
COMMENT ON FUNCTION _kde_track_intact(regclass) IS 'pg_kde internal: are a table''s four tracking triggers in place and enabled';

CREATE FUNCTION _kde_track_broken(tbl regclass) RETURNS void
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    DELETE FROM @extschema@.kde_tracked k WHERE k.relid = tbl;
    UPDATE @extschema@.kde_catalog k SET storage_id = 'untracked: its tracking triggers were disabled, dropped or changed'
    WHERE k.relid = tbl AND k.kind = '1d' AND coalesce(k.storage_id, '') NOT LIKE 'untracked:%';
$$;
COMMENT ON FUNCTION _kde_track_broken(regclass) IS 'pg_kde internal: stop tracking a table whose triggers were disabled or dropped, its synopses stale';
REVOKE EXECUTE ON FUNCTION _kde_track_broken(regclass) FROM PUBLIC;

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

CREATE OR REPLACE FUNCTION kde_track(tbl regclass) RETURNS integer
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

CREATE OR REPLACE FUNCTION kde_untrack(tbl regclass) RETURNS void
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

CREATE OR REPLACE VIEW kde_synopses WITH (security_invoker = true) AS
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

CREATE OR REPLACE FUNCTION _kde_on_sql_drop() RETURNS event_trigger
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

CREATE OR REPLACE FUNCTION _kde_on_ddl_end() RETURNS event_trigger
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
        -- writes they miss would otherwise be followed by writes they apply (0.29.0)
        PERFORM @extschema@._kde_track_broken(t.relid) FROM @extschema@.kde_tracked t
        WHERE t.relid::oid = ANY (touched) AND NOT @extschema@._kde_track_intact(t.relid);
    END IF;
EXCEPTION WHEN undefined_table OR insufficient_privilege OR integrity_constraint_violation THEN
    RAISE WARNING 'pg_kde: could not bring synopses in step with the change: %', SQLERRM;
END
$$;
COMMENT ON FUNCTION _kde_on_ddl_end() IS 'pg_kde internal: follow renamed columns, drop synopses of retyped ones';

-- (the event trigger on DDL also watches CREATE TRIGGER and ALTER TRIGGER, 0.29.0)
DROP EVENT TRIGGER kde_ddl_end;

CREATE EVENT TRIGGER kde_ddl_end ON ddl_command_end
    WHEN TAG IN ('ALTER TABLE', 'ALTER VIEW', 'ALTER MATERIALIZED VIEW', 'ALTER FOREIGN TABLE', 'CREATE VIEW',
                 'CREATE TRIGGER', 'ALTER TRIGGER')
    EXECUTE FUNCTION _kde_on_ddl_end();

CREATE OR REPLACE FUNCTION kde_refresh(tbl regclass, col text, method text DEFAULT 'auto', sample_size integer DEFAULT 50000,
                            grid_size integer DEFAULT NULL, backend text DEFAULT 'auto',
                            budget integer DEFAULT NULL) RETURNS jsonb
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@._kde_raise_if_error(
        @extschema@._kde_refresh(tbl::oid, ARRAY[col], method, sample_size, grid_size, backend, budget, '0.29.0'))
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
        @extschema@._kde_refresh(tbl::oid, cols, method, sample_size, grid_size, backend, budget, '0.29.0'))
$$;
COMMENT ON FUNCTION kde_refresh(regclass, text[], text, integer, integer, text, integer) IS
    'Build or rebuild the synopsis of one column or, with two, of a pair within budget bytes (default 8192 and 65536; method: auto = lscv_H for a pair); returns a summary';

CREATE OR REPLACE FUNCTION kde_bandwidth(tbl regclass, cols text[], method text DEFAULT 'auto', backend text DEFAULT 'auto',
                              sample_size integer DEFAULT 10000) RETURNS float8[]
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT ARRAY(SELECT jsonb_array_elements_text(@extschema@._kde_raise_if_error(
        @extschema@._kde_bandwidth(tbl::oid, cols, method, backend, sample_size, '0.29.0')) -> 'bandwidth')::float8)
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
                '0.29.0'));
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

-- Tables kde_track tracked before 0.29.0 stay tracked: those whose three triggers are kde_track's (for every
-- row: no WHEN condition, no UPDATE OF columns) and that are in no inheritance tree get the TRUNCATE trigger
-- and their row in kde_tracked. Others (triggers made by hand as a red team did on
-- 0.28.0, a WHEN condition, a parent joined later) are left untracked, and so is one whose trigger cannot be
-- created here (the updating role may not own it), with a warning: kde_track tracks it again.
DO $upgrade$
DECLARE
    t regclass;
BEGIN
    FOR t IN SELECT g.tgrelid::regclass FROM pg_catalog.pg_trigger g
             WHERE g.tgname = 'kde_track_insert' AND g.tgfoid = '@extschema@._kde_track_apply()'::pg_catalog.regprocedure
             ORDER BY g.tgrelid
    LOOP
        BEGIN
            EXECUTE pg_catalog.format('CREATE TRIGGER kde_track_truncate AFTER TRUNCATE ON %s '
                                      'FOR EACH STATEMENT EXECUTE FUNCTION @extschema@._kde_track_apply()', t);
            IF @extschema@._kde_track_intact(t) THEN
                INSERT INTO @extschema@.kde_tracked (relid) VALUES (t);
            ELSE
                EXECUTE pg_catalog.format('DROP TRIGGER kde_track_truncate ON %s', t);
                RAISE WARNING 'pg_kde: % is no longer tracked: its triggers are not those kde_track installs', t
                    USING HINT = 'Track it again with kde_track.';
            END IF;
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'pg_kde: % is no longer tracked: %', t, SQLERRM
                USING HINT = 'Track it again with kde_track.';
        END;
    END LOOP;
END
$upgrade$;

-- Synopses of views whose definitions read who their reader is (CURRENT_USER, current_setting(), ...) hold the
-- rows of the role that refreshed them: 0.29.0 refuses to build them and removes those built before, with a
-- warning each (their queries then say there is no synopsis).
DO $upgrade$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT k.relid, k.cols, @extschema@._kde_view_reads_reader(k.relid) AS why
             FROM @extschema@.kde_catalog k JOIN pg_catalog.pg_class c ON c.oid = k.relid AND c.relkind = 'v'
             ORDER BY k.relid::oid, k.cols
    LOOP
        IF r.why IS NOT NULL THEN
            DELETE FROM @extschema@.kde_catalog k WHERE k.relid = r.relid AND k.cols = r.cols;
            RAISE WARNING 'pg_kde: removed the synopsis of % of %: %', pg_catalog.array_to_string(r.cols, ', '), r.relid, r.why;
        END IF;
    END LOOP;
END
$upgrade$;
