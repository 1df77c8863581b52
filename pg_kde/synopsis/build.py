"""Building synopses: :func:`build_1d` and :func:`build_2d` read a table through a
:class:`~pg_kde.synopsis.reader.TableReader` and return what the catalog stores
(:class:`~pg_kde.synopsis.catalog.Built1D`, :class:`~pg_kde.synopsis.catalog.Built2D`). No I/O of their
own: the reader reads, the caller's ``select_bandwidth`` chooses bandwidths, ``interrupt`` is called
between slices of the smoothing. Errors the user can fix raise :class:`~pg_kde._errors.UserError`.
"""

from __future__ import annotations

import json
import math
import time
import warnings
from dataclasses import dataclass, field, replace
from typing import Callable, Optional, Tuple

import numpy as np

from .. import bandwidth
from .._errors import BackendUnavailableError, DeviceOutOfMemoryError, NoValuesError, UserError
from .._slices import Interrupt
from .calibration import (PROBES, PROFILE_CELLS_MOST, PROFILE_PROBES, among_probes, calibrate, counts_of, cuts_of,
                          fold_scan, probes)
from .catalog import Built1D, Built2D, Requested
from .packing import PACK_LIMIT, exact_dot, lattice_indices, pack_atoms, pack_pairs, packed_size
from .cells import (
    ATOM_BYTES,
    BOUNDARY_BYTES,
    KDE_POINTS,
    ROW_BYTES_2D,
    ROW_BYTES_1D,
    DOUBT_BYTES,
    DOUBT_GROUPS,
    DOUBT_HEADER_BYTES,
    DOUBT_WEIGHT_BYTES,
    STEP_RANGE,
    binned_kde_at,
    boundary_above,
    boundary_below,
    bulk_span,
    cells_for_budget,
    cut_far_gaps,
    cut_outer_cells,
    depth_grid,
    grid_size_2d,
    lattice_grid,
    stored_bytes_1d,
    lattice_step,
    lattice_sums,
    quanta_of,
    make_profile,
    period_counts,
    on_lattice,
    order_statistics,
    periodic,
    profile_bytes,
    repeatable_bandwidth,
    shape_fit,
    shape_variance,
    stored_density,
    trim_ends,
)
from .maths import (
    ATOM_SHARE,
    Atoms,
    FLOAT8_MAX,
    atom_candidates,
    bilinear_weights,
    cap_bandwidth_matrix,
    cell_masses,
    cell_prefix,
    prefix_slack,
    grid_positions,
    quantile_grid,
    scale_bandwidth,
    smooth_masses_2d,
    summed_area,
)
from .reader import TAIL_MOST, TAIL_VALUES, TableReader, TableStats, fine_quantum, sample_share, thin

#: Beyond 2^53 every float8 is a whole number: such columns are not treated as integer-valued.
INTEGRAL_LIMIT = 2.0**53
#: A 2-D synopsis' whole-number axis (grid points on half-integers) stops here (0.28.0): from 2^52 no half-integer
#: is a float8, and from about 2^51 a box's bound within two ulps of a grid point reads as on it (_kde_grid_pos),
#: one whole number away. A red team found point counts of 0, 0, 0 and 906 at 2^52 where 147, 159, 141 and 170
#: rows held them; such an axis is now continuous (a point box on a value without a cell of its own reads as on
#: any continuous axis, docs/math.md §8).
HALF_INTEGER_LIMIT = 2.0**50
#: Largest magnitude scanned: n * 2^960 stays finite for any row count (n < 2^63).
_SCAN_LIMIT = 2.0**960

#: The plug-in scale synopses use: min(s, IQR/1.349), robust to the outliers real columns hold (the cells
#: are exact; the bandwidth only shapes rows inside a cell). kde_bandwidth() keeps the library's default,
#: the paper's sample standard deviation. Both are said in the refresh's summary and docs/math.md §2.
SYNOPSIS_SCALE = "minim"
#: Pairs a 2-D synopsis' bandwidth matrix is chosen on, at most (of its sample, in grid-index coordinates).
KDE_POINTS_2D = 2048

#: ``select_bandwidth(sample, method, backend, required=True, scale=None)``: a bandwidth result
#: (:class:`pg_kde.bandwidth.BandwidthResult`), or None when ``required`` is false and the selector rejects
#: the data; ``scale`` goes to plug-in selectors.
SelectBandwidth = Callable[..., Optional["bandwidth.BandwidthResult"]]


def select_bandwidth(sample: np.ndarray, method: str, backend: str, required: bool = True,
                     scale: Optional[str] = None, interrupt=None):
    """The default ``select_bandwidth`` (no PostgreSQL): the selector's warnings stay Python warnings; a
    rejected sample or a backend that cannot run raises UserError, or with ``required=False`` (a rejected
    sample) warns and returns None. ``interrupt`` goes to the selector."""
    options = {"scale": scale} if scale is not None and bandwidth.SELECTORS[method].scaled else {}
    try:
        return bandwidth.select(sample, method=method, backend=backend, dtype="float32", interrupt=interrupt,
                                **options)
    except (BackendUnavailableError, DeviceOutOfMemoryError) as exc:
        raise UserError(f"pg_kde: {exc}") from exc
    except ValueError as exc:
        if required:
            raise UserError(f"pg_kde: {exc}") from exc
        warnings.warn(f"pg_kde: no bandwidth ({exc}); the synopsis keeps its exact cells unsmoothed", stacklevel=2)
        return None


def counts_method(method: str, d: int) -> str:
    """The selector a synopsis of d columns runs for ``method`` (the registry's choice for range counts)."""
    try:
        return bandwidth.resolve(method, d, "counts").name
    except ValueError as exc:
        raise UserError(f"pg_kde: {exc}") from exc


def _scan_scale(lo: float, hi: float) -> float:
    """1, or the power of two that brings values up to max(|lo|, |hi|) under 2^960 (exact scaling)."""
    top = max(abs(lo), abs(hi))
    return 1.0 if top < _SCAN_LIMIT else math.ldexp(1.0, 960 - math.frexp(top)[1])


def _selection_frame(values: np.ndarray) -> Tuple[np.ndarray, float]:
    """The values the selector sees, and the unit u of their scale: the values themselves (u = 1) where
    their spread and magnitude are ordinary; otherwise (x − median) / u, u a power of two near their
    interquartile range, with values beyond 2^400 units (farther than any kernel reaches) held there.
    Bandwidths are translation-invariant and scale-equivariant, so h = h(frame) · u: a column spread over
    1e-300, values near 1e308 or a far outlier (1e300 among cents) give the bandwidth of the bulk, which
    float8 can hold even where h² or the outlier's square cannot (docs/math.md §7)."""
    q25, q75 = (float(q) for q in np.percentile(values, [25.0, 75.0]))
    spread = q75 - q25 if q75 > q25 else float(values.max()) / 2 - float(values.min()) / 2
    top = float(np.max(np.abs(values)))
    if 2.0**-200 <= spread <= 2.0**200 and top <= 2.0**500:
        return values, 1.0
    unit = math.ldexp(1.0, math.frexp(spread)[1])
    with np.errstate(over="ignore"):
        framed = (values - float(np.median(values))) / unit
    return np.clip(framed, -(2.0**400), 2.0**400), unit


@dataclass(frozen=True)
class _Plan1D:
    """What the scan of a 1-D build counts, placed from the sample: the grid, the candidate heavy values
    (counted apart), the quantum of the sums, and the lattice's step (0: none) with its heavy values."""

    points: np.ndarray
    candidates: np.ndarray
    quantum: float
    step: float
    few: bool  # the candidates are every sampled value (the whole column may fit as a frequency table)
    atoms_room: int  # heavy values the budget keeps beside the cells
    most_cells: int  # cells the budget holds with no heavy value: a cell's share of rows is 1 / most_cells
    flagged: np.ndarray  # the values the sample showed as heavy (counted apart, given cells, or not in the budget)
    heavy_bytes: int  # the bytes the plan leaves the heavy values (a frequency table: its pack's estimate)
    #: the calibration's bounds, as lattice indices (:func:`.calibration.probes`): the sample's values at evenly
    #: spaced ranks, and values evenly spaced over the column's range; the scan also counts the rows below the
    #: half-steps about them (:meth:`cuts`), folded back into ``points``' cells after it; empty: none
    probes: np.ndarray = field(default_factory=lambda: np.empty(0))
    even: np.ndarray = field(default_factory=lambda: np.empty(0))
    #: a frequency table's bounds among its cells (:func:`.calibration.among_probes`); empty: none
    among: np.ndarray = field(default_factory=lambda: np.empty(0))
    #: the cell values the scan keeps at each end (:func:`_scan_tail`)
    tail: int = TAIL_VALUES

    def cuts(self) -> list:
        """[(lattice indices, their cuts)] of each kind of calibration bound (none on a continuous column)."""
        return [(ks, cuts_of(ks, self.step)) for ks in (self.probes, self.even, self.among) if len(ks)]

    def every_cut(self) -> np.ndarray:
        """The cuts of both kinds (:meth:`cuts`), sorted, each once; empty on a continuous column."""
        kinds = self.cuts()
        return np.unique(np.concatenate([c for _, c in kinds])) if kinds else np.empty(0)

    def scanned_grid(self) -> np.ndarray:
        """The grid the scan counts over: ``points``, the calibration's cuts and a half-step a step beyond the
        outermost cut on each side (the outer cells hold every value beyond the grid: with those, each cut's
        rows below are the cells' below it). Folded back into ``points``' cells after the scan
        (:func:`.calibration.fold_scan`)."""
        cuts = self.every_cut()
        if not len(cuts):
            return self.points
        ends = np.array([cuts.min() - self.step, cuts.max() + self.step])
        return np.unique(np.concatenate([self.points, cuts, ends]))


