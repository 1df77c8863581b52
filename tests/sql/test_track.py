"""kde_track on the real server: statement triggers keep a table's 1-D synopses exact through inserts,
updates and deletes (cells and heavy values against a recount of the rows, hard bounds on queries); writes
they cannot apply mark the synopsis stale with the reason until a refresh; writers need no catalog grant;
only catalog writers may start tracking; kde_untrack stops it."""

import math
import shutil

import numpy as np
import pytest

psycopg = pytest.importorskip("psycopg")
from psycopg import sql  # noqa: E402
from psycopg.rows import dict_row  # noqa: E402

from pg_kde.synopsis.query import range_1d  # noqa: E402
from sqlhelpers import assert_exact_cells, load, refresh, restored_copy  # noqa: E402


def payload(db, table, col):
    with db.cursor(row_factory=dict_row) as cur:
        return cur.execute("SELECT * FROM kde_synopsis WHERE relid = %s::regclass AND cols = ARRAY[%s]",
                           (sql.Identifier(table).as_string(db), col)).fetchone()


def values(db, table, col):
    return np.array([r[0] for r in db.execute(sql.SQL("SELECT {}::float8 FROM {} WHERE {} IS NOT NULL").format(
        sql.Identifier(col), sql.Identifier(table), sql.Identifier(col)))], dtype=float)


def state(db, table, col):
    return db.execute("SELECT stale, stale_reason, tracked, n_rows FROM kde_synopses WHERE relid = %s::regclass "
                      "AND cols = ARRAY[%s]", (sql.Identifier(table).as_string(db), col)).fetchone()


def check_exact(row, x, rng, queries=100):
    """The payload's heavy values, cells and sums are those of the rows x; hard bounds hold."""
    assert_exact_cells(row, x)
    xs = np.sort(x)
    for i in range(queries):
        lo, hi = np.sort(rng.choice(xs, 2) if i % 2 else rng.uniform(xs[0] - 1, xs[-1] + 1, 2))
        truth = int(((xs >= lo) & (xs <= hi)).sum())
        r = range_1d(row, float(lo), float(hi), 0)
        assert r.low - 1e-6 <= truth <= r.high + 1e-6, (lo, hi, truth, r)


