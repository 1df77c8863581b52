"""The build's calibration of a 1-D synopsis' shape's doubt (docs/math.md §7, "The doubt's weight, calibrated").

A cut cell's interval adds the shape's doubt, a weight times the cells' disagreement with the straight line,
to the rows' own spread (:func:`pg_kde.synopsis.query.smooth_1d`). No one weight suits every column: a
column whose rows follow the KDE's shape closely needs less of it than one whose rows are clustered. The
build measures it. It takes :data:`PROBES` lattice values of each of two kinds (:func:`probes`: the sample's
values at evenly spaced ranks, as bounds drawn from the data fall, and values evenly spaced over the column's
range, as bounds uniform over its domain fall), and its one scan also counts the rows below the half-steps
about each (:func:`cuts_of`), which are boundaries of the scan's grid beside the synopsis' own (folded back
after the scan, :func:`fold_scan`: counts and sums add exactly). Between pairs of values of one kind lie
:data:`RANGES` ranges (as many of each kind) whose exact counts the build knows; the stored weight
(``doubt_weight``) is the one of :data:`WEIGHTS` whose 95% intervals cover those ranges' counts nearest 95%
(:func:`calibrated_weight`), each range put together from its bounds' cut pieces (:func:`calibration_terms`,
tested range by range against :func:`range_terms`, the reference's own answer). The same ranges (a seeded
choice) and the same counts give the same weight: a refresh of unchanged data stores the same synopsis bit for
bit.

Not calibrated (``doubt_weight`` NULL, weighed :data:`pg_kde.synopsis.query.SHAPE_DOUBT`): a continuous
column (its rows may sit on a cut, where a range's exact count would need its rows there apart), a synopsis
with no cells (every value exact), and a time column whose build tries a periodic profile (its profile's cells have no disagreement to
weigh, D = 0, and the cuts would cost its scan about a fifth more: the build does not count them; where the
KDE's shape fits better than the profile after all, it keeps weight 1).
"""

from __future__ import annotations

import dataclasses
from statistics import NormalDist
from typing import Optional, Tuple

import numpy as np

from . import query
from .packing import lattice_value

#: Calibration values of each kind (:func:`probes`).
PROBES = 1024
#: Ranges between pairs of calibration values that the weight is calibrated on (half of them of each kind).
RANGES = 12000
#: Of the ranges inside one cell, at most this many (evenly spaced among them, each counting for its share of
#: them all): each is answered range by range (:func:`range_terms`), at up to 0.4 ms where heavy values' slots
#: lie inside the cell.
ONE_CELL_MOST = 1000
#: The weights tried, 0.2 to 2.5.
WEIGHTS = tuple(round(0.2 + 0.05 * k, 2) for k in range(47))
#: The ranges' pairs are drawn with this seed (plus the kind's number): the same values give the same ranges.
SEED = 20261128
NOMINAL = 0.95


def probes(sample: np.ndarray, span: Tuple[float, float], step: float) -> Tuple[np.ndarray, np.ndarray]:
    """The calibration's bounds on a lattice (``step`` > 0), as lattice indices k (value k·step): (ranked, even),
    :data:`PROBES` of the ``sample``'s values at evenly spaced ranks (repeats kept: bounds drawn from the data
    fall on a common value often), and :data:`PROBES` values evenly spaced over ``span``, the column's
    (lo, hi) (bounds uniform over its domain). Empty arrays elsewhere."""
    if not step > 0 or not len(sample):
        return np.empty(0), np.empty(0)
    ordered = np.sort(np.asarray(sample, dtype=np.float64))
    ranked = np.round(ordered[np.linspace(0, len(ordered) - 1, PROBES).round().astype(np.int64)] / step)
    even = np.unique(np.round(np.linspace(span[0], span[1], PROBES) / step))
    return ranked, even


def cuts_of(ks: np.ndarray, step: float) -> np.ndarray:
    """The half-steps about the lattice values k·step (k in ``ks``), sorted: (k − ½)·step, where a range from
    that value begins, and (k + ½)·step, where a range up to it ends (as :func:`pg_kde.synopsis.query.snap`
    writes them). The scan counts the rows below each."""
    ks = np.unique(np.asarray(ks, dtype=np.float64))
    return np.unique(np.concatenate([(ks - 0.5) * step, (ks + 0.5) * step]))


def fold_scan(scan, points: np.ndarray, fine: np.ndarray) -> Tuple[object, np.ndarray]:
    """(the scan over ``fine``, a grid holding every one of ``points`` and maybe more beyond them, as the scan
    over ``points`` would have counted it; the rows of its cells below each of ``fine``'s boundaries). Each
    fine cell's rows and quanta go to the cell of ``points`` that holds it, those beyond ``points`` to its
    outer cells (which hold every value beyond the grid): exact integers, the same sums in any order."""
    below = np.concatenate([[0.0], np.cumsum(scan.cell_rows)])
    if len(fine) == len(points):
        return scan, below
    m = len(points) - 1
    cell = np.clip(np.searchsorted(points, fine[:-1], side="right") - 1, 0, m - 1)
    quanta = [0] * m
    for c, q in zip(cell.tolist(), scan.cell_quanta):
        quanta[c] += q
    rows = np.bincount(cell, weights=scan.cell_rows, minlength=m).astype(np.float64)
    return dataclasses.replace(scan, cell_rows=rows, cell_quanta=tuple(quanta)), below


