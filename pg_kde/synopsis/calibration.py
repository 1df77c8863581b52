"""The build's calibration of a 1-D synopsis' shape's doubt (docs/math.md §7, "The doubt's weight, calibrated").

A cut cell's interval adds the shape's doubt, a weight times the cell's disagreement with the other shape it
could take (the straight line; the KDE's cubic where it reads the line, in a cell mostly of heavy values),
to the rows' own spread (:func:`pg_kde.synopsis.query.smooth_1d`). No one weight suits every column, nor every
part of one: a log-normal's dense bulk, where its cells are narrow and the shape's small disagreements
understate its errors, needs more of it than its sparse tail, where wide cells curve far from the line and
the shape follows them. The build measures it. Its one scan also counts the rows below the half-steps about
:data:`PROBES` lattice values of each of two kinds (:func:`probes`: the sample's values at evenly spaced ranks,
and values evenly spaced over the column's range), which are boundaries of the scan's grid beside the
synopsis' own (:func:`cuts_of`; folded back after the scan, :func:`fold_scan`: counts and sums add exactly),
and keeps its tails (the smallest and largest cell values), beyond which it knows the rows below any value
(:class:`Counts`). On :data:`RANGES` ranges with exact counts, half between the sample's values as bounds drawn
from the data fall (:func:`calibration_ranges`), half uniform over the column's whole range as bounds uniform
over its domain fall, of those that cut a cell (:func:`uniform_ranges`), each put together from its bounds'
cut pieces (:func:`calibration_terms`, tested range by range against :func:`range_terms`, the reference's own
answer), the build stores the weight of :data:`WEIGHTS` whose 95% intervals cover nearest 95% of them
(``doubt_weight``, :func:`weight_for`) and a weight for each of :data:`GROUPS` groups of neighbouring cells
(``doubt_weights``, :func:`group_weights`), by which the queries weigh each cut cell's disagreement. Beside a
frequency table, whose cells hold the values its sample missed among the table's, where few ranked values fall,
the scan also counts the cuts about the values among its cells (:func:`among_probes`), and ranges from each of
them to the column's ends, weighed by the rows on it, join the others (:func:`among_ranges`); its groups are as
many as the bytes the table and its cells leave of the budget hold, a group for four cells at most. The same
ranges (a seeded choice) and the same counts give the same weights: a refresh of unchanged data stores the
same synopsis bit for bit.

A time column whose build tries a periodic profile and plans at most :data:`PROFILE_CELLS_MOST` cells (0.25.0)
is calibrated likewise, between :data:`PROFILE_PROBES` values of each kind, with one weight (no groups: its
cells leave the weights no bytes) and none below :data:`PROFILE_WEIGHT_LEAST`: a profiled cell has no other shape to disagree with, D = 0,
so the weight scales the cell's own spread instead, its variance w² times the rows' own
(:func:`pg_kde.synopsis.query.smooth_1d`); where the KDE's shape fits better than the profile after all, the
weight weighs its disagreement, as on any lattice column. The rows' spread about the profile is the model's
on average, but at 2 KB, some 40 cells, one data set's cuts happen to err more than it says and the next's
less; the scan's exact counts at the cuts measure which.

Not calibrated (both NULL, weighed :data:`pg_kde.synopsis.query.SHAPE_DOUBT`): a continuous column (its rows
may sit on a cut, where a range's exact count would need its rows there apart), a synopsis with no cells
(every value exact), and a time column whose build tries a periodic profile over more cells (its scan counts no
cuts).
"""

from __future__ import annotations

import dataclasses
from statistics import NormalDist
from typing import NamedTuple, Optional, Tuple

import numpy as np

from . import query
from .cells import DOUBT_GROUPS
from .packing import lattice_value

