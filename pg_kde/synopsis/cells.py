"""The cells of a 1-D synopsis (format 2, pg_kde 0.4.0): where they go, and the shape rows take inside one.

A 1-D synopsis answers a range from two parts that add up: exact heavy values (:mod:`.maths`, ``Atoms``)
and cells, each with its exact row count and sum. A range takes whole cells exactly; only the (at most
two) cells it cuts are estimated, from a shape of the rows inside the cell:

- **The value lattice.** Most real columns hold values on a lattice: integers, cents, whole seconds, days.
  :func:`lattice_step` finds the step q (the refresh checks it on every row); each value v then owns
  [v − q/2, v + q/2], cell boundaries sit on half-steps (a value's rows never straddle one) and a query's
  bounds move to the half-step just outside the values they include. A bound on a value counts all of
  that value's rows, a point query ``lo = hi`` estimates that value's rows, and a range whose bounds fall
  on cell boundaries is exact.
- **Equal-depth cells within a byte budget** (:func:`cells_for_budget`, :func:`depth_grid`,
  :func:`lattice_grid`): cells hold similar shares of the rows wherever the data are dense.
- **The shape inside a cell** (:func:`cell_shape`): a cubic density that keeps the cell's exact row count
  and exact mean, and meets the KDE's density at both of its ends (:func:`binned_kde_at`, the reflection KDE
  of the rows as the cells count them, with the bandwidth selected on the sample). Where that cubic would
  go negative, the exponential with the exact mean stands in for a tail cell (rows crowding one end), the
  linear density with it (format 1's shape) otherwise. A time column may follow its periodic profile
  instead (:func:`profile_cut`).

docs/math.md §7 gives the formulas; sql/src/30_query_1d.sql evaluates them at query time and
:mod:`pg_kde.synopsis.query` is their float64 reference.
"""

from __future__ import annotations

import bisect
import functools
import math
from fractions import Fraction
from dataclasses import dataclass
from typing import Callable, Optional, Tuple

import numpy as np

from .._slices import Interrupt

#: Lattice steps tried, largest first: decimal steps and the clock's (minutes, hours, days in seconds).
STEP_CANDIDATES = tuple(sorted({10.0**k for k in range(-9, 10)} | {60.0, 3600.0, 86400.0}, reverse=True))
#: A step is only used while values stay within this many steps of 0 (so v / q is exact enough to round).
STEP_RANGE = 2.0**40

#: Share of a grid's cells placed at equal widths over the column's range (the rest at quantiles): ranges in a
#: sparse tail then fall on whole cells, most of them empty or nearly, not inside one wide tail cell.
WIDTH_SHARE = 0.25
#: Share of the tail-weighted scale in the quantile levels of the cells (see levels).
TAIL_WEIGHT = 0.3
#: Default byte budgets: a 1-D synopsis, a 2-D one (header and payload rows, as pg_column_size counts them).
DEFAULT_BUDGET_1D = 8192
DEFAULT_BUDGET_2D = 65536
#: Smallest and largest budgets accepted: room for the rows' fixed parts and a few cells; 64 MB.
MIN_BUDGET = 1024
MAX_BUDGET = 1 << 26
#: Bytes of the header row and the payload row's fixed part (measured: docs/benchmarks.md, budgets), with room.
ROW_BYTES_1D = 640
#: The same for a 2-D synopsis, and its bytes per grid point (counts, KDE masses, two sums: float8 each).
ROW_BYTES_2D = 1000
POINT_BYTES_2D = 32
#: Groups of a 1-D synopsis' cells with a doubt weight each (calibration.GROUPS), and the bytes of those weights
#: (doubt_weights, a float4[]: 24 of the array's header, 4 a weight), which its cells leave free.
DOUBT_GROUPS = 16
DOUBT_HEADER_BYTES, DOUBT_WEIGHT_BYTES = 24, 4
DOUBT_BYTES = DOUBT_HEADER_BYTES + DOUBT_WEIGHT_BYTES * DOUBT_GROUPS
#: Bytes per cell boundary (grid, cum count, cum sum as float8; density as float4) and per heavy value.
BOUNDARY_BYTES = 28
ATOM_BYTES = 24
#: Largest rate of an exponential shape (a mean within 1/500 of a cell's end): e^500 stays finite.
RATE_LIMIT = 500.0
#: Where the KDE's cubic is no density, a cell's shape is the exponential with its mean when that mean is more
#: than this far from the middle, else the straight line (the two agree to first order there). Up to 0.17.0
#: ⅙, the most a straight line can reach: a tail cell whose end densities fell 11-fold over it, mean 0.34, got
#: the line, and its doubt (its distance from the line) was 0 (docs/math.md §7).
EXP_FROM = 0.01
#: Sampled values the bandwidth is chosen on (an evenly spaced subset of the sorted sample).
KDE_POINTS = 8192
#: Kernel terms binned_kde_at computes between two interrupt checks (about 30 ms of NumPy here).
KDE_SLICE_TERMS = 1 << 20


def c_floor(x: float) -> float:
    """C's floor: a float, ±∞ and NaN as they are (Python's math.floor raises on them)."""
    return float(math.floor(x)) if math.isfinite(x) else x


def c_ceil(x: float) -> float:
    """C's ceil: a float, ±∞ and NaN as they are (an infinity, say a bound near 1e308 over a small step, stays
    one)."""
    return float(math.ceil(x)) if math.isfinite(x) else x


def lattice_step(sample: np.ndarray) -> float:
    """The largest of :data:`STEP_CANDIDATES` that every sampled value is a whole multiple of; 0 when none
    is (a continuous column) or the sample holds fewer than two distinct values."""
    x = np.unique(np.asarray(sample, dtype=np.float64))
    if len(x) < 2:
        return 0.0
    top = float(np.max(np.abs(x)))
    for q in STEP_CANDIDATES:
        if top / q > STEP_RANGE:
            break
        if np.all(on_lattice(x, q)):
            return q
    return 0.0