def test_tracking_keeps_synopses_exact_through_writes(db, table):
    rng = np.random.default_rng(31)
    n = 20000
    cents = np.round(rng.lognormal(3.0, 1.0, n), 2)
    ties = rng.gamma(2.0, 3.0, n)
    ties[rng.random(n) < 0.2] = 5.0  # a heavy value: kept exactly beside the cells
    load(db, table, {"amount": cents, "x": ties, "k": rng.integers(0, 30, n).astype(float)},
         {"amount": "numeric", "k": "numeric(4,0)"})
    for col in ("amount", "x", "k"):
        refresh(db, table, col)
    t = sql.Identifier(table).as_string(db)
    assert db.execute("SELECT kde_track(%s::regclass)", (t,)).fetchone()[0] == 3
    # appended rows, some beyond the built range; NULLs; an update moving rows; a delete
    db.execute(f"INSERT INTO {t} SELECT round((exp(3 + random() * 2.5))::numeric, 2), "
               f"CASE WHEN random() < 0.2 THEN 5.0 ELSE random() * 80 END, (random() * 29)::int "
               f"FROM generate_series(1, 2000)")
    db.execute(f"INSERT INTO {t} (amount, x, k) VALUES (NULL, NULL, NULL), (12.34, 5.0, 3)")
    db.execute(f"UPDATE {t} SET amount = amount + 1.00, x = x * 1.5 WHERE k < 5")
    db.execute(f"DELETE FROM {t} WHERE amount > 60")
    for col in ("amount", "x", "k"):
        stale, reason, tracked, n_rows = state(db, table, col)
        assert (stale, reason, tracked) == (False, None, True)
        x = values(db, table, col)
        assert n_rows == len(x)
        check_exact(payload(db, table, col), x, rng)
    # the frequency table of k takes existing values exactly (packed, 0.9.0, and packed again by each
    # write); a new value makes it stale
    k = payload(db, table, "k")
    assert k["grid"] == [] and k["atom_values"] == [] and len(k["atom_pack"]) > 0
    db.execute(f"INSERT INTO {t} (k) VALUES (1000)")
    stale, reason, _, _ = state(db, table, "k")
    assert stale and reason == "tracking could not apply a write: values the exact frequency table does not hold written"
    # a value off the cents lattice, and a NaN
    db.execute(f"INSERT INTO {t} (amount, x) VALUES (1.005, 'NaN')")
    assert state(db, table, "amount")[1] == "tracking could not apply a write: values off the lattice (step 0.01) written"
    assert state(db, table, "x")[1] == "tracking could not apply a write: NaN or infinite values written"
    db.execute(f"DELETE FROM {t} WHERE amount = 1.005 OR k = 1000")
    assert refresh(db, table, "amount")["rows"] == len(values(db, table, "amount"))
    assert state(db, table, "amount")[:3] == (False, None, True)  # the refresh clears it; tracking goes on
    # a cents value past 2^40 steps (1e14: a half-step bound there rounds onto the value) leaves the lattice's
    # reach as the build judges it (cells.STEP_RANGE): stale until a refresh lays the column out again
    db.execute(f"INSERT INTO {t} (amount) VALUES (1e14)")
    assert state(db, table, "amount")[1] == "tracking could not apply a write: values off the lattice (step 0.01) written"
    db.execute(f"DELETE FROM {t} WHERE amount = 1e14")
    refresh(db, table, "amount")
    db.execute(f"INSERT INTO {t} (amount) VALUES (7.77)")
    check_exact(payload(db, table, "amount"), values(db, table, "amount"), rng, 20)
    db.execute("SELECT kde_untrack(%s::regclass)", (t,))
    assert state(db, table, "amount")[2] is False
    db.execute(f"INSERT INTO {t} (amount) VALUES (7.77)")
    assert payload(db, table, "amount")["kde_rows"] == len(values(db, table, "amount")) - 1


def test_writers_need_no_catalog_grant_and_only_catalog_writers_track(db, table, login_role):
    rng = np.random.default_rng(4)
    load(db, table, {"v": rng.normal(size=5000)})
    refresh(db, table, "v")
    t = sql.Identifier(table).as_string(db)
    writer, writer_dsn = login_role()
    db.execute(f"GRANT SELECT, INSERT ON {t} TO {writer}")
    with psycopg.connect(writer_dsn, autocommit=True) as conn:
        with pytest.raises(psycopg.Error, match="it needs UPDATE on the catalog"):
            conn.execute("SELECT kde_track(%s::regclass)", (t,))
    db.execute("SELECT kde_track(%s::regclass)", (t,))
    with psycopg.connect(writer_dsn, autocommit=True) as conn:
        conn.execute(f"INSERT INTO {t} SELECT random() FROM generate_series(1, 100)")
        with pytest.raises(psycopg.Error):  # the catalog itself stays closed to the writer
            conn.execute("UPDATE kde_synopsis SET kde_rows = 0")
    assert payload(db, table, "v")["kde_rows"] == 5100
    with pytest.raises(psycopg.Error, match="is not a plain table"):
        db.execute("CREATE VIEW kde_track_view AS SELECT 1 AS v")
        db.execute("SELECT kde_track('kde_track_view')")
    db.execute("DROP VIEW IF EXISTS kde_track_view")


def test_an_update_of_no_rows_changes_nothing(db, table):
    load(db, table, {"v": np.arange(100) % 10}, {"v": "integer"})
    refresh(db, table, "v", budget=1024)
    t = sql.Identifier(table).as_string(db)
    db.execute("SELECT kde_track(%s::regclass)", (t,))
    before = payload(db, table, "v"), state(db, table, "v")
    db.execute(f"UPDATE {t} SET v = 1 WHERE v = 99")  # (0.8.0: null value in column "mod_count")
    db.execute(f"DELETE FROM {t} WHERE v = 99")
    assert (payload(db, table, "v"), state(db, table, "v")) == before


