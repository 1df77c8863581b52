"""How much the 95% intervals' coverage of one data set says: the coverage of approx_count_ci's intervals on
several data sets drawn from the same generator, per column, budget and workload, with its spread.

    python benchmarks/coverage.py [--rows 10000000] [--realisations 8] [--queries 400] [--budgets 2048,8192,65536]

A synopsis' errors are shared by every query that cuts the same cells: at 2 KB a column has about 70 cells, so
1,000 ranges of one data set are not 1,000 independent trials of its intervals, and their coverage moves from
one data set to the next more than a binomial count would. This benchmark measures that spread, beside the
part of it that the number of queries alone gives (with 400 queries a data set, a perfectly calibrated 95%
interval's coverage has a standard deviation of 1.1 points; with 4,000, 0.34). Each
realisation draws benchmarks/budget.py's generated columns (amount: log-normal cents; qty: Zipf-like integers;
created_at: whole seconds with a daily rhythm and a growing trend) with its own seed, builds each column's
synopsis at each budget in memory (pg_kde.synopsis.build_1d over an ArrayTableReader whose block sample is the
server's: 1,024 blocks of 157 rows), and answers budget.py's four workloads with pg_kde.synopsis.query, the
float64 reference that the server's _kde_range follows step for step (tests/sql/test_synopsis_v2.py). Coverage
counts the queries whose hard bounds are not already exact. No PostgreSQL is needed. Writes
benchmarks/results/coverage.md (and each data set's coverage in coverage.json) and prints it.

What if: ``--doubt-weight W`` answers with the shape's doubt weighted W (docs/math.md §7, "The shape's
doubt") where pg_kde weighs it 1 (pg_kde.synopsis.query.SHAPE_DOUBT, SHAPE_DOUBT in extension/range.c), to
see what another weight would do to each data set's coverage; the report says so in its title and command.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import sys
import time
import warnings
from pathlib import Path
from typing import Optional

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the other benchmarks' helpers, under python -P too
from budget import WORKLOADS, cpu_model, make_workloads  # noqa: E402

from pg_kde import __version__  # noqa: E402
from pg_kde.synopsis import ArrayTableReader, Requested, build_1d, select_bandwidth  # noqa: E402
from pg_kde.synopsis.cells import DAY_PROFILE  # noqa: E402
from pg_kde.synopsis import query  # noqa: E402
from pg_kde.synopsis.query import interval_1d, range_1d  # noqa: E402

#: column -> (budget.py's kind of bounds, the periodic profile its type would get)
COLUMNS = {"amount": ("numeric", None), "qty": ("integer", None), "created_at": ("timestamptz", DAY_PROFILE)}
BLOCK_ROWS, SAMPLE_BLOCKS = 157, 1024  # sales' rows a block, and pg_kde.sample_blocks' default
MIN_INEXACT = 50  # fewer inexact queries than this in a realisation: its coverage is left out
BAND = (93.0, 97.0)  # issue 11's band for a 95% interval's coverage


def sales(rows: int, rng) -> dict:
    """budget.py's SALES_SQL in NumPy (created_at as epoch seconds)."""
    amount = np.round(np.exp(3 + np.sqrt(-2 * np.log(1 - rng.random(rows))) * np.cos(2 * np.pi * rng.random(rows))), 2)
    qty = np.minimum(np.floor(1 / np.power(1 - rng.random(rows), 1 / 1.2)), 100000.0)
    day = np.floor(366 * (np.sqrt(1 + 8 * rng.random(rows)) - 1) / 2) * 86400
    busy = rng.random(rows) < 0.75
    clock = np.where(busy, 46800 + 12600 * np.sqrt(-2 * np.log(1 - rng.random(rows))) * np.cos(2 * np.pi * rng.random(rows)),
                     86400 * rng.random(rows))
    created_at = 1704067200.0 + day + np.mod(np.mod(np.floor(clock), 86400) + 86400, 86400)
    return {"amount": amount, "qty": qty, "created_at": created_at}