@dataclass(frozen=True)
class Pinned1D:
    """The plan of a 1-D build's first scan, kept by a Citus table's synopsis (``kde_parts.plan``) so that
    the next refresh scans its shards with the same arguments and reuses the answers of those that did not
    change: the plan, the scale and quantum the scan ran at, whether the column was found continuous, the
    periodic profile tried, whether a frequency table is allowed, the row sample's share, and the non-NULL
    rows it was planned for (the build plans anew from its row sample where they differ by more than a
    quarter)."""

    plan: _Plan1D
    scale: float
    continuous: bool
    quantum: Optional[float]
    period: Optional[Tuple[float, int]]
    table: bool
    share: float
    rows: int
    shares: Tuple[float, ...] = ()  # each cell's share of the cells' rows when it was planned (its scan)

    def to_json(self) -> str:
        p = self.plan
        return json.dumps({
            "points": [float(v) for v in p.points], "candidates": [float(v) for v in p.candidates],
            "plan_quantum": float(p.quantum), "step": float(p.step), "few": bool(p.few),
            "atoms_room": int(p.atoms_room), "most_cells": int(p.most_cells),
            "flagged": [float(v) for v in p.flagged], "heavy_bytes": int(p.heavy_bytes),
            "probes": [float(v) for v in p.probes], "even": [float(v) for v in p.even],
            "among": [float(v) for v in p.among], "tail": int(p.tail),
            "scale": float(self.scale), "continuous": bool(self.continuous),
            "quantum": None if self.quantum is None else float(self.quantum),
            "period": None if self.period is None else [float(self.period[0]), int(self.period[1])],
            "table": bool(self.table), "share": float(self.share), "rows": int(self.rows),
            "shares": [float(v) for v in self.shares]})

    @staticmethod
    def from_json(text: str) -> Optional["Pinned1D"]:
        """The plan stored as :meth:`to_json` wrote it; None for anything else (a plan of another kind, or
        of another version)."""
        try:
            d = json.loads(text)
            array = lambda k: np.asarray(d[k], dtype=np.float64)  # noqa: E731
            plan = _Plan1D(array("points"), array("candidates"), float(d["plan_quantum"]), float(d["step"]),
                           bool(d["few"]), int(d["atoms_room"]), int(d["most_cells"]), array("flagged"),
                           int(d["heavy_bytes"]), array("probes"), array("even"),
                           array("among"), d["tail"] if type(d["tail"]) is int else -1)
            period = None if d["period"] is None else (float(d["period"][0]), int(d["period"][1]))
            pinned = Pinned1D(plan, float(d["scale"]), bool(d["continuous"]),
                              None if d["quantum"] is None else float(d["quantum"]), period, bool(d["table"]),
                              float(d["share"]), int(d["rows"]), tuple(float(v) for v in d["shares"]))
        except (TypeError, ValueError, KeyError, IndexError):
            return None
        arrays = (plan.points, plan.candidates, plan.flagged, plan.probes, plan.even, plan.among)
        if not all(a.ndim == 1 for a in arrays):  # (a number or a nested list where a list belongs: tampered)
            return None
        ok = (len(plan.points) >= 2 and np.all(np.isfinite(plan.points)) and np.all(np.diff(plan.points) > 0)
              and math.isfinite(plan.quantum) and plan.quantum > 0 and 0 < pinned.share and pinned.rows > 0
              and math.isfinite(pinned.scale) and pinned.scale > 0 and len(pinned.shares) == len(plan.points) - 1
              and TAIL_VALUES <= plan.tail <= TAIL_MOST
              and all(math.isfinite(v) and v >= 0 for v in pinned.shares)
              and all(np.all(np.isfinite(ks)) and np.all(np.abs(ks) < 2.0**52) and np.all(ks == np.round(ks))
                      for ks in (plan.probes, plan.even, plan.among))
              and (not (len(plan.probes) or len(plan.among)) or plan.step > 0))
        return pinned if ok else None


def _hinted_grid(hint: np.ndarray, source: np.ndarray, lo: float, hi: float, step: float, cells: int,
                 place) -> np.ndarray:
    """The grid of a part of a table whose other parts share ``hint`` (the whole table's grid): the hint's
    points inside the part's range, and the part's own grid (``place(values, lo, hi, cells)``) where the hint
    does not reach, its cells in proportion to the sampled values there; at most ``cells`` cells."""
    hint = np.asarray(hint, dtype=np.float64)
    if step > 0:  # between the part's lattice values, as its own boundaries are
        hint = np.unique((np.floor(hint / step) + 0.5) * step)
        lo, hi = (round(lo / step) - 0.5) * step, (round(hi / step) + 0.5) * step
    inner = hint[(hint > lo) & (hint < hi)]
    pieces = [np.array([lo]), inner, np.array([hi])]
    for seg, a, b in ((source[source < hint[0]], lo, min(hi, hint[0])), (source[source > hint[-1]], max(lo, hint[-1]), hi)):
        if len(seg) and b > a:
            pieces.append(place(seg, a, b, max(1, round(cells * len(seg) / max(len(source), 1)))))
    points = np.unique(np.concatenate(pieces))
    if len(points) - 1 > cells:  # more of the hint than the budget holds: evenly spaced among them
        points = points[np.unique(np.linspace(0, len(points) - 1, cells + 1).round().astype(np.int64))]
    return points


