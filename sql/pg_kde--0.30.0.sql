-- pg_kde 0.30.0: approximate range aggregates from kernel density synopses.
\echo Use "CREATE EXTENSION pg_kde CASCADE" to load this file. \quit

-- ---------------------------------------------------------------------------------------------- catalog
-- One header row per synopsis (kde_catalog), whatever its kind: every shared feature (privileges, identity,
-- staleness, renames and drops, the kde_synopses view, kde_refresh_stale, pg-kde drop) reads this one table.
-- Each kind keeps its payload in a table of its own (kde_synopsis for one column, kde_synopsis_2d for a
-- pair, kde_synopsis_nd for 3 to 16 columns), one row per header row, which follows its header on rename and delete (ON UPDATE/DELETE CASCADE).
--   Identity: cols are the columns' names (kept in step with renames by kde_ddl_end), attnums and coltypes
--     their numbers and types at the build, built_relid the relation's oid at the build (it differs after a
--     dump and restore, whose tables get new oids and may number their columns anew).
--   Requested: the arguments of the last kde_refresh (method, sample_size, grid_size, backend), replayed by
--     kde_refresh_stale; what was built (the method that ran, the grid's size) is kept apart from them.
--   Build facts: the method and backend that ran (method 'exact' when every row is a heavy value, 'grid'
--     when no bandwidth could be chosen), the bandwidth (h for one column; H row-major in grid-index units
--     for a pair; one kernel width a column, in rank units, for 3 to 16), the sample it was chosen on, the
--     rows described and the NULLs left out, when and how long.
--   Staleness facts: mod_count, storage_id and pages are _kde_table_state() at the start of the build.
-- The payloads and the query maths that read them: pg_kde/synopsis (Python) and docs/math.md §7, §8 and §13.
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

-- 1-D payload (format 2, 0.4.0). Two parts that add up:
--   heavy values ("atoms") of a continuous column, or every value of a column with few (when they fit in
--     the budget), kept exactly: sorted, with cumulative counts and sums over the whole table;
--   cells: grid_size boundaries (grid) with exact cumulative row counts and sums per cell (cell_cum_*,
--     starting at 0); the KDE's density at each boundary relative to the grid's mean density (density,
--     float4), which with a cell's exact mean shapes the rows inside the cells a range cuts; shape_var, the variance of that
--     shape's error the sample showed (intervals widen by it). step > 0: the column's values lie on that
--     lattice and every boundary on a half-step (heavy values then get cells of their own). grid_size is
--     the size built (requested.grid_size is what was asked, if it was). period > 0 (0.6.0, a time column):
--     the rows inside a cut cell follow the periodic profile instead of the KDE's shape: the share of rows in
--     each of K bins of the period (the time of day, the day of the week), as cumulative shares at the K + 1
--     bin edges, then the sampled rows it was made from (profile, float4, K + 2 values). atom_pack (0.9.0):
--     heavy values on the lattice, packed (extension/atoms.c: lattice indices and counts in varints, 2-5
--     bytes a value; the sums follow exactly); the three atom arrays are then empty. docs/math.md §7.
CREATE TABLE kde_synopsis (
    relid           regclass    NOT NULL,
    cols            text[]      NOT NULL,
    atom_values     float8[]    NOT NULL,
    atom_cum_count  float8[]    NOT NULL,
    atom_cum_sum    float8[]    NOT NULL,
    kde_rows        bigint      NOT NULL,
    grid            float8[]    NOT NULL,
    grid_size       integer     NOT NULL,
    cell_cum_count  float8[]    NOT NULL,
    cell_cum_sum    float8[]    NOT NULL,
    step            float8      NOT NULL,
    density         float4[]    NOT NULL,
    shape_var       float8      NOT NULL,
    period          float8      NOT NULL DEFAULT 0,
    profile         float4[]    NOT NULL DEFAULT '{}',
    atom_pack       bytea       NOT NULL DEFAULT '',
    PRIMARY KEY (relid, cols),
    FOREIGN KEY (relid, cols) REFERENCES kde_catalog (relid, cols) ON UPDATE CASCADE ON DELETE CASCADE
);
-- Arrays are read whole by every query: keep them uncompressed (no pglz on the read path).
ALTER TABLE kde_synopsis ALTER COLUMN grid SET STORAGE EXTERNAL,
    ALTER COLUMN atom_values SET STORAGE EXTERNAL,
    ALTER COLUMN atom_cum_count SET STORAGE EXTERNAL, ALTER COLUMN atom_cum_sum SET STORAGE EXTERNAL,
    ALTER COLUMN cell_cum_count SET STORAGE EXTERNAL, ALTER COLUMN cell_cum_sum SET STORAGE EXTERNAL,
    ALTER COLUMN density SET STORAGE EXTERNAL, ALTER COLUMN atom_pack SET STORAGE EXTERNAL;
COMMENT ON TABLE kde_synopsis IS 'pg_kde 1-D synopsis payloads: exact heavy values and cells, shaped inside by a KDE';
-- sum_slack and sum_quantum (0.13.0): how far each of cell_cum_sum's prefix sums may lie from the sum of its
-- rows' values rounded to the quantum the scan summed them in (the build's, a merge's and each tracked
-- write's roundings, and the roundings of the rows tracked writes removed), and that quantum (0 where every
-- row's value is a whole number of it: a lattice). With them a cut cell's exact count and mean bound the rows
-- on each side of the cut (docs/math.md §7); NULL for a synopsis built before, whose cut cells keep the bounds
-- none to all of their rows.
ALTER TABLE kde_synopsis ADD COLUMN sum_slack float8 CHECK (sum_slack IS NULL OR sum_slack >= 0),
    ADD COLUMN sum_quantum float8 CHECK (sum_quantum IS NULL OR sum_quantum >= 0);
-- heavy_whole (0.17.0): whether each heavy value holds every row of its value, none of them in a cell (a
-- build's; a merge's where every part's are and no part has one of them in a cell). A cut cell's shape then
-- leaves the heavy values' slots inside it out (docs/math.md §7); NULL for a synopsis built before, whose cut
-- cells keep the shape over their whole width.
ALTER TABLE kde_synopsis ADD COLUMN heavy_whole boolean;
-- doubt_weight (0.20.0): the weight of the shape's doubt (the cut cells' disagreement with the straight line) in
-- a range's interval, calibrated by the build: its scan also counts the rows below about 2,000 cuts, and the
-- weight is the one whose 95% intervals cover nearest 95% of the ranges between them (pg_kde/synopsis/
-- calibration.py; docs/math.md §7). A time column whose build tries a periodic profile over a few cells (at
-- most 128) has one (0.25.0): its profiled cells have no other shape to disagree with, and the weight scales
-- their own spread. NULL where the build does not calibrate (a continuous column, a synopsis with no cells, a
-- profiled time column over more cells) and for a synopsis built before: weighed 1.
ALTER TABLE kde_synopsis ADD COLUMN doubt_weight float8
    CHECK (doubt_weight IS NULL OR (doubt_weight >= 0 AND doubt_weight < 'Infinity'));
-- doubt_weights (0.21.0): the weights of groups of neighbouring cells (cell c of m in group c * n / m of the n
-- weights), calibrated by the build on the same exact counts where one weight does not suit every part of the
-- column (a log-normal's dense bulk and its sparse tail); a cut cell's doubt is weighed by its group's. NULL: every
-- cell weighs doubt_weight (a synopsis built before 0.21.0, a merge of partitions).
ALTER TABLE kde_synopsis ADD COLUMN doubt_weights float4[]
    CHECK (doubt_weights IS NULL OR (array_ndims(doubt_weights) = 1 AND array_position(doubt_weights, NULL) IS NULL
                                     AND 0 <= ALL (doubt_weights) AND 'Infinity' > ALL (doubt_weights)));
-- coarse (0.30.0): whether the column may hold values whose float8 also stands for other values of its type
-- (bigint from 2^53, numeric of more than 15 significant digits, timestamps from 2^33 epoch seconds: the year
-- 2242), so that rows on a bound's float8 may lie on either side of the bound: the hard bounds then count them
-- on both (docs/math.md §7, "Values float8 cannot tell apart"). NULL: not known (a numeric column's synopsis
-- built before, a merge with such a part): read as true.
ALTER TABLE kde_synopsis ADD COLUMN coarse boolean;
SELECT pg_catalog.pg_extension_config_dump('kde_synopsis', '');

-- 2-D payload, a pair of columns on an equal-depth grid: grid1, grid2 hold each axis's grid points (at the
-- data's quantiles); sat_count and kde_sat are summed-area tables at the grid points (row-major,
-- grid_size[1] x grid_size[2]) of the cells' exact row counts and of the KDE's cell masses; sat_sum holds
-- the two columns' exact summed-area tables of values, one after the other. lattice1/2 hold a discretised
-- axis's distinct values (empty for a continuous or integer axis); its grid points are midpoints between them.
-- pair_pack (0.10.0): where both axes are discretised and the pair's distinct values fit the budget, its exact
-- frequency table, entries (position in lattice1, position in lattice2, rows) in varints (docs/math.md §8);
-- the grid is then one cell over the pair's range, and queries read the table.
CREATE TABLE kde_synopsis_2d (
    relid           regclass    NOT NULL,
    cols            text[]      NOT NULL,
    integer_valued  boolean[]   NOT NULL,
    grid1           float8[]    NOT NULL,
    grid2           float8[]    NOT NULL,
    lattice1        float8[]    NOT NULL,
    lattice2        float8[]    NOT NULL,
    grid_size       integer[]   NOT NULL,
    sat_count       float8[]    NOT NULL,
    sat_sum         float8[]    NOT NULL,
    kde_sat         float8[]    NOT NULL,
    pair_pack       bytea       NOT NULL DEFAULT '',
    PRIMARY KEY (relid, cols),
    FOREIGN KEY (relid, cols) REFERENCES kde_catalog (relid, cols) ON UPDATE CASCADE ON DELETE CASCADE
);
ALTER TABLE kde_synopsis_2d ALTER COLUMN sat_count SET STORAGE EXTERNAL,
    ALTER COLUMN sat_sum SET STORAGE EXTERNAL, ALTER COLUMN kde_sat SET STORAGE EXTERNAL,
    ALTER COLUMN pair_pack SET STORAGE EXTERNAL;
COMMENT ON TABLE kde_synopsis_2d IS 'pg_kde 2-D synopsis payloads: exact summed-area tables of grid cells plus a KDE';
SELECT pg_catalog.pg_extension_config_dump('kde_synopsis_2d', '');

-- Payload of 3 to 16 columns (0.11.0; pg_kde/synopsis/multi.py, docs/math.md §13): a sample of n_points rows
-- kept as their ranks, points (n_points x d uint16 codes, little-endian, row after row: rank = code / 65534,
-- 65535 a NULL value), smoothed at query time by a product kernel whose widths (rank units) are the header's
-- bandwidth. Each column's ranks come from its knots: knot_counts[j] knots of column j, one after the other in
-- knot_values (ascending within a column), with the sampled rows below (knot_below) and up to (knot_upto)
-- each, out of non_null[j] non-NULL sampled rows; complete[j] when every distinct sampled value is a knot.
-- categorical[j]: a text, enum or boolean column, whose knots are the places 0, 1, ... of its sampled values
-- (sorted), listed in labels (each categorical column's knot_counts[j] labels, one column after the other).
CREATE TABLE kde_synopsis_nd (
    relid           regclass    NOT NULL,
    cols            text[]      NOT NULL,
    n_points        integer     NOT NULL,
    points          bytea       NOT NULL,
    knot_counts     int4[]      NOT NULL,
    knot_values     float8[]    NOT NULL,
    knot_below      int4[]      NOT NULL,
    knot_upto       int4[]      NOT NULL,
    non_null        int4[]      NOT NULL,
    complete        boolean[]   NOT NULL,
    categorical     boolean[]   NOT NULL,
    labels          text[]      NOT NULL,
    PRIMARY KEY (relid, cols),
    FOREIGN KEY (relid, cols) REFERENCES kde_catalog (relid, cols) ON UPDATE CASCADE ON DELETE CASCADE
);
-- pool_rows (0.12.0): the rows of the sample the points are a balanced subsample of, whose intervals read
-- them; NULL for a synopsis built before, a simple random sample's intervals then (docs/math.md §13).
ALTER TABLE kde_synopsis_nd ADD COLUMN pool_rows integer CHECK (pool_rows IS NULL OR pool_rows >= n_points);
ALTER TABLE kde_synopsis_nd ALTER COLUMN points SET STORAGE EXTERNAL,
    ALTER COLUMN knot_values SET STORAGE EXTERNAL, ALTER COLUMN knot_below SET STORAGE EXTERNAL,
    ALTER COLUMN knot_upto SET STORAGE EXTERNAL, ALTER COLUMN labels SET STORAGE EXTERNAL;
COMMENT ON TABLE kde_synopsis_nd IS 'pg_kde multi-column synopsis payloads: a sample of rows as ranks, smoothed by a product-kernel KDE';
-- (the header is registered last: the order an update from 0.2.0 gives.)
SELECT pg_catalog.pg_extension_config_dump('kde_catalog', '');
SELECT pg_catalog.pg_extension_config_dump('kde_synopsis_nd', '');  -- (0.11.0's update adds it last)

-- The parts of a synopsis of a Citus table distributed by hash (0.14.0): each shard's answer to the refresh's
-- scan, kept so that the next refresh scans again only the shards that changed and combines the others'
-- stored states with theirs (docs/math.md §11, "Citus tables"). One row a synopsis, none for any other:
--   plan: the scan's plan the answers were read with (JSON text; 1-D: grid, candidate heavy values, quanta,
--     the row sample's share; 2-D: none, the stored synopsis' cells are the plan), kept while the request is
--     the same and fewer than a quarter of plan_rows rows have changed since plan_mod_count;
--   command: the md5 of the command each shard answered (its aggregates and their arguments);
--   shards, identities, answers: per shard, in shardid order, its id, its identity read before its scan
--     (_kde_shard_identities) and its answer (rows, then each aggregate's state in base64);
--   written_by: the role that wrote the row (set by a trigger): a refresh reuses only what its own role
--     kept, so answers another writer put there are read again.
-- It is a cache: not dumped (a restored cluster has other shards), rebuilt by the next refresh, and written
-- only by roles granted INSERT, UPDATE, DELETE on it (without them the refresh scans every shard).
CREATE TABLE kde_parts (
    relid           regclass    NOT NULL,
    cols            text[]      NOT NULL,
    plan            text,
    plan_rows       bigint      NOT NULL,
    plan_mod_count  bigint      NOT NULL,
    command         text        NOT NULL,
    shards          bigint[]    NOT NULL,
    identities      text[]      NOT NULL,
    answers         text[]      NOT NULL,
    written_by      name        NOT NULL DEFAULT current_user,
    PRIMARY KEY (relid, cols),
    FOREIGN KEY (relid, cols) REFERENCES kde_catalog (relid, cols) ON UPDATE CASCADE ON DELETE CASCADE,
    CHECK (cardinality(shards) = cardinality(identities) AND cardinality(shards) = cardinality(answers))
);
ALTER TABLE kde_parts ALTER COLUMN answers SET STORAGE EXTENDED;
COMMENT ON TABLE kde_parts IS 'pg_kde: the shards'' scan states of a Citus table''s synopsis, reused where a shard has not changed';
CREATE FUNCTION _kde_parts_writer() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    NEW.written_by := current_user;
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION _kde_parts_writer() IS 'pg_kde internal: who wrote a kde_parts row';
CREATE TRIGGER kde_parts_writer BEFORE INSERT OR UPDATE ON kde_parts FOR EACH ROW EXECUTE FUNCTION _kde_parts_writer();

-- ---------------------------------------------------------------------------------------------- security
-- A synopsis is an aggregate of every row of its columns: it is served, and may be written, only where the
-- role could compute that aggregate itself (docs: README, Security).

-- An array readers can index from 1 with no NULL element (the shape checks below).
CREATE FUNCTION _kde_is_vector(a anyarray) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT (array_ndims(a) IS NULL OR (array_ndims(a) = 1 AND array_lower(a, 1) = 1)) AND array_position(a, NULL) IS NULL $$;
COMMENT ON FUNCTION _kde_is_vector(anyarray) IS 'pg_kde internal: a one-dimensional array from 1 without NULLs';

-- Catalog rows are validated on write: a malformed row (written by hand by a granted role) is refused
-- instead of breaking every reader.
ALTER TABLE kde_catalog ADD CONSTRAINT kde_catalog_well_formed CHECK (
    kind IN ('1d', '2d', 'nd')
    AND CASE kind WHEN '1d' THEN cardinality(cols) = 1 WHEN '2d' THEN cardinality(cols) = 2
                  ELSE cardinality(cols) BETWEEN 3 AND 16 END
    AND cardinality(attnums) = cardinality(cols) AND cardinality(coltypes) = cardinality(cols)
    AND 0 < ALL (attnums) AND n_rows >= 0 AND n_null >= 0 AND sample_size >= 0 AND pages >= 0
    AND cardinality(bandwidth) = CASE kind WHEN '1d' THEN 1 WHEN '2d' THEN 4 ELSE cardinality(cols) END
    AND (kind <> 'nd' OR (1e-9 <= ALL (array_remove(bandwidth, 0)) AND 1 >= ALL (bandwidth)))
    AND (kind <> '1d' OR (bandwidth[1] >= 0 AND bandwidth[1] < 'Infinity'))
    AND jsonb_typeof(requested) = 'object'
    AND @extschema@._kde_is_vector(cols) AND @extschema@._kde_is_vector(attnums) AND @extschema@._kde_is_vector(coltypes)
    AND @extschema@._kde_is_vector(bandwidth));
ALTER TABLE kde_synopsis ADD CONSTRAINT kde_synopsis_well_formed CHECK (
    cardinality(cols) = 1 AND kde_rows >= 0 AND step >= 0 AND step < 'Infinity'
    AND shape_var >= 0 AND shape_var < 'Infinity'
    AND grid_size >= 0 AND (grid_size >= 2 OR kde_rows = 0)
    AND cardinality(grid) = grid_size AND cardinality(cell_cum_count) = grid_size
    AND cardinality(cell_cum_sum) = grid_size AND cardinality(density) = grid_size
    AND cardinality(atom_cum_count) = cardinality(atom_values) AND cardinality(atom_cum_sum) = cardinality(atom_values)
    AND @extschema@._kde_is_vector(atom_values)
    AND @extschema@._kde_is_vector(atom_cum_count) AND @extschema@._kde_is_vector(atom_cum_sum)
    AND @extschema@._kde_is_vector(grid)
    AND @extschema@._kde_is_vector(cell_cum_count) AND @extschema@._kde_is_vector(cell_cum_sum)
    AND @extschema@._kde_is_vector(density));
ALTER TABLE kde_synopsis ADD CONSTRAINT kde_synopsis_profile_well_formed CHECK (
    period >= 0 AND period < 'Infinity' AND (period = 0) = (cardinality(profile) = 0)
    AND @extschema@._kde_is_vector(profile)
    AND (cardinality(profile) = 0 OR (cardinality(profile) >= 3 AND profile[1] = 0
         AND profile[cardinality(profile) - 1] = 1 AND profile[cardinality(profile)] >= 1)));
ALTER TABLE kde_synopsis ADD CONSTRAINT kde_synopsis_pack_well_formed CHECK (
    octet_length(atom_pack) = 0 OR (cardinality(atom_values) = 0 AND step > 0));
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
ALTER TABLE kde_synopsis_2d ADD CONSTRAINT kde_synopsis_2d_pairs_well_formed CHECK (
    octet_length(pair_pack) = 0
    OR (cardinality(lattice1) > 0 AND cardinality(lattice2) > 0 AND grid_size = ARRAY[2, 2]));
-- A multi-column payload's categories: every categorical column's knots are complete, and labels holds
-- knot_counts[j] of them for each.
CREATE FUNCTION _kde_labels_fit(knot_counts int4[], complete boolean[], categorical boolean[], labels text[])
RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(bool_and(NOT c OR k), true)
           AND coalesce(sum(n) FILTER (WHERE c), 0) = cardinality(labels)
    FROM unnest(knot_counts, complete, categorical) AS u(n, k, c)
$$;
COMMENT ON FUNCTION _kde_labels_fit(int4[], boolean[], boolean[], text[]) IS
    'pg_kde internal: do a multi-column payload''s labels fit its categorical columns';
ALTER TABLE kde_synopsis_nd ADD CONSTRAINT kde_synopsis_nd_well_formed CHECK (
    cardinality(cols) BETWEEN 3 AND 16 AND n_points >= 1
    AND octet_length(points) = 2::bigint * n_points * cardinality(cols)
    AND cardinality(knot_counts) = cardinality(cols) AND cardinality(non_null) = cardinality(cols)
    AND cardinality(complete) = cardinality(cols) AND cardinality(categorical) = cardinality(cols)
    AND cardinality(knot_below) = cardinality(knot_values) AND cardinality(knot_upto) = cardinality(knot_values)
    AND 1 <= ALL (knot_counts) AND 0 <= ALL (non_null)
    AND @extschema@._kde_is_vector(knot_counts) AND @extschema@._kde_is_vector(knot_values)
    AND @extschema@._kde_is_vector(knot_below) AND @extschema@._kde_is_vector(knot_upto)
    AND @extschema@._kde_is_vector(non_null) AND @extschema@._kde_is_vector(complete)
    AND @extschema@._kde_is_vector(categorical) AND @extschema@._kde_is_vector(labels)
    AND @extschema@._kde_labels_fit(knot_counts, complete, categorical, labels));

-- Every relation tbl reads, tbl first (parent NULL): through a view, each relation its rules depend on (parent:
-- the view), and a table's partitions and inheritance children (parent NULL: read as the parent is). The walk
-- of _kde_rows_depend and _kde_view_reads_reader (0.29.0; staleness, _kde_table_state, follows a view's
-- _RETURN rule only: the rows it shows).
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

-- Why the rows of tbl may depend on who reads them (NULL where they do not), for the current role (0.29.0;
-- before, only the first two). A synopsis built from the rows one role sees would be served to every reader:
--   row-level security applies to the role (row_security_active), or tbl is a view over (views over) a
--     relation with row-level security enabled, whose policies filter by the role reading through the view;
--   a view of the chain is security_invoker and reads a relation the role may not read (SQL refuses it);
--   (at refresh, _kde_view_reads_reader below: a view's definition reads who its reader is);
--   tbl, a partition of it or a relation a view reads is a foreign table whose server has user mappings,
--     none for the role (SQL refuses it; a red team read a foreign table's synopsis as a role without one).
--     Roles with different user mappings may see different remote rows: the synopsis holds the refreshing
--     role's (the README says so).
-- A red team on 0.28.0 found a security_invoker view and a view filtering by current_user served to every
-- grantee; a second, on this release's first list, getpgusername(), pg_settings, query_to_xml() and an
-- aggregate reading current_user. What a view shows by the reader's session settings (TimeZone, DateStyle,
-- search_path, extra_float_digits) is not the reader's privilege: its synopsis describes the rows as the
-- refreshing session showed them (the README says so). A function declared IMMUTABLE that reads the session
-- is its author's error, which pg_kde cannot see.
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

-- Why view tbl's rows depend on who reads it by its definition, or those of the views it reads (NULL where
-- they do not): it reads CURRENT_USER, SESSION_USER, CURRENT_ROLE or USER; a pg_catalog function that reads
-- the role, its privileges or its settings, or runs SQL as the reader (current_setting, getpgusername,
-- pg_has_role, has_*_privilege, row_security_active, pg_show_all_settings behind pg_settings, query_to_xml and
-- the other *_to_xml*, the activity functions behind pg_stat_activity, inet_client_*, pg_backend_pid,
-- current_query); a function outside pg_catalog that is not IMMUTABLE, or an aggregate outside it whose
-- support functions are not (its author's code may read any of those: every aggregate is marked IMMUTABLE
-- whatever they do). Checked at refresh (a synopsis of such a view would hold its refreshing role's rows),
-- not on each read (about 0.25 ms a call): a synopsis built while the definition did not read its reader
-- holds rows every reader of that definition saw, and a redefinition makes it stale; the update to 0.29.0
-- removes the synopses such views had.
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

CREATE FUNCTION _kde_rows_hidden(tbl regclass) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@._kde_rows_depend(tbl) IS NOT NULL
$$;
COMMENT ON FUNCTION _kde_rows_hidden(regclass) IS 'pg_kde internal: may the rows of tbl depend on who reads them (_kde_rows_depend)';

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

-- Row-level security on the catalog: a role sees, and may write, only synopses it could compute itself; a
-- payload row is visible and writable exactly when its header row is. PUBLIC may read; writing (kde_refresh)
-- needs an explicit GRANT INSERT, UPDATE, DELETE ON kde_catalog, kde_synopsis, kde_synopsis_2d (and
-- kde_synopsis_nd for synopses of 3 to 16 columns; kde_parts, optional, for a Citus table's shards' states).
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
ALTER TABLE kde_synopsis_nd ENABLE ROW LEVEL SECURITY;
CREATE POLICY kde_synopsis_nd_header ON kde_synopsis_nd
    USING (EXISTS (SELECT 1 FROM @extschema@.kde_catalog h WHERE h.relid = kde_synopsis_nd.relid AND h.cols = kde_synopsis_nd.cols))
    WITH CHECK (EXISTS (SELECT 1 FROM @extschema@.kde_catalog h WHERE h.relid = kde_synopsis_nd.relid AND h.cols = kde_synopsis_nd.cols));
GRANT SELECT ON kde_synopsis_nd TO PUBLIC;
ALTER TABLE kde_parts ENABLE ROW LEVEL SECURITY;
CREATE POLICY kde_parts_header ON kde_parts
    USING (EXISTS (SELECT 1 FROM @extschema@.kde_catalog h WHERE h.relid = kde_parts.relid AND h.cols = kde_parts.cols))
    WITH CHECK (EXISTS (SELECT 1 FROM @extschema@.kde_catalog h WHERE h.relid = kde_parts.relid AND h.cols = kde_parts.cols));
GRANT SELECT ON kde_parts TO PUBLIC;

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

-- Whether this transaction holds the table's ACCESS EXCLUSIVE lock (it truncated or altered the table): other
-- connections that read it, the workers' that read a Citus table's shards, would wait for it until it ends.
CREATE FUNCTION _kde_locked_here(tbl regclass) RETURNS boolean
LANGUAGE sql STABLE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = pg_backend_pid() AND l.locktype = 'relation'
                   AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
                   AND l.relation = tbl AND l.mode = 'AccessExclusiveLock' AND l.granted)
$$;
COMMENT ON FUNCTION _kde_locked_here(regclass) IS 'pg_kde internal: does this transaction hold the table''s exclusive lock';

-- Each shard of a Citus table, in shardid order, with its identity: rows changed (inserted + updated +
-- deleted) | node | storage file | bytes | when the worker's statistics of the database were last reset (a
-- reset, or crash recovery, can bring the counters back to values they had before), as the worker reports
-- them now (NULL for a shard that did not answer). One command a shard, one after another (a connection a worker, not one a shard), as the calling
-- role, written with schema-qualified functions only: it runs on the workers under their search_path, where
-- a role that may create objects in public could otherwise put an operator of its own in the way. A result
-- that is not those fields counts as a shard that did not answer. In a transaction that holds the table's
-- ACCESS EXCLUSIVE lock (it truncated or altered the table) the workers' connections would wait for it until
-- the transaction ends: no shard is asked, and none answers.
CREATE FUNCTION _kde_shard_identities(tbl regclass, OUT shardid bigint, OUT identity text) RETURNS SETOF record
LANGUAGE plpgsql STABLE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF @extschema@._kde_locked_here(tbl) THEN
        RETURN QUERY EXECUTE 'SELECT s.shardid, NULL::text FROM pg_catalog.pg_dist_shard s '
                             'WHERE s.logicalrelid = $1 ORDER BY s.shardid' USING tbl;
        RETURN;
    END IF;
    RETURN QUERY EXECUTE $q$
        SELECT r.shardid, CASE WHEN r.success AND r.result ~ '^[0-9]+[|][^|]*[|][0-9]+[|][0-9]+[|][^|]*$' THEN r.result END
        FROM run_command_on_shards($1, $c$SELECT pg_catalog.concat_ws('|',
            pg_catalog.int8pl(pg_catalog.int8pl(pg_catalog.pg_stat_get_tuples_inserted(%1$L::pg_catalog.regclass),
                pg_catalog.pg_stat_get_tuples_updated(%1$L::pg_catalog.regclass)),
                pg_catalog.pg_stat_get_tuples_deleted(%1$L::pg_catalog.regclass)),
            pg_catalog.concat_ws(' ', coalesce(pg_catalog.host(pg_catalog.inet_server_addr()), 'socket'),
                pg_catalog.inet_server_port()),
            coalesce(pg_catalog.pg_relation_filenode(%1$L::pg_catalog.regclass), 0),
            pg_catalog.pg_relation_size(%1$L::pg_catalog.regclass),
            coalesce(pg_catalog.pg_stat_get_db_stat_reset_time((SELECT d.oid FROM pg_catalog.pg_database d
                WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()))::pg_catalog.text, ''))$c$, false) r
        ORDER BY r.shardid
    $q$ USING tbl;
END
$$;
COMMENT ON FUNCTION _kde_shard_identities(regclass) IS 'pg_kde internal: a Citus table''s shards and what staleness compares of each';

-- What staleness compares: the relation's modification counters (inserted + updated + deleted rows over its
-- leaf partitions, this backend's counts not yet reported included), its storage files (a TRUNCATE, a
-- rewrite or a change of partitions gives new ones) and its size in pages. A leaf that is a Citus table
-- (listed in pg_dist_partition) keeps its rows in shards on the workers, and the coordinator's relation is an
-- empty shell whose counters never move: its shards' counters, storage files, sizes and nodes are read there
-- (_kde_shard_identities; what a worker has not reported yet, within about 10 s of the change, is not
-- seen). A shard that does not answer is marked '?' in storage_id (the synopsis reads as stale, for that
-- reason, until it answers again). A leaf without storage (a foreign table) counts as 'none', so attaching
-- or detaching one changes the storage.
CREATE FUNCTION _kde_table_state(tbl regclass, OUT mod_count bigint, OUT storage_id text, OUT pages bigint)
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
-- Only the header is written: each payload row follows its header (ON UPDATE/DELETE CASCADE).
CREATE FUNCTION _kde_reconcile(relids oid[]) RETURNS void
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

-- The refresh's sample (extension/sample.c): each row kept with probability share by a hash of its ctid,
-- tableoid and the seed (the same rows for unchanged data, in any scan order), and the column's facts over every row
-- (non-NULL and non-finite values, min and max), in one parallel pass; a bytea state with a combine function.
CREATE FUNCTION _kde_sample_step(bytea, float8, tid, oid, float8, int8) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_sample_step_float8' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION _kde_sample_step(bytea, numeric, tid, oid, float8, int8) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_sample_step_numeric' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION _kde_sample_step(bytea, timestamptz, tid, oid, float8, int8) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_sample_step_timestamp' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION _kde_sample_step(bytea, timestamp, tid, oid, float8, int8) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_sample_step_timestamp' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION _kde_sample_step(bytea, date, tid, oid, float8, int8) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_sample_step_date' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION _kde_sample_combine(bytea, bytea) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_sample_combine' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE AGGREGATE _kde_sample(float8, tid, oid, float8, int8) (
    SFUNC = _kde_sample_step, STYPE = bytea, COMBINEFUNC = _kde_sample_combine, PARALLEL = SAFE);
CREATE AGGREGATE _kde_sample(numeric, tid, oid, float8, int8) (
    SFUNC = _kde_sample_step, STYPE = bytea, COMBINEFUNC = _kde_sample_combine, PARALLEL = SAFE);
CREATE AGGREGATE _kde_sample(timestamptz, tid, oid, float8, int8) (
    SFUNC = _kde_sample_step, STYPE = bytea, COMBINEFUNC = _kde_sample_combine, PARALLEL = SAFE);
CREATE AGGREGATE _kde_sample(timestamp, tid, oid, float8, int8) (
    SFUNC = _kde_sample_step, STYPE = bytea, COMBINEFUNC = _kde_sample_combine, PARALLEL = SAFE);
CREATE AGGREGATE _kde_sample(date, tid, oid, float8, int8) (
    SFUNC = _kde_sample_step, STYPE = bytea, COMBINEFUNC = _kde_sample_combine, PARALLEL = SAFE);
COMMENT ON AGGREGATE _kde_sample(float8, tid, oid, float8, int8) IS 'pg_kde internal: the refresh''s sample of a column';
COMMENT ON AGGREGATE _kde_sample(numeric, tid, oid, float8, int8) IS 'pg_kde internal: the refresh''s sample of a column';
COMMENT ON AGGREGATE _kde_sample(timestamptz, tid, oid, float8, int8) IS 'pg_kde internal: the refresh''s sample of a column';
COMMENT ON AGGREGATE _kde_sample(timestamp, tid, oid, float8, int8) IS 'pg_kde internal: the refresh''s sample of a column';
COMMENT ON AGGREGATE _kde_sample(date, tid, oid, float8, int8) IS 'pg_kde internal: the refresh''s sample of a column';

-- The aggregates' support functions take a state a caller could craft: only the aggregates call them
-- (PostgreSQL checks the aggregate owner's EXECUTE on them, not the caller's).
REVOKE EXECUTE ON FUNCTION _kde_sample_step(bytea, float8, tid, oid, float8, int8), _kde_sample_step(bytea, numeric, tid, oid, float8, int8),
    _kde_sample_step(bytea, timestamptz, tid, oid, float8, int8), _kde_sample_step(bytea, timestamp, tid, oid, float8, int8),
    _kde_sample_step(bytea, date, tid, oid, float8, int8), _kde_sample_combine(bytea, bytea) FROM PUBLIC;

-- The refresh's one scan (extension/cells.c): per cell of a grid, its rows and the exact sum of its values in
-- whole quanta; per candidate heavy value, its rows; and the column's facts. Its state is a bytea with a
-- combine function: PostgreSQL's parallel query runs it on every core, Citus on every shard, and the states
-- of parts of a table merge with the same combine. Time columns are read as epoch seconds, as
-- extract(epoch from ...)::float8 reads them (a timestamp's or a date's wall-clock time as UTC).
-- A numeric column is read as _kde_float8 reads it: the same float8 as numeric's own cast, without its text.
CREATE FUNCTION _kde_float8(numeric) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_float8' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_float8(numeric) IS 'pg_kde internal: numeric to float8, as the cast, faster';
-- Whether the float8 of a numeric may stand for another numeric too (more than 15 significant digits, or a
-- magnitude float8 holds only as a subnormal or near its largest): the refresh's scan counts such rows, and a
-- synopsis that holds one treats rows on a bound's float8 as on either side of it (0.30.0, docs/math.md §7).
CREATE FUNCTION _kde_numeric_coarse(numeric) RETURNS boolean
AS 'MODULE_PATHNAME', 'kde_numeric_coarse_sql' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_numeric_coarse(numeric) IS 'pg_kde internal: whether float8 may not tell this numeric from another';
CREATE FUNCTION _kde_cells_step(bytea, float8, float8[], float8[], float8) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_cells_step_float8' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION _kde_cells_step(bytea, numeric, float8[], float8[], float8) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_cells_step_numeric' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION _kde_cells_step(bytea, timestamptz, float8[], float8[], float8) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_cells_step_timestamp' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION _kde_cells_step(bytea, timestamp, float8[], float8[], float8) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_cells_step_timestamp' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION _kde_cells_step(bytea, date, float8[], float8[], float8) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_cells_step_date' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION _kde_cells_combine(bytea, bytea) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_cells_combine' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE AGGREGATE _kde_cells(float8, float8[], float8[], float8) (
    SFUNC = _kde_cells_step, STYPE = bytea, COMBINEFUNC = _kde_cells_combine, PARALLEL = SAFE);
CREATE AGGREGATE _kde_cells(numeric, float8[], float8[], float8) (
    SFUNC = _kde_cells_step, STYPE = bytea, COMBINEFUNC = _kde_cells_combine, PARALLEL = SAFE);
CREATE AGGREGATE _kde_cells(timestamptz, float8[], float8[], float8) (
    SFUNC = _kde_cells_step, STYPE = bytea, COMBINEFUNC = _kde_cells_combine, PARALLEL = SAFE);
CREATE AGGREGATE _kde_cells(timestamp, float8[], float8[], float8) (
    SFUNC = _kde_cells_step, STYPE = bytea, COMBINEFUNC = _kde_cells_combine, PARALLEL = SAFE);
CREATE AGGREGATE _kde_cells(date, float8[], float8[], float8) (
    SFUNC = _kde_cells_step, STYPE = bytea, COMBINEFUNC = _kde_cells_combine, PARALLEL = SAFE);
REVOKE EXECUTE ON FUNCTION _kde_cells_step(bytea, float8, float8[], float8[], float8),
    _kde_cells_step(bytea, numeric, float8[], float8[], float8), _kde_cells_step(bytea, timestamptz, float8[], float8[], float8),
    _kde_cells_step(bytea, timestamp, float8[], float8[], float8), _kde_cells_step(bytea, date, float8[], float8[], float8),
    _kde_cells_combine(bytea, bytea) FROM PUBLIC;
COMMENT ON AGGREGATE _kde_cells(float8, float8[], float8[], float8) IS 'pg_kde internal: the refresh''s scan of a column';
COMMENT ON AGGREGATE _kde_cells(numeric, float8[], float8[], float8) IS 'pg_kde internal: the refresh''s scan of a column';
COMMENT ON AGGREGATE _kde_cells(timestamptz, float8[], float8[], float8) IS 'pg_kde internal: the refresh''s scan of a column';
COMMENT ON AGGREGATE _kde_cells(timestamp, float8[], float8[], float8) IS 'pg_kde internal: the refresh''s scan of a column';
COMMENT ON AGGREGATE _kde_cells(date, float8[], float8[], float8) IS 'pg_kde internal: the refresh''s scan of a column';

-- A value of any type the scans take as they read it: _kde_float8's float8 of a numeric, a float8 itself, a
-- time's epoch seconds (a timestamp's or a date's wall-clock time as UTC).
CREATE FUNCTION _kde_value(numeric) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_float8' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION _kde_value(float8) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_float8_float8' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION _kde_value(timestamptz) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_float8_timestamp' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION _kde_value(timestamp) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_float8_timestamp' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION _kde_value(date) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_float8_date' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_value(numeric) IS 'pg_kde internal: a value as the scans read it';
COMMENT ON FUNCTION _kde_value(float8) IS 'pg_kde internal: a value as the scans read it';
COMMENT ON FUNCTION _kde_value(timestamptz) IS 'pg_kde internal: epoch seconds, as the scans read them';
COMMENT ON FUNCTION _kde_value(timestamp) IS 'pg_kde internal: epoch seconds, as the scans read them';
COMMENT ON FUNCTION _kde_value(date) IS 'pg_kde internal: epoch seconds, as the scans read them';

-- A scan that reads a column at a power-of-two scale below 1 (values near float8's largest, whose sums must stay
-- finite) would round a nonzero value below 2^-1022 / scale, whose product is subnormal: it calls this instead,
-- which says so (0.27.0; 0.26.0 stored such values rounded, or PostgreSQL's product raised "value out of range:
-- underflow" where they rounded to 0).
CREATE FUNCTION _kde_scale_loses(x float8, scale float8) RETURNS float8
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION 'pg_kde: the column holds % beside values near float8''s largest, which a synopsis reads at the scale % that would round it', x, scale
        USING ERRCODE = 'numeric_value_out_of_range',
              HINT = 'A synopsis keeps values within 2^1982 of each other in magnitude: exclude the tiny (or huge) values, e.g. through a view.';
END
$$;
COMMENT ON FUNCTION _kde_scale_loses(float8, float8) IS 'pg_kde internal: a value a scaled scan would round';

-- The 2-D refresh's scan (extension/cells2.c): per cell of two grids' product, its rows, the exact sums of its
-- values in whole quanta of each axis and the sums of their offsets in the cell (t1, t2, t1 t2, in units of
-- 2^-60); per cell of each axis the min and max of its values; the pair's facts; and, given each row's ctid
-- and table, a share and a seed, the repeatable row sample of pairs _kde_sample's hash keeps. A bytea state
-- with a combine function, as _kde_cells'.
CREATE FUNCTION _kde_cells2_step(bytea, float8, float8, float8[], float8[], float8, float8, tid, oid, float8, int8)
RETURNS bytea AS 'MODULE_PATHNAME', 'kde_cells2_step' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION _kde_cells2_combine(bytea, bytea) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_cells2_combine' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE AGGREGATE _kde_cells2(float8, float8, float8[], float8[], float8, float8, tid, oid, float8, int8) (
    SFUNC = _kde_cells2_step, STYPE = bytea, COMBINEFUNC = _kde_cells2_combine, PARALLEL = SAFE);
REVOKE EXECUTE ON FUNCTION _kde_cells2_step(bytea, float8, float8, float8[], float8[], float8, float8, tid, oid, float8, int8),
    _kde_cells2_combine(bytea, bytea) FROM PUBLIC;
COMMENT ON AGGREGATE _kde_cells2(float8, float8, float8[], float8[], float8, float8, tid, oid, float8, int8) IS 'pg_kde internal: the refresh''s scan of a pair of columns';

-- The shards' states of a Citus table's scan, combined on the coordinator in the order given (0.14.0;
-- kde_parts): the aggregates' own combine functions, each of which checks every state it takes (its header,
-- sizes and version) and refuses states of different grids, candidates or quanta.
CREATE AGGREGATE _kde_cells_union(bytea) (SFUNC = _kde_cells_combine, STYPE = bytea);
CREATE AGGREGATE _kde_sample_union(bytea) (SFUNC = _kde_sample_combine, STYPE = bytea);
CREATE AGGREGATE _kde_cells2_union(bytea) (SFUNC = _kde_cells2_combine, STYPE = bytea);
COMMENT ON AGGREGATE _kde_cells_union(bytea) IS 'pg_kde internal: the shards'' _kde_cells states, combined';
COMMENT ON AGGREGATE _kde_sample_union(bytea) IS 'pg_kde internal: the shards'' _kde_sample states, combined';
COMMENT ON AGGREGATE _kde_cells2_union(bytea) IS 'pg_kde internal: the shards'' _kde_cells2 states, combined';

