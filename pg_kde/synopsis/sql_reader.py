"""The :class:`~pg_kde.synopsis.reader.TableReader` of a refresh: each read is one SQL query through
PL/Python's ``plpy`` (nothing here imports plpy).

Identifiers reach SQL text only quoted: the relation as ``format('%I.%I')`` wrote it, the columns through
``plpy.quote_ident``; values are query parameters, and the scales (powers of two) and limits are numbers.
"""

from __future__ import annotations

import math
import re
import struct
from dataclasses import dataclass, replace
from typing import Any, Optional, Sequence, Tuple

import numpy as np

from .._errors import UserError
from .reader import SAMPLE_SEED, TAIL_VALUES, Cells2D, Sample1D, Scan1D, TableStats, fine_quantum, sample_share, thin

#: Relation kinds TABLESAMPLE can read (tables, partitioned tables, materialized views).
_SAMPLEABLE = {"r", "p", "m"}
_FETCH_ROWS = 10000


def _scaled(expr: str, scale: float, schema: str) -> str:
    """The float8 value of a quoted column, times a power of two when scale is not 1 (exactly). A scale below 1
    (values near float8's largest) would round a nonzero value below 2^-1022 / scale, whose product is
    subnormal: such a value raises a clear error instead (``_kde_scale_loses``, 0.27.0). 0.26.0 stored it
    rounded (a red team: 1.2345678901234567e-300 beside 1.7e308 read as 1.234569235961387e-300, its ten rows
    outside every hard bound), or PostgreSQL's product raised "value out of range: underflow" where it rounded
    to 0 (5e-324 beside 1e300)."""
    if scale == 1.0:
        return f"({expr})::float8"
    x = f"({expr})::float8"
    if scale > 1.0:
        return f"{x} * {scale!r}::float8"
    least = math.ldexp(1.0, -1022 - (math.frexp(scale)[1] - 1))  # 2^-1022 / scale, scale a power of two
    return (f"(CASE WHEN {x} = 0 OR abs({x}) >= {least!r}::float8 THEN {x} * {scale!r}::float8 "
            f"ELSE {schema}._kde_scale_loses({x}, {scale!r}::float8) END)")


def _sample(plpy, rel: str, kind: str, exprs: list, n_total: int, size: int, seed: int = SAMPLE_SEED) -> np.ndarray:
    """Up to ``size`` rows of the given float8 expressions with no NULLs, as an (m, len(exprs)) array, the
    same for unchanged data.

    Tables, partitioned tables and materialized views: Bernoulli sampling (repeatable) at 1.25 times the
    wanted share when the relation holds more rows than wanted, all rows otherwise; then
    :func:`~pg_kde.synopsis.reader.thin` keeps ``size`` of them whatever order the scan returned them in (a
    large table's scan may start mid-table: synchronized scans). Views and foreign tables, which TABLESAMPLE
    cannot read: :func:`_ordered_sample`. Only the named columns are read (a view may grant no others)."""
    if kind not in _SAMPLEABLE:
        return _ordered_sample(plpy, rel, exprs, size)
    select = ", ".join(f"({e})::float8" for e in exprs)
    not_null = " AND ".join(f"({e}) IS NOT NULL" for e in exprs)
    share = sample_share(size, n_total)
    source = rel if share == 1.0 else f"{rel} TABLESAMPLE BERNOULLI ({100.0 * share!r}) REPEATABLE ({seed})"
    return thin(_fetch(plpy, f"SELECT ARRAY[{select}] AS r FROM {source} WHERE {not_null}", len(exprs)), size)


def _fetch_chunks(plpy, query: str):
    """The values of ``query``'s one column ``r``, a list per chunk of rows (a cursor, not all rows at once)."""
    cursor = plpy.cursor(query)
    while True:
        rows = cursor.fetch(_FETCH_ROWS)
        if not rows:
            break
        yield [r["r"] for r in rows]
    cursor.close()


def _fetch(plpy, query: str, d: int) -> np.ndarray:
    """The rows of ``query`` (one float8[] column ``r`` of d values), in chunks."""
    chunks = [np.array(rows, dtype=np.float64).reshape(len(rows), d) for rows in _fetch_chunks(plpy, query)]
    return np.concatenate(chunks) if chunks else np.empty((0, d))


def _ordered_sample(plpy, rel: str, exprs: list, size: int, n: Optional[int] = None) -> np.ndarray:
    """The sample of a view or foreign table: every row with no NULLs when there are at most ``size``,
    otherwise ``size`` evenly spaced order statistics (what :func:`~pg_kde.synopsis.reader.thin` keeps of
    all rows). One column: ``percentile_disc`` over evenly spaced fractions, an aggregate postgres_fdw runs
    on the remote server, so only the sample travels; a pair: the rows at evenly spaced ranks. ``n``: the
    rows with no NULLs, when the caller has counted them."""
    select = ", ".join(f"({e})::float8" for e in exprs)
    not_null = " AND ".join(f"({e}) IS NOT NULL" for e in exprs)
    if n is None:
        n = int(plpy.execute(f"SELECT count(*) AS n FROM {rel} WHERE {not_null}")[0]["n"])
    if n <= size:
        return _fetch(plpy, f"SELECT ARRAY[{select}] AS r FROM {rel} WHERE {not_null}", len(exprs))
    if len(exprs) == 1:
        fractions = float8_array(np.linspace(0.0, 1.0, int(size)))
        values = plpy.execute(f"SELECT percentile_disc({fractions}) WITHIN GROUP (ORDER BY {select}) AS v "
                              f"FROM {rel}")[0]["v"]
        return np.asarray(values, dtype=np.float64).reshape(-1, 1)
    ranks = "{" + ",".join(str(int(k) + 1) for k in np.linspace(0, n - 1, int(size)).round().astype(np.int64)) + "}"
    named = ", ".join(f"({e})::float8 AS v{i}" for i, e in enumerate(exprs))
    values = ", ".join(f"v{i}" for i in range(len(exprs)))
    return _fetch(plpy, f"SELECT ARRAY[{values}] AS r FROM (SELECT {named}, row_number() OVER (ORDER BY {select}) "
                        f"AS rank FROM {rel} WHERE {not_null}) s WHERE rank = ANY('{ranks}'::int8[])", len(exprs))


