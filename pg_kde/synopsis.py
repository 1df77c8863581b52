"""The numerical side of a 1-D synopsis: choosing heavy values and integrating the KDE on a grid.

A synopsis answers COUNT, SUM and sums of squares over ranges as two parts that add up:

- *heavy values* ("atoms"): every value holding at least ``ATOM_SHARE`` of the rows, kept exactly with
  its count from the whole table (a column with few distinct values is all atoms);
- the *smooth part*: a Gaussian KDE of the other rows, built from their linearly binned counts on a
  grid over [lo, hi] by convolution, reflected at both ends, so no mass leaks past the data's range.
  It is stored as cumulative integrals of f, x·f and x²·f at the grid points, scaled to row counts.

docs/math.md §7 gives the formulas. This module does no I/O; :mod:`pg_kde.sql_entry` feeds it from SQL.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.signal import fftconvolve

#: A value holding at least this share of the non-NULL rows is kept exactly.
ATOM_SHARE = 0.001
#: A column with at most this many distinct values becomes an exact frequency table.
EXACT_DISTINCT = 1024


def atom_candidates(sample: np.ndarray) -> np.ndarray:
    """Values frequent enough in a sample to possibly hold ``ATOM_SHARE`` of the table.

    The threshold is half the expected count, so a value at exactly the share is missed only with a
    vanishing probability for samples of thousands of rows. The caller counts candidates exactly.
    """
    values, counts = np.unique(sample, return_counts=True)
    return values[counts >= max(2.0, 0.5 * ATOM_SHARE * len(sample))]


@dataclass
class Atoms:
    """Heavy values, sorted, with cumulative counts, sums and sums of squares."""

    values: np.ndarray
    counts: np.ndarray

    @classmethod
    def from_counts(cls, values, counts, min_count: float = 0.0) -> "Atoms":
        values = np.asarray(values, dtype=np.float64)
        counts = np.asarray(counts, dtype=np.float64)
        keep = counts >= min_count
        order = np.argsort(values[keep])
        return cls(values[keep][order], counts[keep][order])

    @property
    def rows(self) -> int:
        return int(round(float(self.counts.sum())))

    def cumulative(self):
        """(cum_count, cum_sum, cum_sumsq) as lists, for the catalog."""
        v, k = self.values, self.counts
        return np.cumsum(k).tolist(), np.cumsum(k * v).tolist(), np.cumsum(k * v * v).tolist()


def grid_points(lo: float, hi: float, size: int) -> np.ndarray:
    return lo + (hi - lo) * np.arange(size) / (size - 1)


def linear_binning(x: np.ndarray, lo: float, hi: float, size: int) -> np.ndarray:
    """Linear binning of x onto ``size`` grid points over [lo, hi] (the reference for the SQL version)."""
    p = (np.asarray(x, dtype=np.float64) - lo) / (hi - lo) * (size - 1)
    k = np.clip(np.floor(p).astype(np.int64), 0, size - 1)
    frac = p - k
    weights = np.bincount(k, weights=1.0 - frac, minlength=size)
    upper = np.minimum(k + 1, size - 1)
    weights += np.bincount(upper, weights=frac, minlength=size)
    return weights[:size]


def smooth_masses(weights: np.ndarray, lo: float, hi: float, h: float) -> np.ndarray:
    """Binned counts convolved with a Gaussian of bandwidth h, reflected at lo and hi.

    The reflection estimator f̂(x) + f̂(2lo − x) + f̂(2hi − x) keeps the mass that a plain KDE would put
    outside the data's range inside it. A grid point's mirror images are grid points too, so it is a
    convolution of the mirrored count sequence. Returns the mass at each grid point, summing to the count.
    """
    m = len(weights)
    delta = (hi - lo) / (m - 1)
    half = int(min(m - 1, np.floor(6.0 * h / delta)))  # kernel beyond 6h is below 1e-8 of its peak
    if half == 0:
        return weights.astype(np.float64)
    j = np.arange(-half, half + 1)
    kernel = np.exp(-0.5 * (j * delta / h) ** 2)
    kernel /= kernel.sum()
    mirrored = np.concatenate([weights[:0:-1], weights, weights[-2::-1]])
    masses = np.clip(fftconvolve(mirrored, kernel, mode="same")[m - 1 : 2 * m - 1], 0.0, None)
    # Mirroring about a grid point gives the edge point's own half-kernel back twice (~h/range of the
    # total); rescale so the mass is exactly the binned count.
    return masses * (weights.sum() / masses.sum())


def cumulative_integrals(masses: np.ndarray, lo: float, hi: float, rows: float):
    """Cumulative ∫f, ∫x f, ∫x² f at the grid points, for the piecewise-linear density through the masses.

    The density at grid point k is masses[k]/Δ, linear in between; integrals over each cell are exact for
    that density, and the whole is scaled so that ∫f equals ``rows``.
    """
    m = len(masses)
    delta = (hi - lo) / (m - 1)
    x = grid_points(lo, hi, m)[:-1]
    d0, d1 = masses[:-1] / delta, masses[1:] / delta
    slope = (d1 - d0) / delta
    cell_count = delta * (d0 + d1) / 2.0
    cell_sum = d0 * (x * delta + delta**2 / 2.0) + slope * (x * delta**2 / 2.0 + delta**3 / 3.0)
    cell_sumsq = d0 * (x * x * delta + x * delta**2 + delta**3 / 3.0) + slope * (
        x * x * delta**2 / 2.0 + 2.0 * x * delta**3 / 3.0 + delta**4 / 4.0
    )
    total = cell_count.sum()
    scale = rows / total if total > 0 else 0.0
    prefix = lambda cells: np.concatenate([[0.0], np.cumsum(cells) * scale])  # noqa: E731
    return prefix(cell_count), prefix(cell_sum), prefix(cell_sumsq)


def scale_bandwidth(h_sample: float, sample_rows: int, rows: int, method: str) -> float:
    """An AMISE bandwidth chosen on a sample, carried to the table's row count: h ∝ n^{−1/3} for the
    distribution-function bandwidth (plugin_cdf), n^{−1/5} for density bandwidths."""
    if rows <= sample_rows:
        return h_sample
    rate = 1.0 / 3.0 if method == "plugin_cdf" else 0.2
    return h_sample * (sample_rows / rows) ** rate
