"""The numerics synopses share: heavy values (``Atoms``), the bandwidth's rate, and the 2-D synopsis's
grids, binning, smoothing and summed-area tables. (The 1-D cells and the shape inside them: :mod:`.cells`.)

docs/math.md §7 and §8 give the formulas. This module does no I/O; :mod:`pg_kde.synopsis.build` feeds it the
rows a :class:`~pg_kde.synopsis.reader.TableReader` reads.

The 2-D smoothing, :func:`smooth_masses_2d` (an FFT convolution), takes ``interrupt=``: a callable with no
arguments that, when given, is called before each slice of about 30 ms (:data:`FFT_SLICE_VALUES`); what it
raises propagates. Sliced or not, each grid value is the same sum (in another order).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._slices import Interrupt
from ..bandwidth import SELECTORS
from .packing import exact_sums

#: A value holding at least this share of the non-NULL rows is kept exactly.
ATOM_SHARE = 0.001
#: A 2-D axis whose sample shows at most this many distinct values keeps them as its value lattice.
LATTICE_VALUES = 4096
#: Values of the mirrored 2-D grid that one slice of smooth_masses_2d convolves (about 30 ms here).
FFT_SLICE_VALUES = 1 << 18


def atom_candidates(sample: np.ndarray, share: float = ATOM_SHARE) -> np.ndarray:
    """Values frequent enough in a sample to possibly hold ``share`` of the table's rows.

    The threshold is half the expected count, so a value at exactly the share is missed only with a
    vanishing probability for samples of thousands of rows. The caller counts candidates exactly.
    """
    values, counts = np.unique(sample, return_counts=True)
    return values[counts >= max(2.0, 0.5 * share * len(sample))]


@dataclass
class Atoms:
    """Heavy values, sorted, with their counts (cumulative counts and sums for the catalog)."""

    values: np.ndarray
    counts: np.ndarray

    @classmethod
    def from_counts(cls, values, counts, min_count: float = 0.0) -> "Atoms":
        values = np.asarray(values, dtype=np.float64)
        counts = np.asarray(counts, dtype=np.float64)
        keep = counts >= min_count
        order = np.argsort(values[keep])
        return cls(values[keep][order], counts[keep][order])

    def largest(self, k: int) -> "Atoms":
        """The k values holding the most rows (ties: the smaller values), sorted by value."""
        if len(self.values) <= k:
            return self
        keep = np.sort(np.lexsort((self.values, -self.counts))[:k])
        return Atoms(self.values[keep], self.counts[keep])

    @property
    def rows(self) -> int:
        return int(round(float(self.counts.sum())))

    def cumulative(self, step: float = 0.0):
        """(cum_count, cum_sum) as lists, for the catalog. On a value lattice (``step`` > 0) whose lattice
        values these are, the sums are exact (:func:`.packing.exact_sums`: what their pack stores)."""
        count = np.cumsum(self.counts).tolist()
        exact = exact_sums(self.values, count, step) if step > 0 else None
        return count, exact if exact is not None else np.cumsum(self.counts * self.values).tolist()


def cell_prefix(cells: np.ndarray) -> list:
    """Cumulative sums before each grid point (length cells + 1, starting at 0), for the catalog."""
    return np.concatenate([[0.0], np.cumsum(cells)]).tolist()


#: float8's largest finite value.
FLOAT8_MAX = 1.7976931348623157e308


def ldexp_inf(x: float, e: int) -> float:
    """x · 2^e as C's ldexp: ±inf past float8's range (math.ldexp raises OverflowError there)."""
    try:
        return math.ldexp(x, e)
    except OverflowError:
        return math.copysign(math.inf, x)


def ulp(x: float) -> float:
    """The gap from |x| to the next float8, ∞ where x is ±∞ or NaN (C's nextafter(|x|, ∞) − |x|, as
    extension/range.c's ulp_of computes it)."""
    return math.ulp(abs(x)) if math.isfinite(x) else math.inf


def prefix_slack(sums) -> float:
    """A bound on how far each float8 prefix sum of ``sums`` (each cell's sum rounded once from an exact one)
    lies from the exact prefix: one ulp of Σ|sums| (which bounds every partial sum) for each rounding, with
    twice the margin (``kde_synopsis.sum_slack``, docs/math.md §7)."""
    total = float(np.sum(np.abs(np.asarray(sums, dtype=np.float64)))) if len(sums) else 0.0
    return 2.0 * (2 * len(sums) + 2) * ulp(total)


def scale_bandwidth(h_sample: float, sample_rows: int, rows: int, method: str, d: int = 1) -> float:
    """An AMISE bandwidth h chosen on a sample, carried to the table's row count at the selector's rate
    (the registry's :meth:`~pg_kde.bandwidth.SelectorSpec.rate`: n^{−1/3} for plugin_cdf, n^{−1/(d+4)} for
    density bandwidths). For a matrix H, scale by the square of this factor."""
    if rows <= sample_rows:
        return h_sample
    return h_sample * (sample_rows / rows) ** SELECTORS[method].rate(d)


# ------------------------------------------------------------------------------------------------- 2-D
def bilinear_weights(rows, t1, t2, t12) -> np.ndarray:
    """Bilinear-binning weights at the (m1, m2) grid points from per-cell aggregates: a row at offsets
    (t1, t2) in cell (i, j) gives (1−t1)(1−t2), t1(1−t2), (1−t1)t2 and t1·t2 to the cell's corners; so
    the weights follow from each cell's row count and its sums of t1, t2 and t1·t2 (all (m1−1, m2−1))."""
    m1, m2 = rows.shape[0] + 1, rows.shape[1] + 1
    w = np.zeros((m1, m2))
    w[:-1, :-1] += rows - t1 - t2 + t12
    w[1:, :-1] += t1 - t12
    w[:-1, 1:] += t2 - t12
    w[1:, 1:] += t12
    return w


def smooth_masses_2d(weights: np.ndarray, deltas, H: np.ndarray, *, interrupt: Interrupt = None) -> np.ndarray:
    """Binned counts convolved with a Gaussian of bandwidth matrix H on a regular grid, mirrored at all
    four edges first (the reflection estimator, so no mass leaves the grid); rescaled to the binned
    total.

    With ``interrupt``, the convolution runs in bands of output rows, each convolving about
    :data:`FFT_SLICE_VALUES` values of the mirrored grid (and at least 2·half + 1 rows beside its
    2·half rows of overlap, so the work at most doubles), and ``interrupt()`` is called before each band."""
    d1, d2 = deltas
    if not np.all(np.linalg.eigvalsh(H) > 0):  # no bandwidth: the binned counts as they are
        return weights.astype(np.float64)
    half1 = int(min(weights.shape[0] - 1, np.floor(6.0 * np.sqrt(H[0, 0]) / d1)))
    half2 = int(min(weights.shape[1] - 1, np.floor(6.0 * np.sqrt(H[1, 1]) / d2)))
    if half1 == 0 and half2 == 0:
        return weights.astype(np.float64)
    u = np.arange(-half1, half1 + 1)[:, None] * d1
    v = np.arange(-half2, half2 + 1)[None, :] * d2
    inv = np.linalg.inv(H)
    kernel = np.exp(-0.5 * (inv[0, 0] * u * u + 2 * inv[0, 1] * u * v + inv[1, 1] * v * v))
    kernel /= kernel.sum()
    from scipy.signal import fftconvolve  # imported when used: a 1-D refresh's first call never needs it

    mirrored = np.pad(weights, ((half1, half1), (half2, half2)), mode="reflect")
    if interrupt is None:
        smoothed = fftconvolve(mirrored, kernel, mode="same")[half1:-half1 or None, half2:-half2 or None]
    else:
        # The cropped "same" convolution is the "valid" one; output rows [r0, r1) need mirrored rows
        # [r0, r1 + 2·half1).
        m1 = weights.shape[0]
        rows = max(2 * half1 + 1, FFT_SLICE_VALUES // mirrored.shape[1] - 2 * half1)
        bands = []
        for r0 in range(0, m1, rows):
            interrupt()
            bands.append(fftconvolve(mirrored[r0 : min(m1, r0 + rows) + 2 * half1], kernel, mode="valid"))
        smoothed = np.vstack(bands)
    masses = np.clip(smoothed, 0.0, None)
    return masses * (weights.sum() / masses.sum())


def cell_masses(point_masses: np.ndarray) -> np.ndarray:
    """Mass of each cell as the mean of its four corner masses, rescaled to the same total."""
    cells = (point_masses[:-1, :-1] + point_masses[1:, :-1] + point_masses[:-1, 1:] + point_masses[1:, 1:]) / 4.0
    total = cells.sum()
    return cells * (point_masses.sum() / total) if total > 0 else cells


def summed_area(cells: np.ndarray) -> np.ndarray:
    """Cumulative sums before each grid point, shape (m1, m2), zero on the first row and column."""
    out = np.zeros((cells.shape[0] + 1, cells.shape[1] + 1))
    out[1:, 1:] = cells.cumsum(axis=0).cumsum(axis=1)
    return out


def cap_bandwidth_matrix(H: np.ndarray, deltas) -> np.ndarray:
    """Shrink H so that no axis's kernel standard deviation exceeds that axis's grid step, keeping its
    correlation: the grid holds every row (docs/math.md §8)."""
    scale = np.minimum(1.0, np.asarray(deltas) / np.sqrt(np.diag(H)))
    return H * np.outer(scale, scale)


def quantile_grid(sample: np.ndarray, lo: float, hi: float, integral: bool, size: int,
                  lattice_values: int = LATTICE_VALUES):
    """Grid points for one axis of a 2-D synopsis, and the axis's value lattice (or None).

    Points sit at the sample's quantiles, so every cell holds about the same share of rows wherever the
    data are dense (an equal-width grid puts heavy-tailed data into a few cells), with the ends at the
    table's min and max. Values never sit on a cell edge:
    - integer axes put their points on half-integers (each value owns [v − ½, v + ½]);
    - a discretised axis (at most ``lattice_values`` distinct values in the sample) puts them at
      midpoints between consecutive distinct values, and returns those values as its lattice, so
      queries can move a bound to the midpoint just outside the values it includes.
    Strictly increasing, at most ``size`` points, at least 2.
    """
    lattice = None
    if integral:
        points = np.floor(np.quantile(sample, np.linspace(0.0, 1.0, size))) + 0.5
        lo, hi = lo - 0.5, hi + 0.5
    else:
        values = np.unique(np.concatenate([sample, [lo, hi]]))
        mids = ends = None
        if 2 <= len(values) <= lattice_values:
            mids = (values[:-1] + values[1:]) / 2.0
            ends = (values[0] - (values[1] - values[0]) / 2.0, values[-1] + (values[-1] - values[-2]) / 2.0)
        if mids is not None and _lattice_fits(values, mids, ends):
            lattice, (lo, hi) = values, ends
            # Midpoints at the sample's quantiles: each value's rows stay whole in one cell.
            ranks = np.searchsorted(values, np.quantile(sample, np.linspace(0.0, 1.0, size)[1:-1]))
            points = mids[np.clip(ranks, 0, len(mids) - 1)] if len(mids) > size - 2 else mids
        else:
            points = np.quantile(sample, np.linspace(0.0, 1.0, size))
            # (no subnormal point, as in 1-D: a scaled axis would not map it back exactly)
            tiny = float(np.finfo(np.float64).tiny)
            points, lo, hi = _with_tie_cells(sample, np.where(np.abs(points) < tiny, 0.0, points), lo, hi, size)
            # nor a subnormal end: moved out to 0 or ∓ the smallest normal number (0.28.0; a red team found
            # [-1e-322, 5e-324, 1.43e-322] stored, and queries failing with "value out of range: underflow")
            points = np.where(np.abs(points) < tiny, 0.0, points)  # (a repeated value's point moved onto a subnormal)
            lo = lo if lo == 0 or abs(lo) >= tiny else (0.0 if lo > 0 else -tiny)
            hi = hi if hi == 0 or abs(hi) >= tiny else (tiny if hi > 0 else 0.0)
    points = np.unique(np.clip(points, lo, hi))
    return np.unique(np.concatenate([[lo], points[(points > lo) & (points < hi)], [hi]])), lattice


def _lattice_fits(values: np.ndarray, mids: np.ndarray, ends: tuple) -> bool:
    """Whether a discretised axis's lattice can keep each value's rows in a cell of its own: a midpoint strictly
    between each two neighbours (none between adjacent float8s: {1.0, 1.0000000000000002} put both in one
    cell, and a point query read 0 or all of them, a red team on 0.28.0), and no subnormal grid point (a query's
    arithmetic on one underflows: {5e-324, 1e-323, …} refreshed, then every query raised "value out of range:
    underflow"). Otherwise the axis is continuous (heavy values get cells of their own, subnormals 0's)."""
    tiny = np.finfo(np.float64).tiny
    points = np.concatenate([values, mids, ends])
    return bool(np.all(mids > values[:-1]) and np.all(mids < values[1:]) and ends[0] < values[0] < values[-1] < ends[1]
                and not np.any((points != 0) & (np.abs(points) < tiny)))


def tie_cell(v: float):
    """A heavy value v's cell of its own, (start, end): [v, next float8 above v); for 0 and the positive
    subnormal numbers [0, float8's smallest normal number) (no grid point is subnormal: a scaled axis would not
    map it back exactly); None for a negative subnormal v or -tiny, whose neighbour is subnormal."""
    tiny = float(np.finfo(np.float64).tiny)
    v = float(v)
    if 0.0 <= v < tiny:
        return 0.0, tiny
    up = float(np.nextafter(v, np.inf))
    return (v, up) if abs(v) >= tiny and abs(up) >= tiny else None


def is_tie_cell(g0: float, g1: float) -> bool:
    """Whether grid points g0 < g1 bound a heavy value's cell of its own (:func:`tie_cell`): one ulp wide
    (a relative width of at most 2^-52), or [0, smallest normal). _kde_upper_pos's test, as written there."""
    return g1 - g0 <= abs(g0) * 2.220446049250313e-16 or (g0 == 0.0 and g1 <= 2.2250738585072014e-308)


def _with_tie_cells(sample: np.ndarray, points: np.ndarray, lo: float, hi: float, size: int):
    """A continuous axis's quantile points, and its ends, with heavy values off the cell edges:
    - each value holding half a cell's share of the sample (1/(2 size)) or more gets a cell of its own,
      :func:`tie_cell` (the heaviest first, at most (size − 4)/2 of them, so that the grid keeps its size; the
      ends move out to hold a cell at the axis' min or max): a box whose bound is v takes its rows whole;
    - a point on any other value the sample holds more than once moves up, half way to the next value: its
      rows then sit inside one cell (the KDE shapes a bound at v) where a line at v had left them all out of
      a box whose upper bound was v (half-open cells hold v in the cell starting at v).
    Other points are thinned evenly to keep at most ``size``. Returns (points, lo, hi)."""
    values, counts = np.unique(sample, return_counts=True)
    heavy = np.flatnonzero(counts * 2 * size >= len(sample))
    heavy = heavy[np.argsort(-counts[heavy], kind="stable")][:max(0, (size - 4) // 2)]
    ties, starts = [], set()
    for v in values[heavy]:
        cell = tie_cell(v)
        if cell is not None:
            ties += list(cell)
            starts.add(float(cell[0]))
            lo, hi = min(lo, cell[0]), max(hi, cell[1])
    top = float(values[-1]) if len(values) else None
    if top is not None and top in ties and top not in starts and tie_cell(top) is not None:
        # the axis' largest value is a heavy value's next float8: the last cell, closed, would hold both (a point
        # box on the heavy value read all their rows, a red team on 0.28.0), so it gets a cell of its own too
        ties += list(tie_cell(top))
        hi = max(hi, tie_cell(top)[1])
    ties = np.unique(ties)
    rest = np.unique(points[~np.isin(points, ties)])
    repeated = values[(counts >= 2) & ~np.isin(values, ties)]
    on = np.flatnonzero(np.isin(rest, repeated))
    if len(on):
        after = np.searchsorted(values, rest[on], side="right")
        inside = after < len(values)  # (the largest value is the axis' end)
        nxt = values[after[inside]]
        mid = rest[on][inside] / 2 + nxt / 2
        rest[on[inside]] = np.where(mid > rest[on][inside], mid, nxt)
        rest = np.unique(rest)
    room = max(2, size - len(ties))
    if len(rest) > room:
        rest = rest[np.unique(np.linspace(0, len(rest) - 1, room).round().astype(np.int64))]
    return np.unique(np.concatenate([rest, ties])), lo, hi


def grid_positions(values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Fractional grid-index coordinates of values (0 at grid[0], len(grid) − 1 at grid[-1])."""
    return np.interp(values, grid, np.arange(len(grid), dtype=np.float64))
