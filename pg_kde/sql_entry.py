"""What the extension's PL/Python functions call. Each takes ``plpy`` (and PL/Python's ``GD``) as
arguments; nothing here imports plpy, so the module loads anywhere.

Identifiers never reach SQL text unquoted: the relation comes in as an oid and is formatted by the server
(``format('%I.%I')``), column names go through ``plpy.quote_ident`` after a catalog lookup, and every
value is a query parameter.

Errors a user can fix are returned, not raised: ``{"error": {message, sqlstate, detail, hint}}``, which the
SQL wrapper (``_kde_raise_if_error``) raises as one PostgreSQL error without a Python traceback. Errors of
the queries run here (a missing privilege, a cancel) come back the same way with their own SQLSTATE.
"""

from __future__ import annotations

import json
import math
import time
import warnings

import numpy as np

from . import __version__, bandwidth
from ._errors import BackendUnavailableError, DeviceOutOfMemoryError
from .synopsis import (
    ATOM_SHARE,
    EXACT_DISTINCT,
    Atoms,
    atom_candidates,
    bilinear_weights,
    cap_bandwidth_matrix,
    cell_masses,
    cell_prefix,
    grid_density,
    grid_layout,
    grid_positions,
    is_discrete,
    point_weights,
    quantile_grid,
    scale_bandwidth,
    smooth_masses_2d,
    summed_area,
)

class UserError(Exception):
    """An error the caller can fix: becomes one PostgreSQL error with this SQLSTATE, detail and hint."""

    def __init__(self, message: str, *, sqlstate: str = "22023", hint: str | None = None, detail: str | None = None):
        super().__init__(message)
        self.error = {"message": message, "sqlstate": sqlstate, "hint": hint, "detail": detail}


def _fail(message: str, **kwargs):
    raise UserError(message, **kwargs)


def _returning_errors(plpy, entry, *args) -> str:
    """Run an entry point; its UserError, or the error of a query it ran, becomes an ``{"error": ...}``."""
    try:
        return entry(plpy, *args)
    except UserError as exc:
        return json.dumps({"error": exc.error})
    except plpy.SPIError as exc:  # the query's own error, rolled back to before it by PL/Python
        return json.dumps({"error": {"message": str(exc.args[0]) if exc.args else str(exc),
                                     "sqlstate": getattr(exc, "sqlstate", None) or "XX000",
                                     "hint": getattr(exc, "hint", None), "detail": getattr(exc, "detail", None)}})


#: Parameter types of the catalog columns (kde_catalog, kde_synopsis and kde_synopsis_2d).
_CATALOG_TYPES = {
    "relid": "oid", "cols": "text[]", "method": "text", "bandwidth": "float8[]", "sample_size": "int4",
    "n_rows": "int8", "n_null": "int8", "atom_values": "float8[]", "atom_cum_count": "float8[]",
    "atom_cum_sum": "float8[]", "kde_rows": "int8", "grid": "float8[]", "lattice": "float8[]",
    "cell_cum_count": "float8[]", "cell_cum_sum": "float8[]", "cell_cum_offset": "float8[]", "kde_mass": "float8[]",
    "cell_discrete": "bool", "build_seconds": "float8", "backend": "text", "mod_count": "int8", "options": "jsonb",
    "grid1": "float8[]", "grid2": "float8[]", "lattice1": "float8[]", "lattice2": "float8[]", "sat_count": "float8[]",
    "sat_sum": "float8[]", "kde_sat": "float8[]", "attnums": "int2[]", "coltypes": "text[]", "built_relid": "oid",
    "storage_id": "text", "pages": "int8",
}
# integer_valued and grid_size are scalars in 1-D and arrays in 2-D: typed at the call.

_RELKINDS = {"r": "table", "p": "partitioned table", "m": "materialized view", "v": "view", "f": "foreign table"}
_SAMPLEABLE = {"r", "p", "m"}


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