#: Calibration values of each kind (:func:`probes`).
PROBES = 1024
#: The same where the build tries a periodic profile (0.25.0): one weight, not a group's, to fit, and each of its
#: cut pieces costs the profile's bins (a refresh of a time column of 10⁷ rows took 2.7 s with PROBES, against a
#: target of 2.05 s that run).
PROFILE_PROBES = 256
#: A profiled synopsis of at most this many cells is calibrated (its scan counts the cuts); one of more keeps
#: weight 1 (NULL): its workloads' errors average over many cut cells, whose rows spread about the profile as
#: the model says (8 and 64 KB, 260 and 2,300 cells, at weight 1: 93.2–96.6% in every data set of 10⁶ and 10⁷
#: rows), and a calibration between a few hundred cuts only adds its own noise (weights 0.95–1.1, data sets
#: out at 92.7% and 97.2%); with some 40 cells (2 KB) a data set's few cut cells happen to err more or less than
#: the model says (92.6–96.9% at weight 1 on 10⁷ rows), which the calibration measures (docs/benchmarks.md,
#: "0.25.0").
PROFILE_CELLS_MOST = 128
#: The least weight of a profiled synopsis' cells' own spread: one weight fitted on the cuts about a few hundred
#: values of some 40 cells does not carry to every kind of range far below 1 (a red team: hourly timestamps at
#: 2 KB took 0.45, and ranges inside one cell were covered 83–86% where weight 1 covered 99.5%); the time
#: column's builds took 0.95–1.15.
PROFILE_WEIGHT_LEAST = 0.75
#: The widest of a frequency table's cells, in slots, whose every lattice value is a calibration value
#: (:func:`among_probes`).
SLOTS_MOST = 64
#: Ranges between pairs of calibration values that the weight is calibrated on (half of them of each kind).
RANGES = 12000
#: Of the ranges inside one cell, at most this many (evenly spaced among them, each counting for its share of
#: them all): each is answered range by range (:func:`range_terms`), at up to 0.4 ms where heavy values' slots
#: lie inside the cell.
ONE_CELL_MOST = 1000
#: The weights tried, 0 to 3.
WEIGHTS = tuple(round(0.05 * k, 2) for k in range(61))
#: Groups of neighbouring cells, each with a weight of its own (:func:`group_weights`): cell c of m is in group
#: c · GROUPS div m (fewer groups where there are fewer cells); their bytes: cells.DOUBT_BYTES.
GROUPS = DOUBT_GROUPS
#: Rounds of :func:`group_weights`' search, each group's weight chosen in turn with the others held.
ROUNDS = 3
#: The ranges' pairs are drawn with this seed (plus the kind's number): the same values give the same ranges.
SEED = 20261128
NOMINAL = 0.95
#: The normal quantile of a 95% interval.
Z = -NormalDist().inv_cdf((1 - NOMINAL) / 2)


def probes(sample: np.ndarray, span: Tuple[float, float], step: float,
           count: int = PROBES) -> Tuple[np.ndarray, np.ndarray]:
    """The calibration's bounds on a lattice (``step`` > 0), as lattice indices k (value k·step): (ranked, even),
    ``count`` (:data:`PROBES`) of the ``sample``'s values at evenly spaced ranks (repeats kept: bounds drawn from
    the data fall on a common value often), and ``count`` values evenly spaced over ``span``, the column's
    (lo, hi) (bounds uniform over its domain). Empty arrays elsewhere."""
    if not step > 0 or not len(sample):
        return np.empty(0), np.empty(0)
    ordered = np.sort(np.asarray(sample, dtype=np.float64))
    ranked = np.round(ordered[np.linspace(0, len(ordered) - 1, count).round().astype(np.int64)] / step)
    even = np.unique(np.round(np.linspace(span[0], span[1], count) / step))
    return ranked, even