@dataclass(frozen=True)
class SqlTableReader:
    """Reads one column or a pair of a relation. ``relation`` is its quoted name, ``kind`` its relkind,
    ``columns`` the quoted column names, ``exprs`` each column's value as float8 (the name itself by default;
    a time column's epoch seconds), ``scans`` what the aggregate ``_kde_cells`` (in the extension's quoted
    ``schema``) reads of each (the name itself by default: the aggregate takes float8, numeric and time
    types), ``scales`` the scan's power-of-two factors (1 by default)."""

    plpy: Any
    relation: str
    kind: str
    columns: Tuple[str, ...]
    scales: Tuple[float, ...] = ()
    exprs: Tuple[str, ...] = ()
    scans: Tuple[str, ...] = ()
    schema: str = "public"

    def __post_init__(self):
        object.__setattr__(self, "columns", tuple(self.columns))
        object.__setattr__(self, "exprs", tuple(self.exprs) or self.columns)
        object.__setattr__(self, "scans", tuple(self.scans) or self.columns)
        if not self.scales:
            object.__setattr__(self, "scales", (1.0,) * len(self.columns))

    def scaled(self, scales: Sequence[float]) -> "SqlTableReader":
        return replace(self, scales=tuple(scales))

    def stats(self) -> TableStats:
        """A pair's facts (2-D builds); a single column's come with its sample (:meth:`sample_1d`)."""
        plpy, rel = self.plpy, self.relation
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

    def stats_and_sample(self, size: int) -> Tuple[TableStats, np.ndarray]:
        """A pair's facts and sample in one parallel pass where the relation is a table, partitioned table or
        materialized view the role may read ctid of: two ``_kde_sample`` aggregates of the rows with both
        values non-NULL (the same rows: the same hash of ctid, table and seed; seen in the same order, so
        their values pair up), with the row count; each axis's integrality is judged on the sample (the
        scan checks it). Elsewhere :meth:`stats`, then :meth:`sample`."""
        row_id = self._row_id() if self.kind in _SAMPLEABLE and len(self.columns) == 2 else None
        if row_id is None:
            stats = self.stats()
            return stats, self.sample(size, stats.rows)
        # (rows with a NaN or an infinity, their other value NULL or not, as :meth:`stats` counts them)
        bad = " OR ".join(f"({e})::float8 IN ('NaN', 'Infinity', '-Infinity')" for e in self.exprs)
        row, parts, pairs = self._pair_samples(f"count(*) FILTER (WHERE {bad}) AS bad", self.relation, row_id,
                                               sample_share(size, self.row_estimate()))
        rows = int(row["n"])
        if parts[0] is None:  # no row
            return TableStats(rows=rows, non_null=0, lo=(None, None), hi=(None, None), non_finite=0,
                              integral=(True, True)), np.empty((0, 2))
        if int(row["bad"]) or pairs is None:  # NaN or infinite values (an error): their rows and counts
            stats = self.stats()
            return stats, self.sample(size, stats.rows)
        pairs = thin(pairs, size)
        integral = tuple(bool(np.all(pairs[:, k] == np.trunc(pairs[:, k]))) for k in (0, 1))
        return TableStats(rows=rows, non_null=parts[0][0], lo=(parts[0][2], parts[1][2]),
                          hi=(parts[0][3], parts[1][3]), non_finite=0, integral=integral), pairs

    def _pair_samples(self, also: str, source: str, row_id: str, share: float):
        """One pass over ``source`` of count(*), ``also`` and two ``_kde_sample`` aggregates of the rows with
        both values non-NULL, kept by the same hash of ``row_id`` (so the same rows, seen in the same order:
        their values pair up): (the row, each aggregate's :func:`_sample_state`, the (m, 2) pairs or None
        where the two kept different rows: a NaN or infinity on one side)."""
        both = " AND ".join(f"({scan}) IS NOT NULL" for scan in self.scans)
        aggs = ", ".join(f"{self.schema}._kde_sample(CASE WHEN {both} THEN {scan} END, {row_id}, {share!r}::float8, "
                         f"{SAMPLE_SEED}) AS s{k}" for k, scan in enumerate(self.scans))
        row = self.plpy.execute(f"SELECT count(*) AS n, {also + ', ' if also else ''}{aggs} FROM {source}")[0]
        parts = [_sample_state(row[f"s{k}"]) for k in (0, 1)]
        if parts[0] is None or parts[1] is None or len(parts[0][4]) != len(parts[1][4]):
            return row, parts, None
        return row, parts, np.column_stack([parts[0][4], parts[1][4]])

    def sample(self, size: int, rows: int) -> np.ndarray:
        sample = _sample(self.plpy, self.relation, self.kind, list(self.exprs), rows, size)
        return sample if all(s == 1.0 for s in self.scales) else sample * np.array(self.scales)

    def rows_sample(self, size: int, categorical: Sequence[bool] = ()) -> Tuple[int, np.ndarray, list]:
        """(rows, sample, labels) for a synopsis of many columns: the relation's row count; up to ``size`` of its
        rows, NULLs included (NaN), as an (m, d) array of each column's float8 value, or for a ``categorical``
        column (text, enum, boolean) its value's place among the sample's distinct values, which ``labels``
        lists (sorted; None for other columns). The same for unchanged data: a repeatable Bernoulli sample of
        tables, partitioned tables and materialized views (all rows when they are few), thinned by
        :func:`~pg_kde.synopsis.reader.thin`; views and foreign tables: the rows at evenly spaced ranks of their
        columns' order. Values travel as text (float8's text reads back exactly)."""
        plpy, rel = self.plpy, self.relation
        d = len(self.scans)
        categorical = list(categorical) or [False] * d
        named = ", ".join((f"({scan})::text" if cat else f"{self.schema}._kde_value({scan})::text") + f" AS v{k}"
                          for k, (scan, cat) in enumerate(zip(self.scans, categorical)))
        listed = ", ".join(f"v{k}" for k in range(d))
        rows = self.row_count()
        share = sample_share(size, rows)
        if self.kind in _SAMPLEABLE or rows <= size:
            source = rel if share == 1.0 else f"{rel} TABLESAMPLE BERNOULLI ({100.0 * share!r}) REPEATABLE ({SAMPLE_SEED})"
            query = f"SELECT ARRAY[{listed}] AS r FROM (SELECT {named} FROM {source}) s"
            thinned = True
        else:
            order = ", ".join(f"{self.schema}._kde_value({scan}) NULLS LAST" if not cat else f"({scan})::text NULLS LAST"
                              for scan, cat in zip(self.scans, categorical))
            picks = np.linspace(0, rows - 1, int(size)).round().astype(np.int64) + 1
            ranks = "{" + ",".join(str(int(k)) for k in picks) + "}"
            query = (f"SELECT ARRAY[{listed}] AS r FROM (SELECT {named}, row_number() OVER (ORDER BY {order}) AS rank "
                     f"FROM {rel}) s WHERE rank = ANY('{ranks}'::int8[]) ORDER BY rank")
            thinned = False
        # chunk by chunk into float8 (a pool of many rows is never held as text): a category by the order its
        # values are first seen, renumbered in sorted order at the end
        seen = [{} if cat else None for cat in categorical]
        chunks = []
        for texts in _fetch_chunks(plpy, query):
            part = np.full((len(texts), d), np.nan)
            for k in range(d):
                column = [t[k] for t in texts]
                if categorical[k]:
                    place = seen[k]
                    part[:, k] = [np.nan if v is None else place.setdefault(v, float(len(place))) for v in column]
                else:
                    part[:, k] = [np.nan if v is None else float(v) for v in column]
            chunks.append(part)
        sample = np.concatenate(chunks) if chunks else np.empty((0, d))
        labels = []
        for k in range(d):
            if not categorical[k]:
                labels.append(None)
                continue
            names = sorted(seen[k])
            renumber = np.empty(len(names))
            renumber[[int(seen[k][v]) for v in names]] = np.arange(len(names))
            known = ~np.isnan(sample[:, k])
            sample[known, k] = renumber[sample[known, k].astype(np.int64)]
            labels.append(names)
        if thinned:  # in the columns' order, also where every row is kept (thin sorts those it thins): a build
            # that depends on the rows' order (the points' jitter, their ranks among equal values) gets the same
            # rows in the same order, however they came (a Citus table's shards answer in any order)
            sample = thin(sample, size) if len(sample) > size else sample[np.lexsort(sample.T[::-1])]
        # (labels the kept rows no longer hold are left to the build, which keeps those its points hold)
        return rows, sample, labels

    def _pages(self) -> int:
        """The relation's blocks (a partitioned table's are its partitions'; a Citus table's, its shards' on the
        workers, where the coordinator's relation is an empty shell: then a large one is read once too)."""
        plpy = self.plpy
        # pg_partition_tree lists a plain table alone.
        pages = int(plpy.execute(plpy.prepare(
            "SELECT (greatest(pg_catalog.pg_relation_size($1::regclass), (SELECT coalesce(sum(pg_catalog.pg_relation_size("
            "relid)), 0) FROM pg_catalog.pg_partition_tree($1::regclass))) / pg_catalog.current_setting('block_size')::int8"
            ")::int8 AS p", ["text"]), [self.relation])[0]["p"])
        return max(pages, self._shard_pages())

    def _shard_pages(self) -> int:
        """A Citus table's blocks on the workers (its leaves' shards), 0 for any other relation."""
        plpy = self.plpy
        if plpy.execute("SELECT pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL "
                        "AND pg_catalog.to_regproc('pg_catalog.citus_relation_size') IS NOT NULL AS c")[0]["c"] is not True:
            return 0
        return int(plpy.execute(plpy.prepare(
            "SELECT coalesce(sum(pg_catalog.citus_relation_size(d.logicalrelid)), 0) "
            "/ pg_catalog.current_setting('block_size')::int8 AS p FROM pg_catalog.pg_dist_partition d "
            "WHERE d.logicalrelid IN (SELECT p.relid FROM pg_catalog.pg_partition_tree($1::regclass) p WHERE p.isleaf "
            "UNION ALL SELECT $1::regclass)", ["text"]), [self.relation])[0]["p"])

    def _block_percent(self, blocks: int) -> Optional[float]:
        """The percentage of blocks a repeatable ``TABLESAMPLE SYSTEM`` sample of ``blocks`` blocks reads, or
        None where the relation is read whole instead: it is not a table, partitioned table or materialized
        view, holds no more than twice that many blocks, or ``blocks`` is 0."""
        if self.kind not in _SAMPLEABLE or not blocks:
            return None
        pages = self._pages()
        return 100.0 * blocks / pages if pages > 2 * blocks else None

    def row_estimate(self) -> int:
        """Counted when the relation is small (no more than twice :data:`SAMPLE_BLOCKS` blocks) or cannot be
        block-sampled; otherwise read off a repeatable sample of that many blocks, the same for unchanged
        data (pg_class.reltuples is not: ANALYZE moves it)."""
        percent = self._block_percent(SAMPLE_BLOCKS)
        if percent is None:
            return self.row_count()
        seen = int(self.plpy.execute(f"SELECT count(*) AS n FROM {self.relation} TABLESAMPLE SYSTEM ({percent!r}) "
                                     f"REPEATABLE ({SAMPLE_SEED})")[0]["n"])
        return max(1, round(seen * 100.0 / percent))

    def plan_sample_1d(self, size: int, rows: Optional[int] = None) -> Sample1D:
        """The read that places a 1-D grid. A large table's (:meth:`_block_percent` of
        :func:`sample_blocks`): every value of a repeatable ``TABLESAMPLE SYSTEM`` sample of that many blocks,
        thinned to ``size``, with its counts scaled to the table (``whole`` False: :meth:`scan_1d` then takes
        the row sample, and the table is read once). Other relations: :meth:`sample_1d` (every row read), its
        share from ``rows`` when the caller has them (:meth:`row_estimate`'s), else from its own."""
        percent = self._block_percent(sample_blocks(self.plpy))
        if percent is None:
            if rows is None:
                rows = self.row_estimate() if self.kind in _SAMPLEABLE else 0
            return self.sample_1d(size, rows)
        # Share 1 keeps every row the blocks hold: the row's identity is not needed.
        row = self.plpy.execute(f"SELECT count(*) AS n, {self.schema}._kde_sample({self._scan_value()}, '(0,0)'::tid, "
                                f"0::oid, 1::float8, {SAMPLE_SEED}) AS s FROM {self.relation} "
                                f"TABLESAMPLE SYSTEM ({percent!r}) REPEATABLE ({SAMPLE_SEED})")[0]
        seen = decode_sample(int(row["n"]), row["s"], size)
        scaled = lambda k: round(k * 100.0 / percent)  # noqa: E731
        return replace(seen, rows=max(1, scaled(seen.rows)), non_null=scaled(seen.non_null),
                       non_finite=scaled(seen.non_finite), whole=False)

    def _scan_value(self) -> str:
        """What the aggregates read of the single column: its scan expression as it is (they take float8,
        numeric and the time types), or as float8 times the power-of-two scale."""
        (scan,), (scale,) = self.scans, self.scales
        return scan if scale == 1.0 else _scaled(scan, scale, self.schema)

    def sample_1d(self, size: int, rows: int) -> Sample1D:
        """Tables, partitioned tables and materialized views: one pass of the aggregate ``_kde_sample``
        (each row kept with probability 1.25 x size / rows by a hash of its ctid and table, and the column's facts over
        every row), then :func:`~pg_kde.synopsis.reader.thin`. Views and foreign tables: the order-statistics
        sample (:func:`_ordered_sample`, whose first and last values are the min and max) and counts."""
        plpy, rel = self.plpy, self.relation
        if self.kind not in _SAMPLEABLE:  # one count for both the facts and the order statistics
            (col,) = self.exprs
            counts = plpy.execute(f"SELECT count(*) AS n_all, count({col}) AS n FROM {rel}")[0]
            values = _ordered_sample(plpy, rel, [col], size, int(counts["n"]))[:, 0] * self.scales[0]
            finite = values[np.isfinite(values)]
            return Sample1D(values=finite, rows=int(counts["n_all"]), non_null=int(counts["n"]),
                            non_finite=len(values) - len(finite), lo=float(finite.min()) if len(finite) else None,
                            hi=float(finite.max()) if len(finite) else None)
        share = sample_share(size, rows)
        # A role that may not read ctid and tableoid: the aggregate only counts, and the rows come from a
        # Bernoulli sample (a second read).
        row_id = self._row_id()
        row = plpy.execute(f"SELECT count(*) AS n, {self.schema}._kde_sample({self._scan_value()}, "
                           f"{row_id or 'NULL::tid, NULL::oid'}, {share!r}::float8, {SAMPLE_SEED}) AS s FROM {rel}")[0]
        first = decode_sample(int(row["n"]), row["s"], size)
        if row_id:
            return first
        values = self.sample(size, rows)[:, 0]
        return replace(first, values=values[np.isfinite(values)])

    def _coarse_rule(self) -> Tuple[bool, Optional[float]]:
        """Where the single column's float8s may stand for more than one of its values (``_kde_coarse_rule``,
        docs/math.md §7): (digits, magnitude), its values' digits to count row by row, or the magnitude from which
        they may (None: never)."""
        rows = self.plpy.execute(self.plpy.prepare(
            f"SELECT r.digits, r.magnitude FROM pg_catalog.pg_attribute a, {self.schema}._kde_coarse_rule(a.attrelid, "
            "a.attname::text) r WHERE a.attrelid = $1::regclass AND pg_catalog.quote_ident(a.attname) = $2 "
            "AND a.attnum > 0 AND NOT a.attisdropped", ["text", "text"]), [self.relation, self.columns[0]])
        return (bool(rows[0]["digits"]), rows[0]["magnitude"]) if rows else (False, None)

    def _row_id(self) -> Optional[str]:
        """What ``_kde_sample`` hashes to keep a row: its ctid and table, or None where the role may not read
        them (a role granted the column alone): system columns are both readable or neither."""
        ok = self.plpy.execute(self.plpy.prepare(
            "SELECT pg_catalog.has_column_privilege($1::regclass, 'ctid', 'SELECT') AS ok", ["text"]), [self.relation])
        return "ctid, tableoid" if ok[0]["ok"] else None

    def scan_1d(self, points: np.ndarray, candidates: np.ndarray, quantum: float,
                sample: Optional[Tuple[int, float]] = None,
                phases: Optional[Tuple[float, int, float]] = None, tail: int = TAIL_VALUES) -> Scan1D:
        """One pass of the aggregate ``_kde_cells``, run by plpy.execute on the query's text (a prepared plan
        never runs in parallel; the grid and candidates are float8 literals written by repr, which float8
        reads back exactly). With ``sample`` (size, share), the same pass also runs ``_kde_sample`` (the rows
        its hash keeps, thinned to size); a role that may not read ctid gets a Bernoulli sample instead (a
        second read). With ``phases`` (period, bins, step) of a time column, it also runs ``_kde_phases``."""
        grid = float8_array(points)
        heavy = float8_array(candidates)
        row_id = self._row_id() if sample else None
        digits, magnitude = self._coarse_rule()
        select = {"n": ("count(*)", "sum"),
                  "s": (f"{self.schema}._kde_cells({self._scan_value()}, {grid}, {heavy}, {float(quantum)!r}::float8, "
                        f"{int(tail)})",
                        f"{self.schema}._kde_cells_union")}
        if digits:  # (a count: a Citus shard's answer is a number or a state)
            select["c"] = (f"count(*) FILTER (WHERE {self.schema}._kde_numeric_coarse(({self.columns[0]})::numeric))", "sum")
        if row_id:
            select["r"] = (f"{self.schema}._kde_sample({self._scan_value()}, {row_id}, {sample[1]!r}::float8, "
                           f"{SAMPLE_SEED})", f"{self.schema}._kde_sample_union")
        if phases:
            period, bins, step = phases
            select["p"] = (f"{self.schema}._kde_phases({self._scan_value()}, {float(period)!r}::float8, "
                           f"{int(bins)}, {float(step) / 2!r}::float8)", f"{self.schema}._kde_phases_union")
        row = self._aggregate(select)
        scan = decode_cells(int(row["n"]), row["s"], len(points), len(candidates), quantum, tail)
        if digits:
            scan = replace(scan, coarse=int(row["c"] or 0) > 0)
        elif magnitude is not None:
            scan = replace(scan, coarse=any(v is not None and abs(v) / self.scales[0] >= magnitude
                                            for v in (scan.all_lo, scan.all_hi)))
        if phases:
            scan = replace(scan, phases=decode_phases(row["p"], phases))
        if not sample:
            return scan
        if row_id:
            values = decode_sample(int(row["n"]), row["r"], sample[0]).values
        else:
            values = self.sample(sample[0], scan.non_null)[:, 0]
        return replace(scan, sample=values[np.isfinite(values)])

    def _aggregate(self, select: dict) -> dict:
        """One pass of aggregates over the relation: ``select`` maps an alias to (the aggregate, the
        aggregate that combines its states of parts of the table); returns the row of their values. Run on
        the query's text: a prepared plan never runs in parallel. (:class:`~.shards.ShardedReader` runs it on
        each shard of a Citus table instead.)"""
        items = ", ".join(f"{expr} AS {alias}" for alias, (expr, _) in select.items())
        return self.plpy.execute(f"SELECT {items} FROM {self.relation}")[0]

    def cells_2d(self, grid1: np.ndarray, grid2: np.ndarray, sample: Optional[Tuple[int, float]] = None):
        """One parallel pass of the aggregate ``_kde_cells2`` (run on the query's text: a prepared plan never
        runs in parallel), or for grids of more than :data:`CELLS2_LIMIT` cells a GROUP BY. With ``sample``
        (size, share), the same pass keeps the pairs of the rows ``_kde_sample``'s hash of ctid and table
        keeps; a role that may not read ctid gets a Bernoulli sample instead (a second read)."""
        m1, m2 = len(grid1), len(grid2)
        cells = None
        if (m1 - 1) * (m2 - 1) <= CELLS2_LIMIT:
            quanta = [fine_quantum(float(g[0]), float(g[-1])) for g in (grid1, grid2)]
            values = [_scaled(f"{self.schema}._kde_value({scan})", scale, self.schema)
                      for scan, scale in zip(self.scans, self.scales)]
            row_id = self._row_id() if sample else None
            keep = f"{row_id}, {sample[1]!r}::float8, {SAMPLE_SEED}" if row_id else "NULL::tid, NULL::oid, NULL::float8, NULL::int8"
            for _ in range(2):
                state = self._aggregate({"s": (
                    f"{self.schema}._kde_cells2({values[0]}, {values[1]}, {float8_array(grid1)}, "
                    f"{float8_array(grid2)}, {quanta[0]!r}::float8, {quanta[1]!r}::float8, {keep})",
                    f"{self.schema}._kde_cells2_union")})["s"]
                cells = decode_cells2(state, m1, m2, self.scales)
                if cells is not None:
                    break
                # values far beyond the grids (placed from a sample of blocks) whose quanta overflowed: the
                # quanta of the range the scan saw, and a second read
                lo1, hi1, lo2, hi2 = _HEADER2.unpack_from(bytes(state), _PAD)[12:16]
                quanta = [fine_quantum(min(float(g[0]), lo), max(float(g[-1]), hi))
                          for g, lo, hi in ((grid1, lo1, hi1), (grid2, lo2, hi2))]
            if cells is not None and sample:
                pairs = thin(cells.sample, sample[0]) if row_id else self.sample(sample[0], cells.stats.rows) / np.array(self.scales)
                cells = cells._replace(sample=pairs)
        return cells if cells is not None else self._grouped_cells_2d(grid1, grid2)

    def distinct_values(self, k: int, limit: int) -> Optional[np.ndarray]:
        both = " AND ".join(f"({scan}) IS NOT NULL" for scan in self.scans)
        rows = self.plpy.execute(f"SELECT DISTINCT {self.schema}._kde_value({self.scans[k]}) AS v FROM {self.relation} "
                                 f"WHERE {both} LIMIT {int(limit) + 1}")
        values = np.sort(np.array([float(r["v"]) for r in rows], dtype=np.float64))
        return values if len(values) <= limit else None

    def pair_counts(self, limit: int) -> Optional[Tuple[np.ndarray, np.ndarray]]:
        both = " AND ".join(f"({scan}) IS NOT NULL" for scan in self.scans)
        values = ", ".join(f"{self.schema}._kde_value({scan}) AS v{k}" for k, scan in enumerate(self.scans))
        rows = self.plpy.execute(f"SELECT {values}, count(*) AS c FROM {self.relation} WHERE {both} "
                                 f"GROUP BY 1, 2 LIMIT {int(limit) + 1}")
        if len(rows) > limit:
            return None
        pairs = np.array([(float(r["v0"]), float(r["v1"])) for r in rows], dtype=np.float64).reshape(-1, 2)
        counts = np.array([int(r["c"]) for r in rows], dtype=np.int64)
        order = np.lexsort((pairs[:, 1], pairs[:, 0]))
        return pairs[order], counts[order]

    def plan_sample_2d(self, size: int) -> Tuple[TableStats, np.ndarray, bool]:
        percent = self._block_percent(sample_blocks(self.plpy)) if len(self.columns) == 2 else None
        if percent is not None:
            # (share 1 keeps every row the blocks hold: the row's identity is not needed)
            row, parts, pairs = self._pair_samples("", f"{self.relation} TABLESAMPLE SYSTEM ({percent!r}) "
                                                   f"REPEATABLE ({SAMPLE_SEED})", "'(0,0)'::tid, 0::oid", 1.0)
            if pairs is not None:
                finite = np.all(np.isfinite(pairs), axis=1)
                if finite.any():
                    good = pairs[finite]
                    scaled = lambda k: round(k * 100.0 / percent)  # noqa: E731
                    stats = TableStats(rows=max(1, scaled(int(row["n"]))), non_null=scaled(parts[0][0]),
                                       lo=tuple(good.min(axis=0).tolist()), hi=tuple(good.max(axis=0).tolist()),
                                       non_finite=scaled(int((~finite).sum())),
                                       integral=tuple(bool(np.all(good[:, k] == np.trunc(good[:, k]))) for k in (0, 1)))
                    return stats, thin(good, size), False
        return (*self.stats_and_sample(size), True)

    def _grouped_cells_2d(self, grid1: np.ndarray, grid2: np.ndarray):
        """:meth:`cells_2d` by a GROUP BY of SQL expressions (float8 sums, in the order of the scan)."""
        plpy, rel, exprs = self.plpy, self.relation, self.exprs
        x1, x2 = (_scaled(e, c, self.schema) for e, c in zip(exprs, self.scales))
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
        return Cells2D(rows_in, sum1, sum2, t1, t2, t12)


