"""Building synopses: :func:`build_1d` and :func:`build_2d` read a table through a
:class:`~pg_kde.synopsis.reader.TableReader` and return what the catalog stores
(:class:`~pg_kde.synopsis.catalog.Built1D`, :class:`~pg_kde.synopsis.catalog.Built2D`). No I/O of their
own: the reader reads, the caller's ``select_bandwidth`` chooses bandwidths, ``interrupt`` is called
between slices of the smoothing. Errors the user can fix raise :class:`~pg_kde._errors.UserError`.
"""

from __future__ import annotations

import math
import time
import warnings
from typing import Callable, Optional

import numpy as np

from .. import bandwidth
from .._errors import BackendUnavailableError, DeviceOutOfMemoryError, UserError
from .._slices import Interrupt
from .catalog import Built1D, Built2D, Requested
from .cells import (
    ATOM_BYTES,
    ROW_BYTES_1D,
    cells_for_budget,
    depth_grid,
    grid_size_2d,
    kde_at,
    lattice_grid,
    lattice_step,
    repeatable_bandwidth,
    shape_variance,
    trim_ends,
)
from .maths import (
    ATOM_SHARE,
    Atoms,
    atom_candidates,
    bilinear_weights,
    cap_bandwidth_matrix,
    cell_masses,
    cell_prefix,
    grid_positions,
    quantile_grid,
    scale_bandwidth,
    smooth_masses_2d,
    summed_area,
)
from .reader import TableReader

#: Beyond 2^53 every float8 is a whole number: such columns are not treated as integer-valued.
INTEGRAL_LIMIT = 2.0**53
#: Largest magnitude scanned: n * 2^960 stays finite for any row count (n < 2^63).
_SCAN_LIMIT = 2.0**960

#: The plug-in scale synopses use: min(s, IQR/1.349), robust to the outliers real columns hold (the cells
#: are exact; the bandwidth only shapes rows inside a cell). kde_bandwidth() keeps the library's default,
#: the paper's sample standard deviation. Both are said in the refresh's summary and docs/math.md §2.
SYNOPSIS_SCALE = "minim"

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


def _selection_unit(values: np.ndarray) -> float:
    """1, or a power of two near the values' magnitude when it is past 2^500: the selectors square
    differences of values, which would overflow. Bandwidths are equivariant, so h = h(x / u) * u."""
    top = float(np.max(np.abs(values))) if len(values) else 0.0
    return 1.0 if top < 2.0**500 else math.ldexp(1.0, math.frexp(top)[1])


