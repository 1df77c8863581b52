"""Refresh time of 1-D and 2-D synopses against a count(*) of the same table (issue target: refresh <= 3 x count(*)
+ 1 s on 10⁷ rows), the reads of the table each makes, the first call's cost in a new backend (importing pg_kde
into PL/Python), and whether refreshes of unchanged data repeat bit for bit.

    python benchmarks/refresh.py [--dsn DSN] [--rows 10000000] [--repeats 3]

Without --dsn (or $PG_KDE_DSN) it starts the embedded local server of the current directory. It works in a
database of its own (pg_kde_refresh_bench; dropped and recreated) holding the generated sales table of
benchmarks/budget.py (amount numeric(12,2) log-normal cents, qty Zipf-like integers, created_at timestamptz
with a daily rhythm), after a VACUUM ANALYZE. It also times approx_count on each column's synopsis: 20,000
calls inside one statement, with bounds of the column's type. Every timing is taken on a warm table (it is read once first)
and reported as the median of --repeats runs; count(*) runs between refreshes, in the same session. Writes
benchmarks/results/refresh.md and prints it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import time
from pathlib import Path

from budget import SALES_SQL, cpu_model
from load import fresh_database

from pg_kde import __version__, admin, server

DATABASE = "pg_kde_refresh_bench"
COLUMNS = ("amount", "qty", "created_at")
#: The 2-D synopses timed too (a numeric axis with an integer one, and with a time one).
PAIRS = (("amount", "qty"), ("amount", "created_at"))
TARGETS = tuple((c,) for c in COLUMNS) + PAIRS
CALLS = 20000
#: Bounds of each column's type for the latency statements (i runs over the calls).
LATENCY_BOUNDS = {
    "amount": ("(i %% 300)::numeric", "(i %% 300 + 17.31)::numeric"),
    "qty": ("i %% 50", "i %% 50 + 7"),
    "created_at": ("to_timestamp(1704067200 + (i * 1571) %% (360 * 86400))",
                   "to_timestamp(1704067200 + (i * 1571) %% (360 * 86400) + 3 * 86400)"),
}


def timed(conn, query: str, params=()) -> float:
    start = time.perf_counter()
    conn.execute(query, params).fetchall()
    return time.perf_counter() - start


def main(argv=None) -> int:
    import psycopg

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=os.environ.get("PG_KDE_DSN"))
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args(argv)

    dsn = args.dsn or server.start(".").dsn()
    bench_dsn = fresh_database(dsn, DATABASE, __version__, psycopg)
    lines = []
    with admin.connect(bench_dsn) as conn:
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'pg_kde'").fetchone()[0]
        postgres = conn.execute("SHOW server_version").fetchone()[0]
        workers = conn.execute("SHOW max_parallel_workers_per_gather").fetchone()[0]
        t0 = time.perf_counter()
        conn.execute("SELECT setseed(0.5)")
        conn.execute(SALES_SQL.format(rows=int(args.rows)))
        conn.execute("VACUUM ANALYZE sales")
        conn.execute("CREATE TABLE tiny AS SELECT g::float8 AS x FROM generate_series(1, 1000) g")
        load_s = time.perf_counter() - t0
        size = conn.execute("SELECT pg_size_pretty(pg_relation_size('sales'))").fetchone()[0]
        timed(conn, "SELECT count(*) FROM sales")  # warm the table
        counts, refreshes, payloads = [], {t: [] for t in TARGETS}, {t: set() for t in TARGETS}

        def refresh(t):
            if len(t) == 1:
                return conn.execute("SELECT kde_refresh('sales', %s)", (t[0],)).fetchone()[0]
            return conn.execute("SELECT kde_refresh('sales', %s::text[])", (list(t),)).fetchone()[0]

        for _ in range(args.repeats):
            counts.append(timed(conn, "SELECT count(*) FROM sales"))
            for t in TARGETS:
                start = time.perf_counter()
                refresh(t)
                refreshes[t].append(time.perf_counter() - start)
                payloads[t].add(conn.execute(
                    f"SELECT md5(p::text) FROM {'kde_synopsis' if len(t) == 1 else 'kde_synopsis_2d'} p "
                    "WHERE relid = 'sales'::regclass AND cols = %s::text[]", (list(t),)).fetchone()[0])
        summaries, scans = {}, {}
        # The sequential scans of the table one refresh makes: the backend's pending count before and after
        # (it holds earlier transactions' scans until the backend flushes its statistics, idle).
        numscans = "SELECT pg_stat_get_xact_numscans('sales'::regclass)"
        for t in TARGETS:
            with conn.transaction():
                before = conn.execute(numscans).fetchone()[0]
                summaries[t] = refresh(t)
                scans[t] = conn.execute(numscans).fetchone()[0] - before
        # Query latency on each synopsis: CALLS calls inside one statement, bounds moving with i (of the
        # column's type), the median of --repeats statements.
        latency = {c: statistics.median(timed(conn, f"SELECT sum(approx_count('sales', '{c}', {lo}, {hi})) "
                                                    f"FROM generate_series(1, {CALLS}) i") / CALLS
                                        for _ in range(args.repeats))
                   for c, (lo, hi) in LATENCY_BOUNDS.items()}
    # The first call in a new backend imports pg_kde (and numpy) into PL/Python; the second does not.
    first, second = [], []
    for _ in range(args.repeats):
        with psycopg.connect(bench_dsn, autocommit=True) as conn:
            first.append(timed(conn, "SELECT kde_refresh('tiny', 'x')"))
            second.append(timed(conn, "SELECT kde_refresh('tiny', 'x')"))

    count = statistics.median(counts)
    target = 3 * count + 1.0
    lines += [f"## Refresh time ({dt.date.today().isoformat()})", "",
              f"`python benchmarks/refresh.py --rows {args.rows} --repeats {args.repeats}`: pg_kde {version}, "
              f"PostgreSQL {postgres} (max_parallel_workers_per_gather {workers}), {cpu_model()} "
              f"({os.cpu_count()} cores), {platform.system()} {platform.release()}. sales: {args.rows:,} rows, "
              f"{size}, generated and VACUUM ANALYZEd in {load_s:.0f} s; warm (read once before timing). "
              f"Medians of {args.repeats}.", "",
              f"`SELECT count(*) FROM sales`: **{count:.3f} s**; target: refresh ≤ 3 × count(*) + 1 s = "
              f"**{target:.2f} s**.", "",
              "| column(s) | type(s) | refresh (median) | runs | ÷ count(*) | target met | reads of the table | "
              "repeatable (payload md5) | "
              f"grid | heavy values | cut cells' shape | approx_count per call ({CALLS:,} in a statement) |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    types = {"amount": "numeric(12,2)", "qty": "integer", "created_at": "timestamptz"}
    for t in TARGETS:
        med = statistics.median(refreshes[t])
        s = summaries[t]
        grid = f"{s['grid_size']} points" if len(t) == 1 else f"{s['grid_size'][0]} × {s['grid_size'][1]} points"
        shape = ("daily profile" if s.get("period") == 86400 else "KDE cubic") if len(t) == 1 else f"KDE, H by {s['method']}"
        lines.append(f"| {', '.join(t)} | {', '.join(types[c] for c in t)} | **{med:.2f} s** | "
                     f"{', '.join(f'{x:.2f}' for x in refreshes[t])} | "
                     f"{med / count:.1f}× | {'yes' if med <= target else 'no'} | {scans[t]} | "
                     f"{'yes' if len(payloads[t]) == 1 else f'no ({len(payloads[t])} payloads)'} | "
                     f"{grid} | {s.get('heavy_values', '—')} | {shape} | "
                     f"{f'{latency[t[0]] * 1e6:.0f} µs' if len(t) == 1 else '—'} |")
    lines += ["", "Reads of the table: the sequential scans of `sales` one refresh makes (`pg_stat_get_xact_numscans` "
                  "before and after it, in its transaction; a parallel scan counts once; the block sample that places "
                  "the grid is not a sequential scan)."]
    lines += ["", f"First call in a new backend (imports pg_kde into PL/Python), a 1,000-row table: "
                  f"**{statistics.median(first) * 1e3:.0f} ms**; the same call again in that backend: "
                  f"{statistics.median(second) * 1e3:.0f} ms.", ""]
    text = "\n".join(lines)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "refresh.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