def among_probes(sample: np.ndarray, rare: np.ndarray, step: float, points: np.ndarray) -> np.ndarray:
    """The calibration's bounds among a frequency table's cells, as lattice indices, from the least to the
    greatest of ``rare`` (the values the sample saw once, where the cells are placed: the values it missed are
    as rare): every value the ``sample`` holds there (the table's), and every lattice value of the cells
    (``points``, the plan's grid) there of at most :data:`SLOTS_MOST` slots, the narrow cells between the
    table's values, whose rows lie on the values it missed. At most 4 :data:`PROBES`, from the least up. The
    table holds every sampled value; its cells hold a small share of the rows, where few of the ranked values
    fall, but bounds drawn from the data among them cut the cells. Empty where there is none, and off a
    lattice."""
    rare = np.asarray(rare, dtype=np.float64)
    if not step > 0 or not len(sample) or not len(rare):
        return np.empty(0)
    k0, k1 = np.round(rare.min() / step), np.round(rare.max() / step)
    ks = np.round(np.asarray(sample, dtype=np.float64) / step)
    found = [np.unique(ks[(ks >= k0) & (ks <= k1)])]
    for a, b in zip(np.ceil(points[:-1] / step), np.floor(points[1:] / step)):
        a, b = max(a, k0), min(b, k1)
        if a <= b and b - a + 1 <= SLOTS_MOST:
            found.append(np.arange(a, b + 1))
    return np.unique(np.concatenate(found))[:4 * PROBES]


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


@dataclasses.dataclass(frozen=True)
class Counts:
    """What a build's scan knows exactly of the rows below a half-step x (no row sits on one): at each of its
    cuts (``cuts``, sorted; ``below``, :func:`rows_below`), and anywhere beyond its tails (``low``, ``high``:
    the scan's ``tail`` smallest and largest cell values, repeats kept; all
    of them where there are fewer, ``full`` False): above the smallest of ``high`` every cell value is one of
    them, below the largest of ``low`` likewise. The candidate heavy values' rows are counted apart (``candidates``
    sorted, ``candidate_rows``)."""
    cuts: np.ndarray
    below: np.ndarray
    low: np.ndarray
    high: np.ndarray
    full: bool
    candidates: np.ndarray
    candidate_rows: np.ndarray
    cell_rows: float

    @property
    def rows(self) -> float:
        """Every non-NULL row: the cells' and the candidates'."""
        return self.cell_rows + float(np.sum(self.candidate_rows))

    def at(self, x) -> np.ndarray:
        """The rows below each half-step of ``x``; NaN where the scan does not know them."""
        x = np.asarray(x, dtype=np.float64)
        out = np.full(x.shape, np.nan)
        if len(self.cuts):
            i = np.clip(np.searchsorted(self.cuts, x), 0, len(self.cuts) - 1)
            cut = self.cuts[i] == x
            out[cut] = self.below[i[cut]]
        heavy = np.concatenate([[0.0], np.cumsum(self.candidate_rows)])[np.searchsorted(self.candidates, x)]
        high = x > self.high[0] if self.full else np.ones(x.shape, dtype=bool)
        low = x < self.low[-1] if self.full else np.zeros(x.shape, dtype=bool)
        if len(self.high):
            out[high] = (self.cell_rows - (len(self.high) - np.searchsorted(self.high, x[high], side="right"))
                         + heavy[high])
        out[low & ~high] = np.searchsorted(self.low, x[low & ~high]) + heavy[low & ~high]
        return out


def counts_of(scan, cuts: np.ndarray, fine: np.ndarray, fine_below: np.ndarray, candidates: np.ndarray) -> Counts:
    """The :class:`Counts` of a build's ``scan`` over the grid ``fine`` (before :func:`fold_scan`'s fold, whose
    rows below its boundaries are ``fine_below``) with the calibration's ``cuts`` among its boundaries."""
    order = np.argsort(np.asarray(candidates, dtype=np.float64), kind="stable")
    cuts = np.asarray(cuts, dtype=np.float64)
    return Counts(cuts, rows_below(cuts, fine, fine_below, candidates, scan.candidate_rows),
                  np.asarray(scan.low, dtype=np.float64), np.asarray(scan.high, dtype=np.float64),
                  len(scan.high) >= scan.tail, np.asarray(candidates, dtype=np.float64)[order],
                  np.asarray(scan.candidate_rows, dtype=np.float64)[order], float(np.sum(scan.cell_rows)))


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