-- The support functions above are executable by every role again (0.14.0): Citus's pushed-down aggregates
-- (worker_partial_agg on the workers) call them as the role that runs the query, not as the aggregate's
-- owner, so a role that was not a superuser could not refresh a Citus table. Each refuses to run outside an
-- aggregate and checks every state it takes (header, sizes, version) before reading it; a red team sent
-- 33,000 crafted states through the union aggregates above and got only clean errors.
GRANT EXECUTE ON FUNCTION _kde_sample_step(bytea, float8, tid, oid, float8, int8), _kde_sample_step(bytea, numeric, tid, oid, float8, int8),
    _kde_sample_step(bytea, timestamptz, tid, oid, float8, int8), _kde_sample_step(bytea, timestamp, tid, oid, float8, int8),
    _kde_sample_step(bytea, date, tid, oid, float8, int8), _kde_sample_combine(bytea, bytea),
    _kde_cells_step(bytea, float8, float8[], float8[], float8),
    _kde_cells_step(bytea, numeric, float8[], float8[], float8), _kde_cells_step(bytea, timestamptz, float8[], float8[], float8),
    _kde_cells_step(bytea, timestamp, float8[], float8[], float8), _kde_cells_step(bytea, date, float8[], float8[], float8),
    _kde_cells_combine(bytea, bytea),
    _kde_cells2_step(bytea, float8, float8, float8[], float8[], float8, float8, tid, oid, float8, int8),
    _kde_cells2_combine(bytea, bytea) TO PUBLIC;