def on_lattice(values: np.ndarray, step: float) -> np.ndarray:
    """Which values are lattice points of ``step`` (as :func:`lattice_step` judges): exactly the float8 of
    their index k, k·q (k / (1/q) for steps below 1: the correctly rounded decimal, what numeric and float8
    input give; k·q again below 2^-53, a power-of-two quantum), as the scans (extension/cells.c,
    kde_on_lattice) and the tracking triggers judge them too. Exactly, not within a tolerance: a bound
    written as a value must find that value's rows on its lattice point. (0.8.0 allowed 8 ulps of v / q,
    which near 2^53 is a fraction of a step: 9007199254740005 was read as 9007199254740000 on a lattice of
    10,000, and a range holding it as empty. A value computed in float8 one ulp off its decimal, 0.1 + 0.2,
    now makes the column continuous.) Near 0 only 0 itself is a lattice point, and only points within
    :data:`STEP_RANGE` steps of 0 are (0.13.0: past it a half-step bound rounds onto the value itself; a cents
    column's values near 1e14 that a sample of blocks missed had kept the column on its lattice, and a point
    query there read (0, 0) for 2 rows)."""
    v = np.asarray(values, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        k = np.rint(v / step)
        back = lattice_points(k, step)
    return (np.abs(k) <= STEP_RANGE) & (back == v)


def lattice_points(k: np.ndarray, step: float) -> np.ndarray:
    """The float8 values of lattice points k (whole numbers as float8): k·q for steps of 1 and more, k / (1/q)
    below, as :func:`pg_kde.synopsis.query.lattice_value` reads a value; k·q again below 2^-53 (a continuous
    column's power-of-two quantum: k·q is exact, 1/q may not be finite)."""
    return k * step if step >= 1 or step < 2.0**-53 else k / round(1 / step)


def quanta_of(v: float, quantum: float) -> int:
    """rint(v / quantum) as an exact integer, as the scan sums it (past 2^53 exactly: v / quantum may pass
    float8's range for a value near 1e300 in small quanta)."""
    r = float(np.rint(v / quantum)) if abs(v) < 2.0**53 * quantum else math.inf
    return int(r) if math.isfinite(r) else round(Fraction(float(v)) / Fraction(float(quantum)))


def _exact_product(k: int, step: float) -> float:
    """k·step for an integer k past float8's range (a sum of values near 1e300 in small quanta), rounded
    once; ±inf where the product itself is past it."""
    try:
        return float(Fraction(k) * Fraction(step))
    except OverflowError:
        return math.inf if k > 0 else -math.inf


def lattice_sums(steps, step: float) -> np.ndarray:
    """Sums of values from sums of whole steps (exact integers): k·q for steps of 1 and more, k / (1/q)
    below, as :func:`pg_kde.synopsis.query.lattice_value` reads a value."""
    steps = list(steps)
    if any(abs(x) >= 2**1000 for x in steps):
        return np.asarray([_exact_product(int(x), step) for x in steps], dtype=np.float64)
    return lattice_points(np.asarray([float(x) for x in steps], dtype=np.float64), step)


def cells_for_budget(budget: int, atoms: int = 0, heavy_bytes: Optional[int] = None) -> int:
    """How many cells fit in ``budget`` bytes beside ``atoms`` heavy values as arrays, or beside
    ``heavy_bytes`` of heavy values (a pack's) when given (at least 1; the caller checks the budget is at
    least :data:`MIN_BUDGET`)."""
    used = ATOM_BYTES * atoms if heavy_bytes is None else int(heavy_bytes)
    return max(1, (int(budget) - ROW_BYTES_1D - used) // BOUNDARY_BYTES - 1)


def stored_bytes_1d(boundaries: int, atoms: int = 0, pack: int = 0, weights: Optional[int] = None) -> int:
    """What a 1-D synopsis' budget counts: its rows' fixed part, ``boundaries`` cell boundaries, ``atoms``
    heavy values as arrays, a ``pack`` of that many bytes, and ``weights`` group weights (their array's header
    with them; None: none stored)."""
    doubt = 0 if weights is None else DOUBT_HEADER_BYTES + DOUBT_WEIGHT_BYTES * weights
    return ROW_BYTES_1D + BOUNDARY_BYTES * boundaries + ATOM_BYTES * atoms + pack + doubt


def grid_size_2d(budget: int) -> int:
    """Grid points per axis of a 2-D synopsis within ``budget`` bytes: four float8 summed-area tables of
    m × m points (counts, the KDE's masses, two columns' sums) and two axes of m points, beside the rows'
    fixed parts."""
    room = max(0, int(budget) - ROW_BYTES_2D)
    m = math.isqrt(room // POINT_BYTES_2D)
    # (an axis may get two points more than asked: its ends, at the table's min and max)
    while m > 2 and POINT_BYTES_2D * (m + 2) ** 2 + 16 * (m + 2) > room:
        m -= 1
    return max(2, m)


def levels(cells: int) -> np.ndarray:
    """The quantile levels of the inner boundaries of ``cells`` cells: equal steps of
    k(p) = (1 − w) p + w (asin(2p − 1) / π + ½), w = :data:`TAIL_WEIGHT`. The asin part (t-digest's scale)
    gives the tails cells of ~p^½ / cells rows instead of 1 / cells, so ranges in a sparse tail are cut
    finely; the middle cells grow by 1 / (1 − w + 2w / π)."""
    k = np.linspace(0.0, 1.0, cells + 1)[1:-1]
    p = k.copy()
    for _ in range(60):  # Newton on k(p) = k, k monotone and smooth inside (0, 1)
        s = np.sqrt(np.clip(p * (1 - p), 1e-300, None))
        f = (1 - TAIL_WEIGHT) * p + TAIL_WEIGHT * (np.arcsin(2 * p - 1) / np.pi + 0.5) - k
        p = np.clip(p - f / ((1 - TAIL_WEIGHT) + TAIL_WEIGHT / (np.pi * s)), 1e-15, 1 - 1e-15)
    return p


#: Where the sample's neighbours lie more than this many interquartile ranges apart (a sentinel like 1e300,
#: or values near 1e-300 beside a 1), the evenly spaced boundaries skip the gap: spread over the whole
#: range they would all fall in it, empty. Far past any tail of real data (a Pareto tail of index 1 over
#: 10⁷ rows reaches 10⁷ IQRs); :func:`cut_far_gaps` cuts around such gaps exactly after the scan.
FAR_SPREAD = 2.0**40


def bulk_span(sample: np.ndarray, lo: float, hi: float) -> Tuple[float, float]:
    """[lo, hi] less what lies beyond a gap of more than :data:`FAR_SPREAD` interquartile ranges from the
    sample's median (a sentinel such as 1e300): the span whose magnitude sets a continuous column's quantum."""
    if len(sample) < 4:
        return lo, hi
    q25, med, q75 = (float(q) for q in np.quantile(sample, [0.25, 0.5, 0.75]))
    if not q75 > q25:
        return lo, hi
    reach = FAR_SPREAD * (q75 / 2 - q25 / 2) * 2
    with np.errstate(over="ignore"):
        near = sample[np.abs(sample / 2 - med / 2) * 2 <= reach]
        far_lo, far_hi = (abs(v / 2 - med / 2) * 2 > reach for v in (lo, hi))
    if not len(near):
        return lo, hi
    # each end as given unless it lies past such a gap (a far value among the cells, or a heavy one beyond)
    return (float(near.min()) if far_lo else lo), (float(near.max()) if far_hi else hi)


def even_points(sample: np.ndarray, lo: float, hi: float, count: int) -> np.ndarray:
    """The ``count`` − 1 inner points of ``count`` equal widths over [lo, hi], measured along the sample's
    values with gaps of more than :data:`FAR_SPREAD` interquartile ranges left out."""
    if count < 2:
        return np.empty(0)
    if len(sample) >= 4:
        q25, q75 = np.quantile(sample, [0.25, 0.75])
        v = np.unique(np.concatenate([[lo], np.asarray(sample, dtype=np.float64), [hi]]))
        half = v[1:] / 2 - v[:-1] / 2  # halves: ±1e308 apart overflows
        far = half > FAR_SPREAD * float(q75 - q25) / 2
        if q75 > q25 and far.any():
            along = np.concatenate([[0.0], np.cumsum(np.where(far, 0.0, half))])  # half-lengths along the bulk
            return np.interp(np.linspace(0.0, along[-1], count + 1)[1:-1], along, v)
    return np.linspace(lo, hi, count + 1)[1:-1]


def depth_grid(sample: np.ndarray, lo: float, hi: float, cells: int) -> np.ndarray:
    """Boundaries of at most ``cells`` cells over [lo, hi] (a continuous column): the sample's quantiles at
    :func:`levels`, with the ends at the table's min and max. Strictly increasing, at least 2 points."""
    wide = int(cells * WIDTH_SHARE)
    deep = cells - wide
    inner = np.quantile(sample, levels(deep)) if deep > 1 and len(sample) else np.array([])
    inner = np.concatenate([np.asarray(inner, dtype=np.float64), even_points(sample, lo, hi, wide)])
    points = np.unique(np.concatenate([[lo], inner[(inner > lo) & (inner < hi)], [hi]]))
    return points if len(points) >= 2 else np.array([lo, hi if hi > lo else lo + 1.0])


def lattice_grid(sample: np.ndarray, lo: float, hi: float, step: float, cells: int,
                 heavy: np.ndarray = np.empty(0)) -> np.ndarray:
    """Boundaries of at most ``cells`` cells over the values lo .. hi of a lattice of ``step``, on half-steps:
    one cell per value when they fit; otherwise a cell of its own for each ``heavy`` value (exact for any
    range, and no hole in a neighbour's shape) and the rest at the sample's quantile :func:`levels`, each
    boundary just above the value nearest a quantile."""
    k_lo, k_hi = round(lo / step), round(hi / step)
    if k_hi - k_lo + 1 <= cells:
        halves = np.arange(k_lo, k_hi + 2, dtype=np.float64) - 0.5
    else:
        k_heavy = np.round(np.asarray(heavy, dtype=np.float64) / step)
        forced = np.unique(np.concatenate([k_heavy - 0.5, k_heavy + 0.5]))
        free = max(1, cells - len(forced))
        wide = int(free * WIDTH_SHARE)
        deep = free - wide
        light = sample[~np.isin(sample, heavy)]
        light = light if len(light) else sample
        inner = np.quantile(light, levels(deep)) if len(light) and deep > 1 else np.array([])
        inner = np.round(np.asarray(inner) / step) + 0.5
        even = np.round(even_points(np.round(light / step), k_lo, k_hi, wide)) + 0.5
        inner = np.concatenate([inner, even, forced])
        inner = inner[(inner > k_lo) & (inner < k_hi)]
        halves = np.unique(np.concatenate([[k_lo - 0.5], inner, [k_hi + 0.5]]))
    return halves * step


def trim_ends(points: np.ndarray, lo: Optional[float], hi: Optional[float], step: float) -> np.ndarray:
    """The grid with its first and last points at the scanned rows' min and max (half a step out on a
    lattice): moved in when those lie inside the outer cells, out when rows lie beyond the grid (the grid is
    placed from a sample; the scan put those rows in the outer cells). Each row stays in its cell."""
    if lo is None or len(points) < 2:
        return points
    points = np.array(points, dtype=np.float64)
    if step > 0:  # the half-steps as lattice_grid computes them
        lo, hi = (round(lo / step) - 0.5) * step, (round(hi / step) + 0.5) * step
    if lo < points[1] and lo != points[0]:
        points[0] = lo
    if hi > points[-2] and hi != points[-1]:
        points[-1] = hi
    return points


def boundary_above(v: float, step: float) -> float:
    """The lowest boundary with ``v`` below it: the next half-step on a lattice, the next float8 otherwise."""
    return (round(v / step) + 0.5) * step if step > 0 else float(np.nextafter(v, np.inf))


def boundary_below(v: float, step: float) -> float:
    """The highest boundary with ``v`` at or above it (cells are [a, b)): the half-step below on a lattice."""
    return (round(v / step) - 0.5) * step if step > 0 else float(v)


def _snap(cuts: np.ndarray, step: float) -> np.ndarray:
    return (np.floor(cuts / step) + 0.5) * step if step > 0 else cuts


def cut_outer_cells(points: np.ndarray, rows: np.ndarray, quanta: list, low: Tuple[np.ndarray, np.ndarray],
                    low_done: Optional[float], high: Tuple[np.ndarray, np.ndarray], high_done: Optional[float],
                    lo: float, hi: float, step: float, quantum: float, keep: np.ndarray = np.empty(0)):
    """Cut the outer cells where rows lie beyond the grid (placed from a sample of the table's blocks, whose
    range the table exceeds), as a grid placed over the whole range would have: the extra part of the range
    gets its share of the :data:`WIDTH_SHARE` evenly spaced boundaries. The cuts go only where every row is
    known: ``low`` (values, rows of each) holds every cell value below ``low_done``, ``high`` every one at or
    above ``high_done`` (None: every value of that outer cell), so the new cells' rows and sums in quanta
    are exact. As many interior boundaries go as cuts come (never one of ``keep``), so the number of cells
    stays: first between neighbours whose union is no wider than 1.5 times the whole range's even spacing
    (the fewest rows first: the grid over the sampled range spaced its evenly spaced boundaries closer),
    then where the union is smallest in share of rows and of the range, whichever is larger. ``lo``,
    ``hi``: the cells' min and max. Returns (points, rows, quanta), unchanged when no row lies beyond the
    grid."""
    points, rows, quanta = np.asarray(points, dtype=np.float64), np.asarray(rows, dtype=np.float64), list(quanta)
    m = len(points)
    if m < 4 or not hi > lo:
        return points, rows, quanta
    kept = set(np.asarray(keep, dtype=np.float64).tolist())
    free = [j for j in range(2, m - 2) if points[j] not in kept]  # boundaries that may go
    wide = int((m - 1) * WIDTH_SHARE)

    def share(beyond):
        return min(int(round(wide * beyond / (hi - lo))), len(free) // 2)

    pieces = []  # (new boundaries, the cell they replace)
    if hi > points[-1]:
        start = points[-2]
        first = start if high_done is None else max(start, high_done)
        r = share(hi - points[-1])
        cuts = _snap(np.linspace(first, hi, r + 1)[:-1], step) if r else np.empty(0)
        cuts = np.unique(cuts[(cuts > start) & (cuts >= first) & (cuts < hi)])
        if len(cuts):
            pieces.append((np.concatenate([[start], cuts, [hi if step == 0 else boundary_above(hi, step)]]), m - 2))
    if lo < points[0]:
        end = points[1]
        last = end if low_done is None else min(end, low_done)
        r = share(points[0] - lo)
        cuts = _snap(np.linspace(lo, last, r + 1)[1:], step) if r else np.empty(0)
        cuts = np.unique(cuts[(cuts > lo) & (cuts <= last) & (cuts < end)])
        if len(cuts):
            pieces.append((np.concatenate([[lo if step == 0 else boundary_below(lo, step)], cuts, [end]]), 0))
    if not pieces:
        return points, rows, quanta
    for bounds, c in sorted(pieces, key=lambda p: -p[1]):  # the upper end first: the lower's index stays
        known, weights = high if c else low
        q = np.array([quanta_of(v, quantum) for v in known], dtype=object)
        # the new cells' indices (the last closed: it ends at the max) of the values in the replaced cell
        at = np.clip(np.searchsorted(bounds, known, side="right") - 1, 0, len(bounds) - 2)
        inside = (known >= points[c]) if c else (known < points[1])
        counts = np.bincount(at[inside], weights=weights[inside], minlength=len(bounds) - 1)
        sums = [0] * (len(bounds) - 1)
        for k, w, v in zip(at[inside], weights[inside], q[inside]):
            sums[k] += int(w) * v
        rest = 0 if c else len(bounds) - 2  # the piece that keeps the rows not known one by one
        counts[rest] = rows[c] - (counts.sum() - counts[rest])
        sums[rest] = quanta[c] - (sum(sums) - sums[rest])
        points = np.concatenate([points[:c], bounds, points[c + 2:]])
        rows = np.concatenate([rows[:c], counts, rows[c + 1:]])
        quanta = quanta[:c] + sums + quanta[c + 1:]
    offset = len(pieces[-1][0]) - 2 if pieces[-1][1] == 0 else 0  # cells added at the lower end shift indices
    total, even = max(float(rows.sum()), 1.0), (hi - lo) / max(wide, 1)

    def cost(b):
        """(0, rows) for a union no wider than 1.5 even spacings, else (1, the larger of its shares of rows
        and of the range): neither resolution is given up where it is fine. (1.5, not 1: pairs of cells
        spaced at the sampled range's even spacing are wider than the whole range's.)"""
        merged_rows, width = rows[b + offset - 1] + rows[b + offset], points[b + offset + 1] - points[b + offset - 1]
        return (0, merged_rows) if width <= 1.5 * even else (1, max(merged_rows / total, width / (hi - lo)))

    for _ in range(len(points) - m):
        j = min(free, key=cost)
        free.remove(j)
        free = [b - 1 if b > j else b for b in free]
        i = j + offset  # boundary i goes: cells i - 1 and i merge
        points = np.delete(points, i)
        rows = np.concatenate([rows[:i - 1], [rows[i - 1] + rows[i]], rows[i + 1:]])
        quanta = quanta[:i - 1] + [quanta[i - 1] + quanta[i]] + quanta[i + 1:]
    return points, rows, quanta


#: A gap between known values wider than this many typical grids (the median cell width times the cells) is
#: far: sentinels like 1e300 among cents, or a value near 1e-300 beside values near 1.
FAR_GAP = 1024.0
#: Most far gaps cut (two boundaries each: one above the lower value, one at the upper).
FAR_GAPS = 8


def cut_far_gaps(points: np.ndarray, rows: np.ndarray, quanta: list, low: Tuple[np.ndarray, np.ndarray],
                 low_done: Optional[float], high: Tuple[np.ndarray, np.ndarray], high_done: Optional[float],
                 step: float, quantum: float, keep: np.ndarray = np.empty(0)):
    """Cut the cells around far gaps between values the scan knows one by one (``low``: every cell value
    below ``low_done``; ``high``: every one at or above ``high_done``; None: every cell value of the
    column), so that no cell spans one: a cell holding the rows near 0 and a row at -1e300 says nothing of
    where inside it a range's bound falls (its t is 1e-300 from an end), while the cells [−1e300, next)
    and [w, …) are exact. Each of the :data:`FAR_GAPS` widest gaps wider than :data:`FAR_GAP` typical grids
    gets a boundary just above its lower value and one at its upper value (the empty cell between them
    says there are no rows). As many interior boundaries go as cuts come (never one of ``keep``), where the
    merged cell is empty or holds the smallest share of the rows, wide cells last. Returns (points, rows,
    quanta), unchanged when no gap is far."""
    points, rows, quanta = np.asarray(points, dtype=np.float64), np.asarray(rows, dtype=np.float64), list(quanta)
    m = len(points)
    if m < 6:
        return points, rows, quanta
    typical = float(np.median(np.diff(points)))
    far = FAR_GAP * typical * (m - 1)
    if not far > 0:
        return points, rows, quanta
    gaps = []  # (half width, side, lower value, upper value)
    for side, (values, _), done in ((0, low, low_done), (1, high, high_done)):
        v = np.unique(values if done is None else values[values < done] if side == 0 else values[values >= done])
        half = v[1:] / 2 - v[:-1] / 2  # halves: the width of ±1e308 overflows
        for i in np.flatnonzero(half > far / 2):
            gaps.append((float(half[i]), side, float(v[i]), float(v[i + 1])))
    if not gaps:
        return points, rows, quanta
    cuts = ([], [])  # per side
    # (at most as many gaps as leave half the interior boundaries free to go: the cuts' boundaries stay, and
    # a small budget's grid must get back to its size; 8 gaps in a 1 KB synopsis of 14 points took it to
    # 1,200 bytes)
    for _, side, u, w in sorted(gaps, reverse=True)[:min(FAR_GAPS, max(0, (m - 4) // 4))]:
        upper = boundary_below(w, step)
        if upper >= points[-1]:  # the max itself: a cell of one float8's width holds it
            upper = float(np.nextafter(points[-1], -np.inf))
        # (never between 0 and the smallest normal float8: see build._plan_1d)
        cuts[side].extend(c for c in (boundary_above(u, step), upper)
                          if points[0] < c < points[-1] and (c == 0 or abs(c) >= np.finfo(np.float64).tiny))
    fixed = set(np.asarray(keep, dtype=np.float64).tolist()) | set(cuts[0]) | set(cuts[1])
    # The lower side's cuts first, then the upper's: a cell cut by both is split where each side's values
    # are known, the rows not known one by one staying in the part between.
    points, rows, quanta = _split_known(points, rows, quanta, cuts[0], *low, low_done, 0, quantum)
    points, rows, quanta = _split_known(points, rows, quanta, cuts[1], *high, high_done, 1, quantum)
    if len(points) == m:
        return points, rows, quanta
    total = max(float(rows.sum()), 1.0)
    spread = float(np.sum(np.minimum(np.diff(points), typical * (m - 1))))  # the span, far gaps shortened
    while len(points) > m:
        # Merging cells i − 1 and i: free where both are empty, else the larger of the union's shares of the
        # rows and of the span; a far gap's boundaries and the kept ones stay.
        i = np.arange(2, len(points) - 2)
        merged = rows[i - 1] + rows[i]
        width = np.minimum(points[i + 1] - points[i - 1], spread)
        cost = np.where(merged == 0, -1.0, np.maximum(merged / total, width / spread))
        cost[np.isin(points[i], list(fixed))] = np.inf
        if not len(i) or not np.isfinite(cost.min()):
            break
        j = int(i[np.argmin(cost)])
        points = np.delete(points, j)
        rows = np.concatenate([rows[:j - 1], [rows[j - 1] + rows[j]], rows[j + 1:]])
        quanta = quanta[:j - 1] + [quanta[j - 1] + quanta[j]] + quanta[j + 1:]
    return points, rows, quanta


def _split_known(points: np.ndarray, rows: np.ndarray, quanta: list, cuts: list, values: np.ndarray,
                 weights: np.ndarray, done: Optional[float], side: int, quantum: float):
    """The cells with ``cuts`` added. ``values`` (rows of each: ``weights``) are every cell value below
    ``done`` (``side`` 0) or at or above it (side 1), every one when ``done`` is None; a split cell's parts
    get those values' rows and sums in quanta, and the part toward the values not known one by one (the
    last for side 0, the first for side 1) the rest of the cell."""
    added = sorted(set(c for c in cuts if c not in set(points.tolist())))
    if not added:
        return points, rows, quanta
    if done is not None:
        known = (values < done) if side == 0 else (values >= done)
        values, weights = values[known], weights[known]
    new_points = np.unique(np.concatenate([points, added]))
    owner = np.searchsorted(points, new_points[:-1], side="right") - 1  # old cell of each new cell
    counts, sums = np.zeros(len(new_points) - 1), [0] * (len(new_points) - 1)
    last = len(points) - 2
    for c in range(len(points) - 1):
        parts = np.flatnonzero(owner == c)
        if len(parts) == 1:
            counts[parts[0]], sums[parts[0]] = rows[c], quanta[c]
            continue
        bounds = new_points[parts[0]:parts[-1] + 2]
        inside = (values >= bounds[0]) & ((values < bounds[-1]) | (c == last))  # the last cell is closed
        at = np.clip(np.searchsorted(bounds, values[inside], side="right") - 1, 0, len(bounds) - 2)
        part_rows = np.bincount(at, weights=weights[inside], minlength=len(bounds) - 1)
        part_sums = [0] * (len(bounds) - 1)
        for k, wt, v in zip(at, weights[inside], values[inside]):
            part_sums[k] += int(wt) * quanta_of(v, quantum)
        rest = len(bounds) - 2 if side == 0 else 0
        part_rows[rest] = rows[c] - (part_rows.sum() - part_rows[rest])
        part_sums[rest] = quanta[c] - (sum(part_sums) - part_sums[rest])
        counts[parts] = part_rows
        sums[parts[0]:parts[-1] + 1] = part_sums
    return new_points, counts, sums


def order_statistics(sample: np.ndarray, k: int) -> np.ndarray:
    """The sample sorted, thinned to ``k`` evenly spaced order statistics when larger (deterministic)."""
    x = np.sort(np.asarray(sample, dtype=np.float64))
    return x[np.linspace(0, len(x) - 1, k).round().astype(np.int64)] if len(x) > k else x


#: Bandwidths beyond which a cell's kernel mass is below float8's resolution (Φ(−9) ≈ 1e-19).
BINNED_REACH = 9.0


def stored_density(density: np.ndarray) -> np.ndarray:
    """Densities relative to a grid's mean as float4 stores them (read back as float64): capped at float4's
    largest number, which a cell narrower than 1e-38 of the grid's span would pass (one value far beyond
    the rest, as 1e300 among cents)."""
    return np.minimum(np.asarray(density, dtype=np.float64), float(np.finfo(np.float32).max)) \
        .astype(np.float32).astype(np.float64)


def normal_cdf(u: np.ndarray) -> np.ndarray:
    """Φ(u) = erfc(−u/√2)/2 with erfc by the Chebyshev fit of Numerical Recipes (Press et al., 2nd ed., §6.2,
    erfcc): relative error below 1.2e-7 everywhere, tails included; NumPy only (no SciPy import in a new
    backend's first refresh)."""
    x = -np.asarray(u, dtype=np.float64) / math.sqrt(2.0)
    z = np.minimum(np.abs(x), 40.0)  # erfc(40) is far below float8's least number: the same 0 without overflow
    t = 1.0 / (1.0 + 0.5 * z)
    poly = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (
        0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))))
    erfc = t * np.exp(-z * z + poly)
    return np.where(x >= 0, erfc, 2.0 - erfc) / 2.0


def binned_kde_at(points: np.ndarray, rows: np.ndarray, h: float, *, interrupt: Interrupt = None) -> np.ndarray:
    """The KDE of the table's rows as the cells count them, at the cell boundaries ``points``: each cell's
    exact rows spread evenly over it, smoothed by the Gaussian kernel of bandwidth h (a binned kernel
    estimator, Wand & Jones 1995, App. D, with cells for bins), reflected at both ends of the grid:
    f(g) = (1 / N) Σ_c n_c [Φ((g − a_c)/h) − Φ((g − b_c)/h)] / (b_c − a_c) over the cells [a_c, b_c] and their
    mirror images about the first and last boundaries, N = Σ n_c. A density on the grid's range. Cells more
    than :data:`BINNED_REACH` bandwidths away are left out (their terms are below float8's resolution)."""
    g = np.asarray(points, dtype=np.float64)
    n = np.asarray(rows, dtype=np.float64)
    total = n.sum()
    if len(g) < 2 or total <= 0:
        return np.zeros(len(g))
    a, b = g[:-1], g[1:]
    # The cells and their mirror images, sorted by their left ends (mirrors of the first cells lie left of
    # the grid, of the last ones right of it).
    with np.errstate(over="ignore"):  # mirrors past float8's range (a grid ending near 1e308) lie beyond reach
        lo = np.concatenate([(g[0] - (b - g[0]))[::-1], a, (g[-1] + (g[-1] - b))[::-1]])
        hi = np.concatenate([(g[0] - (a - g[0]))[::-1], b, (g[-1] + (g[-1] - a))[::-1]])
    counts = np.concatenate([n[::-1], n, n[::-1]])
    out = np.zeros(len(g))
    first = np.searchsorted(hi, g - BINNED_REACH * h, side="left")  # cells ending within reach
    last = np.searchsorted(lo, g + BINNED_REACH * h, side="right")  # cells starting within reach
    start = 0
    while start < len(g):  # slices of about KDE_SLICE_TERMS terms
        if interrupt is not None:
            interrupt()
        spans = np.maximum(last[start:] - first[start:], 0)
        stop = start + max(1, int(np.searchsorted(np.cumsum(spans), KDE_SLICE_TERMS)))
        spans = spans[: stop - start]
        if spans.sum():
            point = np.repeat(np.arange(start, stop), spans)
            cell = np.arange(spans.sum()) - np.repeat(np.cumsum(spans) - spans, spans) + np.repeat(first[start:stop], spans)
            with np.errstate(over="ignore"):  # a cell 1e300 wide is ±inf bandwidths away: Φ is 0 or 1 there
                x, y = (g[point] - lo[cell]) / h, (g[point] - hi[cell]) / h
            # Φ(x) − Φ(y), x > y, from the tail both lie in (no cancellation near 1)
            mass = np.where(y > 0, normal_cdf(-y) - normal_cdf(-x), normal_cdf(x) - normal_cdf(y))
            with np.errstate(over="ignore", invalid="ignore"):
                width = hi[cell] - lo[cell]
            spread = np.divide(counts[cell] * mass, width, out=np.zeros(len(cell)), where=np.isfinite(width) & (width > 0))
            np.add.at(out, point, spread)
        start = stop
    return out / total


def repeatable_bandwidth(h: float) -> float:
    """h to three significant digits: backends and thread counts that differ in the last bits of h give the
    same synopsis (a KDE's bandwidth carries no more precision than that)."""
    return float(f"{h:.3g}") if h > 0 and math.isfinite(h) else h


# ------------------------------------------------------------------------------------ the shape in a cell
def cubic(d0: float, d1: float, mean: float) -> Tuple[float, float, float, float]:
    """Coefficients (a, b, c, e) of f(t) = a + b t + c t² + e t³ on [0, 1] with f(0) = d0, f(1) = d1,
    ∫f = 1 and ∫t f = mean (docs/math.md §7)."""
    return (d0, -9 * d0 + 3 * d1 - 60 * mean + 36, 18 * d0 - 12 * d1 + 180 * mean - 96,
            -10 * d0 + 10 * d1 - 120 * mean + 60)


def cubic_is_density(a: float, b: float, c: float, e: float) -> bool:
    """Whether a cubic with non-negative ends (the caller's d0, d1) is non-negative on [0, 1]: at the roots
    of f' inside (what _kde_range checks in C, extension/range.c, the same way)."""
    def f(t):
        return a + t * (b + t * (c + t * e))
    roots = []
    if abs(e) > 1e-12:
        disc = 4 * c * c - 12 * e * b
        if disc >= 0:
            s = math.sqrt(disc)
            roots = [(-2 * c + s) / (6 * e), (-2 * c - s) / (6 * e)]
    elif abs(c) > 1e-12:
        roots = [-b / (2 * c)]
    return all(not (0 < t < 1 and f(t) < 0) for t in roots)


def linear(mean: float) -> Tuple[float, float, float, float]:
    """The linear density with the given mean, its slope 12 (mean − ½) kept within ±2 (non-negative)."""
    slope = max(-2.0, min(2.0, 12 * (mean - 0.5)))
    return (1 - slope / 2, slope, 0.0, 0.0)


def exponential_rate(mean: float) -> float:
    """λ of the density λ e^{−λt} / (1 − e^{−λ}) on [0, 1] with the given mean (λ < 0 when the mean is past
    ½: the mass at the right end): Newton's method on m(λ) = 1/λ − 1/(e^λ − 1), 30 steps until a step changes
    λ by at most 1e-12 of it (what _kde_range does in C, step for step). m(λ) falls from ½ at λ = 0, convex,
    above its tangent ½ − λ/12 there: from 12(½ − m) Newton's steps rise to the root, for a mean within ⅙ of
    the middle (0.18.0: from 1/m, its asymptote, they overshot to λ ≤ 0 past m = 0.479); from 1/m where m < ⅓,
    as before. Used for |mean − ½| > :data:`EXP_FROM` (λ > 0.12, each step well conditioned)."""
    m = min(max(mean, 1e-6), 1 - 1e-6)
    flip = m > 0.5
    if flip:
        m = 1 - m
    lam = min(RATE_LIMIT, max(1e-6, 1.0 / m if m < 1.0 / 3 else 12 * (0.5 - m)))
    for _ in range(30):
        e = math.exp(-lam)
        f = 1 / lam - e / (1 - e) - m
        d = -1 / (lam * lam) + e / ((1 - e) * (1 - e))  # (a product, as C: pow and ** can differ by an ulp)
        new = min(RATE_LIMIT, max(1e-6, lam - f / d))
        if abs(new - lam) <= 1e-12 * lam:
            lam = new
            break
        lam = new
    return -lam if flip else lam


def cell_shape(d0: Optional[float], d1: Optional[float], mean: float) -> Tuple[Tuple[float, ...], str]:
    """The shape of a cell's rows and its kind: the KDE's cubic ("cubic", coefficients a, b, c, e); where
    that goes negative (a tail cell whose density falls steeply) and the mean is more than :data:`EXP_FROM` from
    the middle, the exponential density with that mean ("exp", (λ,)); otherwise the linear density with that
    mean ("linear"). Without usable densities (None, negative), the exponential only where the line cannot
    reach the mean (more than ⅙ from the middle). d0, d1 are the KDE's density at the ends relative to the
    cell's mean density (None: not known)."""
    known = d0 is not None and d1 is not None and d0 >= 0 and d1 >= 0
    if known:
        coef = cubic(d0, d1, mean)
        if cubic_is_density(*coef):
            return coef, "cubic"
    # (without the KDE's ends, the line wherever it reaches the mean)
    if abs(mean - 0.5) > (EXP_FROM if known else 1 / 6):
        return (exponential_rate(mean),), "exp"
    return linear(mean), "linear"


def mass(coef, t: float) -> float:
    """∫₀ᵗ f of a shape's coefficients (cubic or linear: four; exponential: one, λ)."""
    if len(coef) == 1:
        lam = coef[0]
        return (math.exp(-lam * t) - 1) / (math.exp(-lam) - 1)
    a, b, c, e = coef
    return t * (a + t * (b / 2 + t * (c / 3 + t * e / 4)))


def moment(coef, t: float) -> float:
    """∫₀ᵗ s f(s) ds."""
    if len(coef) == 1:
        lam = coef[0]
        return (1 - math.exp(-lam * t) * (1 + lam * t)) / (lam * (1 - math.exp(-lam)))
    a, b, c, e = coef
    return t * t * (a / 2 + t * (b / 3 + t * (c / 4 + t * e / 5)))


def shape_of(g0: float, g1: float, n: float, cell_sum: float, dens0: float, dens1: float, kde_rows: float,
             half_range: float):
    """(coefficients, mean position) of the shape of cell [g0, g1) holding n rows that sum to ``cell_sum``, from
    the stored densities at its ends (relative to the grid's mean density, kde_rows / range; ``half_range``
    is half the grid's range): the cell's mean position ((S/n)/2 − g0/2)/w (½ where sums ran past float8's
    range) and the KDE's densities relative to the cell's mean density, dens · (w / R) · (kde_rows / n), with
    w and R halves (no difference of values near the ends of float8 overflows), into :func:`cell_shape`.
    The shape a query reads of a cut cell with no heavy value inside it (with some: :func:`fit_holes`, from
    :func:`cell_ends`)."""
    d0, d1, mean = cell_ends(g0, g1, n, cell_sum, dens0, dens1, kde_rows, half_range)
    return cell_shape(d0, d1, mean)[0], mean


def cell_ends(g0: float, g1: float, n: float, cell_sum: float, dens0: float, dens1: float, kde_rows: float,
              half_range: float) -> Tuple[float, float, float]:
    """(d0, d1, mean) that :func:`shape_of` gives :func:`cell_shape`: the KDE's densities at the cell's ends
    relative to its mean density, and its mean position."""
    w = g1 / 2 - g0 / 2
    mean = ((cell_sum / n) / 2 - g0 / 2) / w
    mean = min(1.0, max(0.0, mean)) if math.isfinite(mean) else 0.5
    scale = (w / half_range) * (kde_rows / n)
    return dens0 * scale, dens1 * scale, mean


# ------------------------------------------------------------------- the heavy values' slots inside a cell
#: Evaluations of the search for the mean a cell's shape is given over its whole width so that its mean over
#: the cell's own slots (the heavy values' taken out) is the cell's exact mean (:func:`fit_holes`).
HOLE_ROUNDS = 6
#: Below this share of a cell's shape left off the heavy values' slots, they are not taken out (the shape
#: has almost no mass where the cell's rows are: the whole cell's shape stands).
HOLE_FLOOR = 1e-6


def heavy_slots(heavy, step: float, g0: float, g1: float) -> list:
    """[(v, ta, tb)]: the heavy values v strictly inside cell [g0, g1] of a lattice of step q and the slot
    [v − q/2, v + q/2] each owns, as fractions of the cell (halves: no difference of values near the ends of
    float8 overflows). A synopsis whose heavy values are whole (each holds every row of its value, what a
    build gives) has none of a cell's rows there: they sit on its other slots (docs/math.md §7, "Heavy values
    inside a cell"). Empty off a lattice or without ``heavy``."""
    if not step > 0 or heavy is None or len(heavy) == 0:
        return []
    i, j = bisect.bisect_right(heavy, g0), bisect.bisect_left(heavy, g1)
    w, h = g1 / 2 - g0 / 2, step / 2
    return [(float(v), max(0.0, min(1.0, ((v - h) / 2 - g0 / 2) / w)), max(0.0, min(1.0, ((v + h) / 2 - g0 / 2) / w)))
            for v in heavy[i:j]]


@dataclass(frozen=True)
class Holes:
    """A cut cell's shape over its own slots (:func:`fit_holes`): ``part(ta, tb)``, the (mass, first moment)
    over [ta, tb] of the shape with mean ``m`` over the whole cell; ``slots``, (v, mass, first moment) of
    each heavy value's slot under it; ``rest``, the mass off them (1 where none is taken out)."""

    m: float
    part: Callable
    slots: list
    rest: float

    def share(self, t0: float, t1: float, lo: float, hi: float) -> Tuple[float, float]:
        """(mass, first moment) over [t0, t1] of the cell's own slots, whose values lie in (lo, hi), as
        shares of the cell's rows."""
        a, b = self.part(t0, t1)
        if not self.slots:
            return a, b
        for v, ha, hb in self.slots:
            if lo < v < hi:
                a, b = a - ha, b - hb
        return a / self.rest, b / self.rest


def fit_holes(shape: Callable, mean: float, slots: list) -> Holes:
    """The cut cell's shape over its own slots: ``shape(m)`` gives the ``part`` function of the shape with
    mean m over the whole cell, :class:`Holes`; ``slots`` (:func:`heavy_slots`) are taken out. Their own
    mean, (M1 − H1)/(M0 − H0) (M the whole cell's mass and first moment, H the slots'), should be the cell's
    exact ``mean``: a secant search on m from m = ``mean`` (the first step of slope 1, and 1 wherever the last
    two evaluations give no positive slope), m kept in [0, 1], :data:`HOLE_ROUNDS` evaluations; the one whose
    own mean is nearest stands. (A plain step m += mean − own mean overshoots where most of the cell's slots are
    heavy: the own mean moves about twice as fast as m, and a red team saw it end 0.22 of a cell off.) Where no
    slot is taken, or an evaluation leaves less than :data:`HOLE_FLOOR` of the shape's mass off them: the
    shape with ``mean`` over the whole cell. As fit_holes in extension/range.c."""
    if slots:
        best = last = None
        m = mean
        for rounds in range(HOLE_ROUNDS):
            part = shape(m)
            m0, m1 = part(0.0, 1.0)
            taken, h0, h1 = [], 0.0, 0.0
            for v, ta, tb in slots:
                a, b = part(ta, tb)
                taken.append((v, a, b))
                h0, h1 = h0 + a, h1 + b
            if not m0 - h0 > HOLE_FLOOR:
                return Holes(mean, shape(mean), [], 1.0)
            miss = (m1 - h1) / (m0 - h0) - mean
            if best is None or abs(miss) < abs(best[0]):
                best = (miss, Holes(m, part, taken, m0 - h0))
            if miss == 0 or rounds == HOLE_ROUNDS - 1:
                break
            slope = (miss - last[1]) / (m - last[0]) if last is not None and m != last[0] else 1.0
            if not slope > 0:
                slope = 1.0
            last = (m, miss)
            m = max(0.0, min(1.0, m - miss / slope))
        return best[1]
    return Holes(mean, shape(mean), [], 1.0)


def cell_slots(w: float, step: float) -> float:
    """The lattice slots of a cell of half-width w on a lattice of step q: ⌊2w/q + ½⌋ (C's round; Python's
    rounds halves to even), as :func:`mean_known` and :func:`mostly_heavy` count them. cell_slots in
    extension/range.c."""
    return c_floor(2 * w / step + 0.5)


def mostly_heavy(slots: list, step: float, g0: float, g1: float) -> bool:
    """Whether the heavy values' ``slots`` inside cell [g0, g1] (:func:`heavy_slots`, a lattice of step q) are
    more than half of its slots: 2 J > m, J of them, m its :func:`cell_slots` (w its half-width: halves, no
    difference of values near the ends of float8 overflows; rounded, so that exactly half is not more on a
    decimal step). There the KDE's densities at the cell's ends, smoothed over the heavy values' slots, say
    little of its own few slots (:func:`own_holes`). As in extension/range.c."""
    return 2 * len(slots) > cell_slots(g1 / 2 - g0 / 2, step)


def own_holes(d0: float, d1: float, mean: float, slots: list, step: float, g0: float,
              g1: float) -> Tuple[Holes, Holes]:
    """A cut cell's shape over its own slots off a periodic profile (0.22.0), and the shape its doubt is
    measured from (0.23.0): (the straight line, the KDE's cubic) where heavy values hold most of its slots
    (:func:`mostly_heavy`), else (the KDE's cubic, the line); each :func:`fit_holes` of :func:`linear_shape` and
    :func:`cubic_shape` (docs/math.md §7, "Heavy values inside a cell"). Each is the other's doubt: how far the
    two shapes the cell could take part. As in extension/range.c."""
    line, cubic = fit_holes(linear_shape, mean, slots), fit_holes(cubic_shape(d0, d1), mean, slots)
    return (line, cubic) if slots and mostly_heavy(slots, step, g0, g1) else (cubic, line)


def _part(coef) -> Callable:
    def part(ta, tb):
        return mass(coef, tb) - mass(coef, ta), moment(coef, tb) - moment(coef, ta)
    return part


def cubic_shape(d0: float, d1: float) -> Callable:
    """``shape(m)`` for :func:`fit_holes`: the cell's shape (:func:`cell_shape`) with the KDE's end densities
    d0, d1 and mean m."""
    def shape(m):
        return _part(cell_shape(d0, d1, m)[0])
    return shape


def linear_shape(m: float) -> Callable:
    """``shape(m)`` for :func:`fit_holes`: the straight line with mean m."""
    return _part(linear(m))


def profile_shape(profile, period: float, g0: float, g1: float, step: float) -> Callable:
    """``shape(m)`` for :func:`fit_holes`: the profile tilted to mean m (:func:`profile_cut`'s share and
    position, without its variance). The cell's moments, and each piece's, are taken once: only the tilt moves
    with m."""
    z = cell_moments(profile, period, step, g0, g1)
    pieces: dict = {}

    def shape(m):
        beta = profile_tilt(z, m)

        def part(ta, tb):
            c = pieces.get((ta, tb))
            if c is None:
                c = pieces[(ta, tb)] = profile_piece_moments(profile, period, step, g0, g1, ta, tb)
            share, pos = profile_tilted(z, c, beta, ta, tb)
            return share, share * pos
        return part
    return shape


# ------------------------------------------------------------------------------- a periodic profile (time)
#: Periods a time column's rows may follow inside a cell, with the bins of the profile stored for each: the
#: time of day in half hours (timestamp, timestamptz) and the day of the week (date).
DAY_PROFILE = (86400.0, 48)
WEEK_PROFILE = (604800.0, 7)
#: Pseudo-count added to each bin of a profile (no bin is empty: every cell keeps some mass).
PROFILE_PRIOR = 1.0


def profile_bytes(bins: int) -> int:
    """Bytes a profile of ``bins`` bins adds to the payload row: bins + 2 float4, its period and the array's
    header, with room."""
    return 4 * (bins + 2) + 40


def make_profile(counts: np.ndarray) -> np.ndarray:
    """The profile of rows counted in each of K equal bins of a period (:func:`period_counts`), with
    :data:`PROFILE_PRIOR` added to each, stored as float4 cumulative shares C_0 = 0 .. C_K = 1 at the bins'
    edges (the density is constant in each bin), then the number of rows it was made from (a sample's
    sampling error widens intervals, :func:`profile_share_variance`; a count of every row's, the refresh's
    ``_kde_phases``, leaves none to speak of). docs/math.md §7."""
    counts = np.asarray(counts, dtype=np.float64)
    prior = counts + PROFILE_PRIOR
    cum = np.concatenate([[0.0], np.cumsum(prior / prior.sum())])
    cum[-1] = 1.0
    return np.concatenate([cum, [float(counts.sum())]]).astype(np.float32).astype(np.float64)


def period_counts(values: np.ndarray, period: float, bins: int, step: float = 0.0,
                  weights: Optional[np.ndarray] = None) -> np.ndarray:
    """The rows in each of ``bins`` equal bins of the period, by the phase ((x + step/2) mod period) / period:
    on a lattice of ``step`` each value's bin is the one its half-steps [v − q/2, v + q/2] fall in, as queries
    cut it. ``weights``: each value's rows (1 each by default). Non-finite values count nowhere. As the
    refresh's ``_kde_phases`` in C (extension/profile.c), step for step."""
    x = np.asarray(values, dtype=np.float64)
    w = np.ones(len(x)) if weights is None else np.asarray(weights, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        phase = np.mod(x + step / 2, period) / period
    ok = np.isfinite(phase)
    at = np.clip((phase[ok] * bins).astype(np.int64), 0, bins - 1)
    return np.bincount(at, weights=w[ok], minlength=bins).astype(np.float64)


def periodic(sample: np.ndarray, period: float, bins: int, step: float = 0.0) -> bool:
    """Whether the sample's rows are spread unevenly over the period's bins (as :func:`make_profile` bins
    them): Pearson's χ² against even bins beyond its mean (bins − 1) by five of its standard deviations
    (√(2 (bins − 1))). Where they are spread evenly a profile is the straight line, and its bytes are
    better spent on cells."""
    counts = period_counts(sample, period, bins, step)
    expected = len(sample) / bins
    if expected < 5:
        return False
    chi2 = float(((counts - expected) ** 2).sum() / expected)
    return chi2 > (bins - 1) + 5 * math.sqrt(2 * (bins - 1))


def _profile_piece(profile, bins: int, period: float, h: float, g0: float, a: float, b: float, m: list) -> None:
    """Add to m the mass and first three moments of the profile's density over [a, b] (seconds, a <= b) about
    g0, in periods (d = (x − g0)/T), bin by bin."""
    x = a
    while x < b:
        y = (x + h) / period
        j = math.floor(y)
        k = min(int((y - j) * bins), bins - 1)
        edge = (j + (k + 1) / bins) * period - h  # where this bin ends
        if edge <= x:  # x on the edge itself, rounded into the bin before
            k, edge = k + 1, edge + period / bins
        e = min(b, edge)
        if not e > x:  # a bin narrower than float8's spacing near the cell (a hand-built period): no step forward
            raise ValueError("pg_kde: a profile's bins (period / K) are narrower than float8's spacing of the "
                             "cell's values")
        dens = (profile[k % bins + 1] - profile[k % bins]) * bins
        ds, de = (x - g0) / period, (e - g0) / period
        m[0] += dens * (de - ds)
        m[1] += dens * (de * de - ds * ds) / 2
        m[2] += dens * (de * de * de - ds * ds * ds) / 3
        m[3] += dens * (de * de * de * de - ds * ds * ds * ds) / 4
        x = e


def profile_moments(profile, period: float, step: float, g0: float, a: float, b: float) -> list:
    """[∫ p, ∫ d p, ∫ d² p, ∫ d³ p] over [a, b] (seconds, a <= b), d = (x − g0)/T, p the profile's density (1 per
    period, of x + step/2): whole periods in closed form, the rest bin by bin, everything about g0, so a
    narrow cell loses no precision. As _kde_profile_cut in C (extension/profile.c)."""
    bins = len(profile) - 2
    h = step / 2
    m = [0.0, 0.0, 0.0, 0.0]
    first = math.ceil((a + h) / period) * period - h  # the first period that starts in [a, b]
    last = math.floor((b + h) / period) * period - h  # the last one's end
    whole = round((last - first) / period) if last > first else 0
    if whole < 2:
        _profile_piece(profile, bins, period, h, g0, a, b, m)
        return m
    _profile_piece(profile, bins, period, h, g0, a, first, m)
    _profile_piece(profile, bins, period, h, g0, last, b, m)
    # One period's first three moments about its start, then `whole` of them from c = (first − g0)/T: period i
    # adds E (c + i + U)^k, U a position in a period under the profile.
    mu1 = mu2 = mu3 = 0.0
    for k in range(bins):
        share, e0, e1 = profile[k + 1] - profile[k], k / bins, (k + 1) / bins
        mu1 += share * (e0 + e1) / 2
        mu2 += share * (e0 * e0 + e0 * e1 + e1 * e1) / 3
        mu3 += share * (e0 * e0 * e0 + e0 * e0 * e1 + e0 * e1 * e1 + e1 * e1 * e1) / 4
    c, n = (first - g0) / period, whole
    s1, s2 = n * (n - 1) / 2, (n - 1) * n * (2 * n - 1) / 6  # the sums of i and i² over the n periods
    m[0] += n
    m[1] += n * c + s1 + n * mu1
    m[2] += n * c * c + c * n * (n - 1) + s2 + 2 * mu1 * (n * c + s1) + n * mu2
    m[3] += (n * c * c * c + 3 * c * c * s1 + 3 * c * s2 + s1 * s1 + 3 * mu1 * (n * c * c + 2 * c * s1 + s2)
             + 3 * mu2 * (n * c + s1) + n * mu3)
    return m


#: Largest tilt β of a profile's density p (1 + β (t − ½)) inside a cell: it stays non-negative.
PROFILE_TILT = 2.0


def profile_cut(profile, period: float, g0: float, g1: float, t0: float, t1: float, step: float = 0.0,
                mean: Optional[float] = None) -> Tuple[float, float, float]:
    """(share, position, doubt) of a cut cell [g0, g1] between fractions t0 <= t1 under the profile (of
    x + step/2, :func:`make_profile`), tilted to the cell's exact mean position ``mean``: the density
    p(x) (1 + β (t − ½)), t = (x − g0)/w, |β| <= :data:`PROFILE_TILT`, whose mean is ``mean`` (β = 0
    without one). The share of the cell's mass in [t0, t1], the mean position of that mass (a fraction of
    the cell; the middle of [t0, t1] where the share is 0), and the variance of the share that the profile's
    own sample leaves (:func:`profile_share_variance`). As _kde_profile_cut in C."""
    z = cell_moments(profile, period, step, g0, g1)
    beta = profile_tilt(z, mean)
    share, pos = profile_tilted(z, profile_piece_moments(profile, period, step, g0, g1, t0, t1), beta, t0, t1)
    return share, pos, profile_share_variance(profile, period, step, g0, g1, t0, t1)


def profile_piece_moments(profile, period: float, step: float, g0: float, g1: float, t0: float, t1: float,
                          whole: bool = False) -> Tuple[float, float, float, float]:
    """∫ p, ∫ t p, ∫ t² p, ∫ t³ p over [t0, t1] of cell [g0, g1] (t = (x − g0)/w): of the whole cell, [g0, g1],
    with ``whole``, else of [g0 + t0 w, g0 + t1 w]. As kde_profile_piece_moments in C."""
    w = g1 - g0
    b = period / w  # t = b d
    m = profile_moments(profile, period, step, g0, g0, g1) if whole else \
        profile_moments(profile, period, step, g0, g0 + t0 * w, g0 + t1 * w)
    return m[0], b * m[1], b * b * m[2], b * b * b * m[3]


def cell_moments(profile, period: float, step: float, g0: float, g1: float) -> Tuple[float, float, float, float]:
    """:func:`profile_piece_moments` of the whole cell [g0, g1], kept for the cells asked about last: a build's
    calibration cuts each cell at many bounds, each piece needing the cell's moments."""
    return _cell_moments(tuple(float(v) for v in profile), float(period), float(step), float(g0), float(g1))


@functools.lru_cache(maxsize=1024)
def _cell_moments(profile: tuple, period: float, step: float, g0: float, g1: float) -> tuple:
    return tuple(profile_piece_moments(profile, period, step, g0, g1, 0.0, 1.0, whole=True))


def profile_tilt(z, mean: Optional[float]) -> float:
    """β of the profile tilted to the cell's mean position (0 without one), from the cell's moments z."""
    z0, z1, z2 = z[:3]
    beta = 0.0
    if mean is not None:
        under = mean * (z1 - z0 / 2) - (z2 - z1 / 2)
        if under != 0:
            beta = min(PROFILE_TILT, max(-PROFILE_TILT, (z1 - mean * z0) / under))
    return beta


def profile_tilted(z, c, beta: float, t0: float, t1: float) -> Tuple[float, float]:
    """(share, position) of the piece [t0, t1] with moments c under the profile tilted by β (the cell's
    moments z)."""
    z0, z1 = z[0], z[1]
    c0, c1, c2 = c[:3]
    total = z0 + beta * (z1 - z0 / 2)
    part = c0 + beta * (c1 - c0 / 2)
    share = min(1.0, max(0.0, part / total)) if total > 0 else t1 - t0
    pos = (c1 + beta * (c2 - c1 / 2)) / part if part > 0 else (t0 + t1) / 2
    return share, min(t1, max(t0, pos))


def profile_spread(z, beta: float, slots: float = 0.0) -> Tuple[float, float]:
    """(mean, variance) of the position t of a cell's rows under the profile tilted by β, from the cell's moments
    z (:func:`profile_piece_moments`, whole): E t^k = (z_k + β (z_{k+1} − z_k / 2)) / (z_0 + β (z_1 − z_0 / 2)).
    On a lattice of ``slots`` slots in the cell (2 or more) its rows sit on the slots' centres, whose positions
    vary by 1/(12 slots²) less than the density spread over each slot's width (docs/math.md §7, the exact mean
    under a periodic profile). As kde_profile_spread in C."""
    z0, z1, z2, z3 = z
    total = z0 + beta * (z1 - z0 / 2)
    if not total > 0:
        return 0.5, 0.0
    mean = (z1 + beta * (z2 - z1 / 2)) / total
    var = (z2 + beta * (z3 - z2 / 2)) / total - mean * mean
    if slots >= 2:
        var -= 1 / (12 * slots * slots)
    return mean, max(0.0, var)


def _bin_cover(bins: int, period: float, base: float, a: float, b: float) -> Tuple[float, list]:
    """How much of each of the period's bins [a, b] (seconds, of x + step/2) covers, in bins' widths: (L, r)
    with bin j covered L + r_j times, L the periods whose starts [a, b] passes (a whole number) and r_j in
    [−1, 1]. ``base`` (a whole number of periods near a) keeps the fractions exact."""
    ua, ub = a / period - base, b / period - base
    fa, fb = c_floor(ua), c_floor(ub)
    ra, rb = bins * (ua - fa), bins * (ub - fb)
    return fb - fa, [min(1.0, max(0.0, rb - j)) - min(1.0, max(0.0, ra - j)) for j in range(bins)]


def profile_share_variance(profile, period: float, step: float, g0: float, g1: float, t0: float,
                           t1: float) -> float:
    """The variance of a cut cell's share of [t0, t1] under the profile that the profile's own sample of k
    rows leaves (the delta method, docs/math.md §7): the share is f = Σ p_j c_j / M over the bins' shares p_j
    of a period, c_j (C_j) how many times the range (the cell) covers bin j, M = Σ p_j C_j the cell's mass in
    periods; the p_j are the shares of k rows, multinomial, so var f = Σ p_j (c_j − f C_j)² / (k M²). A range of
    whole bins of a cell within one period gets f (1 − f)/(k M); a piece of one bin, far less (a second of a
    half-hour bin: 1/1800² of it); whole periods of a cell of many, nothing. As kde_profile_share in C."""
    bins, k = len(profile) - 2, float(profile[-1])
    if not k > 0 or not g1 > g0:
        return 0.0
    h, w = step / 2, g1 - g0
    base = c_floor((g0 + h) / period)
    big_c, rest_c = _bin_cover(bins, period, base, g0 + h, g1 + h)
    big_r, rest_r = _bin_cover(bins, period, base, g0 + t0 * w + h, g0 + t1 * w + h)
    p = [float(profile[j + 1]) - float(profile[j]) for j in range(bins)]
    part_c = sum(pj * cj for pj, cj in zip(p, rest_c))
    part_r = sum(pj * rj for pj, rj in zip(p, rest_r))
    mass = big_c + part_c
    if not mass > 0:
        return 0.0
    f = (big_r + part_r) / mass
    # c_j − f C_j = (L_r − f L_c) + (r_j − f C_j's rest), the first without a difference of large numbers
    lead = (big_r * part_c - part_r * big_c) / mass
    total = 0.0
    for pj, rj, cj in zip(p, rest_r, rest_c):
        d = lead + rj - f * cj
        total += pj * d * d  # (not ** 2: Python raises where IEEE 754 gives inf)
    out = total / k / mass / mass
    # (0 where the arithmetic left float8's range: a period far below the cell's values, which no build stores)
    return out if math.isfinite(out) else 0.0


#: How much of a cut share's binomial variance n f (1 − f) the cell's exact count and mean take away: for
#: rows drawn from the shape, their empirical distribution function in the cell less the shape's is a
#: Brownian bridge B, here conditioned on its integral, which the exact mean fixes. The rows between the
#: shares a and b of the cell then vary as var(B(b) − B(a) | ∫B) = f (1 − f) − c f² (1 − a − b)², f = b − a,
#: c = 3 (cov(B(s), ∫B) = s (1 − s)/2, var ∫B = 1/12); a cut from the cell's start (a = 0) gives
#: f (1 − f) (1 − c f (1 − f)). docs/math.md §7.
MEAN_KNOWN = 3.0


def mean_known(w: float, step: float) -> float:
    """The weight of what a cut cell's exact mean pins down of its rows (:data:`MEAN_KNOWN`), for a cell of
    half-width ``w``: on a lattice of step q its rows sit on its m = 2w/q values, whose positions vary by
    (1 − 1/m²)/12 rather than a continuum's 1/12, so the mean pins down m²/(m² − 1) times as much. Continuous
    columns, cells of more than 10⁶ values (within 10⁻¹² of 1), and cells of two values: 3. In a cell of two
    values the count and mean fix the split, which the shape's estimate does not use: the weight 4 would
    claim an exactness the estimate lacks (a red team: Zipf integers at 1 KB, points missed 21% of the time
    against 17% with 3)."""
    values = 2 * w / step if step > 0 else 0.0
    if 2.5 <= values <= 1e6:
        m = cell_slots(w, step)
        return MEAN_KNOWN * m * m / (m * m - 1)
    return MEAN_KNOWN


def shape_fit(points: np.ndarray, rows: np.ndarray, sums: np.ndarray, density: np.ndarray, sample: np.ndarray,
              step: float, population: bool, profile=None, period: float = 0.0,
              heavy=None) -> Tuple[float, float, float, float]:
    """How well the cells' shapes (the KDE's, or with ``profile`` the periodic profile's, :func:`profile_cut`)
    fit the sample: (excess, weight, jitter, doubt). At cuts at the sampled values a quarter, half and three
    quarters of the way through each cell holding at least 20 of them (on a lattice, at the half-step above
    the value; cuts placed by the data, not at fixed fractions of the cell, which a periodic pattern could
    alias with): excess sums the squared gap between the sample's share below the cut
    and the shape's, less the sample's own binomial variance (none when the sample is the whole table,
    ``population``) and less the cell's own rows' about the shape, which the queries add apart (n·keep: a cut
    from the cell's start, less what its exact mean pins down, :func:`mean_known`; counted again in τ², it had
    intervals of 200,000-row time columns hold every range); weight sums 4 s (1 − s) (s the shape's share); jitter sums twice that noise's squared
    variance (the excess jitters by about √jitter); doubt sums the squared doubt the queries already give
    each cut (the shape's share less the other shape's with the cell's mean, :func:`own_holes`; 0 under a
    profile). ``heavy``:
    the synopsis' heavy values, sorted; their slots inside a cell are taken out of its shape as the queries
    take them (:func:`fit_holes`)."""
    x = np.sort(np.asarray(sample, dtype=np.float64))
    kde_rows, half_range = float(rows.sum()), points[-1] / 2 - points[0] / 2
    excess, weight, jitter, doubts = 0.0, 0.0, 0.0, 0.0
    for c in range(len(points) - 1):
        g0, g1, n = points[c], points[c + 1], rows[c]
        lo_i, hi_i = np.searchsorted(x, g0, "left"), np.searchsorted(x, g1, "left")
        k = hi_i - lo_i
        if k < 20 or n <= 0:
            continue
        w = g1 - g0
        d0, d1, mean = cell_ends(g0, g1, n, sums[c], density[c], density[c + 1], kde_rows, half_range)
        # the queries' shape: over the cell's own slots where heavy values sit inside it (fit_holes)
        slots = heavy_slots(heavy, step, g0, g1)
        if profile is None:  # (and the shape the doubt is measured from: none under a profile)
            own, other = own_holes(d0, d1, mean, slots, step, g0, g1)
        else:
            own, other = fit_holes(profile_shape(profile, period, g0, g1, step), mean, slots), None
        for frac in (0.25, 0.5, 0.75):
            cut = x[lo_i + int(frac * k)]
            if step > 0:  # queries cut a lattice cell at half-steps
                cut = (math.floor(cut / step + 0.5) + 0.5) * step
            t = (cut - g0) / w
            if not 0 < t < 1:
                continue
            if profile is None:
                share = min(1.0, max(0.0, own.share(0.0, t, -math.inf, cut)[0]))
                # (the queries' doubt at this cut, per row of the cell)
                doubt = share - other.share(0.0, t, -math.inf, cut)[0]
            else:
                share = own.share(0.0, t, -math.inf, cut)[0]
                doubt = 0.0
            seen = (np.searchsorted(x, cut, "left") - lo_i) / k
            # The sample's binomial variance about the cell's rows, and the cell's own rows' about the shape
            # (a cut from its start, less what its exact mean pins down), which the queries add apart (n·keep):
            # neither is the shape's error.
            noise = 0.0 if population else share * (1 - share) / k * max(0.0, 1 - k / n)
            bridge = share * (1 - share)
            noise += max(0.0, bridge - mean_known(g1 / 2 - g0 / 2, step) * bridge * bridge) / n
            excess += (seen - share) ** 2 - noise
            doubts += doubt * doubt
            weight += 4 * share * (1 - share)
            jitter += 2 * noise * noise
    return excess, weight, jitter, doubts


def shape_variance(fit: Tuple[float, float, float, float]) -> float:
    """τ², the variance of the shape's error in a cell's share at a cut, per unit of 4 s (1 − s) (s the share
    below the cut), from :func:`shape_fit`: the excess pooled over cells beyond the doubt the queries already
    give (docs/math.md §7), less twice its own jitter. 0 when the shapes fit within the sample's resolution
    and the doubt.

    Queries add n² τ² 4 s (1 − s) to a cut cell's binomial variance n s (1 − s) and the doubt: where rows
    cluster on a few values per cell, intervals widen by what the sample saw and the doubt does not stand for.
    (Up to 0.9.0 the doubt was not taken off: an excess the doubt already covered, seen in some row samples
    of a 10⁷-row cents column at 2 KB and not in others, made τ² up to 2·10⁻⁴ and its intervals hold 100% of
    the ranges, where τ² = 0 gave 95–97%.)"""
    excess, weight, jitter, doubt = fit
    # The sample's own noise makes the excess jitter by about √jitter: only an excess well past that (twice)
    # says the shape misses the data; below it, τ² is 0 and the binomial variance stands alone.
    return max(0.0, excess - doubt - 2 * math.sqrt(jitter)) / weight if weight > 0 else 0.0