#: Blocks of the repeatable block sample that estimates a large table's rows and places a 1-D grid (8 MB of
#: 8 kB pages); ``pg_kde.sample_blocks`` sets another number (0: read the table whole instead).
SAMPLE_BLOCKS = 1024


def sample_blocks(plpy) -> int:
    """``pg_kde.sample_blocks`` (a custom setting: ``SET pg_kde.sample_blocks = 4096``), or
    :data:`SAMPLE_BLOCKS` when unset or empty; a UserError when it is not a whole number of blocks >= 0."""
    text = plpy.execute("SELECT pg_catalog.current_setting('pg_kde.sample_blocks', true) AS v")[0]["v"]
    if text is None or not text.strip():
        return SAMPLE_BLOCKS
    # ASCII digits only: int() would also read '1_000', '+8' and other scripts' digits.
    blocks = int(text) if re.fullmatch(r"\s*[0-9]+\s*", text) else -1
    if not 0 <= blocks <= 2**31 - 1:
        raise UserError(f"pg_kde: pg_kde.sample_blocks must be a whole number of blocks >= 0, not {text!r}",
                        hint=f"RESET pg_kde.sample_blocks ({SAMPLE_BLOCKS} blocks), or 0 to read the table whole "
                             "for the sample that places the grid")
    return blocks