-- A time column's periodic profile, counted in the same scan (0.16.0; extension/profile.c): per bin of the
-- period, the finite values whose phase ((v + shift) mod period) / period falls in it. The build takes the
-- heavy values' rows out and stores the profile of every other row. Its support functions are executable by
-- every role, as the scan's are (0.14.0, for Citus); each checks the states it takes.
CREATE FUNCTION _kde_phases_step(bytea, timestamptz, float8, int4, float8) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_phases_step_timestamp' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION _kde_phases_step(bytea, timestamp, float8, int4, float8) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_phases_step_timestamp' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION _kde_phases_step(bytea, date, float8, int4, float8) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_phases_step_date' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION _kde_phases_combine(bytea, bytea) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_phases_combine' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE AGGREGATE _kde_phases(timestamptz, float8, int4, float8) (
    SFUNC = _kde_phases_step, STYPE = bytea, COMBINEFUNC = _kde_phases_combine, PARALLEL = SAFE);
CREATE AGGREGATE _kde_phases(timestamp, float8, int4, float8) (
    SFUNC = _kde_phases_step, STYPE = bytea, COMBINEFUNC = _kde_phases_combine, PARALLEL = SAFE);
CREATE AGGREGATE _kde_phases(date, float8, int4, float8) (
    SFUNC = _kde_phases_step, STYPE = bytea, COMBINEFUNC = _kde_phases_combine, PARALLEL = SAFE);
