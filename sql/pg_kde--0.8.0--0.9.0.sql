-- pg_kde 0.8.0 -> 0.9.0: a 1-D synopsis keeps heavy values on its column's lattice packed (atom_pack:
-- lattice indices and counts in varints, extension/atoms.c), 2-5 bytes a value where the three float8
-- arrays took 24: a column of a few hundred values is an exact frequency table within 2 KB. The arrays
-- stay for heavy values off a lattice; synopses built by 0.8.0 answer as before (their packs are empty)
-- until their next refresh. _kde_atoms and _kde_atoms_pack read and write packs; the tracking triggers
-- and the kde_synopses view read heavy values through them. A heavy value on a 2-D continuous axis has a
-- cell of its own, which an upper bound on it takes whole (_kde_upper_pos, in _kde_box). Every function
-- that names the version is replaced.
\echo Use "ALTER EXTENSION pg_kde UPDATE TO '0.9.0'" to load this file. \quit

ALTER TABLE kde_synopsis ADD COLUMN atom_pack bytea NOT NULL DEFAULT '';
ALTER TABLE kde_synopsis ALTER COLUMN atom_pack SET STORAGE EXTERNAL;
ALTER TABLE kde_synopsis ADD CONSTRAINT kde_synopsis_pack_well_formed CHECK (
    octet_length(atom_pack) = 0 OR (cardinality(atom_values) = 0 AND step > 0));

-- budget: bytes the synopsis may take (its catalog rows, as pg_column_size counts them); NULL: 8192 for one
-- column, 65536 for a pair. grid_size (points per axis), when given, sets the grid instead.
CREATE OR REPLACE FUNCTION kde_refresh(tbl regclass, col text, method text DEFAULT 'auto', sample_size integer DEFAULT 50000,
                            grid_size integer DEFAULT NULL, backend text DEFAULT 'auto',
                            budget integer DEFAULT NULL) RETURNS jsonb
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@._kde_raise_if_error(
        @extschema@._kde_refresh(tbl::oid, ARRAY[col], method, sample_size, grid_size, backend, budget, '0.9.0'))
$$;
CREATE OR REPLACE FUNCTION kde_refresh(tbl regclass, cols text[], method text DEFAULT 'auto', sample_size integer DEFAULT 5000,
                            grid_size integer DEFAULT NULL, backend text DEFAULT 'auto',
                            budget integer DEFAULT NULL) RETURNS jsonb
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT @extschema@._kde_raise_if_error(
        @extschema@._kde_refresh(tbl::oid, cols, method, sample_size, grid_size, backend, budget, '0.9.0'))
$$;
CREATE OR REPLACE FUNCTION kde_bandwidth(tbl regclass, cols text[], method text DEFAULT 'auto', backend text DEFAULT 'auto',
                              sample_size integer DEFAULT 10000) RETURNS float8[]
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT ARRAY(SELECT jsonb_array_elements_text(@extschema@._kde_raise_if_error(
        @extschema@._kde_bandwidth(tbl::oid, cols, method, backend, sample_size, '0.9.0')) -> 'bandwidth')::float8)
$$;
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
-- The position of an upper bound (0.9.0): _kde_grid_pos, and past a heavy value's cell of its own on a 2-D
-- continuous axis ([v, next float): one ulp wide, or [0, smallest normal)) when x is at least v on its
-- start: x <= v holds the rows at v, which the half-open cell starting at v keeps.
-- (pg_kde.synopsis.query.upper_pos and maths.is_tie_cell, as written here)
CREATE OR REPLACE FUNCTION _kde_upper_pos(grid float8[], x float8) RETURNS float8
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
-- A payload row's heavy values as arrays: its own, or its atom_pack's (extension/atoms.c), which holds them
-- on the column's lattice where the arrays are empty. And the pack of heavy values (NULL where they do not
-- pack: off a lattice, counts that are not whole); the tracking triggers store their new counts so.
CREATE OR REPLACE FUNCTION _kde_atoms(s kde_synopsis, OUT atom_values float8[], OUT atom_cum_count float8[],
                           OUT atom_cum_sum float8[])
