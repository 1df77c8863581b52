"""benchmarks/coverage.py's own code: the doubt weight's what-ifs, the floor of a count of a few rows, and the
calibrated weight."""

import numpy as np
import pytest
from benchhelpers import load_benchmark
from scipy.stats import binom

from pg_kde.synopsis import query
from pg_kde.synopsis.query import interval_1d, range_1d

bench = load_benchmark("coverage.py")


def _built(column: str, rows: int, budget: int = 2048, seed: int = 0):
    x = np.sort(bench.sales(rows, np.random.default_rng([2026, seed]))[column])
    kind, period = bench.COLUMNS[column]
    return x, kind, bench.synopsis(x, budget, period)


def test_coverage_what_if_weighs_the_doubt_and_gives_the_weight_back(monkeypatch):
    """--doubt-weight: the intervals of a cut cell whose shape is far from the straight line narrow with a
    smaller weight (with 0, to the rows' own spread) and widen with a larger one, and pg_kde's weight stands
    again after, whatever happened in between."""
    x, _, s = _built("amount", 200_000)
    lo, hi = np.quantile(x, [0.03, 0.6]), np.quantile(x, [0.4, 0.97])
    weight = query.SHAPE_DOUBT
    widths = []
    for w in (0.0, weight, 3.0):
        monkeypatch.setattr(query, "SHAPE_DOUBT", w)
        widths.append([interval_1d(s, float(a), float(b), 0.95) for a, b in zip(lo, hi)])
    monkeypatch.undo()
    for k in range(2):
        assert widths[0][k][2] - widths[0][k][1] < widths[1][k][2] - widths[1][k][1] < widths[2][k][2] - widths[2][k][1]
    # answers at the top of pg_kde's intervals: inside them and the wider ones, outside the narrower ones
    loads = {"data": (lo, hi, np.array([high for _, _, high in widths[1]]))}
    for w, share in ((None, 1.0), (3.0, 1.0), (0.0, 0.0)):
        got = bench.coverage(s, loads, w)["data"]
        assert got[:2] == (share, 2) and query.SHAPE_DOUBT == weight
    with pytest.raises(TypeError):
        bench.coverage(s, {"data": (lo, hi, None)}, 3.0)  # (fails mid-way: the weight is given back all the same)
    assert query.SHAPE_DOUBT == weight


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
        assert bench.query_floor(s, a, b) == law.max() < 0.05  # spread over hundreds of counts
    t, _, ts = _built("created_at", 200_000)
    point = float(t[len(t) // 2])
    first, law = bench.count_law(ts, point, point)
    expected = bench._cells_rows(ts, bench._empty_cells(ts), point, point + ts["step"] / 4)
    assert first + np.dot(np.arange(len(law)), law) == pytest.approx(1 + expected * (1 - 1 / 200_000), rel=1e-3)
    assert expected < 1 and bench.query_floor(ts, point, point) == pytest.approx(np.exp(-expected), abs=0.01)


def test_calibrated_weight_brings_its_ranges_nearest_95_percent_and_gives_the_weight_back(monkeypatch):
    monkeypatch.setattr(bench, "CALIBRATION_RANGES", 1500)
    x, kind, s = _built("amount", 200_000)
    weight = query.SHAPE_DOUBT
    w = bench.calibrated_weight(s, x, kind, np.random.default_rng(7))
    assert w in bench.WEIGHTS and query.SHAPE_DOUBT == weight
    assert w == bench.calibrated_weight(s, x, kind, np.random.default_rng(7))  # (the same ranges: the same weight)
    # the same ranges' coverage (the interval pg_kde answers, its inexact ranges of both kinds together) at the
    # weight chosen is as near 95% as at any other weight tried
    ranges = bench.calibration_ranges(x, kind, np.random.default_rng(7))
    assert all(len(lo) > 1400 and np.all(lo < hi) for lo, hi, _ in ranges.values())

    def miss(v):
        got = bench.coverage(s, ranges, v)
        return abs(sum(c * n for c, n, _ in got.values()) / sum(n for _, n, _ in got.values()) - 0.95)

    assert all(miss(w) <= miss(v) + 1e-12 for v in {0.2, 0.6, 1.0, 1.6, 2.5} - {w})
    assert query.SHAPE_DOUBT == weight
    # a column the synopsis holds exactly (a few values, a frequency table): no inexact range, pg_kde's weight
    few = np.sort(np.random.default_rng(3).integers(0, 20, 50_000).astype(np.float64))
    exact = bench.synopsis(few, 2048)
    assert bench.calibrated_weight(exact, few, "integer", np.random.default_rng(1)) == weight


@pytest.mark.parametrize("column,budget", [("amount", 2048), ("amount", 65536), ("qty", 2048), ("created_at", 8192)])
def test_calibration_terms_from_cut_pieces_equal_the_reference_range_by_range(monkeypatch, column, budget):
    """calibration_terms' ranges, put together from each bound's cut piece, the whole cells between and the
    heavy values' exact rows, give range_terms' estimate, spread and hard bounds' verdict exactly and its doubt
    to 1e-9 (a square root and its square again), on both kinds of calibration ranges: over many cells, inside
    one, and among heavy values alone (qty's)."""
    monkeypatch.setattr(bench, "CALIBRATION_RANGES", 1500)
    x, kind, s = _built(column, 200_000, budget)
    for name, (lo, hi, _) in bench.calibration_ranges(x, kind, np.random.default_rng(11)).items():
        est, spread, doubt, inexact = bench.calibration_terms(s, lo, hi)
        want = [bench.range_terms(s, float(a), float(b)) for a, b in zip(lo, hi)]
        assert est.tolist() == [w[0] for w in want] and spread.tolist() == [w[1] for w in want], name
        assert inexact.tolist() == [w[3] for w in want], name
        assert doubt == pytest.approx([w[2] for w in want], rel=1e-9, abs=1e-12), name
        # (qty's cuts lie among its heavy values, where every range is exact: the branch with no cell)
        assert inexact.sum() > 300 if column != "qty" else not inexact.any(), (name, inexact.sum())
