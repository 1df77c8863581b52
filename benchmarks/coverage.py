"""How much the 95% intervals' coverage of one data set says: the coverage of approx_count_ci's intervals on
several data sets drawn from the same generator, per column, budget and workload, with its spread.

    python benchmarks/coverage.py [--rows 10000000] [--realisations 8] [--queries 400] [--budgets 2048,8192,65536]
                                  [--draws 10] [--columns amount,qty,created_at] [--doubt-weight W]
                                  [--boundary-bytes B | --boundary-bytes amount=B,qty=B,created_at=B]

A synopsis' errors are shared by every query that cuts the same cells: at 2 KB a column has about 70 cells, so
1,000 ranges of one data set are not 1,000 independent trials of its intervals, and their coverage moves from
one data set to the next more than a binomial count would. This benchmark measures that spread, beside the
part of it that the number of queries alone gives (with 400 queries a data set, a perfectly calibrated 95%
interval's coverage has a standard deviation of 1.1 points; with 4,000, 0.34; the summary says how many data
sets such intervals would put within 93–97% on average from the query counts alone, :func:`band_chance`). Each
realisation draws benchmarks/budget.py's generated columns (amount: log-normal cents; qty: Zipf-like integers;
created_at: whole seconds with a daily rhythm and a growing trend) with its own seed, builds each column's
synopsis at each budget in memory (pg_kde.synopsis.build_1d over an ArrayTableReader whose block sample is the
server's: 1,024 blocks of 157 rows), and answers budget.py's four workloads with pg_kde.synopsis.query, the
float64 reference that the server's _kde_range follows step for step (tests/sql/test_synopsis_v2.py). Coverage
counts the queries whose hard bounds are not already exact; a workload with fewer than LEAST_INEXACT of them in
a data set is drawn again, with seeds of its own, up to DRAWS times in all (bounds uniform over the Zipf-like
column's range mostly fall beyond its cells, where every answer is exact; ``--draws`` sets that limit). A query
with no bound among the cells is exact and skipped unanswered (:func:`cuts_a_cell`), so many draws of a
workload whose inexact queries are rare cost little more than their few. ``--columns`` measures some of the
columns (each with the seeds it has in a full run). No PostgreSQL is needed. Writes
benchmarks/results/coverage.md (and each data set's coverage in coverage.json) and prints it.

The floor: a count of a few rows is a whole number, and an interval that holds a count's likeliest value
covers it at least as often as that value comes up. For each inexact query whose standard deviation
(pg_kde's own) is FLOOR_SD rows or less, the benchmark takes the count's law as pg_kde's cells model it (each
cut cell's rows binomial about the shape's share, a point 1 + its slot's binomial, :func:`count_law`) and
the chance of its likeliest value (:func:`query_floor`); other queries count 0. A data set's floor, the mean
over its inexact queries, bounds from below the coverage of any intervals that hold each count's likeliest
value, as far as the cells' model holds: where it lies above 97%, only intervals that leave out the likeliest
answer of some queries could bring that data set into the band.

Each synopsis' shape's doubt is weighed as its build calibrated it (pg_kde.synopsis.calibration: exact counts
between the cuts of its scan), and the report gives the weights the builds chose. What if: ``--doubt-weight
W`` answers with every synopsis' doubt weighted W instead (docs/math.md §7, "The shape's doubt"), to see what
another weight would do to each data set's coverage. The report says so in its title and command.

Bytes: a data set's coverage spreads with its few cut cells' realised errors, so more cells within the same
budget narrow that spread. The catalog stores a cell boundary in four arrays, 28 bytes (three float8s and a
float4); on a lattice the same cells take far fewer packed as the heavy values are, a varint each for a cell's
width, rows and sum and a float4 for its density (pg_kde.synopsis.packing.pack_cells, which gives back the very
arrays; :func:`packed_cells_bytes`). The report's second table gives what each synopsis' cells take so, and
whether the synopsis would then fit its budget. What if: ``--boundary-bytes B`` builds every synopsis as if a
boundary took B bytes (the planner's :data:`pg_kde.synopsis.cells.BOUNDARY_BYTES`, :func:`boundary_bytes`;
``amount=13,qty=10,created_at=16``: each column's own, as a planner that estimated each column's packed boundary
would, a column not named keeping the arrays' 28): more cells at each budget, whose coverage the first table
gives, and whose packed bytes the second says fit the budget or not (a what-if of the planner: the catalog does
not store the pack yet).
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import datetime as dt
import json
import platform
import sys
import time
import warnings
from pathlib import Path
from typing import NamedTuple, Optional

import numpy as np
from scipy.special import gammaln, ndtr

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the other benchmarks' helpers, under python -P too
from budget import WORKLOADS, cpu_model, make_workloads  # noqa: E402

from pg_kde import __version__  # noqa: E402
from pg_kde.synopsis import ArrayTableReader, Requested, build_1d, select_bandwidth  # noqa: E402
from pg_kde.synopsis import build as build_module, cells as cells_module  # noqa: E402
from pg_kde.synopsis.cells import BOUNDARY_BYTES, DAY_PROFILE, profile_bytes, stored_bytes_1d  # noqa: E402
from pg_kde.synopsis.packing import pack_cells  # noqa: E402
from pg_kde.synopsis import query  # noqa: E402
from pg_kde.synopsis.query import interval_1d, range_1d  # noqa: E402

#: column -> (budget.py's kind of bounds, the periodic profile its type would get)
COLUMNS = {"amount": ("numeric", None), "qty": ("integer", None), "created_at": ("timestamptz", DAY_PROFILE)}
BLOCK_ROWS, SAMPLE_BLOCKS = 157, 1024  # sales' rows a block, and pg_kde.sample_blocks' default
MIN_INEXACT = 50  # fewer inexact queries than this in a realisation: its coverage is left out
#: A workload with fewer inexact queries than this in a data set gets further draws of --queries queries (its
#: own seeds), up to DRAWS in all: bounds uniform over the Zipf-like column's range mostly fall beyond its cells,
#: where every answer is exact, and 100 inexact queries measure a 95% interval's coverage within ±4.4 points
#: (two binomial standard deviations), 1,000 within ±1.4.
LEAST_INEXACT = 1000
DRAWS = 10
BAND = (93.0, 97.0)  # issue 11's band for a 95% interval's coverage
NOMINAL = 0.95
#: Queries whose standard deviation (pg_kde's) is above this many rows count 0 in the floor, which stays a
#: lower bound (their laws spread over hundreds of counts; the cost of convolving those is saved).
FLOOR_SD = 15.0


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


def packed_cells_bytes(payload: dict) -> Optional[int]:
    """The bytes of the synopsis' cells packed (pg_kde.synopsis.packing.pack_cells: a varint each for a cell's
    width, rows and sum, a float4 for each boundary's density), where the catalog stores four arrays,
    :data:`BOUNDARY_BYTES` a boundary; None where they do not pack (no lattice, fewer than two boundaries, or a
    pack would not give back these very arrays)."""
    pack = pack_cells(payload["grid"], payload["cell_cum_count"], payload["cell_cum_sum"], payload["density"],
                      float(payload["step"]))
    return None if pack is None else len(pack)


def packed_stored_bytes(payload: dict, cells: int) -> int:
    """What the budget would count of the synopsis (pg_kde.synopsis.cells.stored_bytes_1d, its profile's bytes
    beside) with its cells taking ``cells`` bytes instead of their arrays'."""
    weights = payload.get("doubt_weights")
    profile = profile_bytes(len(payload["profile"]) - 1) if payload.get("period") else 0
    return stored_bytes_1d(0, len(payload["atom_values"]), len(payload["atom_pack"]) + cells,
                           None if weights is None else len(weights)) + profile


