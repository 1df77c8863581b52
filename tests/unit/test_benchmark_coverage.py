"""benchmarks/coverage.py's own code: the doubt weight's what-if and the floor of a count of a few rows (the
build's calibrated weight: tests/unit/test_synopsis_calibration.py)."""

import math

import numpy as np
import pytest
from benchhelpers import load_benchmark
from scipy.stats import binom, norm

from pg_kde.synopsis import query
from pg_kde.synopsis.query import interval_1d, range_1d

# benchmarks/coverage.py imports budget.py, which imports psycopg: on a machine without it (the GPU machine
# of `make gpu-check`, whose Python has no psycopg) the module is skipped, not an error that stops collection
pytest.importorskip("psycopg", reason="benchmarks/coverage.py imports psycopg (through budget.py)")
bench = load_benchmark("coverage.py")


def _built(column: str, rows: int, budget: int = 2048, seed: int = 0):
    x = np.sort(bench.sales(rows, np.random.default_rng([2026, seed]))[column])
    kind, period = bench.COLUMNS[column]
    return x, kind, bench.synopsis(x, budget, period)


def test_coverage_what_if_weighs_the_doubt_in_place_of_the_builds_weight():
    """--doubt-weight: the intervals of a cut cell whose shape is far from the straight line narrow with a
    smaller weight (with 0, to the rows' own spread) and widen with a larger one than the build's calibrated
    weight; without it, coverage() answers with the synopsis' own weights, and the payload is left as it was."""
    x, _, s = _built("amount", 200_000)
    lo, hi = np.quantile(x, [0.03, 0.6]), np.quantile(x, [0.4, 0.97])
    own = query.doubt_weight(s)
    assert 0 < own < 3.0 and s["doubt_weight"] == own  # (calibrated by the build)
    # (the what-if weighs every cell alike: the groups' weights, doubt_weights, give way to it)
    assert s["doubt_weights"] is not None
    widths = [[interval_1d(s if w is None else dict(s, doubt_weight=w, doubt_weights=None), float(a), float(b), 0.95)
               for a, b in zip(lo, hi)] for w in (0.0, None, 3.0)]
    for k in range(2):
        assert widths[0][k][2] - widths[0][k][1] <= widths[1][k][2] - widths[1][k][1] <= widths[2][k][2] - widths[2][k][1]
        assert widths[0][k][2] - widths[0][k][1] < widths[2][k][2] - widths[2][k][1]
    # answers at the top of the build's intervals: inside them and the wider ones, outside the narrower ones
    loads = {"data": (lo, hi, np.array([high for _, _, high in widths[1]]))}
    for w, share in ((None, 1.0), (3.0, 1.0), (0.0, 0.0)):
        assert bench.coverage(s, loads, w)["data"][:2] == (share, 2) and s["doubt_weight"] == own


def test_binomial_matches_scipy_and_keeps_its_whole_mass():
    for n, f in ((1, 0.3), (7, 0.5), (50, 0.1), (100_000, 1e-4), (10_000, 0.5)):
        first, law = bench.binomial(n, f)
        assert abs(law.sum() - 1) < 1e-12
        assert np.abs(law - binom.pmf(np.arange(first, first + len(law)), n, f)).max() < 1e-9 * law.max()
        assert binom.cdf(first - 1, n, f) < 1e-25 and binom.sf(first + len(law) - 1, n, f) < 1e-25
    assert bench.binomial(5, 0.0) == (0, pytest.approx(np.ones(1))) and bench.binomial(5, 1.0)[0] == 5


