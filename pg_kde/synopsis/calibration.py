"""The build's calibration of a 1-D synopsis' shape's doubt (docs/math.md §7, "The shape's doubt, calibrated").

A cut cell's interval adds the shape's doubt, a weight times the cells' disagreement with the straight line,
to the rows' own spread (:func:`pg_kde.synopsis.query.smooth_1d`). No one weight suits every column: a
column whose rows follow the KDE's shape closely needs less of it than one whose rows are clustered. The
build measures it: its one scan also counts the rows below :data:`PROBES` of each of two kinds of cuts
(:func:`probes`: half-steps of the column's lattice at evenly spaced ranks of the sample, and evenly spaced over
the grid), which are boundaries of the scan's grid beside the synopsis' own (folded back after the scan,
:func:`fold_scan`: counts and sums add exactly). Between pairs of them lie :data:`RANGES` ranges whose exact
counts the build knows; the stored weight (``doubt_weight``) is the one of :data:`WEIGHTS` whose 95% intervals
cover those ranges' counts nearest 95% (:func:`calibrated_weight`), each range put together from its bounds'
cut pieces (:func:`calibration_terms`, tested range by range against :func:`range_terms`, the reference's
own answer). The same ranges (a seeded choice) and the same counts give the same weight: a refresh of
unchanged data stores the same synopsis bit for bit.

Not calibrated (``doubt_weight`` NULL, weighed :data:`pg_kde.synopsis.query.SHAPE_DOUBT`): a continuous
column (its rows may sit on a cut, where a range's exact count would need its rows there apart), a frequency
table, and a periodic profile's cells (their shape's doubt is the profile's sample's, not weighed).
"""

from __future__ import annotations

import dataclasses
from statistics import NormalDist
from typing import Optional, Tuple

import numpy as np

from . import query
from .packing import lattice_value

#: Cuts of each kind (:func:`probes`).
PROBES = 1024
#: Ranges between pairs of cuts that the weight is calibrated on.
RANGES = 12000
#: Of the ranges inside one cell, at most this many (evenly spaced among them, each counting for its share of
#: them all): each is answered range by range (:func:`range_terms`), at up to 0.4 ms where heavy values' slots
#: lie inside the cell.
ONE_CELL_MOST = 1000
#: The weights tried, 0.2 to 2.5.
WEIGHTS = tuple(round(0.2 + 0.05 * k, 2) for k in range(47))
#: The ranges' pairs are drawn with this seed: the same cuts give the same ranges.
SEED = 20261128
NOMINAL = 0.95


def probes(sample: np.ndarray, points: np.ndarray, step: float) -> np.ndarray:
    """The half-steps of a lattice (``step`` > 0) strictly inside the grid ``points`` whose rows below the scan
    counts for the calibration, sorted: :data:`PROBES` of them just below the ``sample``'s values at evenly
    spaced ranks (where ranges drawn from the data begin), and as many evenly spaced over the grid. Each is
    (k − ½)·step, as :func:`pg_kde.synopsis.query.snap` writes a bound moved out to a half-step."""
    points = np.asarray(points, dtype=np.float64)
    if not step > 0 or len(points) < 2 or not len(sample):
        return np.empty(0)
    ordered = np.sort(np.asarray(sample, dtype=np.float64))
    ranked = ordered[np.linspace(0, len(ordered) - 1, PROBES).round().astype(np.int64)]
    even = np.linspace(points[0], points[-1], PROBES)
    k = np.concatenate([np.round(ranked / step), np.round(even / step)])
    cuts = np.unique((k - 0.5) * step)
    return cuts[(cuts > points[0]) & (cuts < points[-1])]


def fold_scan(scan, points: np.ndarray, fine: np.ndarray) -> Tuple[object, np.ndarray]:
    """(the scan over ``fine``, a grid holding every one of ``points``, as the scan over ``points`` would
    have counted it; the rows of its cells below each of ``fine``'s boundaries). Each fine cell's rows and
    quanta go to the cell of ``points`` that holds it: exact integers, the same sums in any order."""
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
    """The rows below each of ``cuts`` (boundaries of ``fine``, half-steps no row sits on): the fine cells'
    below them (``below``, :func:`fold_scan`'s) and the candidate heavy values' (counted apart from the
    cells)."""
    at = np.searchsorted(fine, cuts)
    heavy = np.concatenate([[0.0], np.cumsum(np.asarray(candidate_rows, dtype=np.float64))])
    return below[at] + heavy[np.searchsorted(np.asarray(candidates, dtype=np.float64), cuts)]


def calibration_ranges(cuts: np.ndarray, counted: np.ndarray, step: float) -> tuple:
    """(lo, hi, exact, pairs): :data:`RANGES` ranges [lo, hi] between pairs of ``cuts`` (drawn with
    :data:`SEED`; two lattice values or more each), lo the lattice value above one cut and hi the one below the
    other (so that the cuts are the range's bounds moved out to half-steps, :func:`pg_kde.synopsis.query.snap`),
    their exact counts from the rows below each cut (``counted``), and the cuts' indices (one row a range)."""
    if len(cuts) < 3:
        return np.empty(0), np.empty(0), np.empty(0), np.empty((0, 2), dtype=np.int64)
    pairs = np.sort(np.random.default_rng(SEED).integers(0, len(cuts), (RANGES, 2)), axis=1)
    pairs = pairs[cuts[pairs[:, 1]] - cuts[pairs[:, 0]] > 1.5 * step]
    k = np.round(cuts / step + 0.5)  # cut i is (k_i − ½)·step
    lo = np.array([lattice_value(float(v), step) for v in k[pairs[:, 0]]])
    hi = np.array([lattice_value(float(v) - 1, step) for v in k[pairs[:, 1]]])
    return lo, hi, counted[pairs[:, 1]] - counted[pairs[:, 0]], pairs


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


def calibrate(payload: dict, cuts: np.ndarray, counted: np.ndarray) -> Optional[float]:
    """The build's weight of a lattice synopsis ``payload`` from the rows below its scan's ``cuts``
    (:func:`rows_below`), on :func:`calibration_ranges`' ranges, of those inside one cell at most
    :data:`ONE_CELL_MOST`; None where it is not calibrated (the module's docstring)."""
    step, grid = payload["step"], np.asarray(payload["grid"], dtype=np.float64)
    if not step > 0 or payload["kde_rows"] <= 0 or payload.get("period", 0.0) > 0 or len(grid) < 2:
        return None
    cuts = np.asarray(cuts, dtype=np.float64)
    lo, hi, exact, pairs = calibration_ranges(cuts, np.asarray(counted, dtype=np.float64), step)
    # the cells of each range's ends (its bounds moved out to half-steps are its cuts: query.cell_of)
    cell = np.clip(np.searchsorted(grid, np.clip(cuts, grid[0], grid[-1]), side="right") - 1, 0, len(grid) - 2)
    one = np.flatnonzero(cell[pairs[:, 0]] == cell[pairs[:, 1]])
    counts = np.ones(len(lo))
    if len(one) > ONE_CELL_MOST:
        kept = one[np.unique(np.linspace(0, len(one) - 1, ONE_CELL_MOST).round().astype(np.int64))]
        counts[one] = 0.0
        counts[kept] = len(one) / len(kept)
        chosen = counts > 0
        lo, hi, exact, counts = lo[chosen], hi[chosen], exact[chosen], counts[chosen]
    return calibrated_weight(payload, lo, hi, exact, counts)