def build_1d(reader: TableReader, requested: Requested, select_bandwidth: SelectBandwidth = select_bandwidth, *,
             interrupt: Interrupt = None, started: Optional[float] = None) -> Built1D:
    """A 1-D synopsis of the reader's column within ``requested.budget`` bytes: exact heavy values (all
    values when they fit), and the other rows' exact cells, on the column's value lattice when it has one,
    with the KDE's density at the cell boundaries (docs/math.md §7, :mod:`.cells`). ``started`` (a
    :func:`time.perf_counter` reading) is where ``seconds`` counts from; the call by default."""
    started = time.perf_counter() if started is None else started
    chosen = counts_method(requested.method, 1)
    rel, (col,) = reader.relation, reader.columns
    stats = reader.stats()
    n_all, n = stats.rows, stats.non_null
    if n == 0:
        raise UserError(f"pg_kde: column {col} of {rel} has no non-NULL values" if n_all else f"pg_kde: {rel} is empty")
    if stats.non_finite:
        raise UserError(f"pg_kde: column {col} of {rel} holds {stats.non_finite} NaN or infinite value(s); "
                        "a synopsis needs finite values")
    budget = requested.budget_1d
    lo, hi = stats.lo[0], stats.hi[0]
    # Values near the ends of float8: scan a power-of-two multiple (exact) so sums and differences stay
    # finite; everything is stored in the column's units again at the end. (No lattice then.)
    scale = _scan_scale(lo, hi)
    lo, hi = lo * scale, hi * scale
    reader = reader.scaled([scale])

    sample = reader.sample(requested.sample_size, n_all)[:, 0]
    step = lattice_step(sample) if scale == 1.0 else 0.0
    if stats.integral[0] and step == 0.0 and max(abs(lo), abs(hi)) < INTEGRAL_LIMIT:
        step = 1.0  # whole numbers beyond what a sample shows (e.g. two values, 2^40 apart)
    # Few distinct values: the whole column as an exact frequency table, when it fits in the budget.
    fits = max(0, (budget - ROW_BYTES_1D) // ATOM_BYTES)
    atoms = None
    if len(np.unique(sample)) <= fits:
        values, counts = reader.value_counts(fits + 1)
        if len(values) <= fits:
            atoms = Atoms.from_counts(values, counts)
    most_cells = cells_for_budget(budget, 0)
    heavy = atom_candidates(sample, 1.0 / most_cells)
    if atoms is None and step > 0:
        # On a lattice, heavy values (a cell's share of rows or more: spikes no shape follows) get cells of
        # their own, at most a quarter of the cells.
        atoms = Atoms.from_counts([], [])
        values, counts = np.unique(sample, return_counts=True)
        kept = np.isin(values, heavy)
        heavy = Atoms.from_counts(values[kept], counts[kept]).largest(most_cells // 4).values
    elif atoms is None:
        # A continuous column's heavy values (ties) are kept exactly beside the cells, at most a quarter of
        # the budget.
        values, counts = reader.counts_of(heavy)
        atoms = Atoms.from_counts(values, counts, min_count=max(ATOM_SHARE, 1.0 / most_cells) * n)
        atoms = atoms.largest(max(0, (budget // 4) // ATOM_BYTES))
    kde_rows = n - atoms.rows

    h, used_method, used_backend, used_sample, used_scale = 0.0, "exact", "none", 0, None
    grid, cell_count, cell_sum, density, tau2 = [], [], [], [], 0.0
    if kde_rows > 0:
        rest = sample[~np.isin(sample, atoms.values)]
        cells = cells_for_budget(budget, len(atoms.values))
        if requested.grid_size:  # an explicit grid size (points) overrides the budget
            cells = requested.grid_size - 1
        source = rest if len(rest) else sample
        points = lattice_grid(source, lo, hi, step, cells, heavy) if step > 0 else depth_grid(source, lo, hi, cells)
        scan = reader.cells_1d(points, atoms.values, step)
        if scan.off_lattice:  # the sample showed a lattice the table does not keep: a continuous column
            step = 0.0
            points = depth_grid(source, lo, hi, cells)
            scan = reader.cells_1d(points, atoms.values, 0.0)
        # The outer cells end where the rows off the heavy values do (not over heavy values beyond them).
        points = trim_ends(points, scan.lo, scan.hi, step)
        rows_in, sums_in = scan.rows, scan.sums
        typical = float(np.median(np.diff(points)))  # a typical cell's width
        if len(rest) >= 50 and np.ptp(rest) > 0:
            # Chosen on the sample, capped at a typical cell: the cells are exact, the KDE only says where
            # rows sit inside a cell (docs/math.md §7). Rounded, so refreshes repeat bit for bit.
            unit = _selection_unit(rest)
            result = select_bandwidth(rest / unit, chosen, requested.backend, scale=SYNOPSIS_SCALE)
            h = repeatable_bandwidth(min(math.sqrt(result.H[0, 0]) * unit, typical))
            used_method, used_backend, used_sample = result.method, result.backend, len(rest)
            used_scale = result.details.get("scale")
        else:  # too few rows off the heavy values to choose a bandwidth: the grid's own resolution
            h, used_method, used_sample = repeatable_bandwidth(typical), "grid", len(rest)
        # The KDE of lattice data spreads each value over its step: smooth at that scale too.
        h_eff = math.hypot(h, step / math.sqrt(12.0))
        f = kde_at(points, rest if len(rest) else sample, h_eff, points[0], points[-1], interrupt=interrupt)
        # Relative to the grid's mean density (f integrates to 1 over it): O(1) numbers, whatever the units.
        stored = (f * 2 * (points[-1] / 2 - points[0] / 2)).astype(np.float32).astype(np.float64)
        tau2 = shape_variance(points, rows_in, sums_in, stored, rest, step, population=len(sample) >= n)
        grid = points.tolist()
        cell_count, cell_sum = cell_prefix(rows_in), cell_prefix(sums_in)
        density = stored.tolist()

    heavy_rows = atoms.rows
    atom_count, atom_sum = atoms.cumulative()
    if scale != 1.0:  # back to the column's units (sums past float8's range become infinite)
        with np.errstate(over="ignore"):
            h, grid, cell_sum, atom_sum = h / scale, *(
                (np.asarray(a, dtype=np.float64) / scale).tolist() for a in (grid, cell_sum, atom_sum))
            atoms = Atoms(atoms.values / scale, atoms.counts)
    return Built1D(
        method=used_method, bandwidth=float(h), sample_size=used_sample, backend=used_backend, scale=used_scale,
        n_rows=n, n_null=n_all - n, step=float(step), atom_values=atoms.values.tolist(),
        atom_cum_count=atom_count, atom_cum_sum=atom_sum, heavy_rows=heavy_rows, kde_rows=kde_rows, grid=grid,
        grid_size=len(grid), cell_cum_count=cell_count, cell_cum_sum=cell_sum, density=density, shape_var=float(tau2),
        budget=budget, seconds=time.perf_counter() - started,
    )


def build_2d(reader: TableReader, requested: Requested, select_bandwidth: SelectBandwidth = select_bandwidth, *,
             interrupt: Interrupt = None, started: Optional[float] = None) -> Built2D:
    """A 2-D synopsis of the reader's pair of columns on an equal-depth grid: exact summed-area tables of
    the grid cells' counts and sums (one scan), and a KDE in grid-index coordinates with a bandwidth matrix
    (LSCV_H by default) shaping the cells a box cuts. ``started`` as in :func:`build_1d`."""
    started = time.perf_counter() if started is None else started
    chosen = counts_method(requested.method, 2)
    rel = reader.relation
    stats = reader.stats()
    n_all, n = stats.rows, stats.non_null
    names = ", ".join(reader.columns)
    if n == 0:
        raise UserError(f"pg_kde: {rel} has no rows with both {names} non-NULL" if n_all else f"pg_kde: {rel} is empty")
    if stats.non_finite:
        raise UserError(f"pg_kde: columns {names} of {rel} hold {stats.non_finite} NaN or infinite value(s); "
                        "a synopsis needs finite values")
    for k, c in enumerate(reader.columns):
        if stats.lo[k] == stats.hi[k]:
            raise UserError(f"pg_kde: column {c} of {rel} is constant where both columns are non-NULL; "
                            "use a 1-D synopsis of the other column")
    bounds = [(stats.lo[k], stats.hi[k]) for k in (0, 1)]
    integral = [stats.integral[k] and max(map(abs, bounds[k])) < INTEGRAL_LIMIT for k in (0, 1)]
    scales = [_scan_scale(*b) for b in bounds]  # as in the 1-D build: scan power-of-two multiples
    reader = reader.scaled(scales)
    sample = reader.sample(requested.sample_size, n_all)
    # Within the budget: a discretised axis's value lattice takes at most an eighth of it; the grid the rest.
    budget = requested.budget_2d
    lattice_values = max(2, budget // (8 * 8))
    size = requested.grid_size or grid_size_2d(budget)

    def layout(size):
        return [quantile_grid(sample[:, k], bounds[k][0] * scales[k], bounds[k][1] * scales[k], integral[k], size,
                              lattice_values) for k in (0, 1)]

    layouts = layout(size)
    if not requested.grid_size:
        lattice_bytes = 8 * sum(len(v) for _, v in layouts if v is not None)
        if lattice_bytes:
            size = grid_size_2d(budget - lattice_bytes)
            layouts = layout(size)
    grids = [g for g, _ in layouts]
    lattices = [(v.tolist() if v is not None else []) for _, v in layouts]
    m1, m2 = len(grids[0]), len(grids[1])
    # The KDE lives in grid-index coordinates (each axis's cells of unit width): choose H on the sample
    # mapped there, carry it to N rows, and cap each axis at one cell.
    positions = np.column_stack([grid_positions(sample[:, k], grids[k]) for k in (0, 1)])
    result = select_bandwidth(positions, chosen, requested.backend, required=False)
    if result is None:  # e.g. one column a function of the other: exact cells, no smoothing
        H, used_method, used_backend = np.zeros((2, 2)), "grid", "none"
    else:
        H = result.H * scale_bandwidth(1.0, len(sample), n, result.method, d=2) ** 2  # H ∝ h²
        H = cap_bandwidth_matrix(H, (1.0, 1.0))
        used_method, used_backend = result.method, result.backend

    rows_in, sum1, sum2, t1, t2, t12 = reader.cells_2d(grids[0], grids[1])
    masses = smooth_masses_2d(bilinear_weights(rows_in, t1, t2, t12), (1.0, 1.0), H, interrupt=interrupt)
    sat = lambda a: summed_area(a).ravel().tolist()  # noqa: E731 - row-major (m1, m2)

    seconds = time.perf_counter() - started
    with np.errstate(over="ignore"):  # back to the columns' units (sums past float8's range become infinite)
        sums = np.stack([summed_area(sum1) / scales[0], summed_area(sum2) / scales[1]]).ravel().tolist()
        grids = [grids[k] / scales[k] for k in (0, 1)]
        lattices = [(np.asarray(lattices[k], dtype=np.float64) / scales[k]).tolist() for k in (0, 1)]
    return Built2D(
        method=used_method, bandwidth=H.ravel().tolist(), sample_size=len(sample), backend=used_backend,
        n_rows=n, n_null=n_all - n, integer_valued=integral, grid1=grids[0].tolist(), grid2=grids[1].tolist(),
        lattice1=lattices[0], lattice2=lattices[1], grid_size=[m1, m2], sat_count=sat(rows_in), sat_sum=sums,
        kde_sat=sat(cell_masses(masses)), seconds=seconds,
    )