def test_a_ranges_count_law_centres_on_the_estimate_and_a_points_on_its_slot():
    """count_law: the cut cells' binomial laws convolved, with their mean at pg_kde's estimate of the cut cells'
    rows; a held point's, one more than its slot expects. The floor is the likeliest count's chance: small for
    a range over thousands of rows, e^(−λ) about for a point of a time column whose slot expects λ < 1."""
    x, _, s = _built("amount", 200_000)
    grid, counts = s["grid"], s["cell_cum_count"]
    for c in (1, len(grid) // 2, len(grid) - 4):
        a = float(np.round(grid[c] * 0.7 + grid[c + 1] * 0.3, 2))
        b = float(np.round(grid[c + 2] * 0.4 + grid[c + 3] * 0.6, 2))
        first, law = bench.count_law(s, a, b)
        mean = first + np.dot(np.arange(len(law)), law)
        cells = range_1d(s, a, b, 0).estimate - (counts[c + 2] - counts[c + 1])  # the whole cell between is exact
        assert mean == pytest.approx(cells, rel=1e-6)
        # spread over dozens to hundreds of counts (the last range cuts tail cells of 51 and 188 rows): about a
        # normal law's peak, 1 / √(2π·variance)
        variance = np.dot((np.arange(len(law)) - (mean - first)) ** 2, law)
        assert bench.query_floor(s, a, b) == law.max() == pytest.approx(1 / math.sqrt(2 * math.pi * variance), rel=0.01)
        assert law.max() < 0.06
    t, _, ts = _built("created_at", 200_000)
    point = float(t[len(t) // 2])
    first, law = bench.count_law(ts, point, point)
    expected = bench._cells_rows(ts, bench._empty_cells(ts), point, point + ts["step"] / 4)
    assert first + np.dot(np.arange(len(law)), law) == pytest.approx(1 + expected * (1 - 1 / 200_000), rel=1e-3)
    assert expected < 1 and bench.query_floor(ts, point, point) == pytest.approx(np.exp(-expected), abs=0.01)


def test_draws_of_a_sparse_workload_pool_by_their_inexact_queries():
    """together(): the coverage and floor of several draws of one workload are their inexact queries' own, each
    draw weighing its number of them (a draw with none adds nothing; none at all is NaN)."""
    Covered = bench.Covered
    got = bench.together([Covered(0.9, 100, 0.1), Covered(float("nan"), 0, float("nan")), Covered(1.0, 300, 0.5)])
    assert got.inexact == 400 and got.coverage == pytest.approx(0.975) and got.floor == pytest.approx(0.4)
    none = bench.together([Covered(float("nan"), 0, float("nan"))])
    assert none.inexact == 0 and np.isnan(none.coverage) and np.isnan(none.floor)
    assert 0 < bench.LEAST_INEXACT and bench.DRAWS > 1


def test_a_query_that_cuts_no_cell_is_exact_and_skipped():
    """cuts_a_cell: a query with no bound between the grid's ends is exact on a lattice (its cells whole or left
    out), so coverage() skips it unanswered; every inexact query has a bound among the cells. Checked on a
    frequency table's few cells (the quantity's) and a cents column's, ranges and points from the data and
    uniform over the column's range."""
    for name, rows in (("qty", 1_000_000), ("amount", 200_000)):
        x, _, s = _built(name, rows)
        grid = s["grid"]
        rng = np.random.default_rng(4)
        ordered = np.sort(x)
        bounds = np.concatenate([ordered[rng.integers(0, len(x), (3000, 2))],
                                 np.round(rng.uniform(x.min(), x.max(), (3000, 2)) / s["step"]) * s["step"]])
        bounds = np.sort(bounds, axis=1)
        bounds = np.concatenate([bounds, np.column_stack([bounds[:, 0], bounds[:, 0]])])
        skipped = 0
        for a, b in bounds.tolist():
            r = range_1d(s, a, b, 0)
            if not bench.cuts_a_cell(s, grid, a, b):
                skipped += 1
                assert r.low == r.high, (name, a, b)
        assert skipped > 100
    assert bench.cuts_a_cell(dict(s, step=0.0), grid, grid[0] - 1, grid[0] - 1)  # (off a lattice: range_1d decides)


def test_the_bands_chance_is_the_binomial_mass_of_shares_within_it():
    """band_chance(n): the Binomial(n, 0.95) mass of the counts k with 93 <= 100k/n <= 97, as scipy gives it;
    with 1,000 queries nearly all of it, with 136 two in three, with 10 none (no share of 10 lies within)."""
    for n in (10, 74, 136, 1000, 4000):
        k = np.arange(n + 1)
        inside = (100 * k / n >= 93.0) & (100 * k / n <= 97.0)
        assert bench.band_chance(n) == pytest.approx(binom.pmf(k[inside], n, 0.95).sum(), abs=1e-12), n
    assert bench.band_chance(10) == 0.0 and bench.band_chance(0) == 0.0
    assert 0.66 < bench.band_chance(136) < 0.68 and bench.band_chance(1000) > 0.996


def test_the_centred_chance_is_the_normal_mass_within_the_band_at_the_data_sets_spread():
    """centred_chance(shares): P(93 <= X <= 97) for X ~ N(95, s²), s the shares' standard deviation with n − 1
    in its divisor, as scipy gives it; the shares' own mean does not enter (centred); 1 without spread, NaN
    for one data set; wider spreads leave less of the band within reach."""
    shares = np.array([93.1, 98.1, 96.5, 97.8, 95.0, 94.2, 97.6, 98.0])
    sd = shares.std(ddof=1)
    want = norm.cdf(2.0 / sd) - norm.cdf(-2.0 / sd)
    assert bench.centred_chance(shares) == pytest.approx(want, abs=1e-12)
    assert bench.centred_chance(shares + 3.0) == pytest.approx(want, abs=1e-12)
    assert bench.centred_chance(np.array([96.0, 96.0, 96.0])) == 1.0
    assert np.isnan(bench.centred_chance(np.array([95.0])))
    narrow, wide = bench.centred_chance(np.array([94.0, 96.0])), bench.centred_chance(np.array([92.0, 98.0]))
    assert 0 < wide < narrow < 1
    assert bench.centred_chance(np.array([95.0 - 2.3, 95.0 + 2.3])) == pytest.approx(
        norm.cdf(2 / (2.3 * np.sqrt(2))) - norm.cdf(-2 / (2.3 * np.sqrt(2))), abs=1e-12)


def test_packed_cells_bytes_are_the_packs_and_none_where_the_cells_do_not_pack():
    """packed_cells_bytes: the length of pg_kde.synopsis.packing.pack_cells' pack of the synopsis' cells (which
    gives back the very arrays: tests/unit/test_packing.py), far below the catalog's 28 bytes a boundary; None
    where they do not pack (no lattice, one boundary)."""
    from pg_kde.synopsis.packing import pack_cells, unpack_cells
    x, _, s = _built("amount", 200_000)
    size = bench.packed_cells_bytes(s)
    pack = pack_cells(s["grid"], s["cell_cum_count"], s["cell_cum_sum"], s["density"], s["step"])
    assert size == len(pack) < 16 * len(s["grid"]) and unpack_cells(pack, s["step"])[0] == s["grid"]
    assert bench.packed_cells_bytes(dict(s, step=0.0)) is None
    assert bench.packed_cells_bytes(dict(s, grid=s["grid"][:1], cell_cum_count=[0.0], cell_cum_sum=[0.0],
                                         density=[1.0])) is None
    # (the budget's count with the cells packed: the arrays' bytes less the pack's)
    assert bench.packed_stored_bytes(s, size) == bench.packed_stored_bytes(s, 28 * len(s["grid"])) - (
        28 * len(s["grid"]) - size)


def test_boundary_bytes_plans_the_cells_as_if_and_is_undone():
    """--boundary-bytes: inside boundary_bytes(12) a build plans more cells within the same budget, and the
    planner's bytes are the catalog's again after, an error inside included."""
    from pg_kde.synopsis import build as build_module, cells as cells_module
    x = bench.sales(200_000, np.random.default_rng([2026, 1]))["amount"]
    stored = len(bench.synopsis(x, 2048)["grid"])
    with bench.boundary_bytes(12):
        assert cells_module.BOUNDARY_BYTES == build_module.BOUNDARY_BYTES == 12
        planned = len(bench.synopsis(x, 2048)["grid"])
    assert planned > 2 * stored
    with pytest.raises(RuntimeError):
        with bench.boundary_bytes(10):
            raise RuntimeError("inside")
    assert cells_module.BOUNDARY_BYTES == build_module.BOUNDARY_BYTES == bench.BOUNDARY_BYTES == 28
    with bench.boundary_bytes(None):
        assert cells_module.BOUNDARY_BYTES == 28


def test_boundary_bytes_what_if_reads_one_size_or_each_columns():
    assert bench.what_if_bytes(None) == {}
    assert bench.what_if_bytes("12") == {None: 12}
    assert bench.what_if_bytes("amount=13, qty=10,created_at=16") == {"amount": 13, "qty": 10, "created_at": 16}
    for bad in ("0", "65", "x", "amount=13,amount=14", "price=3", "amount=", "amount=13,12"):
        with pytest.raises(ValueError, match="--boundary-bytes"):
            bench.what_if_bytes(bad)
