"""What the extension's PL/Python functions call. Each takes ``plpy`` (and PL/Python's ``GD``) as
arguments; nothing here imports plpy, so the module loads anywhere.

This is the thin face of :mod:`pg_kde.synopsis`: argument, relation and privilege checks, the catalog
row's lock and the table's state, then :func:`~pg_kde.synopsis.build_1d` / :func:`~pg_kde.synopsis.build_2d`
reading through :class:`~pg_kde.synopsis.sql_reader.SqlTableReader`, and the catalog upsert.

Identifiers never reach SQL text unquoted: the relation comes in as an oid and is formatted by the server
(``format('%I.%I')``), column names go through ``plpy.quote_ident`` after a catalog lookup, and every
value is a query parameter.

Errors a user can fix are returned, not raised: ``{"error": {message, sqlstate, detail, hint}}``, which the
SQL wrapper (``_kde_raise_if_error``) raises as one PostgreSQL error without a Python traceback. Errors of
the queries run here (a missing privilege, a cancel) come back the same way with their own SQLSTATE.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import time
import warnings

from typing import Optional

import numpy as np

from . import __version__, bandwidth
from ._errors import NoValuesError, UserError
from .synopsis import Requested, build_1d, build_2d, multi
from .synopsis.build import Layout2D, Pinned1D, Pinned2D, check_pair, counts_method, plan_2d, plan_grid, select_bandwidth
from .synopsis.catalog import Built1D, Built2D, split_row
from .synopsis.merge import merge_1d, merge_2d
from .synopsis.packing import PackError
from .synopsis.query import heavy_values
from .synopsis.cells import DAY_PROFILE, MAX_BUDGET, MIN_BUDGET, WEEK_PROFILE
from .synopsis.reader import TableStats
from .synopsis.shards import ShardedReader, ShardParts, is_hash_distributed
from .synopsis.sql_reader import SqlTableReader

__all__ = ["UserError", "choose_bandwidth", "refresh"]


def _fail(message: str, **kwargs):
    raise UserError(message, **kwargs)


def _returning_errors(plpy, entry, *args) -> str:
    """Run an entry point; its UserError, or the error of a query it ran, becomes an ``{"error": ...}``."""
    try:
        return entry(plpy, *args)
    except UserError as exc:
        return json.dumps({"error": exc.error})
    except plpy.SPIError as exc:  # the query's own error, rolled back to before it by PL/Python
        # (PL/Python keeps its detail and hint in spidata: (code, detail, hint, query, position, ...))
        spidata = getattr(exc, "spidata", None) or ()
        detail, hint = (tuple(spidata[1:3]) + (None, None))[:2]
        return json.dumps({"error": {"message": str(exc.args[0]) if exc.args else str(exc),
                                     "sqlstate": getattr(exc, "sqlstate", None) or "XX000",
                                     "hint": hint, "detail": detail}})


_RELKINDS = {"r": "table", "p": "partitioned table", "m": "materialized view", "v": "view", "f": "foreign table"}


def _check_version(plpy, GD, extversion: str) -> None:
    """Fail loudly, once per backend, when the SQL objects and the importable package differ."""
    if GD.get("pg_kde_version") == extversion:
        return
    if extversion != __version__:
        _fail(
            f"pg_kde: the extension's SQL is version {extversion} but the Python package the server imports is "
            f"{__version__}",
            hint="Install the matching pg_kde package for the server's Python, or ALTER EXTENSION pg_kde UPDATE.",
        )
    GD["pg_kde_version"] = extversion


def _relation(plpy, relid, bandwidth_only: bool = False):
    """(quoted name, relkind, quoted extension schema) of a relation the caller may build a synopsis of: it exists, is a table,
    view or materialized view, is not temporary, and its rows do not depend on who reads them (row-level
    security, a view reading its reader: _kde_rows_depend, _kde_view_reads_reader; a synopsis built from the
    rows one role sees would be served to every reader). ``bandwidth_only``: for kde_bandwidth, which stores nothing, and says so."""
    if relid is None:
        _fail("pg_kde: the table argument must not be NULL", sqlstate="22004")
    plan = plpy.prepare(
        "SELECT format('%I.%I', n.nspname, c.relname) AS name, c.relkind::text AS kind, "
        "c.relpersistence = 't' AS temporary FROM pg_catalog.pg_class c "
        "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1",
        ["oid"],
    )
    rows = plpy.execute(plan, [relid])
    if not rows:
        _fail(f"pg_kde: relation with oid {relid} does not exist", sqlstate="42P01")
    name, kind = rows[0]["name"], rows[0]["kind"]
    if kind not in _RELKINDS:
        _fail(f"pg_kde: {name} is not a table, view or materialized view", sqlstate="42809")
    if rows[0]["temporary"]:
        _fail(f"pg_kde: {name} is a temporary table; synopses are for tables other sessions can read",
              sqlstate="42809")
    schema = _extension_schema(plpy)
    why = plpy.execute(plpy.prepare(f"SELECT coalesce({schema}._kde_rows_depend($1), {schema}._kde_view_reads_reader($1)) "
                                    "AS why", ["oid"]), [relid])[0]["why"]
    if why is not None:
        _fail(f"pg_kde: {why}; " + ("kde_bandwidth would choose a bandwidth for the rows this role sees as if they "
                                    "were the table's" if bandwidth_only else
                                    "a synopsis built from them would be served to every reader"),
              sqlstate="42501",
              hint="Run it as a role its policies do not apply to (the table owner, or a role with BYPASSRLS); "
                   "a view whose rows depend on who reads it gets no synopsis.")
    return name, kind, schema


#: Time types a synopsis reads as epoch seconds (timestamp: as if UTC; date: its midnight, UTC).
TIME_TYPES = ("date", "timestamp", "timestamptz")


def _period(coltypes):
    """The periodic profile a 1-D synopsis of a column of this type may use inside its cells (docs/math.md
    §7): the time of day for timestamps, the day of the week for dates, none for numbers."""
    type_ = coltypes[0]
    return DAY_PROFILE if type_.startswith("timestamp") else WEEK_PROFILE if type_ == "date" else None


def _columns(plpy, schema: str, relid: int, rel: str, cols, with_categories: bool = False) -> tuple:
    """Quoted names, numbers and types of the given numeric or time columns, after the SQL side's checks
    (schema USAGE, the columns exist, SELECT on each, no row-level security), and each one's value as a
    float8 expression (a time column's epoch seconds). With ``with_categories``, text, enum and boolean columns
    are taken too, and a sixth element flags them."""
    if not cols or any(c is None for c in cols):
        _fail("pg_kde: the column arguments must not be NULL or empty", sqlstate="22004")
    ident = plpy.execute(plpy.prepare(f"SELECT attnums, coltypes FROM {schema}._kde_columns($1, $2)",
                                      ["oid", "text[]"]), [relid, list(cols)])[0]
    categories = plpy.execute(
        plpy.prepare("SELECT a.attnum, t.typcategory::text AS category, t.typname::text AS name "
                     "FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid = a.atttypid "
                     "WHERE a.attrelid = $1 AND a.attnum = ANY($2)", ["oid", "int2[]"]),
        [relid, ident["attnums"]],
    )
    allowed = with_categories
    # (money is of the numeric category, but has no cast to float8)
    kinds = {int(r["attnum"]): ("number" if r["category"] == "N" and r["name"] != "money" else "time" if r["name"] in TIME_TYPES
                                else "category" if allowed and r["category"] in ("S", "E", "B") else None)
             for r in categories}
    typnames = {int(r["attnum"]): r["name"] for r in categories}
    names, exprs, scans, flags = [], [], [], []
    for name, attnum, type_ in zip(cols, ident["attnums"], ident["coltypes"]):
        kind = kinds.get(int(attnum))
        quoted = plpy.quote_ident(name)
        if kind is None:
            _fail(f"pg_kde: column {quoted} of {rel} has type {type_}; synopses need a numeric, "
                  "date, timestamp or timestamptz column" + (" (or, among 3 to 16 columns, a text, enum or "
                                                             "boolean one)" if allowed else ""), sqlstate="42804")
        flags.append(kind == "category")
        names.append(quoted)
        exprs.append(quoted if kind in ("number", "category") else f"extract(epoch from {quoted})")
        # The scan's aggregate takes float8, numeric and the time types as they are; other numbers as float8.
        direct = kind in ("time", "category") or typnames[int(attnum)] in ("numeric", "float8")
        scans.append(quoted if direct else f"({quoted})::float8")
    if with_categories:
        return names, exprs, scans, list(ident["attnums"]), list(ident["coltypes"]), flags
    return names, exprs, scans, list(ident["attnums"]), list(ident["coltypes"])


def _extension_schema(plpy) -> str:
    rows = plpy.execute(
        "SELECT pg_catalog.quote_ident(n.nspname) AS s FROM pg_catalog.pg_extension e "
        "JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_kde'"
    )
    return rows[0]["s"]


#: Bytes of backend memory a sampled value may take while a bandwidth is chosen: the float64 sample, the
#: float32 copy the selectors run on, sorted and sphered copies, with room to spare.
SAMPLE_BYTES_PER_VALUE = 64
#: ... and of a multi-column synopsis' pool, read chunk by chunk into float8 (its ranks and keys beside them).
POOL_BYTES_PER_VALUE = 32


def _check_sample_size(plpy, size: int, d: int, per_value: int = SAMPLE_BYTES_PER_VALUE,
                       hint: str | None = None) -> None:
    """Refuse a sample the server cannot afford: its working memory (``per_value`` bytes a value) must fit in
    maintenance_work_mem."""
    limit = int(plpy.execute("SELECT setting::bigint * 1024 AS b FROM pg_catalog.pg_settings "
                             "WHERE name = 'maintenance_work_mem'")[0]["b"])
    need = int(size) * d * per_value
    if need > limit:
        _fail(f"pg_kde: a sample of {size} rows of {d} column(s) needs about {need / 2**20:.0f} MB of memory, more than "
              f"maintenance_work_mem ({limit / 2**20:.0f} MB)", sqlstate="54000",
              hint=hint or f"Lower sample_size to at most {limit // (d * per_value)}, or raise "
                           "maintenance_work_mem for this session (SET maintenance_work_mem = ...).")


def interrupt_check(plpy):
    """The check the numerical work calls between its bounded slices: pg_sleep(0) runs PostgreSQL's
    CHECK_FOR_INTERRUPTS, so a pending statement_timeout, pg_cancel_backend or pg_terminate_backend raises
    (or ends the backend) there, within one slice (~50 ms) of the request."""
    plan = plpy.prepare("SELECT pg_catalog.pg_sleep(0)")
    return lambda: plpy.execute(plan)


def _select_bandwidth(plpy, sample: np.ndarray, method: str, backend: str, required: bool = True,
                      scale: str | None = None):
    """:func:`pg_kde.synopsis.build.select_bandwidth` with the interrupt check, its warnings (the selector's,
    and "no bandwidth" when ``required`` is false and the data are rejected) passed on as PostgreSQL
    warnings."""
    with _warnings_to(plpy):
        return select_bandwidth(sample, method, backend, required, scale, interrupt=interrupt_check(plpy))


@contextlib.contextmanager
def _warnings_to(plpy):
    """The Python warnings of the work inside, passed on as PostgreSQL warnings once it has returned."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for w in caught:
        message = str(w.message)
        plpy.warning(message if message.startswith("pg_kde:") else f"pg_kde: {message}")


def choose_bandwidth(plpy, GD, relid, cols, method, backend, sample_size, extversion) -> str:
    """kde_bandwidth(): the paper's selectors on a sample of a table's columns; {"bandwidth": [...]}."""
    return _returning_errors(plpy, _choose_bandwidth, GD, relid, cols, method, backend, sample_size, extversion)


def _choose_bandwidth(plpy, GD, relid, cols, method, backend, sample_size, extversion) -> str:
    _check_version(plpy, GD, extversion)
    rel, kind, schema = _relation(plpy, relid, bandwidth_only=True)
    if sample_size is None or sample_size < 2:
        _fail("pg_kde: sample_size must be at least 2")
    names, exprs, _, _, _ = _columns(plpy, schema, relid, rel, cols)
    _check_sample_size(plpy, sample_size, len(cols))
    try:
        chosen = bandwidth.resolve(method, len(cols)).name  # a density bandwidth: auto is plugin or lscv_H
    except ValueError as exc:
        _fail(f"pg_kde: {exc}")
    reader = SqlTableReader(plpy, rel, kind, names, exprs=exprs)
    sample = reader.sample(sample_size, reader.row_count())
    if len(sample) < 2:
        _fail(f"pg_kde: {rel} has fewer than 2 rows with every column non-NULL")
    result = _select_bandwidth(plpy, sample if len(cols) > 1 else sample[:, 0], chosen, backend)
    if len(cols) == 1:
        return json.dumps({"bandwidth": [math.sqrt(result.H[0, 0])]})
    return json.dumps({"bandwidth": result.H.ravel().tolist()})


def refresh(plpy, GD, relid, cols, method, sample_size, grid_size, backend, budget, extversion) -> str:
    """kde_refresh(): build a synopsis in the caller's transaction and upsert its catalog row; returns its
    summary (or the error, see the module docstring)."""
    return _returning_errors(plpy, _refresh, GD, relid, cols, method, sample_size, grid_size, backend, budget,
                             extversion)


def _refresh(plpy, GD, relid, cols, method, sample_size, grid_size, backend, budget, extversion) -> str:
    started = time.perf_counter()
    _check_version(plpy, GD, extversion)
    rel, kind, schema = _relation(plpy, relid)
    pair = cols is not None and len(cols) == 2
    if cols is not None and len(cols) > 2:
        return _refresh_nd(plpy, started, relid, rel, kind, schema, cols, method, sample_size, grid_size, backend,
                           budget)
    if cols is not None and not pair and len(cols) != 1:
        _fail("pg_kde: synopses cover one column, a pair, or 3 to 16 columns")
    names, exprs, scans, attnums, coltypes = _columns(plpy, schema, relid, rel, cols)
    if pair and cols[0] == cols[1]:
        _fail("pg_kde: a 2-D synopsis needs two different columns")
    state = _refresh_start(plpy, schema, relid, cols, method, sample_size, grid_size, budget,
                           (8, 1024) if pair else (16, 65536))
    requested = Requested(method, sample_size, grid_size, backend, budget)
    parts = None
    if kind == "r" and is_hash_distributed(plpy, relid):  # read shard by shard, each shard's answer kept
        parts = ShardParts.load(plpy, schema, relid, cols, rel)
        reader = ShardedReader(plpy, rel, kind, names, exprs=exprs, scans=scans, schema=schema, parts=parts)
    else:
        reader = SqlTableReader(plpy, rel, kind, names, exprs=exprs, scans=scans, schema=schema)
    if kind == "p":
        built, facts = (_build_partitioned_2d if pair else _build_partitioned)(plpy, schema, relid, rel, cols,
                                                                               requested, started)
        _upsert(plpy, schema, built.TABLE, built.catalog_row(relid, cols, _identity(state, attnums, coltypes),
                                                             requested), built.catalog_types())
        return json.dumps({**built.summary(rel, cols if pair else cols[0]), **facts})
    if pair:
        extra = {"layout": _ancestor_layout(plpy, schema, relid, cols, requested)}
    else:
        extra = {"grid_hint": _ancestor_grid(plpy, schema, relid, cols, requested), "period": _period(coltypes)}
    kept_plan = _unwrap_plan(parts.plan(state["mod_count"]), requested, attnums) if parts is not None else None
    if parts is not None:  # the shards draw the same block numbers: a few positions stand for the table
        extra["check_blocks"] = True
    if kept_plan is not None and extra["layout" if pair else "grid_hint"] is None:  # (a parent's cells come first)
        extra["pinned"] = (Pinned2D if pair else Pinned1D).from_json(kept_plan)
    built = (build_2d if pair else build_1d)(
        reader, requested, functools.partial(_select_bandwidth, plpy), interrupt=interrupt_check(plpy),
        started=started, **extra)
    _upsert(plpy, schema, built.TABLE, built.catalog_row(relid, cols, _identity(state, attnums, coltypes), requested),
            built.catalog_types())
    facts = {}
    if parts is not None:
        facts = _keep_parts(parts, built, extra, state["mod_count"], requested, attnums)
    return json.dumps({**built.summary(rel, cols if pair else cols[0]), **facts})


def _wrap_plan(plan: Optional[str], requested: Requested, attnums) -> Optional[str]:
    """A scan's plan as kde_parts.plan keeps it: with the request and the columns' numbers it was made for."""
    return None if plan is None else json.dumps({"requested": json.loads(requested.json()),
                                                 "attnums": [int(a) for a in attnums], "plan": plan})


def _unwrap_plan(text: Optional[str], requested: Requested, attnums) -> Optional[str]:
    """The plan kde_parts.plan keeps (:func:`_wrap_plan`), if it was made for this request on these columns."""
    try:
        d = json.loads(text) if text is not None else None
        if not isinstance(d, dict) or d.get("requested") != json.loads(requested.json()) \
                or d.get("attnums") != [int(a) for a in attnums] or not isinstance(d.get("plan"), str):
            return None
    except (TypeError, ValueError):
        return None
    return d["plan"]


def _keep_parts(parts: ShardParts, built, extra: dict, mod_count: int, requested: Requested, attnums) -> dict:
    """Keep a Citus table's shards' answers and the plan of the scan they answered (the built synopsis'
    ``pinned``; :meth:`~pg_kde.synopsis.shards.ShardParts.save`); the plan keeps the rows and counters it was
    made for while the build kept it. Returns the summary's facts about the shards."""
    pinned = built.pinned
    if pinned is not None and pinned is extra.get("pinned"):
        rows, mod_count = parts.plan_rows, parts.plan_mod_count
    else:
        rows = built.n_rows
    plan = None if pinned is None else pinned.to_json()
    saved = parts.save(_wrap_plan(plan, requested, attnums), max(int(rows), 1), mod_count)
    return {"shards": len(parts.identities), "shards_read": parts.scanned, "shards_reused": parts.reused,
            "shards_kept": saved}


def _refresh_nd(plpy, started, relid, rel, kind, schema, cols, method, sample_size, grid_size, backend,
                budget) -> str:
    """kde_refresh of 3 to 16 columns (:mod:`pg_kde.synopsis.multi`): the table's rows counted, then sampled
    (NULLs included), the synopsis built within the budget, its catalog rows written."""
    multi.check_request(len(cols), method)  # before the lock and any read
    if len(set(cols)) != len(cols):
        _fail("pg_kde: a column is named twice")
    # the same columns in another order are the same synopsis: refreshed in its own order, not built twice
    same = plpy.execute(plpy.prepare(
        f"SELECT cols FROM {schema}.kde_catalog WHERE relid = $1::oid::regclass AND kind = 'nd' "
        "AND cols @> $2 AND cols <@ $2 AND cardinality(cols) = cardinality($2)", ["oid", "text[]"]), [relid, list(cols)])
    if same:
        cols = list(same[0]["cols"])
    names, exprs, scans, attnums, coltypes, categorical = _columns(plpy, schema, relid, rel, cols, with_categories=True)
    if grid_size is not None:
        _fail("pg_kde: grid_size does not apply to a synopsis of 3 or more columns; give a budget instead",
              sqlstate="22023")
    _check_sample_and_budget(sample_size, budget)
    spend = budget if budget is not None else multi.DEFAULT_BUDGET_ND
    points = min(multi.plan_points(spend, len(cols), 0), multi.MAX_POINTS)
    multi.check_points(points, spend, len(cols))
    pool = multi.pool_rows(points, len(cols))  # the points are a balanced subsample of it
    _check_sample_size(plpy, pool, len(cols), POOL_BYTES_PER_VALUE,
                       hint="Raise maintenance_work_mem for this session (SET maintenance_work_mem = ...), or lower "
                            "budget.")
    state = _lock_state(plpy, schema, relid, cols)
    requested = Requested(method, sample_size, grid_size, backend, budget)
    if kind == "p":
        built, facts = _build_partitioned_nd(plpy, schema, relid, rel, cols, requested, spend, pool, started)
    else:
        reader = SqlTableReader(plpy, rel, kind, names, exprs=exprs, scans=scans, schema=schema)
        rows, sample, labels = reader.rows_sample(pool, categorical)
        if rows == 0 or len(sample) == 0:
            _fail(f"pg_kde: {rel} has no rows to describe", sqlstate="22023")
        built, facts = _build_nd(plpy, sample, rows, labels, names, requested, spend, started), {}
    _upsert(plpy, schema, built.TABLE, built.catalog_row(relid, list(cols), _identity(state, attnums, coltypes),
                                                         requested), built.catalog_types())
    return json.dumps({**built.summary(rel, cols), **facts})


def _build_nd(plpy, sample, rows: int, labels, names, requested: Requested, spend: int, started):
    """:func:`pg_kde.synopsis.multi.build_nd` of a relation's sample, its warnings relayed."""
    with _warnings_to(plpy):
        return multi.build_nd(sample, rows, spend, requested.method, requested.backend, requested.sample_size,
                              interrupt=interrupt_check(plpy), started=started, labels=labels, names=names)


def _stored_nd(plpy, schema: str, relid, cols):
    """The stored multi-column synopsis of a relation's columns as a :class:`~pg_kde.synopsis.multi.BuiltND`,
    with its header's requested options and staleness facts (None when there is none, or it is malformed)."""
    stored = _stored_row(plpy, schema, "kde_synopsis_nd", relid, cols)
    if stored is None:
        return None
    try:
        return multi.stored_nd(stored[0]), stored[1]
    except ValueError as e:  # a corrupt stored row is built again, not merged
        plpy.warning(f"pg_kde: the synopsis of columns {', '.join(cols)} of relation {relid} is malformed ({e}); "
                     "it is rebuilt")
        return None


def _build_partitioned_nd(plpy, schema: str, relid, parent: str, cols, requested: Requested, spend: int, pool: int,
                          started):
    """A partitioned table's multi-column synopsis: one per leaf partition (stored as that partition's own, so
    approx_* reads each partition too), rebuilt only where the partition changed since its synopsis was built
    with the same request, then merged (:func:`pg_kde.synopsis.multi.merge_nd`: each partition's points read
    back, in proportion to its rows, the pool of one build). A partition a column of which holds only NULLs
    has no synopsis of its own; its sample joins the merge as it is. Returns the merged synopsis and the
    summary's extra facts."""
    found = _leaves(plpy, schema, relid, parent, cols, with_categories=True)
    names = [plpy.quote_ident(c) for c in cols]
    parts, rebuilt, reused, empty = [], 0, 0, 0
    for leaf, rel, kind, reader, attnums, coltypes, categorical in found:
        state, stored = _leaf_state(plpy, schema, leaf, rel, kind, cols, _stored_nd)
        if stored is not None and _unchanged(stored[1], requested, attnums, state):
            parts.append((*multi.decode_points(stored[0]), stored[0].n_rows))
            reused += 1
            continue
        rows, sample, labels = reader.rows_sample(pool, categorical)
        if rows == 0 or len(sample) == 0:
            empty += 1
            continue
        if np.isnan(sample).all(axis=0).any():  # no synopsis of its own: its sample joins the merge
            parts.append((sample, labels, rows))
            continue
        built = _build_nd(plpy, sample, rows, labels, names, requested, spend, time.perf_counter())
        _upsert(plpy, schema, built.TABLE, built.catalog_row(leaf, list(cols), _identity(state, attnums, coltypes),
                                                             requested), built.catalog_types())
        parts.append((*multi.decode_points(built), built.n_rows))
        rebuilt += 1
    if not parts:
        _fail(f"pg_kde: {parent} has no rows to describe in any partition", sqlstate="22023")
    with _warnings_to(plpy):
        merged = multi.merge_nd(parts, spend, requested.method, requested.backend, requested.sample_size,
                                interrupt=interrupt_check(plpy), started=started, names=names)
    return merged, {"partitions": len(found), "rebuilt": rebuilt, "reused": reused, "empty_partitions": empty}


def _ancestor_grid(plpy, schema: str, relid, cols, requested: Requested):
    """The grid of the nearest partitioned ancestor's synopsis of the same column, if any and built with the
    same request: a partition built on it merges into the ancestor's synopsis exactly
    (:mod:`pg_kde.synopsis.merge`)."""
    rows = plpy.execute(plpy.prepare(
        f"SELECT p.grid, k.requested::text AS requested_text "
        f"FROM pg_catalog.pg_partition_ancestors($1::regclass) WITH ORDINALITY a(relid, level) "
        f"JOIN {schema}.kde_synopsis p ON p.relid = a.relid AND p.cols = $2 "
        f"JOIN {schema}.kde_catalog k ON k.relid = p.relid AND k.cols = p.cols "
        f"WHERE a.relid <> $1::regclass AND cardinality(p.grid) >= 2 ORDER BY a.level LIMIT 1",
        ["oid", "text[]"]), [relid, list(cols)])
    if not rows or not _same_request(rows[0]["requested_text"], requested):
        return None
    return np.asarray(rows[0]["grid"], dtype=np.float64)


def _same_request(requested_text: str, requested: Requested) -> bool:
    """Whether a stored synopsis was built with this request (its header's requested options)."""
    return json.loads(requested_text) == json.loads(requested.json())


def _stored_row(plpy, schema: str, payload: str, relid, cols):
    """A synopsis' header and payload (table ``payload``) columns as one row (with its requested options as
    text), and the header's requested options and staleness facts; None when there is none."""
    rows = plpy.execute(plpy.prepare(
        f"SELECT k.*, p.*, k.requested::text AS requested_text FROM {schema}.kde_catalog k "
        f"JOIN {schema}.{payload} p USING (relid, cols) WHERE k.relid = $1::regclass AND k.cols = $2",
        ["oid", "text[]"]), [relid, list(cols)])
    if not rows:
        return None
    return rows[0], {k: rows[0][k] for k in ("mod_count", "storage_id", "pages", "attnums", "requested_text")}


def _stored_1d(plpy, schema: str, relid, cols):
    """The stored 1-D synopsis of a relation's columns as a :class:`~pg_kde.synopsis.catalog.Built1D`, with its
    header's requested options and staleness facts (None when there is none)."""
    stored = _stored_row(plpy, schema, "kde_synopsis", relid, cols)
    if stored is None:
        return None
    r, facts = stored
    try:
        values, counts, sums = heavy_values(r)
    except PackError as e:  # a corrupt stored row is built again, not merged or reused
        plpy.warning(f"{e}; the synopsis of column {cols[0]} of relation {relid} is rebuilt")
        return None
    built = Built1D(
        method=r["method"], bandwidth=float(r["bandwidth"][0]), sample_size=int(r["sample_size"]), backend=r["backend"],
        scale=None, n_rows=int(r["n_rows"]), n_null=int(r["n_null"]), step=float(r["step"]),
        atom_values=list(values), atom_cum_count=list(counts), atom_cum_sum=list(sums),
        heavy_rows=int(round(counts[-1])) if len(counts) else 0, kde_rows=int(r["kde_rows"]),
        grid=list(r["grid"]), grid_size=int(r["grid_size"]), cell_cum_count=list(r["cell_cum_count"]),
        cell_cum_sum=list(r["cell_cum_sum"]), density=[float(d) for d in r["density"]], shape_var=float(r["shape_var"]),
        budget=int(json.loads(r["requested_text"]).get("budget") or 0), seconds=float(r["build_seconds"]),
        period=float(r["period"]), profile=[float(v) for v in r["profile"]],
        sum_slack=None if r.get("sum_slack") is None else float(r["sum_slack"]),
        sum_quantum=None if r.get("sum_quantum") is None else float(r["sum_quantum"]),
        heavy_whole=r.get("heavy_whole"),
        doubt_weight=None if r.get("doubt_weight") is None else float(r["doubt_weight"]),
        doubt_weights=None if r.get("doubt_weights") is None else tuple(float(w) for w in r["doubt_weights"]),
        coarse=r.get("coarse"))
    return built, facts


def _stored_2d(plpy, schema: str, relid, cols):
    """The stored 2-D synopsis of a relation's pair as a :class:`~pg_kde.synopsis.catalog.Built2D`, with its
    header's requested options and staleness facts (None when there is none)."""
    stored = _stored_row(plpy, schema, "kde_synopsis_2d", relid, cols)
    if stored is None:
        return None
    r, facts = stored
    built = Built2D(
        method=r["method"], bandwidth=[float(v) for v in r["bandwidth"]], sample_size=int(r["sample_size"]),
        backend=r["backend"], n_rows=int(r["n_rows"]), n_null=int(r["n_null"]),
        integer_valued=[bool(v) for v in r["integer_valued"]], grid1=list(r["grid1"]), grid2=list(r["grid2"]),
        lattice1=list(r["lattice1"]), lattice2=list(r["lattice2"]), grid_size=[int(v) for v in r["grid_size"]],
        sat_count=list(r["sat_count"]), sat_sum=list(r["sat_sum"]), kde_sat=list(r["kde_sat"]),
        seconds=float(r["build_seconds"]), pair_pack=bytes(r.get("pair_pack") or b""))
    return built, facts


def _layout_of(built) -> Layout2D:
    """The cells of a built 2-D synopsis."""
    return Layout2D((tuple(built.grid1), tuple(built.grid2)), (tuple(built.lattice1), tuple(built.lattice2)),
                    (bool(built.integer_valued[0]), bool(built.integer_valued[1])))


def _ancestor_layout(plpy, schema: str, relid, cols, requested: Requested):
    """The cells of the nearest partitioned ancestor's 2-D synopsis of the same pair, if any and built with the
    same request (a partition built on them merges into the ancestor's synopsis exactly)."""
    rows = plpy.execute(plpy.prepare(
        f"SELECT a.relid::oid AS oid FROM pg_catalog.pg_partition_ancestors($1::regclass) WITH ORDINALITY a(relid, level) "
        f"JOIN {schema}.kde_synopsis_2d p ON p.relid = a.relid AND p.cols = $2 "
        f"WHERE a.relid <> $1::regclass ORDER BY a.level LIMIT 1", ["oid", "text[]"]), [relid, list(cols)])
    stored = _stored_2d(plpy, schema, int(rows[0]["oid"]), cols) if rows else None
    return _layout_of(stored[0]) if stored and _same_request(stored[1]["requested_text"], requested) else None


def _union_stats(stats) -> TableStats:
    """A partitioned table's pair facts from its partitions' (:class:`~pg_kde.synopsis.reader.TableStats`)."""
    full = [s for s in stats if s.non_null]
    return TableStats(
        rows=sum(s.rows for s in stats), non_null=sum(s.non_null for s in stats),
        lo=tuple(min(s.lo[k] for s in full) if full else None for k in (0, 1)),
        hi=tuple(max(s.hi[k] for s in full) if full else None for k in (0, 1)),
        non_finite=sum(s.non_finite for s in stats), integral=tuple(all(s.integral[k] for s in full) for k in (0, 1)))


def _build_partitioned_2d(plpy, schema: str, relid, parent: str, cols, requested: Requested, started):
    """A partitioned table's 2-D synopsis: as :func:`_build_partitioned` for a pair. Every partition is built
    on the parent's cells (:class:`~pg_kde.synopsis.build.Layout2D`), so the merge adds their tables exactly
    (:func:`pg_kde.synopsis.merge.merge_2d`); a partition is rebuilt only when it changed, and the cells are
    planned again, with every partition rebuilt, only when a changed partition's rows leave them (beyond an
    axis's ends, a fraction on a whole-number axis, or any change on a discretised axis) or no partition's
    rows reach an outer cell any more (:func:`_cells_past_rows`)."""
    found = _leaves(plpy, schema, relid, parent, cols)
    current = _stored_2d(plpy, schema, relid, cols)
    # The parent's cells, unless it was built with another request (a budget, a grid size)
    layout = _layout_of(current[0]) if current and _same_request(current[1]["requested_text"], requested) else None
    select = functools.partial(_select_bandwidth, plpy)
    kept, todo, states = [], [], {}
    for leaf, rel, kind, reader, attnums, coltypes in found:
        states[leaf], stored = _leaf_state(plpy, schema, leaf, rel, kind, cols, _stored_2d)
        if (stored is not None and layout is not None and _layout_of(stored[0]) == layout
                and _unchanged(stored[1], requested, attnums, states[leaf])):
            kept.append((leaf, stored[0]))
        else:
            todo.append((leaf, rel, reader, attnums, coltypes, states[leaf]))
    stats = {leaf: reader.stats() for leaf, _, reader, *_ in todo}
    if (layout is None or not all(layout.holds(s) for s in stats.values())
            or _cells_past_rows(layout, [built for _, built in kept], stats.values())):
        # New cells for the whole table: from every partition's facts and a sample of each, its share of
        # sample_size by its rows; every partition is then rebuilt on them.
        for leaf, rel, kind, reader, attnums, coltypes in found:
            if leaf not in stats:
                todo.append((leaf, rel, reader, attnums, coltypes, states[leaf]))
                stats[leaf] = reader.stats()
        kept = []
        union = _union_stats(list(stats.values()))
        check_pair(union, parent, ", ".join(cols), cols)
        total = max(union.rows, 1)
        pieces = [reader.sample(max(1, round(requested.sample_size * stats[leaf].rows / total)), stats[leaf].rows)
                  for leaf, _, reader, *_ in todo if stats[leaf].non_null]
        layout = plan_2d(np.concatenate([p.reshape(-1, 2) for p in pieces]), union, requested)
    parts, rebuilt, empty, empty_rows = [built for _, built in kept], 0, 0, 0
    for leaf, rel, reader, attnums, coltypes, state in todo:
        if stats[leaf].non_null == 0:
            empty += 1  # nothing to describe: no synopsis of its own, nothing to merge; its rows are NULLs
            empty_rows += stats[leaf].rows
            continue
        built = build_2d(reader, requested, select, interrupt=interrupt_check(plpy), started=time.perf_counter(),
                         layout=layout, stats=stats[leaf], shared=True)
        _upsert(plpy, schema, built.TABLE, built.catalog_row(leaf, list(cols), _identity(state, attnums, coltypes),
                                                             requested), built.catalog_types())
        parts.append(built)
        rebuilt += 1
    if not parts:
        _fail(f"pg_kde: {parent} has no rows with both {', '.join(cols)} non-NULL in any partition")
    merged = merge_2d(parts, time.perf_counter() - started)
    merged.n_null += empty_rows
    return merged, {"partitions": len(found), "rebuilt": rebuilt, "reused": len(parts) - rebuilt,
                    "empty_partitions": empty}


def _cells_past_rows(layout: Layout2D, kept, stats) -> bool:
    """Whether the cells reach past every partition's rows on some axis: an outer row or column of cells
    that no partition's rows fall in (a partition detached, rows deleted at an end). A fresh layout ends at
    the rows' min and max, so its outer cells hold rows; reused cells that no longer do would share the
    outer rows over empty space."""
    used = [np.zeros(len(g) - 1, dtype=bool) for g in layout.grids]
    for built in kept:
        sat = np.asarray(built.sat_count, dtype=np.float64).reshape(built.grid_size)
        cells = np.diff(np.diff(sat, axis=0), axis=1)
        used[0] |= cells.sum(axis=1) > 0
        used[1] |= cells.sum(axis=0) > 0
    for st in stats:
        if st.non_null:
            for k in (0, 1):
                g = np.asarray(layout.grids[k])
                lo, hi = (min(max(int(np.searchsorted(g, v, side="right")) - 1, 0), len(g) - 2)
                          for v in (st.lo[k], st.hi[k]))
                used[k][lo:hi + 1] = True
    return any(not u[0] or not u[-1] for u in used if len(u))


def _union_sample(readers, size: int):
    """A sample of a partitioned table's column as its partitions' samples together, each its share of
    ``size`` by its rows (TABLESAMPLE on the parent would read a foreign partition whole), and the
    column's min and max over all of them (None when none holds a finite value): the sampled blocks' of a
    large partition (:meth:`~pg_kde.synopsis.sql_reader.SqlTableReader.plan_sample_1d`), so that a large
    partition is read once, by its build's scan."""
    rows = [r.row_estimate() for r in readers]
    total = max(sum(rows), 1)
    firsts = [r.plan_sample_1d(max(1, round(size * k / total)), k) for r, k in zip(readers, rows) if k > 0]
    values = np.concatenate([f.values for f in firsts]) if firsts else np.empty(0)
    los = [f.lo for f in firsts if f.lo is not None]
    his = [f.hi for f in firsts if f.hi is not None]
    return values, ((min(los), max(his)) if los else None)


def _note_pushdown(plpy, relid, rel: str) -> None:
    """A NOTICE when a foreign table's server does not let postgres_fdw run pg_kde's functions remotely:
    the scan then reads every row here instead of one aggregate there."""
    rows = plpy.execute(plpy.prepare(
        "SELECT s.srvname::text AS name, fdw.fdwname::text AS fdw, coalesce((SELECT o.option_value "
        "FROM pg_catalog.pg_options_to_table(s.srvoptions) o WHERE o.option_name = 'extensions'), '') AS ext "
        "FROM pg_catalog.pg_foreign_table t JOIN pg_catalog.pg_foreign_server s ON s.oid = t.ftserver "
        "JOIN pg_catalog.pg_foreign_data_wrapper fdw ON fdw.oid = s.srvfdw WHERE t.ftrelid = $1", ["oid"]), [relid])
    if rows and rows[0]["fdw"] == "postgres_fdw" and "pg_kde" not in [e.strip() for e in rows[0]["ext"].split(",")]:
        plpy.notice(f"pg_kde: the rows of {rel} travel from server {rows[0]['name']} to be scanned here",
                    hint=f"ALTER SERVER {plpy.quote_ident(rows[0]['name'])} OPTIONS (ADD extensions 'pg_kde') lets "
                         "postgres_fdw run the scan there (pg_kde of the same version installed on that server).")


def _leaves(plpy, schema: str, relid, parent: str, cols, with_categories: bool = False) -> list:
    """A partitioned table's leaf partitions, each as (oid, name, relkind, reader, attnums, coltypes), after
    the same checks as the parent's columns (privileges, types, row-level security); with
    ``with_categories``, categories allowed and flagged in a seventh element (:func:`_columns`)."""
    leaves = plpy.execute(plpy.prepare(
        "SELECT p.relid::oid AS oid FROM pg_catalog.pg_partition_tree($1::regclass) p WHERE p.isleaf "
        "ORDER BY p.relid::oid", ["oid"]), [relid])
    if not leaves:
        _fail(f"pg_kde: {parent} has no partitions", sqlstate="42809")
    found = []
    for leaf in (int(r["oid"]) for r in leaves):
        rel, kind, _ = _relation(plpy, leaf)
        names, exprs, scans, attnums, coltypes, *flags = _columns(plpy, schema, leaf, rel, cols, with_categories)
        found.append((leaf, rel, kind, SqlTableReader(plpy, rel, kind, names, exprs=exprs, scans=scans, schema=schema),
                      attnums, coltypes, *flags))
    return found


def _leaf_state(plpy, schema: str, leaf, rel: str, kind: str, cols, stored_of):
    """A partition's table state, its synopsis row locked (the request was checked for the parent), and its
    stored synopsis (``stored_of``: :func:`_stored_1d` or :func:`_stored_2d`); None for a shard, whose
    server's changes are not counted here: it is always rebuilt."""
    state = _lock_state(plpy, schema, leaf, cols)
    if kind == "f":
        _note_pushdown(plpy, leaf, rel)
        return state, None
    return state, stored_of(plpy, schema, leaf, cols)


def _unchanged(facts: dict, requested: Requested, attnums, state: dict) -> bool:
    """Whether a stored synopsis (its header's facts) was built with this request on these columns, and its
    table has not changed since."""
    return (_same_request(facts["requested_text"], requested)
            and list(facts["attnums"]) == list(attnums)
            and all(facts[k] == state[k] for k in ("mod_count", "storage_id", "pages")))


def _build_partitioned(plpy, schema: str, relid, parent: str, cols, requested: Requested, started):
    """A partitioned table's 1-D synopsis: one synopsis per leaf partition (stored as that partition's own,
    so approx_* reads each partition too), rebuilt only where the partition changed since its synopsis was
    built with the same request, all on the parent's grid where they reach it, then merged
    (:func:`pg_kde.synopsis.merge.merge_1d`). Returns the merged synopsis and the summary's extra facts.

    A leaf that is a foreign table (a shard on another server, through postgres_fdw) is read with two
    queries that postgres_fdw runs there when its server lists pg_kde in ``extensions``: the sample's
    order statistics and the scan's aggregate; only they travel. It is rebuilt at every refresh."""
    found = _leaves(plpy, schema, relid, parent, cols)
    leaves = [f[0] for f in found]
    current = _stored_1d(plpy, schema, relid, cols)
    hint = (np.asarray(current[0].grid, dtype=np.float64)
            if current and current[0].grid_size >= 2 and _same_request(current[1]["requested_text"], requested)
            else None)
    if hint is None:  # the first build: the grid of a sample of the whole table
        values, span = _union_sample([f[3] for f in found], requested.sample_size)
        hint = plan_grid(values, requested, span, _period(found[0][5]))
    select = functools.partial(_select_bandwidth, plpy)
    parts, rebuilt, empty, empty_rows = [], 0, 0, 0
    for leaf, rel, kind, reader, attnums, coltypes in found:
        state, stored = _leaf_state(plpy, schema, leaf, rel, kind, cols, _stored_1d)
        if stored is not None and _unchanged(stored[1], requested, attnums, state):
            parts.append(stored[0])
            continue
        leaf_started = time.perf_counter()
        try:
            built = build_1d(reader, requested, select, interrupt=interrupt_check(plpy), started=leaf_started,
                             grid_hint=hint, period=_period(coltypes))
        except NoValuesError as e:
            empty += 1  # nothing to describe: no synopsis of its own, nothing to merge; its rows are NULLs
            empty_rows += e.rows
            continue
        _upsert(plpy, schema, built.TABLE, built.catalog_row(leaf, list(cols), _identity(state, attnums, coltypes),
                                                             requested), built.catalog_types())
        parts.append(built)
        rebuilt += 1
    if not parts:
        _fail(f"pg_kde: column {cols[0]} of {parent} has no non-NULL values in any partition")
    merged = merge_1d(parts, requested.budget_1d, time.perf_counter() - started)
    merged.n_null += empty_rows
    return merged, {"partitions": len(leaves), "rebuilt": rebuilt, "reused": len(parts) - rebuilt,
                    "empty_partitions": empty}


def _refresh_start(plpy, schema, relid, cols, method, sample_size, grid_size, budget, grid_range):
    """Checks shared by 1-D and 2-D refreshes (:func:`_check_request`), then :func:`_lock_state`. Returns the
    table state."""
    _check_request(plpy, cols, method, sample_size, grid_size, budget, grid_range)
    return _lock_state(plpy, schema, relid, cols)


def _check_request(plpy, cols, method, sample_size, grid_size, budget, grid_range) -> None:
    """The request's own checks: sample size, grid size, budget, method, the sample's memory."""
    _check_sample_and_budget(sample_size, budget)
    low, high = grid_range
    if grid_size is not None and not low <= grid_size <= high:
        _fail(f"pg_kde: grid_size must be between {low} and {high}" + (" for a 2-D synopsis" if len(cols) == 2 else ""))
    counts_method(method, len(cols))  # a bad method fails here, before the lock; the build resolves it again
    _check_sample_size(plpy, sample_size, len(cols))


def _check_sample_and_budget(sample_size, budget) -> None:
    """The sample size (at least 100 rows) and budget (MIN_BUDGET to MAX_BUDGET bytes, or None) of a request."""
    if sample_size is None or sample_size < 100:
        _fail("pg_kde: sample_size must be at least 100")
    if budget is not None and not MIN_BUDGET <= budget <= MAX_BUDGET:
        _fail(f"pg_kde: budget must be between {MIN_BUDGET} and {MAX_BUDGET} bytes", sqlstate="22023")


def _lock_state(plpy, schema, relid, cols) -> dict:
    """Serialises refreshes of the same synopsis by locking its catalog row (FOR UPDATE: only roles allowed
    to write the catalog can take it), and reads the table's state for staleness before any scan."""
    lock = plpy.prepare(f"SELECT 1 FROM {schema}.kde_catalog WHERE relid = $1::oid::regclass AND cols = $2 FOR UPDATE",
                        ["oid", "text[]"])
    plpy.execute(lock, [relid, list(cols)])
    state = plpy.execute(plpy.prepare(f"SELECT mod_count, storage_id, pages FROM {schema}._kde_table_state($1)",
                                      ["oid"]), [relid])[0]
    return {"relid": relid, **state}


def _identity(state: dict, attnums, coltypes) -> dict:
    """The catalog columns that say which columns a synopsis describes and what staleness compares."""
    return {"attnums": attnums, "coltypes": coltypes, "built_relid": state["relid"], "mod_count": state["mod_count"],
            "storage_id": state["storage_id"], "pages": state["pages"]}


def _upsert(plpy, schema: str, table: str, row: dict, types: dict) -> None:
    """Write one synopsis: its header row in kde_catalog and its payload row in ``table`` (kde_synopsis or
    kde_synopsis_2d), each INSERT ... ON CONFLICT (relid, cols) DO UPDATE, in the caller's transaction.
    ``row`` maps column -> value (relid first, as an oid; :meth:`Built1D.catalog_row`), ``types`` column ->
    SQL type of the parameter."""
    header, payload = split_row(row)
    for target, values, stamp in (("kde_catalog", header, True), (table, payload, False)):
        columns = list(values)
        params = ", ".join("$1::oid::regclass" if i == 0 else f"${i + 1}" for i in range(len(columns)))
        updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in columns[2:])
        plan = plpy.prepare(
            f"INSERT INTO {schema}.{target} ({', '.join(columns)}{', built_at' if stamp else ''}) "
            f"VALUES ({params}{', pg_catalog.now()' if stamp else ''}) "
            f"ON CONFLICT (relid, cols) DO UPDATE SET {updates}{', built_at = EXCLUDED.built_at' if stamp else ''}",
            [types[c] for c in columns],
        )
        plpy.execute(plan, list(values.values()))
