"""kde_track: what tracking costs writers, and how a tracked synopsis answers after the table grew by 10%.

    python benchmarks/track.py [--dsn DSN] [--rows 1000000] [--queries 200] [--repeats 3]

Without --dsn (or $PG_KDE_DSN) it starts the embedded local server of the current directory. It works in a
database of its own (pg_kde_track_bench; dropped and recreated) on benchmarks/budget.py's generated sales
table (--rows rows: amount numeric(12,2) log-normal cents, qty, created_at timestamptz over 2024 with a
daily rhythm), with default synopses of amount and created_at.

- Write overhead: rows per second of INSERT statements of 10,000 rows and of single-row INSERT statements
  (each its own transaction), into a copy of the table without tracking and with it, alternating run by run
  (median of --repeats).
- Growth: 10% more rows (the same distribution for amount; created_at continuing into 2025 for a tenth
  of a year), then COUNT over --queries ranges with bounds drawn from the data (shares uniform in
  0.1–50%), for the synopsis as built (stale), tracked, and refreshed; median and p95 relative error.
Writes benchmarks/results/track.md and prints it.
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
from budget import SALES_SQL, cpu_model
from load import fresh_database

from pg_kde import __version__, server

DATABASE = "pg_kde_track_bench"
BATCH = 10000
SINGLE = 2000
GROWTH_SQL = """
INSERT INTO {table}
SELECT round(exp(3 + sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random()))::numeric, 2)::numeric(12,2),
       least(floor(1 / power(1 - random(), 1 / 1.2)), 100000)::integer,
       timestamptz '2025-01-01 00:00:00+00' + make_interval(secs => floor(36.6 * random()) * 86400
           + mod(mod(floor(CASE WHEN random() < 0.75
                                THEN 46800 + 12600 * sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random())
                                ELSE 86400 * random() END)::bigint, 86400) + 86400, 86400))