def _relation(plpy, relid):
    """(quoted name, relkind, quoted extension schema) of a relation the caller may build a synopsis of: it exists, is a table,
    view or materialized view, is not temporary, and no row-level security hides rows of it from the caller
    (a synopsis built from the rows one role sees would be served to every reader)."""
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
    hidden = plpy.execute(plpy.prepare(f"SELECT {schema}._kde_rows_hidden($1) AS h, "
                                       "pg_catalog.quote_ident(current_user::text) AS role", ["oid"]), [relid])[0]
    if hidden["h"]:
        _fail(f"pg_kde: row-level security hides rows of {name} from role {hidden['role']}; a synopsis built "
              "from them would be served to every reader", sqlstate="42501",
              hint="Refresh as a role its policies do not apply to (the table owner, or a role with BYPASSRLS); "
                   "a view over a table with row-level security gets no synopsis.")
    return name, kind, schema


def _columns(plpy, schema: str, relid: int, rel: str, cols) -> tuple:
    """Quoted names, numbers and types of the given numeric columns, after the SQL side's checks (schema
    USAGE, the columns exist, SELECT on each, no row-level security)."""
    if not cols or any(c is None for c in cols):
        _fail("pg_kde: the column arguments must not be NULL or empty", sqlstate="22004")
    ident = plpy.execute(plpy.prepare(f"SELECT attnums, coltypes FROM {schema}._kde_columns($1, $2)",
                                      ["oid", "text[]"]), [relid, list(cols)])[0]
    categories = plpy.execute(
        plpy.prepare("SELECT a.attnum, t.typcategory::text AS category FROM pg_catalog.pg_attribute a "
                     "JOIN pg_catalog.pg_type t ON t.oid = a.atttypid WHERE a.attrelid = $1 AND a.attnum = ANY($2)",
                     ["oid", "int2[]"]),
        [relid, ident["attnums"]],
    )
    category = {int(r["attnum"]): r["category"] for r in categories}
    for name, attnum, type_ in zip(cols, ident["attnums"], ident["coltypes"]):
        if category.get(int(attnum)) != "N":
            _fail(f"pg_kde: column {plpy.quote_ident(name)} of {rel} has type {type_}; synopses need a numeric column",
                  sqlstate="42804")
    return [plpy.quote_ident(c) for c in cols], list(ident["attnums"]), list(ident["coltypes"])


def _extension_schema(plpy) -> str:
    rows = plpy.execute(
        "SELECT pg_catalog.quote_ident(n.nspname) AS s FROM pg_catalog.pg_extension e "
        "JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_kde'"
    )
    return rows[0]["s"]


#: Bytes of backend memory a sampled value may take while a bandwidth is chosen: the float64 sample, the
#: float32 copy the selectors run on, sorted and sphered copies, with room to spare.
SAMPLE_BYTES_PER_VALUE = 64
_FETCH_ROWS = 10000


def _check_sample_size(plpy, size: int, d: int) -> None:
    """Refuse a sample the server cannot afford: its working memory must fit in maintenance_work_mem."""
    limit = int(plpy.execute("SELECT setting::bigint * 1024 AS b FROM pg_catalog.pg_settings "
                             "WHERE name = 'maintenance_work_mem'")[0]["b"])
    need = int(size) * d * SAMPLE_BYTES_PER_VALUE
    if need > limit:
        _fail(f"pg_kde: a sample of {size} rows of {d} column(s) needs about {need / 2**20:.0f} MB of memory, more than "
              f"maintenance_work_mem ({limit / 2**20:.0f} MB)", sqlstate="54000",
              hint=f"Lower sample_size to at most {limit // (d * SAMPLE_BYTES_PER_VALUE)}, or raise "
                   "maintenance_work_mem for this session (SET maintenance_work_mem = ...).")