#: The state of _kde_cells: 4 bytes of padding, then its header (struct CellsHeader in extension/cells.c).
_PAD = 4
_HEADER = struct.Struct("=IIiid5q4diiii")
_MAGIC, _VERSION = 0x4345444B, 3


def float8_array(values) -> str:
    """A float8[] literal of finite values (repr round-trips exactly through float8's input)."""
    return "'{" + ",".join(repr(float(v)) for v in np.asarray(values, dtype=np.float64)) + "}'::float8[]"


#: The state of _kde_sample: 4 bytes of padding, then its header (struct SampleHeader in extension/sample.c).
_SAMPLE_HEADER = struct.Struct("=IIiiqqdd")
_SAMPLE_MAGIC = 0x5345444B


def decode_sample(rows: int, state: Optional[bytes], size: int) -> Sample1D:
    """The :class:`~pg_kde.synopsis.reader.Sample1D` of ``_kde_sample``'s value (None: an empty relation) with
    ``rows`` the relation's rows; the kept values thinned to ``size``."""
    if state is None:
        return Sample1D(values=np.empty(0), rows=rows, non_null=0, non_finite=0, lo=None, hi=None)
    non_null, non_finite, lo, hi, values = _sample_state(state)
    return Sample1D(values=thin(values.reshape(-1, 1), size)[:, 0], rows=rows, non_null=non_null,
                    non_finite=non_finite, lo=lo, hi=hi)


