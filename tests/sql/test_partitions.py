"""Partitioned tables on the real server: kde_refresh on the parent builds one synopsis per partition (each
partition's own, read by approx_* on it), on the parent's grid, and merges them into the parent's; its cells
are exact and the hard bounds hold; only partitions that changed are rebuilt; new partitions and growth
are followed; a role that may not read a partition cannot refresh the parent."""

import numpy as np
import pytest

psycopg = pytest.importorskip("psycopg")
from psycopg.rows import dict_row  # noqa: E402

from pg_kde.synopsis.query import heavy_values, range_1d  # noqa: E402
from sqlhelpers import assert_exact_cells  # noqa: E402

MONTH = 30 * 86400.0
START = 1.7e9


@pytest.fixture
def sales(db, table):
    """A table partitioned by month on t (epoch seconds as float8), with cents in amount: 3 partitions."""
    rng = np.random.default_rng(8)
    n = 30000
    t = np.floor(START + rng.uniform(0, 3 * MONTH, n))
    amount = np.round(rng.lognormal(3.0, 1.0, n), 2)
    db.execute(f'CREATE TABLE "{table}" (t float8, amount numeric(12,2)) PARTITION BY RANGE (t)')
    for k in range(4):  # the fourth month stays empty
        db.execute(f'CREATE TABLE "{table}_{k}" PARTITION OF "{table}" FOR VALUES FROM ({START + k * MONTH}) '
                   f'TO ({START + (k + 1) * MONTH})')
    with db.cursor().copy(f'COPY "{table}" (t, amount) FROM STDIN') as cp:
        for a, b in zip(t, amount):
            cp.write_row((float(a), float(b)))
    db.execute(f'ANALYZE "{table}"')
    return table


def payload(db, relation, col):
    with db.cursor(row_factory=dict_row) as cur:
        return cur.execute("SELECT * FROM kde_synopsis WHERE relid = %s::regclass AND cols = ARRAY[%s]",
                           (f'"{relation}"', col)).fetchone()


def column(db, relation, col):
    return np.array([r[0] for r in db.execute(f'SELECT {col}::float8 FROM "{relation}" WHERE {col} IS NOT NULL')],
                    dtype=float)


def check_exact_and_bounded(row, x, rng, queries=150):
    assert_exact_cells(row, x)
    xs = np.sort(x)
    for i in range(queries):
        lo, hi = np.sort(rng.choice(xs, 2) if i % 2 else rng.uniform(xs[0], xs[-1], 2))
        truth = int(((xs >= lo) & (xs <= hi)).sum())
        r = range_1d(row, float(lo), float(hi), 0)
        assert r.low - 1e-6 <= truth <= r.high + 1e-6, (lo, hi, truth, r)


def refresh(db, relation, col):
    return db.execute("SELECT kde_refresh(%s::regclass, %s)", (f'"{relation}"', col)).fetchone()[0]


def test_parent_merges_its_partitions_and_rebuilds_only_what_changed(db, sales):
    rng = np.random.default_rng(2)
    for col in ("t", "amount"):  # the partition key (disjoint ranges) and a column across them
        summary = refresh(db, sales, col)
        assert (summary["partitions"], summary["rebuilt"], summary["reused"], summary["empty_partitions"]) == (4, 3, 0, 1)
        assert summary["method"] == "merge" and summary["rows"] == 30000
        row = payload(db, sales, col)
        check_exact_and_bounded(row, column(db, sales, col), rng)
        for k in range(3):  # each partition has its own synopsis, on the parent's grid where it reaches
            part = payload(db, f"{sales}_{k}", col)
            check_exact_and_bounded(part, column(db, f"{sales}_{k}", col), rng, 30)
            inner = np.asarray(part["grid"][1:-1])
            assert np.isin(inner, row["grid"]).mean() > 0.8
        est = db.execute(f"SELECT approx_count('\"{sales}_1\"', %s, 10, 20)", (col,)).fetchone()[0]
        assert est is not None
    # nothing changed: every partition reused, the same synopsis
    before = db.execute("SELECT md5(p::text) FROM kde_synopsis p WHERE relid = %s::regclass AND cols = '{amount}'",
                        (f'"{sales}"',)).fetchone()[0]
    summary = refresh(db, sales, "amount")
    assert (summary["rebuilt"], summary["reused"]) == (0, 3)
    assert db.execute("SELECT md5(p::text) FROM kde_synopsis p WHERE relid = %s::regclass AND cols = '{amount}'",
                      (f'"{sales}"',)).fetchone()[0] == before
    # growth into one month and a new month: the parent is stale, two partitions are rebuilt
    db.execute(f'INSERT INTO "{sales}" SELECT t + 1, amount + 0.01 FROM "{sales}_1"')
    db.execute(f'CREATE TABLE "{sales}_9" PARTITION OF "{sales}" FOR VALUES FROM ({START + 9 * MONTH}) '
               f'TO ({START + 10 * MONTH})')
    db.execute(f'INSERT INTO "{sales}" SELECT t + 9 * {MONTH}, amount * 2 FROM "{sales}_0" WHERE amount < 30')
    stale = db.execute("SELECT stale FROM kde_synopses WHERE relid = %s::regclass AND cols = '{t}'",
                       (f'"{sales}"',)).fetchone()[0]
    assert stale
    for col in ("t", "amount"):
        summary = refresh(db, sales, col)
        assert (summary["partitions"], summary["rebuilt"], summary["reused"]) == (5, 2, 2)
        check_exact_and_bounded(payload(db, sales, col), column(db, sales, col), rng)
    assert not db.execute("SELECT bool_or(stale) FROM kde_synopses WHERE relid = %s::regclass",
                          (f'"{sales}"',)).fetchone()[0]


