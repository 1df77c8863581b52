"""The build's calibration of the shape's doubt (pg_kde.synopsis.calibration): the scan's cuts count the rows
below them exactly and leave the synopsis as it was, the ranges between them are put together as the
reference answers them, and the stored weight is the one whose intervals cover those ranges nearest 95%."""

import dataclasses
import json

import numpy as np
import pytest

from pg_kde.synopsis import ArrayTableReader, Requested, build, build_1d, calibration, query
from pg_kde.synopsis.calibration import (SEED, WEIGHTS, Counts, among_probes, among_ranges, calibrated_weight,
                                         calibration_ranges, calibration_terms, counts_of, cuts_of, fold_scan,
                                         probes, range_terms, rows_below, uniform_ranges)
from pg_kde.synopsis.cells import DAY_PROFILE


def _column(name: str, rows: int, seed: int = 0) -> np.ndarray:
    """Columns like benchmarks/budget.py's: log-normal cents, Zipf-like integers, whole seconds with a daily
    rhythm; "qty-heavy", the Zipf-like integers with a heavier tail (P(X >= k) = k^-0.9: 2,500 values in 10⁶
    rows, whose frequency table does not fit 2 KB, where budget.py's 950 do since 0.31.0's packs)."""
    rng = np.random.default_rng([2026, seed])
    if name == "amount":
        return np.round(np.exp(3 + rng.standard_normal(rows)), 2)
    if name in ("qty", "qty-heavy"):
        return np.minimum(np.floor(1 / np.power(1 - rng.random(rows), 1 / (1.2 if name == "qty" else 0.9))), 100000.0)
    day = np.floor(366 * (np.sqrt(1 + 8 * rng.random(rows)) - 1) / 2) * 86400
    clock = np.mod(np.floor(46800 + 12600 * rng.standard_normal(rows)), 86400)
    return 1704067200.0 + day + clock


def _build(x: np.ndarray, budget: int = 2048, period=None):
    reader = ArrayTableReader((x,), blocks=(157, 1024))
    return build_1d(reader, Requested("auto", 50000, None, "auto", budget), period=period)


def _ranges(x: np.ndarray, step: float, rng, n: int = 1500):
    """Ranges [lo, hi] of lattice values: between values at random ranks, and between evenly spaced values."""
    ordered = np.sort(x)
    data = ordered[rng.integers(0, len(x), (n, 2))]
    even = np.round(rng.uniform(ordered[0], ordered[-1], (n, 2)) / step) * step
    pairs = np.sort(np.concatenate([data, even]), axis=1)
    return pairs[pairs[:, 0] < pairs[:, 1]].T


def test_the_scans_cuts_count_the_rows_below_them_and_fold_back_into_the_plans_cells():
    """A scan over the grid and the calibration's cuts (with a half-step beyond them each side, some of them
    beyond the grid), folded back, is the scan over the grid (rows and exact sums per cell, everything else the
    same); the rows below each cut are the column's rows below it, heavy values counted apart included; the
    ranges between the calibration's values have the cuts as their bounds moved out, and exact counts."""
    x = _column("amount", 60_000)
    step = 0.01
    # a grid placed on a part of the column (as a sample of blocks may), and bounds over its whole range
    points = np.unique((np.round(np.quantile(x, np.linspace(0.01, 0.99, 30)) / step) + 0.5) * step)
    ranked, even = probes(x[:20_000], (x.min(), x.max()), step)
    assert len(ranked) == calibration.PROBES and np.all(ranked == np.round(ranked))
    # (repeats kept: common values come up often in the data)
    assert len(np.unique(probes(_column("qty", 20_000), (1.0, 1e5), 1.0)[0])) < 100
    assert len(even) == calibration.PROBES and even[0] == round(x.min() / step) and even[-1] == round(x.max() / step)
    kinds = [(ks, cuts_of(ks, step)) for ks in (ranked, even)]
    for ks, cuts in kinds:
        assert np.array_equal(cuts, np.union1d((np.unique(ks) - 0.5) * step, (np.unique(ks) + 0.5) * step))
    plan = build._Plan1D(points, np.empty(0), step, step, False, 0, 64, np.empty(0), 0, ranked, even)
    fine = plan.scanned_grid()
    assert fine[0] < x.min() < points[0] and fine[-1] > x.max() > points[-1]
    candidates = np.unique(x)[:: 50]  # (counted apart from the cells)
    reader = ArrayTableReader((x,))
    plain = reader.scan_1d(points, candidates, step)
    folded, below = fold_scan(reader.scan_1d(fine, candidates, step), points, fine)
    assert np.array_equal(folded.cell_rows, plain.cell_rows) and folded.cell_quanta == plain.cell_quanta
    for f in dataclasses.fields(plain):
        a, b = getattr(folded, f.name), getattr(plain, f.name)
        assert np.array_equal(a, b) if isinstance(b, np.ndarray) else a == b, f.name
    ordered = np.sort(x)
    for ks, cuts in kinds:
        counted = rows_below(cuts, fine, below, candidates, folded.candidate_rows)
        assert counted.tolist() == np.searchsorted(ordered, cuts).astype(float).tolist()
        # a mutation: the cells alone (no heavy value) miss rows
        assert not np.array_equal(below[np.searchsorted(fine, cuts)], counted)
        lo, hi, exact, A, B = calibration_ranges(ks, cuts, counted, step, 4000, 3)
        assert len(lo) > 3000 and np.all(lo < hi)
        assert all(query.snap(a, b, step) == (u, v) for a, b, u, v in zip(lo, hi, A, B))
        assert exact.tolist() == (np.searchsorted(ordered, hi, side="right")
                                  - np.searchsorted(ordered, lo)).astype(float).tolist()