def _plan_1d(sample: np.ndarray, requested: Requested, budget: int, continuous: bool,
             quantum: Optional[float], grid_hint: Optional[np.ndarray] = None, span=None,
             rows: Optional[int] = None, table: bool = True, weighed: bool = True) -> _Plan1D:
    """Place the grid over ``span`` (the column's min and max; the sample's by default) and choose the
    candidates from the sample (docs/math.md §7); with ``grid_hint``, on that grid where it reaches
    (:func:`_hinted_grid`). ``rows``: about how many non-NULL rows the column has (None: unknown);
    ``table`` False: never an exact frequency table (a scan found one larger than its estimate); ``weighed``: the
    build calibrates a weight for each group of a lattice column's cells (no periodic profile tried: one weight
    alone), which take DOUBT_BYTES of ``budget`` beside the cells (not beside a frequency table's)."""
    lo, hi = span if span is not None else (float(sample.min()), float(sample.max()))
    step = 0.0 if continuous else lattice_step(sample)
    if not continuous and step == 0.0 and max(abs(lo), abs(hi)) < INTEGRAL_LIMIT and np.all(sample == np.trunc(sample)):
        step = 1.0  # whole numbers beyond what lattice_step tries (e.g. two values, 2^40 apart); the scan checks
    if step > 0 and max(abs(lo), abs(hi)) / step > STEP_RANGE:
        step = 0.0  # the column's range (not only the sample's) must stay within the lattice's reach
    distinct, counts = np.unique(sample, return_counts=True)
    # Every sampled value kept exactly, with room left for a cell or two of the values the sample missed,
    # when the sample saw nearly every row's value: the share of rows whose value it missed, by Good and
    # Turing's estimate (values seen once / sample size), below a cell's share.
    # On a lattice such a frequency table is stored packed (.packing), its counts estimated from the
    # sample's with room to spare (twice (count + 2) scaled to the table's ``rows``; unknown: 2^35 each).
    free = budget - ROW_BYTES_1D - 3 * BOUNDARY_BYTES
    indices = lattice_indices(distinct, step) if step > 0 else None
    most_rows = 2.0**35 if rows is None else 2.0 * max(int(rows), len(sample))
    if indices is not None and max(abs(indices[0]), abs(indices[-1])) * most_rows < PACK_LIMIT:
        grown = (counts + 2.0) * (most_rows / len(sample)) if rows is not None else np.full(len(counts), most_rows)
        table_bytes = packed_size(indices, np.minimum(grown, most_rows))
    else:
        table_bytes = ATOM_BYTES * len(distinct)
    most_cells = cells_for_budget(budget, 0)
    heavy = atom_candidates(sample, 1.0 / most_cells)
    # (a cell's share for that test is the one at the smallest budget that holds the table: a larger budget
    # keeps a table that a smaller one kept)
    gate = cells_for_budget(min(budget, table_bytes + ROW_BYTES_1D + 3 * BOUNDARY_BYTES), 0)
    few = table and table_bytes <= free and (counts == 1).sum() <= len(sample) / gate
    lattice_heavy = np.empty(0)
    if few:  # every sampled value kept exactly; the cells hold only the values the sample missed
        room = len(distinct)
    elif step > 0 and grid_hint is None:
        # On a lattice, heavy values (a cell's share of rows or more: spikes no shape follows) get cells of
        # their own, at most a quarter of the cells.
        kept = np.isin(distinct, heavy)
        lattice_heavy = Atoms.from_counts(distinct[kept], counts[kept]).largest(most_cells // 4).values
        room = 0
    else:
        # A continuous column's heavy values (ties) are kept exactly beside the cells, in a quarter of the
        # budget; so are a lattice's on a given grid (a partition's, built on its parent's cells): a spike the
        # grid gives no cell of its own (rows appended to the last month, all of one value) stays exact, and
        # heavy values add up exactly in the merge.
        room = min(len(heavy), max(0, (budget // 4) // ATOM_BYTES))
    candidates = distinct if few else (np.empty(0) if step > 0 and grid_hint is None else heavy)
    rest = sample[~np.isin(sample, candidates)]
    if few and not len(rest) and (counts == 1).sum() >= 2:
        # A frequency table's cells hold the values the sample missed: placed where values are rare, as the
        # values it saw once are (Good and Turing's view of the unseen), not over the table it keeps.
        rest = distinct[counts == 1]
    source = rest if len(rest) else sample
    heavy_bytes = table_bytes if few else ATOM_BYTES * room
    # (a lattice column's cells leave its calibrated doubt weights their bytes; a frequency table's few cells
    # get groups only in the bytes the table and they leave, 0.23.0)
    cells = requested.grid_size - 1 if requested.grid_size else cells_for_budget(
        budget if few else _weighed_budget(budget, step, weighed), heavy_bytes=heavy_bytes)
    if step > 0:
        def place(values, a, b, k):
            return lattice_grid(values, a, b, step, k, lattice_heavy)
    else:
        place = depth_grid
    if grid_hint is not None and len(grid_hint) >= 2:
        points = _hinted_grid(grid_hint, source, lo, hi, step, cells, place)
    else:
        points = place(source, lo, hi, cells)
    # (a continuous column's quantum from its bulk: far values' sums then overflow it, and the build completes
    # them from the scan's extreme values instead of summing every row in quanta of 1e300)
    quantum = quantum or (step if step > 0 else fine_quantum(*bulk_span(source, lo, hi)))
    # No boundary between 0 and float8's smallest normal number: scanned at a power-of-two scale (values near
    # the ends of float8), such a point would not map back to the column's units exactly, and rows would
    # change cells on the way.
    points = np.unique(np.where(np.abs(points) < np.finfo(np.float64).tiny, 0.0, points))
    if len(points) < 2:
        # One value where v + 1 (or its half-steps) rounds back to v (1e16, 2^53, 1e300 alone), or a partition of
        # one value off any lattice that no point of its parent's grid reaches (_hinted_grid: lo = hi): the scan
        # needs two boundaries, and the next float8 up (down at float8's largest) bounds the cell that holds it
        # (0.27.0; red teams: such a table or partition failed its refresh, "the grid needs at least 2 values").
        v = float(points[0]) if len(points) else float(lo)
        up = float(np.nextafter(v, np.inf))
        points = np.array([v, up]) if math.isfinite(up) else np.array([float(np.nextafter(v, -np.inf)), v])
    # The calibration's cuts, on a lattice (.calibration)
    ranked, even = probes(sample, (lo, hi), step, PROBES if weighed else PROFILE_PROBES)
    among = among_probes(sample, source, step, points) if few and weighed and len(rest) else np.empty(0)
    tail = _scan_tail(counts, len(sample), rows) if few and step > 0 else TAIL_VALUES
    return _Plan1D(points, np.asarray(candidates, dtype=np.float64), quantum, step, few, room, most_cells,
                   np.asarray(heavy, dtype=np.float64), heavy_bytes, ranked, even, among, tail)


def _every_cell_value(scan) -> Optional[np.ndarray]:
    """Every cell row's value (sorted, repeats kept) where the scan's two ends hold them all: its N cell rows
    are the low end's and the largest N − len(low) of the high end's, where the two hold N or more (ties
    included); else None."""
    low, high = np.asarray(scan.low, dtype=np.float64), np.asarray(scan.high, dtype=np.float64)
    n = int(round(float(np.sum(scan.cell_rows))))
    if n > len(low) + len(high) or len(low) > n or len(high) > n:
        return None
    return np.concatenate([low, high[len(low) + len(high) - n:]])


def _scan_tail(counts: np.ndarray, sampled: int, rows: Optional[int]) -> int:
    """The cell values a lattice frequency table's scan keeps at each end: enough for the two ends together to
    hold every row its cells are expected to count, so that all of them may join the table
    (:func:`_known_ends_to_table`). The cells hold the rows whose values the sample missed: by Good and
    Turing's estimate, the share of rows its values seen once stand for. Twice that many rows at each end
    (room for the estimate's noise), a power of two from :data:`TAIL_VALUES` to :data:`TAIL_MOST`;
    :data:`TAIL_VALUES` where the sample holds every row (0.31.0; before, always TAIL_VALUES: a Zipf-like
    quantity of 10⁶ rows kept 1,613 rows in cells at 8 KB where its whole frequency table takes 2.6 KB,
    docs/math.md §7)."""
    if rows is None or sampled >= rows:
        return TAIL_VALUES
    expected = 2.0 * float((counts == 1).sum()) / max(sampled, 1) * rows
    return int(min(TAIL_MOST, max(TAIL_VALUES, 1 << (max(int(math.ceil(expected)), 1) - 1).bit_length())))


def _table_bytes(plan: _Plan1D, scan) -> int:
    """The bytes of the heavy values a frequency table's scan found, as they would be stored: packed, or
    arrays where they do not pack."""
    found = scan.candidate_rows > 0
    values, counts = plan.candidates[found], scan.candidate_rows[found]
    pack = pack_atoms(values, np.cumsum(counts), plan.step) if plan.step > 0 and len(values) else None
    return len(pack) if pack is not None else ATOM_BYTES * len(values)


def _table_with(atoms: Atoms, points: np.ndarray, rows_in: np.ndarray, quanta: list, values: np.ndarray,
                counts: np.ndarray, step: float, quantum: float):
    """The heavy values with ``values`` (``counts`` rows each, taken from the cells) added, exactly, and the
    cells left, without the empty ones at the ends: (table, its pack, points, rows, quanta), or None where
    the table does not pack."""
    table = Atoms.from_counts(np.concatenate([atoms.values, values]), np.concatenate([atoms.counts, counts]))
    pack = pack_atoms(table.values, np.cumsum(table.counts), step)
    if pack is None:
        return None
    rows, sums = np.array(rows_in, dtype=np.float64), list(quanta)
    _fold(points, rows, sums, values, -counts, quantum)  # (out of their cells, exactly)
    full = np.flatnonzero(rows > 0)
    if not len(full):
        return table, pack, points[:0], rows[:0], []
    first, last = int(full[0]), int(full[-1])
    return table, pack, points[first:last + 2], rows[first:last + 1], sums[first:last + 1]


def _table_groups(cells: int) -> int:
    """The groups of a frequency table's cells whose doubt weights its calibration fits: one for four cells,
    at most DOUBT_GROUPS, where the bytes allow (.calibration)."""
    return min(DOUBT_GROUPS, max(cells, 0) // 4)


def _known_ends_to_table(atoms: Atoms, points: np.ndarray, rows_in: np.ndarray, quanta: list, scan, every: bool,
                         lo, hi, step: float, quantum: float, budget: int, known: Optional[np.ndarray]):
    """A frequency table's cells hold the rows whose values its sample missed, most of them in the tails (a
    Zipf-like quantity's largest values). The scan knows its smallest and largest cell values one by one
    (all of them when it kept every one): those join the table, exactly, and the cells left empty at the ends
    go, where the table, the remaining cells and their calibrated groups' weights fit the budget: ``known``,
    every cell value, where the scan's ends held them all (:func:`_every_cell_value`: always where ``every``,
    and where a larger tail, :func:`_scan_tail`, held them; the ends below are then its :data:`TAIL_VALUES`
    smallest and largest, as a scan of the default tail keeps them), else both
    ends, else the upper, else the lower with as many of the upper's largest as fit, else the lower, else as many of
    the upper's largest alone (0.26.0; before, the lower alone came before any of the upper's, the budget's
    rest unused, the upper's were taken by halves, and the groups' weights had the bytes left over).
    Returns (atoms, points, rows, quanta, lo, hi), the last two the remaining cell values' range."""
    low, high = np.asarray(scan.low, dtype=np.float64), np.asarray(scan.high, dtype=np.float64)

    def fitting(values, counts, new_lo, new_hi):
        """The table with ``values`` and what remains, where it fits the budget; else None."""
        if not len(values):
            return None
        made = _table_with(atoms, points, rows_in, quanta, values, counts, step, quantum)
        if made is None:
            return None
        table, pack, kept_points, rows, sums = made
        if not len(kept_points):
            new_lo, new_hi = None, None
        groups = _table_groups(len(kept_points) - 1)  # (room kept for the calibration's groups)
        if stored_bytes_1d(len(kept_points), pack=len(pack), weights=groups or None) > budget:
            return None
        return table, kept_points, rows, sums, new_lo, new_hi

    if known is not None:  # every cell value: all of them where they fit
        made = fitting(*np.unique(known, return_counts=True), None, None)
        if made is not None or every:
            return made or (atoms, points, rows_in, quanta, lo, hi)
    # values below the low heap's largest, above the high heap's smallest, are there every one; where the
    # heaps overlap (fewer than 512 cell rows), the high heap's from the low heap's largest on (no row twice)
    t_low, t_high = float(low.max()), float(high.min())
    below, above = low[low < t_low], high[high > t_high]
    both = np.concatenate([below, high[high >= t_low] if t_low > t_high else above])
    top, top_counts = np.unique(above, return_counts=True)
    bottom, bottom_counts = np.unique(below, return_counts=True)

    def largest(with_bottom: bool):
        """The most of the upper's largest values (a Zipf-like tail, where ranges over the domain fall) that
        fit, beside the lower's or alone: the table's bytes grow about 1 a value, and fall by a cell's where an
        end cell empties, so the bisection may stop up to a cell's worth of values short (docs/math.md §7)."""
        def option(k):
            values, counts = top[-k:], top_counts[-k:]
            if with_bottom:
                values, counts = np.concatenate([bottom, values]), np.concatenate([bottom_counts, counts])
            return fitting(values, counts, t_low if with_bottom else lo, float(top[-k - 1]))

        fits, best, over = 0, None, len(top)  # (all of the upper is an option of its own, tried first)
        while over - fits > 1:
            k = (fits + over) // 2
            made = option(k)
            if made is None:
                over = k
            else:
                fits, best = k, made
        return best

    return (fitting(*np.unique(both, return_counts=True), t_low, t_high)
            or fitting(top, top_counts, lo, t_high)
            or (largest(True) if t_low < t_high and len(bottom) else None)
            or fitting(bottom, bottom_counts, t_low, hi)
            or largest(False)
            or (atoms, points, rows_in, quanta, lo, hi))


#: An end of a lattice column whose scan's extreme values (TAIL_VALUES of them) spread over at least this
#: share of the column's range is a sparse tail: ranges over the column's domain mostly end there.
SPARSE_TAIL = 0.1
#: The share of the planned cells that must stay beside a sparse tail's values (merged two by two, evenly
#: over the grid, to make room for them).
SPARSE_KEEP = 0.75


def _sparse_ends_to_table(atoms: Atoms, points: np.ndarray, rows_in: np.ndarray, quanta: list, scan, lo, hi,
                          step: float, quantum: float, budget: int):
    """A lattice column's sparse tail (a log-normal's largest amounts: its 256 largest of 10⁷ cents spread
    over 70% of its range) holds a handful of rows per cell, whose positions no cell's shape knows, and most
    ranges over the column's domain end there. The scan knows those values one by one: they join the heavy
    values (packed, a few bytes each), exactly, where the remaining cells, merged evenly over the grid to make
    room, keep :data:`SPARSE_KEEP` of the planned ones (both ends when both are sparse, else the sparser).
    Returns (atoms, points, rows, quanta, lo, hi) as :func:`_known_ends_to_table` does (docs/math.md §7)."""
    low, high = np.asarray(scan.low, dtype=np.float64), np.asarray(scan.high, dtype=np.float64)
    if not len(high) or not hi > lo:
        return atoms, points, rows_in, quanta, lo, hi
    t_low, t_high = float(low.max()), float(high.min())
    below, above = low[low < t_low], high[high > t_high]
    sparse_low = len(below) > 0 and t_low - lo >= SPARSE_TAIL * (hi - lo)
    sparse_high = len(above) > 0 and hi - t_high >= SPARSE_TAIL * (hi - lo)
    singles = sorted([(values, new_lo, new_hi, spread) for sparse, values, new_lo, new_hi, spread in (
        (sparse_high, above, lo, t_high, hi - t_high), (sparse_low, below, t_low, hi, t_low - lo)) if sparse],
        key=lambda o: -o[3])
    options = [(np.concatenate([below, above]), t_low, t_high)] if len(singles) == 2 and t_low < t_high else []
    for values, new_lo, new_hi, _ in singles:  # each sparse end, then the outermost half, quarter, ... of it
        ordered = np.sort(values)
        k = len(ordered)
        options.append((ordered, new_lo, new_hi))
        while k > 16:
            k //= 2
            part = ordered[-k:] if new_lo == lo else ordered[:k]
            # (the cells keep the values next to it: end the table at a value change)
            if new_lo == lo:
                part = part[part > ordered[-k - 1]]
                options.append((part, lo, float(ordered[-k - 1])))
            else:
                part = part[part < ordered[k]]
                options.append((part, float(ordered[k]), hi))
    planned = len(points) - 1
    for option in options:
        values, counts = np.unique(option[0], return_counts=True)
        made = _table_with(atoms, points, rows_in, quanta, values, counts, step, quantum)
        if made is None:
            continue
        table, pack, kept, rows, sums = made
        room = (budget - ROW_BYTES_1D - len(pack)) // BOUNDARY_BYTES - 1  # cells beside the table
        if not len(kept) or room < max(PROFILE_MIN_CELLS, SPARSE_KEEP * planned):
            continue
        if len(kept) - 1 > room:  # merge neighbouring cells, evenly over the grid (counts and sums add)
            at = np.unique(np.round(np.linspace(0, len(kept) - 1, room + 1)).astype(np.int64))
            rows = np.add.reduceat(rows, at[:-1])
            sums = [sum(sums[a:b]) for a, b in zip(at[:-1], at[1:])]
            kept = kept[at]
        return table, kept, rows, sums, option[1], option[2]
    return atoms, points, rows_in, quanta, lo, hi


def _misses_heavy(plan: _Plan1D, sample: np.ndarray) -> bool:
    """Whether a row sample holds a value with a cell's share of its rows or more (1 / most_cells) that the
    plan's sample did not even flag as heavy (half that share; atom_candidates) and that does not sit alone
    in a cell: a heavy value the sample of blocks that placed the grid saw too little of (its rows stored
    together, in blocks the sample missed). Twice the share apart, and 0.1% of the sample at least (a large
    budget's share is a few dozen of its rows, among which sampling noise alone gets that far)."""
    values, counts = np.unique(sample, return_counts=True)
    frequent = values[(counts >= max(2.0, len(sample) / 1000)) & (counts * plan.most_cells >= len(sample))]
    frequent = frequent[~np.isin(frequent, plan.candidates) & ~np.isin(frequent, plan.flagged)]
    if plan.step > 0 and len(frequent):  # a value alone in a cell one step wide is exact as it is
        cells = np.clip(np.searchsorted(plan.points, frequent, side="right") - 1, 0, len(plan.points) - 2)
        frequent = frequent[np.diff(plan.points)[cells] > 1.5 * plan.step]
    return len(frequent) > 0


#: Cells a budget must leave beside a periodic profile for the profile to be tried (below, the cells' own
#: resolution matters more than the shape inside them).
PROFILE_MIN_CELLS = 16
#: The fewest rows a time column's row sample holds (its periodic profile's own: 50,000 rows left the profile
#: an error every query of the column shares, and one refresh's coverage moved by up to five points from the
#: next's; docs/math.md §7).
PROFILE_SAMPLE_ROWS = 200_000


def _usable_period(sample: np.ndarray, requested: Requested,
                   period: Optional[Tuple[float, int]]) -> Optional[Tuple[float, int]]:
    """``period``, or None when the sample's rows are spread evenly over it (:func:`.cells.periodic`) or the
    budget would leave fewer than :data:`PROFILE_MIN_CELLS` cells beside its profile."""
    if period and cells_for_budget(requested.budget_1d - profile_bytes(period[1]), 0) >= PROFILE_MIN_CELLS \
            and periodic(sample, *period, lattice_step(sample)):
        return period
    return None


def _weighed_budget(budget: int, step: float, weighed: bool) -> int:
    """The bytes left to a 1-D synopsis' heavy values and cells once a lattice column's calibrated doubt weights
    (DOUBT_BYTES) have theirs: where ``weighed`` (no periodic profile tried) and the column has a lattice."""
    return budget - DOUBT_BYTES if step > 0 and weighed else budget


def _cells_budget(requested: Requested, period: Optional[Tuple[float, int]]) -> int:
    """The bytes a 1-D synopsis' heavy values and cells may take: its budget, less a (usable) periodic
    profile's."""
    return requested.budget_1d - (profile_bytes(period[1]) if period else 0)


def plan_grid(sample: np.ndarray, requested: Requested, span=None,
              period: Optional[Tuple[float, int]] = None) -> Optional[np.ndarray]:
    """The grid a 1-D build would place from this sample of a column over ``span`` (its min and max; the
    sample's by default), or None when the sample holds no finite value or the grid would sit at another
    scale: a partitioned table's partitions are built on it (``grid_hint``), so that their synopses merge
    exactly. ``period``: as :func:`build_1d`'s, whose bytes the cells leave free."""
    sample = np.asarray(sample, dtype=np.float64)
    sample = sample[np.isfinite(sample)]
    if len(sample) == 0:
        return None
    lo, hi = span if span is not None else (float(sample.min()), float(sample.max()))
    if _scan_scale(lo, hi) != 1.0:
        return None
    usable = _usable_period(sample, requested, period)
    return _plan_1d(sample, requested, _cells_budget(requested, usable), False, None, span=(lo, hi),
                    weighed=not usable).points


def _scan_errors(scan, rel: str, col: str) -> None:
    """The errors a column's counts show (a :class:`~.reader.Scan1D` or a :class:`~.reader.Sample1D`)."""
    if scan.non_null == 0:
        raise NoValuesError(f"pg_kde: column {col} of {rel} has no non-NULL values" if scan.rows else
                            f"pg_kde: {rel} is empty", rows=scan.rows)
    if scan.non_finite:
        raise UserError(f"pg_kde: column {col} of {rel} holds {scan.non_finite} NaN or infinite value(s); "
                        "a synopsis needs finite values")


def _fold(points: np.ndarray, rows: np.ndarray, quanta: list, values: np.ndarray, counts: np.ndarray,
          quantum: float) -> None:
    """Put candidates that are not kept as heavy values back into their cells (exactly: each one's rows hold
    one value)."""
    cells = np.clip(np.searchsorted(points, values, side="right") - 1, 0, len(points) - 2)
    for c, v, k in zip(cells, values, counts):
        rows[c] += k
        quanta[c] += int(k) * quanta_of(v, quantum)


def _overflowed_quanta(scan, points: np.ndarray, quantum: float) -> Optional[dict]:
    """The quanta of the cell values the scan left out of its sums (past 2^63 quanta: a bigint's largest
    value among small integers, 1e300 among cents), per cell, where its extreme values hold every one of
    them (the negative ones among its smallest, the positive among its largest); None where they do not.
    Python's integers sum them exactly, so the column keeps its quantum and its ordinary sums."""
    limit = 2.0**63
    low, high = np.asarray(scan.low, dtype=np.float64), np.asarray(scan.high, dtype=np.float64)
    with np.errstate(over="ignore"):
        found = np.concatenate([low[(low < 0) & (np.abs(np.rint(low / quantum)) >= limit)],
                                high[(high > 0) & (np.abs(np.rint(high / quantum)) >= limit)]])
    if len(found) != scan.overflow:
        return None
    extra: dict = {}
    for c, v in zip(np.clip(np.searchsorted(points, found, side="right") - 1, 0, len(points) - 2), found):
        extra[int(c)] = extra.get(int(c), 0) + quanta_of(v, quantum)
    return extra


def build_1d(reader: TableReader, requested: Requested, select_bandwidth: SelectBandwidth = select_bandwidth, *,
             interrupt: Interrupt = None, started: Optional[float] = None,
             grid_hint: Optional[np.ndarray] = None, period: Optional[Tuple[float, int]] = None,
             pinned: Optional[Pinned1D] = None, check_blocks: bool = False) -> Built1D:
    """A 1-D synopsis of the reader's column within ``requested.budget`` bytes: exact heavy values (all
    values when they fit), and the other rows' exact cells, on the column's value lattice when it has one,
    with the KDE's density at the cell boundaries (docs/math.md §7, :mod:`.cells`).

    A large table is read once: a repeatable sample of its blocks (:meth:`TableReader.plan_sample_1d`)
    places the grid and chooses candidate heavy values, then one scan (:meth:`TableReader.scan_1d`, a
    parallel aggregate in SQL) counts everything stored and takes the repeatable row sample that chooses the
    bandwidth and fits the shape; a second scan, planned from that row sample, follows where the row sample
    shows a heavy value the plan neither counts apart nor gives a cell of its own, or decides the periodic
    profile otherwise (:func:`_misses_heavy`, :func:`_usable_period`: rows stored together fool a sample of
    blocks). A smaller table is read twice: first its row sample with the column's range and counts
    (:meth:`TableReader.sample_1d`), then the scan. Another scan follows only when the scan contradicts the
    sample: values off the lattice the sample showed, or values that need another scale or quantum. ``started`` (a
    :func:`time.perf_counter` reading) is where ``seconds`` counts from; the call by default. ``grid_hint``:
    the grid of the table this one is a part of (a partition's parent), whose boundaries the part shares
    where its values reach them, so that the parts' synopses merge exactly (:mod:`.merge`). ``period``:
    (T, bins) of a periodic profile the rows of a time column may follow inside a cell
    (:data:`.cells.DAY_PROFILE`, :data:`.cells.WEEK_PROFILE`); where the sample's rows are spread unevenly
    over it (:func:`.cells.periodic`) and the budget leaves room for :data:`PROFILE_MIN_CELLS` cells beside
    it, its bytes are kept out of the cells' budget, and the profile replaces the KDE's shape when it fits
    the sample better (docs/math.md §7); the row sample then holds at least :data:`PROFILE_SAMPLE_ROWS`
    rows. ``pinned``: the plan of the first scan (a Citus table's, whose
    shards' answers to the same scan are kept, :mod:`.shards`), instead of a sample of blocks; the build
    plans anew, as it would have, where the scan contradicts it or finds the non-NULL rows more than a
    quarter away from those it was planned for, or values beyond its grid's ends. The built synopsis'
    ``pinned`` is the plan of its last scan. ``check_blocks``: plan again from the scan's row sample where a
    cell holds many times the rows the sample of blocks showed there (:func:`_missed_by_blocks`)."""
    started = time.perf_counter() if started is None else started
    chosen = counts_method(requested.method, 1)
    rel, (col,) = reader.relation, reader.columns
    budget = requested.budget_1d
    size = requested.sample_size if period is None else max(requested.sample_size, PROFILE_SAMPLE_ROWS)
    wanted = period
    if pinned is not None:  # the scan takes the row sample; its range and facts follow from it
        sample, span, taking = np.empty(0), (0.0, 0.0), (size, pinned.share)
        period, table, rows = pinned.period, pinned.table, pinned.rows
        scale, continuous, quantum = pinned.scale, pinned.continuous, pinned.quantum
    else:
        first = reader.plan_sample_1d(size)
        if not first.whole and len(first.values) == 0:  # the sampled blocks held no value: every row, first
            first = reader.sample_1d(size, first.rows)
        if first.whole:
            _scan_errors(first, rel, col)  # empty, all NULL, NaN or infinite: before the scan
            if len(first.values) == 0:  # the non-NULL values too sparse for the sample's share: a share of those
                first = reader.sample_1d(size, first.non_null)
        sample, span = first.values, (first.lo, first.hi)
        # A sample of blocks placed the grid: the scan takes the row sample the rest of the build uses.
        taking = None if first.whole else (size, sample_share(size, max(first.non_null, 1)))
        period = _usable_period(sample, requested, period)
        # Values near the ends of float8: scan a power-of-two multiple (exact) so the grid's widths and the
        # KDE stay finite; everything is stored in the column's units again at the end. (No lattice then.)
        scale, continuous, quantum = _scan_scale(*span), False, None
        rows, table = max(first.non_null, len(sample)), True
    cells_budget = _cells_budget(requested, period)
    for attempt in range(4):
        scanned = sample * scale
        scanned_with = taking
        if attempt == 0 and pinned is not None:
            plan = pinned.plan
        else:
            plan = _plan_1d(scanned, requested, cells_budget, continuous or scale != 1.0, quantum,
                            grid_hint if scale == 1.0 else None, (span[0] * scale, span[1] * scale), rows, table,
                            weighed=not period)
        # (a time column's profile is counted over every row in the same pass, on its own units only)
        phases = (period[0], period[1], plan.step) if period and scale == 1.0 else None
        # (with the calibration's cuts as boundaries too, folded back into the plan's cells; where a periodic profile
        # is tried, only over a few cells, 0.25.0: its calibrated weight scales its cells' own spread)
        fine = plan.scanned_grid() if not period or len(plan.points) - 1 <= PROFILE_CELLS_MOST else plan.points
        scan = reader.scaled([scale]).scan_1d(fine, plan.candidates, plan.quantum, taking, phases, plan.tail)
        _scan_errors(scan, rel, col)
        scan, fine_below = fold_scan(scan, plan.points, fine)
        rows = scan.non_null
        # (another scan below plans from the row sample too; so does a pinned plan made for far fewer or more rows)
        # (a kept plan made for far fewer or more rows, or whose cells the rows have outgrown, is made again)
        kept = attempt == 0 and pinned is not None
        replan = kept and (4 * abs(scan.non_null - pinned.rows) > pinned.rows
                           or _cells_outgrown(np.asarray(pinned.shares), scan.cell_rows))
        if check_blocks and taking and not kept:
            replan = replan or _missed_by_blocks(plan.points, scanned, scan.cell_rows)
        if taking:  # from here on, the row sample and the column's true range
            sample, span, taking = scan.sample / scale, (scan.all_lo / scale, scan.all_hi / scale), None
            if len(sample) < min(size, scan.non_null) // 2:  # far fewer rows than the blocks promised
                sample = reader.sample_1d(size, scan.non_null).values
            scanned = sample * scale
            # The row sample shows what the blocks may not have: heavy values stored together, in blocks
            # the sample missed, or a rhythm made up by clusters of neighbouring rows. Then plan again from
            # it, and scan again.
            checked = _usable_period(sample, requested, wanted)
            replan = replan or checked != period or _misses_heavy(plan, scanned)
            period, cells_budget = checked, _cells_budget(requested, checked)
        true_scale = _scan_scale(scan.all_lo / scale, scan.all_hi / scale)
        if true_scale != scale:  # a value far beyond the sample's range
            scale = true_scale
            continue
        # values past 2^63 quanta, left out of the scan's sums: completed from its extreme values where they
        # hold them all
        extra = _overflowed_quanta(scan, plan.points, plan.quantum) if scan.overflow else {}
        if plan.step > 0 and (scan.off_lattice or extra is None or not np.all(
                on_lattice(plan.candidates[scan.candidate_rows > 0], plan.step))):
            # the sample showed a lattice the table does not keep (values off it, or past its reach that the
            # sample missed: on_lattice): a continuous column
            continuous = True
            continue
        if extra is None:  # the quantum of the scanned range
            quantum = fine_quantum(scan.all_lo, scan.all_hi)
            continue
        if plan.few and table and _table_bytes(plan, scan) > plan.heavy_bytes:
            # The frequency table's counts outgrew the plan's estimate (a sample of blocks that held far fewer
            # rows than the rest): cells instead, within the budget.
            table = False
            continue
        if replan:
            continue
        break
    else:
        raise UserError(f"pg_kde: the scans of column {col} of {rel} kept disagreeing with its sample; "
                        "is the table being written to?", sqlstate="40001")
    n_all, n = scan.rows, scan.non_null
    # A larger tail (a lattice frequency table's, _scan_tail) is for every cell value at once: where they do
    # not all fit, the build goes on with the ends a scan of the default tail keeps, as it would have.
    known = _every_cell_value(scan)
    if scan.tail > TAIL_VALUES:
        scan = replace(scan, low=scan.low[:TAIL_VALUES], high=scan.high[-TAIL_VALUES:], tail=TAIL_VALUES)
    if pinned is not None and plan is pinned.plan:
        pin = pinned  # (the rows it was planned for stay: how far the table moved since counts from there)
    else:
        total = float(np.sum(scan.cell_rows))
        pin = Pinned1D(plan, scale, continuous, quantum, period, table,
                       scanned_with[1] if scanned_with else sample_share(size, max(n, 1)), max(n, 1),
                       tuple((np.asarray(scan.cell_rows, dtype=np.float64) / max(total, 1.0)).tolist()))
    step, points, candidates = plan.step, plan.points, plan.candidates
    rows_in, quanta = scan.cell_rows.copy(), list(scan.cell_quanta)
    for c, q in extra.items():
        quanta[c] += q
    found = scan.candidate_rows > 0
    lo, hi = scan.lo, scan.hi
    if plan.few:  # every sampled value exactly; the cells (none when the sample saw every value) the rest
        atoms = Atoms.from_counts(candidates[found], scan.candidate_rows[found])
    else:
        hinted = grid_hint is not None and scale == 1.0
        if step > 0 and not hinted:  # (heavy values have cells of their own)
            atoms = Atoms.from_counts([], [])
        else:
            # on a lattice and a given grid, what would have had a cell of its own: half a cell's share or more
            share = 0.5 / plan.most_cells if step > 0 else max(ATOM_SHARE, 1.0 / plan.most_cells)
            atoms = Atoms.from_counts(candidates, scan.candidate_rows, min_count=share * n).largest(plan.atoms_room)
        back = found & ~np.isin(candidates, atoms.values)
        if back.any():
            _fold(points, rows_in, quanta, candidates[back], scan.candidate_rows[back], plan.quantum)
            lo = min([v for v in (lo, float(candidates[back].min())) if v is not None])
            hi = max([v for v in (hi, float(candidates[back].max())) if v is not None])
    kde_rows = n - atoms.rows
    if kde_rows > 0:
        # The scan's extreme values and the candidates folded back into cells say where each of those rows
        # lies: cut the outer cells where rows lie beyond the range the grid was placed on (a sample of
        # blocks), and any cell around a far gap between them (a sentinel like 1e300).
        folded = (candidates[back], scan.candidate_rows[back]) if not plan.few and back.any() else (np.empty(0),) * 2
        ends = []
        for heap in (scan.low, scan.high):
            values = np.concatenate([heap, folded[0]])
            order = np.argsort(values, kind="stable")
            ends.append((values[order], np.concatenate([np.ones(len(heap)), folded[1]])[order]))
        every = len(scan.high) < scan.tail  # the scan kept every cell value
        low_done = None if every else boundary_below(float(scan.low[-1]), step)
        high_done = None if every else boundary_above(float(scan.high[0]), step)
        keep = grid_hint if grid_hint is not None and scale == 1.0 else np.empty(0)
        if lo < points[0] or hi > points[-1]:
            points, rows_in, quanta = cut_outer_cells(points, rows_in, quanta, ends[0], low_done, ends[1],
                                                      high_done, lo, hi, step, plan.quantum, keep=keep)
        points, rows_in, quanta = cut_far_gaps(points, rows_in, quanta, ends[0], low_done, ends[1], high_done,
                                               step, plan.quantum, keep=keep)
        if plan.few and step > 0 and scale == 1.0:
            atoms, points, rows_in, quanta, lo, hi = _known_ends_to_table(
                atoms, points, rows_in, quanta, scan, every, lo, hi, step, plan.quantum, cells_budget, known)
            kde_rows = n - atoms.rows
        elif step > 0 and scale == 1.0 and not every and grid_hint is None and not requested.grid_size:
            # (a partition keeps its parent's boundaries, and a requested grid its size)
            atoms, points, rows_in, quanta, lo, hi = _sparse_ends_to_table(
                atoms, points, rows_in, quanta, scan, lo, hi, step, plan.quantum,
                _weighed_budget(cells_budget, step, not period))
            kde_rows = n - atoms.rows

    h, used_method, used_backend, used_sample, used_scale = 0.0, "exact", "none", 0, None
    grid, cell_count, cell_sum, density, tau2, slack, rounding = [], [], [], [], 0.0, 0.0, 0.0
    used_period, used_profile = 0.0, []
    if kde_rows > 0:
        rest = scanned[~np.isin(scanned, atoms.values)]
        # The outer cells end where the rows off the heavy values do.
        points = trim_ends(points, lo, hi, step)
        sums_in = lattice_sums(quanta, plan.quantum)
        typical = float(np.median(np.diff(points)))  # a typical cell's width
        if len(rest) >= 50 and np.ptp(rest) > 0:
            # Chosen on the points the KDE sums (the sample's order statistics, KDE_POINTS of them), capped
            # at a typical cell: the cells are exact, the KDE only says where rows sit inside a cell
            # (docs/math.md §7). Rounded, so refreshes repeat bit for bit.
            chosen_points = order_statistics(rest, KDE_POINTS)
            framed, unit = _selection_frame(chosen_points)
            result = select_bandwidth(framed, chosen, requested.backend, scale=SYNOPSIS_SCALE)
            h = repeatable_bandwidth(min(math.sqrt(result.H[0, 0]) * unit, typical))
            used_method, used_backend, used_sample = result.method, result.backend, len(chosen_points)
            used_scale = result.details.get("scale")
        else:  # too few rows off the heavy values to choose a bandwidth: the grid's own resolution
            h, used_method, used_sample = repeatable_bandwidth(typical), "grid", len(rest)
        # The KDE of lattice data spreads each value over its step: smooth at that scale too. It is the KDE
        # of every row as the cells count them (binned), not of the sample: no sampling noise at the
        # boundaries, where a sparse tail's sample held a handful of values (docs/math.md §7).
        h_eff = math.hypot(h, step / math.sqrt(12.0))
        f = binned_kde_at(points, rows_in, h_eff, interrupt=interrupt)
        # Relative to the grid's mean density (f integrates to 1 over it): O(1) numbers, whatever the units.
        stored = stored_density(f * 2 * (points[-1] / 2 - points[0] / 2))
        population = len(sample) >= n
        heavy = np.sort(atoms.values)
        fit = shape_fit(points, rows_in, sums_in, stored, rest, step, population, heavy=heavy)
        tau2 = shape_variance(fit)
        if period and scale == 1.0 and len(rest) >= 50:
            # The periodic profile instead of the KDE's shape when it misses the sample by less (the rows are
            # spread unevenly over the period: _usable_period's test).
            # Of every row off the heavy values, as the last scan counted them (it had this period).
            counts = scan.phases
            if atoms.rows:
                counts = counts - period_counts(atoms.values, *period, step, weights=atoms.counts)
            profile = make_profile(counts)
            profile_fit = shape_fit(points, rows_in, sums_in, stored, rest, step, population, profile, period[0],
                                    heavy=heavy)
            if profile_fit[0] < fit[0]:
                used_period, used_profile, tau2 = period[0], profile.tolist(), shape_variance(profile_fit)
        grid = points.tolist()
        cell_count, cell_sum = cell_prefix(rows_in), cell_prefix(sums_in)
        slack = prefix_slack(sums_in)
        # each row's value rounded to the scan's quantum (none where the values are whole steps of it)
        rounding = 0.0 if step > 0 and plan.quantum == step else float(plan.quantum)
        density = stored.tolist()

    heavy_rows = atoms.rows
    atom_count, atom_sum = atoms.cumulative(step if scale == 1.0 else 0.0)
    if scale != 1.0:  # back to the column's units (sums past float8's range become infinite)
        with np.errstate(over="ignore"):
            h, grid, cell_sum, atom_sum = h / scale, *(
                (np.asarray(a, dtype=np.float64) / scale).tolist() for a in (grid, cell_sum, atom_sum))
            slack, rounding = slack / scale, rounding / scale  # (a power of two: exact)
            atoms = Atoms(atoms.values / scale, atoms.counts)
    built = Built1D(
        method=used_method, bandwidth=float(h), sample_size=used_sample, backend=used_backend, scale=used_scale,
        n_rows=n, n_null=n_all - n, step=float(step), atom_values=atoms.values.tolist(),
        atom_cum_count=atom_count, atom_cum_sum=atom_sum, heavy_rows=heavy_rows, kde_rows=kde_rows, grid=grid,
        grid_size=len(grid), cell_cum_count=cell_count, cell_cum_sum=cell_sum, density=density, shape_var=float(tau2),
        budget=budget, seconds=0.0, period=used_period, profile=used_profile,
        sum_slack=slack, sum_quantum=rounding, heavy_whole=True, coarse=scan.coarse, pinned=pin,
    )
    weight, weights = None, None
    if len(fine) > len(plan.points) and scale == 1.0 and kde_rows > 0:
        # The shape's doubt's weights, from the exact counts between the scan's cuts and beyond its tails
        # (.calibration)
        payload = built.payload()
        groups = None  # (GROUPS, in the bytes a lattice column's cells leave them)
        if period:  # (a periodic profile tried: its cells left the groups no bytes, one weight, 0.25.0)
            groups = 0
        elif plan.few:  # (a frequency table's cells have as many groups as the bytes the table and they leave hold)
            used = stored_bytes_1d(len(grid), len(payload["atom_values"]), len(payload["atom_pack"]))
            groups = min(_table_groups(len(grid) - 1), (budget - used - DOUBT_HEADER_BYTES) // DOUBT_WEIGHT_BYTES)
        weight, weights = calibrate(payload, plan.probes, plan.even,
                                    counts_of(scan, plan.every_cut(), fine, fine_below, plan.candidates),
                                    (scan.all_lo, scan.all_hi), plan.among, groups)
    return replace(built, doubt_weight=weight, doubt_weights=weights,
                   seconds=time.perf_counter() - started)


@dataclass(frozen=True)
class Layout2D:
    """Where a 2-D synopsis' cells are: each axis's grid points, its value lattice (empty: none) and whether
    it holds whole numbers (points on half-integers), in the columns' units. A partitioned table's
    partitions share their parent's, so that their synopses merge exactly (:func:`.merge.merge_2d`)."""

    grids: Tuple[Tuple[float, ...], Tuple[float, ...]]
    lattices: Tuple[Tuple[float, ...], Tuple[float, ...]]
    integral: Tuple[bool, bool]

    def holds(self, stats: TableStats) -> bool:
        """Whether a part's rows (its :class:`~.reader.TableStats`) fit these cells exactly: within each
        axis's ends, whole numbers where the axis keeps them, and no discretised axis (a part's values are
        not checked against a lattice)."""
        if stats.non_null == 0:
            return True
        return all(not self.lattices[k] and self.grids[k][0] <= stats.lo[k] and stats.hi[k] <= self.grids[k][-1]
                   and (stats.integral[k] or not self.integral[k]) for k in (0, 1))


@dataclass(frozen=True)
class Pinned2D:
    """The last scan of a pair's build, kept by a Citus table's synopsis (``kde_parts.plan``) as
    :class:`Pinned1D` is for a column: its cells, the row sample's share it took (None: none), and each axis's
    cells' shares of the rows it counted (the build plans anew where a cell outgrows its share)."""

    layout: Layout2D
    share: Optional[float]
    shares: Tuple[Tuple[float, ...], Tuple[float, ...]]

    def to_json(self) -> str:
        return json.dumps({"grids": [[float(v) for v in g] for g in self.layout.grids],
                           "lattices": [[float(v) for v in g] for g in self.layout.lattices],
                           "integral": [bool(i) for i in self.layout.integral], "share": self.share,
                           "shares": [[float(v) for v in a] for a in self.shares]})

    @staticmethod
    def from_json(text: str) -> Optional["Pinned2D"]:
        """The scan stored as :meth:`to_json` wrote it; None for anything else."""
        try:
            d = json.loads(text)
            axes = lambda k: tuple(tuple(float(v) for v in a) for a in d[k])  # noqa: E731
            grids, lattices, shares = axes("grids"), axes("lattices"), axes("shares")
            integral = tuple(bool(i) for i in d["integral"])
            share = None if d["share"] is None else float(d["share"])
        except (TypeError, ValueError, KeyError):
            return None
        ascending = lambda a: all(map(math.isfinite, a)) and all(y > x for x, y in zip(a, a[1:]))  # noqa: E731
        ok = (len(grids) == len(lattices) == len(integral) == len(shares) == 2
              and all(len(g) >= 2 and ascending(g) for g in grids) and all(ascending(a) for a in lattices)
              and all(len(a) == len(g) - 1 for a, g in zip(shares, grids))
              and (share is None or (math.isfinite(share) and share > 0)))
        return Pinned2D(Layout2D(grids, lattices, integral), share, shares) if ok else None


def check_pair(stats: TableStats, rel: str, names: str, columns, constant: bool = True) -> None:
    """The errors a pair's facts show: no rows, NaN or infinite values, and (``constant``) a constant column."""
    if stats.non_null == 0:
        raise NoValuesError(f"pg_kde: {rel} has no rows with both {names} non-NULL" if stats.rows
                            else f"pg_kde: {rel} is empty", rows=stats.rows)
    if stats.non_finite:
        raise UserError(f"pg_kde: columns {names} of {rel} hold {stats.non_finite} NaN or infinite value(s); "
                        "a synopsis needs finite values")
    for k, c in enumerate(columns):
        if constant and stats.lo[k] == stats.hi[k]:
            raise UserError(f"pg_kde: column {c} of {rel} is constant where both columns are non-NULL; "
                            "use a 1-D synopsis of the other column")


def lattice_limit(requested: Requested) -> int:
    """The most values a discretised axis of a 2-D synopsis keeps (an eighth of the budget)."""
    return max(2, requested.budget_2d // (8 * 8))


def _within_float8(grid: np.ndarray, lattice, scale: float):
    """An axis's scaled grid (and lattice) with its ends pulled in to ± float8's largest value in the column's
    units (half a step past a lattice's end value, or a heavy end value's cell of its own, can lie beyond it: a
    pair holding 1.7e308 beside 1.0 planned its last line at 2.55e308, infinite in the column's units). An end
    pulled in may then be a value the column holds; the grid's last cell is closed, its first holds its start."""
    top = FLOAT8_MAX * scale  # (a power of two: exact)
    if grid[0] >= -top and grid[-1] <= top:
        return grid, lattice
    return np.unique(np.clip(grid, -top, top)), lattice


def plan_2d(sample: np.ndarray, stats: TableStats, requested: Requested,
            discrete: Tuple[bool, bool] = (True, True), values=(None, None)) -> Layout2D:
    """The cells of a 2-D synopsis of a table with these facts, from a sample of its pairs (in the columns'
    units; columns near the ends of float8 are planned at a power-of-two scale, as :func:`build_2d` scans
    them): each axis at the sample's quantiles within the budget, a discretised axis's value lattice taking
    at most an eighth of it. ``discrete`` False: never a lattice on that axis; ``values``: an axis's every
    distinct value (a scan found values off the sample's lattice), which its lattice then holds."""
    bounds = [(stats.lo[k], stats.hi[k]) for k in (0, 1)]
    # (a whole-number axis puts its grid on half-integers: HALF_INTEGER_LIMIT)
    integral = [bool(stats.integral[k]) and max(map(abs, bounds[k])) < HALF_INTEGER_LIMIT for k in (0, 1)]
    scales = [_scan_scale(*b) for b in bounds]
    sample = np.asarray(sample, dtype=np.float64).reshape(-1, 2) * np.array(scales)
    axes = [sample[:, k] if values[k] is None else np.concatenate([sample[:, k], np.asarray(values[k]) * scales[k]])
            for k in (0, 1)]
    budget = requested.budget_2d
    lattice_values = lattice_limit(requested)
    size = requested.grid_size or grid_size_2d(budget)

    def layout(size):
        return [_within_float8(*quantile_grid(axes[k], bounds[k][0] * scales[k], bounds[k][1] * scales[k],
                                              integral[k], size, lattice_values if discrete[k] else 1), scales[k])
                for k in (0, 1)]

    layouts = layout(size)
    if not requested.grid_size:
        lattice_bytes = 8 * sum(len(v) for _, v in layouts if v is not None)
        if lattice_bytes:
            size = grid_size_2d(budget - lattice_bytes)
            layouts = layout(size)
    with np.errstate(over="ignore"):
        grids = tuple(tuple((g / scales[k]).tolist()) for k, (g, _) in enumerate(layouts))
        lattices = tuple(tuple((v / scales[k]).tolist()) if v is not None else () for k, (_, v) in enumerate(layouts))
    return Layout2D(grids, lattices, (integral[0], integral[1]))


def _on_lattice_2d(lattice: np.ndarray, grid: np.ndarray, low: np.ndarray, high: np.ndarray) -> bool:
    """Whether a discretised axis's scanned values fit its lattice (all scaled alike): in each cell of the
    axis, the smallest and largest value (``low``, ``high``; NaN: none) are lattice values, and equal where
    the cell holds one lattice value (a query then takes the cell whole). A value off the lattice inside a
    cell of several lattice values is cut from it as any value is, within the hard bounds."""
    for c in np.flatnonzero(~np.isnan(low)):
        inside = lattice[(lattice >= grid[c]) & ((lattice < grid[c + 1]) | (c == len(grid) - 2))]
        if not (np.isin(low[c], inside) and np.isin(high[c], inside)) or (len(inside) == 1 and low[c] != high[c]):
            return False
    return True


#: How many times its planned share of the rows (what a sample of blocks showed there, or what a kept plan's
#: scan counted; an equal-depth cell's share at least) a cell may hold before the build plans again.
BLOCKS_MISSED = 4.0


def _cells_outgrown(shares: np.ndarray, rows) -> bool:
    """Whether some cell's share of ``rows`` (one count a cell) is more than :data:`BLOCKS_MISSED` times
    ``shares`` (what the plan expected there) or an equal-depth cell's share, whichever is more."""
    rows = np.asarray(rows, dtype=np.float64)
    total = float(rows.sum())
    if total <= 0 or len(rows) < 2 or len(shares) != len(rows):
        return False
    return bool(np.any(rows / total > BLOCKS_MISSED * np.maximum(shares, 1.0 / len(rows))))


def _missed_by_blocks(edges, blocks: np.ndarray, rows) -> bool:
    """:func:`_cells_outgrown` against the shares of ``blocks`` (the values of the sample of blocks that
    placed the grid) between ``edges``."""
    edges = np.asarray(edges, dtype=np.float64)
    if len(blocks) == 0 or len(edges) < 3:
        return False
    return _cells_outgrown(np.histogram(np.clip(blocks, edges[0], edges[-1]), edges)[0] / len(blocks), rows)


def _margins(rows) -> list:
    """Each axis's cells' rows of a pair's scan (``rows``: its counts, axis 0 by axis 1)."""
    rows = np.asarray(rows, dtype=np.float64)
    return [rows.sum(axis=1 - k) for k in (0, 1)]


def _widen_2d(layout: Layout2D, grids: list, scales: list, stats: TableStats, scan):
    """The layout, scaled grids and scan with each axis's outer lines at the table's min and max (half a step
    out on a whole-number axis) where its rows reach past the range the grid was placed on (a sample of
    blocks). The rows and sums stay exact; the outer cells' sums of offsets are those of their rows' mean
    offset in the wider cell (t1·t2 as the product of the means): the KDE's smoothing only."""
    t1, t2, t12 = scan.t1.copy(), scan.t2.copy(), scan.t12.copy()
    new_grids, new_layout = [g.copy() for g in grids], [list(layout.grids[0]), list(layout.grids[1])]
    for k in (0, 1):
        g, half = new_grids[k], 0.5 if layout.integral[k] else 0.0
        lo, hi = (stats.lo[k] - half) * scales[k], (stats.hi[k] + half) * scales[k]
        moved = []
        if lo < g[0]:
            g[0], new_layout[k][0] = lo, stats.lo[k] - half
            moved.append(0)
        if hi > g[-1]:
            g[-1], new_layout[k][-1] = hi, stats.hi[k] + half
            moved.append(len(g) - 2)
        for c in sorted(set(moved)):
            rows = scan.rows[c, :] if k == 0 else scan.rows[:, c]
            sums = scan.sum1[c, :] if k == 0 else scan.sum2[:, c]
            with np.errstate(invalid="ignore", divide="ignore"):
                mean = np.where(rows > 0, np.clip((sums / np.maximum(rows, 1) - g[c]) / (g[c + 1] - g[c]), 0.0, 1.0), 0.0)
            if k == 0:
                other = np.where(rows > 0, t2[c, :] / np.maximum(rows, 1), 0.0)
                t1[c, :], t12[c, :] = rows * mean, rows * mean * other
            else:
                other = np.where(rows > 0, t1[:, c] / np.maximum(rows, 1), 0.0)
                t2[:, c], t12[:, c] = rows * mean, rows * mean * other
    layout = replace(layout, grids=(tuple(new_layout[0]), tuple(new_layout[1])))
    return layout, new_grids, scan._replace(t1=t1, t2=t2, t12=t12)


#: The most bytes a column type's name takes in the header row (format_type of a domain in a schema: two
#: quoted 63-byte names and a dot).
TYPE_NAME_BYTES = 132
#: Bytes of a pair table's one cell beside its pack and lattices: two axes of two points and four summed-area
#: tables of 2 × 2 points.
PAIR_TABLE_CELL_BYTES = 8 * (2 * 2 + 4 * 4)


def _distinct_estimate(values: np.ndarray, everything: bool) -> float:
    """How many distinct rows (values along axis 0) the table holds, from a sample of its rows: their number
    where the sample is the table, else Chao's (1984) lower-bound estimate d + f₁²/(2f₂) (d the sample's
    distinct rows, f₁ and f₂ those seen once and twice; d + f₁(f₁ − 1)/2 without one seen twice)."""
    _, counts = np.unique(values, axis=0, return_counts=True)
    if everything:
        return float(len(counts))
    f1, f2 = int(np.sum(counts == 1)), int(np.sum(counts == 2))
    return len(counts) + (f1 * f1 / (2.0 * f2) if f2 else f1 * (f1 - 1) / 2.0)


def _pair_table(reader: TableReader, layout: Layout2D, stats: TableStats, sample: np.ndarray, everything: bool,
                requested: Requested, started: float) -> Optional[Built2D]:
    """The pair's exact frequency table, where its distinct pairs fit the budget: each axis's distinct values
    as its lattice (8 bytes a value), the pairs packed as positions in them with their rows
    (:func:`.packing.pack_pairs`, 3-4 bytes a pair); None otherwise, or where the user set a grid size. The
    sample decides whether to read the pairs (:func:`_distinct_estimate` of its pairs at 3 bytes, of each
    axis's values at 8); the read stops past the most pairs that could fit. Every box is then exact
    (docs/math.md §8)."""
    # (the rows' fixed part grows with the columns' names, in both rows, and their types' names, which a table
    # filling its room exactly would take past the budget: 63-byte names of a schema's domain did by 123 bytes)
    names = sum(len(str(c).encode()) for c in reader.columns)
    room = requested.budget_2d - ROW_BYTES_2D - PAIR_TABLE_CELL_BYTES - 2 * names - 2 * TYPE_NAME_BYTES
    pairs = np.asarray(sample, dtype=np.float64).reshape(-1, 2)
    if requested.grid_size or room < 8 or not len(pairs):
        return None
    estimate = 3 * _distinct_estimate(pairs, everything) + 8 * sum(len(np.unique(pairs[:, k])) for k in (0, 1))
    if estimate > room:
        return None
    found = reader.pair_counts(room // 3)
    if found is None or not len(found[1]):
        return None
    pairs, counts = found
    lattice1, lattice2 = np.unique(pairs[:, 0]), np.unique(pairs[:, 1])
    if len(lattice1) < 2 or len(lattice2) < 2:  # (a constant column: the cells' build says so)
        return None
    pack = pack_pairs(np.searchsorted(lattice1, pairs[:, 0]).tolist(),
                      np.searchsorted(lattice2, pairs[:, 1]).tolist(), counts.tolist())
    if len(pack) + 8 * (len(lattice1) + len(lattice2)) > room:
        return None
    n = int(counts.sum())
    sums = [exact_dot(counts.tolist(), pairs[:, k].tolist()) for k in (0, 1)]
    corner = lambda total: [0.0, 0.0, 0.0, total]  # noqa: E731 - a 2 x 2 summed-area table of one cell
    return Built2D(
        method="table", bandwidth=[0.0] * 4, sample_size=len(sample), backend="none", n_rows=n,
        n_null=max(0, stats.rows - n), integer_valued=list(layout.integral),
        grid1=[float(lattice1[0]), float(lattice1[-1])], grid2=[float(lattice2[0]), float(lattice2[-1])],
        lattice1=lattice1.tolist(), lattice2=lattice2.tolist(), grid_size=[2, 2], sat_count=corner(float(n)),
        sat_sum=corner(sums[0]) + corner(sums[1]), kde_sat=corner(float(n)), seconds=time.perf_counter() - started,
        pair_pack=pack)


def build_2d(reader: TableReader, requested: Requested, select_bandwidth: SelectBandwidth = select_bandwidth, *,
             interrupt: Interrupt = None, started: Optional[float] = None,
             layout: Optional[Layout2D] = None, stats: Optional[TableStats] = None,
             shared: bool = False, pinned: Optional[Pinned2D] = None, check_blocks: bool = False) -> Built2D:
    """A 2-D synopsis of the reader's pair of columns on an equal-depth grid: exact summed-area tables of
    the grid cells' counts and sums (one scan), and a KDE in grid-index coordinates with a bandwidth matrix
    (LSCV_H by default) shaping the cells a box cuts. ``started`` as in :func:`build_1d`. ``layout``: the
    cells of the table this one is a part of (:func:`plan_2d`), so that the parts' synopses merge exactly;
    a part may then hold a constant column. Where the part's rows do not fit them (:meth:`Layout2D.holds`)
    it gets cells of its own, unless ``shared``: the caller planned them for the whole table this part
    belongs to (:func:`plan_2d` over all its parts), discretised axes included. ``stats``: the reader's
    :meth:`~.reader.TableReader.stats`, when the caller has read them already. ``pinned``: the last scan of
    this table's last build (a Citus table's, whose shards' answers to that scan are kept, :mod:`.shards`),
    instead of ``layout``: the first scan is that one, and the table's facts come from it; the built
    synopsis' ``pinned`` is its last scan. ``check_blocks``: plan again from the scan's row sample where the
    sample of blocks that placed the cells missed many of the rows of a cell (:func:`_missed_by_blocks`; a
    Citus table's shards draw the same block numbers, so a few positions stand for the whole table)."""
    started = time.perf_counter() if started is None else started
    chosen = counts_method(requested.method, 2)
    rel = reader.relation
    whole = True
    if stats is None:  # the facts and the sample in one pass, or from a sample of a large table's blocks
        stats, sample, whole = reader.plan_sample_2d(requested.sample_size)
    else:
        sample = None
    if pinned is not None:  # (its scan checks the lattices and whole numbers, below)
        layout = pinned.layout
    if layout is not None and not shared and pinned is None and not layout.holds(stats):
        layout = None
    n_all, n = stats.rows, stats.non_null
    names = ", ".join(reader.columns)
    planned = layout is None
    # (the blocks' facts are estimates: a column constant in them may not be; the scan's facts decide)
    check_pair(stats, rel, names, reader.columns, constant=planned and whole)
    if sample is None:
        sample = reader.sample(requested.sample_size, n_all)
    size = requested.sample_size
    taking = None if whole or not planned else (size, sample_share(size, max(stats.non_null, 1)))
    if pinned is not None:
        taking = (size, pinned.share) if pinned.share else None
    exact = whole or taking is not None  # the table's facts: those the scan counts, unless every row was read
    of_rows = whole  # whether ``sample`` is a sample of rows (not of blocks)
    discrete, values = [True, True], [None, None]
    base = reader
    for _ in range(4):
        if planned:
            layout = plan_2d(sample, stats, requested, (discrete[0], discrete[1]), (values[0], values[1]))
        bounds = [(layout.grids[k][0], layout.grids[k][-1]) for k in (0, 1)]
        scales = [_scan_scale(*b) for b in bounds]  # as in the 1-D build: scan power-of-two multiples
        reader = base.scaled(scales)
        grids = [np.asarray(layout.grids[k], dtype=np.float64) * scales[k] for k in (0, 1)]
        scan = reader.cells_2d(grids[0], grids[1], sample=taking)
        margins = _margins(scan.rows)
        scanned = Pinned2D(layout, taking[1] if taking else None,
                           tuple(tuple((m / max(float(m.sum()), 1.0)).tolist()) for m in margins))
        replan = False
        if check_blocks and planned and taking and not whole:
            # A sample of blocks placed the cells. Where the rows are stored in the order of a column (loaded
            # in time order), a few blocks can miss a large share of that column's range, and a distributed
            # table's shards draw the same block numbers, so a few positions stand for all: a cell then holds
            # many times the rows the blocks showed. Plan again from the scan's row sample, and scan again.
            replan = any(_missed_by_blocks(layout.grids[k], sample[:, k], margins[k]) for k in (0, 1))
        if pinned is not None and not taking and not exact:  # the table's facts from the scan (or a read)
            stats = scan.stats if scan.stats is not None else base.stats()
            check_pair(stats, rel, names, reader.columns, constant=False)
            n_all, n, exact = stats.rows, stats.non_null, True
        if taking:  # from here on the table's facts (from the scan, or where it did not count them, a read)
            stats, taking = scan.stats if scan.stats is not None else base.stats(), None
            check_pair(stats, rel, names, reader.columns, constant=True)
            n_all, n = stats.rows, stats.non_null
            if scan.sample is not None and len(scan.sample) >= min(size, n) // 2:
                sample = scan.sample
            else:  # far fewer pairs than the blocks promised
                sample = base.sample(size, n_all)
            of_rows = True
            # rows beyond the sampled range move the grids' outer lines (below), unless their scale changes
            replan = replan or [_scan_scale(stats.lo[k], stats.hi[k]) for k in (0, 1)] != scales
        if pinned is not None and not planned and any(
                _cells_outgrown(np.asarray(pinned.shares[k]), margins[k]) for k in (0, 1)):
            planned = replan = True  # kept cells the rows have outgrown: planned anew (the facts are the scan's)
        if planned or pinned is not None:
            # An axis planned as whole numbers, or on the sample's lattice of values, that the table breaks:
            # plan it as it is and scan again (kept cells too: they are planned anew).
            off_lattice = [bool(layout.lattices[k]) and not _on_lattice_2d(
                np.asarray(layout.lattices[k]) * scales[k], grids[k], *scan.ends[2 * k:2 * k + 2])
                for k in (0, 1)] if scan.ends is not None else [False, False]
            not_whole = [layout.integral[k] and scan.non_integral is not None and scan.non_integral[k] > 0
                         for k in (0, 1)]
            if any(off_lattice) or any(not_whole):
                for k in np.flatnonzero(off_lattice):  # the axis's every value, where they are few enough
                    values[k] = None if values[k] is not None else base.distinct_values(k, lattice_limit(requested))
                    discrete[k] = values[k] is not None
                stats = replace(stats, integral=tuple(i and not b for i, b in zip(stats.integral, not_whole)))
                replan, planned = True, True
        if pinned is not None and planned and replan and not of_rows:  # kept cells given up: planned from a sample of rows
            sample, of_rows = base.sample(size, n_all), True
        if not replan:
            break
    else:
        raise UserError(f"pg_kde: the scans of columns {names} of {rel} kept disagreeing with their sample; "
                        "is the table being written to?", sqlstate="40001")
    if planned:  # (a part of a partitioned table or a shard keeps the shared cells, which merge)
        table = _pair_table(base, layout, stats, sample, whole and len(sample) >= n, requested, started)
        if table is not None:
            return table  # (read again at each refresh: no scan to keep)
    if pinned is not None and scanned.layout is pinned.layout and scanned.share == pinned.share:
        scanned = pinned  # (the shares it was planned with stay: how far the rows moved counts from there)
    if not whole or pinned is not None:  # grids placed on the blocks' range, or kept: their outer lines go to the table's
        layout, grids, scan = _widen_2d(layout, grids, scales, stats, scan)
    sample = sample * np.array(scales)
    m1, m2 = len(grids[0]), len(grids[1])
    # The KDE lives in grid-index coordinates (each axis's cells of unit width): choose H on the sample
    # mapped there, carry it to N rows, and cap each axis at one cell.
    # (on at most KDE_POINTS_2D of them, evenly spaced in the sorted sample: LSCV_H's pair sums grow as their
    # square, 1.9 s at 5,000 pairs against 0.4 s here; H is carried to the table's rows from the points used)
    positions = thin(np.column_stack([grid_positions(sample[:, k], grids[k]) for k in (0, 1)]), KDE_POINTS_2D)
    result = select_bandwidth(positions, chosen, requested.backend, required=False) if len(positions) >= 3 else None
    if result is None:  # e.g. one column a function of the other: exact cells, no smoothing
        H, used_method, used_backend = np.zeros((2, 2)), "grid", "none"
    else:
        H = result.H * scale_bandwidth(1.0, len(positions), n, result.method, d=2) ** 2  # H ∝ h²
        H = cap_bandwidth_matrix(H, (1.0, 1.0))
        used_method, used_backend = result.method, result.backend

    rows_in, sum1, sum2, t1, t2, t12 = scan[:6]
    masses = smooth_masses_2d(bilinear_weights(rows_in, t1, t2, t12), (1.0, 1.0), H, interrupt=interrupt)
    sat = lambda a: summed_area(a).ravel().tolist()  # noqa: E731 - row-major (m1, m2)

    seconds = time.perf_counter() - started
    with np.errstate(over="ignore"):  # back to the columns' units (sums past float8's range become infinite)
        sums = np.stack([summed_area(sum1) / scales[0], summed_area(sum2) / scales[1]]).ravel().tolist()
    return Built2D(
        method=used_method, bandwidth=H.ravel().tolist(), sample_size=len(sample), backend=used_backend,
        n_rows=n, n_null=n_all - n, integer_valued=list(layout.integral), grid1=list(layout.grids[0]),
        grid2=list(layout.grids[1]), lattice1=list(layout.lattices[0]), lattice2=list(layout.lattices[1]),
        grid_size=[m1, m2], sat_count=sat(rows_in), sat_sum=sums, kde_sat=sat(cell_masses(masses)), seconds=seconds,
        pinned=scanned,
    )
