"""What the build's calibration of the shape's doubt costs a refresh (pg_kde/synopsis/calibration.py): the scan
over a synopsis' grid alone against its grid with the calibration's cuts, on the server, and the calibration
itself, in memory.

    python benchmarks/calibration_cost.py [--dsn DSN] [--rows 10000000] [--repeats 5]

Without --dsn (or $PG_KDE_DSN) it starts the embedded local server of the current directory. In a database of
its own (pg_kde_calibration_bench; dropped and recreated) it generates benchmarks/budget.py's sales table,
refreshes amount at the default budget and created_at at 2 KB (a profiled time column's build counts cuts only
over a few cells, 0.25.0), and times the refresh's aggregate (_kde_cells) over each stored grid, then over that
grid with the cuts a build would add (calibration.probes and cuts_of of a 1% block sample, as the build takes
them from its sample: PROBES values of each kind, PROFILE_PROBES for the time column), alternating, --repeats
times each; medians. In memory, on
benchmarks/coverage.py's columns of the same size, it times calibration.calibrate on the cuts each build
counted (medians of 3 builds) at 2, 8 and 64 KB: the cents, the Zipf-like quantity, and the time column with
its daily profile (calibrated since 0.25.0). Writes benchmarks/results/calibration_cost.md and prints it.
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
import psycopg

from budget import SALES_SQL, cpu_model
from coverage import sales, synopsis
from load import fresh_database

from pg_kde import __version__, admin, server
from pg_kde.synopsis import build, calibration
from pg_kde.synopsis.cells import DAY_PROFILE

DATABASE = "pg_kde_calibration_bench"
#: column -> (lattice step, the column as float8 in SQL, the budget refreshed (None: the default), the calibration
#: values of each kind its build takes)
SCANNED = {"amount": (0.01, "amount::float8", None, calibration.PROBES),
           "created_at": (1.0, "extract(epoch FROM created_at)::float8", 2048, calibration.PROFILE_PROBES)}


def timed(conn, sql, params=()) -> float:
    start = time.perf_counter()
    conn.execute(sql, params).fetchall()
    return time.perf_counter() - start


def scan_costs(dsn: str, rows: int, repeats: int) -> list:
    """(column, grid points, scanned points, median s over the grid, median s with the cuts) per column."""
    out = []
    with admin.connect(fresh_database(dsn, DATABASE, __version__, psycopg)) as conn:
        conn.execute("SELECT setseed(0.5)")
        conn.execute(SALES_SQL.format(rows=int(rows)))
        conn.execute("VACUUM ANALYZE sales")
        for col, (step, expr, budget, count) in SCANNED.items():
            conn.execute("SELECT kde_refresh('sales', %s, budget => %s)", (col, budget))
            grid = np.asarray(conn.execute("SELECT grid FROM kde_synopsis WHERE relid = 'sales'::regclass AND "
                                           "cols = ARRAY[%s]", (col,)).fetchone()[0], dtype=np.float64)
            sample = np.array([r[0] for r in conn.execute(
                f"SELECT {expr} FROM sales TABLESAMPLE SYSTEM (1) REPEATABLE (1)").fetchall()])
            ranked, even = calibration.probes(sample, (sample.min(), sample.max()), step, count)
            plan = build._Plan1D(grid, np.empty(0), step, step, False, 0, 0, np.empty(0), 0, ranked, even)
            fine = plan.scanned_grid()
            # (the column as the aggregate reads it: numeric and timestamptz directly)
            sql = f"SELECT length(_kde_cells({col}, %s::float8[], '{{}}'::float8[], %s::float8, 256)) FROM sales"
            timed(conn, sql, (grid.tolist(), step))  # warm
            times = {"grid": [], "cuts": []}
            for _ in range(repeats):
                for name, g in (("grid", grid), ("cuts", fine)):
                    times[name].append(timed(conn, sql, (g.tolist(), step)))
            out.append((col, len(grid), len(fine), statistics.median(times["grid"]), statistics.median(times["cuts"])))
    return out


def calibration_costs(rows: int) -> list:
    """(column, budget, weight, median s of calibrate; None where it did not run) in memory, on coverage.py's
    first data set."""
    data = sales(rows, np.random.default_rng([2026, 0]))
    spent = []
    real = build.calibrate

    def clocked(*args):
        start = time.perf_counter()
        weights = real(*args)
        spent.append(time.perf_counter() - start)
        return weights

    out = []
    build.calibrate = clocked
    try:
        for col in ("amount", "qty", "created_at"):
            for budget in (2048, 8192, 65536):
                spent.clear()
                for _ in range(3):
                    payload = synopsis(data[col], budget, DAY_PROFILE if col == "created_at" else None)
                # (none where the build does not calibrate: a column it holds exactly at that size)
                out.append((col, budget, payload["doubt_weight"], statistics.median(spent) if spent else None))
    finally:
        build.calibrate = real
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=os.environ.get("PG_KDE_DSN"))
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args(argv)
    dsn = args.dsn or server.start(".").dsn()
    scans = scan_costs(dsn, args.rows, args.repeats)
    cal = calibration_costs(args.rows)
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"# What the calibration costs ({when})", "",
             f"`python benchmarks/calibration_cost.py --rows {args.rows} --repeats {args.repeats}`: pg_kde "
             f"{__version__}, {cpu_model()} ({os.cpu_count()} cores, {platform.machine()}).", "",
             f"The refresh's scan (_kde_cells over sales, medians of {args.repeats}, alternating):", "",
             "| column | grid points | with the cuts | scan over the grid | with the cuts | more |",
             "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {c} | {g:,} | {f:,} | {a:.3f} s | {b:.3f} s | {b - a:+.3f} s ({b / a - 1:+.0%}) |"
              for c, g, f, a, b in scans]
    lines += ["", "The calibration in memory (calibration.calibrate, medians of 3 builds):", "",
              "| column | budget | weight | seconds |", "|---|---:|---:|---:|"]
    lines += [f"| {c} | {b:,} B | {'—' if w is None else w} | {'—' if s is None else f'{s:.3f} s'} |"
              for c, b, w, s in cal]
    report = "\n".join(lines)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "calibration_cost.md").write_text(report + "\n")
    print(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
