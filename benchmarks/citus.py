"""Synopses of a Citus distributed table against the same rows in a local table on the coordinator: the
refresh of each kind (1-D, a pair, 4 columns) against a count(*) of the same table, approx_count's latency
inside a statement on the coordinator, and how long staleness takes to show a growth of the shards.

    ../shared/tools/citus-cluster build <citus source>        # once (about 3 minutes)
    PG_ENV="PYTHONPATH=<the venv's site-packages>" ../shared/tools/citus-cluster start /tmp/citus
    python benchmarks/citus.py --dsn "host=127.0.0.1 port=56001 user=postgres dbname=postgres" [--rows 10000000]
    ../shared/tools/citus-cluster stop /tmp/citus

Both tables hold benchmarks/budget.py's generated sales rows (amount numeric(12,2) log-normal cents, qty
Zipf-like integers, created_at timestamptz with a daily rhythm) plus an id and a region (text, 4 values):
`sales_local` on the coordinator, `sales_dist` distributed by id over the workers (32 shards). Timings are
medians of --repeats runs on warm tables. On one machine the workers share its cores with the coordinator:
a distributed table shows Citus's overhead here, not its speed-up. Writes benchmarks/results/citus.md and
prints it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the other benchmarks' helpers, under python -P too
from budget import SALES_SQL, cpu_model  # noqa: E402

import pg_kde  # noqa: E402

TARGETS = (("amount",), ("amount", "qty"), ("amount", "qty", "created_at", "region"))
CALLS = 2000


def timed(conn, query: str) -> float:
    start = time.perf_counter()
    conn.execute(query).fetchall()
    return time.perf_counter() - start


def refresh_sql(table: str, target: tuple) -> str:
    if len(target) == 1:
        return f"SELECT kde_refresh('{table}', '{target[0]}')"
    return f"SELECT kde_refresh('{table}', ARRAY[{', '.join(repr(c) for c in target)}])"


LATENCY = {
    ("amount",): "approx_count('{t}', 'amount', (i % 300)::numeric, (i % 300 + 17.31)::numeric)",
    ("amount", "qty"): "approx_count('{t}', 'amount', (i % 300)::float8, (i % 300 + 17.31)::float8, 'qty', 1::float8, 5::float8)",
    ("amount", "qty", "created_at", "region"):
        "approx_count('{t}', ARRAY['amount', 'qty'], ARRAY[(i % 300)::float8, 1], ARRAY[(i % 300 + 17.31)::float8, 5])",
}


def first_build(conn, table: str, target: tuple) -> float:
    """The seconds of a refresh that reads the whole table: a distributed table's kept shard answers
    (kde_parts) are dropped first, so that its plan comes from a sample of blocks and every shard is read."""
    conn.execute(f"DELETE FROM kde_parts WHERE relid = '{table}'::regclass")
    return timed(conn, refresh_sql(table, target))


def shard_times(conn, table: str, repeats: int) -> dict:
    """The one pass of a 1-D refresh of ``table``'s amount, its scan aggregate (_kde_cells on the grid the stored
    synopsis has), timed where it runs: on each shard alone, one after another (EXPLAIN ANALYZE's execution
    time there; medians of ``repeats``), and through the coordinator over all shards at once."""
    import json

    schema = conn.execute("SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'pg_kde'").fetchone()[0]
    grid, step = conn.execute("SELECT grid, step FROM kde_synopsis WHERE relid = %s::regclass AND cols = '{amount}'",
                              (table,)).fetchone()
    grid_sql = "'{" + ",".join(repr(float(g)) for g in grid) + "}'::float8[]"
    aggregate = f"{schema}._kde_cells(amount, {grid_sql}, '{{}}'::float8[], {float(step)!r}, 256)"
    per_shard: dict = {}
    for _ in range(repeats):
        for shard, port, result in conn.execute(
                "SELECT r.shardid, p.nodeport, r.result FROM run_command_on_shards(%s, %s, false) r "
                "JOIN pg_dist_shard_placement p ON p.shardid = r.shardid",
                (table, f"EXPLAIN (ANALYZE, FORMAT JSON) SELECT {aggregate} FROM %s")):
            per_shard.setdefault((shard, port), []).append(json.loads(result)[0]["Execution Time"] / 1000)
    times = {key: statistics.median(v) for key, v in per_shard.items()}
    workers: dict = {}
    for (_, port), t in times.items():
        workers[port] = workers.get(port, 0.0) + t
    timed(conn, f"SELECT {aggregate} FROM {table}")  # warm
    whole = statistics.median(timed(conn, f"SELECT {aggregate} FROM {table}") for _ in range(repeats))
    return {"shards": len(times), "sum": sum(times.values()), "workers": workers, "whole": whole,
            "largest": max(times.values())}


def main(argv=None) -> int:
    import psycopg

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", required=True, help="the Citus coordinator")
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        citus = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'citus'").fetchone()
        if citus is None:
            parser.error("the database at --dsn has no citus extension")
        installed = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'pg_kde'").fetchone()
        if installed is None:
            conn.execute(f"CREATE EXTENSION pg_kde VERSION '{pg_kde.__version__}' CASCADE")
        elif installed[0] != pg_kde.__version__:
            conn.execute(f"ALTER EXTENSION pg_kde UPDATE TO '{pg_kde.__version__}'")
        workers = conn.execute("SELECT count(*) FROM pg_dist_node WHERE noderole = 'primary' AND groupid > 0").fetchone()[0]
        postgres = conn.execute("SHOW server_version").fetchone()[0]
        for table in ("sales_dist", "sales_local"):
            conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute("SELECT setseed(0.5)")
        conn.execute(SALES_SQL.format(rows=int(args.rows)).replace("CREATE TABLE sales AS", "CREATE TABLE sales_local AS"))
        conn.execute("ALTER TABLE sales_local ADD COLUMN id bigserial, ADD COLUMN region text")
        conn.execute("UPDATE sales_local SET region = (ARRAY['north', 'south', 'east', 'west'])[1 + id % 4]")
        conn.execute("VACUUM ANALYZE sales_local")
        conn.execute("CREATE TABLE sales_dist (LIKE sales_local)")
        conn.execute("SELECT create_distributed_table('sales_dist', 'id', shard_count => 32)")
        conn.execute("INSERT INTO sales_dist SELECT * FROM sales_local")
        conn.execute("VACUUM ANALYZE sales_dist")
        print(f"[{time.perf_counter() - started:6.1f}s] loaded {args.rows:,} rows into each table", flush=True)
        time.sleep(11)  # the workers report the load's counters: the refreshes below start fresh
        results = {}
        for table in ("sales_local", "sales_dist"):
            timed(conn, f"SELECT count(*) FROM {table}")  # warm
            counts = [timed(conn, f"SELECT count(*) FROM {table}") for _ in range(args.repeats)]
            row = {"count": statistics.median(counts)}
            for target in TARGETS:
                timed(conn, refresh_sql(table, target))  # the first call in the session imports pg_kde
                row[target] = statistics.median(first_build(conn, table, target) for _ in range(args.repeats))
                call = LATENCY[target].format(t=table)
                per = [timed(conn, f"SELECT sum({call}) FROM generate_series(1, {CALLS}) i") / CALLS
                       for _ in range(args.repeats)]
                row[("latency",) + target] = statistics.median(per)
                print(f"[{time.perf_counter() - started:6.1f}s] {table} {','.join(target)}: refresh "
                      f"{row[target]:.2f} s, approx_count {row[('latency',) + target] * 1e6:.0f} µs", flush=True)
            results[table] = row
        scaling = shard_times(conn, "sales_dist", args.repeats)
        # staleness: +20% rows into the distributed table, then the seconds until kde_synopses says stale
        t0 = time.perf_counter()
        conn.execute("INSERT INTO sales_dist SELECT * FROM sales_dist WHERE id % 5 = 0")
        inserted = time.perf_counter()
        while not conn.execute("SELECT bool_and(stale) FROM kde_synopses WHERE relid = 'sales_dist'::regclass").fetchone()[0]:
            if time.perf_counter() - inserted > 60:
                break
            time.sleep(0.25)
        stale_after = time.perf_counter() - inserted
        insert_s = inserted - t0
        t1 = time.perf_counter()
        refreshed = conn.execute("SELECT kde_refresh_stale()").fetchone()[0]
        refresh_stale_s = time.perf_counter() - t1
        total = conn.execute("SELECT approx_count('sales_dist', 'amount', NULL::float8, NULL::float8)").fetchone()[0]
        exact = conn.execute("SELECT count(amount) FROM sales_dist").fetchone()[0]
        # one shard's rows change: the next refresh reads that shard alone and reuses the others' answers;
        # against the same refresh with every shard's answer forgotten (the same plan, every shard read).
        # First the counters of the growth that reached the workers after kde_refresh_stale read them (it ran
        # as soon as the synopses were stale): a refresh reads those shards again.
        time.sleep(11)
        settled = [conn.execute(refresh_sql("sales_dist", t)).fetchone()[0]["shards_read"] for t in TARGETS[:2]]
        conn.execute("UPDATE sales_dist SET amount = amount + 0.01 WHERE id = 7")
        time.sleep(11)  # the worker reports the shard's counters
        partial = {}
        for target in TARGETS[:2]:
            t = time.perf_counter()
            one = conn.execute(refresh_sql("sales_dist", target)).fetchone()[0]
            one_s = time.perf_counter() - t
            conn.execute("UPDATE kde_parts SET identities = array_fill('moved'::text, ARRAY[cardinality(shards)]) "
                         "WHERE relid = 'sales_dist'::regclass AND cols = %s", (list(target),))
            t = time.perf_counter()
            every = conn.execute(refresh_sql("sales_dist", target)).fetchone()[0]
            partial[target] = (one_s, one["shards_read"], one["shards_reused"], time.perf_counter() - t,
                               every["shards_read"])

    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"# Citus: synopses of a distributed table against the same rows local ({when})", "",
             f"Measured {when} on {cpu_model()} ({platform.machine()}), PostgreSQL {postgres}, Citus {citus[0]}, "
             f"pg_kde {pg_kde.__version__}; a coordinator and {workers} workers on the same machine (they share its "
             f"cores). Command: `python benchmarks/citus.py --rows {args.rows} --repeats {args.repeats}`; "
             f"{(time.perf_counter() - started) / 60:.1f} min. {args.rows:,} rows; medians of {args.repeats}.", "",
             "| table | count(*) | refresh amount | refresh (amount, qty) | refresh 4 columns | approx_count: 1-D / pair / 4 columns, µs a call |",
             "|---|---:|---:|---:|---:|---|"]
    for table, row in results.items():
        lat = " / ".join(f"{row[('latency',) + t] * 1e6:.0f}" for t in TARGETS)
        lines.append(f"| {table} | {row['count']:.3f} s | {row[TARGETS[0]]:.2f} s ({row[TARGETS[0]] / row['count']:.1f}×) "
                     f"| {row[TARGETS[1]]:.2f} s ({row[TARGETS[1]] / row['count']:.1f}×) "
                     f"| {row[TARGETS[2]]:.2f} s ({row[TARGETS[2]] / row['count']:.1f}×) | {lat} |")
    lines += ["", f"Growth: {exact - args.rows:,} rows (+{(exact - args.rows) / args.rows:.0%}) inserted into sales_dist in "
              f"{insert_s:.1f} s; kde_synopses showed every synopsis of it stale {stale_after:.1f} s later "
              f"(the workers report their counters within about 10 s); kde_refresh_stale() rebuilt {refreshed} in "
              f"{refresh_stale_s:.1f} s; approx_count over every amount then {total:,.0f}, exact {exact:,}.", ""]
    lines += [f"The growth's counters that reached the workers after kde_refresh_stale() had read them: the next "
              f"refreshes read {settled[0]} and {settled[1]} shards again. Then a refresh after one row of one "
              "shard changed (that shard's counters moved): "
              + "; ".join(f"{','.join(t)} {one:.2f} s reading {read} shard(s) and reusing {reused}, against "
                          f"{every:.2f} s reading all {all_read} with the same plan"
                          for t, (one, read, reused, every, all_read) in partial.items()) + ".", ""]
    busiest = max(scaling["workers"].values())
    lines += [f"One pass of the 1-D refresh's scan aggregate (`_kde_cells` on its grid), timed on each of the "
              f"{scaling['shards']} shards alone, one after another (EXPLAIN ANALYZE there, medians of {args.repeats}): "
              f"{scaling['sum']:.3f} s in all, the largest shard {scaling['largest'] * 1000:.1f} ms; per worker "
              + ", ".join(f"{v:.3f} s (port {k})" for k, v in sorted(scaling["workers"].items()))
              + f". The same pass through the coordinator, all shards at once: {scaling['whole']:.3f} s, with the "
              f"{len(scaling['workers'])} workers and the coordinator on this machine's cores. With each worker on "
              f"cores of its own, the pass would take about the busiest worker's share divided by its cores, "
              f"{busiest:.3f} s with one core each, and the shards' sum over the workers' cores as the cluster grows: "
              f"{scaling['sum'] / 4:.3f} s on four one-core workers, {scaling['sum'] / 16:.3f} s on sixteen (while "
              f"no shard takes longer), plus the coordinator's dispatch and combine (not separable here).", ""]
    report = "\n".join(lines)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "citus.md").write_text(report + "\n")
    print(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