def test_a_packed_table_that_would_outgrow_its_budget_goes_stale(db, table):
    """The triggers pack a frequency table's new counts again; where the pack would take the synopsis past its
    budget (counts needing longer codes), or no longer packs (a running sum past 2^53), the synopsis is
    marked stale with the reason instead, and a refresh lays it out again within the budget."""
    from pg_kde.synopsis.packing import pack_atoms

    t = sql.Identifier(table).as_string(db)
    load(db, table, {"v": np.arange(8000) % 1000, "w": 10**11 + np.arange(8000) % 30}, {"v": "integer", "w": "bigint"})
    for col in ("v", "w"):
        refresh(db, table, col, budget=2048 if col == "v" else 1250)
        assert len(payload(db, table, col)["atom_pack"]) > 0, col
    # v's 1,000 values of 8 rows, then 88, then 128: its pack grows by 377 bytes and then by 125 more (the
    # counts' Rice codes, a bit longer at each doubling); a budget of 440 bytes over the synopsis' bytes at 8
    # rows takes the first growth and not the second. (The exact table is the same synopsis at either budget.)
    pack = {c: len(pack_atoms(np.arange(1000.0), np.cumsum(np.full(1000, float(c))), 1.0)) for c in (8, 88, 128)}
    assert pack[88] - pack[8] < 440 < pack[128] - pack[8]
    bytes_at_8 = db.execute("SELECT bytes FROM kde_synopses WHERE relid = %s::regclass AND cols = '{v}'",
                            (t,)).fetchone()[0]
    budget = bytes_at_8 + 440
    refresh(db, table, "v", budget=budget)
    assert len(payload(db, table, "v")["atom_pack"]) == pack[8]
    db.execute("SELECT kde_track(%s::regclass)", (t,))
    db.execute(f"INSERT INTO {t} (v) SELECT g % 1000 FROM generate_series(1, 80000) g")  # 8 -> 88 rows a value
    assert state(db, table, "v")[:2] == (False, None)  # within the budget still
    assert len(payload(db, table, "v")["atom_pack"]) == pack[88]
    check_exact(payload(db, table, "v"), values(db, table, "v"), np.random.default_rng(5), 20)
    db.execute(f"INSERT INTO {t} (v) SELECT g % 1000 FROM generate_series(1, 40000) g")  # 128: past it
    assert state(db, table, "v")[:2] == (True, "tracking could not apply a write: the heavy values' pack would "
                                               f"take the synopsis past its budget ({budget} bytes)")
    db.execute(f"INSERT INTO {t} (w) SELECT 100000000029 FROM generate_series(1, 90000)")  # (Σ past 2^53)
    assert state(db, table, "w")[:2] == (True, "tracking could not apply a write: the heavy values no longer pack "
                                               "(a running sum past 2^53)")
    for col, most in (("v", budget), ("w", 1250)):
        refresh(db, table, col, budget=most)
        size = db.execute("SELECT bytes FROM kde_synopses WHERE relid = %s::regclass AND cols = ARRAY[%s]",
                          (t, col)).fetchone()[0]
        assert size <= most and state(db, table, col)[:2] == (False, None), (col, size)


