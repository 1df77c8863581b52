"""The float64 reference of the query maths: 1-D ranges (:func:`range_1d`; _kde_range runs the same steps in
C: extension/range.c) and 2-D boxes (:func:`box_2d`; _kde_box in sql/src/40_query_2d.sql).

Tests compare the server's ``approx_count`` / ``approx_sum`` / ``approx_count_ci`` with :func:`range_1d` on
the same synopsis row; :mod:`.cells` documents the model, docs/math.md §7 the formulas.
"""

from __future__ import annotations

import bisect
import math
from fractions import Fraction
from dataclasses import dataclass
from typing import Optional, Tuple

from .cells import (MEAN_KNOWN, c_ceil, cell_slots, c_floor, cell_ends, cubic_shape, fit_holes, heavy_slots,  # noqa: F401
                    linear_shape, mean_known, own_holes, profile_cut, cell_moments, profile_shape,
                    profile_spread, profile_tilt, shape_of, PROFILE_TILT)
from .maths import FLOAT8_MAX, is_tie_cell, ldexp_inf, ulp
from .packing import exact_dot, lattice_value, range_sum, unpack_atoms, unpack_pairs

#: The share of the cut cells' disagreement with the other shape (the straight line) that counts as the shape's standard
#: error (docs/math.md §7), and the weight of a profiled cell's own spread, where a synopsis does not say its own
#: (doubt_weight: NULL before 0.20.0, and on a continuous column or a synopsis with no cells, which its build
#: does not calibrate; a time column whose build tries a periodic profile until 0.25.0: :mod:`.calibration`).
SHAPE_DOUBT = 1.0
#: The most of a profiled cut cell's binomial variance f (1 − f) its exact mean may pin down (0.25.0): the most
#: it pins down of rows spread evenly over a cell, 3 f (1 − f) at f = ½ (:data:`MEAN_KNOWN`). Where a profile's
#: busy hours or its tilt to the cell's mean put nearly all rows in two clumps, its moments would claim the
#: mean fixes the split (a red team: a weekly profile's three-day cell, variance 0 where the count was 24 of
#: 27), which the shape's estimate does not use. The same literal in extension/range.c.
PINNED_MOST = 0.75
#: Half a row each side of a point query's count interval (lo = hi; docs/math.md §7) on a continuous column
#: (:func:`interval_1d`; on a lattice a point's interval comes from the law of a value drawn from the rows,
#: 0.24.0). A value a user asks about is mostly one the column holds, so its count is at least one.
#: Ranges get none: without it the normal approximation to a whole number covers its nominal share
#: on average over where the estimate falls between whole numbers; with it, ranges over a column's sparse
#: tail, whose counts are a few rows, were covered 97–99% of the time.
COUNT_CONTINUITY = 0.5
#: The offsets a bound strictly inside a cell keeps from its ends: the largest float8 below 1, and a tiny
#: positive number (the same literals in extension/range.c).
INSIDE_HIGH, INSIDE_LOW = 0.9999999999999999, 1e-300
#: The bounds a cut cell's exact count and sum set (:func:`mean_bounds`) apply where its mean position is known
#: within this share of the cell; MEAN_BOUNDS_FLOOR is added to that doubt, and a row's share of it to the
#: bounds before they are rounded to whole rows (the same literals in extension/range.c).
MEAN_BOUNDS_SLACK, MEAN_BOUNDS_FLOOR = 0.05, 1e-9


@dataclass
class Range:
    """A moment over a range: the estimate, its variance (the cut cells' rows binomial around the shape's
    share less what its exact mean pins down, plus the shape's error the sample showed,
    :func:`pg_kde.synopsis.cells.shape_variance`, plus the shape's distance from the other shape it could take, squared),
    and hard bounds."""

    estimate: float = 0.0
    variance: float = 0.0
    low: float = 0.0
    high: float = 0.0
    #: The cut cells' disagreement with the other shape they could take (the straight line; in a cell mostly of
    #: heavy values, which reads the line, the KDE's cubic, 0.23.0), in rows or a sum's units, before it is weighed: the
    #: shape's doubt is its weight times this (:func:`smooth_1d`).
    disagreement: float = 0.0
    #: The variance of the cut cells that follow a periodic profile before it is weighed: each such cell's is
    #: its weight squared times its own (0.25.0, :func:`smooth_1d`).
    profiled: float = 0.0
    #: The cells' estimate times 2^-FAR_SCALE, its terms past float8's range summed at that scale (:func:`smooth_1d`):
    #: beside the heavy values' sum at that scale where the two are infinite of opposite signs (:func:`range_1d`).
    scaled: float = 0.0


def snap(a: float, b: float, step: float):
    """[a, b] moved out to half-steps around the lattice values it includes: (A, B), or None when it
    includes none. Float arithmetic throughout, as _kde_snap in SQL."""
    lo, hi = -math.inf, math.inf
    ka = kb = None
    if math.isfinite(a):
        ka = c_ceil(a / step)
        if lattice_value(ka - 1, step) >= a:
            ka -= 1
        elif lattice_value(ka, step) < a:
            ka += 1
        lo = (ka - 0.5) * step
    if math.isfinite(b):
        kb = c_floor(b / step)
        if lattice_value(kb + 1, step) <= b:
            kb += 1
        elif lattice_value(kb, step) > b:
            kb -= 1
        hi = (kb + 0.5) * step
    if ka is not None and kb is not None and ka > kb:
        return None
    return lo, hi


def _position(part: float, first: float, t0: float, t1: float) -> tuple:
    """(share, position) of a cut cell's rows in [t0, t1] from the shape's mass and first moment there."""
    share = min(1.0, max(0.0, part))
    pos = first / share if share > 0 else (t0 + t1) / 2
    return share, min(t1, max(t0, pos))


def doubt_weight(s: dict) -> float:
    """The weight of a synopsis' shape's doubt: its stored ``doubt_weight`` (its build's calibration,
    :mod:`.calibration`), :data:`SHAPE_DOUBT` where it has none."""
    w = s.get("doubt_weight")
    return SHAPE_DOUBT if w is None else float(w)


