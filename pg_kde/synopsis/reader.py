"""What a synopsis build reads of a table, in data terms: :class:`TableReader`, and
:class:`ArrayTableReader`, which answers it from NumPy arrays in memory so builds run without PostgreSQL.
(:class:`~pg_kde.synopsis.sql_reader.SqlTableReader` answers it with the refresh's SQL queries.)

A reader covers one column or a pair. Its ``stats()`` are in the columns' own units; every other answer is
in *scanned* units, the values times the reader's ``scales`` (powers of two, 1 by default, set by
:meth:`TableReader.scaled`), so sums of values near the ends of float8 stay finite. A row counts for a pair
only where both its values are non-NULL.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional, Protocol, Sequence, Tuple

import numpy as np

from .cells import lattice_sums, on_lattice

#: The seed of the repeatable sample (TABLESAMPLE ... REPEATABLE in SQL, the generator's seed here).
SAMPLE_SEED = 20261122


@dataclass(frozen=True)
class Cells:
    """What one scan says of a 1-D grid's cells: per cell, its rows and their sum; the rows off the value
    lattice; the min and max of the values scanned (None when none were)."""

    rows: np.ndarray
    sums: np.ndarray
    off_lattice: int
    lo: Optional[float]
    hi: Optional[float]


@dataclass(frozen=True)
class TableStats:
    """One scan's facts about a column or a pair of columns.

    ``rows``: all rows; ``non_null``: rows with every column non-NULL; ``lo``, ``hi``: each column's min and
    max over those rows (None when there are none); ``non_finite``: rows holding NaN or ±Infinity in a
    column; ``integral``: per column, whether all its non-NULL values are whole numbers."""

    rows: int
    non_null: int
    lo: Tuple[Optional[float], ...]
    hi: Tuple[Optional[float], ...]
    non_finite: int
    integral: Tuple[bool, ...]


class TableReader(Protocol):
    """The reads a build makes. ``relation`` and ``columns`` name the table and its columns in messages
    (as SQL writes them: quoted where needed)."""

    relation: str
    columns: Tuple[str, ...]

    def scaled(self, scales: Sequence[float]) -> "TableReader":
        """The same reader, answering in units of each column times its scale."""

    def stats(self) -> TableStats:
        """Counts, range, non-finite rows and integrality, in the columns' own units."""

    def row_count(self) -> int:
        """How many rows the relation holds (NULLs included)."""

    def sample(self, size: int, rows: int) -> np.ndarray:
        """Up to ``size`` rows with every column non-NULL, as an (m, d) float64 array: a repeatable random
        subset when ``rows`` (the relation's row count) exceeds ``size`` (the same whatever order the scan
        returns rows in: :func:`thin`), every such row otherwise."""

    def value_counts(self, limit: int) -> Tuple[np.ndarray, np.ndarray]:
        """(values, counts) of the non-NULL values of a single column, for at most ``limit`` distinct
        values (which ones, when there are more, is unspecified)."""

    def counts_of(self, values: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """(values, counts) of those of ``values`` that occur in a single column (absent ones left out)."""

    def cells_1d(self, points: np.ndarray, exclude: np.ndarray, step: float) -> "Cells":
        """Per cell of the grid ``points`` (len(points) − 1 cells; values below or above the grid go to the
        first or last cell), over the non-NULL values not in ``exclude``: the rows and the sum of values;
        how many of those values are not whole multiples of ``step`` (0 when step is 0); their min and
        max. Sums are exact and independent of the scan's order: on a lattice, sums of whole steps;
        otherwise numeric."""

    def cells_2d(self, grid1: np.ndarray, grid2: np.ndarray) -> Tuple[np.ndarray, ...]:
        """Per cell (i, j) of the grids' product (shape (len(grid1) − 1, len(grid2) − 1), clamped as in
        :meth:`cells_1d`), over the rows with both values non-NULL: (rows, sum of v1, sum of v2, sum of t1,
        sum of t2, sum of t1·t2), t being each value's offset within its cell."""


def thin(rows: np.ndarray, size: int) -> np.ndarray:
    """At most ``size`` of the (m, d) rows, the same whatever order they came in: sorted (by the first column,
    then the next), then evenly spaced picks, kept in that order."""
    if len(rows) <= size:
        return rows
    order = np.lexsort(rows.T[::-1])
    picks = np.linspace(0, len(rows) - 1, int(size)).round().astype(np.int64)
    return rows[order[picks]]


def _cells(values: np.ndarray, points: np.ndarray):
    """Cell index (width_bucket(v, points) − 1 clamped to 0 .. len(points) − 2) and offset of each value."""
    c = np.clip(np.searchsorted(points, values, side="right") - 1, 0, len(points) - 2)
    return c, (values - points[c]) / (points[c + 1] - points[c])


@dataclass(frozen=True)
class ArrayTableReader:
    """A table held as NumPy arrays, one per column; NaN is NULL unless ``nulls`` (one boolean mask per
    column) says which rows are NULL, in which case NaN is a value as in float8."""

    values: Tuple[np.ndarray, ...]
    nulls: Optional[Tuple[np.ndarray, ...]] = None
    relation: str = "t"
    columns: Tuple[str, ...] = ()
    scales: Tuple[float, ...] = ()
    seed: int = SAMPLE_SEED

    def __post_init__(self):
        values = tuple(np.asarray(v, dtype=np.float64) for v in self.values)
        if not 1 <= len(values) <= 2 or len({len(v) for v in values}) != 1:
            raise ValueError("one or two columns of the same length")
        nulls = tuple(np.isnan(v) for v in values) if self.nulls is None else \
            tuple(np.asarray(m, dtype=bool) for m in self.nulls)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "nulls", nulls)
        if not self.columns:
            object.__setattr__(self, "columns", ("x",) if len(values) == 1 else ("x1", "x2"))
        if not self.scales:
            object.__setattr__(self, "scales", (1.0,) * len(values))

    def scaled(self, scales: Sequence[float]) -> "ArrayTableReader":
        return replace(self, scales=tuple(float(s) for s in scales))

    @property
    def _valid(self) -> np.ndarray:
        return ~np.logical_or.reduce(self.nulls)

    def _scanned(self, k: int) -> np.ndarray:
        return self.values[k] if self.scales[k] == 1.0 else self.values[k] * self.scales[k]

    def stats(self) -> TableStats:
        valid = self._valid
        n = int(valid.sum())
        lo = tuple(float(v[valid].min()) if n else None for v in self.values)
        hi = tuple(float(v[valid].max()) if n else None for v in self.values)
        bad = np.logical_or.reduce([~m & ~np.isfinite(v) for v, m in zip(self.values, self.nulls)])
        # float8 has NaN = NaN and trunc(±Infinity) = ±Infinity: both pass as whole numbers
        integral = tuple(bool(np.all((v[~m] == np.trunc(v[~m])) | np.isnan(v[~m])))
                         for v, m in zip(self.values, self.nulls))
        return TableStats(rows=len(valid), non_null=n, lo=lo, hi=hi, non_finite=int(bad.sum()), integral=integral)

    def row_count(self) -> int:
        return len(self.values[0])

    def sample(self, size: int, rows: int) -> np.ndarray:
        valid = self._valid
        if rows > size:  # Bernoulli sampling at 1.25 times the wanted share, as the SQL reader does
            rng = np.random.default_rng(self.seed)
            valid = valid & (rng.random(len(valid)) < min(1.0, 1.25 * size / rows))
        return thin(np.column_stack([self._scanned(k)[valid] for k in range(len(self.values))]), size)

    def _column(self) -> np.ndarray:
        if len(self.values) != 1:
            raise ValueError("value counts and 1-D cells are of a single column")
        return self._scanned(0)[~self.nulls[0]]

    def value_counts(self, limit: int) -> Tuple[np.ndarray, np.ndarray]:
        values, counts = np.unique(self._column(), return_counts=True)
        return values[:limit], counts[:limit].astype(np.float64)

    def counts_of(self, values: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        v = self._column()
        found, counts = np.unique(v[np.isin(v, values)], return_counts=True)
        return found, counts.astype(np.float64)

    def cells_1d(self, points: np.ndarray, exclude: np.ndarray, step: float):
        v = self._column()
        v = v[~np.isin(v, exclude)]
        c, _ = _cells(v, points)
        m = len(points) - 1
        rows = np.bincount(c, minlength=m).astype(np.float64)
        lo, hi = (float(v.min()), float(v.max())) if len(v) else (None, None)
        if step > 0:
            off = int((~on_lattice(v, step)).sum())
            steps = np.zeros(m, dtype=np.int64)
            np.add.at(steps, c, np.round(v / step).astype(np.int64))
            return Cells(rows, lattice_sums(steps, step), off, lo, hi)
        return Cells(rows, np.bincount(c, weights=v, minlength=m), 0, lo, hi)

    def cells_2d(self, grid1: np.ndarray, grid2: np.ndarray):
        if len(self.values) != 2:
            raise ValueError("2-D cells are of a pair of columns")
        valid = self._valid
        v1, v2 = self._scanned(0)[valid], self._scanned(1)[valid]
        (c1, t1), (c2, t2) = _cells(v1, grid1), _cells(v2, grid2)
        shape = (len(grid1) - 1, len(grid2) - 1)
        flat = c1 * shape[1] + c2
        size = shape[0] * shape[1]
        return tuple(np.bincount(flat, weights=w, minlength=size).astype(np.float64).reshape(shape)
                     for w in (None, v1, v2, t1, t2, t1 * t2))
