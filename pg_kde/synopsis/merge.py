"""The synopsis of a table made of parts (a partitioned table's partitions) from the parts' 1-D synopses:
:func:`merge_1d` (docs/math.md §9).

What stays exact: heavy values add up value by value; a cell boundary of the merge is kept only where every
part's count and sum below it are known exactly (one of the part's own boundaries, or outside the part's
range), so the merged cells' counts and sums are exact and the hard bounds of every query still hold. Parts
on disjoint ranges (a table partitioned by the synopsis' column) keep all their boundaries; parts whose
ranges overlap keep the boundaries they share, which is why a partitioned table's refresh builds its
partitions on the parent's grid (:func:`pg_kde.synopsis.build.build_1d`'s ``grid_hint``). What is
approximate: the shape inside a merged cell, from the parts' KDE densities at its ends (their mixture).
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from .catalog import Built1D, Built2D
from .cells import (ATOM_BYTES, BOUNDARY_BYTES, PROFILE_PRIOR, ROW_BYTES_1D, cells_for_budget, make_profile, on_lattice,
                    period_counts, profile_bytes, stored_density)
from .packing import pack_atoms
from .query import SHAPE_DOUBT
from .maths import Atoms, ulp


def merged_step(steps: Sequence[float]) -> float:
    """The lattice every part's values lie on: the parts' common step, or the smallest when every other is a
    whole multiple of it; 0 (none) when a part has none or they do not nest."""
    steps = [float(s) for s in steps]
    if not steps or min(steps) <= 0:
        return 0.0
    q = min(steps)
    return q if all(on_lattice(np.array([s]), q)[0] for s in steps) else 0.0


def _per_value(cum: Sequence[float]) -> np.ndarray:
    c = np.asarray(cum, dtype=np.float64)
    return np.diff(np.concatenate([[0.0], c])) if len(c) else c


def _exact_at(x: float, grid: np.ndarray, step: float, last: float) -> bool:
    """Whether a part's count and sum of values below x are known: x at or before its first boundary, past
    its last, on one of its boundaries (its last only on a lattice, where no value sits on it), or the
    merge's own last boundary (its last cell keeps the values on its right end)."""
    if x <= grid[0] or x > grid[-1] or x == last:
        return True
    i = int(np.searchsorted(grid, x))
    return i < len(grid) and grid[i] == x and (i < len(grid) - 1 or step > 0)


def _below(x: float, grid: np.ndarray, cum: np.ndarray, last: float) -> float:
    """A part's cumulative count (or sum) of values below x, at a point where it is exact."""
    if x <= grid[0]:
        return 0.0
    if x > grid[-1] or x == last:
        return float(cum[-1])
    return float(cum[int(np.searchsorted(grid, x))])


def _thin(points: np.ndarray, cum: np.ndarray, cells: int) -> np.ndarray:
    """Indices of at most ``cells`` + 1 of the points, equal-depth by the cumulative counts: the ends, and
    for each quantile of the rows the point nearest it."""
    if len(points) - 1 <= cells:
        return np.arange(len(points))
    targets = cum[-1] * np.arange(1, cells) / cells
    picks = np.clip(np.searchsorted(cum, targets), 1, len(points) - 2)
    nearer = np.where(np.abs(cum[picks - 1] - targets) < np.abs(cum[picks] - targets), picks - 1, picks)
    return np.unique(np.concatenate([[0], np.clip(nearer, 1, len(points) - 2), [len(points) - 1]]))


def _whole(v: float, parts: Sequence[Built1D], own: Sequence[set]) -> bool:
    """Whether every part that may hold rows of the value v holds them all among its heavy values (``own``:
    each part's, whole): v is one of them, or the part's cell that would hold it (if any) holds no rows."""
    for p, heavy in zip(parts, own):
        grid = p.grid
        if p.grid_size < 2 or v < grid[0] or v > grid[-1] or v in heavy:
            continue
        c = min(int(np.searchsorted(grid, v, "right")) - 1, len(grid) - 2)  # (the last cell holds its end)
        if p.cell_cum_count[c + 1] - p.cell_cum_count[c] > 0:
            return False
    return True


