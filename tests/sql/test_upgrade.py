"""Upgrades: every released SQL version updates to the current one. An updated install has the same schema
as a fresh one, and the synopses it held answer as before (0.4.0's format 2 read from the old payload
columns: the same estimates)."""

import uuid

import numpy as np
import pytest

psycopg = pytest.importorskip("psycopg")
from psycopg import sql  # noqa: E402

import pg_kde  # noqa: E402
from pg_kde import admin  # noqa: E402
from psycopg.rows import dict_row  # noqa: E402
from psycopg.types.json import Jsonb  # noqa: E402
from pg_kde.synopsis.catalog import format1  # noqa: E402
from pg_kde.synopsis.query import heavy_values, interval_1d, loose_bounds, range_1d  # noqa: E402
from sqlhelpers import approx, load, refresh, varint_pack  # noqa: E402

#: Every released version, oldest first; each ships an update script to the next.
RELEASED = ["0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "0.9.0", "0.10.0", "0.11.0", "0.12.0", "0.13.0", "0.14.0", "0.15.0", "0.16.0", "0.17.0", "0.18.0", "0.19.0", "0.20.0", "0.21.0", "0.22.0", "0.23.0", "0.24.0", "0.25.0", "0.26.0", "0.27.0", "0.28.0", "0.29.0", "0.30.0"]

# Each object of the extension, described so that two installs can be compared.
SCHEMA_QUERIES = {
    "functions": """
        SELECT p.oid::regprocedure::text,
               CASE WHEN p.prokind = 'a' THEN (SELECT format('aggregate %s %s %s %s %s %s %s', a.aggtransfn, a.aggfinalfn,
                   a.aggcombinefn, a.aggserialfn, a.aggdeserialfn, a.aggtranstype::regtype, p.proparallel)
                   FROM pg_aggregate a WHERE a.aggfnoid = p.oid) ELSE pg_get_functiondef(p.oid) END,
               p.proacl::text, obj_description(p.oid, 'pg_proc')
        FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
        JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'pg_kde' ORDER BY 1""",
    "relations": """
        SELECT c.relname, c.relkind::text, c.relrowsecurity, c.relacl::text, obj_description(c.oid, 'pg_class'),
               CASE WHEN c.relkind = 'v' THEN pg_get_viewdef(c.oid) END,
               (SELECT array_agg(format('%s %s %s %s', a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
                                        a.attstorage) ORDER BY a.attnum)
                FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped)::text,
               (SELECT array_agg(format('%s %s', conname, pg_get_constraintdef(oid)) ORDER BY conname)
                FROM pg_constraint WHERE conrelid = c.oid)::text,
               (SELECT array_agg(format('%s %s %s %s', policyname, cmd, qual, with_check) ORDER BY policyname)
                FROM pg_policies p WHERE p.tablename = c.relname)::text
        FROM pg_class c JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'
        JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'pg_kde' ORDER BY 1""",
    "event_triggers": """
        SELECT t.evtname, t.evtevent, t.evtfoid::regproc::text, t.evtenabled::text, t.evttags::text
        FROM pg_event_trigger t JOIN pg_depend d ON d.classid = 'pg_event_trigger'::regclass AND d.objid = t.oid
        AND d.deptype = 'e' JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'pg_kde' ORDER BY 1""",
    "config_tables": "SELECT extconfig::regclass[]::text, extcondition::text FROM pg_extension WHERE extname = 'pg_kde'",
}

#: The catalog columns 0.1.0 had (0.2.0 adds attnums, coltypes, built_relid, storage_id and pages).
COLUMNS_0_1_0 = {
    "kde_synopsis": "relid, cols, method, bandwidth, sample_size, n_rows, n_null, integer_valued, atom_values, "
                    "atom_cum_count, atom_cum_sum, kde_rows, grid, lattice, grid_size, cell_cum_count, cell_cum_sum, "
                    "cell_cum_offset, kde_mass, cell_discrete, built_at, build_seconds, backend, mod_count, options",
    "kde_synopsis_2d": "relid, cols, method, bandwidth, sample_size, n_rows, n_null, integer_valued, grid1, grid2, "
                       "lattice1, lattice2, grid_size, sat_count, sat_sum, kde_sat, built_at, build_seconds, backend, "
                       "mod_count, options",
}


#: ... and those 0.2.0 had, in one table per kind (0.3.0 moves the shared ones to the header, kde_catalog).
COLUMNS = {
    "0.1.0": COLUMNS_0_1_0,
    "0.2.0": {k: v + ", attnums, coltypes, built_relid, storage_id, pages" for k, v in COLUMNS_0_1_0.items()},
}
#: 0.3.0: the header table and each kind's payload (0.4.0 changes the 1-D payload: format 2).
HEADER_0_3_0 = ("relid, cols, kind, attnums, coltypes, built_relid, requested, method, backend, bandwidth, sample_size, "
                "n_rows, n_null, built_at, build_seconds, mod_count, storage_id, pages")
#: 0.4.0: format 2 of the 1-D payload (the layout of 0.5.0 too; 0.6.0 adds period and profile).
PAYLOAD_0_4_0 = "relid, cols, atom_values, atom_cum_count, atom_cum_sum, kde_rows, grid, grid_size, cell_cum_count, " \
                "cell_cum_sum, step, density, shape_var"
#: 0.6.0 (and 0.7.0, 0.8.0): format 2 with a time column's periodic profile (0.9.0 adds atom_pack).
PAYLOAD_0_6_0 = PAYLOAD_0_4_0 + ", period, profile"
#: 0.9.0 (the layout of 0.10.0, 0.11.0 and 0.12.0 too): heavy values on a lattice packed (0.13.0 adds sum_slack).
PAYLOAD_0_9_0 = PAYLOAD_0_6_0 + ", atom_pack"
#: 0.13.0 (and 0.14.0, 0.15.0, 0.16.0): a cut cell's count and mean bound its rows (sum_slack, sum_quantum).
PAYLOAD_0_13_0 = PAYLOAD_0_9_0 + ", sum_slack, sum_quantum"
#: 0.17.0 (and 0.18.0, 0.19.0): whether a synopsis' heavy values are whole (heavy_whole).
PAYLOAD_0_17_0 = PAYLOAD_0_13_0 + ", heavy_whole"
#: 0.20.0: the weight of the shape's doubt its build calibrated (doubt_weight).
PAYLOAD_0_20_0 = PAYLOAD_0_17_0 + ", doubt_weight"
#: 0.21.0: the weights of groups of its cells (doubt_weights).
PAYLOAD_0_21_0 = PAYLOAD_0_20_0 + ", doubt_weights"


def since(version: str) -> tuple:
    """The released versions from ``version`` on (a release adds itself to RELEASED alone)."""
    return tuple(RELEASED[RELEASED.index(version):])


#: The releases with the header table (kde_catalog), and those of them with format 2 of the 1-D payload.
WITH_HEADER = since("0.3.0")
#: The releases with synopses of 3 to 16 columns (kde_synopsis_nd, its layout unchanged since).
WITH_ND = since("0.11.0")
FORMAT_2 = WITH_HEADER[1:]
#: The releases whose lattice heavy values are packed (atom_pack), and whose 3-to-16-column payload has pool_rows.
PACKED, WITH_POOL_ROWS = since("0.9.0"), since("0.12.0")
#: The 1-D payload's layout of each release from 0.4.0 on: the layout of the latest of these at or before it.
PAYLOAD_SINCE = (("0.4.0", PAYLOAD_0_4_0), ("0.6.0", PAYLOAD_0_6_0), ("0.9.0", PAYLOAD_0_9_0),
                 ("0.13.0", PAYLOAD_0_13_0), ("0.17.0", PAYLOAD_0_17_0), ("0.20.0", PAYLOAD_0_20_0),
                 ("0.21.0", PAYLOAD_0_21_0))


def payload_1d(version: str) -> str:
    """The 1-D payload's columns as ``version`` (0.4.0 or later) stored them."""
    return [layout for first, layout in PAYLOAD_SINCE if version in since(first)][-1]
#: 0.11.0: the payload of 3 to 16 columns.
PAYLOAD_ND = ("relid, cols, n_points, points, knot_counts, knot_values, knot_below, knot_upto, non_null, complete, "
              "categorical, labels")
PAYLOAD_0_3_0 = {
    "kde_synopsis": "relid, cols, integer_valued, atom_values, atom_cum_count, atom_cum_sum, kde_rows, grid, lattice, "
                    "grid_size, cell_cum_count, cell_cum_sum, cell_cum_offset, kde_mass, cell_discrete",
    "kde_synopsis_2d": "relid, cols, integer_valued, grid1, grid2, lattice1, lattice2, grid_size, sat_count, sat_sum, "
                       "kde_sat",
}


def old_format(current, format2: bool = False, packed: bool = False, nd: bool = False) -> dict:
    """Each synopsis of ``current`` as the releases before 0.4.0 stored it: {table: [row dict, ...]} with every
    column any of them had (a 1-D payload back to format 1: pg_kde.synopsis.catalog.format1); with ``format2``,
    as 0.4.0 stored it (its payloads unchanged but for packed heavy values, unpacked); with ``packed`` too, as
    0.9.0 stored it (unchanged but for the packs' format 1); with ``nd``, the synopses of 3 to 16 columns too, as 0.11.0 stored them."""
    rows = {}
    with current.cursor(row_factory=dict_row) as cur:
        for table in ("kde_synopsis", "kde_synopsis_2d") + (("kde_synopsis_nd",) if nd else ()):
            found = cur.execute(f"SELECT k.*, p.*, k.relid::text AS relid, k.requested::text AS options "
                                f"FROM kde_catalog k JOIN {table} p USING (relid, cols)").fetchall()
            if table == "kde_synopsis" and not packed:  # heavy values as arrays, as releases before 0.9.0 kept them
                found = [dict(r, **dict(zip(("atom_values", "atom_cum_count", "atom_cum_sum"), heavy_values(r))))
                         for r in found]
            elif table == "kde_synopsis":  # packed in format 1, as 0.9.0 to 0.30.0 wrote them
                found = [dict(r, atom_pack=varint_pack(r["atom_pack"], r["step"])) if r["atom_pack"] else r
                         for r in found]
            rows[table] = [format1(r) if table == "kde_synopsis" and not format2 else r for r in found]
    return rows


def insert(conn, table: str, columns: str, row: dict) -> None:
    names = columns.split(", ")
    values = [row["options"] if c == "options" else Jsonb(row[c]) if c == "requested" else row[c] for c in names]
    conn.execute(f"INSERT INTO {table} ({columns}) VALUES ({', '.join(['%s'] * len(names))})", values)


@pytest.fixture
def scratch_db(server_dsn):
    """A factory of empty databases, dropped at the end."""
    made = []

    def make():
        name = f"pg_kde_upgrade_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(server_dsn, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        made.append(name)
        return psycopg.connect(psycopg.conninfo.make_conninfo(server_dsn, dbname=name), autocommit=True)

    yield make
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        for name in made:
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def describe(conn) -> dict:
    return {name: conn.execute(query).fetchall() for name, query in SCHEMA_QUERIES.items()}


def test_the_control_file_names_the_package_version():
    control = (admin.SQL_DIR / "pg_kde.control").read_text()
    assert f"default_version = '{pg_kde.__version__}'" in control
    scripts = {p.name for p in admin.SQL_DIR.glob("pg_kde--*.sql")}
    versions = RELEASED + [pg_kde.__version__]
    for old, new in zip(versions, versions[1:]):
        assert f"pg_kde--{old}--{new}.sql" in scripts, f"no update script from {old} to {new}"


@pytest.mark.parametrize("old", RELEASED)
def test_an_updated_install_equals_a_fresh_one(scratch_db, old):
    with scratch_db() as fresh, scratch_db() as updated:
        fresh.execute(f"CREATE EXTENSION pg_kde VERSION '{pg_kde.__version__}' CASCADE")
        updated.execute(f"CREATE EXTENSION pg_kde VERSION '{old}' CASCADE")
        updated.execute(f"ALTER EXTENSION pg_kde UPDATE TO '{pg_kde.__version__}'")
        a, b = describe(fresh), describe(updated)
        for part in SCHEMA_QUERIES:
            assert a[part] == b[part], part
        assert len(a["functions"]) > 30 and len(a["event_triggers"]) == 2


def test_the_library_takes_the_scan_of_an_install_not_yet_updated(scratch_db):
    """The library's scan takes a fifth argument since 0.31.0 (the cell values kept at each end); a database
    still at 0.30.0 (between installing the files and ALTER EXTENSION pg_kde UPDATE) calls it with four, and
    gets the default tail of 256 rather than a read past its arguments (a red team: 'the tail must be from 1
    to 16384 cell values, not 0', or a tail made of whatever bytes lay there)."""
    from pg_kde.synopsis.sql_reader import decode_cells

    with scratch_db() as conn:
        conn.execute("CREATE EXTENSION pg_kde VERSION '0.30.0' CASCADE")
        got = conn.execute("SELECT x % 3, _kde_cells(x::float8, '{0,300,600}', '{}', 1) FROM generate_series(1, 900) x "
                           "GROUP BY x % 3 ORDER BY 1").fetchall()
        assert len(got) == 3
        for r, state in got:
            x = np.arange(1, 901, dtype=float)
            x = x[x % 3 == r]
            scan = decode_cells(300, state, 3, 0, 1.0, 256)
            assert scan.cell_rows.tolist() == [np.sum(x < 300), np.sum(x >= 300)]  # (beyond the grid: its last cell)
            assert scan.low.tolist() == x[:256].tolist() and scan.high.tolist() == x[-256:].tolist()


@pytest.mark.parametrize("old", RELEASED)
def test_synopses_survive_the_update(scratch_db, old):
    rng = np.random.default_rng(12)
    columns = {"x": rng.gamma(2.0, 3.0, 20000), "k": rng.integers(0, 50, 20000).astype(float),
               "z": rng.normal(0.0, 1.0, 20000)}
    with scratch_db() as current, scratch_db() as legacy:
        current.execute(f"CREATE EXTENSION pg_kde VERSION '{pg_kde.__version__}' CASCADE")
        legacy.execute(f"CREATE EXTENSION pg_kde VERSION '{old}' CASCADE")
        for conn in (current, legacy):
            load(conn, "sales", columns)
            conn.execute("CREATE TABLE gone (v float8)")
        refresh(current, "sales", "x")
        refresh(current, "sales", "k")
        current.execute("SELECT kde_refresh('sales', ARRAY['x', 'k'])")
        current.execute("SELECT kde_refresh('sales', ARRAY['x', 'k', 'z'])")
        # The synopses as the old version stored them (its refresh needs its own package: the rows are the
        # same synopses, in its layout), plus one of a table dropped before the update, which the update must
        # remove.
        stored = old_format(current, format2=old in FORMAT_2, packed=old in PACKED, nd=old in WITH_ND)
        gone = dict(next(r for r in stored["kde_synopsis"] if r["cols"] == ["x"]), relid="gone", cols=["v"])
        for table, rows in stored.items():
            for row in rows + ([gone] if table == "kde_synopsis" else []):
                if old in WITH_HEADER:
                    insert(legacy, "kde_catalog", HEADER_0_3_0, row)
                    payload = PAYLOAD_0_3_0.get(table, PAYLOAD_ND + (", pool_rows" if old in WITH_POOL_ROWS else ""))
                    if table == "kde_synopsis" and old != "0.3.0":
                        payload = payload_1d(old)
                    insert(legacy, table, payload, row)
                else:
                    insert(legacy, table, COLUMNS[old][table], row)
            if old != "0.1.0":  # as the old version's refresh stored it: the relation's own oid
                legacy.execute(f"UPDATE {'kde_catalog' if old in WITH_HEADER else table} "
                               "SET built_relid = relid::oid")
        legacy.execute("DROP TABLE gone")
        # The orphan included; 0.2.0 and later remove it at the DROP already (event triggers).
        orphans = 1 if old == "0.1.0" else 0
        assert legacy.execute("SELECT count(*) FROM kde_synopsis").fetchone()[0] == 2 + orphans

        legacy.execute(f"ALTER EXTENSION pg_kde UPDATE TO '{pg_kde.__version__}'")
        assert legacy.execute("SELECT count(*) FROM kde_synopsis").fetchone()[0] == 2  # the orphan is gone
        for lo, hi in [(1.0, 7.5), (0, 3), (10, None)]:
            for col in ("x", "k"):
                assert approx(legacy, "approx_count", "sales", col, lo, hi) == approx(current, "approx_count", "sales", col, lo, hi)
        box = "SELECT approx_count('sales', 'x', 2.0, 9.0, 'k', 5.0, 30.0)"
        assert legacy.execute(box).fetchone()[0] == current.execute(box).fetchone()[0]
        if old in WITH_ND:  # the same estimate; its interval a simple random sample's (no pool_rows before 0.12.0)
            box = "SELECT * FROM approx_count_ci('sales', ARRAY['x', 'z'], ARRAY[2.0, -1.0]::float8[], ARRAY[9.0, 0.5]::float8[])"
            (est, low, high), (again, *_) = legacy.execute(box).fetchone(), current.execute(box).fetchone()
            assert est == again and low < est < high
        # Bound to the columns' identity: a rename is followed, a retyped column loses its synopsis.
        assert legacy.execute("SELECT attnums FROM kde_catalog WHERE cols = '{x}'").fetchone()[0] == [1]
        legacy.execute("ALTER TABLE sales RENAME x TO amount")
        assert approx(legacy, "approx_count", "sales", "amount", 1.0, 7.5) == approx(current, "approx_count", "sales", "x", 1.0, 7.5)
        assert refresh(legacy, "sales", "k")["rows"] == 20000
        assert legacy.execute(sql.SQL("SELECT count(*) FROM kde_synopses WHERE NOT stale")).fetchone()[0] >= 1


def test_the_update_to_0_30_0_says_which_synopses_may_be_coarse(scratch_db):
    """0.30.0's kde_synopsis.coarse for the synopses built before: false for a column whose values are their
    float8s, a bigint column whose stored values stay below 2^53, a timestamp column below 2^33 epoch seconds and
    a numeric column declared with at most 15 digits; true for a bigint column reaching 2^53; NULL (read as
    true) for any other numeric column, until its next refresh scans it."""
    make = ("CREATE TABLE t AS SELECT g::bigint AS small, g::bigint + 9007199254740000 AS big, "
            "(g / 100.0)::numeric(12, 2) AS cents, (g / 100.0) AS num, "
            "'2024-01-01'::timestamp + g * interval '1 s' AS ts, g * 0.5::float8 AS f FROM generate_series(1, 3000) g")
    cols = ("small", "big", "cents", "num", "ts", "f")
    with scratch_db() as current, scratch_db() as legacy:
        current.execute(f"CREATE EXTENSION pg_kde VERSION '{pg_kde.__version__}' CASCADE")
        legacy.execute("CREATE EXTENSION pg_kde VERSION '0.29.0' CASCADE")
        for conn in (current, legacy):
            conn.execute(make)
        for col in cols:
            refresh(current, "t", col)
        built = dict(current.execute("SELECT cols[1], coarse FROM kde_synopsis").fetchall())
        assert built == {"small": False, "big": True, "cents": False, "num": False, "ts": False, "f": False}
        for row in old_format(current, format2=True, packed=True)["kde_synopsis"]:
            insert(legacy, "kde_catalog", HEADER_0_3_0, row)
            insert(legacy, "kde_synopsis", payload_1d("0.29.0"), row)
        legacy.execute("UPDATE kde_catalog SET built_relid = relid::oid")
        legacy.execute(f"ALTER EXTENSION pg_kde UPDATE TO '{pg_kde.__version__}'")
        updated = dict(legacy.execute("SELECT cols[1], coarse FROM kde_synopsis").fetchall())
        assert updated == dict(built, num=None)
        # (not known: rows on a bound's float8 count on both sides until a refresh, as the reference reads it)
        with legacy.cursor(row_factory=dict_row) as cur:
            s = cur.execute("SELECT * FROM kde_synopsis WHERE cols = '{num}'").fetchone()
        s["density"] = np.asarray(s["density"], dtype=np.float32).astype(np.float64).tolist()
        widened = 0
        for k in range(100, 400, 3):
            lo, hi = k / 100, 25.0
            got = legacy.execute("SELECT * FROM approx_count_ci('t', 'num', %s::float8, %s::float8)", (lo, hi)).fetchone()
            assert got == pytest.approx(interval_1d(s, lo, hi, 0.95), abs=1e-6)
            hard, r = loose_bounds(s, range_1d(s, lo, hi, 0), lo, hi, 0), range_1d(dict(s, coarse=False), lo, hi, 0)
            assert hard.low <= r.low <= r.high <= hard.high
            widened += hard.low < r.low  # (the row of lo on either side, where the range met a cell's start)
        assert widened > 0
        refresh(legacy, "t", "num")
        assert legacy.execute("SELECT coarse FROM kde_synopsis WHERE cols = '{num}'").fetchone()[0] is False


@pytest.mark.parametrize("old, writes, deletes, target", [
    # 0.3.0's header table, to the roles that could write 0.2.0's catalog tables
    ("0.2.0", "kde_synopsis_2d", "kde_synopsis", "kde_catalog"),
    # 0.14.0's shards' answers of Citus tables, to the roles that could write the 1-D payload table
    ("0.13.0", "kde_synopsis", "kde_synopsis", "kde_parts"),
])
def test_an_update_carries_writers_grants_to_a_new_catalog_table(scratch_db, old, writes, deletes, target):
    """Roles that could write the old release's tables may write the new table with the same privileges,
    whatever their names need in quoting; others get nothing new (but SELECT, as on every catalog table)."""
    writer, reader = f"Writer {uuid.uuid4().hex[:6]}", f"reader_{uuid.uuid4().hex[:6]}"
    cleaner = f"cleaner_{uuid.uuid4().hex[:6]}"
    with scratch_db() as conn:
        try:
            for role in (writer, reader, cleaner):
                conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(role)))
            conn.execute(f"CREATE EXTENSION pg_kde VERSION '{old}' CASCADE")
            conn.execute(sql.SQL("GRANT INSERT, UPDATE, DELETE ON {} TO {}").format(sql.Identifier(writes),
                                                                                  sql.Identifier(writer)))
            conn.execute(sql.SQL("GRANT DELETE ON {} TO {}").format(sql.Identifier(deletes), sql.Identifier(cleaner)))
            conn.execute(f"ALTER EXTENSION pg_kde UPDATE TO '{pg_kde.__version__}'")
            check = "SELECT has_table_privilege(%s, %s, %s)"
            for privilege in ("INSERT", "UPDATE", "DELETE"):
                assert conn.execute(check, (writer, target, privilege)).fetchone()[0] is True
                assert conn.execute(check, (reader, target, privilege)).fetchone()[0] is False
                # a role that could only delete synopses may still only delete them
                assert conn.execute(check, (cleaner, target, privilege)).fetchone()[0] is (privilege == "DELETE")
            assert conn.execute(check, (reader, target, "SELECT")).fetchone()[0] is True
        finally:
            conn.execute("DROP EXTENSION IF EXISTS pg_kde CASCADE")
            for role in (writer, reader, cleaner):
                conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