def uniform_ranges(known: np.ndarray, counts: Counts, cells: Tuple[float, float], span: Tuple[float, float],
                   step: float, spacing: float, ranges: int = RANGES, seed: int = SEED) -> tuple:
    """(lo, hi, exact): ranges whose bounds are uniform over the column's range ``span`` (its min and max, as
    the scan found them), of those that cut a cell: where the cells span ``cells`` (their first and last
    boundaries), a range whose bounds both lie beyond them is exact, and one of the others lies with both bounds
    among the cells with the chance that uniform bounds give, L / (2 − L) (L: the share of the column's range
    that the cells span), or else with one, the other beyond the cells on either side in proportion to the
    column's range there: a range [x, max] or [min, x]. Each bound among the cells is drawn uniformly over
    them (``seed``) and moves to the nearest lattice value the build knows the rows below of: itself where the
    scan's tails know them (:meth:`Counts.at`), else the nearest of ``known`` (lattice indices the scan has cuts
    about) within ``spacing`` steps; a draw with none is left out."""
    lo_all, hi_all = span
    first, last = max(cells[0], lo_all), min(cells[1], hi_all)
    if not (last > first and hi_all > lo_all and step > 0):
        return (np.empty(0),) * 3
    share = min(1.0, (last - first) / (hi_all - lo_all))
    before, after = max(0.0, first - lo_all), max(0.0, hi_all - last)
    rng = np.random.default_rng(seed)
    x = rng.uniform(first / step, last / step, (ranges, 2))
    both = rng.random(ranges) < share / (2 - share)
    up = rng.random(ranges) * (before + after) < after if before + after > 0 else np.ones(ranges, dtype=bool)
    k = np.round(x)
    below, above = counts.at((k - 0.5) * step), counts.at((k + 0.5) * step)
    direct = ~np.isnan(below) & ~np.isnan(above)
    known = np.unique(np.asarray(known, dtype=np.float64))
    if len(known):
        if len(known) == 1:
            near = np.full(x.shape, known[0])
        else:
            j = np.clip(np.searchsorted(known, x), 1, len(known) - 1)
            near = np.where(np.abs(known[j - 1] - x) <= np.abs(known[j] - x), known[j - 1], known[j])
        usable = np.abs(near - x) <= spacing
        k = np.where(direct, k, near)
        below, above = counts.at((k - 0.5) * step), counts.at((k + 0.5) * step)
        direct |= usable & ~np.isnan(below) & ~np.isnan(above)
    k_lo, k_hi = np.minimum(k[:, 0], k[:, 1]), np.maximum(k[:, 0], k[:, 1])
    pick = np.argmin(k, axis=1)
    rows = np.arange(ranges)
    pair = both & direct.all(axis=1) & (k_lo < k_hi)
    one = ~both & direct[:, 0]
    lo = np.where(pair, lattice_value(k_lo, step), np.where(up, lattice_value(k[:, 0], step), lo_all))
    hi = np.where(pair, lattice_value(k_hi, step), np.where(up, hi_all, lattice_value(k[:, 0], step)))
    exact = np.where(pair, above[rows, 1 - pick] - below[rows, pick],
                     np.where(up, counts.rows - below[:, 0], above[:, 0]))
    keep = pair | one
    return lo[keep], hi[keep], exact[keep]


def among_ranges(among: np.ndarray, counts: Counts, span: Tuple[float, float], step: float) -> tuple:
    """(lo, hi, exact, weight): for each bound among the cells (``among``, lattice indices: :func:`among_probes`)
    the ranges [min, k] and [k, max] (``span``: the column's min and max), each weighed by the rows on k (bounds
    drawn from the data fall on a value as often as rows hold it; scaled to a mean of 1): bounds drawn from the
    data that fall among a frequency table's cells mostly have the other in its table, below them or at the
    column's end (a range of a share of the rows from a value among them reaches past the last), where it cuts
    nothing. Those whose rows below the build does not know, or with no row on k, are left out."""
    k = np.asarray(among, dtype=np.float64)
    if not len(k):
        return (np.empty(0),) * 4
    below, above = counts.at((k - 0.5) * step), counts.at((k + 0.5) * step)
    known = ~np.isnan(below) & ~np.isnan(above) & (above > below)
    k, below, above = k[known], below[known], above[known]
    values = lattice_value(k, step)
    lo = np.concatenate([np.full(len(k), span[0]), values])
    hi = np.concatenate([values, np.full(len(k), span[1])])
    exact = np.concatenate([above, counts.rows - below])
    weight = np.tile(above - below, 2)
    keep = lo < hi
    weight = weight[keep] * (keep.sum() / weight[keep].sum()) if keep.any() else weight[keep]
    return lo[keep], hi[keep], exact[keep], weight