def _sample_state(state: Optional[bytes]):
    """(non-NULL values, non-finite values, min, max, the kept values in the order kept) of a
    ``_kde_sample`` state; None for no row."""
    if state is None:
        return None
    data = bytes(state)
    magic, version, n, _, non_null, non_finite, lo, hi = _SAMPLE_HEADER.unpack_from(data, _PAD)
    if (magic, version) != (_SAMPLE_MAGIC, 1):
        raise ValueError("pg_kde: the sample returned a state of another version")
    values = np.frombuffer(data, dtype=np.float64, count=n, offset=_PAD + _SAMPLE_HEADER.size)
    return non_null, non_finite, _unless_nan(lo), _unless_nan(hi), values


def decode_cells(rows: int, state: Optional[bytes], m: int, k: int, quantum: float,
                 tail: int = TAIL_VALUES) -> Scan1D:
    """The :class:`~pg_kde.synopsis.reader.Scan1D` of ``_kde_cells``'s final value (None: no non-NULL
    values) over a grid of m points and k candidates, ``tail`` cell values kept at each end, with ``rows``
    the relation's rows."""
    if state is None:
        return Scan1D(rows=rows, non_null=0, non_finite=0, non_integral=0, off_lattice=0, overflow=0, lo=None,
                      hi=None, all_lo=None, all_hi=None, cell_rows=np.zeros(m - 1), cell_quanta=(0,) * (m - 1),
                      candidate_rows=np.zeros(k), quantum=float(quantum), low=np.empty(0), high=np.empty(0),
                      tail=int(tail))
    data = bytes(state)
    (magic, version, m_, k_, quantum_, non_null, non_finite, off, non_integral, overflow,
     lo, hi, all_lo, all_hi, n_low, n_high, tail_, cap) = _HEADER.unpack_from(data, _PAD)
    if (magic, version, m_, k_, tail_) != (_MAGIC, _VERSION, m, k, tail) or not max(n_low, n_high, 1) <= cap <= tail:
        raise ValueError("pg_kde: the scan returned a state of another grid, tail or version")
    at = _PAD + _HEADER.size + 8 * (m + k)
    cell_rows = np.frombuffer(data, dtype=np.int64, count=m - 1, offset=at)
    at += 8 * (m - 1)
    halves = np.frombuffer(data, dtype=np.int64, count=2 * (m - 1), offset=at).reshape(m - 1, 2)
    at += 16 * (m - 1)
    candidate_rows = np.frombuffer(data, dtype=np.int64, count=k, offset=at)
    at += 8 * k
    low = np.sort(np.frombuffer(data, dtype=np.float64, count=n_low, offset=at))
    high = np.sort(np.frombuffer(data, dtype=np.float64, count=n_high, offset=at + 8 * cap))
    quanta = tuple((int(high) << 64) + (int(low) & 0xFFFFFFFFFFFFFFFF) for low, high in halves)
    return Scan1D(rows=rows, non_null=non_null, non_finite=non_finite, non_integral=non_integral, off_lattice=off,
                  overflow=overflow, lo=_unless_nan(lo), hi=_unless_nan(hi), all_lo=_unless_nan(all_lo),
                  all_hi=_unless_nan(all_hi),
                  cell_rows=cell_rows.astype(np.float64), cell_quanta=quanta,
                  candidate_rows=candidate_rows.astype(np.float64), quantum=float(quantum_), low=low, high=high,
                  tail=int(tail))