def rows_below(cuts: np.ndarray, fine: np.ndarray, below: np.ndarray, candidates: np.ndarray,
               candidate_rows: np.ndarray) -> np.ndarray:
    """The rows below each of ``cuts`` (boundaries of ``fine`` strictly inside it, half-steps no row sits
    on): the fine cells' below them (``below``, :func:`fold_scan`'s) and the candidate heavy values' (counted apart from the
    cells)."""
    at = np.searchsorted(fine, cuts)
    heavy = np.concatenate([[0.0], np.cumsum(np.asarray(candidate_rows, dtype=np.float64))])
    return below[at] + heavy[np.searchsorted(np.asarray(candidates, dtype=np.float64), cuts)]


def calibration_ranges(ks: np.ndarray, cuts: np.ndarray, counted: np.ndarray, step: float, ranges: int = RANGES,
                       seed: int = SEED) -> tuple:
    """(lo, hi, exact, A, B): about ``ranges`` ranges [lo, hi] between pairs of the lattice values k·step (k in
    ``ks``; pairs drawn with ``seed``, those with lo < hi), their exact counts from the rows below each of
    ``cuts`` (``counted``; :func:`cuts_of` of ``ks``), and their bounds moved out to half-steps, A = (k_lo −
    ½)·step and B = (k_hi + ½)·step."""
    ks = np.asarray(ks, dtype=np.float64)
    if len(ks) < 2:
        return (np.empty(0),) * 5
    pairs = np.sort(ks[np.random.default_rng(seed).integers(0, len(ks), (ranges, 2))], axis=1)
    pairs = pairs[pairs[:, 0] < pairs[:, 1]]
    A, B = (pairs[:, 0] - 0.5) * step, (pairs[:, 1] + 0.5) * step
    lo, hi = lattice_value(pairs[:, 0], step), lattice_value(pairs[:, 1], step)  # (elementwise, as for one k)
    exact = counted[np.searchsorted(cuts, B)] - counted[np.searchsorted(cuts, A)]
    return lo, hi, exact, A, B


def range_terms(payload: dict, a: float, b: float) -> tuple:
    """(estimate, spread, doubt, inexact) of [a, b]'s count, one range at a time, as
    :func:`pg_kde.synopsis.query.range_1d` answers it: its estimate, its variance with the shape's doubt
    weighed 0 (the rows' own spread), the disagreement's square (the doubt's variance at weight 1), and whether
    its hard bounds leave it open. The reference :func:`calibration_terms` is tested against, and what it
    falls back on."""
    r = query.range_1d(dict(payload, doubt_weight=0.0), a, b, 0)
    return r.estimate, r.variance, r.disagreement * r.disagreement, r.low != r.high


def _piece(payload: dict, a: float, b: float, heavy) -> tuple:
    """(estimate, spread, disagreement, low, high) of the cells' part of the snapped [a, b]: the piece of one
    cut cell, where a or b is one of its ends."""
    r = query.smooth_1d(payload, a, b, 0, heavy, weight=0.0)
    return r.estimate, r.variance, r.disagreement, r.low, r.high


def calibration_terms(payload: dict, lo: np.ndarray, hi: np.ndarray) -> tuple:
    """:func:`range_terms` of the ranges [lo_i, hi_i] (lo_i < hi_i), as arrays, from cut pieces: a range over
    two or more cells of a lattice is its heavy values' exact rows, the whole cells between, the piece of its
    first cell from its snapped lo and that of its last cell up to its snapped hi (each cut cell's estimate,
    spread and hard bounds its own, its disagreement with the straight line added before it is squared:
    pg_kde.synopsis.query.smooth_1d). Each bound's piece is taken once, so thousands of ranges between a few
    thousand cuts cost a few thousand pieces, not a range each. Ranges inside one cell, and every range of a
    column with no lattice, take :func:`range_terms`."""
    n = len(lo)
    est, spread, doubt = np.zeros(n), np.zeros(n), np.zeros(n)
    inexact = np.zeros(n, dtype=bool)
    grid, step = payload["grid"], payload["step"]
    m = len(grid)
    values, cum, _ = query.heavy_values(payload)
    heavy = values if payload.get("heavy_whole") else None
    lower, upper = {}, {}  # a bound -> its cut cell's piece (:func:`_piece`), as lo and as hi
    for i, (a, b) in enumerate(zip(lo.tolist(), hi.tolist())):
        snapped = query.snap(a, b, step) if step > 0 and m >= 2 and payload["kde_rows"] > 0 else None
        if snapped is None:
            est[i], spread[i], doubt[i], inexact[i] = range_terms(payload, a, b)
            continue
        exact = query.heavy_between(values, cum, a, b)[0]
        A, B = max(snapped[0], grid[0]), min(snapped[1], grid[-1])
        if not A < B:  # (no cell in it: its heavy values' rows, exact)
            est[i] = exact + 0.0
            continue
        ka, kb = query.cell_of(grid, A), query.cell_of(grid, B)
        if ka == kb:
            est[i], spread[i], doubt[i], inexact[i] = range_terms(payload, a, b)
            continue
        if a not in lower:
            lower[a] = _piece(payload, snapped[0], grid[ka + 1], heavy)
        if b not in upper:
            upper[b] = _piece(payload, grid[kb], snapped[1], heavy)
        first, last = lower[a], upper[b]
        # as smooth_1d adds them: the whole cells between, then the first cut cell, then the last
        whole = payload["cell_cum_count"][kb] - payload["cell_cum_count"][ka + 1] if kb > ka + 1 else 0.0
        est[i] = exact + (0.0 + whole + first[0] + last[0])
        spread[i] = 0.0 + first[1] + last[1]
        apart = 0.0 + first[2] + last[2]
        doubt[i] = apart * apart
        inexact[i] = exact + (0.0 + whole + first[3] + last[3]) != exact + (0.0 + whole + first[4] + last[4])
    return est, spread, doubt, inexact