@pytest.mark.parametrize("old", [v for v in RELEASED if v in since("0.14.0")])
def test_tables_tracked_before_0_29_0_stay_tracked(scratch_db, old):
    """0.29.0 keeps which tables are tracked in kde_tracked and adds a TRUNCATE trigger: a table kde_track
    tracked before the update gets both, and its writes keep reaching the synopsis; a table with a trigger of
    that name that is not kde_track's does not."""
    with scratch_db() as conn:
        if conn.execute("SELECT count(*) FROM pg_available_extension_versions WHERE name = 'pg_kde' "
                        "AND version = %s", (old,)).fetchone()[0] == 0:
            pytest.skip(f"{old} is not installed")
        conn.execute(f"CREATE EXTENSION pg_kde VERSION '{old}' CASCADE")
        if conn.execute("SELECT count(*) FROM pg_proc WHERE proname = 'kde_track'").fetchone()[0] == 0:
            pytest.skip(f"{old} has no kde_track")
        conn.execute("CREATE TABLE tr (x int)")
        conn.execute("SELECT kde_track('tr')")
        # a table whose insert trigger was made by hand, with a WHEN condition (a red team on 0.29.0's first
        # build: the update took it for tracked, and inserts skipped by the condition went unseen)
        conn.execute("CREATE TABLE hand (x int)")
        conn.execute("CREATE TRIGGER kde_track_insert AFTER INSERT ON hand REFERENCING NEW TABLE AS kde_new "
                     "FOR EACH STATEMENT WHEN (current_setting('app.skip', true) IS NULL) EXECUTE FUNCTION _kde_track_apply()")
        conn.execute(f"ALTER EXTENSION pg_kde UPDATE TO '{pg_kde.__version__}'")
        assert conn.execute("SELECT relid::text FROM kde_tracked").fetchall() == [("tr",)]
        assert conn.execute("SELECT count(*) FROM pg_trigger WHERE tgrelid = 'hand'::regclass").fetchone()[0] == 1
        assert conn.execute("SELECT _kde_track_intact('tr')").fetchone()[0] is True
        conn.execute("INSERT INTO tr SELECT g % 50 FROM generate_series(1, 2000) g")
        refresh(conn, "tr", "x")
        conn.execute("INSERT INTO tr VALUES (1), (2)")
        assert conn.execute("SELECT tracked, stale, n_rows FROM kde_synopses").fetchone() == (True, False, 2002)
