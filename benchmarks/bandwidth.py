"""The paper's bandwidth-selection experiments, end to end from the Python call.

Grid (Andrzejewski, Gramacki & Gramacki, arXiv:1505.01998, §6):
  PLUGIN            n = 1024 … 32768                     (the whole two-stage selector)
  LSCV_h            n = 64 … 1024  ×  d = 1 … 16, 150 h   (the whole selector: grid + refinement)
  LSCV_H objective  n = 1024 … 16384  ×  d = 1 … 16      (one evaluation of eq. 32)
for the naive single-threaded scalar loop (the paper's "Sequential", backend="sequential"), the native
SIMD backend, and cuda when it can run. Data: standard normal, seeded. Times are the best and the
median of --repeats runs (one run for the sequential loop at the largest sizes).

Writes CSV and a markdown table into --out (default benchmarks/results) and prints the table, then
checks the targets of the bandwidth-engine issue (stated for float32) and says which are met; the exit
status is 1 when one is missed.

Where the cuda backend can run, a CUDA section follows (--cuda-only runs just that): the targets of the
CUDA issue end to end from the Python call (transfers included) under each of the three reduction
strategies, then the device time of the pair kernels at large sizes (CUDA events) with the fraction of
the GPU's FP32 and SFU (exp2) peak each reaches.

    python benchmarks/bandwidth.py [--quick] [--dtype float32] [--repeats 7] [--out DIR] [--cuda-only]
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import pg_kde
from pg_kde import _native, bandwidth, kde
from pg_kde.backend import cuda as _cuda

# The paper's figures for the largest case of each experiment (ms): 4-core SSE CPU and GTX 480 GPU.
PAPER = {
    ("plugin", 32768, 1): (1442.0, 87.9),
    ("lscv_h", 1024, 16): (344.0, 14.7),
    ("lscv_H_objective", 16384, 16): (2320.0, 184.0),
}
TARGETS_MS = {
    ("plugin", 32768, 1): 250.0,
    ("lscv_h", 1024, 16): 15.0,
    ("lscv_H_objective", 16384, 16): 150.0,
}


# The CUDA issue's targets on one H100 (float32, end to end including transfers), in ms.
CUDA_TARGETS_MS = {
    ("plugin", 32768, 1): 2.0,
    ("plugin", 1048576, 1): 1000.0,
    ("lscv_h", 1024, 16): 2.0,
    ("lscv_H_objective", 16384, 16): 10.0,
    ("kde", 1000000, 2): 1000.0,
}


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} CPUs, native ISA {_native.available_isas()[0]}, {_native.default_threads()} threads"


def time_call(fn, repeats: int):
    fn()  # warm-up: thread start, clocks, caches
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return min(times), statistics.median(times)


def cases(quick: bool):
    plugin_n = [1024, 4096, 32768] if quick else [1024, 2048, 4096, 8192, 16384, 32768]
    lscv_n = [256, 1024] if quick else [64, 128, 256, 512, 1024]
    obj_n = [1024, 16384] if quick else [1024, 2048, 4096, 8192, 16384]
    dims = [1, 4, 16] if quick else [1, 2, 4, 8, 16]
    for n in plugin_n:
        yield "plugin", n, 1
    for d in dims:
        for n in lscv_n:
            yield "lscv_h", n, d
    for d in dims:
        for n in obj_n:
            yield "lscv_H_objective", n, d


def runner(experiment: str, n: int, d: int, backend, dtype: str):
    rng = np.random.default_rng(n * 100 + d)
    if experiment == "plugin":
        x = rng.standard_normal(n)
        return lambda: bandwidth.plugin(x, backend=backend, dtype=dtype)
    X = rng.standard_normal((n, d))
    if experiment == "lscv_h":
        return lambda: bandwidth.lscv_h(X, backend=backend, dtype=dtype, grid=150)
    H = bandwidth.normal_reference(X).H
    return lambda: bandwidth.lscv_H_objective(X, H, backend=backend, dtype=dtype)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller grid (a few seconds)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--no-sequential", action="store_true", help="skip the slow sequential baseline")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    parser.add_argument("--cuda-only", action="store_true", help="only the CUDA section")
    args = parser.parse_args(argv)
    if args.cuda_only:
        if pg_kde.backends()["cuda"] is not None:
            print(pg_kde.backends()["cuda"], file=sys.stderr)
            return 2
        args.out.mkdir(parents=True, exist_ok=True)
        lines, met = cuda_section(args)
        (args.out / "bandwidth_cuda.md").write_text("\n".join(lines) + "\n")
        print("\n".join(lines))
        print(f"\nwrote {args.out / 'bandwidth_cuda.md'}")
        return 0 if met else 1

    backends = [] if args.no_sequential else ["sequential"]
    backends.append("native")
    if pg_kde.backends()["cuda"] is None:
        backends.append("cuda")
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"# {stamp}; {machine()}; dtype {args.dtype}; backends {', '.join(backends)}", flush=True)

    rows = []
    for experiment, n, d in cases(args.quick):
        row = {"experiment": experiment, "n": n, "d": d}
        for backend in backends:
            # The sequential loop is the reference point, not the subject: one run where it is slow.
            repeats = 1 if backend == "sequential" and n * n * d >= 2**26 else args.repeats
            best, median = time_call(runner(experiment, n, d, backend, args.dtype), repeats)
            row[f"{backend}_ms"], row[f"{backend}_median_ms"] = best, median
        if "sequential" in backends:
            row["speedup"] = row["sequential_ms"] / row["native_ms"]
        rows.append(row)
        print(
            f"{experiment:17s} n={n:6d} d={d:2d}  "
            + "  ".join(f"{b} {row[f'{b}_ms']:9.2f} ms" for b in backends)
            + (f"  x{row['speedup']:.1f}" if "speedup" in row else ""),
            flush=True,
        )

    args.out.mkdir(parents=True, exist_ok=True)
    fields = list(rows[0].keys())
    with open(args.out / "bandwidth.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)

    lines = [
        f"Measured {stamp} on {machine()}; dtype {args.dtype}; command "
        f"`python benchmarks/bandwidth.py{' --quick' if args.quick else ''} --dtype {args.dtype}`.",
        "Best of the runs, end to end from the Python call, in ms (median in parentheses).",
        "",
        "| experiment | n | d | " + " | ".join(backends) + (" | native vs sequential |" if "sequential" in backends else " |"),
        "|---|---:|---:|" + "---:|" * len(backends) + ("---:|" if "sequential" in backends else ""),
    ]
    for row in rows:
        cells = [f"{row[f'{b}_ms']:.2f} ({row[f'{b}_median_ms']:.2f})" for b in backends]
        speed = [f"{row['speedup']:.1f}x"] if "speedup" in row else []
        lines.append(f"| {row['experiment']} | {row['n']} | {row['d']} | " + " | ".join(cells + speed) + " |")

    met_all = True
    if args.dtype != "float32":  # the targets are stated for float32
        TARGETS_MS.clear()
    else:
        lines += ["", "| target | paper SSE / GPU (ms) | required | measured (native) | met |", "|---|---|---|---|---|"]
    by_key = {(r["experiment"], r["n"], r["d"]): r for r in rows}
    for key, target in TARGETS_MS.items():
        if key not in by_key:
            continue
        got = by_key[key]["native_ms"]
        met = got <= target
        met_all &= met
        sse, gpu = PAPER[key]
        lines.append(
            f"| {key[0]} n={key[1]} d={key[2]} | {sse:g} / {gpu:g} | <= {target:g} ms | {got:.1f} ms | {'yes' if met else 'NO'} |"
        )
    key = ("plugin", 32768, 1)
    if TARGETS_MS and key in by_key and "speedup" in by_key[key]:
        sp = by_key[key]["speedup"]
        met_all &= sp >= 12
        lines.append(f"| plugin n=32768 native vs sequential | | >= 12x | {sp:.1f}x | {'yes' if sp >= 12 else 'NO'} |")
    if "cuda" in backends:
        cuda_lines, cuda_met = cuda_section(args)
        lines += [""] + cuda_lines
        met_all &= cuda_met
    table = "\n".join(lines)
    (args.out / "bandwidth.md").write_text(table + "\n")
    print()
    print(table)
    print(f"\nwrote {args.out / 'bandwidth.csv'} and {args.out / 'bandwidth.md'}")
    return 0 if met_all else 1


def device_info():
    """(name, multiprocessors, clock Hz) of the current CUDA device."""
    import cupy

    device = cupy.cuda.Device()
    name = cupy.cuda.runtime.getDeviceProperties(device.id)["name"]
    name = name.decode() if isinstance(name, bytes) else str(name)
    return name, int(device.attributes["MultiProcessorCount"]), float(device.attributes["ClockRate"]) * 1e3


def device_time_ms(fn, repeats: int) -> float:
    """Best device time of fn() between two CUDA events on the current stream, in ms."""
    import cupy

    fn()
    best = float("inf")
    for _ in range(repeats):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        fn()
        end.record()
        end.synchronize()
        best = min(best, cupy.cuda.get_elapsed_time(start, end))
    return best


def cuda_runner(experiment: str, n: int, d: int, dtype: str, reduction: str = _cuda.DEFAULT_REDUCTION):
    backend = pg_kde.get_backend("cuda", reduction=reduction)
    if experiment != "kde":
        return runner(experiment, n, d, backend, dtype)
    rng = np.random.default_rng(n + d)
    sample, points = rng.standard_normal((n, d)), rng.standard_normal((n, d))
    H = bandwidth.normal_reference(sample).H
    return lambda: kde.evaluate(points, sample, H, backend=backend, dtype=dtype)


def kernel_cases(dtype: str, quick: bool):
    """(label, exp2 evaluations, approximate FP32 operations, call) of one primitive call each."""
    rng = np.random.default_rng(5)
    n_plugin = 1 << (18 if quick else 20)
    x = rng.standard_normal(n_plugin)
    z16 = rng.standard_normal((16384, 16))
    z_grid = rng.standard_normal((1024, 16))
    m_kde = 250_000 if quick else 1_000_000
    p2, s2 = rng.standard_normal((m_kde, 2)), rng.standard_normal((m_kde, 2))
    scales = np.geomspace(0.1, 10.0, 150)

    def pairs(n):
        return n * (n - 1) / 2

    # Operations per pair: PLUGIN 10 (difference, square, polynomial, scaled exponent, product, sum);
    # LSCV S costs 3d, then 6 per scale; KDE 3d + 3.
    return [
        (f"PLUGIN pair sum (order 4), n = {n_plugin}", pairs(n_plugin), 10 * pairs(n_plugin),
         lambda be: be.plugin_pair_sum(x, 0.3, 4, dtype)),
        ("LSCV_h grid pass, n = 1024, d = 16, 150 h", 150 * pairs(1024), pairs(1024) * (48 + 6 * 150),
         lambda be: be.lscv_pair_sums(z_grid, scales, 3.0, False, dtype)),
        ("LSCV_H objective sums, n = 16384, d = 16", pairs(16384), pairs(16384) * (48 + 6),
         lambda be: be.lscv_pair_sums(z16, np.array([1.0]), 3.0, False, dtype)),
        (f"KDE sums, m = n = {m_kde}, d = 2", float(m_kde) ** 2, float(m_kde) ** 2 * 9,
         lambda be: be.kde_sums(p2, s2, dtype)),
    ]


def cuda_section(args, *, device=None, device_timer=None, kernels=None, make_backend=None, targets=None):
    """The CUDA issue's targets under each reduction strategy, and the kernels' share of the device peak.

    The keyword arguments replace, for the tests, the device description (name, SMs, clock Hz), the
    device timer, the kernel cases, the backend factory and the targets."""
    name, sms, clock = device if device is not None else device_info()
    device_timer = device_timer or device_time_ms
    make_backend = make_backend or _cuda.CudaBackend
    targets = targets if targets is not None else CUDA_TARGETS_MS
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    sfu_peak, fp32_peak = sms * 16 * clock, sms * 128 * 2 * clock  # exp2/s (MUFU), FLOP/s (FMA = 2)
    strategies = list(_cuda.REDUCTIONS)
    lines = [
        f"CUDA: measured {stamp} on {name} ({sms} SMs, {clock / 1e9:.2f} GHz); dtype {args.dtype}; command "
        f"`python benchmarks/bandwidth.py --cuda-only{' --quick' if args.quick else ''} --dtype {args.dtype}`.",
        "End to end from the Python call, host-device transfers included; best of the runs in ms, per "
        "reduction strategy (default: " + _cuda.DEFAULT_REDUCTION + "), and the default's median; met: the best "
        "within the target.",
        "",
        "| target | paper GTX 480 (ms) | required | " + " | ".join(strategies) + " | median | met |",
        "|---|---:|---:|" + "---:|" * (len(strategies) + 1) + "---|",
    ]
    met_all = True
    totals = dict.fromkeys(strategies, 0.0)
    for key, target in targets.items():
        experiment, n, d = key
        if args.quick and n >= 1_000_000:
            n = n // 4
        times, medians = {}, {}
        for strategy in strategies:
            times[strategy], medians[strategy] = time_call(cuda_runner(experiment, n, d, args.dtype, strategy),
                                                           args.repeats)
            totals[strategy] += times[strategy] / target
        got = times[_cuda.DEFAULT_REDUCTION]
        met = got <= target or args.quick
        met_all &= met
        paper = PAPER.get(key, (None, None))[1]
        print(f"cuda {experiment} n={n} d={d}: " + ", ".join(f"{s} {t:.2f} ms" for s, t in times.items()), flush=True)
        lines.append(
            f"| {experiment} n={n} d={d} | {paper if paper is not None else '-'} | <= {target:g} | "
            + " | ".join(f"{times[s]:.2f}" for s in strategies)
            + f" | {medians[_cuda.DEFAULT_REDUCTION]:.2f} | {'yes' if got <= target else 'NO'} |"
        )
    fastest = min(totals, key=totals.get)
    lines += ["", f"Fastest strategy over these targets (sum of time / target): {fastest}.", ""]
    lines += [
        "Device time of one primitive call (CUDA events, transfers included), and the share of the "
        f"device's peak: FP32 {fp32_peak / 1e12:.1f} TFLOP/s (FMA = 2), SFU exp2 {sfu_peak / 1e12:.2f} T/s.",
        "",
        "| kernel | ms | exp2 / s | of SFU peak | FP32 op / s | of FP32 peak |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    be = make_backend()
    for label, exps, flops, call in (kernels if kernels is not None else kernel_cases(args.dtype, args.quick)):
        ms = device_timer(lambda: call(be), max(1, args.repeats // 2))
        rate_e, rate_f = exps / (ms / 1e3), flops / (ms / 1e3)
        print(f"cuda kernel {label}: {ms:.2f} ms", flush=True)
        lines.append(
            f"| {label} | {ms:.2f} | {rate_e:.3g} | {100 * rate_e / sfu_peak:.0f}% | {rate_f:.3g} | "
            f"{100 * rate_f / fp32_peak:.0f}% |"
        )
    return lines, met_all


if __name__ == "__main__":
    sys.exit(main())
