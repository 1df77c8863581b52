"""Query load through pgbench: approx_count calls per second and latency, 1 and many clients, on the current
SQL version's default synopsis and, in the same run, on the previous version (0.3.0) holding its default.

    python benchmarks/load.py [--dsn DSN] [--seconds 10] [--clients 1,32] [--rows 1000000]

Without --dsn (or $PG_KDE_DSN) it starts the embedded local server of the current directory. It works in
two databases of its own (pg_kde_load, pg_kde_load_old; dropped and recreated): a table of --rows rows
(log-normal amounts rounded to cents), its synopsis built by the current version at its default size (8 KB),
and in a 0.3.0 install a synopsis of 0.3.0's default grid (2048 points, ~80 KB: built by the current version
with grid_size => 2048 and written in 0.3.0's layout, pg_kde.synopsis.catalog.format1; 0.3.0's refresh
needs its own package, its query functions are SQL). Each
pgbench run calls approx_count on a seeded random range; the median latency comes from pgbench's
per-transaction log. Writes benchmarks/results/load.md and prints it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from pg_kde import __version__, admin, server
from pg_kde.synopsis.catalog import format1

PREVIOUS = "0.3.0"
PREVIOUS_GRID = 2048  # 0.3.0's default grid_size
SCRIPT = """\\set lo random(1, 400)
\\set w random(1, 200)
SELECT approx_count('load_t', 'amount', :lo, :lo + :w);
"""
# 0.3.0's header and 1-D payload tables.
HEADER = ("relid, cols, kind, attnums, coltypes, built_relid, requested, method, backend, bandwidth, sample_size, "
          "n_rows, n_null, built_at, build_seconds, mod_count, storage_id, pages")
PAYLOAD = ("relid, cols, integer_valued, atom_values, atom_cum_count, atom_cum_sum, kde_rows, grid, lattice, grid_size, "
           "cell_cum_count, cell_cum_sum, cell_cum_offset, kde_mass, cell_discrete")


def pgbench() -> str:
    found = shutil.which("pgbench") or str(server.pg_bindir() / "pgbench")
    if not Path(found).exists():
        raise SystemExit("pgbench not found (it ships with the PostgreSQL server package)")
    return found


def in_statement_us(dsns: dict, psycopg, repeats: int = 5) -> dict:
    """Microseconds per approx_count call inside one SELECT of 5000 calls, per version: ``repeats`` runs
    each, the versions alternating run by run (after a warm-up of each), so that a busy moment of the
    machine falls on both."""
    query = ("SELECT count(approx_count('load_t', 'amount', g % 400, g % 400 + 50)) "
             "FROM generate_series(1, 5000) g")
    conns = {v: psycopg.connect(dsn, autocommit=True) for v, dsn in dsns.items()}
    out = {v: [] for v in dsns}
    try:
        for conn in conns.values():
            conn.execute(query).fetchone()
        for _ in range(repeats):
            for version, conn in conns.items():
                start = time.perf_counter()
                conn.execute(query).fetchone()
                out[version].append((time.perf_counter() - start) / 5000 * 1e6)
    finally:
        for conn in conns.values():
            conn.close()
    return out


def fresh_database(maintenance_dsn: str, name: str, version: str, psycopg):
    with psycopg.connect(maintenance_dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    dsn = psycopg.conninfo.make_conninfo(maintenance_dsn, dbname=name)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE EXTENSION pg_kde VERSION '{version}' CASCADE")
    return dsn


def load_table(conn, rows: int) -> None:
    amounts = np.round(np.exp(np.random.default_rng(7).normal(4.0, 1.0, rows)), 2)
    conn.execute("CREATE TABLE load_t (amount numeric(12, 2))")
    with conn.cursor().copy("COPY load_t (amount) FROM STDIN") as copy:
        for value in amounts.tolist():
            copy.write_row((value,))
    conn.execute("ANALYZE load_t")


def run(dsn: str, clients: int, seconds: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "approx.sql"
        script.write_text(SCRIPT)
        out = subprocess.run(
            [pgbench(), "-n", "-f", str(script), "-c", str(clients), "-j", str(min(clients, os.cpu_count() or 1)),
             "-T", str(seconds), "-l", "--log-prefix", str(Path(tmp) / "log"), dsn],
            capture_output=True, text=True, check=True)
        latencies = []
        for log in Path(tmp).glob("log*"):
            for line in log.read_text().splitlines():
                latencies.append(int(line.split()[2]) / 1000.0)  # microseconds -> ms
    tps = next(float(line.split("=")[1].split()[0]) for line in out.stdout.splitlines() if line.startswith("tps"))
    failed = next((line.split(":")[1].split()[0] for line in out.stdout.splitlines() if "failed transactions" in line), "0")
    return {"clients": clients, "calls_per_s": tps, "p50_ms": statistics.median(latencies),
            "p95_ms": float(np.percentile(latencies, 95)), "calls": len(latencies), "failed": failed}


def main() -> None:
    import psycopg
    from psycopg.rows import dict_row
    from psycopg.types.json import Jsonb

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=os.environ.get("PG_KDE_DSN"))
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--clients", default="1,32")
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    if args.dsn is None:
        admin.install()
        args.dsn = server.start(".").dsn()

    current = fresh_database(args.dsn, "pg_kde_load", __version__, psycopg)
    previous = fresh_database(args.dsn, "pg_kde_load_old", PREVIOUS, psycopg)
    with psycopg.connect(current, autocommit=True) as a, psycopg.connect(previous, autocommit=True) as b:
        load_table(a, args.rows)
        load_table(b, args.rows)
        a.execute("SELECT kde_refresh('load_t', 'amount', grid_size => %s)", (PREVIOUS_GRID,))
        with a.cursor(row_factory=dict_row) as cur:
            row = format1(cur.execute("SELECT k.*, p.*, k.relid::text AS relid FROM kde_catalog k "
                                      "JOIN kde_synopsis p USING (relid, cols)").fetchone())
        for table, columns in (("kde_catalog", HEADER), ("kde_synopsis", PAYLOAD)):
            names = columns.split(", ")
            b.execute(f"INSERT INTO {table} ({columns}) VALUES ({', '.join(['%s'] * len(names))})",
                      [Jsonb(row[c]) if c == "requested" else row[c] for c in names])
        b.execute("UPDATE kde_catalog SET built_relid = relid::oid")  # as its own refresh would have stored
        a.execute("SELECT kde_refresh('load_t', 'amount')")  # the current default
        sizes = {v: c.execute("SELECT bytes FROM kde_synopses").fetchone()[0] for v, c in ((PREVIOUS, b), (__version__, a))}
        check = "SELECT approx_count('load_t', 'amount', 10, 90), (SELECT count(*) FROM load_t WHERE amount BETWEEN 10 AND 90)"
        answers = {v: c.execute(check).fetchone() for v, c in ((PREVIOUS, b), (__version__, a))}

    # One client, inside one statement (no round trip per call): the cost of the call itself.
    statement = in_statement_us({PREVIOUS: previous, __version__: current}, psycopg, repeats=9)

    results = []
    for clients in (int(c) for c in args.clients.split(",")):
        for version, dsn in ((PREVIOUS, previous), (__version__, current)):
            results.append({"version": version, **run(dsn, clients, args.seconds)})

    lines = [f"# Query load (pgbench, approx_count), {dt.date.today()}", "",
             f"Machine: {platform.machine()}, {os.cpu_count()} cores ({platform.platform()}); {args.rows} rows; "
             f"{args.seconds} s per run; the server on the same machine. Synopsis sizes: "
             + ", ".join(f"{v} {sizes[v]:,} bytes" for v in sizes)
             + "; approx_count(10, 90) (exact): " + ", ".join(f"{v} {answers[v][0]:.1f} ({answers[v][1]})" for v in answers)
             + ".", "",
             "| clients | version | calls/s | p50 ms | p95 ms | calls | failed |", "|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['clients']} | {r['version']} | {r['calls_per_s']:.0f} | {r['p50_ms']:.2f} | {r['p95_ms']:.2f} | "
                     f"{r['calls']} | {r['failed']} |")
    for clients in sorted({r["clients"] for r in results}):
        old, new = (next(r for r in results if r["clients"] == clients and r["version"] == v) for v in (PREVIOUS, __version__))
        lines.append("")
        lines.append(f"{clients} client(s): {__version__} / {PREVIOUS} calls per second = "
                     f"{new['calls_per_s'] / old['calls_per_s']:.2f}")
    lines += ["", "Inside one statement (5000 calls a run, 9 runs per version, alternating): "
              + "; ".join(f"{v} best {min(us):.0f} µs, median {statistics.median(us):.0f} µs per call"
                          for v, us in statement.items())
              + f"; ratio {__version__} / {PREVIOUS}: best {min(statement[__version__]) / min(statement[PREVIOUS]):.2f}, "
              + f"median {statistics.median(statement[__version__]) / statistics.median(statement[PREVIOUS]):.2f}."]
    text = "\n".join(lines) + "\n"
    out = Path("benchmarks/results")
    out.mkdir(parents=True, exist_ok=True)
    (out / "load.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