def test_the_trigger_function_runs_only_as_kde_tracks_triggers(db, table):
    rng = np.random.default_rng(9)
    # (continuous: on a lattice, 1e300 below is already past the lattice's reach, another reason)
    load(db, table, {"v": rng.normal(size=2000)})
    refresh(db, table, "v")
    t = sql.Identifier(table).as_string(db)
    # without the transition tables kde_track declares, kde_new would name any relation: refused
    db.execute(f"CREATE TRIGGER kde_track_insert AFTER INSERT ON {t} FOR EACH STATEMENT "
               "EXECUTE FUNCTION _kde_track_apply()")
    with pytest.raises(psycopg.Error, match="runs only as the triggers kde_track installs"):
        db.execute(f"INSERT INTO {t} VALUES (1.5)")
    db.execute(f"DROP TRIGGER kde_track_insert ON {t}")
    db.execute(f"CREATE TRIGGER other AFTER INSERT ON {t} REFERENCING NEW TABLE AS kde_new FOR EACH STATEMENT "
               "EXECUTE FUNCTION _kde_track_apply()")
    with pytest.raises(psycopg.Error, match="runs only as the triggers kde_track installs"):
        db.execute(f"INSERT INTO {t} VALUES (1.5)")
    db.execute(f"DROP TRIGGER other ON {t}")
    # a value far beyond the range: stale with the reason, not an infinite density
    db.execute("SELECT kde_track(%s::regclass)", (t,))
    db.execute(f"INSERT INTO {t} VALUES (1e300)")
    assert state(db, table, "v")[1] == ("tracking could not apply a write: values too far beyond the synopsis' "
                                        "range written")
    # partitions and inheritance trees are refused
    db.execute(f'CREATE TABLE "{table}_p" (v float8) PARTITION BY RANGE (v)')
    db.execute(f'CREATE TABLE "{table}_p1" PARTITION OF "{table}_p" FOR VALUES FROM (0) TO (10)')
    with pytest.raises(psycopg.Error, match="is not a plain table"):
        db.execute(f"SELECT kde_track('\"{table}_p\"')")
    with pytest.raises(psycopg.Error, match="in an inheritance tree"):
        db.execute(f"SELECT kde_track('\"{table}_p1\"')")
    db.execute(f'DROP TABLE "{table}_p"')


def test_an_owner_cannot_track_by_hand_nor_write_past_disabled_triggers(db, table, login_role):
    """A red team (0.28.0): the owner of a table whose synopsis an administrator built, refused by kde_track,
    created a delete trigger of kde_track's name and shape on _kde_track_apply itself, inserted 900 rows and
    deleted them through it: hard bounds [1070, 1144] rows for 2,000, neither stale nor tracked. Or, on a table
    kde_track tracked: ALTER TABLE ... DISABLE TRIGGER, writes, ENABLE TRIGGER. Tracking is kde_tracked's
    record now (only catalog writers add to it), and disabled or dropped triggers end it, the synopses stale."""
    owner, owner_dsn = login_role()
    t = sql.Identifier(table).as_string(db)
    db.execute(f"CREATE TABLE {t} (v int)")
    db.execute(f"INSERT INTO {t} SELECT g % 50 FROM generate_series(1, 2000) g")
    db.execute(f"ALTER TABLE {t} OWNER TO {owner}")
    refresh(db, table, "v")
    with psycopg.connect(owner_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TRIGGER kde_track_delete AFTER DELETE ON {t} REFERENCING OLD TABLE AS kde_old "
                     "FOR EACH STATEMENT EXECUTE FUNCTION _kde_track_apply()")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # nor by writing kde_tracked itself
            conn.execute("INSERT INTO kde_tracked (relid) VALUES (%s::regclass)", (t,))
        conn.execute(f"INSERT INTO {t} SELECT 7 FROM generate_series(1, 900)")
        conn.execute(f"DELETE FROM {t} WHERE v = 7")  # (the 40 rows of 7 the refresh saw go too)
    exact = db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
    count = db.execute("SELECT * FROM approx_count_ci(%s, 'v', NULL, NULL)", (t,)).fetchone()
    assert exact == 1960 and count == (2000, 2000, 2000)  # as of the refresh: the trigger applied nothing
    db.execute(f"DROP TRIGGER kde_track_delete ON {t}")
    # tracked by kde_track; a trigger disabled, a write it misses, enabled again: tracking ended, stale
    refresh(db, table, "v")
    db.execute("SELECT kde_track(%s::regclass)", (t,))
    assert state(db, table, "v")[:3] == (False, None, True)
    with psycopg.connect(owner_dsn, autocommit=True) as conn:
        conn.execute(f"ALTER TABLE {t} DISABLE TRIGGER kde_track_insert")
        conn.execute(f"INSERT INTO {t} VALUES (1), (2)")
        conn.execute(f"ALTER TABLE {t} ENABLE TRIGGER kde_track_insert")
        conn.execute(f"DELETE FROM {t} WHERE v = 3")
    assert state(db, table, "v")[:3] == (
        True, "tracking could not apply a write: its tracking triggers were disabled, dropped or changed", False)
    assert db.execute("SELECT count(*) FROM kde_tracked WHERE relid = %s::regclass", (t,)).fetchone()[0] == 0
    # a dropped trigger likewise; kde_untrack, on purpose, leaves the synopses fresh
    for stop in (f"DROP TRIGGER kde_track_update ON {t}", f"SELECT kde_untrack('{t}')"):
        refresh(db, table, "v")
        db.execute("SELECT kde_track(%s::regclass)", (t,))
        db.execute(stop)
        assert state(db, table, "v")[2] is False
        assert state(db, table, "v")[0] is ("DROP" in stop)


