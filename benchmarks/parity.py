"""Largest relative difference of every fast path from the float64 NumPy reference, per precision, over
every instruction set this CPU runs (and the sequential loop), and over the cuda backend's three
reduction strategies where a CUDA device answers. Prints a markdown table.

    python benchmarks/parity.py

The tests assert bounds on the same quantities (tests/unit); this script measures how far inside them the
implementation sits, on fixed seeded data.
"""

from __future__ import annotations

import datetime as dt
import warnings

import numpy as np

import pg_kde
from pg_kde import _native, bandwidth, kde
from pg_kde.backend import cuda as _cuda
from pg_kde.backend import NativeBackend, ReferenceBackend

REF = ReferenceBackend()


def rel(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def main() -> int:
    rng = np.random.default_rng(2026)
    x1 = rng.standard_normal(1003)
    z5 = rng.standard_normal((517, 5))
    z16 = rng.standard_normal((203, 16))
    pts = rng.standard_normal((301, 3))
    smp = rng.standard_normal((777, 3))
    mix = np.where(rng.random(1500) < 0.3, rng.normal(-2, 0.5, 1500), rng.normal(1, 1, 1500))
    d16 = np.random.default_rng(0).standard_normal((1024, 16))
    corr = rng.multivariate_normal([0, 0], [[1.0, 0.7], [0.7, 2.0]], size=500)
    xs = -np.linspace(0, 80, 200001)
    scales = np.geomspace(0.1, 10, 7)

    rows = {}

    def put(name, column, value):
        rows.setdefault(name, {}).setdefault(column, 0.0)
        rows[name][column] = max(rows[name][column], value)

    ref_k6 = REF.plugin_pair_sum(x1, 0.4, 6)
    ref_lscv, ref_der = REF.lscv_pair_sums(z5, scales, 2**3.5, True)
    ref_a, ref_m = REF.lscv_moments(z16, 2.0**9)
    ref_kde = REF.kde_sums(pts, smp)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref_plugin = bandwidth.plugin(mix, backend="reference").h
        ref_lscv_h = bandwidth.lscv_h(d16, backend="reference").h
        ref_lscv_H = bandwidth.lscv_H(corr, backend="reference").H

    def measure(be, name, family):
        for dtype in ("float64", "float32"):
            column = f"{family} {dtype}"
            put("PLUGIN pair sum, K⁽⁶⁾ (cancelling), n = 1003", column, rel(be.plugin_pair_sum(x1, 0.4, 6, dtype), ref_k6))
            a, dd = be.lscv_pair_sums(z5, scales, 2**3.5, True, dtype)
            put("LSCV pair sums A and D, n = 517, d = 5", column, max(rel(a, ref_lscv), rel(dd, ref_der)))
            a, m = be.lscv_moments(z16, 2.0**9, dtype)
            put("LSCV_H gradient moments, n = 203, d = 16", column, max(rel(a, ref_a), rel(m, ref_m)))
            put("KDE sums, 301 × 777 points, d = 3", column, rel(be.kde_sums(pts, smp, dtype), ref_kde))
            put("PLUGIN bandwidth, bimodal n = 1500", column, rel(bandwidth.plugin(mix, backend=be, dtype=dtype).h, ref_plugin))
            put("LSCV_h bandwidth, n = 1024, d = 16", column, rel(bandwidth.lscv_h(d16, backend=be, dtype=dtype).h, ref_lscv_h))
            put("LSCV_H bandwidth matrix, n = 500, d = 2", column, rel(bandwidth.lscv_H(corr, backend=be, dtype=dtype).H, ref_lscv_H))

    for isa in _native.available_isas():
        measure(NativeBackend(isa=isa), "native", "native")
        for dtype in ("float64", "float32"):
            y = _native.exp_nonpos(xs.astype(dtype), isa)
            exact = np.exp(xs.astype(dtype).astype(np.float64))
            put("exp(x), x ∈ [−80, 0] (relative, per value)", f"native {dtype}", float(np.max(np.abs(y - exact) / exact)))
    for dtype in ("float64", "float32"):
        put("KDE evaluate, sequential loop", f"native {dtype}", rel(kde.evaluate(pts, smp, 0.5, backend="sequential", dtype=dtype), kde.evaluate(pts, smp, 0.5, backend="reference")))
    families = ["native"]
    if pg_kde.backends()["cuda"] is None:  # every reduction strategy, worst case
        families.append("cuda")
        for strategy in _cuda.REDUCTIONS:
            measure(_cuda.CudaBackend(strategy), "cuda", "cuda")

    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"Measured {stamp}; ISAs {', '.join(_native.available_isas())}; command `python benchmarks/parity.py`.\n")
    columns = [f"{family} {dtype}" for family in families for dtype in ("float64", "float32")]
    print("| quantity | " + " | ".join(columns) + " |")
    print("|---|" + "---:|" * len(columns))
    for name, by in rows.items():
        print(f"| {name} | " + " | ".join(f"{by[c]:.1e}" if c in by else "-" for c in columns) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