def range_terms(payload: dict, a: float, b: float) -> tuple:
    """(estimate, spread, doubt, inexact) of [a, b]'s count, one range at a time, as
    :func:`pg_kde.synopsis.query.range_1d` answers it: its estimate, its variance with the shape's doubt
    weighed 0 (the rows' own spread; a profiled cell's not counted), the doubt's variance at weight 1 (the
    disagreement's square, plus the profiled cells' own spread), and whether its hard bounds leave it open.
    The reference :func:`calibration_terms` is tested against, and what it falls back on."""
    estimate, spread, apart, profiled, inexact = _whole(payload, a, b)
    return estimate, spread, apart * apart + profiled, inexact


def _whole(payload: dict, a: float, b: float) -> tuple:
    """(estimate, spread, disagreement, profiled, inexact) of [a, b]'s count (:func:`range_terms`)."""
    r = query.range_1d(dict(payload, doubt_weight=0.0, doubt_weights=None), a, b, 0)
    return r.estimate, r.variance, r.disagreement, r.profiled, r.low != r.high


def _piece(payload: dict, a: float, b: float, heavy) -> tuple:
    """(estimate, spread, disagreement, low, high, profiled) of the cells' part of the snapped [a, b]: the piece
    of one cut cell, where a or b is one of its ends."""
    r = query.smooth_1d(payload, a, b, 0, heavy, weight=0.0)
    return r.estimate, r.variance, r.disagreement, r.low, r.high, r.profiled


class Terms(NamedTuple):
    """:func:`calibration_terms`' answer for each range: its estimate, its spread (the variance with the doubt
    weighed 0), the disagreements of its first and last cut cells (0 where it has none: a range inside one
    cell has its one), those cells (−1: none), whether its hard bounds leave it open, and the own spreads of
    its first and last cut cells where they follow a periodic profile (0.25.0; None: none does)."""
    estimate: np.ndarray
    spread: np.ndarray
    first: np.ndarray
    last: np.ndarray
    first_cell: np.ndarray
    last_cell: np.ndarray
    inexact: np.ndarray
    first_own: Optional[np.ndarray] = None
    last_own: Optional[np.ndarray] = None

    def variance(self, w_first, w_last, rows=slice(None)) -> np.ndarray:
        """The variance of the ranges ``rows`` with their first and last cut cells weighed ``w_first`` and
        ``w_last``: the spread, the weighed disagreements added, squared, and the profiled cells' own spreads
        weighed squared (pg_kde.synopsis.query.smooth_1d)."""
        out = self.spread[rows] + (w_first * self.first[rows] + w_last * self.last[rows]) ** 2
        if self.first_own is not None:
            out = out + w_first * w_first * self.first_own[rows] + w_last * w_last * self.last_own[rows]
        return out

    @property
    def doubt(self) -> np.ndarray:
        """The doubt's variance at weight 1 in every cell: the disagreements added, squared, and the profiled
        cells' own spreads."""
        apart = self.first + self.last
        return apart * apart if self.first_own is None else apart * apart + (self.first_own + self.last_own)