def test_truncate_of_a_tracked_table_leaves_its_synopses_stale_until_a_refresh(db, table):
    """A red team (0.28.0): after TRUNCATE the synopsis was stale, but tracked inserts were added to the rows
    before it: approx_count_ci read [11850, 11850] for 1 row. TRUNCATE now stops the writes' application until
    a refresh, which takes tracking up again."""
    rng = np.random.default_rng(4)
    t = sql.Identifier(table).as_string(db)
    load(db, table, {"v": rng.integers(0, 100, 3000).astype(float)})
    refresh(db, table, "v")
    db.execute("SELECT kde_track(%s::regclass)", (t,))
    db.execute(f"TRUNCATE {t}")
    db.execute(f"INSERT INTO {t} VALUES (5)")
    # (the insert after the TRUNCATE not applied: the rows before it)
    assert state(db, table, "v") == (True, "tracking could not apply a write: the table was truncated", True, 3000)
    refresh(db, table, "v")
    db.execute(f"INSERT INTO {t} VALUES (5), (6)")
    assert state(db, table, "v")[:3] == (False, None, True)
    assert db.execute("SELECT * FROM approx_count_ci(%s, 'v', NULL, NULL)", (t,)).fetchone() == (3, 3, 3)
    check_exact(payload(db, table, "v"), values(db, table, "v"), rng)


def test_a_conditional_trigger_or_a_parent_joined_later_ends_tracking(db, table, login_role):
    """A second red team (0.29.0's first build): a tracked table's owner replaced the insert trigger by one
    WHEN a setting was off (CREATE OR REPLACE TRIGGER), or made the table a child (ALTER TABLE ... INHERIT,
    ATTACH PARTITION) and wrote through the parent: 900 rows unseen, [1000, 1000] for 1,900, tracked and
    fresh. Such triggers are not kde_track's, and a table in an inheritance tree is not tracked."""
    owner, owner_dsn = login_role()
    t = sql.Identifier(table).as_string(db)
    parent = sql.Identifier(table + "_p").as_string(db)
    db.execute(f"CREATE TABLE {t} (v int)")
    db.execute(f"INSERT INTO {t} SELECT g % 20 FROM generate_series(1, 20000) g")
    db.execute(f"ALTER TABLE {t} OWNER TO {owner}")
    db.execute(f"CREATE TABLE {parent} (v int)")
    db.execute(f"ALTER TABLE {parent} OWNER TO {owner}")
    broken = (True, "tracking could not apply a write: its tracking triggers were disabled, dropped or changed", False)
    for tamper in (f"CREATE OR REPLACE TRIGGER kde_track_insert AFTER INSERT ON {t} REFERENCING NEW TABLE AS kde_new "
                   "FOR EACH STATEMENT WHEN (current_setting('app.skip', true) IS DISTINCT FROM 'on') "
                   "EXECUTE FUNCTION _kde_track_apply()",
                   f"ALTER TABLE {t} INHERIT {parent}"):
        refresh(db, table, "v")
        db.execute("SELECT kde_track(%s::regclass)", (t,))
        assert state(db, table, "v")[:3] == (False, None, True)
        with psycopg.connect(owner_dsn, autocommit=True) as conn:
            conn.execute(tamper)
        assert state(db, table, "v")[:3] == broken, tamper
        with psycopg.connect(owner_dsn, autocommit=True) as conn:
            if "INHERIT" in tamper:
                conn.execute(f"ALTER TABLE {t} NO INHERIT {parent}")
            else:
                conn.execute(f"DROP TRIGGER kde_track_insert ON {t}")


