"""The float64 reference of the 1-D query maths (_kde_range runs the same steps in C: extension/range.c).

Tests compare the server's ``approx_count`` / ``approx_sum`` / ``approx_count_ci`` with :func:`range_1d` on
the same synopsis row; :mod:`.cells` documents the model, docs/math.md §7 the formulas.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Optional

from .cells import linear, mass, moment, profile_cut, shape_of

#: The share of the cut cells' disagreement with the straight line that counts as the shape's standard
#: error (docs/math.md §7).
SHAPE_DOUBT = 1.0
#: How much of a cut share's binomial variance n f (1 − f) the cell's exact count and mean take away: the
#: variance is n f (1 − f) (1 − c f (1 − f)), c = 3 for rows drawn from the shape (their empirical
#: distribution function in the cell less the shape's is a Brownian bridge, here conditioned on its
#: integral, which the exact mean fixes: var B(s) = s (1 − s) − 3 s² (1 − s)²). docs/math.md §7.
MEAN_KNOWN = 3.0
#: The offsets a bound strictly inside a cell keeps from its ends: the largest float8 below 1, and a tiny
#: positive number (the same literals in extension/range.c).
INSIDE_HIGH, INSIDE_LOW = 0.9999999999999999, 1e-300


@dataclass
class Range:
    """A moment over a range: the estimate, its variance (the cut cells' rows binomial around the shape's
    share less what its exact mean pins down, plus the shape's error the sample showed,
    :func:`pg_kde.synopsis.cells.shape_variance`, plus the shape's distance from the straight line, squared),
    and hard bounds."""

    estimate: float = 0.0
    variance: float = 0.0
    low: float = 0.0
    high: float = 0.0


def _atoms_upto(values, cum, x: float, inclusive: bool) -> float:
    k = bisect.bisect_right(values, x) if inclusive else bisect.bisect_left(values, x)
    return cum[k - 1] if k > 0 else 0.0


def lattice_value(k: float, step: float) -> float:
    """The float8 value of lattice point k: k·q for steps of 1 and more, k / (1/q) below (the correctly
    rounded decimal, as numeric and float8 input give it)."""
    return k * step if step >= 1 else k / round(1 / step)


def _ceil(x: float) -> float:
    """C's ceil: an infinity (a bound near 1e308 over a small step) stays one."""
    return float(math.ceil(x)) if math.isfinite(x) else x


def _floor(x: float) -> float:
    return float(math.floor(x)) if math.isfinite(x) else x


def snap(a: float, b: float, step: float):
    """[a, b] moved out to half-steps around the lattice values it includes: (A, B), or None when it
    includes none. Float arithmetic throughout, as _kde_snap in SQL."""
    lo, hi = -math.inf, math.inf
    ka = kb = None
    if math.isfinite(a):
        ka = _ceil(a / step)
        if lattice_value(ka - 1, step) >= a:
            ka -= 1
        elif lattice_value(ka, step) < a:
            ka += 1
        lo = (ka - 0.5) * step
    if math.isfinite(b):
        kb = _floor(b / step)
        if lattice_value(kb + 1, step) <= b:
            kb += 1
        elif lattice_value(kb, step) > b:
            kb -= 1
        hi = (kb + 0.5) * step
    if ka is not None and kb is not None and ka > kb:
        return None
    return lo, hi


def smooth_1d(s: dict, a: float, b: float, order: int) -> Range:
    """The cells' part of [a, b] (bounds already snapped on a lattice)."""
    out = Range()
    grid, counts = s["grid"], s["cell_cum_count"]
    sums, density = s["cell_cum_sum"], s["density"]
    cells = counts if order == 0 else sums
    m = len(grid)
    half_range = grid[-1] / 2 - grid[0] / 2 if m else 0.0
    if s["kde_rows"] == 0 or m < 2:
        return out
    A, B = max(a, grid[0]), min(b, grid[-1])
    if A > B or (A == B and s["step"] > 0):
        return out
    # ka, kb: the cells holding A and B (grid[k] <= x < grid[k + 1]; the last cell also holds its end).
    ka = min(max(bisect.bisect_right(grid, A) - 1, 0), m - 2)
    kb = min(max(bisect.bisect_right(grid, B) - 1, 0), m - 2)
    continuous = s["step"] == 0
    disagreement = 0.0
    if kb > ka + 1:
        whole = cells[kb] - cells[ka + 1]
        out.estimate += whole
        out.low += whole
        out.high += whole
    for c in sorted({ka, kb}):
        g0, g1 = grid[c], grid[c + 1]
        w = g1 / 2 - g0 / 2  # halves: no difference of values near the ends of float8 overflows
        t0 = (A / 2 - g0 / 2) / w if c == ka else 0.0
        t1 = (B / 2 - g0 / 2) / w if c == kb else 1.0
        t0, t1 = max(0.0, min(1.0, t0)), max(0.0, min(1.0, t1))
        # A bound inside the cell never makes it whole or empty, however the division rounds (a cell
        # 1e300 wide puts a bound near its end at t = 1 exactly): the hard bounds stay the cut cell's.
        if c == kb and B < g1:
            t1 = min(t1, INSIDE_HIGH)
        if c == ka and A > g0:
            t0 = max(t0, INSIDE_LOW)
        # A ≤ B: the rounding or the nudges that put t1 below t0 (a narrow range near an end of a cell 1e300
        # wide) must not drop the cell
        t1 = max(t1, t0)
        n = counts[c + 1] - counts[c]
        if n <= 0 or t1 < t0 or (t1 == t0 and not continuous):
            continue  # (on a lattice no row sits on a boundary; a continuous column's rows may sit on B)
        if t0 == 0 and t1 == 1:  # the range holds this cell whole: exact
            whole = cells[c + 1] - cells[c]
            out.estimate += whole
            out.low += whole
            out.high += whole
            continue
        coef, mean = shape_of(g0, g1, n, sums[c + 1] - sums[c], density[c], density[c + 1], s["kde_rows"],
                              half_range)
        doubt = 0.0
        if s.get("period", 0.0) > 0:
            # The periodic profile's shape, tilted to the cell's mean; its own sampling error adds
            # n² f (1 − f) / (k M max(M, 1)) to the variance.
            share, pos, doubt = profile_cut(s["profile"], s["period"], g0, g1, t0, t1, s["step"], mean)
            apart = 0.0
        else:
            share = min(1.0, max(0.0, mass(coef, t1) - mass(coef, t0)))
            pos = (moment(coef, t1) - moment(coef, t0)) / share if share > 0 else (t0 + t1) / 2
            pos = min(t1, max(t0, pos))
            lin = linear(mean)
            apart = n * abs(share - (mass(lin, t1) - mass(lin, t0)))  # how far the straight line would put it
        # Binomial, less what the cell's exact mean pins down, plus the shape's error. A cut cell is never
        # certain: its share counts as at least one row's each side.
        f = min(max(share, 1 / (n + 1)), n / (n + 1))
        cuts = f * (1 - f)  # the shape's error at one cut, per 4 n² τ²
        if 0 < t0 and t1 < 1 and s["shape_var"] > 0 and not s.get("period", 0.0) > 0:
            # A range inside one cell cuts it twice: the KDE's shape errs at the two cuts apart (rows
            # clustered on a few values make its error jump), each as at a cut from the cell's start, never
            # less than the range's own share gives. (A periodic profile errs smoothly over the period: its
            # errors at two cuts of one cell move together.)
            below = min(1.0, max(0.0, mass(coef, t0)))
            upto = min(1.0, below + share)
            cuts = max(cuts, below * (1 - below) + upto * (1 - upto))
        spread = (f * (1 - f) * (n * (1 - MEAN_KNOWN * f * (1 - f)) + n * n * doubt)
                  + 4 * n * n * s["shape_var"] * cuts)
        if order == 0:
            out.estimate += n * share
            out.variance += spread
            disagreement += apart
            out.high += n
        else:
            x = g0 * (1 - pos) + g1 * pos
            out.estimate += n * share * x
            out.variance += spread * x * x
            disagreement += apart * abs(x)
            out.low += min(0.0, n * (g0 * (1 - t0) + g1 * t0))
            out.high += max(0.0, n * (g0 * (1 - t1) + g1 * t1))
    # The shape's own uncertainty: how far its shares are from the straight line's (docs/math.md §7).
    shape_error = SHAPE_DOUBT * disagreement
    out.variance += shape_error * shape_error  # (not ** 2: that raises OverflowError where IEEE 754 gives inf)
    return out


def range_1d(s: dict, lo: Optional[float], hi: Optional[float], order: int) -> Range:
    """Count (order 0) or sum (order 1) of the rows with lo <= x <= hi (None: open) of a 1-D synopsis given
    as its payload columns (a dict: step, atom_values, atom_cum_count, atom_cum_sum, kde_rows, grid,
    cell_cum_count, cell_cum_sum, density, shape_var; period and profile, when not 0 and empty)."""
    a = -math.inf if lo is None else float(lo)
    b = math.inf if hi is None else float(hi)
    if a > b or a == math.inf or b == -math.inf:  # (no finite value lies at or beyond an infinite bound)
        return Range()
    atoms = s["atom_cum_count"] if order == 0 else s["atom_cum_sum"]
    exact = _atoms_upto(s["atom_values"], atoms, b, True) - _atoms_upto(s["atom_values"], atoms, a, False)
    smooth = Range()
    if s["step"] > 0:
        snapped = snap(a, b, s["step"])
        if snapped is not None:
            smooth = smooth_1d(s, *snapped, order)
    else:
        smooth = smooth_1d(s, a, b, order)
    return Range(exact + smooth.estimate, smooth.variance, exact + smooth.low, exact + smooth.high)


def interval(r: Range, confidence: float) -> tuple:
    """(estimate, low, high) at the given confidence: estimate ± z √variance, within the hard bounds
    (docs/math.md §7)."""
    from statistics import NormalDist

    z = -NormalDist().inv_cdf((1 - confidence) / 2)
    half = z * math.sqrt(r.variance)
    return r.estimate, max(r.low, r.estimate - half), min(r.high, r.estimate + half)
