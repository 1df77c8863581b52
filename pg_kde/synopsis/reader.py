"""What a synopsis build reads of a table, in data terms: :class:`TableReader`, and
:class:`ArrayTableReader`, which answers it from NumPy arrays in memory so builds run without PostgreSQL.
(:class:`~pg_kde.synopsis.sql_reader.SqlTableReader` answers it with the refresh's SQL queries.)

A reader covers one column or a pair. Its ``stats()`` are in the columns' own units; every other answer is
in *scanned* units, the values times the reader's ``scales`` (powers of two, 1 by default, set by
:meth:`TableReader.scaled`), so sums of values near the ends of float8 stay finite. A row counts for a pair
only where both its values are non-NULL.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import NamedTuple, Optional, Protocol, Sequence, Tuple

import numpy as np

from .cells import on_lattice, period_counts

#: The seed of the repeatable samples (_kde_sample's hash and TABLESAMPLE ... REPEATABLE in SQL, the generator's
#: seed here).
SAMPLE_SEED = 20261122


#: Cell values a scan keeps at each end (the smallest and the largest, with repeats) unless the build asks
#: more (its ``tail``), and the most it may ask (TAIL_MOST in extension/cells.c).
TAIL_VALUES = 256
TAIL_MOST = 1 << 14

#: Bits of a quantum's integer (int64): a value's quanta stay below 2^63 in magnitude.
QUANTA_BITS = 62


@dataclass(frozen=True)
class Scan1D:
    """What one scan of a column says (the refresh's aggregate ``_kde_cells``, extension/cells.c), for a grid
    ``points``, sorted ``candidates`` (heavy values counted apart from the cells) and a ``quantum``.

    ``rows``: all rows, NULLs included; ``non_null``: non-NULL values; ``non_finite``: NaN and ±Infinity among
    them; ``non_integral``: finite values that are not whole numbers; ``off_lattice``: cell values that are
    not whole multiples of the quantum (as :func:`~pg_kde.synopsis.cells.on_lattice` judges); ``overflow``:
    cell values of 2^63 quanta or more (left out of the sums); ``lo``, ``hi``: min and max of the cells'
    values, ``all_lo``, ``all_hi``: of all finite values (None when there are none); ``cell_rows`` per cell
    (width_bucket's rule, values beyond the grid in the outer cells); ``cell_quanta`` per cell, the exact sum
    of rint(v / quantum) (Python ints); ``candidate_rows`` per candidate; ``low``, ``high``: the
    ``tail`` smallest and largest cell values (:data:`TAIL_VALUES` unless the build asked more), sorted,
    repeats included (all of them when the cells hold fewer than ``tail``); ``sample``: where asked for, a repeatable random sample of the finite values taken
    in the same pass (:meth:`TableReader.scan_1d`); ``phases``: where asked for, the finite values in each bin
    of a period (:func:`~pg_kde.synopsis.cells.period_counts`), counted in the same pass."""

    rows: int
    non_null: int
    non_finite: int
    non_integral: int
    off_lattice: int
    overflow: int
    lo: Optional[float]
    hi: Optional[float]
    all_lo: Optional[float]
    all_hi: Optional[float]
    cell_rows: np.ndarray
    cell_quanta: Tuple[int, ...]
    candidate_rows: np.ndarray
    quantum: float
    low: np.ndarray
    high: np.ndarray
    sample: Optional[np.ndarray] = None
    phases: Optional[np.ndarray] = None
    tail: int = TAIL_VALUES
    #: Whether some value's float8 may also stand for another value of the column's type (docs/math.md §7,
    #: "Values float8 cannot tell apart"): a bigint from 2^53, a numeric of more than 15 significant digits, a
    #: timestamp from 2^33 epoch seconds. Never for float8 values themselves (an array's).
    coarse: bool = False


@dataclass(frozen=True)
class Sample1D:
    """A 1-D build's first read: ``values``, up to the asked size of the finite non-NULL values (a repeatable
    random subset, :func:`thin`'s order); and over every row, ``rows`` (NULLs included), ``non_null``,
    ``non_finite`` (NaN, ±Infinity), ``lo`` and ``hi``, the min and max of the finite values (None when
    there are none). Where ``whole`` is False the read was a sample of the table's blocks
    (:meth:`TableReader.plan_sample_1d`): the values are theirs, the counts estimates scaled to the table,
    ``lo`` and ``hi`` the sampled values' own."""

    values: np.ndarray
    rows: int
    non_null: int
    non_finite: int
    lo: Optional[float]
    hi: Optional[float]
    whole: bool = True


def sample_share(size: int, rows: int) -> float:
    """The share of rows a repeatable sample of about ``size`` rows keeps of ``rows``: all of them when there
    are no more than ``size``, otherwise 1.25 times the wanted share (the sample is then thinned to size)."""
    return 1.0 if rows <= size else min(1.0, 1.25 * size / rows)


def fine_quantum(lo: float, hi: float) -> float:
    """The quantum of a column with no lattice: a power of two such that values up to 2^10 times max(|lo|, |hi|)
    (the sample's) stay within :data:`QUANTA_BITS` bits, about one float8 ulp of that magnitude (sums are
    then exact to far below what float8 stores)."""
    top = max(abs(lo), abs(hi))
    if top == 0.0 or not math.isfinite(top):
        return 1.0
    return math.ldexp(1.0, max(math.frexp(top)[1] + 10 - QUANTA_BITS, -1074))


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


class Cells2D(NamedTuple):
    """A 2-D scan: per cell (i, j) of the grids' product, each of shape (len(grid1) − 1, len(grid2) − 1),
    the rows with both values non-NULL and finite, the sums of v1 and v2, and the sums of t1, t2 and t1·t2
    (each value's offset in its cell, clamped to [0, 1]). Where the scan counted them (else None): per
    axis the values that are not whole numbers; per cell of each axis the min and max of its values on that
    axis (NaN: none); the pair's facts (:class:`TableStats`, integral from ``non_integral``); and the row
    sample the scan took (pairs, in the columns' units)."""

    rows: np.ndarray
    sum1: np.ndarray
    sum2: np.ndarray
    t1: np.ndarray
    t2: np.ndarray
    t12: np.ndarray
    non_integral: Optional[Tuple[int, int]] = None
    ends: Optional[Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = None  # min1, max1, min2, max2
    stats: Optional[TableStats] = None
    sample: Optional[np.ndarray] = None


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

    def row_estimate(self) -> int:
        """About how many rows the relation holds, for the sample's share: the same for unchanged data."""

    def sample(self, size: int, rows: int) -> np.ndarray:
        """Up to ``size`` rows with every column non-NULL, as an (m, d) float64 array: a repeatable random
        subset when ``rows`` (the relation's row count) exceeds ``size`` (the same whatever order the scan
        returns rows in: :func:`thin`), every such row otherwise."""

    def stats_and_sample(self, size: int) -> Tuple[TableStats, np.ndarray]:
        """A pair's :meth:`stats` and :meth:`sample` of ``size`` rows, in one pass where the reader can (a
        table's: its integrality then judged on the sample, which the scan's :attr:`Cells2D.non_integral`
        checks)."""

    def distinct_values(self, k: int, limit: int) -> Optional[np.ndarray]:
        """Column k's distinct values over the rows with every column non-NULL, sorted, in its own units; None
        where there are more than ``limit``."""

    def pair_counts(self, limit: int) -> Optional[Tuple[np.ndarray, np.ndarray]]:
        """The pair's distinct values over the rows with both non-NULL, sorted by the first then the second,
        as an (n, 2) array in the columns' own units, and each one's row count; None where there are more
        than ``limit``."""

    def plan_sample_2d(self, size: int) -> Tuple[TableStats, np.ndarray, bool]:
        """The read that places a pair's cells: (facts, sample of ``size`` pairs, whole). A large table's
        (more blocks than twice :func:`~.sql_reader.sample_blocks`): the pairs of a repeatable sample of
        its blocks and their facts scaled to the table (``whole`` False: :meth:`cells_2d` then takes the row
        sample and the table's facts, and the table is read once). Other relations: :meth:`stats_and_sample`."""

    def sample_1d(self, size: int, rows: int) -> Sample1D:
        """A single column's sample (as :meth:`sample`, finite values only) and its facts over every row
        (:class:`Sample1D`), in one pass where the reader can."""

    def plan_sample_1d(self, size: int, rows: Optional[int] = None) -> Sample1D:
        """The read that places a single column's grid: :meth:`sample_1d` of every row (``rows``: the
        relation's :meth:`row_estimate` when the caller has it), or, for a large table, a repeatable sample of
        its blocks (``whole`` False), so that :meth:`scan_1d` reads it once."""

    def scan_1d(self, points: np.ndarray, candidates: np.ndarray, quantum: float,
                sample: Optional[Tuple[int, float]] = None,
                phases: Optional[Tuple[float, int, float]] = None, tail: int = TAIL_VALUES) -> Scan1D:
        """One pass over a single column: :class:`Scan1D` for the grid ``points`` (two or more, ascending),
        the sorted ``candidates`` and the ``quantum``, keeping the ``tail`` smallest and largest cell values
        (1 to :data:`TAIL_MOST`). Counts and sums are exact integers, the same in any
        scan order. With ``sample`` (size, share), also a repeatable random sample of about that share of the
        finite values, thinned to size (:attr:`Scan1D.sample`); with ``phases`` (period, bins, step) of a
        time column, its finite values per bin of the period (:attr:`Scan1D.phases`)."""

    def cells_2d(self, grid1: np.ndarray, grid2: np.ndarray, sample: Optional[Tuple[int, float]] = None) -> Cells2D:
        """Per cell (i, j) of the grids' product (shape (len(grid1) − 1, len(grid2) − 1), clamped as in
        its outer cells), over the rows with both values non-NULL: :class:`Cells2D`, t being each value's
        offset within its cell (the cell as width_bucket finds it, clamped to the grid and to [0, 1]). With
        ``sample`` (size, share), also a repeatable sample of about that share of the pairs, thinned to size."""


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
    column) says which rows are NULL, in which case NaN is a value as in float8. ``blocks`` (rows per block,
    blocks sampled) makes :meth:`plan_sample_1d` sample whole blocks of consecutive rows, as the SQL reader
    does on a large table, where the table holds more than twice that many blocks."""

    values: Tuple[np.ndarray, ...]
    nulls: Optional[Tuple[np.ndarray, ...]] = None
    relation: str = "t"
    columns: Tuple[str, ...] = ()
    scales: Tuple[float, ...] = ()
    seed: int = SAMPLE_SEED
    blocks: Optional[Tuple[int, int]] = None

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

    def _block_rows(self):
        """(the rows of the blocks a sample of ``blocks`` takes, in order; the table's blocks; those sampled), or
        (None, 1, 1) where the table is read whole (no ``blocks``, or at most twice as many blocks)."""
        per_block, sampled = self.blocks or (1, 0)
        count = -(-self.row_count() // per_block)
        if not sampled or count <= 2 * sampled:
            return None, 1, 1
        chosen = np.sort(np.random.default_rng(self.seed).choice(count, sampled, replace=False))
        rows = (chosen[:, None] * per_block + np.arange(per_block)).ravel()
        return rows[rows < self.row_count()], count, sampled

    def stats_and_sample(self, size: int) -> Tuple[TableStats, np.ndarray]:
        stats = self.stats()
        return stats, self.sample(size, stats.rows)

    def distinct_values(self, k: int, limit: int) -> Optional[np.ndarray]:
        values = np.unique(self.values[k][self._valid])
        return values if len(values) <= limit else None

    def pair_counts(self, limit: int) -> Optional[Tuple[np.ndarray, np.ndarray]]:
        valid = self._valid
        pairs, counts = np.unique(np.column_stack([v[valid] for v in self.values]), axis=0, return_counts=True)
        return (pairs, counts.astype(np.int64)) if len(pairs) <= limit else None

    def plan_sample_2d(self, size: int) -> Tuple[TableStats, np.ndarray, bool]:
        rows, count, sampled = self._block_rows()
        if rows is None:
            return (*self.stats_and_sample(size), True)
        valid = self._valid[rows]
        pairs = np.column_stack([self.values[k][rows][valid] for k in (0, 1)])
        finite = np.all(np.isfinite(pairs), axis=1)
        if not finite.any():  # no pair in the sampled blocks: every row
            return (*self.stats_and_sample(size), True)
        scaled = lambda k: round(k * count / sampled)  # noqa: E731
        good = pairs[finite]
        stats = TableStats(rows=scaled(len(rows)), non_null=scaled(len(pairs)), lo=tuple(good.min(axis=0).tolist()),
                           hi=tuple(good.max(axis=0).tolist()), non_finite=scaled(int((~finite).sum())),
                           integral=tuple(bool(np.all(good[:, k] == np.trunc(good[:, k]))) for k in (0, 1)))
        return stats, thin(good, size), False

    def sample(self, size: int, rows: int) -> np.ndarray:
        valid = self._valid
        if rows > size:  # Bernoulli sampling at sample_share, as the SQL reader does
            rng = np.random.default_rng(self.seed)
            valid = valid & (rng.random(len(valid)) < sample_share(size, rows))
        return thin(np.column_stack([self._scanned(k)[valid] for k in range(len(self.values))]), size)

    def row_estimate(self) -> int:
        return self.row_count()

    def sample_1d(self, size: int, rows: int) -> Sample1D:
        v = self._scanned(0)[~self.nulls[0]]
        finite = v[np.isfinite(v)]
        sample = self.sample(size, rows)[:, 0]
        return Sample1D(values=sample[np.isfinite(sample)], rows=self.row_count(), non_null=len(v),
                        non_finite=len(v) - len(finite), lo=float(finite.min()) if len(finite) else None,
                        hi=float(finite.max()) if len(finite) else None)

    def plan_sample_1d(self, size: int, rows: Optional[int] = None) -> Sample1D:
        picked, count, sampled = self._block_rows()
        if picked is None:
            return self.sample_1d(size, self.row_count() if rows is None else rows)
        rows = picked
        v = self._scanned(0)[rows][~self.nulls[0][rows]]
        finite = v[np.isfinite(v)]
        scaled = lambda k: round(k * count / sampled)  # noqa: E731
        return Sample1D(values=thin(finite.reshape(-1, 1), size)[:, 0], rows=scaled(len(rows)),
                        non_null=scaled(len(v)), non_finite=scaled(len(v) - len(finite)),
                        lo=float(finite.min()) if len(finite) else None,
                        hi=float(finite.max()) if len(finite) else None, whole=False)

    def scan_1d(self, points: np.ndarray, candidates: np.ndarray, quantum: float,
                sample: Optional[Tuple[int, float]] = None,
                phases: Optional[Tuple[float, int, float]] = None, tail: int = TAIL_VALUES) -> Scan1D:
        if len(self.values) != 1:
            raise ValueError("a 1-D scan is of a single column")
        if not 1 <= tail <= TAIL_MOST:
            raise ValueError(f"the tail must be from 1 to {TAIL_MOST} cell values")
        taken = None
        if sample:
            size, share = sample
            keep = ~self.nulls[0] & (np.random.default_rng(self.seed).random(self.row_count()) < share)
            kept = self._scanned(0)[keep]
            taken = thin(kept[np.isfinite(kept)].reshape(-1, 1), size)[:, 0]
        v = self._scanned(0)[~self.nulls[0]]
        finite = v[np.isfinite(v)]
        candidates = np.asarray(candidates, dtype=np.float64)
        at = np.clip(np.searchsorted(candidates, finite), 0, max(len(candidates) - 1, 0))
        heavy = (candidates[at] == finite) if len(candidates) else np.zeros(len(finite), dtype=bool)
        candidate_rows = np.bincount(at[heavy], minlength=len(candidates)).astype(np.float64)
        rest = finite[~heavy]
        c, _ = _cells(rest, np.asarray(points, dtype=np.float64))
        m = len(points) - 1
        with np.errstate(over="ignore", invalid="ignore"):  # a far value past float8 in quanta: overflow, as in C
            t = rest / quantum
            r = np.rint(t)
            off = ~on_lattice(rest, quantum)
        fits = np.abs(r) < 2.0**63
        q = r[fits].astype(np.int64)
        high, low = np.zeros(m, dtype=np.int64), np.zeros(m, dtype=np.int64)  # q = high·2^32 + low, each summed exactly
        np.add.at(high, c[fits], q >> 32)
        np.add.at(low, c[fits], q & 0xFFFFFFFF)
        span = lambda a: (float(a.min()), float(a.max())) if len(a) else (None, None)  # noqa: E731
        ordered = np.sort(rest)
        (lo, hi), (all_lo, all_hi) = span(rest), span(finite)
        return Scan1D(rows=self.row_count(), non_null=len(v), non_finite=len(v) - len(finite),
                      non_integral=int((finite != np.trunc(finite)).sum()), off_lattice=int(off.sum()),
                      overflow=int((~fits).sum()), lo=lo, hi=hi, all_lo=all_lo, all_hi=all_hi,
                      cell_rows=np.bincount(c, minlength=m).astype(np.float64),
                      cell_quanta=tuple((int(a) << 32) + int(b) for a, b in zip(high, low)),
                      candidate_rows=candidate_rows, quantum=float(quantum), low=ordered[:tail],
                      high=ordered[-tail:] if len(ordered) else ordered, sample=taken, tail=int(tail),
                      phases=None if phases is None else period_counts(finite, *phases))

    def cells_2d(self, grid1: np.ndarray, grid2: np.ndarray, sample: Optional[Tuple[int, float]] = None):
        if len(self.values) != 2:
            raise ValueError("2-D cells are of a pair of columns")
        valid = self._valid
        taken = None
        if sample:
            size, share = sample
            keep = valid & (np.random.default_rng(self.seed).random(self.row_count()) < share)
            kept = np.column_stack([self.values[k][keep] for k in (0, 1)])
            taken = thin(kept[np.all(np.isfinite(kept), axis=1)], size)
        # rows with a NaN or an infinity, their other value NULL or not (as :meth:`stats` counts them)
        non_finite = int(np.logical_or.reduce([~m & ~np.isfinite(v) for v, m in zip(self.values, self.nulls)]).sum())
        v1, v2 = self._scanned(0)[valid], self._scanned(1)[valid]
        finite = np.isfinite(v1) & np.isfinite(v2)
        v1, v2 = v1[finite], v2[finite]
        (c1, t1), (c2, t2) = _cells(v1, grid1), _cells(v2, grid2)
        t1, t2 = np.clip(t1, 0.0, 1.0), np.clip(t2, 0.0, 1.0)
        shape = (len(grid1) - 1, len(grid2) - 1)
        flat = c1 * shape[1] + c2
        size = shape[0] * shape[1]
        ends = []
        for c, v, m in ((c1, v1, shape[0]), (c2, v2, shape[1])):
            low, high = np.full(m, np.nan), np.full(m, np.nan)
            if len(v):
                np.fmin.at(low, c, v)
                np.fmax.at(high, c, v)
            ends += [low, high]
        non_integral = (int(np.count_nonzero(v1 != np.trunc(v1))), int(np.count_nonzero(v2 != np.trunc(v2))))
        raw = [self.values[k][valid][finite] for k in (0, 1)]
        span = [(float(v.min()), float(v.max())) if len(v) else (None, None) for v in raw]
        stats = TableStats(rows=len(valid), non_null=int(valid.sum()), lo=(span[0][0], span[1][0]),
                           hi=(span[0][1], span[1][1]), non_finite=non_finite,
                           integral=(non_integral[0] == 0, non_integral[1] == 0))
        return Cells2D(*(np.bincount(flat, weights=w, minlength=size).astype(np.float64).reshape(shape)
                         for w in (None, v1, v2, t1, t2, t1 * t2)),
                       non_integral=non_integral, ends=tuple(ends), stats=stats, sample=taken)