def calibration_terms(payload: dict, lo: np.ndarray, hi: np.ndarray) -> Terms:
    """:func:`range_terms` of the ranges [lo_i, hi_i] (lo_i < hi_i), as arrays, from cut pieces, with each cut
    cell's disagreement apart (:class:`Terms`): a range over two or more cells of a lattice is its heavy values'
    exact rows, the whole cells between, the piece of its first cell from its snapped lo and that of its last
    cell up to its snapped hi (each cut cell's estimate, spread and hard bounds its own, its disagreement with the
    other shape added before it is squared: pg_kde.synopsis.query.smooth_1d). Each bound's piece is taken
    once, so thousands of ranges between a few thousand cuts cost a few thousand pieces, not a range each.
    Ranges inside one cell, and every range of a column with no lattice, take :func:`range_terms`."""
    n = len(lo)
    est, spread, first_d, last_d = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)
    first_own, last_own = np.zeros(n), np.zeros(n)
    first_c, last_c = np.full(n, -1), np.full(n, -1)
    inexact = np.zeros(n, dtype=bool)
    grid, step = payload["grid"], payload["step"]
    m = len(grid)
    values, cum, _ = query.heavy_values(payload)
    heavy = values if payload.get("heavy_whole") else None
    lower, upper = {}, {}  # a bound -> its cut cell's piece (:func:`_piece`), as lo and as hi
    for i, (a, b) in enumerate(zip(lo.tolist(), hi.tolist())):
        snapped = query.snap(a, b, step) if step > 0 and m >= 2 and payload["kde_rows"] > 0 else None
        if snapped is None:
            est[i], spread[i], first_d[i], first_own[i], inexact[i] = _whole(payload, a, b)
            continue
        exact = query.heavy_between(values, cum, a, b)[0]
        A, B = max(snapped[0], grid[0]), min(snapped[1], grid[-1])
        if not A < B:  # (no cell in it: its heavy values' rows, exact)
            est[i] = exact + 0.0
            continue
        ka, kb = query.cell_of(grid, A), query.cell_of(grid, B)
        if ka == kb:
            est[i], spread[i], first_d[i], first_own[i], inexact[i] = _whole(payload, a, b)
            first_c[i] = ka
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
        first_d[i], last_d[i] = first[2], last[2]
        first_own[i], last_own[i] = first[5], last[5]
        first_c[i], last_c[i] = ka, kb
        inexact[i] = exact + (0.0 + whole + first[3] + last[3]) != exact + (0.0 + whole + first[4] + last[4])
    profiled = payload.get("period", 0.0) > 0
    return Terms(est, spread, first_d, last_d, first_c, last_c, inexact, *((first_own, last_own) if profiled else ()))


def _nearest(misses: np.ndarray, prefer: float, tried=WEIGHTS) -> float:
    """The weight of ``tried`` (:data:`WEIGHTS`) whose coverage misses 95% least (``misses``, one a weight); of
    those as near as any, the one nearest ``prefer``."""
    return min((w for w, m in zip(tried, misses) if m <= misses.min() + 1e-12), key=lambda w: abs(w - prefer))


def weight_for(errors: np.ndarray, spread: np.ndarray, doubt: np.ndarray,
               counts: Optional[np.ndarray] = None, least: float = 0.0) -> Optional[float]:
    """The weight of :data:`WEIGHTS` (those from ``least`` up) whose 95% intervals, z·sqrt(spread +
    weight²·doubt) about each estimate, hold nearest 95% of the ``errors`` (each counting ``counts`` ranges: 1
    by default); of the weights as near as any, the one nearest :data:`pg_kde.synopsis.query.SHAPE_DOUBT`.
    None where no range has doubt (every weight as near)."""
    if not len(errors) or not np.any(doubt > 0):
        return None
    counts = np.ones(len(errors)) if counts is None else np.asarray(counts, dtype=np.float64)
    tried = tuple(w for w in WEIGHTS if w >= least)
    misses = np.array([abs(np.dot(counts, np.abs(errors) <= Z * np.sqrt(spread + w * w * doubt) + 1e-9)
                           / counts.sum() - NOMINAL) for w in tried])
    return _nearest(misses, query.SHAPE_DOUBT, tried)