def test_a_write_of_values_near_float8s_largest_is_taken_not_refused(db, table):
    """A red team on 0.30.0: the trigger summed the written values' magnitudes for the sums' slack in SQL, whose
    float8 operators raise past float8's range, so the user's INSERT of -1.5e308 and -1.6e308 into a tracked table
    of values near ±1.7e308 failed with "value out of range: overflow" (as did a later write of small values
    where the slack had grown large). The slack is now IEEE arithmetic in C (_kde_track_slack): the writes are
    taken, the slack is infinite (a cut cell's bounds none to all of its rows), and every sum's hard bounds hold
    the table's exact sum, the server's and the reference's alike."""
    from fractions import Fraction

    x = np.concatenate([np.full(200, 1.7e308), -1e308 - np.arange(1, 101) * 1e304])
    load(db, table, {"v": x})
    refresh(db, table, "v")
    t = sql.Identifier(table).as_string(db)
    db.execute("SELECT kde_track(%s::regclass)", (t,))
    db.execute(f"INSERT INTO {t} VALUES (-1.5e308), (-1.6e308)")
    db.execute(f"INSERT INTO {t} VALUES (1.5), (-2.5)")
    db.execute(f"DELETE FROM {t} WHERE v = -1.5e308")
    stale, reason, tracked, n = state(db, table, "v")
    xs = np.sort(values(db, table, "v"))
    assert tracked and n == len(xs) == 303 and (not stale or reason), (stale, reason)
    row = payload(db, table, "v")
    assert row["sum_slack"] == float("inf") or stale
    for lo, hi in ((None, None), (-1.7e308, -1e308), (0.0, None), (-3.0, 2.0), (-1.6e308, -1.6e308)):
        got = db.execute("SELECT (_kde_range(s, %s, %s, 1)).* FROM kde_synopsis s WHERE s.relid = %s::regclass "
                         "AND s.cols = '{v}'", (lo, hi, t)).fetchone()
        r = range_1d(row, lo, hi, 1)
        assert (got[2], got[3]) == (r.low, r.high) and (got[0] == r.estimate or (math.isnan(got[0]) and math.isnan(r.estimate)))
        keep = xs[(xs >= (-np.inf if lo is None else lo)) & (xs <= (np.inf if hi is None else hi))]
        exact = sum((Fraction(float(v)) for v in keep), Fraction(0))
        assert got[2] <= exact <= got[3], (lo, hi, got)


@pytest.mark.parametrize("write, rows", [("INSERT INTO {t} VALUES (1e400)", 502),
                                         ("INSERT INTO {t} VALUES (-1e-400), (3)", 503),
                                         ("UPDATE {t} SET v = v * 1e400 WHERE v = 7", 501)])