#: The state of _kde_phases (extension/profile.c): 4 bytes of padding, then its header (struct PhasesHeader).
_PHASES_HEADER = struct.Struct("=IIiidd")
_PHASES_MAGIC = 0x5044454B


def decode_phases(state: Optional[bytes], phases: Tuple[float, int, float]) -> np.ndarray:
    """The rows per bin of ``_kde_phases``'s final value for ``phases`` (period, bins, step); zeros for no
    row (None)."""
    period, bins, step = phases
    if state is None:
        return np.zeros(int(bins))
    data = bytes(state)
    magic, version, bins_, _, period_, shift = _PHASES_HEADER.unpack_from(data, _PAD)
    if (magic, version, bins_, period_, shift) != (_PHASES_MAGIC, 1, int(bins), float(period), float(step) / 2) \
            or len(data) != _PAD + _PHASES_HEADER.size + 8 * int(bins):
        raise ValueError("pg_kde: _kde_phases returned a state of another version, period or size")
    counts = np.frombuffer(data, dtype=np.int64, count=int(bins), offset=_PAD + _PHASES_HEADER.size)
    if (counts < 0).any():
        raise ValueError("pg_kde: _kde_phases returned a negative count")
    return counts.astype(np.float64)


#: The state of _kde_cells2 (extension/cells2.c): 4 bytes of padding, then its header (struct Cells2Header).
_HEADER2 = struct.Struct("=IIii2d6q4dii")
_MAGIC2, _VERSION2 = 0x3245444B, 1
#: Cells a _kde_cells2 state holds at most (CELLS2_LIMIT in extension/cells2.c).
CELLS2_LIMIT = 1 << 20
#: The unit of its sums of offsets in a cell.
_OFFSET_UNIT = 2.0**-60