CREATE AGGREGATE _kde_phases_union(bytea) (SFUNC = _kde_phases_combine, STYPE = bytea);
COMMENT ON AGGREGATE _kde_phases(timestamptz, float8, int4, float8) IS 'pg_kde internal: the refresh''s count of a time column''s periodic profile';
COMMENT ON AGGREGATE _kde_phases(timestamp, float8, int4, float8) IS 'pg_kde internal: the refresh''s count of a time column''s periodic profile';
COMMENT ON AGGREGATE _kde_phases(date, float8, int4, float8) IS 'pg_kde internal: the refresh''s count of a time column''s periodic profile';
COMMENT ON AGGREGATE _kde_phases_union(bytea) IS 'pg_kde internal: the shards'' _kde_phases states, combined';
GRANT EXECUTE ON FUNCTION _kde_phases_step(bytea, timestamptz, float8, int4, float8),
    _kde_phases_step(bytea, timestamp, float8, int4, float8), _kde_phases_step(bytea, date, float8, int4, float8),
    _kde_phases_combine(bytea, bytea) TO PUBLIC;

CREATE FUNCTION _kde_refresh(relid oid, cols text[], method text, sample_size integer, grid_size integer,
                             backend text, budget integer, extversion text) RETURNS jsonb
LANGUAGE plpython3u VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
from pg_kde import sql_entry
return sql_entry.refresh(plpy, GD, relid, cols, method, sample_size, grid_size, backend, budget, extversion)
$$;
COMMENT ON FUNCTION _kde_refresh(oid, text[], text, integer, integer, text, integer, text) IS 'pg_kde internal: build a synopsis';