def test_a_numeric_value_past_float8s_range_written_leaves_the_synopsis_stale(db, table, write, rows):
    """A red team on 0.31.0's first build (older than it): a numeric value beyond float8's range written to a
    tracked table raised in the trigger's conversion ("pg_kde: a numeric value of magnitude about 1e400 is beyond
    float8's range") and rolled the user's write back. The refresh refuses such values; the write is now taken
    and the synopsis left stale with the reason, as for NaN or infinite values."""
    load(db, table, {"v": np.arange(1.0, 501.0)}, {"v": "numeric"})
    refresh(db, table, "v")
    t = sql.Identifier(table).as_string(db)
    db.execute("SELECT kde_track(%s::regclass)", (t,))
    db.execute(f"INSERT INTO {t} VALUES (501)")  # (an ordinary write is applied)
    assert state(db, table, "v")[:3] == (False, None, True)
    db.execute(write.format(t=t))
    stale, reason, tracked, _ = state(db, table, "v")
    assert stale and "beyond float8's range" in reason and tracked, (stale, reason)
    assert db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] == rows


def test_a_domain_over_numeric_past_float8s_range_leaves_the_synopsis_stale(db, table):
    """The same through a domain over numeric, whose values the trigger read with numeric's cast (which raised)."""
    dom = f"{table}_amount"
    db.execute(sql.SQL("CREATE DOMAIN {} AS numeric CHECK (VALUE IS NOT NULL)").format(sql.Identifier(dom)))
    t = sql.Identifier(table).as_string(db)
    try:
        db.execute(sql.SQL("CREATE TABLE {} (v {})").format(sql.Identifier(table), sql.Identifier(dom)))
        db.execute(f"INSERT INTO {t} SELECT g FROM generate_series(1, 500) g")
        refresh(db, table, "v")
        db.execute("SELECT kde_track(%s::regclass)", (t,))
        db.execute(f"INSERT INTO {t} VALUES (2e400)")
        stale, reason, tracked, _ = state(db, table, "v")
        assert stale and "beyond float8's range" in reason and tracked, (stale, reason)
    finally:
        db.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table)))
        db.execute(sql.SQL("DROP DOMAIN IF EXISTS {}").format(sql.Identifier(dom)))


def test_columns_named_as_the_triggers_own_aliases_are_tracked_exactly(db, table):
    """The trigger reads each written row's value once, from a subquery whose outputs it names kde_v and kde_c:
    columns of those names (a numeric and a float8, each other's name for the other's role) are tracked as any
    other, their synopses exact after inserts, an update and a delete, and a numeric past float8's range written
    to kde_v still leaves its synopsis stale, not kde_c's."""
    rng = np.random.default_rng(47)
    n = 3000
    load(db, table, {"kde_v": np.round(rng.lognormal(2.0, 0.8, n), 2), "kde_c": rng.gamma(2.0, 3.0, n)},
         {"kde_v": "numeric"})
    for col in ("kde_v", "kde_c"):
        refresh(db, table, col)
    t = sql.Identifier(table).as_string(db)
    assert db.execute("SELECT kde_track(%s::regclass)", (t,)).fetchone()[0] == 2
    db.execute(f"INSERT INTO {t} SELECT round((exp(2 + random()))::numeric, 2), random() * 40 FROM generate_series(1, 500)")
    db.execute(f"UPDATE {t} SET kde_v = kde_v + 1, kde_c = kde_c / 2 WHERE kde_c > 30")
    db.execute(f"DELETE FROM {t} WHERE kde_v < 3")
    for col in ("kde_v", "kde_c"):
        assert state(db, table, col)[:3] == (False, None, True), col
        check_exact(payload(db, table, col), values(db, table, col), rng, queries=40)
    db.execute(f"INSERT INTO {t} VALUES (1e400, 1.5)")
    assert state(db, table, "kde_v")[0] and "beyond float8's range" in state(db, table, "kde_v")[1]
    assert state(db, table, "kde_c")[:3] == (False, None, True)