def test_a_partition_refreshed_alone_keeps_the_parents_grid(db, sales):
    refresh(db, sales, "amount")
    parent = payload(db, sales, "amount")
    db.execute(f'DELETE FROM "{sales}_2" WHERE amount > 100')
    refresh(db, f"{sales}_2", "amount")
    part = payload(db, f"{sales}_2", "amount")
    assert np.isin(part["grid"][1:-1], parent["grid"]).mean() > 0.8
    summary = refresh(db, sales, "amount")
    assert (summary["rebuilt"], summary["reused"]) == (0, 3)
    check_exact_and_bounded(payload(db, sales, "amount"), column(db, sales, "amount"), np.random.default_rng(4))


def test_a_spike_appended_to_a_month_is_kept_exactly(db, sales):
    """Rows of one value appended to the last month: its partition, built on the parent's cells (which give
    the value no cell of its own), keeps it as a heavy value, exactly, and the merge adds it up. (Before, the
    cell holding it spread its rows by the KDE's shape: a point query read 7,518 of 30,023.)"""
    refresh(db, sales, "amount")
    db.execute(f'INSERT INTO "{sales}" SELECT {START + 2 * MONTH + 5}, 12.34 FROM generate_series(1, 20000)')
    # a small spike too: 30 rows, 0.3% of its month, about half a cell's share (a table of its own would give
    # it a cell of its own)
    db.execute(f'INSERT INTO "{sales}" SELECT {START + MONTH + 5}, 777.77 FROM generate_series(1, 30)')
    summary = refresh(db, sales, "amount")
    assert (summary["rebuilt"], summary["reused"]) == (2, 1)
    for value, relation in ((12.34, sales), (12.34, f"{sales}_2"), (777.77, f"{sales}_1")):
        exact = db.execute(f'SELECT count(*) FROM "{relation}" WHERE amount = %s', (value,)).fetchone()[0]
        est = db.execute("SELECT approx_count(%s::regclass, 'amount', %s, %s)", (f'"{relation}"', value, value)).fetchone()[0]
        assert est == pytest.approx(exact, abs=5), (value, relation)
    check_exact_and_bounded(payload(db, f"{sales}_2", "amount"), column(db, f"{sales}_2", "amount"),
                            np.random.default_rng(5))
    # The parent's heavy value holds that partition's rows of it; the other months' few rows of 12.34 stay in
    # their cells: every count is still exact, and the hard bounds hold.
    parent, x = payload(db, sales, "amount"), np.sort(column(db, sales, "amount"))
    assert parent["kde_rows"] + sum(np.diff([0] + list(heavy_values(parent)[1]))) == len(x)
    rng = np.random.default_rng(6)
    for i in range(200):
        lo, hi = np.sort(rng.choice(x, 2)) if i % 2 else (12.34, 12.34)
        truth = int(((x >= lo) & (x <= hi)).sum())
        r = range_1d(parent, float(lo), float(hi), 0)
        assert r.low - 1e-6 <= truth <= r.high + 1e-6, (lo, hi, truth, r)


