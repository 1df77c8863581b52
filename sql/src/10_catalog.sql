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

-- An array readers can index from 1 with no NULL element (the shape checks below). In C (extension/catalog.c)
-- since 0.31.0: as a SQL function its body was parsed again at every call, a dozen times at every write of a
-- synopsis' row (a tenth of a millisecond of every tracked write's statement).
CREATE FUNCTION _kde_is_vector(a anyarray) RETURNS boolean
AS 'MODULE_PATHNAME', 'kde_is_vector' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
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
-- dump (built_relid differs from the relation's oid); NULL attnum where the column is gone. PL/pgSQL rather
-- than SQL (0.31.0): a SQL function with a SET clause is planned again at every call (each tracked write's
-- statement resolves each synopsis' column); PL/pgSQL keeps the plan for the session.
CREATE FUNCTION _kde_resolve(tbl regclass, cols text[], attnums int2[], built_relid oid)
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