def _sample(plpy, rel: str, kind: str, exprs: list, n_total: int, size: int, seed: int = 20261122) -> np.ndarray:
    """Up to ``size`` rows of the given float8 expressions with no NULLs, as an (m, len(exprs)) array.

    Bernoulli sampling (repeatable) when the relation holds more rows than wanted; all rows otherwise. Only
    the named columns are read (a view may grant no others), in chunks straight into one float64 array."""
    select = ", ".join(f"({e})::float8" for e in exprs)
    not_null = " AND ".join(f"({e}) IS NOT NULL" for e in exprs)
    source = rel
    if n_total > size:
        percent = min(100.0, 100.0 * 1.25 * size / n_total)
        if kind in _SAMPLEABLE:
            source = f"{rel} TABLESAMPLE BERNOULLI ({percent!r}) REPEATABLE ({seed})"
        else:  # views and foreign tables: a random subset of the named columns only
            columns = ", ".join(exprs)
            source = f"(SELECT {columns} FROM {rel} WHERE pg_catalog.random() < {percent / 100.0!r}) s"
    query = f"SELECT ARRAY[{select}] AS r FROM {source} WHERE {not_null} LIMIT {int(size)}"
    out = np.empty((min(int(size), max(int(n_total), 0)), len(exprs)), dtype=np.float64)
    taken = 0
    cursor = plpy.cursor(query)
    while True:
        rows = cursor.fetch(_FETCH_ROWS)
        if not rows:
            break
        chunk = np.array([r["r"] for r in rows], dtype=np.float64).reshape(len(rows), len(exprs))
        out[taken : taken + len(chunk)] = chunk
        taken += len(chunk)
    cursor.close()
    return out[:taken]


def _choose_method(method: str, d: int, for_counts: bool) -> str:
    """A selector name from the registry (:func:`pg_kde.bandwidth.resolve`): ``auto`` for a synopsis
    (range counts) of one column is the distribution-function plug-in."""
    return bandwidth.resolve(method, d, "counts" if for_counts else "density").name


def interrupt_check(plpy):
    """The check the numerical work calls between its bounded slices: pg_sleep(0) runs PostgreSQL's
    CHECK_FOR_INTERRUPTS, so a pending statement_timeout, pg_cancel_backend or pg_terminate_backend raises
    (or ends the backend) there, within one slice (~50 ms) of the request."""
    plan = plpy.prepare("SELECT pg_catalog.pg_sleep(0)")
    return lambda: plpy.execute(plan)


#: The plug-in scale synopses use: min(s, IQR/1.349), robust to the outliers real columns hold (the cells
#: are exact; the bandwidth only shapes rows inside a cell). kde_bandwidth() keeps the library's default,
#: the paper's sample standard deviation. Both are said in the refresh's summary and docs/math.md §2.
SYNOPSIS_SCALE = "minim"


