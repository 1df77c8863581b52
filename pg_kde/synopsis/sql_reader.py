"""The :class:`~pg_kde.synopsis.reader.TableReader` of a refresh: each read is one SQL query through
PL/Python's ``plpy`` (nothing here imports plpy).

Identifiers reach SQL text only quoted: the relation as ``format('%I.%I')`` wrote it, the columns through
``plpy.quote_ident``; values are query parameters, and the scales (powers of two) and limits are numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Sequence, Tuple

import numpy as np

from .cells import lattice_sums
from .reader import SAMPLE_SEED, Cells, TableStats, thin

#: Relation kinds TABLESAMPLE can read (tables, partitioned tables, materialized views).
_SAMPLEABLE = {"r", "p", "m"}
_FETCH_ROWS = 10000


def _scaled(expr: str, scale: float) -> str:
    """The float8 value of a quoted column, times a power of two when scale is not 1."""
    return f"({expr})::float8" if scale == 1.0 else f"({expr})::float8 * {scale!r}::float8"


def _sample(plpy, rel: str, kind: str, columns: list, exprs: list, n_total: int, size: int,
            seed: int = SAMPLE_SEED) -> np.ndarray:
    """Up to ``size`` rows of the given float8 expressions with no NULLs, as an (m, len(exprs)) array.

    Bernoulli sampling (repeatable) at 1.25 times the wanted share when the relation holds more rows than
    wanted, all rows otherwise; then :func:`~pg_kde.synopsis.reader.thin` keeps ``size`` of them whatever
    order the scan returned them in (a large table's scan may start mid-table: synchronized scans). Only the
    named columns are read (a view may grant no others), in chunks."""
    select = ", ".join(f"({e})::float8" for e in exprs)
    not_null = " AND ".join(f"({e}) IS NOT NULL" for e in exprs)
    source = rel
    if n_total > size:
        percent = min(100.0, 100.0 * 1.25 * size / n_total)
        if kind in _SAMPLEABLE:
            source = f"{rel} TABLESAMPLE BERNOULLI ({percent!r}) REPEATABLE ({seed})"
        else:  # views and foreign tables: a random subset of the named columns only
            source = f"(SELECT {', '.join(columns)} FROM {rel} WHERE pg_catalog.random() < {percent / 100.0!r}) s"
    query = f"SELECT ARRAY[{select}] AS r FROM {source} WHERE {not_null}"
    chunks = []
    cursor = plpy.cursor(query)
    while True:
        rows = cursor.fetch(_FETCH_ROWS)
        if not rows:
            break
        chunks.append(np.array([r["r"] for r in rows], dtype=np.float64).reshape(len(rows), len(exprs)))
    cursor.close()
    return thin(np.concatenate(chunks) if chunks else np.empty((0, len(exprs))), size)


@dataclass(frozen=True)
class SqlTableReader:
    """Reads one column or a pair of a relation. ``relation`` is its quoted name, ``kind`` its relkind,
    ``columns`` the quoted column names, ``exprs`` each column's value as float8 (the name itself by default;
    a time column's epoch seconds), ``scales`` the scan's power-of-two factors (1 by default)."""

    plpy: Any
    relation: str
    kind: str
    columns: Tuple[str, ...]
    scales: Tuple[float, ...] = ()
    exprs: Tuple[str, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "columns", tuple(self.columns))
        object.__setattr__(self, "exprs", tuple(self.exprs) or self.columns)
        if not self.scales:
            object.__setattr__(self, "scales", (1.0,) * len(self.columns))

    def scaled(self, scales: Sequence[float]) -> "SqlTableReader":
        return replace(self, scales=tuple(scales))

    def stats(self) -> TableStats:
        plpy, rel = self.plpy, self.relation
        if len(self.columns) == 1:
            (col,) = self.exprs
            x = f"({col})::float8"
            stats = plpy.execute(
                f"SELECT count(*) AS n_all, count({col}) AS n, min({x}) AS lo, max({x}) AS hi, "
                f"count(*) FILTER (WHERE {x} IN ('NaN', 'Infinity', '-Infinity')) AS bad, "
                f"coalesce(bool_and({x} = trunc({x})), true) AS integral FROM {rel}"
            )[0]
            return TableStats(rows=int(stats["n_all"]), non_null=int(stats["n"]), lo=(_float(stats["lo"]),),
                              hi=(_float(stats["hi"]),), non_finite=int(stats["bad"]),
                              integral=(bool(stats["integral"]),))
        exprs = self.exprs
        x1, x2 = (f"({e})::float8" for e in exprs)
        both = f"{exprs[0]} IS NOT NULL AND {exprs[1]} IS NOT NULL"
        stats = plpy.execute(
            f"SELECT count(*) AS n_all, count(*) FILTER (WHERE {both}) AS n, "
            f"min({x1}) FILTER (WHERE {both}) AS lo1, max({x1}) FILTER (WHERE {both}) AS hi1, "
            f"min({x2}) FILTER (WHERE {both}) AS lo2, max({x2}) FILTER (WHERE {both}) AS hi2, "
            f"count(*) FILTER (WHERE {x1} IN ('NaN', 'Infinity', '-Infinity') OR {x2} IN ('NaN', 'Infinity', '-Infinity')) AS bad, "
            f"coalesce(bool_and({x1} = trunc({x1})), true) AS int1, coalesce(bool_and({x2} = trunc({x2})), true) AS int2 "
            f"FROM {rel}"
        )[0]
        return TableStats(rows=int(stats["n_all"]), non_null=int(stats["n"]),
                          lo=(_float(stats["lo1"]), _float(stats["lo2"])),
                          hi=(_float(stats["hi1"]), _float(stats["hi2"])), non_finite=int(stats["bad"]),
                          integral=(bool(stats["int1"]), bool(stats["int2"])))

    def row_count(self) -> int:
        return int(self.plpy.execute(f"SELECT count(*) AS n FROM {self.relation}")[0]["n"])

    def sample(self, size: int, rows: int) -> np.ndarray:
        sample = _sample(self.plpy, self.relation, self.kind, list(self.columns), list(self.exprs), rows, size)
        return sample if all(s == 1.0 for s in self.scales) else sample * np.array(self.scales)

    def _values_query(self) -> str:
        (col,), (scale,) = self.exprs, self.scales
        return f"SELECT {_scaled(col, scale)} AS v FROM {self.relation} WHERE {col} IS NOT NULL"

    def value_counts(self, limit: int) -> Tuple[np.ndarray, np.ndarray]:
        groups = self.plpy.execute(f"SELECT v, count(*) AS k FROM ({self._values_query()}) s GROUP BY v "
                                   f"LIMIT {int(limit)}")
        return _pairs(groups)

    def counts_of(self, values: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        plpy = self.plpy
        counted = plpy.execute(
            plpy.prepare(f"SELECT v, count(*) AS k FROM ({self._values_query()}) s WHERE v = ANY($1) GROUP BY v",
                         ["float8[]"]),
            [np.asarray(values, dtype=np.float64).tolist()],
        )
        return _pairs(counted)

    def cells_1d(self, points: np.ndarray, exclude: np.ndarray, step: float):
        plpy, grid_size = self.plpy, len(points)
        # One scan: per grid cell, its rows and their exact sum (whole steps on a lattice, numeric
        # otherwise: the same in any scan order, parallel or not), and the rows off the lattice.
        if step > 0:
            total = "sum(pg_catalog.round(v / $3)::int8)"
            off = ("count(*) FILTER (WHERE abs(v / $3 - pg_catalog.round(v / $3)) > "
                   "1.7763568394002505e-15 * greatest(abs(v / $3), 1))")  # cells.on_lattice
        else:
            total, off = "sum(v::numeric)", "0"
        cells = plpy.execute(
            plpy.prepare(
                f"SELECT c, count(*) AS n, {total} AS s, {off} AS off, min(v) AS lo, max(v) AS hi "
                f"FROM (SELECT v, least(greatest(width_bucket(v, $1) - 1, 0), {grid_size - 2}) AS c "
                f"FROM ({self._values_query()}) s WHERE NOT (v = ANY($2))) q GROUP BY c",
                ["float8[]", "float8[]", "float8"],
            ),
            [np.asarray(points).tolist(), np.asarray(exclude, dtype=np.float64).tolist(), float(step)],
        )
        rows_in = np.zeros(grid_size - 1)
        steps = [0] * (grid_size - 1)
        sums_in = np.zeros(grid_size - 1)
        off_lattice, lo, hi = 0, None, None
        for r in cells:  # the query clamps c to the cells 0 .. grid_size - 2
            k = int(r["c"])
            rows_in[k] += float(r["n"])
            off_lattice += int(r["off"])
            lo = float(r["lo"]) if lo is None else min(lo, float(r["lo"]))
            hi = float(r["hi"]) if hi is None else max(hi, float(r["hi"]))
            if step > 0:
                steps[k] = int(r["s"])
            else:
                sums_in[k] = float(r["s"])
        return Cells(rows_in, lattice_sums(steps, step) if step > 0 else sums_in, off_lattice, lo, hi)

    def cells_2d(self, grid1: np.ndarray, grid2: np.ndarray):
        plpy, rel, exprs = self.plpy, self.relation, self.exprs
        x1, x2 = (_scaled(e, c) for e, c in zip(exprs, self.scales))
        both = f"{exprs[0]} IS NOT NULL AND {exprs[1]} IS NOT NULL"
        m1, m2 = len(grid1), len(grid2)
        cells = plpy.execute(
            plpy.prepare(
                f"SELECT c1, c2, count(*) AS n, sum(v1) AS s1, sum(v2) AS s2, sum(t1) AS t1, sum(t2) AS t2, "
                f"sum(t1 * t2) AS t12 FROM (SELECT v1, v2, c1, c2, (v1 - $1[c1 + 1]) / ($1[c1 + 2] - $1[c1 + 1]) AS t1, "
                f"(v2 - $2[c2 + 1]) / ($2[c2 + 2] - $2[c2 + 1]) AS t2 FROM (SELECT v1, v2, "
                f"least(greatest(width_bucket(v1, $1) - 1, 0), {m1 - 2}) AS c1, "
                f"least(greatest(width_bucket(v2, $2) - 1, 0), {m2 - 2}) AS c2 "
                f"FROM (SELECT {x1} AS v1, {x2} AS v2 FROM {rel} WHERE {both}) a) b) c GROUP BY c1, c2",
                ["float8[]", "float8[]"],
            ),
            [np.asarray(grid1).tolist(), np.asarray(grid2).tolist()],
        )
        shape = (m1 - 1, m2 - 1)
        rows_in, sum1, sum2, t1, t2, t12 = (np.zeros(shape) for _ in range(6))
        for r in cells:  # the query clamps c1, c2 to the cells
            i, j = int(r["c1"]), int(r["c2"])
            rows_in[i, j] += float(r["n"])
            sum1[i, j] += float(r["s1"])
            sum2[i, j] += float(r["s2"])
            t1[i, j] += float(r["t1"])
            t2[i, j] += float(r["t2"])
            t12[i, j] += float(r["t12"])
        return rows_in, sum1, sum2, t1, t2, t12


def _float(value):
    return None if value is None else float(value)


def _pairs(groups) -> Tuple[np.ndarray, np.ndarray]:
    """(values, counts) of the rows of a ``SELECT v, count(*) AS k ... GROUP BY v``."""
    return (np.asarray([g["v"] for g in groups], dtype=np.float64),
            np.asarray([g["k"] for g in groups], dtype=np.float64))