def weight_for(errors: np.ndarray, spread: np.ndarray, doubt: np.ndarray,
               counts: Optional[np.ndarray] = None) -> Optional[float]:
    """The weight of :data:`WEIGHTS` whose 95% intervals, z·sqrt(spread + weight²·doubt) about each estimate,
    hold nearest 95% of the ``errors`` (each counting ``counts`` ranges: 1 by default); of the weights as near
    as any, the one nearest :data:`pg_kde.synopsis.query.SHAPE_DOUBT`. None where no range has doubt (every
    weight as near)."""
    if not len(errors) or not np.any(doubt > 0):
        return None
    counts = np.ones(len(errors)) if counts is None else np.asarray(counts, dtype=np.float64)
    z = -NormalDist().inv_cdf((1 - NOMINAL) / 2)
    misses = np.array([abs(np.dot(counts, np.abs(errors) <= z * np.sqrt(spread + w * w * doubt) + 1e-9)
                           / counts.sum() - NOMINAL) for w in WEIGHTS])
    return min((w for w, m in zip(WEIGHTS, misses) if m <= misses.min() + 1e-12),
               key=lambda w: abs(w - query.SHAPE_DOUBT))


def calibrated_weight(payload: dict, lo: np.ndarray, hi: np.ndarray, exact: np.ndarray,
                      counts: Optional[np.ndarray] = None) -> Optional[float]:
    """The weight (:func:`weight_for`) of the synopsis ``payload`` on the ranges [lo_i, hi_i] whose exact counts
    are ``exact`` (each counting ``counts`` ranges): of those its hard bounds leave open. None where none is,
    or none has doubt."""
    if not len(lo):
        return None
    counts = np.ones(len(lo)) if counts is None else np.asarray(counts, dtype=np.float64)
    est, spread, doubt, inexact = calibration_terms(payload, lo, hi)
    return weight_for((est - exact)[inexact], spread[inexact], doubt[inexact], counts[inexact])


def calibrate(payload: dict, kinds) -> Optional[float]:
    """The build's weight of a lattice synopsis ``payload`` from ``kinds``, each (lattice indices, their cuts
    (:func:`cuts_of`), the rows below each cut, :func:`rows_below`): on :func:`calibration_ranges`' ranges
    between values of one kind, :data:`RANGES` in all, of those inside one cell at most :data:`ONE_CELL_MOST`;
    None where it is not calibrated (the module's docstring)."""
    step, grid = payload["step"], np.asarray(payload["grid"], dtype=np.float64)
    if not step > 0 or payload["kde_rows"] <= 0 or payload.get("period", 0.0) > 0 or len(grid) < 2 or not kinds:
        return None
    found = [calibration_ranges(ks, np.asarray(cuts, dtype=np.float64), np.asarray(counted, dtype=np.float64), step,
                                RANGES // len(kinds), SEED + i) for i, (ks, cuts, counted) in enumerate(kinds)]
    lo, hi, exact, A, B = (np.concatenate(a) for a in zip(*found))

    def cell(x):  # query.cell_of of the bounds within the grid
        return np.clip(np.searchsorted(grid, np.clip(x, grid[0], grid[-1]), side="right") - 1, 0, len(grid) - 2)

    one = np.flatnonzero(cell(A) == cell(B))
    counts = np.ones(len(lo))
    if len(one) > ONE_CELL_MOST:
        kept = one[np.unique(np.linspace(0, len(one) - 1, ONE_CELL_MOST).round().astype(np.int64))]
        counts[one] = 0.0
        counts[kept] = len(one) / len(kept)
        chosen = counts > 0
        lo, hi, exact, counts = lo[chosen], hi[chosen], exact[chosen], counts[chosen]
    return calibrated_weight(payload, lo, hi, exact, counts)