def test_a_role_that_cannot_read_a_partition_cannot_refresh_the_parent(db, sales, login_role):
    role, dsn = login_role()
    db.execute(f'GRANT SELECT ON "{sales}" TO {role}')
    db.execute(f"GRANT INSERT, UPDATE, DELETE ON kde_catalog, kde_synopsis TO {role}")
    with psycopg.connect(dsn, autocommit=True) as conn:
        with pytest.raises(psycopg.Error, match="permission denied|privilege"):
            refresh(conn, sales, "amount")
    assert db.execute("SELECT count(*) FROM kde_catalog WHERE relid::text LIKE %s", (f"%{sales}%",)).fetchone()[0] == 0


def pair(db, relation):
    """The stored 2-D synopsis of (t, amount) and the exact counts of its grid cells from the rows."""
    with db.cursor(row_factory=dict_row) as cur:
        row = cur.execute("SELECT * FROM kde_synopsis_2d WHERE relid = %s::regclass AND cols = '{t,amount}'",
                          (f'"{relation}"',)).fetchone()
    rows = np.array(db.execute(f'SELECT t, amount::float8 FROM "{relation}"').fetchall(), dtype=float)
    g1, g2 = np.asarray(row["grid1"]), np.asarray(row["grid2"])
    cells = np.histogram2d(rows[:, 0], rows[:, 1], bins=(g1, g2))[0]
    return row, cells, rows


def refresh_pair(db, relation):
    return db.execute("SELECT kde_refresh(%s::regclass, ARRAY['t', 'amount'])", (f'"{relation}"',)).fetchone()[0]


def test_a_pair_of_a_partitioned_table_merges_its_partitions(db, sales):
    first = refresh_pair(db, sales)
    assert (first["partitions"], first["rebuilt"], first["reused"], first["empty_partitions"]) == (4, 3, 0, 1)
    parent, cells, rows = pair(db, sales)
    # Every partition on the parent's cells, and the parent's tables their sums: exact cell counts.
    sat = np.asarray(parent["sat_count"]).reshape(parent["grid_size"])
    np.testing.assert_array_equal(np.diff(np.diff(sat, axis=0), axis=1), cells)
    kde = np.zeros_like(sat)
    for k in range(3):
        part, part_cells, _ = pair(db, f"{sales}_{k}")
        assert (part["grid1"], part["grid2"]) == (parent["grid1"], parent["grid2"])
        kde += np.asarray(part["kde_sat"]).reshape(sat.shape)
        np.testing.assert_array_equal(np.diff(np.diff(np.asarray(part["sat_count"]).reshape(sat.shape), axis=0),
                                              axis=1), part_cells)
    np.testing.assert_allclose(np.asarray(parent["kde_sat"]).reshape(sat.shape), kde, rtol=1e-12)
    # Boxes on the parent and on a partition, against the rows.
    rng = np.random.default_rng(31)
    for _ in range(20):
        (a, b), (c, d) = np.sort(rng.uniform(START, START + 3 * MONTH, 2)), np.sort(rng.choice(rows[:, 1], 2))
        exact = int(((rows[:, 0] >= a) & (rows[:, 0] <= b) & (rows[:, 1] >= c) & (rows[:, 1] <= d)).sum())
        got = db.execute("SELECT approx_count(%s::regclass, 't', %s, %s, 'amount', %s, %s)",
                         (f'"{sales}"', a, b, c, d)).fetchone()[0]
        assert abs(got - exact) <= 0.05 * exact + 30, (a, b, c, d, got, exact)
    # Unchanged: nothing rebuilt. Growth inside the cells: only that partition.
    assert refresh_pair(db, sales)["reused"] == 3
    db.execute(f'INSERT INTO "{sales}" SELECT {START} + 1000 + g, 12.34 FROM generate_series(1, 500) g')
    grown = refresh_pair(db, sales)
    assert (grown["rebuilt"], grown["reused"], grown["rows"]) == (1, 2, 30500)
    parent, cells, _ = pair(db, sales)
    np.testing.assert_array_equal(np.diff(np.diff(np.asarray(parent["sat_count"]).reshape(parent["grid_size"]),
                                                  axis=0), axis=1), cells)
    # A partition refreshed alone keeps the parent's cells, so the next parent refresh reuses it.
    refresh_pair(db, f"{sales}_2")
    assert pair(db, f"{sales}_2")[0]["grid1"] == parent["grid1"]
    assert refresh_pair(db, sales)["reused"] == 3
    # Rows beyond the cells (a new, larger amount): new cells for the whole table, every partition rebuilt.
    db.execute(f'INSERT INTO "{sales}" VALUES ({START + 2 * MONTH + 5}, 99999.99)')
    wider = refresh_pair(db, sales)
    assert (wider["rebuilt"], wider["reused"]) == (3, 0)
    parent, cells, _ = pair(db, sales)
    assert parent["grid2"][-1] >= 99999.99
    np.testing.assert_array_equal(np.diff(np.diff(np.asarray(parent["sat_count"]).reshape(parent["grid_size"]),
                                                  axis=0), axis=1), cells)
    # The last month detached: no partition's rows reach the outer cells of t any more, so new cells for the
    # two months left, both rebuilt on them.
    db.execute(f'ALTER TABLE "{sales}" DETACH PARTITION "{sales}_2"')
    try:
        narrower = refresh_pair(db, sales)
        assert (narrower["rebuilt"], narrower["reused"]) == (2, 0)
        parent, cells, _ = pair(db, sales)
        assert parent["grid1"][-1] < START + 2 * MONTH
        np.testing.assert_array_equal(np.diff(np.diff(np.asarray(parent["sat_count"]).reshape(parent["grid_size"]),
                                                      axis=0), axis=1), cells)
        assert refresh_pair(db, sales)["reused"] == 2  # and the new cells are reused again
    finally:
        db.execute(f'DROP TABLE "{sales}_2"')