@pytest.mark.parametrize("column,budget", [("amount", 2048), ("amount", 65536), ("qty", 2048), ("created_at", 8192)])
def test_calibration_terms_from_cut_pieces_equal_the_reference_range_by_range(column, budget):
    """calibration_terms' ranges, put together from each bound's cut piece, the whole cells between and the
    heavy values' exact rows, give range_terms' estimate, spread, doubt and hard bounds' verdict exactly, on
    ranges over many cells, inside one, and among heavy values alone (qty's)."""
    x = _column(column, 200_000)
    s = _build(x, budget, DAY_PROFILE if column == "created_at" else None).payload()
    lo, hi = _ranges(x, s["step"], np.random.default_rng(11))
    t = calibration_terms(s, lo, hi)
    est, spread, doubt, inexact = t.estimate, t.spread, t.doubt, t.inexact
    want = [range_terms(s, float(a), float(b)) for a, b in zip(lo, hi)]
    assert est.tolist() == [w[0] for w in want] and spread.tolist() == [w[1] for w in want]
    assert doubt.tolist() == [w[2] for w in want] and inexact.tolist() == [w[3] for w in want]
    # each cut cell's disagreement apart, in the cells that hold the snapped bounds
    grid = s["grid"]
    for i, (a, b, f, l_, fc, lc) in enumerate(list(zip(lo, hi, t.first, t.last, t.first_cell, t.last_cell))[:300]):
        if lc >= 0:
            A, B = query.snap(float(a), float(b), s["step"])
            assert (fc, lc) == (query.cell_of(grid, A), query.cell_of(grid, B)) and fc < lc
            top = query.lattice_value(round(grid[fc + 1] / s["step"] - 0.5), s["step"])  # (the cell's last value)
            assert query.snap(float(a), top, s["step"])[1] == grid[fc + 1]
            assert f == query.range_1d(dict(s, doubt_weight=0.0), float(a), top, 0).disagreement
            if t.first_own is not None:  # (a profiled cell's own spread apart, 0.25.0)
                assert t.first_own[i] == query.range_1d(dict(s, doubt_weight=0.0), float(a), top, 0).profiled
    # (qty's ranges lie among its heavy values, where every range is exact: the branch with no cell)
    assert inexact.sum() > 300 if column != "qty" else not inexact.any(), inexact.sum()
    assert (t.first_own is not None) == (s["period"] > 0) and (s["period"] > 0) == (column == "created_at")
    # range_terms is range_1d's own answer: its variance at a weight is the spread plus the weight² · doubt, and
    # with a weight for each group of cells, the spread plus (each cut cell's weight · its disagreement)², plus
    # each profiled cut cell's weight² · its own spread (0.25.0)
    if len(grid) < 3:
        return
    groups = np.linspace(0.3, 2.4, min(8, len(grid) - 1))
    for i, (a, b, w) in enumerate(list(zip(lo, hi, want))[:200]):
        r = query.range_1d(dict(s, doubt_weight=0.7, doubt_weights=None), float(a), float(b), 0)
        assert r.estimate == w[0] and r.variance == pytest.approx(w[1] + 0.49 * w[2], rel=1e-12, abs=1e-12)
        g = dict(s, doubt_weight=0.7, doubt_weights=groups.tolist())
        weigh = [groups[c * len(groups) // (len(grid) - 1)] if c >= 0 else 0.0 for c in (t.first_cell[i], t.last_cell[i])]
        own = 0.0 if t.first_own is None else weigh[0] ** 2 * t.first_own[i] + weigh[1] ** 2 * t.last_own[i]
        assert query.range_1d(g, float(a), float(b), 0).variance == pytest.approx(
            w[1] + (weigh[0] * t.first[i] + weigh[1] * t.last[i]) ** 2 + own, rel=1e-12, abs=1e-12)


def _own_counts(x: np.ndarray, cuts: np.ndarray) -> Counts:
    """What a scan would know of the column ``x`` itself (no heavy value counted apart): the rows below each
    of ``cuts`` and its 256 smallest and largest values."""
    ordered = np.sort(x)
    return Counts(np.asarray(cuts, dtype=np.float64), np.searchsorted(ordered, cuts).astype(float), ordered[:256],
                  ordered[-256:], True, np.empty(0), np.empty(0), float(len(x)))


def test_the_scans_counts_are_exact_at_its_cuts_and_beyond_its_tails_and_the_uniform_ranges_with_them():
    """Counts.at gives the rows below a half-step exactly at the scan's cuts and beyond its tails (above its
    256th largest cell value, below its 256th smallest; every value where it kept them all), NaN elsewhere, heavy
    values counted apart included; uniform_ranges' ranges have exact counts, one bound among the cells at least,
    and as many with both as uniform bounds over the column's range give."""
    x = _column("amount", 200_000, seed=3)
    ordered = np.sort(x)
    built = _build(x)
    plan = built.pinned.plan
    cuts = np.unique(np.concatenate([c for _, c in plan.cuts()]))
    reader = ArrayTableReader((x,))
    fine = plan.scanned_grid()
    candidates = np.unique(x)[::50]  # (counted apart from the cells, as heavy values are)
    raw = reader.scan_1d(fine, candidates, plan.quantum)
    below = fold_scan(raw, plan.points, fine)[1]
    counts = counts_of(raw, cuts, fine, below, candidates)
    assert counts.rows == len(x) and counts.full
    probe = np.unique(np.concatenate([cuts, (np.arange(0, round(x.max() * 100) + 50, 7) + 0.5) * 0.01]))
    got = counts.at(probe)
    truth = np.searchsorted(ordered, probe).astype(float)
    known = ~np.isnan(got)
    assert np.array_equal(got[known], truth[known])
    assert np.all(known[np.isin(probe, cuts)])
    tail = np.sort(x[~np.isin(x, candidates)])
    beyond = (probe > tail[-256]) | (probe < tail[255])
    assert np.array_equal(known, np.isin(probe, cuts) | beyond)
    assert (~known).sum() > 100  # (between the cuts, below the tails: not known)
    # a mutation: the candidates' rows left out of the tails' counts
    assert not np.array_equal(dataclasses.replace(counts, candidate_rows=counts.candidate_rows * 0).at(probe)[known],
                              truth[known])
    grid = built.grid
    span = (float(ordered[0]), float(ordered[-1]))
    spacing = (plan.even.max() - plan.even.min()) / (len(plan.even) - 1)
    lo, hi, exact = uniform_ranges(np.concatenate([plan.probes, plan.even]), counts, (grid[0], grid[-1]), span,
                                   0.01, spacing, 6000, 7)
    assert len(lo) > 4000 and np.all(lo < hi)
    assert exact.tolist() == (np.searchsorted(ordered, hi, side="right") - np.searchsorted(ordered, lo)).astype(float).tolist()
    inside = lambda v: (v > grid[0]) & (v < grid[-1])  # noqa: E731
    assert np.all(inside(lo) | inside(hi))
    share = (grid[-1] - grid[0]) / (span[1] - span[0])
    both = np.mean(inside(lo) & inside(hi))
    assert abs(both - share / (2 - share)) < 0.03, (both, share)
    # the other bound of a range with one among the cells: the column's min or max, as far beyond as its range
    assert set(lo[~inside(lo)]) <= {span[0]} and set(hi[~inside(hi)]) <= {span[1]}
    assert np.mean(hi[~inside(hi)] == span[1]) > 0.9  # (its cells end far below its max: a sparse tail)
    # one known value (five rows at 1, every value in the tails): every range holds them all; a column of
    # one value has no range
    tiny = Counts(np.array([0.5, 1.5]), np.array([0.0, 5.0]), np.ones(5), np.ones(5), False, np.empty(0),
                  np.empty(0), 5.0)
    lo1, hi1, exact1 = uniform_ranges(np.array([1.0]), tiny, (0.5, 1.5), (0.0, 4.0), 1.0, 1.0, 10, 1)
    assert len(lo1) == 10 and np.all(exact1 == 5.0) and np.all((lo1 <= 1.0) & (hi1 >= 1.0))
    assert len(uniform_ranges(np.array([1.0]), tiny, (0.5, 1.5), (1.0, 1.0), 1.0, 1.0, 10, 1)[0]) == 0


def test_a_build_stores_the_weights_whose_intervals_cover_its_ranges_nearest_95_percent(monkeypatch):
    """The stored doubt_weight is the one of WEIGHTS whose intervals cover nearest 95% of the calibration's
    ranges (between values at evenly spaced ranks, and uniform over the column's range), counted exactly from
    the column itself; the groups' weights (doubt_weights) bring those ranges' coverage nearer 95% still; the
    cuts leave every other part of the synopsis as a build without them makes it; two builds store the same
    synopsis."""
    x = _column("amount", 200_000)
    built = _build(x)
    assert built.doubt_weight in WEIGHTS and len(built.doubt_weights) == calibration.GROUPS
    assert all(float(np.float32(w)) == w for w in built.doubt_weights)  # (as float4 stores them)
    assert dataclasses.replace(_build(x), seconds=0.0) == dataclasses.replace(built, seconds=0.0)
    plan = built.pinned.plan
    kinds = plan.cuts()
    assert len(kinds) == 2 and all(len(cuts) > 500 for _, cuts in kinds)
    # the weights from the column's own counts, on the same ranges
    cuts = np.unique(np.concatenate([c for _, c in kinds]))
    counts = _own_counts(x, cuts)
    s = built.payload()
    span = (float(x.min()), float(x.max()))
    assert calibration.calibrate(s, plan.probes, plan.even, counts, span) == (built.doubt_weight, built.doubt_weights)
    ranked_cuts = cuts_of(plan.probes, built.step)
    data = calibration_ranges(plan.probes, ranked_cuts, counts.at(ranked_cuts), built.step, calibration.RANGES // 2, SEED)[:3]
    spacing = (plan.even.max() - plan.even.min()) / (len(plan.even) - 1)
    uniform = uniform_ranges(np.concatenate([plan.probes, plan.even]), counts, (s["grid"][0], s["grid"][-1]), span,
                             built.step, spacing, calibration.RANGES // 2, SEED + 1)
    lo, hi, exact = (np.concatenate(a) for a in zip(data, uniform))
    assert len(lo) > 0.8 * calibration.RANGES
    t = calibration_terms(s, lo, hi)
    inexact = t.inexact
    z = 1.959963984540054
    m = len(s["grid"]) - 1

    def covered(w, groups=None, among=True):
        chosen = inexact & among
        e, v = (t.estimate - exact)[chosen], t.spread[chosen]
        if groups is None:
            d = w * (t.first + t.last)[chosen]
        else:
            weigh = lambda c: np.where(c >= 0, np.asarray(groups)[np.maximum(c, 0) * len(groups) // m], 0.0)  # noqa: E731
            d = (weigh(t.first_cell) * t.first + weigh(t.last_cell) * t.last)[chosen]
        return np.mean(np.abs(e) <= z * np.sqrt(v + d * d) + 1e-9)

    def miss(w):
        return abs(covered(w) - 0.95)

    # (of the ranges inside one cell, at most ONE_CELL_MOST answer for all: near, not always equal)
    assert miss(built.doubt_weight) <= min(miss(w) for w in WEIGHTS) + 0.01
    assert calibrated_weight(s, lo, hi, exact) == min(
        (w for w in WEIGHTS if miss(w) <= min(miss(v) for v in WEIGHTS) + 1e-12), key=lambda w: abs(w - 1))
    # each group's weight covers the ranges that cut its cells near 95% (the others' weights as stored), and
    # the groups' weights all the ranges
    assert abs(covered(None, built.doubt_weights) - 0.95) < 0.01
    groups = len(built.doubt_weights)
    group = lambda c: np.where(c >= 0, c * groups // m, -1)  # noqa: E731
    for g in range(groups):
        cut = (group(t.first_cell) == g) | (group(t.last_cell) == g)
        if np.count_nonzero(cut & inexact) >= 200:
            got, w = covered(None, built.doubt_weights, cut), built.doubt_weights[g]
            # (or as near as a weight can bring it: none of the doubt still covers more, the most less; the
            # search holds the other groups' weights of its round, and answers ranges inside one cell by a
            # share of them)
            assert abs(got - 0.95) < 0.025 or (w == WEIGHTS[0] and got > 0.95) or (w == WEIGHTS[-1] and got < 0.95), \
                (g, got, w)
    # without the cuts: the same synopsis, not calibrated
    monkeypatch.setattr(build, "probes", lambda *a: (np.empty(0), np.empty(0)))
    plain = _build(x)
    assert plain.doubt_weight is None and plain.doubt_weights is None
    assert dataclasses.replace(plain, doubt_weight=built.doubt_weight, doubt_weights=built.doubt_weights,
                               seconds=0.0) == dataclasses.replace(built, seconds=0.0)


def test_each_group_of_cells_takes_the_weight_its_ranges_need():
    """group_weights on ranges whose errors need a weight of 0.5 in the first group of cells and 2 in the
    second (their 95th percentile of |error| / (z · disagreement)), and a few ranges that cut both: each group
    gets its own, the ranges of both counting in each; where no range cuts a group, it keeps the start."""
    z = 1.959963984540054
    u = (np.arange(1000) + 0.5) / 1000  # |error| / (z · need · disagreement) / 0.95
    first_cell = np.concatenate([np.zeros(1000, int), np.full(1000, 3), np.zeros(50, int)])
    last_cell = np.concatenate([np.full(2000, -1), np.full(50, 3)])
    first = np.concatenate([np.ones(2000), np.full(50, 1e-9)])
    last = np.concatenate([np.zeros(2000), np.full(50, 1e-9)])
    errors = np.concatenate([z * 0.5 * u / 0.95, z * 2.0 * u / 0.95, np.zeros(50)])
    terms = calibration.Terms(np.zeros(2050), np.zeros(2050), first, last, first_cell, last_cell,
                              np.ones(2050, dtype=bool))
    # four cells, a group each (no more groups than cells); of 16 cells, cells 0 and 3 are groups 0 and 3; with
    # two groups of four cells, cells 0-1 are group 0 and cells 2-3 group 1
    assert calibration.group_weights(terms, errors, np.ones(2050), 4, 1.0) == (0.5, 1.0, 1.0, 2.0)
    assert calibration.group_weights(terms, errors, np.ones(2050), 16, 1.0) == (0.5, 1.0, 1.0, 2.0) + (1.0,) * 12
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(calibration, "GROUPS", 2)
        assert calibration.group_weights(terms, errors, np.ones(2050), 4, 1.0) == (0.5, 2.0)
    # a range counting twice counts twice
    counts = np.concatenate([np.ones(1000), np.where(u <= 0.5, 3.0, 1.0), np.ones(50)])
    assert calibration.group_weights(terms, errors, counts, 4, 1.0)[1] < 2.0


def test_the_groups_weights_miss_95_percent_least_together():
    """Each group's weight is the one under which every group's coverage misses 95% least together (0.23.0): the
    ranges missed, or covered beyond 95%, of each group whose ranges share one with it, summed, the others'
    weights held; of weights as near, the one nearest the synopsis' weight. A range that cuts cells of two
    groups counts in both, so a group moves from the synopsis' weight only as far as the groups together gain:
    here group 0's ranges, all shared with group 1, want 0.5 alone (0.21.0-0.22.0 weighed each group's ranges
    alone and took it), but every weight from 0.5 up misses as much in all, so it keeps the synopsis' 1.0. On
    random ranges of two groups the weights are the best pair's."""
    z = 1.959963984540054
    u = (np.arange(1000) + 0.5) / 1000
    first_cell = np.concatenate([np.zeros(1000, int), np.ones(1000, int)])
    last_cell = np.concatenate([np.ones(1000, int), np.full(1000, -1)])
    first = np.ones(2000)
    last = np.zeros(2000)  # (the shared ranges' doubt is group 0's)
    errors = np.concatenate([z * 0.5 * u / 0.95, np.full(1000, 1e6)])  # group 1's own: beyond any weight
    terms = calibration.Terms(np.zeros(2000), np.zeros(2000), first, last, first_cell, last_cell,
                              np.ones(2000, dtype=bool))
    assert calibration.group_weights(terms, errors, np.ones(2000), 2, 1.0) == (1.0, 1.0)
    alone = terms._replace(last_cell=np.full(2000, -1))  # (the same ranges, cutting group 0's cells only)
    assert calibration.group_weights(alone, errors, np.ones(2000), 2, 1.0)[0] == 0.5

    rng = np.random.default_rng(11)
    n = 3000
    first_cell = rng.integers(0, 2, n)
    last_cell = np.where(rng.random(n) < 0.5, 1 - first_cell, -1)  # half the ranges cut both groups' cells
    first, last = rng.uniform(0.5, 2.0, n), np.where(last_cell >= 0, rng.uniform(0.0, 0.3, n), 0.0)
    spread = rng.uniform(0.5, 1.5, n)
    errors = z * np.abs(rng.standard_normal(n)) * np.sqrt(spread + first * first) * 0.8
    errors[(first_cell == 1) & (last_cell < 0)] *= 40
    terms = calibration.Terms(np.zeros(n), spread, first, last, first_cell, last_cell, np.ones(n, dtype=bool))

    def missed(pair):
        w = np.asarray(pair)
        d = w[first_cell] * first + np.where(last_cell >= 0, w[np.maximum(last_cell, 0)], 0.0) * last
        ok = np.abs(errors) <= z * np.sqrt(spread + d * d) + 1e-9
        return sum(abs(ok[(first_cell == g) | (last_cell == g)].sum() - 0.95 * ((first_cell == g) | (last_cell == g)).sum())
                   for g in (0, 1))

    got = calibration.group_weights(terms, errors, np.ones(n), 2, 1.0)
    assert missed(got) == pytest.approx(min(missed((a, b)) for a in WEIGHTS for b in WEIGHTS), abs=1e-9), got


def test_a_frequency_tables_cells_are_calibrated_on_bounds_among_them():
    """A frequency table's cells hold the values its sample missed, a small share of the rows, among the table's
    values, where the ranked values seldom fall (0.23.0): its scan also counts the cuts about every value the
    sample holds from the least to the greatest it saw once and every value of the plan's cells there of at
    most SLOTS_MOST slots (among_probes), and the ranges [min, k] and [k, max] from each, weighed by the rows on
    k (bounds drawn from the data fall on a value as often as rows hold it), calibrate its weights, and its
    groups' weights as many as the bytes the table and cells leave hold, a group for four cells at most."""
    sample = np.array([1, 1, 1, 2, 2, 3, 5, 8, 8, 13], dtype=np.float64)
    rare, points = np.array([3.0, 5.0, 13.0]), np.array([2.5, 4.5, 12.5, 13.5])
    assert among_probes(sample, rare, 1.0, points).tolist() == list(range(3, 14))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(calibration, "SLOTS_MOST", 4)  # (the cell [4.5, 12.5] holds 8 slots)
        assert among_probes(sample, rare, 1.0, points).tolist() == [3, 4, 5, 8, 13]
    assert among_probes(sample * 0.01, rare * 0.01, 0.01, points * 0.01).tolist() == list(range(3, 14))
    assert not len(among_probes(sample, rare, 0.0, points)) and not len(among_probes(sample, rare[:0], 1.0, points))

    x = _column("qty-heavy", 1_000_000)
    built = _build(x)
    plan, s = built.pinned.plan, built.payload()
    cells = built.grid_size - 1
    assert plan.few and cells > 10 and len(plan.among) > 100 and built.doubt_weight in WEIGHTS
    assert len(built.doubt_weights) == min(calibration.GROUPS, cells // 4)
    used = 640 + 28 * built.grid_size + 24 * len(s["atom_values"]) + len(s["atom_pack"])
    assert used + 24 + 4 * len(built.doubt_weights) <= 2048
    # the ranges from each value among the cells: exact, weighed by its rows
    ordered = np.sort(x)
    counts = _own_counts(x, plan.every_cut())
    span = (float(x.min()), float(x.max()))
    lo, hi, exact, weight = among_ranges(plan.among, counts, span, 1.0)
    # (each from an end of the column to k, or from k to the other end; a k at an end, the whole span)
    whole = (lo == span[0]) & (hi == span[1])
    assert len(lo) > 100 and np.all((lo == span[0]) | (hi == span[1])) and whole.sum() <= 2
    assert np.array_equal(exact, np.searchsorted(ordered, hi, "right") - np.searchsorted(ordered, lo, "left"))
    on = np.where(lo == span[0], hi, lo)
    rows_on = np.searchsorted(ordered, on, "right") - np.searchsorted(ordered, on, "left")
    assert np.all(rows_on > 0) and weight.mean() == pytest.approx(1.0)
    np.testing.assert_allclose(weight / rows_on, weight[0] / rows_on[0], rtol=1e-12)
    # the build's weights, from the column's own counts
    assert calibration.calibrate(s, plan.probes, plan.even, counts, span, plan.among, len(built.doubt_weights)) \
        == (built.doubt_weight, built.doubt_weights)


def test_what_the_build_does_not_calibrate_stays_weighed_as_before():
    """A continuous column and a column the synopsis holds exactly store no weight (NULL): their doubt weighs
    query.SHAPE_DOUBT, as before 0.20.0."""
    rng = np.random.default_rng(5)
    continuous = _build(rng.standard_normal(100_000))
    assert continuous.doubt_weight is None and continuous.doubt_weights is None
    few = _build(rng.integers(0, 20, 50_000).astype(np.float64))
    assert few.kde_rows == 0 and few.doubt_weight is None and few.doubt_weights is None
    assert query.doubt_weight(dict(few.payload(), doubt_weight=None)) == query.SHAPE_DOUBT == 1.0


def test_a_profiled_time_column_of_few_cells_is_calibrated_with_one_weight(monkeypatch):
    """A time column whose build keeps a periodic profile over a few cells (0.25.0): its scan counts the
    calibration's cuts (PROFILE_PROBES values of each kind) too, folded back into the same cells and profile as
    without them; it stores one weight (no groups: its cells left them no bytes), never 0, the one of WEIGHTS
    whose intervals, each profiled cut cell's own spread scaled by its square, cover nearest 95% of the
    calibration's ranges, counted exactly from the column; two builds store the same synopsis. Over more than
    PROFILE_CELLS_MOST cells its scan counts no cuts, and it stores no weight (weighed 1)."""
    grids = []
    scan = ArrayTableReader.scan_1d
    monkeypatch.setattr(ArrayTableReader, "scan_1d", lambda self, points, *a: grids.append(len(points)) or scan(self, points, *a))
    t = _column("created_at", 200_000, seed=3)
    budget = 2048
    timed = _build(t, budget, DAY_PROFILE)
    assert timed.period > 0 and timed.doubt_weights is None and timed.grid_size - 1 <= calibration.PROFILE_CELLS_MOST
    assert timed.doubt_weight in WEIGHTS and timed.doubt_weight >= calibration.PROFILE_WEIGHT_LEAST
    assert grids[-1] > timed.grid_size + 2 * calibration.PROFILE_PROBES, grids
    grids.clear()
    many = _build(t, 8192, DAY_PROFILE)
    assert many.period > 0 and many.grid_size - 1 > calibration.PROFILE_CELLS_MOST
    assert many.doubt_weight is None and many.doubt_weights is None
    assert grids and all(g <= many.grid_size + 2 for g in grids), grids
    assert dataclasses.replace(_build(t, budget, DAY_PROFILE), seconds=0.0) == dataclasses.replace(timed, seconds=0.0)
    # the weight from the column's own counts, on the same ranges
    plan = timed.pinned.plan
    cuts = np.unique(np.concatenate([c for _, c in plan.cuts()]))
    s = timed.payload()
    span = (float(t.min()), float(t.max()))
    assert calibration.calibrate(s, plan.probes, plan.even, _own_counts(t, cuts), span, plan.among, 0) \
        == (timed.doubt_weight, None)
    # the weight scales a profiled range's variance by its square, nothing else
    lo, hi = float(np.quantile(t, 0.31)), float(np.quantile(t, 0.77))
    own = query.range_1d(dict(s, doubt_weight=0.0), lo, hi, 0)
    assert own.variance == 0 and own.profiled > 0 and own.disagreement == 0
    for w in (None, 0.4, timed.doubt_weight, 2.5):
        got = query.range_1d(dict(s, doubt_weight=w), lo, hi, 0)
        assert (got.estimate, got.low, got.high) == (own.estimate, own.low, own.high)
        assert got.variance == pytest.approx((1.0 if w is None else w) ** 2 * own.profiled, rel=1e-12)
    # without the cuts: the same synopsis, not calibrated (weighed 1, as before 0.25.0)
    monkeypatch.setattr(build, "probes", lambda *a: (np.empty(0), np.empty(0)))
    plain = _build(t, budget, DAY_PROFILE)
    assert plain.doubt_weight is None and plain.doubt_weights is None
    assert dataclasses.replace(plain, doubt_weight=timed.doubt_weight, seconds=0.0, pinned=None) \
        == dataclasses.replace(timed, seconds=0.0, pinned=None)


def test_a_profiled_synopsis_takes_no_weight_0():
    """Ranges whose errors only a weight of 0 covers 95% of (95% of them exact, the others a millionth of their
    spread off): weight_for picks 0 where it may; where it may not, as a profiled synopsis' calibration asks
    (its intervals would have no width at 0), every other weight covers them all, and it takes the one nearest
    SHAPE_DOUBT."""
    errors = np.where(np.arange(2000) < 1900, 0.0, 1e-6)
    spread, doubt = np.zeros(2000), np.ones(2000)
    assert calibration.weight_for(errors, spread, doubt) == 0.0
    assert calibration.weight_for(errors, spread, doubt, least=WEIGHTS[1]) == query.SHAPE_DOUBT


def test_a_stored_weight_weighs_the_doubt_of_every_range():
    """range_1d weighs the shape's doubt by the synopsis' doubt_weight: the variance is the spread plus the
    weight² · the disagreement², and NULL weighs SHAPE_DOUBT."""
    x = _column("amount", 100_000)
    s = _build(x).payload()
    lo, hi = np.quantile(x, 0.21), np.quantile(x, 0.67)
    base = query.range_1d(dict(s, doubt_weight=0.0, doubt_weights=None), lo, hi, 0)
    assert base.disagreement > 0
    for w in (None, 0.3, 1.0, 2.5):
        got = query.range_1d(dict(s, doubt_weight=w, doubt_weights=None), lo, hi, 0)
        weight = 1.0 if w is None else w
        assert got.estimate == base.estimate and got.disagreement == base.disagreement
        assert got.variance == pytest.approx(base.variance + (weight * base.disagreement) ** 2, rel=1e-12)


def test_a_kept_plan_keeps_its_cuts_and_a_plan_kept_before_them_is_made_again():
    """A Citus table's kept plan (kde_parts.plan) holds the scan's cuts, so that the next refresh sends its shards
    the same scan and calibrates the same weight; a plan kept by 0.19.0, without cuts, reads as none (the build
    plans anew), as does one kept by 0.22.0 (without a frequency table's bounds among its cells), one kept by
    0.30.0 (without the scan's tail) and one whose calibration values are not lattice indices."""
    x = _column("amount", 200_000)
    built = _build(x)
    text = built.pinned.to_json()
    again = build.Pinned1D.from_json(text)
    assert np.array_equal(again.plan.probes, built.pinned.plan.probes) and len(again.plan.probes) == calibration.PROBES
    assert np.array_equal(again.plan.even, built.pinned.plan.even) and len(again.plan.even) > 1000
    reader = ArrayTableReader((x,), blocks=(157, 1024))
    rebuilt = build_1d(reader, Requested("auto", 50000, None, "auto", 2048), pinned=again)
    assert dataclasses.replace(rebuilt, seconds=0.0) == dataclasses.replace(built, seconds=0.0)
    old = json.loads(text)
    del old["probes"]
    assert build.Pinned1D.from_json(json.dumps(old)) is None
    # (0.22.0's, without a frequency table's bounds among its cells: made again, so the same cuts are counted)
    assert build.Pinned1D.from_json(json.dumps({k: v for k, v in json.loads(text).items() if k != "among"})) is None
    # (a lattice index that is not a whole number, or is past float8's integers)
    for bad in (0.5, 2.0**60):
        assert build.Pinned1D.from_json(json.dumps(dict(json.loads(text), even=[bad] + old["even"][1:]))) is None
    # (0.30.0's, without the scan's tail: made again, as its shards' answers were made by the four-argument scan;
    # a tail the scan refuses, likewise)
    assert build.Pinned1D.from_json(json.dumps({k: v for k, v in json.loads(text).items() if k != "tail"})) is None
    for bad in (0, 255, 16385, 2.5):  # (below the default tail: never asked, a tampered row)
        assert build.Pinned1D.from_json(json.dumps(dict(json.loads(text), tail=bad))) is None, bad
    # (a number or a nested list where a list belongs, a tampered kde_parts.plan: a review raised TypeError)
    for key, bad in (("among", 5), ("probes", [old["even"][:2]]), ("points", 3.0), ("flagged", [[1.0]])):
        assert build.Pinned1D.from_json(json.dumps(dict(json.loads(text), **{key: bad}))) is None, key

