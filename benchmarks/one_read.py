"""One read against two: the accuracy of 1-D synopses whose grid a sample of the table's blocks placed (the
table then read once, ``pg_kde.sample_blocks`` = 1024, the default) against those placed from a row sample
of a first full read (``pg_kde.sample_blocks`` = 0), on the same rows, at several budgets.

    python benchmarks/one_read.py [--dsn DSN] [--rows 10000000] [--queries 200] [--seed 5]

Without --dsn (or $PG_KDE_DSN) it starts the embedded local server of the current directory. It works in a
database of its own (pg_kde_one_read; dropped and recreated) holding benchmarks/budget.py's generated sales
table in the generator's (random) order, and a copy stored in created_at's order (the rows of a table that
grows in time: each block's values cluster). Per column and budget it refreshes with both settings, reads
the sequential scans each refresh made (pg_stat_get_xact_numscans before and after), and answers --queries
ranges with bounds drawn from the data and --queries uniform over [min, max] (the same ranges for both),
against exact counts from the sorted column. Writes benchmarks/results/one_read.md and prints it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
from pathlib import Path

import numpy as np

from budget import SALES_SQL, cpu_model
from load import fresh_database

from pg_kde import __version__, admin, server

DATABASE = "pg_kde_one_read"
BUDGETS = (2048, 8192, 65536)
#: (table, column, the column read as float8, bounds of the column's type from float8 parameters)
CASES = (
    ("sales", "amount", "amount::float8", "%s::numeric"),
    ("sales", "qty", "qty::float8", "%s"),
    ("sales_by_time", "created_at", "extract(epoch from created_at)::float8", "to_timestamp(%s)"),
    ("sales_by_time", "amount", "amount::float8", "%s::numeric"),
)


def ranges(xs: np.ndarray, rng, k: int):
    """k ranges with bounds drawn from the data, and k uniform over [min, max]."""
    data = np.sort(rng.choice(xs, (k, 2)), axis=1)
    uniform = np.sort(rng.uniform(xs[0], xs[-1], (k, 2)), axis=1)
    return {"data": data, "uniform": uniform}


def errors(conn, table, col, bound, xs, qs) -> np.ndarray:
    lo, hi = (bound % "q.lo"), (bound % "q.hi")
    est = np.array([r[0] for r in conn.execute(
        f"SELECT approx_count(%s, %s, {lo}, {hi}) FROM unnest(%s::float8[], %s::float8[]) "
        "WITH ORDINALITY AS q(lo, hi, i) ORDER BY q.i", (table, col, qs[:, 0].tolist(), qs[:, 1].tolist()))],
        dtype=np.float64)
    exact = np.searchsorted(xs, qs[:, 1], "right") - np.searchsorted(xs, qs[:, 0], "left")
    return np.abs(est - exact) / np.maximum(exact, 1) * 100.0


def pct(v: float) -> str:
    return "0" if v == 0 else (f"{v:.2g}%" if v < 0.01 else f"{v:.3g}%")


def main(argv=None) -> int:
    import psycopg

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=os.environ.get("PG_KDE_DSN"))
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args(argv)

    dsn = args.dsn or server.start(".").dsn()
    bench_dsn = fresh_database(dsn, DATABASE, __version__, psycopg)
    rows = []
    with admin.connect(bench_dsn) as conn:
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'pg_kde'").fetchone()[0]
        postgres = conn.execute("SHOW server_version").fetchone()[0]
        conn.execute("SELECT setseed(0.5)")
        conn.execute(SALES_SQL.format(rows=int(args.rows)))
        conn.execute("CREATE TABLE sales_by_time AS SELECT * FROM sales ORDER BY created_at")
        for table in ("sales", "sales_by_time"):
            conn.execute(f"VACUUM ANALYZE {table}")
        numscans = "SELECT pg_stat_get_xact_numscans(%s::regclass)"
        for index, (table, col, value, bound) in enumerate(CASES):
            xs = np.sort(np.array([r[0] for r in conn.execute(f"SELECT {value} FROM {table} WHERE {col} IS NOT NULL")],
                                  dtype=np.float64))
            qs = ranges(xs, np.random.default_rng([args.seed, index]), args.queries)
            for budget in BUDGETS:
                for blocks in (0, 1024):
                    with conn.transaction():
                        conn.execute(f"SET LOCAL pg_kde.sample_blocks = {blocks}")
                        before = conn.execute(numscans, (table,)).fetchone()[0]
                        summary = conn.execute("SELECT kde_refresh(%s, %s, budget => %s)", (table, col, budget)).fetchone()[0]
                        reads = conn.execute(numscans, (table,)).fetchone()[0] - before
                    found = {name: errors(conn, table, col, bound, xs, q) for name, q in qs.items()}
                    rows.append((table, col, budget, blocks, reads, summary["seconds"], found))
                    print(table, col, budget, blocks, reads, {k: (pct(np.median(v)), pct(np.percentile(v, 95)))
                                                              for k, v in found.items()}, flush=True)

    lines = [f"## One read against two ({dt.date.today().isoformat()})", "",
             f"`python benchmarks/one_read.py --rows {args.rows} --queries {args.queries} --seed {args.seed}`: "
             f"pg_kde {version}, PostgreSQL {postgres}, {cpu_model()} ({os.cpu_count()} cores), {platform.system()} "
             f"{platform.release()}. budget.py's sales table ({args.rows:,} rows, the generator's random order) and "
             "sales_by_time (the same rows stored in created_at's order). `pg_kde.sample_blocks` 1024: the grid "
             "from a sample of 1,024 blocks, the table read once; 0: from the row sample of a first full read. "
             f"{args.queries} ranges with bounds drawn from the data and {args.queries} uniform over [min, max], "
             "the same for both settings; relative error of approx_count, median / p95.", "",
             "| table | column | budget | sample_blocks | reads | refresh | data ranges | uniform ranges |",
             "|---|---|---|---|---|---|---|---|"]
    for table, col, budget, blocks, reads, seconds, found in rows:
        cells = [f"{pct(np.median(found[k]))} / {pct(np.percentile(found[k], 95))}" for k in ("data", "uniform")]
        lines.append(f"| {table} | {col} | {budget:,} | {blocks} | {reads} | {seconds:.2f} s | {cells[0]} | {cells[1]} |")
    text = "\n".join(lines) + "\n"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "one_read.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