-- budget: bytes the synopsis may take (its catalog rows, as pg_column_size counts them); NULL: 8192 for one
-- column, 65536 for a pair. grid_size (points per axis), when given, sets the grid instead.
CREATE FUNCTION kde_refresh(tbl regclass, col text, method text DEFAULT 'auto', sample_size integer DEFAULT 50000,
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

CREATE FUNCTION kde_refresh(tbl regclass, cols text[], method text DEFAULT 'auto', sample_size integer DEFAULT 5000,
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

CREATE FUNCTION _kde_bandwidth(relid oid, cols text[], method text, backend text, sample_size integer,
                               extversion text) RETURNS jsonb
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
AS $$
    SELECT ARRAY(SELECT jsonb_array_elements_text(@extschema@._kde_raise_if_error(
        @extschema@._kde_bandwidth(tbl::oid, cols, method, backend, sample_size, '0.30.0')) -> 'bandwidth')::float8)
$$;
COMMENT ON FUNCTION kde_bandwidth(regclass, text[], text, text, integer) IS
    'Bandwidth of a sample of rows with all columns non-NULL: {h} for one column (data units), else H row-major';

CREATE FUNCTION kde_bandwidth(tbl regclass, col text, method text DEFAULT 'auto', backend text DEFAULT 'auto',
                              sample_size integer DEFAULT 10000) RETURNS float8[]
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.kde_bandwidth(tbl, ARRAY[col], method, backend, sample_size) $$;
COMMENT ON FUNCTION kde_bandwidth(regclass, text, text, text, integer) IS
    'Bandwidth h (data units) of a sample of one column''s non-NULL values';

-- ---------------------------------------------------------------------------------------------- queries
-- The synopsis of (tbl, cols), after checking the caller may read the columns and every row, and that the
-- synopsis still describes those columns; a clear error otherwise. Identity comes from the header row
-- (kde_catalog), the maths from the payload (kde_synopsis).
CREATE FUNCTION _kde_synopsis_for(tbl regclass, cols text[]) RETURNS kde_synopsis
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

-- Fractional grid-index coordinate of x on a grid (0 at grid[1], cardinality - 1 at the last point).
CREATE FUNCTION _kde_grid_pos(grid float8[], x float8) RETURNS float8
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    m integer := cardinality(grid);
    k integer;
    p float8;
BEGIN
    IF abs(x) < 2.2250738585072014e-308 THEN
        x := 0;  -- a subnormal bound reads as 0 (no grid point is subnormal; x / 2 would underflow)
    END IF;
    IF x <= grid[1] THEN
        RETURN 0;
    ELSIF x >= grid[m] THEN
        RETURN m - 1;
    END IF;
    k := width_bucket(x, grid);
    -- A bound within two ulps of a grid point is on it (a lattice's midpoint rounds as (a + b) / 2 or
    -- a / 2 + b / 2); not one within 1e-9 of a cell's width, which in a cell 1e12 wide is 1000 values away.
    -- (halves: no difference of values near the ends of float8 overflows; 1e-290: no product underflows)
    IF x = grid[k] OR (abs(grid[k]) > 1e-290 AND abs(x / 2 - grid[k] / 2) <= 2.25e-16 * abs(grid[k])) THEN
        RETURN k - 1;
    ELSIF abs(grid[k + 1]) > 1e-290 AND abs(grid[k + 1] / 2 - x / 2) <= 2.25e-16 * abs(grid[k + 1]) THEN
        RETURN k;
    END IF;
    -- Halves first: differences of values near the ends of float8 would overflow.
    p := (k - 1) + (x / 2 - grid[k] / 2) / (grid[k + 1] / 2 - grid[k] / 2);
    RETURN p;
END
$$;
COMMENT ON FUNCTION _kde_grid_pos(float8[], float8) IS 'pg_kde internal: position on a grid';

-- The position of an upper bound (0.9.0): _kde_grid_pos, and past a heavy value's cell of its own on a 2-D
-- continuous axis ([v, next float): one ulp wide, or [0, smallest normal)) when x is at least v on its
-- start: x <= v holds the rows at v, which the half-open cell starting at v keeps.
-- (pg_kde.synopsis.query.upper_pos and maths.is_tie_cell, as written here)
CREATE FUNCTION _kde_upper_pos(grid float8[], x float8) RETURNS float8
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p float8 := @extschema@._kde_grid_pos(grid, x);
    k integer;
BEGIN
    IF p = floor(p) AND p < cardinality(grid) - 1 THEN
        k := p::integer + 1;  -- grid[k] is the point at p
        IF x >= grid[k] AND (grid[k + 1] - grid[k] <= abs(grid[k]) * 2.220446049250313e-16
                             OR (grid[k] = 0 AND grid[k + 1] <= 2.2250738585072014e-308)) THEN
            RETURN p + 1;
        END IF;
    END IF;
    RETURN p;
END
$$;
COMMENT ON FUNCTION _kde_upper_pos(float8[], float8) IS 'pg_kde internal: position of an upper bound on a grid';

-- A bound moved onto a discretised axis's lattice: the midpoint just below the smallest value >= x (lower
-- bound) or just above the largest value <= x (upper bound); the grid's points are those midpoints, so
-- every value's rows stay whole. Beyond the ends: the grid's ends.
CREATE FUNCTION _kde_lattice_bound(lattice float8[], grid float8[], x float8, upper boolean) RETURNS float8
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

-- The share of a cut cell [g0, g1]'s rows between fractions t0 <= t1 of the cell, their mean position there,
-- and the variance of the share's error from the profile's own sample (per unit of share (1 - share)), under
-- the periodic profile of a time column tilted to the cell's exact mean position (extension/profile.c; its
-- float64 reference is pg_kde.synopsis.cells.profile_cut): the profile's mass and first two moments about the
-- cell's start (whole periods in closed form, the rest bin by bin), of x + step/2 (a lattice value's rows
-- sit in the bin of its half-steps). docs/math.md §7.
CREATE FUNCTION _kde_profile_cut(profile float4[], period float8, step float8, g0 float8, g1 float8, t0 float8,
                                 t1 float8, mean float8, OUT share float8, OUT pos float8, OUT doubt float8)
AS 'MODULE_PATHNAME', 'kde_profile_cut' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_profile_cut(float4[], float8, float8, float8, float8, float8, float8, float8) IS 'pg_kde internal: the share of a cut cell in a range under a periodic profile';

-- Count (moment 0) or sum (moment 1) of the rows with lo <= x <= hi, NULL bounds open (a NaN bound is an
-- error), with the variance and hard bounds of the estimate; extension/range.c, as
-- pg_kde.synopsis.query.range_1d, step for step (docs/math.md §7):
--   heavy values exactly;
--   on a value lattice (step q > 0; the lattice value k is k * q for q >= 1 and k / (1/q) below, the correctly
--     rounded decimal, as numeric and float8 input give it), the bounds move out to the half-steps around
--     the values they include;
--   cells: whole ones exactly from the cumulative arrays; the (at most two) a range cuts by the share of
--     their rows their shape (the cubic with the KDE's densities at the ends, an exponential or straight
--     line where that goes negative, or a time column's periodic profile, _kde_profile_cut) puts inside,
--     with its variance (binomial less what the cell's exact count and mean pin down,
--     n s (1 - s) (1 - 3 s (1 - s)), plus the shape's error n^2 tau^2 4 s (1 - s), or for a range inside
--     one cell under the KDE's shape the two cuts' errors added, n^2 tau^2 4 (a (1 - a) + b (1 - b)) with
--     a, b the shares below its ends, when larger; the profile's sampling error, and the shares' distance
--     from the straight line's, squared) and hard bounds (none to all of a cut cell's rows; on a continuous
--     column a row may sit on the upper bound itself).
-- In C: its float8 arithmetic follows IEEE 754 (the variance of a sum of values near 1e300 is infinite, the
-- squares of values near 1e-300 vanish) where PL/pgSQL raised "value out of range".
CREATE FUNCTION _kde_range(s kde_synopsis, lo float8, hi float8, moment integer,
                           OUT estimate float8, OUT variance float8, OUT low float8, OUT high float8)
AS 'MODULE_PATHNAME', 'kde_range' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION _kde_range(kde_synopsis, float8, float8, integer) IS 'pg_kde internal: a moment over a range';

-- A payload row's heavy values as arrays: its own, or its atom_pack's (extension/atoms.c), which holds them
-- on the column's lattice where the arrays are empty. And the pack of heavy values (NULL where they do not
-- pack: off a lattice, counts that are not whole); the tracking triggers store their new counts so.
CREATE FUNCTION _kde_atoms(s kde_synopsis, OUT atom_values float8[], OUT atom_cum_count float8[],
                           OUT atom_cum_sum float8[])
AS 'MODULE_PATHNAME', 'kde_atoms' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_atoms(kde_synopsis) IS 'pg_kde internal: a 1-D synopsis'' heavy values, unpacked';
CREATE FUNCTION _kde_atoms_pack(atom_values float8[], atom_cum_count float8[], step float8) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_atoms_pack' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_atoms_pack(float8[], float8[], float8) IS 'pg_kde internal: heavy values on a lattice, packed';
CREATE FUNCTION _kde_atom_count(pack bytea) RETURNS integer
AS 'MODULE_PATHNAME', 'kde_atom_count' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_atom_count(bytea) IS 'pg_kde internal: how many heavy values a pack holds (NULL: a malformed header)';