def cell_weight(s: dict, c: int) -> float:
    """The weight of the shape's doubt in cell c: its group's in ``doubt_weights`` (cell c of m in group
    c · len div m, 0.21.0: :func:`.calibration.group_weights`), else :func:`doubt_weight`."""
    weights = s.get("doubt_weights")
    if weights:
        return float(weights[c * len(weights) // (len(s["grid"]) - 1)])
    return doubt_weight(s)


def cell_of(grid, x: float) -> int:
    """The cell of ``grid`` (two or more boundaries) that holds x: grid[k] <= x < grid[k + 1], the last cell
    also holding its end, the outer cells what lies beyond."""
    return min(max(bisect.bisect_right(grid, x) - 1, 0), len(grid) - 2)


def add_down(a: float, b: float) -> float:
    """a + b rounded down: the float8 sum, one float8 lower where it rounded up (its exact error, Knuth's
    two-sum, is negative). Not where the sum is infinite or NaN. As kde_add_down in extension/range.c."""
    s = a + b
    if s == math.inf and math.isfinite(a) and math.isfinite(b):
        return FLOAT8_MAX  # (an exact sum past float8's largest, rounded down: 0.28.0)
    if not math.isfinite(s):
        return s
    bb = s - a
    return math.nextafter(s, -math.inf) if (a - (s - bb)) + (b - bb) < 0 else s


def add_up(a: float, b: float) -> float:
    """a + b rounded up (:func:`add_down`'s mirror)."""
    return -add_down(-a, -b)


def _heavy_sum_at(values, cum_count, below: int, upto: int, scale: int) -> Optional[tuple]:
    """(sum, low, high, tiny_rows): :func:`heavy_sum` at 2^-scale, None where a product or the summation
    overflows; at scale > 0 the values below 2^(scale − 1022) in magnitude left out, tiny_rows their rows. As
    heavy_sum_at in extension/range.c."""
    terms, tiny_rows = [], 0.0
    least = math.ldexp(1.0, scale - 1022) if scale > 0 else 0.0
    prev = cum_count[below - 1] if below else 0.0
    for i in range(below, upto):
        v, c = float(values[i]), float(cum_count[i]) - prev
        prev = float(cum_count[i])
        if abs(v) < least:
            tiny_rows += c
            continue
        v = math.ldexp(v, -scale)
        product = v * c
        if not math.isfinite(product):
            return None
        terms += [product, float(Fraction(v) * Fraction(c) - Fraction(product))]
    try:
        total = math.fsum(terms)
        residual = math.fsum(terms + [-total])
    except OverflowError:
        return None
    if not math.isfinite(total):
        return None
    low = math.nextafter(total, -math.inf) if residual < 0 else total
    high = math.nextafter(total, math.inf) if residual > 0 else total
    return total, low, high, tiny_rows


#: Sums past float8's range are taken at 2^-FAR_SCALE and scaled back (0.28.0): the heavy values' where their
#: products or sum overflow (:func:`heavy_sum`), whole cells' estimates where their running sums did
#: (:func:`_whole_from_ends`) and cut pieces' whose own sum does; FAR_SCALE in extension/pg_kde.h.
FAR_SCALE = 128


def heavy_sum(values, cum_count, below: int, upto: int) -> Optional[tuple]:
    """(sum, low, high) of the heavy values values[below:upto] held cum_count's steps of rows each, from the
    values and counts rather than the stored running sums, whose float8 rounding loses a small value's rows
    beside a large one (a red team: 5,000 values of 0.05–19.95 beside ±3.4e38 read a sum of 0 within hard bounds
    of [0, 0], the exact sum 50,000). Each value times its count is split exactly into a float8 and its rounding
    error (two-product), and their sum is correctly rounded (Shewchuk's, as math.fsum); the hard bounds are that
    sum where it is exact, else the float8s either side on the exact sum's side. Where a product or the
    summation overflows (0.28.0), the same at 2^-FAR_SCALE (exact for values from 2^(FAR_SCALE − 1022) up;
    each smaller value's row widens the bounds by that much), scaled back: ±inf past float8's range with bounds
    from float8's largest, else the sum of values that cancel (100 rows of each of ±float8's largest beside
    small values read NaN within [-inf, inf] before). None where that fails too (a NaN value: the running sums'
    difference stands, as before 0.27.0). As heavy_sum in extension/range.c, whose fsum follows CPython's."""
    done = _heavy_sum_at(values, cum_count, below, upto, 0)
    if done is not None:
        return done[:3]
    scaled = _heavy_sum_at(values, cum_count, below, upto, FAR_SCALE)
    if scaled is None:
        return None
    total, low, high, tiny_rows = scaled
    total, low, high = (ldexp_inf(x, FAR_SCALE) for x in (total, low, high))
    if low == math.inf:  # (its scaled bound is at least 2^(1024 − FAR_SCALE): the exact sum is past float8's range)
        low = FLOAT8_MAX
    if high == -math.inf:
        high = -FLOAT8_MAX
    if tiny_rows > 0:
        slack = math.nextafter(tiny_rows * math.ldexp(1.0, FAR_SCALE - 1022), math.inf)
        low, high = add_down(low, -slack), add_up(high, slack)
    return total, low, high


def packed_sum_bounds(total: float, values, cum_count, below: int, upto: int, step: float) -> tuple:
    """Hard bounds of a packed table's sum ``total`` over values[below:upto] (:func:`.packing.range_sum`: the
    exact decimal sum K·q, rounded once): the float8s either side of it, widened by half an ulp of the largest
    magnitude a row there, each row: a float8 column's rows hold the float8 of their decimal (0.1 is
    0.1000000000000000055…), whose sum differs from the decimals' by that much at most, and a numeric column's
    decimal sum need not be a float8 (0.27.0; a red team: ten rows of float8 0.1 read [1.0, 1.0], their exact
    sum 1.0000000000000000555). Whole numbers (a step of 1 or more) up to 2^53, the rows' and their sum's, are
    float8s: their sum is exact. As packed_sum_bounds in extension/range.c."""
    rows = float(cum_count[upto - 1]) - (float(cum_count[below - 1]) if below else 0.0)
    top = max(abs(float(values[below])), abs(float(values[upto - 1])))
    if step >= 1 and top <= 2.0**53 and abs(total) <= 2.0**53:
        return total, total
    err = math.nextafter(rows * (ulp(top) / 2), math.inf)
    return add_down(math.nextafter(total, -math.inf), -err), add_up(math.nextafter(total, math.inf), err)


def heavy_between(values, cum, a: float, b: float) -> tuple:
    """(exact, upto, below): the sorted heavy ``values`` in [a, b] are values[below:upto], and ``exact`` the sum
    of their steps of ``cum`` (cumulative counts or sums)."""
    upto, below = bisect.bisect_right(values, b), bisect.bisect_left(values, a)
    return (cum[upto - 1] if upto else 0.0) - (cum[below - 1] if below else 0.0), upto, below


def smooth_1d(s: dict, a: float, b: float, order: int, heavy=None, weight: Optional[float] = None) -> Range:
    """The cells' part of [a, b] (bounds already snapped on a lattice); ``heavy``: the synopsis' heavy values,
    sorted (their slots inside a cut cell hold none of its rows); ``weight``: the shape's doubt's weight
    (None: the synopsis' own, :func:`doubt_weight`)."""
    out = Range()
    grid, counts = s["grid"], s["cell_cum_count"]
    sums, density = s["cell_cum_sum"], s["density"]
    m = len(grid)
    half_range = grid[-1] / 2 - grid[0] / 2 if m else 0.0
    if s["kde_rows"] == 0 or m < 2:
        return out
    A, B = max(a, grid[0]), min(b, grid[-1])
    if A > B or (A == B and s["step"] > 0):
        return out
    ka, kb = cell_of(grid, A), cell_of(grid, B)
    continuous = s["step"] == 0
    disagreement = shape_error = 0.0
    slack, rounding = s.get("sum_slack"), s.get("sum_quantum")
    far = None  # (terms of the estimate at 2^-FAR_SCALE: whole cells past float8's range, cut pieces too)
    if kb > ka + 1:
        far = _add_whole(out, s, ka + 1, kb, order, far)
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
            far = _add_whole(out, s, c, c + 1, order, far)
            continue
        d0, d1, mean = cell_ends(g0, g1, n, sums[c + 1] - sums[c], density[c], density[c + 1], s["kde_rows"],
                                 half_range)
        # Where the heavy values are whole, their slots inside the cell hold none of its rows: its shape is
        # over its other slots, with its exact mean there (cells.fit_holes; docs/math.md §7, "Heavy values
        # inside a cell").
        slots = heavy_slots(heavy, s["step"], g0, g1)
        doubt = 0.0
        spread_at = None  # (a profiled cell's: a row's mean position and its variance)
        if s.get("period", 0.0) > 0:
            # The periodic profile's shape, tilted to the cell's mean, and the variance of its share that
            # the profile's own sample leaves (cells.profile_share_variance).
            own = fit_holes(profile_shape(s["profile"], s["period"], g0, g1, s["step"]), mean, slots)
            share, pos, doubt = profile_cut(s["profile"], s["period"], g0, g1, t0, t1, s["step"], own.m)
            if own.slots:
                share, pos = _position(*own.share(t0, t1, A, B), t0, t1)
            apart = 0.0
            # where the cell's rows lie under the tilted profile: what its exact mean pins down (0.25.0); not where
            # the tilt cannot reach the cell's mean or heavy values hold some of its slots, whose rows' positions
            # the profile's moments do not follow (the even bridge below, as before)
            z = cell_moments(s["profile"], s["period"], s["step"], g0, g1)
            beta = profile_tilt(z, own.m)
            if abs(beta) < PROFILE_TILT and not own.slots:
                spread_at = profile_spread(z, beta, cell_slots(w, s["step"]) if s["step"] > 0 else 0.0)
        else:
            own, other = own_holes(d0, d1, mean, slots, s["step"], g0, g1)
            share, pos = _position(*own.share(t0, t1, A, B), t0, t1)
            apart = n * abs(share - other.share(t0, t1, A, B)[0])  # how far the other shape would put it
        # Binomial, less what the cell's exact mean pins down, plus the shape's error. A cut cell is never
        # certain: its share counts as at least one row's each side.
        f = min(max(share, 1 / (n + 1)), n / (n + 1))
        cuts = f * (1 - f)  # the shape's error at one cut, per 4 n² τ²
        below = 0.0  # the shape's share of the cell below the range (0 for a range from the cell's start)
        if 0 < t0 and t1 < 1:
            # A range inside one cell: where it lies in the cell sets what the cell's exact mean pins down of
            # its rows (MEAN_KNOWN), and it cuts the cell twice: the KDE's shape errs at the two cuts apart
            # (rows clustered on a few values make its error jump), each as at a cut from the cell's start,
            # never less than the range's own share gives. (A periodic profile errs smoothly over the
            # period: its errors at two cuts of one cell move together.)
            below = min(1.0, max(0.0, own.share(0.0, t0, -math.inf, A)[0]))
            if s["shape_var"] > 0 and not s.get("period", 0.0) > 0:
                upto = min(1.0, below + share)
                cuts = max(cuts, below * (1 - below) + upto * (1 - upto))
        a = min(below, 1.0 - f)
        pinned = f * (1 - 2 * a - f)  # f (1 − a − b), b = a + f
        if spread_at is not None and spread_at[1] > 0:
            # Under a profile the rows crowd its busy hours: the exact mean pins down the rows in [t0, t1] by
            # their covariance with a row's position, f (pos − μ), over its variance σ² (0.25.0; the bridge
            # below assumes rows spread evenly over the cell, docs/math.md §7), never more than PINNED_MOST of
            # f (1 − f)
            mu, sigma2 = spread_at
            pinned_by = f * (pos - mu)
            keep = max((1 - PINNED_MOST) * f * (1 - f), f * (1 - f) - pinned_by * pinned_by / sigma2)
        else:
            keep = max(0.0, f * (1 - f) - mean_known(w, s["step"]) * pinned * pinned)
        # The profile's own sampling error (a variance of the share): the tilt to the cell's exact mean
        # conditions it as the bridge above, the same share of it stays.
        spread = n * keep + keep / (f * (1 - f)) * n * n * doubt + 4 * n * n * s["shape_var"] * cuts
        own_spread = 0.0
        if s.get("period", 0.0) > 0:
            # A profiled cell has no other shape to disagree with: its build's calibration weighs its own
            # spread instead (0.25.0; 1 where it has no weight: :mod:`.calibration`).
            scaled = cell_weight(s, c) if weight is None else weight
            own_spread, spread = spread, spread * (scaled * scaled)
        if order == 0:
            k_lo, k_hi = mean_bounds(n, g0, g1, w, sums[c], sums[c + 1], t0, t1, s["step"], slack, rounding,
                                     [v for v, _, _ in slots])
            if k_lo == k_hi:  # the cell's count and mean leave one answer: exact
                out.estimate += k_lo
                out.low += k_lo
                out.high += k_lo
                continue
            out.estimate += min(k_hi, max(k_lo, n * share))
            out.variance += spread
            out.profiled += own_spread
            disagreement += apart
            weighed = (cell_weight(s, c) if weight is None else weight) if apart else 0.0
            if weighed:  # (a weight 0 adds nothing, an infinite disagreement's product included)
                shape_error += weighed * apart
            out.low += k_lo
            out.high += k_hi
        else:
            x = g0 * (1 - pos) + g1 * pos
            piece = n * share * x
            if math.isfinite(piece):
                out.estimate += piece
            else:  # past float8's range: at 2^-128 beside the whole cells' (0.28.0: two such pieces read inf − inf)
                far = (far or []) + [n * share * (math.ldexp(g0, -FAR_SCALE) * (1 - pos)
                                                  + math.ldexp(g1, -FAR_SCALE) * pos)]
            out.variance += spread * x * x
            out.profiled += own_spread * x * x
            disagreement += apart * abs(x)
            weighed = (cell_weight(s, c) if weight is None else weight) if apart else 0.0
            if weighed:
                shape_error += weighed * (apart * abs(x))
            # none to all of the cut piece's rows, each between the piece's ends (not read back from t0 and t1,
            # whose rounding put a point's one row of 31.16 a float8 above its hard bound: a red team), the
            # products and sums rounded outwards (0.27.0)
            out.low = add_down(out.low, min(0.0, math.nextafter(n * max(A, g0), -math.inf)))
            out.high = add_up(out.high, max(0.0, math.nextafter(n * min(B, g1), math.inf)))
    # The shape's own uncertainty: how far its shares are from the other shape's, each cut cell's weighed
    # (docs/math.md §7).
    out.variance += shape_error * shape_error  # (not ** 2: that raises OverflowError where IEEE 754 gives inf)
    out.disagreement = disagreement
    out.scaled = math.ldexp(out.estimate, -FAR_SCALE)
    if far is not None:
        out.scaled += math.fsum(far)
        out.estimate += ldexp_inf(math.fsum(far), FAR_SCALE)
    return out


def _add_whole(out: Range, s: dict, first: int, last: int, order: int, far: Optional[list]) -> Optional[list]:
    """Whole cells [first, last) added to ``out``: their stored rows or sum, and hard bounds ``off`` either side
    (:func:`stored_sum_error`, :func:`_widen`); a sum whose stored running sums there are past float8's range
    from the cells' ends instead (:func:`_whole_from_ends`), its estimate's terms joining ``far`` (returned). As
    add_whole in extension/range.c."""
    counts = s["cell_cum_count"]
    cells = counts if order == 0 else s["cell_cum_sum"]
    whole = cells[last] - cells[first]
    if order == 1 and not math.isfinite(whole):
        return (far or []) + _whole_from_ends(out, s["grid"], counts, first, last)
    off = stored_sum_error(order, counts[last] - counts[first], s.get("sum_slack"), s.get("sum_quantum"))
    out.estimate += whole
    out.low, out.high = _widen(out, whole, off, order)
    return far


def _whole_from_ends(out: Range, grid, counts, first: int, last: int) -> list:
    """Whole cells [first, last) of a sum whose stored running sums there are past float8's range (a few rows of
    ±1.7e308 make every later one infinite): each cell's rows between its ends, the products and additions
    rounded outwards; returns their estimate at the cells' midpoints times 2^-128, a term a cell, which the caller
    sums (math.fsum) over its cells and scales back once (cells of ±1.7e308 neither make it inf − inf nor swallow
    the others; 0.28.0: such a range read NaN).
    As whole_from_ends in extension/range.c."""
    middle = []
    for c in range(first, last):
        n = counts[c + 1] - counts[c]
        if n <= 0:
            continue
        middle.append(n * (math.ldexp(grid[c], -FAR_SCALE) / 2 + math.ldexp(grid[c + 1], -FAR_SCALE) / 2))
        out.low = add_down(out.low, math.nextafter(n * grid[c], -math.inf))
        out.high = add_up(out.high, math.nextafter(n * grid[c + 1], math.inf))
    return middle


def _widen(out: Range, whole: float, off: float, order: int) -> tuple:
    """out's hard bounds with whole cells' ``whole`` rows or sum added, ``off`` either side
    (:func:`stored_sum_error`): a count's exactly (whole numbers), a sum's rounded outwards (0.27.0)."""
    if order == 0:
        return out.low + (whole - off), out.high + (whole + off)
    return add_down(out.low, add_down(whole, -off)), add_up(out.high, add_up(whole, off))


def stored_sum_error(order: int, rows: float, slack: Optional[float], rounding: Optional[float]) -> float:
    """How far whole cells' stored sum may be from the sum of their ``rows`` rows' values: each value rounded
    to the scan's quantum (``rounding``: half of it a row), and the prefix sums' float8 ``slack`` at both ends
    (0 for a count, and where a synopsis built before 0.13.0 does not say). Where far values' quanta
    overflowed the scan, the quantum is the whole range's (2^62 among 0..999: 512), and a sum's hard bounds
    missed without it (a red team). As stored_sum_error in extension/range.c."""
    if order == 0:
        return 0.0
    return rows * ((rounding or 0.0) / 2) + 2 * (slack or 0.0)


def mean_bounds(n: float, g0: float, g1: float, w: float, cum0: float, cum1: float, t0: float, t1: float,
                step: float, slack: Optional[float], rounding: Optional[float], holes=()) -> tuple:
    """(fewest, most) of a cut cell's n rows that lie in the range, as the cell's exact count and sum allow
    (docs/math.md §7, "What the count and the mean allow"): rows below a cut sit at positions from the lowest
    a row may take up to the cut, the others from the cut up, so their sum n·m ≥ j·first + (n − j)·above, and
    likewise from above. Off a lattice rows may lie anywhere in the cell, at the cut too. On a lattice of step q
    they sit on the centres of its slots, (2i + 1)·q/(4w), none on the slots of its ``holes`` (the whole heavy
    values strictly inside it, sorted): each cut's nearest such centres on either side bound them (0.24.0;
    :func:`own_slots`; 0.13.0–0.23.0 took the centres next to the cut and the cell's ends). (0, n) where the sum
    is not known to within MEAN_BOUNDS_SLACK of the cell (``slack`` or ``rounding`` None: a synopsis built
    before 0.13.0). ``w`` is half the cell's width; ``cum0``, ``cum1`` the stored prefix sums at its ends, each
    within ``slack`` of the sum of its rows' values rounded to the quantum ``rounding`` (0: exact values)."""
    if slack is None or rounding is None or not n >= 1:
        return 0.0, n
    total = cum1 - cum0
    mean = ((total / n) / 2 - g0 / 2) / w  # as cells.shape_of, unclamped
    # the sum's error: two prefixes, the subtraction, and each row's rounding (half a quantum, twice)
    error = 2 * slack + ulp(total) + n * rounding
    doubt = (error / n / 2 + 4 * ulp(max(abs(g0), abs(g1), abs(total / n)))) / w + MEAN_BOUNDS_FLOOR
    if not (math.isfinite(mean) and doubt <= MEAN_BOUNDS_SLACK):
        return 0.0, n
    lattice = own_slots(step, w, g0, g1, t0, t1, holes)
    if lattice is not None:
        first, last, (below0, above0), (below1, above1) = lattice
        if above0 is None or below1 is None or above0 > below1:
            return 0.0, 0.0  # (the range holds none of the slots its rows may take: heavy values' alone)
        from_start, to_end = below0 is None, above1 is None
    else:  # rows anywhere in the cell; on a lattice of more than OWN_SLOTS_MOST slots, half a step from the cut
        gap = step / 4 / w if step > 0 else 0.0
        first, last, (below0, above0), (below1, above1) = 0.0, 1.0, (t0 - gap, t0 + gap), (t1 - gap, t1 + gap)
        from_start, to_end = t0 == 0.0, t1 == 1.0
    lo, hi = 0.0, n
    if from_start and to_end:  # the range holds every slot of the cell's rows
        lo = hi = n
    elif from_start:  # the range holds the cell's start: its rows are those below the cut at t1
        lo, hi = _below_cut(n, mean, doubt, below1, above1, first, last)
    elif to_end:  # it holds the cell's end: the rows not below the cut at t0
        below_lo, below_hi = _below_cut(n, mean, doubt, below0, above0, first, last)
        lo, hi = n - below_hi, n - below_lo
    else:  # inside the cell: its rows sit from above0 to below1, the others anywhere from first to last
        if above0 > first:
            hi = min(hi, n * (mean + doubt - first) / (above0 - first))
        if last > below1:
            hi = min(hi, n * (last - (mean - doubt)) / (last - below1))
    lo = c_ceil(lo - MEAN_BOUNDS_FLOOR * n)
    hi = c_floor(hi + MEAN_BOUNDS_FLOOR * n)
    lo, hi = (0.0 if math.isnan(lo) else max(0.0, lo)), (n if math.isnan(hi) else min(n, hi))
    return (lo, hi) if lo <= hi else (0.0, n)


#: A cut cell of more lattice slots than this keeps its rows anywhere but half a step from a cut
#: (:func:`own_slots`): slot indices stay far from float8's whole numbers' end, and the nearest centres are
#: within 10⁻⁶ of the cell of its ends.
OWN_SLOTS_MOST = 1e6


def half_step(x: float, step: float) -> bool:
    """Whether x lies on a half-step of the lattice of step q, (k + ½)·q, as a build's cell boundaries do (within
    a quarter step; |x/q| below 2^50). A merge of parts whose steps differ keeps a coarser part's boundaries,
    which may be values of the finer common lattice: a merge of whole numbers and tenths has cells from
    1,121.5 on a lattice of 0.1 (:func:`own_slots`)."""
    f = x / step - 0.5
    return abs(f) < 2.0 ** 50 and abs(f - c_floor(f + 0.5)) < 0.25


def own_slots(step: float, w: float, g0: float, g1: float, t0: float, t1: float, holes) -> Optional[tuple]:
    """Where a cut cell's rows may sit about the cuts at t0 and t1 (positions in [0, 1] of the cell [g0, g0 +
    2w], on a lattice of step q): (first, last, (below t0, above t0), (below t1, above t1)), the centres of the
    lowest and highest slots that may hold its rows and of the nearest such slots on each side of each cut, a
    side with none None. Slot i's centre lies at (2i + 1)·q/(4w); the slots of ``holes``, whole heavy values
    strictly inside the cell (sorted), hold none of its rows (docs/math.md §7, "Heavy values inside a cell").
    None off a lattice, in a cell of fewer than two or more than :data:`OWN_SLOTS_MOST` slots, one whose ends
    are not both half-steps (:func:`half_step`: its slots are not the lattice's), and where every slot is a hole
    (no row there). As own_below and own_above in extension/range.c's mean_bounds."""
    slots = cell_slots(w, step) if step > 0 else 0.0
    if not (2 <= slots <= OWN_SLOTS_MOST and half_step(g0, step) and half_step(g1, step)) \
            or any(math.isnan(h) for h in holes):  # (a NaN heavy value, which only a tampered row holds)
        return None
    gap = step / 4 / w
    taken = [math.floor((h - g0) / step) for h in holes]  # the holes' slots, ascending

    def below(i: float):  # the highest own slot under index i, as a centre (None: none)
        k = bisect.bisect_right(taken, i - 1) - 1
        i -= 1
        while i >= 0 and k >= 0 and taken[k] == i:
            i, k = i - 1, k - 1
        return (2 * i + 1) * gap if i >= 0 else None

    def above(i: float):  # the lowest own slot from index i up, as a centre (None: none)
        k = bisect.bisect_left(taken, i)
        while i < slots and k < len(taken) and taken[k] == i:
            i, k = i + 1, k + 1
        return (2 * i + 1) * gap if i < slots else None

    first, last = above(0.0), below(slots)
    if first is None:
        return None
    i0, i1 = c_floor(t0 * slots + 0.5), c_floor(t1 * slots + 0.5)  # the cuts' slot indices
    return first, last, (below(i0), above(i0)), (below(i1), above(i1))


def _below_cut(n: float, mean: float, doubt: float, upto: float, above: float, first: float,
               last: float) -> tuple:
    """(fewest, most) rows j of a cell below a cut, where those below sit in [``first``, ``upto``] and the others
    in [``above``, ``last``] (positions in [0, 1]) and the rows' mean position is ``mean`` ± ``doubt``: from
    n·mean ≥ j·first + (n − j)·above and n·mean ≤ j·upto + (n − j)·last."""
    lo = n * (above - (mean + doubt)) / (above - first) if above > first else 0.0
    hi = n * (last - (mean - doubt)) / (last - upto) if upto < last else n
    return lo, hi


def _pack_of(s: dict):
    """A 1-D payload's ``atom_pack`` where it holds the heavy values (its three arrays empty), else None."""
    return s["atom_pack"] if len(s["atom_values"]) == 0 and s.get("atom_pack") else None


def heavy_values(s: dict) -> tuple:
    """(values, cumulative counts, cumulative sums) of a 1-D payload's heavy values: its three arrays, or
    its ``atom_pack`` unpacked (:mod:`.packing`) where the arrays are empty and the pack is not."""
    pack = _pack_of(s)
    if pack is not None:
        return unpack_atoms(pack, s["step"])
    return s["atom_values"], s["atom_cum_count"], s["atom_cum_sum"]


def range_1d(s: dict, lo: Optional[float], hi: Optional[float], order: int) -> Range:
    """Count (order 0) or sum (order 1) of the rows with lo <= x <= hi (None: open) of a 1-D synopsis given
    as its payload columns (a dict: step, atom_values, atom_cum_count, atom_cum_sum, kde_rows, grid,
    cell_cum_count, cell_cum_sum, density, shape_var; period and profile, when not 0 and empty; atom_pack
    instead of the three atom arrays when it is not empty)."""
    a = -math.inf if lo is None else float(lo)
    b = math.inf if hi is None else float(hi)
    if a > b or a == math.inf or b == -math.inf:  # (no finite value lies at or beyond an infinite bound)
        return Range()
    pack = _pack_of(s)
    if pack is not None:
        # packed (0.9.0): counts as stored, a sum from the exact running index sums
        values, cum, _, ks = unpack_atoms(pack, s["step"], index_sums=True)
    else:
        values, cum, ks = s["atom_values"], s["atom_cum_count"] if order == 0 else s["atom_cum_sum"], None
    exact, upto, below = heavy_between(values, cum, a, b)
    exact_low = exact_high = None  # (the heavy values' own hard bounds on a sum, where not the sum itself)
    if order == 1 and ks is not None:
        exact = range_sum(ks, upto, below, s["step"])
        if upto > below:
            exact_low, exact_high = packed_sum_bounds(exact, values, cum, below, upto, s["step"])
    elif order == 1 and upto > below:
        summed = heavy_sum(values, s["atom_cum_count"], below, upto)
        if summed is not None:
            exact, exact_low, exact_high = summed
    elif order == 1:
        exact = 0.0  # (no heavy value in the range: not inf − inf where the running sums overflowed, 0.27.0)
    smooth = Range()
    if s["step"] > 0:
        snapped = snap(a, b, s["step"])
        whole = values if s.get("heavy_whole") else None
        if snapped is not None and not (a == b and upto > below and whole is not None):
            # (a point on a heavy value that holds every row of its value: exact)
            smooth = smooth_1d(s, *snapped, order, whole)
            if a == b and upto == below:
                # A point off the heavy values: the rows of a value the column holds, where its count is not
                # exact; a sum by the same factor as the count (docs/math.md §7, "Points")
                count = smooth if order == 0 else smooth_1d(s, *snapped, 0, whole)
                if count.low < count.high and count.estimate > 0:
                    held = min(count.high, max(count.low, held_rows(count.estimate)))
                    if order == 0:
                        smooth.estimate = held
                    else:  # (the slot's mean value first: a subnormal count would make held / count infinite)
                        smooth.estimate = min(smooth.high, max(smooth.low, held * (smooth.estimate / count.estimate)))
    else:
        smooth = smooth_1d(s, a, b, order)
    if order == 0:
        low, high = exact + smooth.low, exact + smooth.high
    else:  # a sum's hard bounds rounded outwards where the float8 additions round (0.27.0)
        low = add_down(exact if exact_low is None else exact_low, smooth.low)
        high = add_up(exact if exact_high is None else exact_high, smooth.high)
    # the estimate within its hard bounds (0.28.0: a cut piece's sum, its mean value taken from a cell's start far
    # below the piece, read -2.8e-141 under a hard low of 0); a NaN stays NaN, as in C
    estimate = exact + smooth.estimate
    if order == 1 and ks is None and upto > below and math.isnan(estimate) and not math.isnan(exact) \
            and not math.isnan(smooth.estimate):
        # ±∞ ∓ ∞: heavy values and cells whose sums pass float8's range with opposite signs, both at 2^-FAR_SCALE
        # (before, NaN within [-inf, inf])
        scaled = _heavy_sum_at(values, s["atom_cum_count"], below, upto, FAR_SCALE)
        if scaled is not None:
            estimate = ldexp_inf(scaled[0] + smooth.scaled, FAR_SCALE)
    if estimate < low:
        estimate = low
    if estimate > high:
        estimate = high
    return Range(estimate, smooth.variance, low, high, smooth.disagreement, smooth.profiled)


#: Below this many expected rows a point's count is the median of its held rows, a whole number; from it on, their
#: mean (docs/math.md §7, "Points").
HELD_MEDIAN_BELOW = 10.0


def held_rows(expected: float) -> float:
    """The rows of a lattice value that the column holds, where its cells expect ``expected`` rows there (λ): a
    Poisson count given that it is at least one. A point query's value is mostly one the column holds, as the
    planner's equality estimate assumes (docs/math.md §7, "Points"). Below :data:`HELD_MEDIAN_BELOW` rows, that
    count's median, the smallest k ≥ 1 with P(1 ≤ X ≤ k) ≥ P(X ≥ 1)/2: a whole number (1 while λ < 1.26, the
    count most such values hold), which minimises the expected absolute error. From it on, its mean
    λ/(1 − e^(−λ)), λ for a busy value, where the median is within a row of it."""
    if not expected > 0:
        return 0.0
    if expected >= HELD_MEDIAN_BELOW:
        return expected / -math.expm1(-expected)
    half = -math.expm1(-expected) / 2
    p = expected * math.exp(-expected)  # P(X = 1)
    k, below = 1, p
    while below < half and k < 64:
        k += 1
        p *= expected / k
        below += p
    return float(k)


def z_of(confidence: float) -> float:
    """z of a two-sided interval at ``confidence``: the normal quantile at (1 + confidence)/2."""
    from statistics import NormalDist

    return -NormalDist().inv_cdf((1 - confidence) / 2)


def interval(r: Range, confidence: float, order: int = 0, point: bool = False) -> tuple:
    """(estimate, low, high) at the given confidence: estimate ± z √variance, within the hard bounds; a point
    query's count (order 0, lo = hi: ``point``; :func:`interval_1d` gives a lattice's its own) has half a row
    more each side (:data:`COUNT_CONTINUITY`, docs/math.md §7)."""
    half = half_width(r, confidence, order, point)
    return within_bounds(r, r.estimate - half, r.estimate + half)


def half_width(r: Range, confidence: float, order: int = 0, point: bool = False) -> float:
    """z √variance, and for a point query's count half a row more (:func:`interval`)."""
    return z_of(confidence) * math.sqrt(r.variance) + (COUNT_CONTINUITY if order == 0 and point else 0.0)


def within_bounds(r: Range, low: float, high: float) -> tuple:
    """(estimate, low, high): [low, high] kept within ``r``'s hard bounds and widened to hold its estimate; of
    zero width only where the hard bounds are (0.27.0: a sum over whole cells has no variance, but its stored
    sums' rounding leaves the answer within its hard bounds, not on its estimate; a red team found such
    intervals 5 ulps to 0.6 off the exact sum)."""
    low, high = min(max(r.low, low), r.estimate), max(min(r.high, high), r.estimate)
    if low == high and r.low < r.high:
        return r.estimate, r.low, r.high
    return r.estimate, low, high


#: The counts a point's law (:func:`held_interval`) spans: 1 + 0 … 1 + HELD_LAW_COUNTS rows, enough below
#: HELD_MEDIAN_BELOW expected rows (P(Poisson(10) > 64) is below 1e-28, and a binomial of that mean spreads less),
#: and none past a chance below HELD_LAW_FLOOR (or where λ is below it): the next would come near float8's
#: underflow, which the server's float8 product raises as an error.
HELD_LAW_COUNTS, HELD_LAW_FLOOR = 64, 1e-150


def held_interval(expected: float, rows: float, confidence: float) -> tuple:
    """(low, high): the whole counts a point's interval holds where its lattice slot's cells expect ``expected``
    rows (λ, below :data:`HELD_MEDIAN_BELOW`) of its cut cell's ``rows`` (n), as half-rows about them:
    [1 + j_lo − ½, 1 + j_hi + ½]. A value asked about because a row holds it has that row and each of the
    cell's n − 1 others there with chance f = λ/n: 1 + Binomial(n − 1, f) rows (0.24.0; 0.19.0–0.23.0 took
    1 + Poisson(λ), its limit in a cell of many slots, which spreads 1/(1 − f) times as much: in a cell of three
    slots, 1.5 times). Its likeliest counts are taken, from the law's mode
    ⌊λ⌋ outward, the likelier neighbour first, until their chance reaches ``confidence``; the last one is left
    out again where the chance without it is nearer ``confidence`` than with it, and the mode never is
    (docs/math.md §7, "Points"). The chance is the one nearest the confidence the law's whole counts allow, not
    one at least as large: on budget.py's time column (λ about 0.05 a second on 10⁶ rows, 0.5 on 10⁷) the
    choice is often one row (chance about e^(−λ), 0.95) against one or two (0.999), and sets of at least 95%
    covered 97–99% of each data set's points (benchmarks/coverage.py). _kde_held_interval in SQL, step for
    step."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), got {confidence}")
    expected = max(expected, 0.0)
    others = max(rows - 1, 0.0)  # N: the cell's other rows
    share = min(expected / rows, 1.0) if rows > 0 else 0.0
    if share >= 1.0 or others == 0:  # (every other row there, or none: one count)
        return others * share + 0.5, others * share + 1.5
    odds = share / (1 - share)
    a = b = min(int(math.floor(expected)), int(math.floor(others)))  # the mode, ⌊(N + 1) f⌋ = ⌊λ⌋, at most N
    # p[j] = P(Binomial(N, f) = j), up to the mode, then as the counts are taken
    p = [math.exp(others * math.log(1 - share))]  # (as SQL takes it: ln, no log1p)

    def more() -> bool:  # whether the law goes on past the last count computed
        return (len(p) <= min(HELD_LAW_COUNTS, others) and p[-1] >= HELD_LAW_FLOOR
                and expected >= HELD_LAW_FLOOR)

    def grow():  # the next count's chance: P(j + 1) = P(j)·(N − j)/(j + 1)·f/(1 − f)
        p.append(p[-1] * (others - (len(p) - 1)) / len(p) * odds)

    while len(p) <= a:
        grow()
    chance, kept = p[a], None
    while chance < confidence and (a > 0 or b + 1 < len(p) or more()):
        kept = (a, b, chance)
        if b + 1 == len(p) and more():
            grow()
        if b + 1 < len(p) and (a == 0 or p[b + 1] > p[a - 1]):
            b += 1
            chance += p[b]
        else:
            a -= 1
            chance += p[a]
    if kept is not None and confidence - kept[2] < chance - confidence:
        a, b = kept[0], kept[1]
    return a + 0.5, b + 1.5


def loose_bounds(s: dict, r: Range, lo: Optional[float], hi: Optional[float], order: int,
                 loose: Tuple[bool, bool] = (False, False), fuzz: Tuple[float, float] = (0.0, 0.0)) -> Range:
    """``r`` (:func:`range_1d` of lo..hi) with hard bounds that hold the answer also where rows on a bound's
    float8 may lie on either side of the bound (docs/math.md §7, "Values float8 cannot tell apart", 0.30.0): on
    a column whose float8s may stand for more than one value of its type (the payload's ``coarse``; None, not
    known, as True) every finite bound, and the bounds ``loose`` names (given with more digits than float8
    holds). Each such bound is also moved to the next float8 inwards, leaving its float8's rows out; the hard
    bounds are the widest of the ranges so made (for a count the narrowest range's low and the widest's high;
    a sum's rows on the two bounds may be of either sign, so each of the four). ``fuzz``: how far (in the
    column's units) the rows may lie on either side of each bound (a timestamptz bound of a date or timestamp
    column about a change of the UTC offset): the ranges with that bound moved that much each way too.
    _kde_interval in SQL; its interval widens by what the hard bounds widened (:func:`widened`)."""
    coarse = s.get("coarse") is not False
    lo_loose = (coarse or loose[0]) and lo is not None and lo > -math.inf
    hi_loose = (coarse or loose[1]) and hi is not None and hi < math.inf
    lo_fuzz = fuzz[0] if lo is not None and math.isfinite(lo) and fuzz[0] > 0 else 0.0
    hi_fuzz = fuzz[1] if hi is not None and math.isfinite(hi) and fuzz[1] > 0 else 0.0
    if not (lo_loose or hi_loose or lo_fuzz or hi_fuzz or (coarse and order == 1)):
        return r
    low, high = r.low, r.high
    # (inwards, past the fuzz: a row that far may still be on the other side)
    los = (lo,) + ((math.nextafter(lo, math.inf),) if lo_loose else ()) + (
        (lo - lo_fuzz, math.nextafter(lo + lo_fuzz, math.inf)) if lo_fuzz else ())
    his = (hi,) + ((math.nextafter(hi, -math.inf),) if hi_loose else ()) + (
        (math.nextafter(hi - hi_fuzz, -math.inf), hi + hi_fuzz) if hi_fuzz else ())
    for a in los:
        for b in his:
            if a == lo and b == hi:
                continue
            c = range_1d(s, a, b, order)
            low, high = min(low, c.low), max(high, c.high)
    if coarse and order == 1:
        # each row's value lies up to half an ulp from the float8 the sums hold (a red team on 0.30.0's first
        # build: 1,000 rows of 2^62 + 511 beside 1,000 of -2^62 summed to [0, 0], exact 511,000)
        values = heavy_values(s)[0]
        biggest = max((abs(v) for v in list(s["grid"]) + list(values)), default=0.0)
        if lo is not None and hi is not None and math.isfinite(lo) and math.isfinite(hi):
            biggest = min(biggest, max(abs(lo), abs(hi)))
        rows = range_1d(s, lo, hi, 0).high
        low, high = coarse_widened(low, rows, biggest, False), coarse_widened(high, rows, biggest, True)
    return Range(r.estimate, r.variance, low, high, r.disagreement, r.profiled)


def coarse_widened(x: float, rows: float, biggest: float, up: bool) -> float:
    """A sum's hard bound x moved out (``up``: above, else below) by what the values of ``rows`` rows may lie
    from their float8s on a coarse column: half an ulp each, at most 2^-53 of ``biggest``, the largest magnitude
    a row may have (2^-1075 where that is subnormal), taken as 2^-52 of it (or 2^-1074) a row, which also covers
    the product's rounding; added rounded outwards. _kde_coarse_widen in extension/range.c."""
    biggest = abs(biggest)
    each = math.ldexp(biggest, -52) if biggest >= 2.2250738585072014e-308 else math.ldexp(1.0, -1074)
    slack = rows * each if biggest > 0 and rows > 0 else 0.0
    return add_up(x, slack) if up else add_down(x, -slack)


def widened(r: Range, hard: Range, low: float, high: float) -> tuple:
    """An interval [low, high] made for ``r`` within ``hard`` (:func:`loose_bounds`): the rows on a loose
    bound's float8 are not modelled, so it widens by as much as the hard bounds did, then
    :func:`within_bounds`."""
    if hard.low < r.low:
        low += hard.low - r.low
    if hard.high > r.high:
        high += hard.high - r.high
    return within_bounds(hard, low, high)


def interval_1d(s: dict, lo: Optional[float], hi: Optional[float], confidence: float, order: int = 0,
                loose: Tuple[bool, bool] = (False, False), fuzz: Tuple[float, float] = (0.0, 0.0)) -> tuple:
    """approx_count_ci / approx_sum_ci of a 1-D payload, as _kde_interval in SQL: :func:`range_1d`'s estimate
    and :func:`interval`. A point's count on a lattice (lo = hi) whose hard bounds are not exact estimates the
    rows of a value the column holds (:func:`held_rows`); its slot's cells expect λ rows there (the same slot
    asked as a range, lo < hi) of its cut cell's n, and a value drawn from the rows has 1 + Binomial(n − 1, λ/n)
    rows. Below :data:`HELD_MEDIAN_BELOW` expected rows its interval holds that law's whole counts
    (:func:`held_interval`); from there it lies about the law's mean λ + 1 − λ/n, z standard deviations of the
    range's each side (0.24.0: 0.16.0–0.23.0 lay about λ with half a row more each side; with the Poisson law
    below 10 rows, the Zipf-like column's points at 8 and 64 KB were covered 96.7% and 98.4% of the time,
    benchmarks/coverage.py --draws 150 --columns qty). Within the hard bounds, widened to hold the estimate
    (docs/math.md §7, "Points")."""
    r = range_1d(s, lo, hi, order)
    point = lo is not None and lo == hi
    hard = loose_bounds(s, r, lo, hi, order, loose, fuzz)
    if order == 0 and point and s["step"] > 0 and r.low < r.high:
        expected = range_1d(s, lo, lo + s["step"] / 4, 0).estimate
        grid, counts = s["grid"], s["cell_cum_count"]
        c = cell_of(grid, lo)
        rows = counts[c + 1] - counts[c]
        if expected < HELD_MEDIAN_BELOW:
            return widened(r, hard, *held_interval(expected, rows, confidence))
        half = z_of(confidence) * math.sqrt(r.variance)
        centre = expected + 1 - expected / rows
        return widened(r, hard, centre - half, centre + half)
    half = half_width(r, confidence, order, point)
    return widened(r, hard, r.estimate - half, r.estimate + half)


# ---------------------------------------------------------------------------------------------------- 2-D
def grid_pos(grid, x: float) -> float:
    """The fractional grid-index coordinate of x (0 at grid[0], len(grid) − 1 at the last point), a bound within
    two ulps of a grid point on it: _kde_grid_pos in SQL, step for step."""
    m = len(grid)
    if abs(x) < 2.2250738585072014e-308:
        x = 0.0  # a subnormal bound reads as 0 (no grid point is subnormal; x / 2 would underflow in SQL)
    if x <= grid[0]:
        return 0.0
    if x >= grid[-1]:
        return float(m - 1)
    k = bisect.bisect_right(grid, x)  # width_bucket: points <= x (1-based cell k: grid[k - 1] <= x < grid[k])
    g0, g1 = grid[k - 1], grid[k]
    if x == g0 or (abs(g0) > 1e-290 and abs(x / 2 - g0 / 2) <= 2.25e-16 * abs(g0)):
        return float(k - 1)
    if abs(g1) > 1e-290 and abs(g1 / 2 - x / 2) <= 2.25e-16 * abs(g1):
        return float(k)
    return (k - 1) + (x / 2 - g0 / 2) / (g1 / 2 - g0 / 2)


def upper_pos(grid, x: float) -> float:
    """The grid-index coordinate of an upper bound x (_kde_upper_pos): :func:`grid_pos`, and past a heavy
    value's cell of its own ([v, next float), :func:`.maths.is_tie_cell`) when x is at least v on its start:
    x <= v holds the rows at v, which the half-open cell starting at v keeps."""
    p = grid_pos(grid, x)
    k = int(p)
    if p == k and k < len(grid) - 1 and x >= grid[k] and is_tie_cell(grid[k], grid[k + 1]):
        return float(k + 1)
    return p


def lattice_bound(lattice, grid, x: float, upper: bool) -> float:
    """A bound moved onto a discretised axis's lattice (_kde_lattice_bound): the midpoint just below the
    smallest value ≥ x (a lower bound) or just above the largest value ≤ x (an upper bound); the grid's ends
    beyond the lattice."""
    k = bisect.bisect_right(lattice, x)  # values <= x
    if not upper and k > 0 and lattice[k - 1] == x:
        k -= 1  # values < x
    if k == 0:
        return grid[0]
    if k == len(lattice):
        return grid[-1]
    return lattice[k - 1] / 2 + lattice[k] / 2


def _sat_at(sat, m1: int, m2: int, offs: int, p1: float, p2: float) -> float:
    """A summed-area table read bilinearly at grid-index coordinates (p1, p2) (_kde_sat_at)."""
    i, j = min(math.floor(p1), m1 - 2), min(math.floor(p2), m2 - 2)
    f, g = p1 - i, p2 - j
    base = offs + i * m2 + j
    return ((1 - f) * (1 - g) * sat[base] + (1 - f) * g * sat[base + 1]
            + f * (1 - g) * sat[base + m2] + f * g * sat[base + m2 + 1])


def pairs_box(s: dict, a1: float, b1: float, a2: float, b2: float, moment: int = 0) -> float:
    """What the box [a1, b1] × [a2, b2] holds in a 2-D synopsis stored as its pair's exact frequency table
    (``pair_pack``, :func:`.packing.pack_pairs`): the rows whose two values lie in it, counted (moment 0), or
    their values of column ``moment`` summed, exactly and rounded once (no cancellation: −4.4e9 × 10,000,
    4.4e9 × 10,000 and 0.01 sum to 0.01). A NaN bound lies above every value, as in PostgreSQL (a NaN lower
    bound holds no row). A sum past float8's range is ±∞ (0.28.0: a product past it no longer makes the sum ±∞,
    or NaN with both signs, by itself). As _kde_pair_box in C (a compensated sum there, at 2^-128 where a
    product or the sum runs past float8's range: the same to rounding)."""
    lattice1, lattice2 = s["lattice1"], s["lattice2"]
    i1, i2, counts = unpack_pairs(s["pair_pack"], len(lattice1), len(lattice2))  # (checked whatever the box)
    a1, b1, a2, b2 = (math.inf if math.isnan(x) else x for x in (a1, b1, a2, b2))
    lo1, hi1 = bisect.bisect_left(lattice1, a1), bisect.bisect_right(lattice1, b1)
    lo2, hi2 = bisect.bisect_left(lattice2, a2), bisect.bisect_right(lattice2, b2)
    inside = [(a, b, c) for a, b, c in zip(i1, i2, counts) if lo1 <= a < hi1 and lo2 <= b < hi2]
    if moment == 0:
        return float(sum(c for _, _, c in inside))
    return exact_dot([c for _, _, c in inside], [lattice1[a] if moment == 1 else lattice2[b] for a, b, _ in inside])


#: A 2-D box's sum reads 16 running sums of a column; each below this (2^1021) in magnitude, the box's
#: bilinear reads and their difference stay finite (_kde_box raises beyond: a column's sums past float8's range).
SAT_SUM_LIMIT = 2.0**1021


def box_2d(s: dict, a1: float, b1: float, a2: float, b2: float, moment: int = 0) -> float:
    """What the box [a1, b1] × [a2, b2] (±inf: open) holds in a 2-D synopsis given as its catalog row: moment
    0 the row count (whole cells inside exactly, the strip the box cuts shaped by the KDE, within the block
    of cells covering it), moment k the sum of column k; a synopsis stored as its pair's exact frequency
    table answers exactly (:func:`pairs_box`). The float64 reference of _kde_box (docs/math.md §8)."""
    if s.get("pair_pack"):
        return pairs_box(s, a1, b1, a2, b2, moment)
    m1, m2 = s["grid_size"]
    grid1, grid2 = s["grid1"], s["grid2"]
    if s["integer_valued"][0]:
        a1, b1 = math.ceil(a1) - 0.5 if math.isfinite(a1) else a1, math.floor(b1) + 0.5 if math.isfinite(b1) else b1
    if s["integer_valued"][1]:
        a2, b2 = math.ceil(a2) - 0.5 if math.isfinite(a2) else a2, math.floor(b2) + 0.5 if math.isfinite(b2) else b2
    if a1 > b1 or a2 > b2:
        return 0.0
    if s["lattice1"]:
        a1, b1 = lattice_bound(s["lattice1"], grid1, a1, False), lattice_bound(s["lattice1"], grid1, b1, True)
    if s["lattice2"]:
        a2, b2 = lattice_bound(s["lattice2"], grid2, a2, False), lattice_bound(s["lattice2"], grid2, b2, True)
    # (a point [v, v] on a continuous axis holds v's rows where v has a cell of its own: upper_pos)
    if a1 > b1 or a2 > b2 or (s["lattice1"] and a1 == b1) or (s["lattice2"] and a2 == b2):
        return 0.0
    pa1, pb1, pa2, pb2 = grid_pos(grid1, a1), upper_pos(grid1, b1), grid_pos(grid2, a2), upper_pos(grid2, b2)
    if pa1 >= pb1 or pa2 >= pb2:
        return 0.0
    if moment > 0:
        sums, offs = s["sat_sum"], (moment - 1) * m1 * m2
        for p1, p2 in ((pa1, pa2), (pa1, pb2), (pb1, pa2), (pb1, pb2)):  # (16 running sums below 2^1021: finite)
            base = offs + min(math.floor(p1), m1 - 2) * m2 + min(math.floor(p2), m2 - 2)
            if not all(abs(sums[k]) < SAT_SUM_LIMIT for k in (base, base + 1, base + m2, base + m2 + 1)):
                cols = s.get("cols") or ("column 1", "column 2")
                raise OverflowError(f"pg_kde: the 2-D synopsis of {cols[0]}, {cols[1]} holds running sums of "
                                    f"{cols[moment - 1]} near or past float8's largest (2^1021 or more) where this "
                                    "box reads them")
        return (_sat_at(sums, m1, m2, offs, pb1, pb2) - _sat_at(sums, m1, m2, offs, pa1, pb2)
                - _sat_at(sums, m1, m2, offs, pb1, pa2) + _sat_at(sums, m1, m2, offs, pa1, pa2))
    counts, kde = s["sat_count"], s["kde_sat"]
    box_kde = (_sat_at(kde, m1, m2, 0, pb1, pb2) - _sat_at(kde, m1, m2, 0, pa1, pb2)
               - _sat_at(kde, m1, m2, 0, pb1, pa2) + _sat_at(kde, m1, m2, 0, pa1, pa2))

    def block(table, i1, j1, i2, j2):
        return table[j1 * m2 + j2] - table[i1 * m2 + j2] - table[j1 * m2 + i2] + table[i1 * m2 + i2]

    inner_exact = inner_kde = 0.0
    ia1, ib1, ia2, ib2 = math.ceil(pa1), math.floor(pb1), math.ceil(pa2), math.floor(pb2)
    if ia1 < ib1 and ia2 < ib2:
        inner_exact, inner_kde = block(counts, ia1, ib1, ia2, ib2), block(kde, ia1, ib1, ia2, ib2)
    outer_exact = block(counts, math.floor(pa1), math.ceil(pb1), math.floor(pa2), math.ceil(pb2))
    return min(max(inner_exact + (box_kde - inner_kde), inner_exact), outer_exact)
