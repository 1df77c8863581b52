"""What the interrupt check costs, and how often it runs: the same computation without ``interrupt`` and with
one that does nothing, and the longest gap between two calls of the check.

    python benchmarks/interrupt.py [--rows 600000] [--grid 65536] [--backend native] [--repeat 1]
                                   [--cases plugin,kde_at]

Measures bandwidth.plugin on --rows standard-normal rows in float32 (as the SQL layer runs it) and
synopsis.kde_at on --grid points (the KDE at a 1-D grid's boundaries, from the 8192 sampled values it thins
a sample to). The gap is from one call of the check to the next (the first from the start of the call, the last to its end): the table
gives their median, 99th percentile and maximum. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pg_kde import bandwidth, synopsis


class GapClock:
    """An interrupt check that does nothing but note when it was called."""

    def __init__(self):
        self.gaps = []
        self.last = time.perf_counter()

    def __call__(self):
        now = time.perf_counter()
        self.gaps.append(now - self.last)
        self.last = now


def measure(run):
    start = time.perf_counter()
    run(None)
    plain = time.perf_counter() - start
    clock = GapClock()
    start = clock.last = time.perf_counter()
    run(clock)
    checked = time.perf_counter() - start
    gaps = np.array(clock.gaps + [time.perf_counter() - clock.last])  # the last: to the end of the call
    return plain, checked, len(clock.gaps), np.percentile(gaps, [50, 99, 100])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=600_000)
    parser.add_argument("--grid", type=int, default=65_536)
    parser.add_argument("--backend", default="native")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--cases", default="plugin,kde_at")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x = rng.standard_normal(args.rows)
    points = np.sort(rng.uniform(0.0, 1.0, args.grid))
    sample = rng.uniform(0.0, 1.0, 100_000)
    h = 4.0 / args.grid
    cases = {
        "plugin": (f"plugin, n = {args.rows}, {args.backend}, float32", lambda check: bandwidth.plugin(
            x, backend=args.backend, dtype="float32", interrupt=check
        )),
        "kde_at": (f"kde_at, {args.grid} points",
                   lambda check: synopsis.kde_at(points, sample, h, 0.0, 1.0, interrupt=check)),
    }
    print("| computation | without check (s) | with a no-op check (s) | ratio | checks | gap median / p99 / max (ms) |")
    print("|---|---:|---:|---:|---:|---:|")
    for case in args.cases.split(","):
        name, run = cases[case]
        for _ in range(args.repeat):
            plain, checked, calls, gaps = measure(run)
            gap = " / ".join(f"{g * 1e3:.0f}" for g in gaps)
            print(f"| {name} | {plain:.2f} | {checked:.2f} | {checked / plain:.3f} | {calls} | {gap} |", flush=True)


if __name__ == "__main__":
    main()