def test_pairs_of_partitions_with_a_discretised_axis_another_request_and_empty_partitions(db, table):
    """A discretised axis (a lattice of ten values) merges on the parent's cells; a changed request (a grid
    size, a budget) plans new cells, also for a partition refreshed alone; a partition whose pairs are all
    NULL counts its rows as NULLs."""
    rng = np.random.default_rng(32)
    n = 9000
    k = rng.integers(0, 3, n)
    a = rng.normal(0, 1, n) + k
    c = np.floor(rng.uniform(0, 10, n)) + 0.5
    db.execute(f'CREATE TABLE "{table}" (k int, a float8, c float8) PARTITION BY LIST (k)')
    for part in range(4):
        db.execute(f'CREATE TABLE "{table}_{part}" PARTITION OF "{table}" FOR VALUES IN ({part})')
    with db.cursor().copy(f'COPY "{table}" FROM STDIN') as cp:
        for row in zip(k, a, c):
            cp.write_row((int(row[0]), float(row[1]), float(row[2])))
        for _ in range(50):  # partition 3: only NULL pairs
            cp.write_row((3, None, 1.5))
    t = f'"{table}"'
    first = db.execute("SELECT kde_refresh(%s::regclass, ARRAY['a', 'c'])", (t,)).fetchone()[0]
    assert (first["rebuilt"], first["empty_partitions"], first["rows"], first["nulls"]) == (3, 1, n, 50)
    with db.cursor(row_factory=dict_row) as cur:
        row = cur.execute("SELECT * FROM kde_synopsis_2d WHERE relid = %s::regclass", (t,)).fetchone()
    assert len(row["lattice2"]) == 10  # the discretised axis
    cells = np.histogram2d(a, c, bins=(row["grid1"], row["grid2"]))[0]
    np.testing.assert_array_equal(np.diff(np.diff(np.asarray(row["sat_count"]).reshape(row["grid_size"]), axis=0),
                                          axis=1), cells)
    exact = int(((a >= 0) & (a <= 1.5) & (c >= 2) & (c <= 6)).sum())
    got = db.execute("SELECT approx_count(%s::regclass, 'a', 0, 1.5, 'c', 2, 6)", (t,)).fetchone()[0]
    assert abs(got - exact) <= 0.05 * exact
    # Another request: new cells, every partition rebuilt on them
    again = db.execute("SELECT kde_refresh(%s::regclass, ARRAY['a', 'c'], grid_size => 12)", (t,)).fetchone()[0]
    assert again["rebuilt"] == 3 and again["grid_size"][0] <= 12
    # A partition refreshed alone with another budget gets cells of its own within that budget
    alone = db.execute("SELECT kde_refresh(%s::regclass, ARRAY['a', 'c'], budget => 4096)",
                       (f'"{table}_1"',)).fetchone()[0]
    assert alone["rows"] == int((k == 1).sum())
    size = db.execute("SELECT bytes FROM kde_synopses WHERE relid = %s::regclass AND cols = '{a,c}'",
                      (f'"{table}_1"',)).fetchone()[0]
    assert size <= 4096