def merge_1d(parts: Sequence[Built1D], budget: int, seconds: float = 0.0) -> Built1D:
    """The 1-D synopsis of the union of ``parts`` (each built with :func:`pg_kde.synopsis.build.build_1d`)
    within ``budget`` bytes."""
    parts = [p for p in parts if p.n_rows > 0]
    n_rows = sum(p.n_rows for p in parts)
    n_null = sum(p.n_null for p in parts)
    # Heavy values: summed value by value.
    heavy: dict = {}
    for p in parts:
        for v, k, s in zip(p.atom_values, _per_value(p.atom_cum_count), _per_value(p.atom_cum_sum)):
            old = heavy.get(v, (0.0, 0.0))
            heavy[v] = (old[0] + k, old[1] + s)
    celled = [p for p in parts if p.grid_size >= 2]
    # Every part's lattice, frequency tables' too: their values may end up in the merged cells.
    step = merged_step([p.step for p in parts])
    # (with no cells, room for the values beside the few cells that any demoted value needs, as _plan_1d)
    room = (max(0, (budget // 4) // ATOM_BYTES) if celled
            else max(0, (budget - ROW_BYTES_1D - 3 * BOUNDARY_BYTES) // ATOM_BYTES))
    values = np.array(sorted(heavy), dtype=np.float64)
    counts = np.array([heavy[v][0] for v in values])
    kept = Atoms.from_counts(values, counts).largest(room).values
    # On a lattice, every heavy value when their pack (.packing) fits where their arrays would not.
    pack = pack_atoms(values, np.cumsum(counts), step) if step > 0 and len(values) > len(kept) else None
    heavy_bytes = None
    if pack is not None and len(pack) <= ((budget // 4) if celled else budget - ROW_BYTES_1D):
        kept, heavy_bytes = values, len(pack)
    demoted = values[~np.isin(values, kept)].tolist()
    # The merged heavy values are whole (each holds every row of its value: the queries take their slots out
    # of a cut cell's shape, docs/math.md §7) where every part's are and no part has one of them in a cell:
    # a value heavy in one part and in another's cells keeps that part's rows of it in the merged cells.
    own = [set(p.atom_values) for p in parts]
    whole = all(p.heavy_whole for p in parts) and all(_whole(v, parts, own) for v in kept)

    # A periodic profile (a time column's) when every celled part has one of the same kind: the rows per bin
    # of every part's cells (its profile's shares of the rows it shapes, its pseudo-rows taken off) and of the
    # heavy values that go back into the cells, counted again (docs/math.md §7); made from the rows the parts'
    # profiles were made from (all of them since 0.16.0) and those heavy values'.
    period, profile = 0.0, []
    kinds = {(p.period, len(p.profile), p.step) for p in celled}
    if len(kinds) == 1 and next(iter(kinds))[0] > 0 and next(iter(kinds))[2] == step:
        period, bins = celled[0].period, len(celled[0].profile) - 2
        per_bin, made_from = np.zeros(bins), 0.0
        for p in celled:
            shares, k = np.diff(np.asarray(p.profile[:bins + 1], dtype=np.float64)), float(p.profile[-1])
            seen = np.maximum(shares * (k + bins * PROFILE_PRIOR) - PROFILE_PRIOR, 0.0)  # its rows per bin
            per_bin += seen * (p.kde_rows / max(seen.sum(), 1.0))
            made_from += k
        if demoted:
            rows = np.array([heavy[v][0] for v in demoted])
            per_bin += period_counts(np.array(demoted), period, bins, step, weights=rows)
            made_from += float(rows.sum())
        profile = make_profile(per_bin)
        profile[-1] = np.float32(made_from)
        profile = profile.tolist()
    cells_budget = budget - (profile_bytes(len(profile) - 2) if profile else 0)

    grids = [np.asarray(p.grid, dtype=np.float64) for p in celled]
    ends = [g[0] for g in grids] + ([float(min(demoted))] if demoted else [])
    tops = [g[-1] for g in grids] + ([float(max(demoted))] if demoted else [])
    grid, cum_count, cum_sum, density, kde_rows = [], [], [], [], 0
    if ends:
        first, last = min(ends), max(tops)
        if last == first:  # one value in all: a cell of width 1 around it
            first, last = first - 0.5, last + 0.5
        candidates = np.unique(np.concatenate(grids + [np.array([first, last])]))
        candidates = candidates[(candidates >= first) & (candidates <= last)]
        exact = np.array([all(_exact_at(x, g, p.step, last) for g, p in zip(grids, celled)) for x in candidates])
        points = candidates[exact]
        counts_below = np.zeros(len(points))
        sums_below = np.zeros(len(points))
        rows_density = np.zeros(len(points))  # rows per unit of the parts' KDEs, summed
        for g, p in zip(grids, celled):
            cc, cs = np.asarray(p.cell_cum_count), np.asarray(p.cell_cum_sum)
            counts_below += [_below(x, g, cc, last) for x in points]
            sums_below += [_below(x, g, cs, last) for x in points]
            inside = (points >= g[0]) & (points <= g[-1])
            at = np.searchsorted(g, points[inside])
            width = 2 * (g[-1] / 2 - g[0] / 2)
            rows_density[inside] += np.asarray(p.density, dtype=np.float64)[at] * (p.kde_rows / width)
        for v in demoted:  # heavy values beyond the budget's room: back into the cell holding them, exactly
            k, s = heavy[v]
            after = points > v
            after[-1] = True  # the last cell keeps the values on its right end
            counts_below[after] += k
            sums_below[after] += s
        keep = _thin(points, counts_below, cells_for_budget(cells_budget, len(kept), heavy_bytes))
        points, counts_below, sums_below, rows_density = (a[keep] for a in (points, counts_below, sums_below,
                                                                             rows_density))
        kde_rows = int(round(counts_below[-1]))
        # Relative to the merged grid's mean density, as a part stores it.
        mean = max(sum(p.kde_rows for p in celled), 1) / (2 * (points[-1] / 2 - points[0] / 2))
        grid, cum_count, cum_sum = points.tolist(), counts_below.tolist(), sums_below.tolist()
        density = stored_density(rows_density / mean).tolist()
    atoms = Atoms(kept, np.array([heavy[v][0] for v in kept]))
    atom_count, atom_sum = atoms.cumulative(step)
    backends = sorted({p.backend for p in parts} - {"none"}) or ["none"]
    return Built1D(
        method="merge", bandwidth=max((p.bandwidth for p in parts), default=0.0),
        sample_size=sum(p.sample_size for p in parts), backend="+".join(backends), scale=None, n_rows=n_rows,
        n_null=n_null, step=step, atom_values=atoms.values.tolist(), atom_cum_count=atom_count,
        atom_cum_sum=atom_sum, heavy_rows=atoms.rows, kde_rows=kde_rows, grid=grid, grid_size=len(grid),
        cell_cum_count=cum_count, cell_cum_sum=cum_sum, density=density,
        shape_var=max((p.shape_var for p in celled), default=0.0), budget=budget, seconds=seconds,
        period=period, profile=profile, sum_slack=_merged_slack(parts, celled, len(demoted)) if grid else 0.0,
        sum_quantum=(None if any(p.sum_quantum is None for p in celled)
                     else max((p.sum_quantum for p in celled), default=0.0)) if grid else 0.0,
        heavy_whole=whole, doubt_weight=_merged_weight(celled),
        # (one part's value float8 cannot tell apart is the merge's; a part that does not know, the merge neither)
        coarse=None if any(p.coarse is None for p in parts) else any(p.coarse for p in parts),
    )


def _merged_weight(celled: Sequence[Built1D]) -> Optional[float]:
    """The merged synopsis' doubt weight: the largest of its celled parts' (one not calibrated weighs
    :data:`~pg_kde.synopsis.query.SHAPE_DOUBT`), None where none of them is calibrated. Each part's weight was
    calibrated on its own cells; the merged cells' errors are not measured, so the merge takes the widest
    intervals any part's calibration asked for (as it takes the largest shape variance)."""
    weights = [p.doubt_weight for p in celled]
    if all(w is None for w in weights):
        return None
    return max(SHAPE_DOUBT if w is None else w for w in weights)


def _merged_slack(parts: Sequence[Built1D], celled: Sequence[Built1D], demoted: int) -> Optional[float]:
    """The merged prefix sums' slack (:attr:`Built1D.sum_slack`): the celled parts' own, plus a rounding at each
    of a merged prefix's additions (one a part, a few a demoted heavy value, whose sum is read back from
    running sums), each within one ulp of B, the magnitudes added: every part's largest prefix sums. None
    where a part's is not known."""
    if any(p.sum_slack is None for p in celled):
        return None
    magnitude = sum(max(np.max(np.abs(np.asarray(a, dtype=np.float64)), initial=0.0)
                        for a in (p.cell_cum_sum, p.atom_cum_sum)) for p in parts)
    roundings = 2 * len(celled) + 3 * demoted + 4
    return sum(p.sum_slack for p in celled) + 4.0 * roundings * ulp(magnitude)


def merge_2d(parts: Sequence[Built2D], seconds: float = 0.0) -> Built2D:
    """The 2-D synopsis of the union of ``parts``, each built on the same cells
    (:func:`pg_kde.synopsis.build.build_2d` with one :class:`~pg_kde.synopsis.build.Layout2D`): the
    summed-area tables of counts and sums add exactly, and so do the KDE's cell masses (each part's rows
    smoothed with its own bandwidth: the merged KDE is their mixture). Its bandwidth is the parts' H
    weighted by their rows (what the summary shows; queries read the masses)."""
    parts = [p for p in parts if p.n_rows > 0]
    first = parts[0]
    layout = (first.grid1, first.grid2, first.lattice1, first.lattice2, list(first.integer_valued))
    if any((p.grid1, p.grid2, p.lattice1, p.lattice2, list(p.integer_valued)) != layout or p.pair_pack
           for p in parts):  # (a pair table's one cell is no part of a shared layout)
        raise ValueError("2-D parts merge only on the same cells")
    add = lambda name: np.sum([np.asarray(getattr(p, name), dtype=np.float64) for p in parts], axis=0).tolist()  # noqa: E731
    rows = np.array([p.n_rows for p in parts], dtype=np.float64)
    H = (np.array([p.bandwidth for p in parts], dtype=np.float64) * rows[:, None]).sum(axis=0) / rows.sum()
    backends = sorted({p.backend for p in parts} - {"none"}) or ["none"]
    return Built2D(
        method="merge", bandwidth=H.tolist(), sample_size=sum(p.sample_size for p in parts),
        backend="+".join(backends), n_rows=int(rows.sum()), n_null=sum(p.n_null for p in parts),
        integer_valued=list(first.integer_valued), grid1=list(first.grid1), grid2=list(first.grid2),
        lattice1=list(first.lattice1), lattice2=list(first.lattice2), grid_size=list(first.grid_size),
        sat_count=add("sat_count"), sat_sum=add("sat_sum"), kde_sat=add("kde_sat"), seconds=seconds,
    )