-- Standard normal quantile (Acklam's rational approximation, relative error < 1.2e-9).
CREATE FUNCTION _kde_normal_quantile(p float8) RETURNS float8
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    a float8[] := ARRAY[-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                        1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00];
    b float8[] := ARRAY[-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                        6.680131188771972e+01, -1.328068155288572e+01];
    c float8[] := ARRAY[-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                        -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00];
    d float8[] := ARRAY[7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                        3.754408661907416e+00];
    q float8;
    r float8;
BEGIN
    IF p <= 0 OR p >= 1 THEN
        RAISE EXCEPTION 'probability must be between 0 and 1, got %', p;
    ELSIF p < 0.02425 THEN
        q := sqrt(-2 * ln(p));
        RETURN (((((c[1] * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) * q + c[6])
             / ((((d[1] * q + d[2]) * q + d[3]) * q + d[4]) * q + 1);
    ELSIF p > 1 - 0.02425 THEN
        RETURN -@extschema@._kde_normal_quantile(1 - p);
    END IF;
    q := p - 0.5;
    r := q * q;
    RETURN (((((a[1] * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * r + a[6]) * q
         / (((((b[1] * r + b[2]) * r + b[3]) * r + b[4]) * r + b[5]) * r + 1);
END
$$;
COMMENT ON FUNCTION _kde_normal_quantile(float8) IS 'pg_kde internal: inverse of the standard normal CDF';

-- z of a two-sided interval at the given confidence, which must lie strictly between 0 and 1:
-- -quantile((1 - c) / 2), not quantile((1 + c) / 2): 1 + c rounds to 2 for c near 1.
CREATE FUNCTION _kde_z(confidence float8) RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF confidence IS NULL OR NOT (confidence > 0 AND confidence < 1) THEN
        RAISE EXCEPTION 'confidence must be between 0 and 1 (exclusive), got %', confidence
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN -@extschema@._kde_normal_quantile((1 - confidence) / 2);
END
$$;
COMMENT ON FUNCTION _kde_z(float8) IS 'pg_kde internal: z of a two-sided interval at a confidence';

-- The whole counts a point's interval holds where its lattice slot's cells expect lambda rows (0 <= lambda < 10)
-- of its cut cell's rows, as half-rows about them: a value asked about because a row holds it has that row and
-- each of the cell's rows - 1 others there with chance lambda / rows, 1 + Binomial(rows - 1, lambda / rows)
-- rows (0.24.0; 1 + Poisson(lambda) in 0.19.0-0.23.0); its likeliest counts are taken from the law's mode
-- outward, the likelier neighbour first, until their chance reaches the confidence, and the last one is left
-- out again where the chance without it is nearer the confidence (never the mode). query.held_interval, step
-- for step; docs/math.md §7, "Points".
CREATE FUNCTION _kde_held_interval(lambda float8, rows float8, confidence float8, OUT low float8, OUT high float8)
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p float8[];  -- p[j + 1] = P(Binomial(others, share) = j), up to the mode, then as the counts are taken
    others float8;  -- the cell's other rows
    share float8;
    odds float8;
    more boolean;  -- whether the law goes on past the last count computed
    a integer;
    b integer;
    chance float8;
    kept_a integer;
    kept_b integer;
    kept float8;
BEGIN
    lambda := greatest(lambda, 0);
    others := greatest(rows - 1, 0);
    share := CASE WHEN rows > 0 THEN least(lambda / rows, 1) ELSE 0 END;
    IF share >= 1 OR others = 0 THEN  -- (every other row there, or none: one count)
        low := others * share + 0.5;
        high := others * share + 1.5;
        RETURN;
    END IF;
    odds := share / (1 - share);
    a := least(floor(lambda), floor(others))::integer;  -- the mode, at most others
    b := a;
    p := ARRAY[exp(others * ln(1 - share))];
    WHILE cardinality(p) <= a LOOP
        p := p || p[cardinality(p)] * (others - (cardinality(p) - 1)) / cardinality(p) * odds;
    END LOOP;
    chance := p[a + 1];
    LOOP
        -- counts j = 0 .. min(64, others) (query.HELD_LAW_COUNTS), none past a chance below 1e-150
        -- (HELD_LAW_FLOOR), nor where lambda is below it: float8's product raises an error where it underflows
        more := cardinality(p) <= least(64, others) AND p[cardinality(p)] >= 1e-150 AND lambda >= 1e-150;
        EXIT WHEN NOT (chance < confidence AND (a > 0 OR b + 1 < cardinality(p) OR more));
        kept_a := a;
        kept_b := b;
        kept := chance;
        IF b + 1 = cardinality(p) AND more THEN
            p := p || p[cardinality(p)] * (others - (cardinality(p) - 1)) / cardinality(p) * odds;
        END IF;
        IF b + 1 < cardinality(p) AND (a = 0 OR p[b + 2] > p[a]) THEN
            b := b + 1;
            chance := chance + p[b + 1];
        ELSE
            a := a - 1;
            chance := chance + p[a + 1];
        END IF;
    END LOOP;
    IF kept IS NOT NULL AND confidence - kept < chance - confidence THEN
        a := kept_a;
        b := kept_b;
    END IF;
    low := a + 0.5;
    high := b + 1.5;
END
$$;
COMMENT ON FUNCTION _kde_held_interval(float8, float8, float8) IS 'pg_kde internal: the whole counts of a point''s interval';

-- An interval at the given confidence: estimate ± z sqrt(variance), never outside the hard bounds (which
-- always hold the answer of the table as of the build); a point query's count (lo = hi) has half a row more
-- each side, for the value's own rows (query.COUNT_CONTINUITY, 0.15.0; up to 0.14.0 every count's had), and
-- on a lattice, where it is not exact, the law of a value a row holds instead: 1 + Binomial(n - 1, lambda / n),
-- its slot's cells expecting lambda rows of its cut cell's n; below 10 its likeliest whole counts
-- (_kde_held_interval, 0.19.0), from there z standard deviations about its mean (0.24.0). Widened to hold
-- the estimate. docs/math.md §7.
--
-- Rows on a bound's float8 that may lie on either side of the bound (0.30.0, query.loose_bounds; docs/math.md §7,
-- "Values float8 cannot tell apart"): on a column whose float8s may stand for more than one value of its type
-- (kde_synopsis.coarse; NULL, not known, as true) every finite bound, and a bound given with more digits than
-- float8 holds (lo_loose, hi_loose: the text forms' numeric bounds). The hard bounds are then the widest of the
-- ranges with each such bound also moved to the next float8 inwards (its float8's rows left out). lo_fuzz,
-- hi_fuzz (seconds): a bound the column's values may lie on either side of within that much (a timestamptz bound
-- of a date or timestamp column by a change of the UTC offset, _kde_time_fuzz): the ranges with it moved that
-- much each way too (inwards, past that: a row that far may still be on the other side).
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

-- A sum's hard bound moved out by what rows' values may lie from their float8s on a coarse column (0.30.0).
CREATE FUNCTION _kde_coarse_widen(x float8, rows float8, biggest float8, up boolean) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_coarse_widen' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_coarse_widen(float8, float8, float8, boolean) IS 'pg_kde internal: a coarse column''s sum bound, widened';

-- A numeric bound's float8, +-Infinity or +-0 beyond float8's range (_kde_text_value).
CREATE FUNCTION _kde_numeric_bound(numeric) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_numeric_bound' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_numeric_bound(numeric) IS 'pg_kde internal: a numeric bound as a synopsis reads it';

-- x + y as IEEE 754 adds them (an overflow is infinite, not an error).
CREATE FUNCTION _kde_ieee_add(x float8, y float8) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_ieee_add' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_ieee_add(float8, float8) IS 'pg_kde internal: a float8 sum, infinite where it overflows';

-- The float8 next to x, above it where up, below it otherwise (C's nextafter).
CREATE FUNCTION _kde_next_float8(x float8, up boolean) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_next_float8' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_next_float8(float8, boolean) IS 'pg_kde internal: the next float8';

CREATE FUNCTION approx_count(tbl regclass, col text, lo float8, hi float8) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT (@extschema@._kde_range(@extschema@._kde_synopsis_for(tbl, ARRAY[col]), lo, hi, 0)).estimate $$;
COMMENT ON FUNCTION approx_count(regclass, text, float8, float8) IS
    'Approximate count of rows with lo <= col <= hi (NULL or infinite bounds are open) from the synopsis';

CREATE FUNCTION approx_sum(tbl regclass, col text, lo float8, hi float8) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT (@extschema@._kde_range(@extschema@._kde_synopsis_for(tbl, ARRAY[col]), lo, hi, 1)).estimate $$;
COMMENT ON FUNCTION approx_sum(regclass, text, float8, float8) IS
    'Approximate sum of col over rows with lo <= col <= hi (NULL or infinite bounds are open) from the synopsis';

CREATE FUNCTION approx_avg(tbl regclass, col text, lo float8, hi float8) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN c > 0 THEN (@extschema@._kde_range(s, lo, hi, 1)).estimate / c END
    FROM (SELECT @extschema@._kde_synopsis_for(tbl, ARRAY[col]) AS s) q,
         LATERAL (SELECT (@extschema@._kde_range(q.s, lo, hi, 0)).estimate AS c) n
$$;
COMMENT ON FUNCTION approx_avg(regclass, text, float8, float8) IS
    'Approximate average of col over rows with lo <= col <= hi (NULL when the range holds no rows)';

CREATE FUNCTION approx_count_ci(tbl regclass, col text, lo float8, hi float8, confidence float8 DEFAULT 0.95,
                                OUT estimate float8, OUT low float8, OUT high float8)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM @extschema@._kde_interval(tbl, col, lo, hi, confidence, 0) $$;
COMMENT ON FUNCTION approx_count_ci(regclass, text, float8, float8, float8) IS
    'approx_count with an interval: heavy values and whole cells are exact; only the cells the range cuts are uncertain (estimate ± z·sd at the given confidence, half a row more for a point query lo = hi, or on a lattice where its value is expected to hold fewer than 10 rows the likeliest whole counts of a value a row holds; within hard bounds that always hold the answer as of the build)';

CREATE FUNCTION approx_sum_ci(tbl regclass, col text, lo float8, hi float8, confidence float8 DEFAULT 0.95,
                              OUT estimate float8, OUT low float8, OUT high float8)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT * FROM @extschema@._kde_interval(tbl, col, lo, hi, confidence, 1) $$;
COMMENT ON FUNCTION approx_sum_ci(regclass, text, float8, float8, float8) IS
    'approx_sum with an interval, as approx_count_ci';

-- ---------------------------------------------------------------------------------------------- time types
-- A synopsis of a date, timestamp or timestamptz column holds epoch seconds: a timestamptz's own, and a date's
-- or timestamp's wall-clock time read as UTC (extract(epoch from ...)). A bound of a time type becomes the
-- same number: for timestamptz columns its epoch, for date and timestamp columns its wall-clock time in the
-- session's TimeZone, as comparing the column with it in SQL would (a date or timestamp argument reaches
-- the timestamptz functions in the session's TimeZone and comes back unchanged). Text bounds (untyped
-- literals) are read as the column's own type; NULL stays an open bound.
-- (The column's type now: the synopsis is served only while it is the type it was built on.)
CREATE FUNCTION _kde_coltype(tbl regclass, col text) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
    WHERE a.attrelid = tbl AND a.attname = col AND a.attnum > 0 AND NOT a.attisdropped
$$;
COMMENT ON FUNCTION _kde_coltype(regclass, text) IS 'pg_kde internal: the type of a column';

CREATE FUNCTION _kde_time_bounds(tbl regclass, col text, lo timestamptz, hi timestamptz, OUT a float8, OUT b float8)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t text := @extschema@._kde_coltype(tbl, col);
BEGIN
    IF t IS NULL OR t LIKE 'timestamp%with time zone' THEN  -- (no synopsis: the query itself says so)
        a := extract(epoch FROM lo)::float8;
        b := extract(epoch FROM hi)::float8;
    ELSIF t = 'date' OR t LIKE 'timestamp%' THEN
        a := extract(epoch FROM lo::timestamp)::float8;
        b := extract(epoch FROM hi::timestamp)::float8;
    ELSE
        RAISE EXCEPTION 'pg_kde: column % of % has type %; give bounds of that type, not timestamps', col, tbl, t
            USING ERRCODE = 'datatype_mismatch';
    END IF;
END
$$;
COMMENT ON FUNCTION _kde_time_bounds(regclass, text, timestamptz, timestamptz) IS 'pg_kde internal: time bounds as the synopsis reads them';

-- A column's type, a domain's base type's (NULL: no such column). (PL/pgSQL, as the others the text forms call
-- on each read: their plans are kept for the session, where a SQL function's are made again on each call.)
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

-- Where a column's float8s may stand for more than one value of its type (0.30.0, docs/math.md §7, "Values
-- float8 cannot tell apart"; kde_synopsis.coarse): digits, a numeric column whose values' significant digits
-- are counted row by row (_kde_numeric_coarse), but for numeric(p, s) with p <= 15 and s <= 307, whose values
-- float8 tells apart (a larger scale holds subnormals: numeric(1, 324)'s 3e-324 and 6e-324 share a float8);
-- magnitude, the magnitude from which it may (a bigint's 2^53; a timestamp's 2^33 epoch seconds, about the
-- year 2242, where microseconds apart may share a float8); neither for the other types, whose values are their
-- float8s (smallint, integer, real, double precision, date). The refresh's scan, the tracking triggers and the
-- update to 0.30.0 read it.
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

-- A text bound read as a column of (base) type t reads it, as the synopsis holds it: a time's epoch seconds, a
-- real's float8 (0.30.0: '0.1' is the real 0.100000001490116, which SQL compares a real column with; read as a
-- float8 before, a red team's approx_count_ci of a real column's rows of 0.1 read [0, 0] for 1,000), other
-- numbers' float8.
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

CREATE FUNCTION _kde_text_bound(tbl regclass, col text, x text) RETURNS float8
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ BEGIN RETURN @extschema@._kde_text_value(@extschema@._kde_base_type(tbl, col), x); END $$;
COMMENT ON FUNCTION _kde_text_bound(regclass, text, text) IS 'pg_kde internal: a text bound read as the column''s type';

-- Whether a time bound's epoch seconds may have lost microseconds to float8 (0.30.0): from 2^33 seconds (the
-- year 2242, and before 1697), where float8's spacing passes a microsecond. A date column's rows (midnights,
-- exact) may then share the bound's float8: a red team's count of a date column's day 2600-01-01 up to
-- 23:59:59.999999 read [1010, 1010] for its 10 rows, the bound rounded to the next midnight.
CREATE FUNCTION _kde_time_loose(x float8) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT coalesce(abs(x) >= 8589934592, false) $$;
COMMENT ON FUNCTION _kde_time_loose(float8) IS 'pg_kde internal: whether a time bound''s float8 may have lost microseconds';

-- How far (in seconds) a date or timestamp column's values may lie on either side of a timestamptz bound
-- (0.30.0): SQL compares them as the column's values cast to timestamptz in the session's TimeZone, the
-- synopsis as the bound's wall-clock time there, and the two disagree only about a change of the UTC offset: a
-- wall-clock time a spring-forward skips is read an hour on, one a fall-back repeats as either (a red team: in
-- America/Sao_Paulo, a date column's rows of 2018-11-04, whose midnight is 01:00, read [0, 0] from
-- '2018-11-04 01:00-02' up to itself, for 1,010 rows). Where the offset 26 hours before and after the bound
-- differ, their difference; else 0.
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

-- Whether a text bound read as type t (_kde_text_value) holds more than its float8 keeps (0.30.0): a numeric's
-- of more than 15 significant digits, whose float8 may be that of rows on either side of it; a timestamp's
-- from 2^33 epoch seconds (_kde_time_loose). _kde_interval's lo_loose and hi_loose. Other types' text bounds
-- are their float8s, or those of a column whose float8s tell its values apart (or whose synopsis counts every
-- bound so: kde_synopsis.coarse).
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

-- Timestamp bounds (0.13.0): passed to the timestamptz forms, a timestamp bound was cast to timestamptz in the
-- session's TimeZone and back, which moves a wall-clock time in a daylight-saving gap by an hour. Here they are
-- read as SQL compares them: a date or timestamp column's wall-clock time as it is, a timestamptz column's
-- bound cast to timestamptz (in the session's TimeZone).
CREATE FUNCTION _kde_time_bounds(tbl regclass, col text, lo timestamp, hi timestamp, OUT a float8, OUT b float8)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t text := @extschema@._kde_coltype(tbl, col);
BEGIN
    IF t = 'date' OR (t LIKE 'timestamp%' AND t NOT LIKE '%with time zone') THEN
        a := extract(epoch FROM lo)::float8;
        b := extract(epoch FROM hi)::float8;
    ELSE  -- a timestamptz column (or another type, refused there)
        SELECT q.a, q.b INTO a, b FROM @extschema@._kde_time_bounds(tbl, col, lo::timestamptz, hi::timestamptz) q;
    END IF;
END
$$;
COMMENT ON FUNCTION _kde_time_bounds(regclass, text, timestamp, timestamp) IS 'pg_kde internal: timestamp bounds as the synopsis reads them';

-- Date bounds (0.29.0) as their midnight's wall-clock time, the timestamp form's: given to the timestamptz
-- forms, which SQL picks for a date otherwise, a date was cast to timestamptz in the session's TimeZone, and
-- where daylight-saving time starts at midnight (America/Sao_Paulo until 2019) that midnight is 01:00: a red
-- team's approx_count_ci of a date column over one such day read [0, 0] for 1,000 rows. A timestamptz column
-- reads a date bound as SQL compares them, cast in the session's TimeZone.
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

CREATE FUNCTION approx_count(tbl regclass, col text, lo timestamptz, hi timestamptz) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.approx_count(tbl, col, t.a, t.b) FROM @extschema@._kde_time_bounds(tbl, col, lo, hi) t $$;
COMMENT ON FUNCTION approx_count(regclass, text, timestamptz, timestamptz) IS
    'Approximate count of rows with lo <= col <= hi for a date, timestamp or timestamptz column (NULL bounds are open)';

CREATE FUNCTION approx_count(tbl regclass, col text, lo timestamp, hi timestamp) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.approx_count(tbl, col, t.a, t.b) FROM @extschema@._kde_time_bounds(tbl, col, lo, hi) t $$;
COMMENT ON FUNCTION approx_count(regclass, text, timestamp, timestamp) IS
    'Approximate count of rows with lo <= col <= hi for a date, timestamp or timestamptz column (NULL bounds are open), timestamp bounds';

CREATE FUNCTION approx_count(tbl regclass, col text, lo text, hi text) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.approx_count(tbl, col, @extschema@._kde_text_value(b.t, lo), @extschema@._kde_text_value(b.t, hi))
      FROM (SELECT @extschema@._kde_base_type(tbl, col) AS t) b $$;
COMMENT ON FUNCTION approx_count(regclass, text, text, text) IS
    'approx_count with bounds given as text (untyped literals), read as the column''s own type';

CREATE FUNCTION approx_count_ci(tbl regclass, col text, lo timestamptz, hi timestamptz, confidence float8 DEFAULT 0.95,
                                OUT estimate float8, OUT low float8, OUT high float8)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT i.* FROM @extschema@._kde_time_bounds(tbl, col, lo, hi) t,
                     @extschema@._kde_interval(tbl, col, t.a, t.b, confidence, 0, @extschema@._kde_time_loose(t.a),
                                               @extschema@._kde_time_loose(t.b), @extschema@._kde_time_fuzz(tbl, col, lo),
                                               @extschema@._kde_time_fuzz(tbl, col, hi)) i $$;
COMMENT ON FUNCTION approx_count_ci(regclass, text, timestamptz, timestamptz, float8) IS
    'approx_count_ci for a date, timestamp or timestamptz column';

CREATE FUNCTION approx_count_ci(tbl regclass, col text, lo timestamp, hi timestamp, confidence float8 DEFAULT 0.95,
                                OUT estimate float8, OUT low float8, OUT high float8)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT i.* FROM @extschema@._kde_time_bounds(tbl, col, lo, hi) t,
                     @extschema@._kde_interval(tbl, col, t.a, t.b, confidence, 0, @extschema@._kde_time_loose(t.a),
                                               @extschema@._kde_time_loose(t.b)) i $$;
COMMENT ON FUNCTION approx_count_ci(regclass, text, timestamp, timestamp, float8) IS
    'approx_count_ci for a date, timestamp or timestamptz column, timestamp bounds';

-- Bounds as text (untyped literals, or untyped NULLs: open), read as the column's own type, as approx_count's
-- text form (0.28.0: approx_count_ci('t', 'v', NULL, NULL) and untyped literal bounds were "function ... is
-- not unique" between the float8 and time forms).
CREATE FUNCTION approx_count_ci(tbl regclass, col text, lo text, hi text, confidence float8 DEFAULT 0.95,
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

-- The average of a time column over a time range, as a timestamptz (a date or timestamp column's average is
-- its wall-clock time in the session's TimeZone: cast it back to the column's type).
CREATE FUNCTION approx_avg(tbl regclass, col text, lo timestamptz, hi timestamptz) RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN t LIKE 'timestamp%with time zone' THEN to_timestamp(a)
                ELSE (to_timestamp(a) AT TIME ZONE 'UTC')::timestamptz END
    FROM (SELECT @extschema@.approx_avg(tbl, col, b.a, b.b) AS a, @extschema@._kde_coltype(tbl, col) AS t
          FROM @extschema@._kde_time_bounds(tbl, col, lo, hi) b) q
$$;
COMMENT ON FUNCTION approx_avg(regclass, text, timestamptz, timestamptz) IS
    'Approximate average of a date, timestamp or timestamptz column over rows with lo <= col <= hi, as a timestamptz';

CREATE FUNCTION approx_avg(tbl regclass, col text, lo timestamp, hi timestamp) RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN t LIKE 'timestamp%with time zone' THEN to_timestamp(a)
                ELSE (to_timestamp(a) AT TIME ZONE 'UTC')::timestamptz END
    FROM (SELECT @extschema@.approx_avg(tbl, col, b.a, b.b) AS a, @extschema@._kde_coltype(tbl, col) AS t
          FROM @extschema@._kde_time_bounds(tbl, col, lo, hi) b) q
$$;
COMMENT ON FUNCTION approx_avg(regclass, text, timestamp, timestamp) IS
    'Approximate average of a date, timestamp or timestamptz column over rows with lo <= col <= hi, as a timestamptz (timestamp bounds)';

-- 2-D: the synopsis of a pair in either order (swapped tells which), checked as _kde_synopsis_for.
CREATE FUNCTION _kde_synopsis2_for(tbl regclass, col1 text, col2 text, OUT s kde_synopsis_2d, OUT swapped boolean)
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

-- A summed-area table (m1 x m2, row-major, starting at offset) interpolated bilinearly at fractional grid
-- coordinates: exact at grid points, and exact for a density uniform within each cell.
CREATE FUNCTION _kde_sat_at(sat float8[], m1 integer, m2 integer, offs integer, p1 float8, p2 float8) RETURNS float8
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    i integer := least(floor(p1)::integer, m1 - 2);
    j integer := least(floor(p2)::integer, m2 - 2);
    f float8 := p1 - i;
    g float8 := p2 - j;
    base integer := offs + i * m2 + j + 1;
BEGIN
    RETURN (1 - f) * (1 - g) * sat[base] + (1 - f) * g * sat[base + 1]
         + f * (1 - g) * sat[base + m2] + f * g * sat[base + m2 + 1];
END
$$;
COMMENT ON FUNCTION _kde_sat_at(float8[], integer, integer, integer, float8, float8) IS 'pg_kde internal: summed-area lookup';

-- A box of a pair's exact frequency table (pair_pack): its rows counted, or their values of column 1 or 2
-- summed (extension/atoms.c; query.pairs_box).
CREATE FUNCTION _kde_pair_box(pack bytea, lattice1 float8[], lattice2 float8[], a1 float8, b1 float8, a2 float8,
                              b2 float8, moment integer) RETURNS float8
AS 'MODULE_PATHNAME', 'kde_pair_box' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_pair_box(bytea, float8[], float8[], float8, float8, float8, float8, integer) IS
    'pg_kde internal: a box of a pair''s exact frequency table';

-- What a box [a1, b1] x [a2, b2] holds: moment 0 the row count, moment k (1 or 2) the sum of column k.
-- A pair stored as its exact frequency table answers from it, exactly. Otherwise counts: whole cells inside
-- the box exactly, the strip of cells the box cuts shaped by the KDE; sums: the exact summed-area table of
-- values, uniform within cells.
CREATE FUNCTION _kde_box(s kde_synopsis_2d, a1 float8, b1 float8, a2 float8, b2 float8, moment integer) RETURNS float8
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    m1 integer := s.grid_size[1];
    m2 integer := s.grid_size[2];
    counts float8[] := s.sat_count;
    kde float8[] := s.kde_sat;
    sums float8[];
    pa1 float8; pb1 float8; pa2 float8; pb2 float8;
    ia1 integer; ib1 integer; ia2 integer; ib2 integer;
    inner_exact float8 := 0;
    inner_kde float8 := 0;
    box_kde float8;
    outer_exact float8;
    offs integer;
    base integer;
BEGIN
    IF octet_length(s.pair_pack) > 0 THEN
        RETURN @extschema@._kde_pair_box(s.pair_pack, s.lattice1, s.lattice2, a1, b1, a2, b2, moment);
    END IF;
    IF s.integer_valued[1] THEN a1 := ceil(a1) - 0.5; b1 := floor(b1) + 0.5; END IF;
    IF s.integer_valued[2] THEN a2 := ceil(a2) - 0.5; b2 := floor(b2) + 0.5; END IF;
    IF a1 > b1 OR a2 > b2 THEN
        RETURN 0;
    END IF;
    IF cardinality(s.lattice1) > 0 THEN
        a1 := @extschema@._kde_lattice_bound(s.lattice1, s.grid1, a1, false);
        b1 := @extschema@._kde_lattice_bound(s.lattice1, s.grid1, b1, true);
    END IF;
    IF cardinality(s.lattice2) > 0 THEN
        a2 := @extschema@._kde_lattice_bound(s.lattice2, s.grid2, a2, false);
        b2 := @extschema@._kde_lattice_bound(s.lattice2, s.grid2, b2, true);
    END IF;
    -- (a point [v, v] on a continuous axis holds v's rows where v has a cell of its own: _kde_upper_pos)
    IF a1 > b1 OR a2 > b2 OR (cardinality(s.lattice1) > 0 AND a1 = b1) OR (cardinality(s.lattice2) > 0 AND a2 = b2) THEN
        RETURN 0;
    END IF;
    pa1 := @extschema@._kde_grid_pos(s.grid1, a1);
    pb1 := @extschema@._kde_upper_pos(s.grid1, b1);
    pa2 := @extschema@._kde_grid_pos(s.grid2, a2);
    pb2 := @extschema@._kde_upper_pos(s.grid2, b2);
    IF pa1 >= pb1 OR pa2 >= pb2 THEN
        RETURN 0;
    END IF;
    IF moment > 0 THEN
        sums := s.sat_sum;
        offs := (moment - 1) * m1 * m2;
        -- The four reads take 16 running sums; each below 2^1021 in magnitude, they and the box stay finite.
        -- Beyond (a column's sums near or past float8's range; stored as +-inf past it) the box could overflow or
        -- read inf - inf: a clear error (0.28.0; before, NaN, or "value out of range: overflow").
        FOR c IN 0..3 LOOP
            base := offs + least(floor(CASE WHEN c < 2 THEN pa1 ELSE pb1 END)::integer, m1 - 2) * m2
                  + least(floor(CASE WHEN c % 2 = 0 THEN pa2 ELSE pb2 END)::integer, m2 - 2) + 1;
            IF NOT (abs(sums[base]) < 2.247116418577895e307 AND abs(sums[base + 1]) < 2.247116418577895e307
                    AND abs(sums[base + m2]) < 2.247116418577895e307 AND abs(sums[base + m2 + 1]) < 2.247116418577895e307) THEN
                RAISE EXCEPTION 'pg_kde: the 2-D synopsis of %, % holds running sums of % near or past float8''s largest (2^1021 or more) where this box reads them',
                    s.cols[1], s.cols[2], s.cols[moment]
                    USING ERRCODE = 'numeric_value_out_of_range',
                          HINT = format('Sum %I from its 1-D synopsis (approx_sum), or over a synopsis of 3 or more columns.', s.cols[moment]);
            END IF;
        END LOOP;
        RETURN @extschema@._kde_sat_at(sums, m1, m2, offs, pb1, pb2) - @extschema@._kde_sat_at(sums, m1, m2, offs, pa1, pb2)
             - @extschema@._kde_sat_at(sums, m1, m2, offs, pb1, pa2) + @extschema@._kde_sat_at(sums, m1, m2, offs, pa1, pa2);
    END IF;
    box_kde := @extschema@._kde_sat_at(kde, m1, m2, 0, pb1, pb2) - @extschema@._kde_sat_at(kde, m1, m2, 0, pa1, pb2)
             - @extschema@._kde_sat_at(kde, m1, m2, 0, pb1, pa2) + @extschema@._kde_sat_at(kde, m1, m2, 0, pa1, pa2);
    ia1 := ceil(pa1)::integer; ib1 := floor(pb1)::integer; ia2 := ceil(pa2)::integer; ib2 := floor(pb2)::integer;
    IF ia1 < ib1 AND ia2 < ib2 THEN
        inner_exact := counts[ib1 * m2 + ib2 + 1] - counts[ia1 * m2 + ib2 + 1] - counts[ib1 * m2 + ia2 + 1]
                     + counts[ia1 * m2 + ia2 + 1];
        inner_kde := kde[ib1 * m2 + ib2 + 1] - kde[ia1 * m2 + ib2 + 1] - kde[ib1 * m2 + ia2 + 1] + kde[ia1 * m2 + ia2 + 1];
    END IF;
    ia1 := floor(pa1)::integer; ib1 := ceil(pb1)::integer; ia2 := floor(pa2)::integer; ib2 := ceil(pb2)::integer;
    outer_exact := counts[ib1 * m2 + ib2 + 1] - counts[ia1 * m2 + ib2 + 1] - counts[ib1 * m2 + ia2 + 1]
                 + counts[ia1 * m2 + ia2 + 1];
    RETURN least(greatest(inner_exact + (box_kde - inner_kde), inner_exact), outer_exact);
END
$$;
COMMENT ON FUNCTION _kde_box(kde_synopsis_2d, float8, float8, float8, float8, integer) IS 'pg_kde internal: a box query';

CREATE FUNCTION approx_count(tbl regclass, col1 text, lo1 float8, hi1 float8, col2 text, lo2 float8, hi2 float8)
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

CREATE FUNCTION approx_sum(tbl regclass, sum_col text, pred_col text, lo float8, hi float8) RETURNS float8
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

CREATE FUNCTION approx_avg(tbl regclass, avg_col text, pred_col text, lo float8, hi float8) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN c > 0 THEN s / c END
    FROM (SELECT @extschema@.approx_sum(tbl, avg_col, pred_col, lo, hi) AS s,
                 @extschema@.approx_count(tbl, pred_col, lo, hi, avg_col, NULL, NULL) AS c) q
$$;
COMMENT ON FUNCTION approx_avg(regclass, text, text, float8, float8) IS
    'Approximate average of avg_col over rows with lo <= pred_col <= hi (NULL when none), from the pair''s 2-D synopsis';

-- Time axes (see the 1-D functions' time types): timestamptz bounds on a date, timestamp or timestamptz
-- column, text bounds (untyped literals) read as each column's own type.
CREATE FUNCTION approx_count(tbl regclass, col1 text, lo1 timestamptz, hi1 timestamptz, col2 text, lo2 float8, hi2 float8)
RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.approx_count(tbl, col1, t.a, t.b, col2, lo2, hi2) FROM @extschema@._kde_time_bounds(tbl, col1, lo1, hi1) t $$;
COMMENT ON FUNCTION approx_count(regclass, text, timestamptz, timestamptz, text, float8, float8) IS
    'approx_count of a box whose first column is a date, timestamp or timestamptz column';

CREATE FUNCTION approx_count(tbl regclass, col1 text, lo1 timestamp, hi1 timestamp, col2 text, lo2 float8, hi2 float8)
RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.approx_count(tbl, col1, t.a, t.b, col2, lo2, hi2) FROM @extschema@._kde_time_bounds(tbl, col1, lo1, hi1) t $$;
COMMENT ON FUNCTION approx_count(regclass, text, timestamp, timestamp, text, float8, float8) IS
    'approx_count of a box whose first column is a date, timestamp or timestamptz column, timestamp bounds';

CREATE FUNCTION approx_count(tbl regclass, col1 text, lo1 date, hi1 date, col2 text, lo2 float8, hi2 float8)
RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.approx_count(tbl, col1, t.a, t.b, col2, lo2, hi2) FROM @extschema@._kde_time_bounds(tbl, col1, lo1, hi1) t $$;
COMMENT ON FUNCTION approx_count(regclass, text, date, date, text, float8, float8) IS
    'approx_count of a box whose first column is a date, timestamp or timestamptz column, date bounds (0.29.0)';

CREATE FUNCTION approx_count(tbl regclass, col1 text, lo1 text, hi1 text, col2 text, lo2 text, hi2 text) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@.approx_count(tbl, col1, @extschema@._kde_text_bound(tbl, col1, lo1),
                                    @extschema@._kde_text_bound(tbl, col1, hi1), col2,
                                    @extschema@._kde_text_bound(tbl, col2, lo2), @extschema@._kde_text_bound(tbl, col2, hi2))
$$;
COMMENT ON FUNCTION approx_count(regclass, text, text, text, text, text, text) IS
    'approx_count of a box with bounds given as text (untyped literals), read as each column''s own type';

CREATE FUNCTION approx_sum(tbl regclass, sum_col text, pred_col text, lo timestamptz, hi timestamptz) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.approx_sum(tbl, sum_col, pred_col, t.a, t.b) FROM @extschema@._kde_time_bounds(tbl, pred_col, lo, hi) t $$;
COMMENT ON FUNCTION approx_sum(regclass, text, text, timestamptz, timestamptz) IS
    'approx_sum of sum_col over a time range of pred_col (a date, timestamp or timestamptz column)';

CREATE FUNCTION approx_sum(tbl regclass, sum_col text, pred_col text, lo timestamp, hi timestamp) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.approx_sum(tbl, sum_col, pred_col, t.a, t.b) FROM @extschema@._kde_time_bounds(tbl, pred_col, lo, hi) t $$;
COMMENT ON FUNCTION approx_sum(regclass, text, text, timestamp, timestamp) IS
    'approx_sum of sum_col over a time range of pred_col (a date, timestamp or timestamptz column), timestamp bounds';

CREATE FUNCTION approx_sum(tbl regclass, sum_col text, pred_col text, lo date, hi date) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.approx_sum(tbl, sum_col, pred_col, t.a, t.b) FROM @extschema@._kde_time_bounds(tbl, pred_col, lo, hi) t $$;
COMMENT ON FUNCTION approx_sum(regclass, text, text, date, date) IS
    'approx_sum of sum_col over a time range of pred_col (a date, timestamp or timestamptz column), date bounds (0.29.0)';

CREATE FUNCTION approx_sum(tbl regclass, sum_col text, pred_col text, lo text, hi text) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@.approx_sum(tbl, sum_col, pred_col, @extschema@._kde_text_bound(tbl, pred_col, lo),
                                  @extschema@._kde_text_bound(tbl, pred_col, hi))
$$;
COMMENT ON FUNCTION approx_sum(regclass, text, text, text, text) IS
    'approx_sum with bounds given as text (untyped literals), read as pred_col''s own type';

CREATE FUNCTION approx_avg(tbl regclass, avg_col text, pred_col text, lo timestamptz, hi timestamptz) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.approx_avg(tbl, avg_col, pred_col, t.a, t.b) FROM @extschema@._kde_time_bounds(tbl, pred_col, lo, hi) t $$;
COMMENT ON FUNCTION approx_avg(regclass, text, text, timestamptz, timestamptz) IS
    'approx_avg of avg_col over a time range of pred_col (a date, timestamp or timestamptz column)';

CREATE FUNCTION approx_avg(tbl regclass, avg_col text, pred_col text, lo timestamp, hi timestamp) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.approx_avg(tbl, avg_col, pred_col, t.a, t.b) FROM @extschema@._kde_time_bounds(tbl, pred_col, lo, hi) t $$;
COMMENT ON FUNCTION approx_avg(regclass, text, text, timestamp, timestamp) IS
    'approx_avg of avg_col over a time range of pred_col (a date, timestamp or timestamptz column), timestamp bounds';

CREATE FUNCTION approx_avg(tbl regclass, avg_col text, pred_col text, lo date, hi date) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT @extschema@.approx_avg(tbl, avg_col, pred_col, t.a, t.b) FROM @extschema@._kde_time_bounds(tbl, pred_col, lo, hi) t $$;
COMMENT ON FUNCTION approx_avg(regclass, text, text, date, date) IS
    'approx_avg of avg_col over a time range of pred_col (a date, timestamp or timestamptz column), date bounds (0.29.0)';

CREATE FUNCTION approx_avg(tbl regclass, avg_col text, pred_col text, lo text, hi text) RETURNS float8
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@.approx_avg(tbl, avg_col, pred_col, @extschema@._kde_text_bound(tbl, pred_col, lo),
                                  @extschema@._kde_text_bound(tbl, pred_col, hi))
$$;
COMMENT ON FUNCTION approx_avg(regclass, text, text, text, text) IS
    'approx_avg with bounds given as text (untyped literals), read as pred_col''s own type';

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

-- Are tbl's four tracking triggers in place: kde_track's names, on _kde_track_apply, enabled (as origin or
-- always), AFTER ... FOR EACH STATEMENT (tgtype: the event's bit alone) with their transition tables, for
-- every row (no WHEN condition, no UPDATE OF columns, no arguments); and is tbl still outside any inheritance
-- tree (a write through a parent it joined later does not fire them). A red team on 0.29.0's first build
-- replaced the insert trigger by one WHEN a setting was off, and attached a tracked table to a parent.
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

-- A tracked table whose triggers are no longer all in place and enabled (disabled, dropped, renamed) is no
-- longer tracked, and its synopses are stale with that reason: a write the triggers missed may be in the table
-- (kde_untrack takes the table out of kde_tracked first, so that stopping on purpose leaves them fresh). Run
-- by the event triggers and the trigger function, as the catalog's owner.
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

CREATE EVENT TRIGGER kde_sql_drop ON sql_drop EXECUTE FUNCTION _kde_on_sql_drop();
CREATE EVENT TRIGGER kde_ddl_end ON ddl_command_end
    WHEN TAG IN ('ALTER TABLE', 'ALTER VIEW', 'ALTER MATERIALIZED VIEW', 'ALTER FOREIGN TABLE', 'CREATE VIEW',
                 'CREATE TRIGGER', 'ALTER TRIGGER')
    EXECUTE FUNCTION _kde_on_ddl_end();