AS 'MODULE_PATHNAME', 'kde_atoms' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_atoms(kde_synopsis) IS 'pg_kde internal: a 1-D synopsis'' heavy values, unpacked';
CREATE OR REPLACE FUNCTION _kde_atoms_pack(atom_values float8[], atom_cum_count float8[], step float8) RETURNS bytea
AS 'MODULE_PATHNAME', 'kde_atoms_pack' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_atoms_pack(float8[], float8[], float8) IS 'pg_kde internal: heavy values on a lattice, packed';
CREATE OR REPLACE FUNCTION _kde_atom_count(pack bytea) RETURNS integer
AS 'MODULE_PATHNAME', 'kde_atom_count' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION _kde_atom_count(bytea) IS 'pg_kde internal: how many heavy values a pack holds (NULL: a malformed header)';
-- What a box [a1, b1] x [a2, b2] holds: moment 0 the row count, moment k (1 or 2) the sum of column k.
-- Counts: whole cells inside the box exactly, the strip of cells the box cuts shaped by the KDE; sums: the
-- exact summed-area table of values, uniform within cells.
CREATE OR REPLACE FUNCTION _kde_box(s kde_synopsis_2d, a1 float8, b1 float8, a2 float8, b2 float8, moment integer) RETURNS float8
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
BEGIN
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
        RETURN @extschema@._kde_sat_at(sums, m1, m2, (moment - 1) * m1 * m2, pb1, pb2)
             - @extschema@._kde_sat_at(sums, m1, m2, (moment - 1) * m1 * m2, pa1, pb2)
             - @extschema@._kde_sat_at(sums, m1, m2, (moment - 1) * m1 * m2, pb1, pa2)
             + @extschema@._kde_sat_at(sums, m1, m2, (moment - 1) * m1 * m2, pa1, pa2);
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
          AND t.tgname IN ('kde_track_insert', 'kde_track_update', 'kde_track_delete')
          AND t.tgnewtable IS NOT DISTINCT FROM (CASE WHEN TG_OP IN ('INSERT', 'UPDATE') THEN 'kde_new' END)
          AND t.tgoldtable IS NOT DISTINCT FROM (CASE WHEN TG_OP IN ('DELETE', 'UPDATE') THEN 'kde_old' END)) THEN
        RAISE EXCEPTION 'pg_kde: _kde_track_apply runs only as the triggers kde_track installs'
            USING ERRCODE = 'insufficient_privilege';
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
            density = delta.new_density, kde_rows = p.kde_rows + delta.kde_rows
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
CREATE OR REPLACE VIEW kde_synopses WITH (security_invoker = true) AS
SELECT k.relid,
       k.cols,
       k.method,
       k.n_rows,
       CASE WHEN octet_length(p1.atom_pack) > 0 THEN @extschema@._kde_atom_count(p1.atom_pack)
            ELSE coalesce(cardinality(p1.atom_values), 0) END AS heavy_values,
       coalesce(p1.kde_rows, k.n_rows) AS kde_rows,
       pg_column_size(k.*) + coalesce(pg_column_size(p1.*), 0) + coalesce(pg_column_size(p2.*), 0) AS bytes,
       k.built_at,
       now() - k.built_at AS age,
       k.build_seconds,
       k.backend,
       CASE WHEN st.mod_count >= k.mod_count THEN st.mod_count - k.mod_count END AS rows_modified,
       r.reason IS NOT NULL AS stale,
       r.reason AS stale_reason,
       k.kind = '1d' AND EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgrelid = k.relid AND t.tgname = 'kde_track_insert'
                                 AND t.tgfoid = '@extschema@._kde_track_apply()'::regprocedure) AS tracked
FROM @extschema@.kde_catalog k
LEFT JOIN @extschema@.kde_synopsis p1 ON k.kind = '1d' AND p1.relid = k.relid AND p1.cols = k.cols
LEFT JOIN @extschema@.kde_synopsis_2d p2 ON k.kind = '2d' AND p2.relid = k.relid AND p2.cols = k.cols
CROSS JOIN LATERAL @extschema@._kde_table_state(k.relid) st
CROSS JOIN LATERAL (SELECT @extschema@._kde_stale_reason(k.relid, k.n_rows + k.n_null, k.mod_count, k.storage_id,
                                                         k.pages) AS reason) r;
-- Each stale synopsis the current role may read is rebuilt on its own (a subtransaction each): one that
-- fails is reported as a WARNING and left as it was, the others land. Synopses of views and foreign tables
-- the role does not own are skipped with a WARNING. A cancel stops the whole call.
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
                '0.9.0'));
            n := n + 1;
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'pg_kde: could not refresh the synopsis of % of %: %', array_to_string(r.cols, ', '), r.relid, SQLERRM;
        END;
    END LOOP;
    RETURN n;
END
$$;