def group_weights(terms: Terms, errors: np.ndarray, counts: np.ndarray, cells: int, start: float,
                  most: Optional[int] = None) -> tuple:
    """A weight for each of G groups of neighbouring cells (cell c of ``cells`` in group c · G div ``cells``,
    G = min(``most``, cells), ``most`` :data:`GROUPS` by default): each group g in turn takes the weight of
    :data:`WEIGHTS` under which every group's coverage misses 95% least together (0.23.0): the sum, over the
    groups whose ranges (those that cut one of their cells, each counting ``counts`` ranges) share one with g's,
    of their covered ranges' distance from 95% of them, the other groups' weights held; :data:`ROUNDS` rounds
    from ``start`` (the synopsis' one weight, :func:`weight_for`). A range that cuts two groups' cells counts
    in both, so a group moves from ``start`` only as far as the groups together gain (0.21.0-0.22.0 weighed each
    group's ranges alone). Of weights as near as any, the one nearest ``start``; a group no range cuts keeps it.
    A range's doubt is
    then its first cut cell's weight times its disagreement plus its last's (as
    :func:`pg_kde.synopsis.query.smooth_1d` adds them). ``terms``, ``errors`` and ``counts``: the ranges left
    open by their hard bounds."""
    groups = min(GROUPS if most is None else most, cells)
    first = np.where(terms.first_cell >= 0, terms.first_cell * groups // cells, -1)
    last = np.where(terms.last_cell >= 0, terms.last_cell * groups // cells, -1)
    weights = np.full(groups, start)
    tried = np.asarray(WEIGHTS, dtype=np.float64)[:, None]
    # each group's ranges (those that cut one of its cells), as a 0/1 matrix ranges x groups, counted
    member = np.zeros((len(errors), groups))
    for ends in (first, last):
        member[ends >= 0, ends[ends >= 0]] = 1.0
    wanted = NOMINAL * (counts @ member)  # each group's ranges that 95% intervals would cover

    def covered(w_first, w_last, rows):
        sd = np.sqrt(terms.variance(w_first, w_last, rows))
        return (np.abs(errors[rows]) <= Z * sd + 1e-9) * counts[rows]

    def weight_of(ends):
        return np.where(ends >= 0, weights[np.maximum(ends, 0)], 0.0)

    for _ in range(ROUNDS):
        for g in range(groups):
            cut = (first == g) | (last == g)
            if not cut.any():
                continue
            f, l_ = first[cut], last[cut]
            w_f = np.where(f == g, tried, weight_of(f))
            w_l = np.where(l_ == g, tried, weight_of(l_))
            rest = covered(weight_of(first[~cut]), weight_of(last[~cut]), ~cut) @ member[~cut]
            # every group's covered ranges at each weight tried: its other ranges' as held, and these
            misses = np.abs(rest + covered(w_f, w_l, cut) @ member[cut] - wanted)
            touched = member[cut].any(axis=0)
            weights[g] = _nearest(misses[:, touched].sum(axis=1) / counts[cut].sum(), start)
    return tuple(float(w) for w in weights)


class Calibrated(NamedTuple):
    """The build's calibration: the synopsis' one weight (``doubt_weight``) and its groups' (``doubt_weights``,
    :func:`group_weights`, as float4 stores them); None where it is not calibrated."""
    weight: Optional[float]
    weights: Optional[Tuple[float, ...]]


def calibrated_weights(payload: dict, lo: np.ndarray, hi: np.ndarray, exact: np.ndarray,
                       counts: Optional[np.ndarray] = None, groups: Optional[int] = None) -> Calibrated:
    """The weights of the synopsis ``payload`` (:func:`weight_for`, then :func:`group_weights`) on the ranges
    [lo_i, hi_i] whose exact counts are ``exact`` (each counting ``counts`` ranges): of those its hard bounds
    leave open. None where none is, or none has doubt. A synopsis that follows a periodic profile takes none
    below :data:`PROFILE_WEIGHT_LEAST` (at 0 its cut cells' variance would be none: zero width only where the
    answer is exact)."""
    if not len(lo):
        return Calibrated(None, None)
    counts = np.ones(len(lo)) if counts is None else np.asarray(counts, dtype=np.float64)
    t = calibration_terms(payload, lo, hi)
    open_ = t.inexact
    errors, counts = (t.estimate - exact)[open_], counts[open_]
    least = PROFILE_WEIGHT_LEAST if payload.get("period", 0.0) > 0 else 0.0
    weight = weight_for(errors, t.spread[open_], t.doubt[open_], counts, least)
    if weight is None:
        return Calibrated(None, None)
    if groups is not None and groups < 1:
        return Calibrated(weight, None)
    kept = Terms(*(None if a is None else a[open_] for a in t))
    weights = group_weights(kept, errors, counts, len(payload["grid"]) - 1, weight, groups)
    return Calibrated(weight, tuple(float(np.float32(w)) for w in weights))


def calibrated_weight(payload: dict, lo: np.ndarray, hi: np.ndarray, exact: np.ndarray,
                      counts: Optional[np.ndarray] = None) -> Optional[float]:
    """The synopsis' one weight (:func:`calibrated_weights`)."""
    return calibrated_weights(payload, lo, hi, exact, counts).weight


def calibrate(payload: dict, ranked: np.ndarray, even: np.ndarray, counts: Counts,
              span: Tuple[float, float], among: np.ndarray = np.empty(0),
              groups: Optional[int] = None) -> Calibrated:
    """The build's weights of a lattice synopsis ``payload`` (:func:`calibrated_weights`) on :data:`RANGES`
    ranges, half of each kind: between the sample's values at evenly spaced ranks (``ranked``, lattice indices,
    :func:`calibration_ranges`), as bounds drawn from the data fall, and uniform over the column's range
    ``span`` (:func:`uniform_ranges`, near the values ``even`` and ``ranked``), as bounds uniform over its
    domain fall; their exact counts from what the scan knows (``counts``). Of the ranges inside one cell at most
    :data:`ONE_CELL_MOST` (each then counts for its share). Not calibrated (None) where the module's docstring
    says."""
    step, grid = payload["step"], np.asarray(payload["grid"], dtype=np.float64)
    if not step > 0 or payload["kde_rows"] <= 0 or len(grid) < 2 or not len(ranked):
        return Calibrated(None, None)
    ranked_cuts = cuts_of(ranked, step)
    data = calibration_ranges(ranked, ranked_cuts, counts.at(ranked_cuts), step, RANGES // 2, SEED)[:3]
    even = np.asarray(even, dtype=np.float64)
    spacing = max(1.0, (even.max() - even.min()) / (len(even) - 1)) if len(even) > 1 else 1.0
    uniform = uniform_ranges(np.concatenate([np.asarray(ranked, dtype=np.float64), even]), counts,
                             (grid[0], grid[-1]), span, step, spacing, RANGES // 2, SEED + 1)
    near = among_ranges(among, counts, span, step)
    lo, hi, exact = (np.concatenate(a) for a in zip(data, uniform, near[:3]))
    A, B = (np.round(lo / step) - 0.5) * step, (np.round(hi / step) + 0.5) * step

    def cell(x):  # query.cell_of of the bounds within the grid
        return np.clip(np.searchsorted(grid, np.clip(x, grid[0], grid[-1]), side="right") - 1, 0, len(grid) - 2)

    one = np.flatnonzero(cell(A) == cell(B))
    weights = np.concatenate([np.ones(len(lo) - len(near[3])), near[3]])
    if len(one) > ONE_CELL_MOST:
        kept = one[np.unique(np.linspace(0, len(one) - 1, ONE_CELL_MOST).round().astype(np.int64))]
        share = weights[kept] * (len(one) / len(kept))
        weights[one] = 0.0
        weights[kept] = share
        chosen = weights > 0
        lo, hi, exact, weights = lo[chosen], hi[chosen], exact[chosen], weights[chosen]
    return calibrated_weights(payload, lo, hi, exact, weights, groups)