def decode_cells2(state: Optional[bytes], m1: int, m2: int, scales=(1.0, 1.0)) -> Optional[Cells2D]:
    """The rows, sums of v1 and v2 and sums of t1, t2 and t1·t2 per cell, each of shape
    (m1 − 1, m2 − 1), and each axis's values that are not whole numbers (:class:`Cells2D`), from
    ``_kde_cells2``'s final value; None where some value's quanta did not fit an int64 (the caller scans
    again with float8 sums). No row: zeros."""
    shape = (m1 - 1, m2 - 1)
    if state is None:  # an empty relation (the aggregate saw no row)
        return Cells2D(*(np.zeros(shape) for _ in range(6)), non_integral=(0, 0),
                       ends=tuple(np.full(m, np.nan) for m in (shape[0], shape[0], shape[1], shape[1])),
                       stats=TableStats(rows=0, non_null=0, lo=(None, None), hi=(None, None), non_finite=0,
                                        integral=(True, True)), sample=np.empty((0, 2)))
    data = bytes(state)
    (magic, version, m1_, m2_, q1, q2, rows_all, pairs, non_finite, ni1, ni2, overflow,
     lo1, hi1, lo2, hi2, kept, _cap) = _HEADER2.unpack_from(data, _PAD)
    if (magic, version, m1_, m2_) != (_MAGIC2, _VERSION2, m1, m2):
        raise ValueError("pg_kde: the 2-D scan returned a state of another grid or version")
    if overflow:
        return None
    cells = shape[0] * shape[1]
    at = _PAD + _HEADER2.size + 8 * (m1 + m2)
    ends = []
    for m in (shape[0], shape[0], shape[1], shape[1]):
        ends.append(np.frombuffer(data, dtype=np.float64, count=m, offset=at).copy())
        at += 8 * m
    stats = TableStats(rows=rows_all, non_null=pairs,
                       lo=tuple(None if math.isnan(v) else v / s for v, s in ((lo1, scales[0]), (lo2, scales[1]))),
                       hi=tuple(None if math.isnan(v) else v / s for v, s in ((hi1, scales[0]), (hi2, scales[1]))),
                       non_finite=non_finite, integral=(ni1 == 0, ni2 == 0))
    rows = np.frombuffer(data, dtype=np.int64, count=cells, offset=at).astype(np.float64)
    at += 8 * cells
    words = np.frombuffer(data, dtype=np.int64, count=10 * cells, offset=at).reshape(5, cells, 2)
    # low word unsigned, high signed: the same float for the same integer, whatever the scan's order
    sums = words[:, :, 1].astype(np.float64) * 2.0**64 + words[:, :, 0].view(np.uint64).astype(np.float64)
    at += 80 * cells
    # the row sample's pairs, in the columns' units
    taken = np.frombuffer(data, dtype=np.float64, count=2 * kept, offset=at).reshape(kept, 2) / np.array(scales)
    units = (q1, q2, _OFFSET_UNIT, _OFFSET_UNIT, _OFFSET_UNIT)
    return Cells2D(rows.reshape(shape), *((sums[k] * units[k]).reshape(shape) for k in range(5)),
                   non_integral=(int(ni1), int(ni2)), ends=tuple(ends), stats=stats, sample=taken)


def _float(value):
    return None if value is None else float(value)


def _unless_nan(value: float) -> Optional[float]:
    """A state's min or max: NaN where it saw no value."""
    return None if math.isnan(value) else float(value)