def _select_bandwidth(plpy, sample: np.ndarray, method: str, backend: str, required: bool = True,
                      scale: str | None = None):
    """Run a selector, passing its warnings on as PostgreSQL warnings. When it rejects the data, raise
    the error, or with ``required=False`` warn and return None. ``scale`` goes to plug-in selectors."""
    options = {"scale": scale} if scale is not None and bandwidth.SELECTORS[method].scaled else {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = bandwidth.select(sample, method=method, backend=backend, dtype="float32",
                                      interrupt=interrupt_check(plpy), **options)
        except (BackendUnavailableError, DeviceOutOfMemoryError) as exc:  # the backend asked for cannot run
            _fail(f"pg_kde: {exc}")
        except ValueError as exc:
            if required:
                _fail(f"pg_kde: {exc}")
            plpy.warning(f"pg_kde: no bandwidth ({exc}); the synopsis keeps its exact cells unsmoothed")
            return None
    for w in caught:
        plpy.warning(f"pg_kde: {w.message}")
    return result


def choose_bandwidth(plpy, GD, relid, cols, method, backend, sample_size, extversion) -> str:
    """kde_bandwidth(): the paper's selectors on a sample of a table's columns; {"bandwidth": [...]}."""
    return _returning_errors(plpy, _choose_bandwidth, GD, relid, cols, method, backend, sample_size, extversion)


def _choose_bandwidth(plpy, GD, relid, cols, method, backend, sample_size, extversion) -> str:
    _check_version(plpy, GD, extversion)
    rel, kind, schema = _relation(plpy, relid)
    if sample_size is None or sample_size < 2:
        _fail("pg_kde: sample_size must be at least 2")
    exprs, _, _ = _columns(plpy, schema, relid, rel, cols)
    _check_sample_size(plpy, sample_size, len(cols))
    try:
        chosen = _choose_method(method, len(cols), for_counts=False)
    except ValueError as exc:
        _fail(f"pg_kde: {exc}")
    n_total = plpy.execute(f"SELECT count(*) AS n FROM {rel}")[0]["n"]
    sample = _sample(plpy, rel, kind, exprs, n_total, sample_size)
    if len(sample) < 2:
        _fail(f"pg_kde: {rel} has fewer than 2 rows with every column non-NULL")
    result = _select_bandwidth(plpy, sample if len(cols) > 1 else sample[:, 0], chosen, backend)
    if len(cols) == 1:
        return json.dumps({"bandwidth": [math.sqrt(result.H[0, 0])]})
    return json.dumps({"bandwidth": result.H.ravel().tolist()})


def refresh(plpy, GD, relid, cols, method, sample_size, grid_size, backend, extversion) -> str:
    """kde_refresh(): build a synopsis in the caller's transaction and upsert its catalog row; returns its
    summary (or the error, see the module docstring)."""
    return _returning_errors(plpy, _refresh, GD, relid, cols, method, sample_size, grid_size, backend, extversion)


def _refresh(plpy, GD, relid, cols, method, sample_size, grid_size, backend, extversion) -> str:
    started = time.perf_counter()
    _check_version(plpy, GD, extversion)
    rel, kind, schema = _relation(plpy, relid)
    if cols is not None and len(cols) == 2:
        return _refresh_2d(plpy, schema, relid, rel, kind, cols, method, sample_size, grid_size, backend, started)
    if cols is not None and len(cols) != 1:
        _fail("pg_kde: synopses cover one column or a pair of columns")
    (col,), attnums, coltypes = _columns(plpy, schema, relid, rel, cols)
    chosen, state = _refresh_start(plpy, schema, relid, cols, method, sample_size, grid_size, (16, 65536))

    x = f"({col})::float8"
    stats = plpy.execute(
        f"SELECT count(*) AS n_all, count({col}) AS n, min({x}) AS lo, max({x}) AS hi, "
        f"count(*) FILTER (WHERE {x} IN ('NaN', 'Infinity', '-Infinity')) AS bad, "
        f"coalesce(bool_and({x} = trunc({x})), true) AS integral FROM {rel}"
    )[0]
    n_all, n = int(stats["n_all"]), int(stats["n"])
    if n == 0:
        _fail(f"pg_kde: column {col} of {rel} has no non-NULL values" if n_all else f"pg_kde: {rel} is empty")
    if stats["bad"]:
        _fail(f"pg_kde: column {col} of {rel} holds {stats['bad']} NaN or infinite value(s); a synopsis needs finite values")
    lo, hi = float(stats["lo"]), float(stats["hi"])
    integral = bool(stats["integral"]) and max(abs(lo), abs(hi)) < INTEGRAL_LIMIT
    # Values near the ends of float8: scan a power-of-two multiple (exact) so sums and differences stay
    # finite; everything is stored in the column's units again at the end.
    scale = _scan_scale(lo, hi)
    x, lo, hi = _scaled(col, scale), lo * scale, hi * scale

    sample = _sample(plpy, rel, kind, [col], n_all, sample_size)[:, 0] * scale
    values_query = f"SELECT {x} AS v FROM {rel} WHERE {col} IS NOT NULL"
    # Few distinct values: the whole column as an exact frequency table.
    atoms = None
    if len(np.unique(sample)) <= EXACT_DISTINCT:
        groups = plpy.execute(f"SELECT v, count(*) AS k FROM ({values_query}) s GROUP BY v LIMIT {EXACT_DISTINCT + 1}")
        if len(groups) <= EXACT_DISTINCT:
            atoms = Atoms.from_counts([g["v"] for g in groups], [g["k"] for g in groups])
    if atoms is None:
        candidates = atom_candidates(sample)
        counted = plpy.execute(
            plpy.prepare(f"SELECT v, count(*) AS k FROM ({values_query}) s WHERE v = ANY($1) GROUP BY v", ["float8[]"]),
            [candidates.tolist()],
        )
        atoms = Atoms.from_counts([g["v"] for g in counted], [g["k"] for g in counted], min_count=ATOM_SHARE * n)
    kde_rows = n - atoms.rows

    summary = {"relation": rel, "column": cols[0], "rows": n, "nulls": n_all - n, "heavy_values": len(atoms.values),
               "heavy_rows": atoms.rows, "kde_rows": kde_rows, "integer_valued": integral}
    h, used_method, used_backend, used_sample, used_scale = 0.0, "exact", "none", 0, None
    grid, lattice = [], []
    cell_count, cell_sum, cell_offset, kde_mass, discrete = [], [], [], [], False
    if kde_rows > 0:
        rest = sample[~np.isin(sample, atoms.values)]
        if integral:  # one cell per value where the range allows (a whole-number step otherwise)
            g_lo, g_hi, size = grid_layout(lo, hi, True, grid_size)
            points, values = np.linspace(g_lo, g_hi, size), None
        else:  # equal depth: cells hold similar shares of rows, whatever the skew
            points, values = quantile_grid(rest if len(rest) else sample, lo, hi, False, grid_size)
        grid_size = len(points)
        typical = float(np.median(np.diff(points)))  # a typical cell's width
        discrete = integral or values is not None or is_discrete(rest, typical)
        lattice = values.tolist() if values is not None else []
        if len(rest) >= 50 and np.ptp(rest) > 0:
            # Chosen on the sample, carried to the table's rows, capped at a typical cell: the cells are
            # exact, the KDE only says where rows sit inside a cell (docs/math.md §7).
            unit = _selection_unit(rest)
            result = _select_bandwidth(plpy, rest / unit, chosen, backend, scale=SYNOPSIS_SCALE)
            h = min(scale_bandwidth(math.sqrt(result.H[0, 0]) * unit, len(rest), kde_rows, result.method), typical)
            used_method, used_backend, used_sample = result.method, result.backend, len(rest)
            used_scale = result.details.get("scale")
        else:  # too few rows off the heavy values to choose a bandwidth: the grid's own resolution
            h, used_method, used_sample = typical, "grid", len(rest)
        # One scan: per grid cell, its rows, their sum and the sum of their offsets within the cell.
        cells = plpy.execute(
            plpy.prepare(
                f"SELECT c, count(*) AS n, sum(v) AS s, sum((v - $1[c + 1]) / ($1[c + 2] - $1[c + 1])) AS t "
                f"FROM (SELECT v, least(greatest(width_bucket(v, $1) - 1, 0), {grid_size - 2}) AS c "
                f"FROM ({values_query}) s WHERE NOT (v = ANY($2))) q GROUP BY c",
                ["float8[]", "float8[]"],
            ),
            [points.tolist(), atoms.values.tolist()],
        )
        rows_in, sums_in, offsets_in = (np.zeros(grid_size - 1) for _ in range(3))
        for r in cells:  # the query clamps c to the cells 0 .. grid_size - 2
            k = int(r["c"])
            rows_in[k] += float(r["n"])
            sums_in[k] += float(r["s"])
            offsets_in[k] += float(r["t"])
        density = grid_density(points, point_weights(rows_in, np.clip(offsets_in, 0.0, rows_in)), h,
                               interrupt=interrupt_check(plpy))
        grid = points.tolist()
        cell_count, cell_sum, kde_mass = cell_prefix(rows_in), cell_prefix(sums_in), density.tolist()
        cell_offset = cell_prefix(np.clip(offsets_in, 0.0, rows_in))

    atom_count, atom_sum = atoms.cumulative()
    if scale != 1.0:  # back to the column's units (sums past float8's range become infinite)
        with np.errstate(over="ignore"):
            h, grid, lattice, cell_sum, atom_sum = h / scale, *(
                (np.asarray(a, dtype=np.float64) / scale).tolist() for a in (grid, lattice, cell_sum, atom_sum))
            atoms = Atoms(atoms.values / scale, atoms.counts)
    seconds = time.perf_counter() - started
    _upsert(
        plpy,
        schema,
        "kde_synopsis",
        {"relid": relid, "cols": cols, "method": used_method, "bandwidth": [h], "sample_size": used_sample,
         "n_rows": n, "n_null": n_all - n, "integer_valued": integral, "atom_values": atoms.values.tolist(),
         "atom_cum_count": atom_count, "atom_cum_sum": atom_sum, "kde_rows": kde_rows, "grid": grid,
         "lattice": lattice, "grid_size": grid_size if kde_rows > 0 else 0, "cell_cum_count": cell_count,
         "cell_cum_sum": cell_sum, "cell_cum_offset": cell_offset, "kde_mass": kde_mass, "cell_discrete": discrete,
         "build_seconds": seconds, "backend": used_backend, **_identity(state, attnums, coltypes),
         "options": json.dumps({"method": method, "sample_size": sample_size, "grid_size": grid_size,
                                "backend": backend})},
        {**_CATALOG_TYPES, "integer_valued": "bool", "grid_size": "int4"},
    )
    summary.update({"method": used_method, "bandwidth": h, "sample_size": used_sample, "backend": used_backend,
                    **({"scale": used_scale} if used_scale else {}),
                    "discrete": discrete,
                    "grid_size": grid_size if kde_rows > 0 else 0, "seconds": round(seconds, 4)})
    return json.dumps(summary)


#: Beyond 2^53 every float8 is a whole number: such columns are not treated as integer-valued.
INTEGRAL_LIMIT = 2.0**53
#: Largest magnitude scanned: n * 2^960 stays finite for any row count (n < 2^63).
_SCAN_LIMIT = 2.0**960


def _scan_scale(lo: float, hi: float) -> float:
    """1, or the power of two that brings values up to max(|lo|, |hi|) under 2^960 (exact scaling)."""
    top = max(abs(lo), abs(hi))
    return 1.0 if top < _SCAN_LIMIT else math.ldexp(1.0, 960 - math.frexp(top)[1])


def _scaled(expr: str, scale: float) -> str:
    """The float8 value of a quoted column, times a power of two when scale is not 1."""
    return f"({expr})::float8" if scale == 1.0 else f"({expr})::float8 * {scale!r}::float8"


def _selection_unit(values: np.ndarray) -> float:
    """1, or a power of two near the values' magnitude when it is past 2^500: the selectors square
    differences of values, which would overflow. Bandwidths are equivariant, so h = h(x / u) * u."""
    top = float(np.max(np.abs(values))) if len(values) else 0.0
    return 1.0 if top < 2.0**500 else math.ldexp(1.0, math.frexp(top)[1])


def _refresh_start(plpy, schema, relid, cols, method, sample_size, grid_size, grid_range):
    """Checks shared by 1-D and 2-D refreshes. Serialises refreshes of the same synopsis by locking its
    catalog row (FOR UPDATE: only roles allowed to write the catalog can take it), and reads the table's
    state for staleness before any scan. Returns (method to run, table state)."""
    if sample_size is None or sample_size < 100:
        _fail("pg_kde: sample_size must be at least 100")
    low, high = grid_range
    if grid_size is None or not low <= grid_size <= high:
        _fail(f"pg_kde: grid_size must be between {low} and {high}" + (" for a 2-D synopsis" if len(cols) == 2 else ""))
    try:
        chosen = _choose_method(method, len(cols), for_counts=True)
    except ValueError as exc:
        _fail(f"pg_kde: {exc}")
    _check_sample_size(plpy, sample_size, len(cols))
    lock = plpy.prepare(f"SELECT 1 FROM {schema}.kde_catalog WHERE relid = $1::oid::regclass AND cols = $2 FOR UPDATE",
                        ["oid", "text[]"])
    plpy.execute(lock, [relid, list(cols)])
    state = plpy.execute(plpy.prepare(f"SELECT mod_count, storage_id, pages FROM {schema}._kde_table_state($1)",
                                      ["oid"]), [relid])[0]
    return chosen, {"relid": relid, **state}


def _identity(state: dict, attnums, coltypes) -> dict:
    """The catalog columns that say which columns a synopsis describes and what staleness compares."""
    return {"attnums": attnums, "coltypes": coltypes, "built_relid": state["relid"], "mod_count": state["mod_count"],
            "storage_id": state["storage_id"], "pages": state["pages"]}


#: Columns of the header table (kde_catalog); the rest of a built row goes to its kind's payload table.
_HEADER_COLUMNS = ("relid", "cols", "attnums", "coltypes", "built_relid", "requested", "method", "backend", "bandwidth",
                   "sample_size", "n_rows", "n_null", "build_seconds", "mod_count", "storage_id", "pages")
#: The payload table of each kind.
_KINDS = {"kde_synopsis": "1d", "kde_synopsis_2d": "2d"}


def _upsert(plpy, schema: str, table: str, row: dict, types: dict) -> None:
    """Write one synopsis: its header row in kde_catalog and its payload row in ``table`` (kde_synopsis or
    kde_synopsis_2d), each INSERT ... ON CONFLICT (relid, cols) DO UPDATE, in the caller's transaction.
    ``row`` maps column -> value (relid first, as an oid; ``options`` is the request, stored as
    ``requested``), ``types`` column -> SQL type of the parameter."""
    row = {("requested" if c == "options" else c): v for c, v in row.items()}
    types = {**types, "requested": types.get("options", "jsonb")}
    header = {c: row[c] for c in _HEADER_COLUMNS}
    header["kind"] = _KINDS[table]
    payload = {c: v for c, v in row.items() if c not in _HEADER_COLUMNS or c in ("relid", "cols")}
    types = {**types, "kind": "text"}
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


def _refresh_2d(plpy, schema, relid, rel, kind, cols, method, sample_size, grid_size, backend, started):
    """A 2-D synopsis of a pair of columns on an equal-depth grid: exact summed-area tables of the grid
    cells' counts and sums (one scan), and a KDE in grid-index coordinates with a bandwidth matrix (LSCV_H
    by default) shaping the cells a box cuts."""
    exprs, attnums, coltypes = _columns(plpy, schema, relid, rel, cols)
    if cols[0] == cols[1]:
        _fail("pg_kde: a 2-D synopsis needs two different columns")
    chosen, state = _refresh_start(plpy, schema, relid, cols, method, sample_size, grid_size, (8, 1024))

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
    n_all, n = int(stats["n_all"]), int(stats["n"])
    names = ", ".join(plpy.quote_ident(c) for c in cols)
    if n == 0:
        _fail(f"pg_kde: {rel} has no rows with both {names} non-NULL" if n_all else f"pg_kde: {rel} is empty")
    if stats["bad"]:
        _fail(f"pg_kde: columns {names} of {rel} hold {stats['bad']} NaN or infinite value(s); a synopsis needs finite values")
    for i, c in enumerate(cols, 1):
        if stats[f"lo{i}"] == stats[f"hi{i}"]:
            _fail(f"pg_kde: column {plpy.quote_ident(c)} of {rel} is constant where both columns are non-NULL; "
                       "use a 1-D synopsis of the other column")
    bounds = [(float(stats[f"lo{k}"]), float(stats[f"hi{k}"])) for k in (1, 2)]
    integral = [bool(stats[f"int{k + 1}"]) and max(map(abs, bounds[k])) < INTEGRAL_LIMIT for k in (0, 1)]
    scales = [_scan_scale(*b) for b in bounds]  # as in the 1-D refresh: scan power-of-two multiples
    x1, x2 = (_scaled(e, c) for e, c in zip(exprs, scales))
    sample = _sample(plpy, rel, kind, exprs, n_all, sample_size) * np.array(scales)
    layouts = [quantile_grid(sample[:, k], bounds[k][0] * scales[k], bounds[k][1] * scales[k], integral[k], grid_size)
               for k in (0, 1)]
    grids = [g for g, _ in layouts]
    lattices = [(v.tolist() if v is not None else []) for _, v in layouts]
    m1, m2 = len(grids[0]), len(grids[1])
    # The KDE lives in grid-index coordinates (each axis's cells of unit width): choose H on the sample
    # mapped there, carry it to N rows, and cap each axis at one cell.
    positions = np.column_stack([grid_positions(sample[:, k], grids[k]) for k in (0, 1)])
    result = _select_bandwidth(plpy, positions, chosen, backend, required=False)
    if result is None:  # e.g. one column a function of the other: exact cells, no smoothing
        H, used_method, used_backend = np.zeros((2, 2)), "grid", "none"
    else:
        H = result.H * scale_bandwidth(1.0, len(sample), n, result.method, d=2) ** 2  # H ∝ h²
        H = cap_bandwidth_matrix(H, (1.0, 1.0))
        used_method, used_backend = result.method, result.backend

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
        [grids[0].tolist(), grids[1].tolist()],
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
    masses = smooth_masses_2d(bilinear_weights(rows_in, t1, t2, t12), (1.0, 1.0), H, interrupt=interrupt_check(plpy))
    sat = lambda a: summed_area(a).ravel().tolist()  # noqa: E731 - row-major (m1, m2)

    seconds = time.perf_counter() - started
    with np.errstate(over="ignore"):  # back to the columns' units (sums past float8's range become infinite)
        sums = np.stack([summed_area(sum1) / scales[0], summed_area(sum2) / scales[1]]).ravel().tolist()
        grids = [grids[k] / scales[k] for k in (0, 1)]
        lattices = [(np.asarray(lattices[k], dtype=np.float64) / scales[k]).tolist() for k in (0, 1)]
    _upsert(
        plpy,
        schema,
        "kde_synopsis_2d",
        {"relid": relid, "cols": cols, "method": used_method, "bandwidth": H.ravel().tolist(),
         "sample_size": len(sample), "n_rows": n, "n_null": n_all - n,
         "integer_valued": integral, "grid1": grids[0].tolist(),
         "grid2": grids[1].tolist(), "lattice1": lattices[0], "lattice2": lattices[1], "grid_size": [m1, m2],
         "sat_count": sat(rows_in), "sat_sum": sums, "kde_sat": sat(cell_masses(masses)), "build_seconds": seconds,
         "backend": used_backend, **_identity(state, attnums, coltypes),
         "options": json.dumps({"method": method, "sample_size": sample_size, "grid_size": grid_size,
                                "backend": backend})},
        {**_CATALOG_TYPES, "integer_valued": "bool[]", "grid_size": "int4[]"},
    )
    return json.dumps({"relation": rel, "columns": list(cols), "rows": n, "nulls": n_all - n, "method": used_method,
                       "bandwidth": H.ravel().tolist(), "sample_size": len(sample), "backend": used_backend,
                       "grid_size": [m1, m2], "seconds": round(seconds, 4)})