FROM generate_series(1, {rows})
"""


def rows_per_second(conn, table: str, single: bool) -> float:
    start = time.perf_counter()
    if single:
        for i in range(SINGLE):
            conn.execute(f"INSERT INTO {table} VALUES (%s, %s, timestamptz '2024-06-01 12:00+00' + %s * interval '1 s')",
                         (round(10 + (i % 5000) / 100, 2), 1 + i % 7, i))
        return SINGLE / (time.perf_counter() - start)
    conn.execute(f"INSERT INTO {table} SELECT round((exp(3 + random()))::numeric, 2), 1, "
                 f"timestamptz '2024-06-01 12:00+00' + g * interval '1 s' FROM generate_series(1, {BATCH}) g")
    return BATCH / (time.perf_counter() - start)


def errors(conn, table, col, kind, ranges, exact):
    cast = "::timestamptz" if kind == "time" else ""
    out = []
    for (lo, hi), truth in zip(ranges, exact):
        est = conn.execute(f"SELECT approx_count(%s, %s, %s{cast}, %s{cast})", (table, col, lo, hi)).fetchone()[0]
        out.append(abs(est - truth) / truth)
    return float(np.median(out)), float(np.percentile(out, 95))


def data_ranges(conn, table, col, kind, rng, k):
    expr = f"extract(epoch from {col})::float8" if kind == "time" else f"{col}::float8"
    x = np.sort(np.array([r[0] for r in conn.execute(f"SELECT {expr} FROM {table}")], dtype=float))
    ranges, exact = [], []
    while len(ranges) < k:
        share = rng.uniform(0.001, 0.5)
        start = rng.uniform(0, 1 - share)
        lo, hi = x[int(start * (len(x) - 1))], x[int((start + share) * (len(x) - 1))]
        truth = int(np.searchsorted(x, hi, "right") - np.searchsorted(x, lo, "left"))
        if truth:
            if kind == "time":
                lo, hi = (dt.datetime.fromtimestamp(v, dt.timezone.utc) for v in (lo, hi))
            ranges.append((lo, hi))
            exact.append(truth)
    return ranges, exact


def main(argv=None) -> int:
    import psycopg

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=os.environ.get("PG_KDE_DSN"))
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args(argv)

    dsn = args.dsn or server.start(".").dsn()
    bench_dsn = fresh_database(dsn, DATABASE, __version__, psycopg)
    with psycopg.connect(bench_dsn, autocommit=True) as conn:
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'pg_kde'").fetchone()[0]
        postgres = conn.execute("SHOW server_version").fetchone()[0]
        conn.execute("SELECT setseed(0.25)")
        conn.execute(SALES_SQL.format(rows=args.rows))
        for name in ("plain", "tracked"):
            conn.execute(f"CREATE TABLE w_{name} AS SELECT * FROM sales LIMIT 100000")
            for col in ("amount", "created_at"):
                conn.execute(f"SELECT kde_refresh('w_{name}', '{col}')")
        conn.execute("SELECT kde_track('w_tracked')")
        speed = {(name, single): [] for name in ("plain", "tracked") for single in (False, True)}
        for _ in range(args.repeats):
            for single in (False, True):
                for name in ("plain", "tracked"):
                    speed[(name, single)].append(rows_per_second(conn, f"w_{name}", single))

        # Growth: three copies of the table's synopses, as built, tracked, refreshed.
        conn.execute("VACUUM ANALYZE sales")
        for col in ("amount", "created_at"):
            conn.execute(f"SELECT kde_refresh('sales', '{col}')")
        conn.execute("CREATE TABLE built_copy AS SELECT * FROM kde_synopsis WHERE relid = 'sales'::regclass")
        conn.execute("SELECT kde_track('sales')")
        t0 = time.perf_counter()
        conn.execute(GROWTH_SQL.format(table="sales", rows=args.rows // 10))
        growth_s = time.perf_counter() - t0
        tracked_state = conn.execute("SELECT cols[1], stale FROM kde_synopses WHERE relid = 'sales'::regclass "
                                     "ORDER BY 1").fetchall()
        results = {}
        rng = np.random.default_rng(args.seed)
        workloads = {col: data_ranges(conn, "sales", col, kind, rng, args.queries)
                     for col, kind in (("amount", "number"), ("created_at", "time"))}
        for col, kind in (("amount", "number"), ("created_at", "time")):
            results[(col, "tracked")] = errors(conn, "sales", col, kind, *workloads[col])
        conn.execute("SELECT kde_untrack('sales')")
        conn.execute("UPDATE kde_synopsis p SET (atom_values, atom_cum_count, atom_cum_sum, atom_pack, kde_rows, grid, "
                     "grid_size, cell_cum_count, cell_cum_sum, step, density, shape_var) = (SELECT b.atom_values, "
                     "b.atom_cum_count, b.atom_cum_sum, b.atom_pack, b.kde_rows, b.grid, b.grid_size, b.cell_cum_count, "
                     "b.cell_cum_sum, b.step, b.density, b.shape_var FROM built_copy b WHERE b.cols = p.cols) "
                     "WHERE p.relid = 'sales'::regclass")
        for col, kind in (("amount", "number"), ("created_at", "time")):
            results[(col, "as built")] = errors(conn, "sales", col, kind, *workloads[col])
        for col, kind in (("amount", "number"), ("created_at", "time")):
            conn.execute(f"SELECT kde_refresh('sales', '{col}')")
            results[(col, "refreshed")] = errors(conn, "sales", col, kind, *workloads[col])

    med = {k: statistics.median(v) for k, v in speed.items()}
    lines = [f"## kde_track: write overhead and 10% growth ({dt.date.today().isoformat()})", "",
             f"`python benchmarks/track.py --rows {args.rows} --queries {args.queries} --repeats {args.repeats}`: "
             f"pg_kde {version}, PostgreSQL {postgres}, {cpu_model()} ({os.cpu_count()} cores), "
             f"{platform.system()} {platform.release()}. Medians of {args.repeats} runs, alternating.", "",
             "Write overhead (a 100,000-row copy of the table with default synopses of amount and created_at; "
             "INSERT statements from one session, autocommit):", "",
             "| statement | without tracking | with tracking | ratio |", "|---|---:|---:|---:|"]
    for single, label in ((False, f"INSERT of {BATCH:,} rows"), (True, "single-row INSERT")):
        a, b = med[("plain", single)], med[("tracked", single)]
        lines.append(f"| {label} | {a:,.0f} rows/s | {b:,.0f} rows/s | {b / a:.2f} |")
    lines += ["", f"Growth: {args.rows // 10:,} rows appended to {args.rows:,} in one statement ({growth_s:.1f} s "
                  f"with tracking); stale flags of the tracked synopses after it: "
                  + ", ".join(f"{c} {'stale' if s else 'not stale'}" for c, s in tracked_state) + ".", "",
              f"COUNT over {args.queries} ranges with bounds drawn from the grown table (shares 0.1–50%): "
              "median / p95 relative error.", "",
              "| column | as built (stale) | tracked | refreshed |", "|---|---:|---:|---:|"]
    for col in ("amount", "created_at"):
        cells = [results[(col, s)] for s in ("as built", "tracked", "refreshed")]
        lines.append(f"| {col} | " + " | ".join(f"{m:.4%} / {p:.3%}" for m, p in cells) + " |")
    text = "\n".join(lines) + "\n"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "track.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