def quiet_select(sample, method, backend, required=True, scale=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return select_bandwidth(sample, method, backend, required=required, scale=scale)


def coverage(payload: dict, loads: dict, doubt_weight: Optional[float] = None) -> dict:
    """{workload: (covered share of the inexact queries, their number)}; with ``doubt_weight``, what the
    intervals would cover with the shape's doubt weighed that much (pg_kde's weight is restored after)."""
    out = {}
    weight = query.SHAPE_DOUBT
    if doubt_weight is not None:
        query.SHAPE_DOUBT = doubt_weight  # (range_1d reads it at each query)
    try:
        for workload, (lo, hi, exact) in loads.items():
            covered = inexact = 0
            for a, b, truth in zip(lo, hi, exact):
                r = range_1d(payload, float(a), float(b), 0)
                if r.low == r.high:
                    continue
                _, low, high = interval_1d(payload, float(a), float(b), 0.95)
                inexact += 1
                covered += low - 1e-9 <= truth <= high + 1e-9
            out[workload] = (covered / inexact if inexact else float("nan"), inexact)
    finally:
        query.SHAPE_DOUBT = weight
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--realisations", type=int, default=8)
    parser.add_argument("--queries", type=int, default=400, help="ranges of each kind a column (half as many points)")
    parser.add_argument("--budgets", default="2048,8192,65536")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    parser.add_argument("--doubt-weight", type=float, default=None,
                        help=f"what if the shape's doubt weighed this much (pg_kde: {query.SHAPE_DOUBT:g})")
    args = parser.parse_args(argv)
    if args.doubt_weight is not None and not (args.doubt_weight >= 0 and np.isfinite(args.doubt_weight)):
        parser.error("--doubt-weight must be a finite number ≥ 0")
    what_if = "" if args.doubt_weight is None else f" --doubt-weight {args.doubt_weight:g}"
    budgets = [int(b) for b in args.budgets.split(",")]
    started = time.perf_counter()
    found: dict = {}
    for r in range(args.realisations):
        data = sales(args.rows, np.random.default_rng([args.seed, r]))
        for index, (col, (kind, period)) in enumerate(COLUMNS.items()):
            x = data[col]
            loads = make_workloads(np.sort(x), kind, np.random.default_rng([args.seed, r, index]), args.queries,
                                   args.queries // 2)
            for budget in budgets:
                reader = ArrayTableReader((x,), blocks=(BLOCK_ROWS, SAMPLE_BLOCKS))
                built = build_1d(reader, Requested("auto", 50000, None, "auto", budget), quiet_select, period=period)
                for workload, result in coverage(built.payload(), loads, args.doubt_weight).items():
                    found.setdefault((col, budget, workload), []).append(result)
        print(f"[{time.perf_counter() - started:6.1f}s] realisation {r + 1} of {args.realisations}", flush=True)

    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    title = "" if not what_if else (f", what if the shape's doubt weighed {args.doubt_weight:g} "
                                    f"(pg_kde: {query.SHAPE_DOUBT:g})")
    lines = [f"# Coverage of the 95% intervals over {args.realisations} data sets{title} ({when})", "",
             f"Measured {when} on {cpu_model()} ({platform.machine()}), pg_kde {__version__}, in memory (no server). "
             f"Command: `python benchmarks/coverage.py --rows {args.rows} --realisations {args.realisations} "
             f"--queries {args.queries} --budgets {args.budgets} --seed {args.seed}{what_if}`; "
             f"{(time.perf_counter() - started) / 60:.1f} min. Coverage of the inexact queries: the mean over the data "
             f"sets, their standard deviation [the part of it their query counts alone give: a binomial share's], the "
             f"lowest and highest, how many data sets lie within {BAND[0]:g}–{BAND[1]:g}%, the mean number of inexact "
             f"queries a data set; data sets "
             f"with fewer than {MIN_INEXACT} inexact queries of a kind are left out of it (—: none had as many, and "
             f"'all' is every data set's inexact queries of that kind together); "
             f"'all': the share of every data set's inexact queries together.", "",
             "| column | budget | " + " | ".join(WORKLOADS) + " |", "|---|---:|" + "---|" * len(WORKLOADS)]
    inside = sets = kinds_inside = kinds = 0
    for col in COLUMNS:
        for budget in budgets:
            cells = []
            for workload in WORKLOADS:
                kept = [(c, n) for c, n in found.get((col, budget, workload), []) if n >= MIN_INEXACT]
                every = [(c, n) for c, n in found.get((col, budget, workload), []) if n > 0]
                pooled = 100 * sum(c * n for c, n in every) / sum(n for _, n in every) if every else float("nan")
                if not kept:  # (the few inexact queries of every data set together)
                    cells.append(f"— (all: {pooled:.1f}% of {sum(n for _, n in every)})" if every else "—")
                    continue
                shares = np.array([c for c, _ in kept]) * 100
                # the spread the data sets' coverage would have from their query counts alone, each data set's
                # true coverage being the mean: a binomial share's standard deviation
                noise = 100 * np.sqrt(np.mean([shares.mean() / 100 * (1 - shares.mean() / 100) / n for _, n in kept]))
                within = int(((shares >= BAND[0]) & (shares <= BAND[1])).sum())
                inside, sets = inside + within, sets + len(kept)
                kinds_inside, kinds = kinds_inside + (within == len(kept)), kinds + 1
                cells.append(f"{shares.mean():.1f}% ± {shares.std():.1f} [{noise:.1f}] ({shares.min():.1f}–"
                             f"{shares.max():.1f}; {within} of {len(kept)} set{'s' if len(kept) > 1 else ''} in the band, "
                             f"{np.mean([n for _, n in kept]):.0f}; all {pooled:.1f}%)")
            lines.append(f"| {col} | {budget:,} B | " + " | ".join(cells) + " |")
    lines += ["", f"Data sets whose coverage lies within {BAND[0]:g}–{BAND[1]:g}%: {inside} of {sets}; kinds (column, "
              f"budget, workload) with every data set within it: {kinds_inside} of {kinds}."]
    report = "\n".join(lines)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "coverage.md").write_text(report + "\n")
    (args.out / "coverage.json").write_text(json.dumps(
        [{"column": c, "budget": b, "workload": w, "sets": [{"coverage": v, "inexact": n} for v, n in r]}
         for (c, b, w), r in found.items()], indent=1) + "\n")
    print(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