@pytest.mark.parametrize("constant", ["12345678.91", "1234.5", "12345678", "1e300"])
def test_a_partition_of_one_value_off_any_lattice_merges(db, table, constant):
    """Found attacking 0.26.0 (a red team): a default partition holding ten rows of one value that is not a
    whole number (its sample shows no lattice: one value) took a grid of one point from the parent's, and the
    scan refused it ("the grid needs at least 2 values"), so the parent could not be refreshed; a whole
    number worked; so did 1e300 (0.27.0's first fix: v + 1 rounds back to v). Now the partition gets the grid a
    table of that one value gets, and the parent and every partition answer within their hard bounds."""
    db.execute(f'CREATE TABLE "{table}" (v numeric) PARTITION BY RANGE (v)')
    db.execute(f'CREATE TABLE "{table}_a" PARTITION OF "{table}" FOR VALUES FROM (MINVALUE) TO (0)')
    db.execute(f'CREATE TABLE "{table}_b" PARTITION OF "{table}" FOR VALUES FROM (0) TO (1000)')
    db.execute(f'CREATE TABLE "{table}_d" PARTITION OF "{table}" DEFAULT')
    db.execute(f'INSERT INTO "{table}" SELECT round((g % 1000)::numeric - 500 + 0.25, 2) '
               'FROM generate_series(1, 20000) g')
    db.execute(f'INSERT INTO "{table}" SELECT {constant} FROM generate_series(1, 10)')
    refresh(db, table, "v")
    c = float(constant)
    for relation in (table, f"{table}_d"):
        got = db.execute("SELECT (_kde_range(s, %s, %s, 0)).*, (_kde_range(s, NULL, NULL, 0)).* "
                         "FROM kde_synopsis s WHERE s.relid = %s::regclass AND s.cols = '{v}'",
                         (c, c, f'"{relation}"')).fetchone()
        assert got[2] <= 10 <= got[3], (relation, got)
        rows = 20010 if relation == table else 10
        assert got[6] <= rows <= got[7], (relation, got)
    x = column(db, table, "v")
    check_exact_and_bounded(payload(db, table, "v"), x, np.random.default_rng(9), queries=60)


def test_a_parent_is_coarse_where_a_partition_is(db, table):
    """A merge's kde_synopsis.coarse is any part's (0.30.0): one partition's bigint values from 2^53 share
    float8s, and the parent's hard bounds count the rows on a bound's float8 on both sides, as that partition's
    do; its approx_count_ci holds SQL's count."""
    db.execute(f'CREATE TABLE "{table}" (v bigint) PARTITION BY RANGE (v)')
    db.execute(f'CREATE TABLE "{table}_a" PARTITION OF "{table}" FOR VALUES FROM (MINVALUE) TO (1000000)')
    db.execute(f'CREATE TABLE "{table}_b" PARTITION OF "{table}" FOR VALUES FROM (1000000) TO (MAXVALUE)')
    db.execute(f'INSERT INTO "{table}" SELECT g FROM generate_series(1, 5000) g')
    db.execute(f'INSERT INTO "{table}" SELECT 9007199254740992 + g % 2 FROM generate_series(1, 600) g')
    refresh(db, table, "v")
    coarse = dict(db.execute("SELECT relid::text, coarse FROM kde_synopsis WHERE relid::text LIKE %s",
                             (f'%{table}%',)).fetchall())
    assert coarse == {f'"{table}"': True, f'"{table}_a"': False, f'"{table}_b"': True} or \
        coarse == {table: True, f"{table}_a": False, f"{table}_b": True}, coarse
    for relation in (table, f"{table}_b"):
        got = db.execute("SELECT * FROM approx_count_ci(%s, 'v', '9007199254740993', '9007199254740993')",
                         (f'"{relation}"',)).fetchone()
        assert got[1] <= 300 <= got[2] and got[1] < got[2], (relation, got)