def test_a_write_inside_the_grid_keeps_its_ends_and_densities_one_beyond_moves_them(db, table):
    """The trigger keeps the stored grid and densities where a write leaves them as they were (0.31.0: TOAST then
    keeps their copy), and writes new ones where a value passes the grid's ends: the ends move out to it (half a
    step out on a lattice) and the densities, relative to the grid's mean density, scale with the range."""
    rng = np.random.default_rng(5)
    load(db, table, {"amount": np.round(rng.lognormal(3.0, 0.5, 20000), 2)}, {"amount": "numeric"})
    refresh(db, table, "amount")
    t = sql.Identifier(table).as_string(db)
    db.execute("SELECT kde_track(%s::regclass)", (t,))
    before = payload(db, table, "amount")
    assert len(before["grid"]) >= 2
    inside = round((before["grid"][0] + before["grid"][-1]) / 2, 2)
    db.execute(f"INSERT INTO {t} (amount) VALUES (%s), (%s)", (inside, inside))
    after = payload(db, table, "amount")
    assert after["grid"] == before["grid"] and after["density"] == before["density"]
    assert after["kde_rows"] == before["kde_rows"] + 2 and after["cell_cum_count"] != before["cell_cum_count"]
    far = round(before["grid"][-1] * 2, 2)
    db.execute(f"INSERT INTO {t} (amount) VALUES (%s)", (far,))
    moved = payload(db, table, "amount")
    assert moved["grid"][0] == before["grid"][0] and moved["grid"][1:-1] == before["grid"][1:-1]
    assert moved["grid"][-1] == pytest.approx(far + 0.005, abs=1e-9)
    scale = (moved["grid"][-1] - moved["grid"][0]) / (before["grid"][-1] - before["grid"][0])
    np.testing.assert_allclose(moved["density"], np.float32(np.array(before["density"]) * scale), rtol=1e-6)
    check_exact(moved, values(db, table, "amount"), rng, 50)


@pytest.mark.skipif(shutil.which("pg_dump") is None, reason="pg_dump is not installed")
def test_a_restored_dump_keeps_tracking(server_dsn, database, db, table):
    """A red team (0.31.0, older): after pg_dump and pg_restore, every tracked table was untracked, its synopses
    stale "its tracking triggers were disabled, dropped or changed": kde_tracked's rows come with the data and the
    restore creates the four triggers one command each, so the first found the set incomplete. A restored copy
    keeps tracking: its synopses stale until a refresh reads its rows again (a write before the set was whole
    may have fired none of the triggers), then its writes applied exactly."""
    rng = np.random.default_rng(8)
    load(db, table, {"amount": np.round(rng.lognormal(3.0, 0.7, 5000), 2)}, {"amount": "numeric"})
    refresh(db, table, "amount")
    t = sql.Identifier(table).as_string(db)
    db.execute("SELECT kde_track(%s::regclass)", (t,))
    db.execute(f"INSERT INTO {t} (amount) VALUES (1.25), (20.00), (99999.99)")  # (one beyond the grid)
    with restored_copy(server_dsn, database) as restored, psycopg.connect(restored, autocommit=True) as conn:
        stale, reason, tracked, n_rows = state(conn, table, "amount")
        assert (stale, reason, tracked, n_rows) == (
            True, "tracking could not apply a write: its tracking triggers were created after its rows (a restore)",
            True, 5003)
        assert conn.execute("SELECT count(*) FROM kde_tracked WHERE relid = %s::regclass", (t,)).fetchone()[0] == 1
        before = payload(conn, table, "amount")
        conn.execute(f"INSERT INTO {t} (amount) VALUES (3.50), (3.50), (150000.00)")
        conn.execute(f"DELETE FROM {t} WHERE amount = 20.00")
        assert payload(conn, table, "amount") == before  # (stale: none applied until the refresh)
        refresh(conn, table, "amount")
        check_exact(payload(conn, table, "amount"), values(conn, table, "amount"), rng, 50)
        assert state(conn, table, "amount")[:3] == (False, None, True)
        conn.execute(f"INSERT INTO {t} (amount) VALUES (7.77)")
        assert state(conn, table, "amount")[:3] == (False, None, True)
        check_exact(payload(conn, table, "amount"), values(conn, table, "amount"), rng, 50)
    assert state(db, table, "amount")[:3] == (False, None, True)  # (the original, untouched)