@contextlib.contextmanager
def boundary_bytes(size: Optional[int]):
    """What if a cell boundary took ``size`` bytes (None: as the catalog stores it): the builds within it plan
    their cells as if so (pg_kde.synopsis.cells.BOUNDARY_BYTES, where the planner reads it), restored after."""
    modules = (cells_module, build_module)
    kept = [m.BOUNDARY_BYTES for m in modules]
    try:
        if size is not None:
            for m in modules:
                m.BOUNDARY_BYTES = int(size)
        yield
    finally:
        for m, k in zip(modules, kept):
            m.BOUNDARY_BYTES = k


def quiet_select(sample, method, backend, required=True, scale=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return select_bandwidth(sample, method, backend, required=required, scale=scale)


def synopsis(x: np.ndarray, budget: int, period=None) -> dict:
    """The payload of the 1-D synopsis a server would build of the column ``x`` at ``budget`` bytes (its block
    sample the server's), in memory."""
    reader = ArrayTableReader((x,), blocks=(BLOCK_ROWS, SAMPLE_BLOCKS))
    return build_1d(reader, Requested("auto", 50000, None, "auto", budget), quiet_select, period=period).payload()


class Covered(NamedTuple):
    """One workload's coverage in one data set: the covered share of its inexact queries, their number, their
    mean floor (the module's docstring)."""
    coverage: float
    inexact: int
    floor: float


def coverage(payload: dict, loads: dict, doubt_weight: Optional[float] = None) -> dict:
    """{workload: :class:`Covered`}; with ``doubt_weight``, what the intervals would cover with the shape's
    doubt weighed that much instead of as the synopsis' build calibrated it. The floor: :func:`query_floor`
    where pg_kde's standard deviation is at most FLOOR_SD rows, 0 elsewhere."""
    out = {}
    if doubt_weight is not None:
        payload = dict(payload, doubt_weight=doubt_weight, doubt_weights=None)
    grid = payload["grid"]
    for workload, (lo, hi, exact) in loads.items():
        covered = inexact = 0
        floor = 0.0
        for a, b, truth in zip(lo, hi, exact):
            if not cuts_a_cell(payload, grid, a, b):
                continue  # (exact: not counted)
            r = range_1d(payload, float(a), float(b), 0)
            if r.low == r.high:
                continue
            _, low, high = interval_1d(payload, float(a), float(b), NOMINAL)
            inexact += 1
            covered += low - 1e-9 <= truth <= high + 1e-9
            floor += query_floor(payload, float(a), float(b)) if r.variance <= FLOOR_SD ** 2 else 0.0
        out[workload] = (Covered(covered / inexact, inexact, floor / inexact) if inexact
                         else Covered(float("nan"), 0, float("nan")))
    return out


def cuts_a_cell(payload: dict, grid, a: float, b: float) -> bool:
    """Whether the query [a, b] may cut a cell: on a lattice, whether a bound lies strictly between the grid's
    ends (a boundary is a half-step, a bound a lattice value); a query that cuts none is exact (its cells whole
    or left out, its heavy values exact), and the benchmark skips it before answering it. Off a lattice, and
    with no cells, always (range_1d decides)."""
    if not payload["step"] > 0 or len(grid) < 2:
        return True
    return bool(grid[0] < a < grid[-1] or grid[0] < b < grid[-1])


def in_band(shares: np.ndarray) -> np.ndarray:
    """Which coverages (in percent) lie within BAND, its ends included."""
    return (shares >= BAND[0]) & (shares <= BAND[1])


def band_chance(inexact: int) -> float:
    """The chance that intervals which cover exactly 95% of a data set's queries in the long run cover a share
    within BAND of its ``inexact`` queries, were those queries independent: the Binomial(inexact, 0.95) mass on
    the counts whose share lies in the band. Summed over the data sets it is what such intervals would score in
    this report on average from the query counts alone; a data set's queries share its cells' errors, which
    spreads its coverage wider than a binomial count's, so as a rule they would score fewer."""
    if inexact <= 0:
        return 0.0
    first, law = binomial(inexact, NOMINAL)
    shares = 100 * np.arange(first, first + len(law)) / inexact
    return float(law[in_band(shares)].sum())


def centred_chance(shares: np.ndarray) -> float:
    """The chance that a data set's coverage lies within BAND were its kind's coverage centred on 95% and spread
    as its data sets' coverages (in percent, ``shares``) are: P(93 ≤ X ≤ 97) for X normal about 95 with their
    standard deviation (n − 1 in its divisor; NaN for fewer than two data sets). Each data set's queries share
    its few cut cells' realised errors, so its coverage moves from one data set to the next as those errors do
    (the module's docstring); intervals that follow the errors' law on average can bring a kind's mean coverage
    to 95%, not narrow this spread. Summed over the data sets it is what such centred intervals would score on
    average: the part of the band the spread leaves within reach (an estimate: the spread is that of a few
    data sets, taken as normal)."""
    shares = np.asarray(shares, dtype=np.float64)
    if len(shares) < 2:
        return float("nan")
    sd = float(shares.std(ddof=1))
    if sd == 0.0:
        return 1.0
    return float(ndtr((BAND[1] - 100 * NOMINAL) / sd) - ndtr((BAND[0] - 100 * NOMINAL) / sd))


def together(parts: list) -> Covered:
    """The :class:`Covered` of several draws of one workload together (each weighs its inexact queries)."""
    n = sum(c.inexact for c in parts)
    if not n:
        return Covered(float("nan"), 0, float("nan"))
    return Covered(sum(c.coverage * c.inexact for c in parts if c.inexact) / n, n,
                   sum(c.floor * c.inexact for c in parts if c.inexact) / n)


def binomial(n: int, f: float) -> tuple:
    """(first count, probabilities): Binomial(n, f) over the counts within 12 standard deviations and 12 of
    its mean (what lies beyond is below 1e-25 of it), normalised."""
    f = min(max(f, 0.0), 1.0)
    if n <= 0 or f == 0.0:
        return 0, np.ones(1)
    if f == 1.0:
        return n, np.ones(1)
    sd = np.sqrt(n * f * (1 - f))
    first, last = max(0, int(n * f - 12 * sd - 12)), min(n, int(n * f + 12 * sd + 12))
    k = np.arange(first, last + 1, dtype=np.float64)
    log = gammaln(n + 1.0) - gammaln(k + 1) - gammaln(n - k + 1) + k * np.log(f) + (n - k) * np.log1p(-f)
    p = np.exp(log - log.max())
    return first, p / p.sum()


def _empty_cells(payload: dict) -> dict:
    """The payload with no row in its cells: its estimates are the heavy values' rows alone."""
    return dict(payload, cell_cum_count=[0.0] * len(payload["cell_cum_count"]),
                cell_cum_sum=[0.0] * len(payload["cell_cum_sum"]))


def _cells_rows(payload: dict, bare: dict, a: float, b: float) -> float:
    """The estimate of [a, b]'s rows that lie in the cells: the payload's, less its :func:`_empty_cells`'
    (``bare``)."""
    return range_1d(payload, a, b, 0).estimate - range_1d(bare, a, b, 0).estimate


def count_law(payload: dict, a: float, b: float) -> tuple:
    """The law of [a, b]'s rows in its cut cells, as pg_kde's cells model them: each cut cell's n rows
    binomial about the shape's share of them (independent cells); a point on a lattice (a = b), a value the
    column holds, 1 + Binomial(n − 1, λ / n), λ the rows its slot expects (the λ its interval takes,
    :func:`pg_kde.synopsis.query.interval_1d`). (first count, probabilities of consecutive counts from it)."""
    grid, counts = payload["grid"], payload["cell_cum_count"]
    if len(grid) < 2:
        return 0, np.ones(1)
    bare = _empty_cells(payload)

    def rows(c):
        return int(round(counts[c + 1] - counts[c])) if 0 <= c < len(grid) - 1 else 0

    if a == b:
        n = rows(bisect.bisect_right(grid, a) - 1)
        if n < 1 or not payload["step"] > 0:
            return 0, np.ones(1)
        first, law = binomial(n - 1, _cells_rows(payload, bare, a, a + payload["step"] / 4) / n)
        return first + 1, law
    ca, cb = bisect.bisect_right(grid, a) - 1, bisect.bisect_right(grid, b) - 1
    parts = [(ca, a, b)] if ca == cb else [(ca, a, grid[min(ca + 1, len(grid) - 1)]), (cb, grid[max(cb, 0)], b)]
    first, law = 0, np.ones(1)
    for c, u, v in parts:
        n = rows(c)
        if n >= 1:
            start, part = binomial(n, _cells_rows(payload, bare, u, v) / n)
            first, law = first + start, np.convolve(law, part)
    return first, law


def query_floor(payload: dict, a: float, b: float) -> float:
    """The chance of the likeliest value of [a, b]'s count (:func:`count_law`): the least coverage an interval
    that holds it can have."""
    return float(count_law(payload, a, b)[1].max())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--realisations", type=int, default=8)
    parser.add_argument("--queries", type=int, default=400, help="ranges of each kind a column (half as many points)")
    parser.add_argument("--budgets", default="2048,8192,65536")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    parser.add_argument("--draws", type=int, default=DRAWS,
                        help="draws of a workload at most, where a data set has fewer than LEAST_INEXACT inexact queries")
    parser.add_argument("--columns", default=",".join(COLUMNS), help="of " + ", ".join(COLUMNS))
    parser.add_argument("--doubt-weight", type=float, default=None,
                        help="what if every synopsis' shape's doubt weighed this much (pg_kde: its build's calibration)")
    parser.add_argument("--boundary-bytes", default=None,
                        help=f"what if a cell boundary took this many bytes (the catalog's arrays: {BOUNDARY_BYTES}), "
                             "as packed cells might: the builds plan their cells so; B, or column=B,... for each column")
    args = parser.parse_args(argv)
    try:
        planned = what_if_bytes(args.boundary_bytes)
    except ValueError as e:
        parser.error(str(e))
    if args.doubt_weight is not None and not (args.doubt_weight >= 0 and np.isfinite(args.doubt_weight)):
        parser.error("--doubt-weight must be a finite number ≥ 0")
    what_if = title = ""
    if args.doubt_weight is not None:
        what_if = f" --doubt-weight {args.doubt_weight:g}"
        title = f", what if the shape's doubt weighed {args.doubt_weight:g} (pg_kde: its build's calibration)"
    if planned:
        what_if += f" --boundary-bytes {args.boundary_bytes}"
        said = ", ".join(f"{c}'s {b}" for c, b in planned.items()) if None not in planned else f"{planned[None]}"
        title += f", what if a cell boundary took {said} bytes (pg_kde: {BOUNDARY_BYTES}, four arrays)"
    columns = [c for c in args.columns.split(",") if c]
    if args.draws < 1 or not columns or any(c not in COLUMNS for c in columns):
        parser.error(f"--draws must be at least 1 and --columns some of {', '.join(COLUMNS)}")
    budgets = [int(b) for b in args.budgets.split(",")]
    started = time.perf_counter()
    found: dict = {}
    sizes: dict = {}  # (column, budget) -> [(boundaries, their bytes packed or None, the synopsis' bytes so, as stored)]
    realise(args, columns, budgets, found, sizes, started, planned)
    report(args, columns, budgets, found, sizes, started, title, what_if)
    return 0


def what_if_bytes(given: Optional[str]) -> dict:
    """--boundary-bytes as {column: bytes} ({None: bytes}: every column's; {}: none given)."""
    if given is None:
        return {}
    parts = [p.strip() for p in given.split(",") if p.strip()]
    out: dict = {}
    try:
        if len(parts) == 1 and "=" not in parts[0]:
            out[None] = int(parts[0])
        else:
            for part in parts:
                col, _, size = part.partition("=")
                if col.strip() not in COLUMNS or col.strip() in out:
                    raise ValueError
                out[col.strip()] = int(size)
    except ValueError:
        raise ValueError("--boundary-bytes must be a number of bytes, or column=bytes,... of "
                         + ", ".join(COLUMNS) + ", each named once") from None
    if not out or not all(1 <= b <= 64 for b in out.values()):
        raise ValueError("--boundary-bytes must lie within 1–64")
    return out


def realise(args, columns: list, budgets: list, found: dict, sizes: dict, started: float, planned: dict) -> None:
    """Builds each data set's synopses (each column's as if a boundary took ``planned`` bytes: :func:`what_if_bytes`)
    and measures their coverage into ``found`` ((column, budget, workload) -> [(Covered, weight)]) and their bytes
    into ``sizes``."""
    for r in range(args.realisations):
        data = sales(args.rows, np.random.default_rng([args.seed, r]))
        for index, (col, (kind, period)) in enumerate(COLUMNS.items()):
            if col not in columns:  # (each column's seeds its own, whichever others run)
                continue
            x = data[col]
            ordered = np.sort(x)
            draws = [make_workloads(ordered, kind, np.random.default_rng([args.seed, r, index]), args.queries,
                                    args.queries // 2)]

            def draw(d):  # (the d-th draw of this column's workloads, the same for every budget)
                while len(draws) <= d:
                    draws.append(make_workloads(ordered, kind, np.random.default_rng([args.seed, r, index, len(draws)]),
                                                args.queries, args.queries // 2))
                return draws[d]

            for budget in budgets:
                with boundary_bytes(planned.get(col, planned.get(None))):
                    payload = synopsis(x, budget, period)
                packed = packed_cells_bytes(payload)
                # (as stored: the catalog's arrays, BOUNDARY_BYTES a boundary whatever the what-if planned with)
                stored = packed_stored_bytes(payload, BOUNDARY_BYTES * len(payload["grid"]))
                sizes.setdefault((col, budget), []).append(
                    (len(payload["grid"]), packed, None if packed is None else packed_stored_bytes(payload, packed),
                     stored))
                weight = args.doubt_weight if args.doubt_weight is not None else payload.get("doubt_weight")
                for workload, result in coverage(payload, draws[0], args.doubt_weight).items():
                    parts = [result]
                    # (a synopsis without cells answers every query exactly: no draw finds an inexact one)
                    while sum(c.inexact for c in parts) < LEAST_INEXACT and len(parts) < args.draws \
                            and payload["kde_rows"] > 0:
                        more = {workload: draw(len(parts))[workload]}
                        parts.append(coverage(payload, more, args.doubt_weight)[workload])
                    found.setdefault((col, budget, workload), []).append((together(parts), weight))
        print(f"[{time.perf_counter() - started:6.1f}s] realisation {r + 1} of {args.realisations}", flush=True)


def report(args, columns: list, budgets: list, found: dict, sizes: dict, started: float, title: str,
           what_if: str) -> None:
    """Writes and prints the report (coverage.md, coverage.json under --out)."""
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"# Coverage of the 95% intervals over {args.realisations} data sets{title} ({when})", "",
             f"Measured {when} on {cpu_model()} ({platform.machine()}), pg_kde {__version__}, in memory (no server). "
             f"Command: `python benchmarks/coverage.py --rows {args.rows} --realisations {args.realisations} "
             f"--queries {args.queries} --budgets {args.budgets} --seed {args.seed}"
             f"{f' --draws {args.draws}' if args.draws != DRAWS else ''}"
             f"{f' --columns {args.columns}' if columns != list(COLUMNS) else ''}{what_if}`; "
             f"{(time.perf_counter() - started) / 60:.1f} min. Coverage of the inexact queries: the mean over the data "
             f"sets, their standard deviation [the part of it their query counts alone give: a binomial share's], the "
             f"lowest and highest, how many data sets lie within {BAND[0]:g}–{BAND[1]:g}%, the mean number of inexact "
             f"queries a data set (a workload with fewer than {LEAST_INEXACT:,} in a data set is drawn again, with "
             f"seeds of its own, up to {args.draws} times --queries in all), their floor's mean (the chance of each count's likeliest value: a lower "
             f"bound on the coverage of intervals that hold it, the module's docstring) and how many data sets' "
             f"floor lies above {BAND[1]:g}%; the doubt's weights (the builds' calibration, or the what-if's; —: not "
             f"calibrated, weighed {query.SHAPE_DOUBT:g}); data sets "
             f"with fewer than {MIN_INEXACT} inexact queries of a kind are left out of it (—: none had as many, and "
             f"'all' is every data set's inexact queries of that kind together); "
             f"'all': the share of every data set's inexact queries together.", "",
             "| column | budget | " + " | ".join(WORKLOADS) + " |", "|---|---:|" + "---|" * len(WORKLOADS)]
    inside = sets = kinds_inside = kinds = above = 0
    ceiling = 0.0  # (the data sets that intervals of exactly 95% would put in the band, from query counts alone)
    centred = 0.0  # (those that each kind's coverage centred on 95% with its data sets' spread would: centred_chance)
    for col in columns:
        for budget in budgets:
            cells = []
            for workload in WORKLOADS:
                results = found.get((col, budget, workload), [])
                kept = [(c, w) for c, w in results if c.inexact >= MIN_INEXACT]
                every = [c for c, _ in results if c.inexact > 0]
                every_set = together(every)  # (NaN where no data set has any)
                pooled = 100 * every_set.coverage
                if not kept:  # (the few inexact queries of every data set together)
                    cells.append(f"— (all: {pooled:.1f}% of {every_set.inexact})" if every else "—")
                    continue
                shares = np.array([c.coverage for c, _ in kept]) * 100
                floors = np.array([c.floor for c, _ in kept]) * 100
                # the spread the data sets' coverage would have from their query counts alone, each data set's
                # true coverage being the mean: a binomial share's standard deviation
                noise = 100 * np.sqrt(np.mean([shares.mean() / 100 * (1 - shares.mean() / 100) / c.inexact
                                               for c, _ in kept]))
                within = int(in_band(shares).sum())
                out_of_reach = int((floors > BAND[1]).sum())
                inside, sets, above = inside + within, sets + len(kept), above + out_of_reach
                ceiling += sum(band_chance(c.inexact) for c, _ in kept)
                centred += (len(kept) * centred_chance(shares) if len(kept) > 1
                            else sum(band_chance(c.inexact) for c, _ in kept))
                kinds_inside, kinds = kinds_inside + (within == len(kept)), kinds + 1
                chosen = [w for _, w in kept if w is not None]
                weights = f"; weights {min(chosen):g}–{max(chosen):g}" if chosen else "; weights —"
                cells.append(f"{shares.mean():.1f}% ± {shares.std():.1f} [{noise:.1f}] ({shares.min():.1f}–"
                             f"{shares.max():.1f}; {within} of {len(kept)} set{'s' if len(kept) > 1 else ''} in the band, "
                             f"{np.mean([c.inexact for c, _ in kept]):.0f}; all {pooled:.1f}%; floor {floors.mean():.1f}%, "
                             f"{out_of_reach} above {BAND[1]:g}%{weights})")
            lines.append(f"| {col} | {budget:,} B | " + " | ".join(cells) + " |")
    lines += ["", f"Data sets whose coverage lies within {BAND[0]:g}–{BAND[1]:g}%: {inside} of {sets} (intervals that "
              f"covered exactly 95% of each data set's queries in the long run would put {ceiling:.1f} there on average "
              f"from the query counts alone, and as a rule fewer, since a data set's queries share its cells' errors: "
              f"band_chance in benchmarks/coverage.py); were each kind's coverage centred on 95% with the spread "
              f"its data sets show, {centred:.1f} on average (centred_chance: what calibration could reach, the "
              f"spread left as it is); kinds (column, "
              f"budget, workload) with every data set within it: {kinds_inside} of {kinds}. Data sets whose floor "
              f"lies above {BAND[1]:g}% (out of the band's reach for intervals that hold each count's likeliest "
              f"value): {above}."]
    lines += ["", "Bytes: each synopsis' cell boundaries (the median over the data sets), what its cells would take "
              "packed (pg_kde.synopsis.packing.pack_cells: varints of each cell's width, rows and sum, a float4 of "
              f"each density, giving back the very arrays; the catalog's arrays take {BOUNDARY_BYTES} "
              "bytes a boundary), a boundary (median, lowest–highest), and the synopsis' bytes as the budget counts "
              "them with its cells stored so (the most over the data sets; stored as today: the arrays'), and how "
              "many data sets' synopses would fit their budget so.", "",
              "| column | budget | boundaries | packed, a boundary | synopsis packed (arrays) | within the budget |",
              "|---|---:|---:|---|---|---|"]
    for col in columns:
        for budget in budgets:
            built = sizes.get((col, budget), [])
            packs = [(n, c, b, a) for n, c, b, a in built if c is not None]
            if len(packs) < len(built) or not packs:  # (no lattice, too few boundaries, or no exact pack)
                lines.append(f"| {col} | {budget:,} B | {np.median([n for n, *_ in built]) if built else 0:.0f} | "
                             f"— ({len(built) - len(packs)} of {len(built)} do not pack) | — | — |")
                continue
            each = [c / n for n, c, _, _ in packs]
            lines.append(f"| {col} | {budget:,} B | {np.median([n for n, *_ in packs]):.0f} | {np.median(each):.1f} B "
                         f"({min(each):.1f}–{max(each):.1f}) | {max(b for *_, b, _ in packs):,} B "
                         f"({max(a for *_, a in packs):,} B) | {sum(b <= budget for *_, b, _ in packs)} of {len(packs)} |")
    text = "\n".join(lines)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "coverage.md").write_text(text + "\n")
    (args.out / "coverage.json").write_text(json.dumps(
        [{"column": c, "budget": b, "workload": w,
          "sets": [dict(c._asdict(), weight=w) for c, w in r]}
         for (c, b, w), r in found.items()], indent=1) + "\n")
    print(text)


if __name__ == "__main__":
    raise SystemExit(main())
