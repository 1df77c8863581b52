"""LSCV_h on the cuda backend: where its end-to-end time goes, and the buffered kernels' tile and block.

    python benchmarks/cuda_lscv_h.py [--n 1024] [--d 16] [--calls 30] [--sweep] [--out DIR]

Needs a CUDA device and CuPy (exits 2 with the reason otherwise). Float32 unless said, the default reduction
strategy, the data of benchmarks/bandwidth.py (standard normal, seeded by n and d):

- lscv_h end to end in float32 and float64: best and median of --calls calls (wall clock, after two
  warm-ups), the spread the CUDA targets' best-of-7 does not show;
- its stages, medians of 60 calls: sphering (covariance, Cholesky, whitening, on the host), the grid pass
  (150 h), one Newton pass (3 h with slopes), a copy of the points to the device, of 3 scales, and of 3
  doubles back;
- with --sweep, device time a call (CUDA events) of ``lscv_pair_sums`` with the tile pinned to each of
  8–64 and each block of 128–1024 threads: the grid pass (float32 and float64), the Newton pass, and at
  n = 16384 the grid pass and ``lscv_moments`` (the LSCV_H objective's and gradient's size).

Writes DIR/cuda_lscv_h.md (default benchmarks/results). docs/benchmarks.md (GPU, second lease) has a run on
an H200.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import pg_kde
from pg_kde import bandwidth
from pg_kde._linalg import log_det_chol
from pg_kde.backend import cuda as _cuda
from pg_kde.bandwidth import lscv_scalar
from pg_kde.bandwidth.reference_rule import _nr_factor

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the other benchmarks' helpers, under python -P too
from bandwidth import device_info, device_time_ms  # noqa: E402

TILES = (8, 16, 32, 64)
BLOCKS = (128, 256, 512, 1024)
GRID = 150


def data(n: int, d: int) -> np.ndarray:
    return np.random.default_rng(n * 100 + d).standard_normal((n, d))


def best_and_median(fn, calls: int, sync) -> tuple:
    """(best, median) wall-clock ms of ``calls`` calls of fn after two warm-ups, the device idle before each."""
    fn()
    fn()
    times = []
    for _ in range(calls):
        sync()
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return min(times), statistics.median(times)


def stages(make_backend, n: int, d: int, calls: int, stage_calls: int = 60) -> list:
    """The end-to-end rows and the stage rows of the report (markdown lines)."""
    be = make_backend()
    sync = be.executor.synchronize
    X = data(n, d)
    rows = []
    for dt in ("float32", "float64"):
        best, median = best_and_median(lambda: bandwidth.lscv_h(X, backend=be, dtype=dt, grid=GRID), calls, sync)
        rows.append((f"lscv_h end to end, {dt} ({calls} calls)", best, median))
    z, _, chol = lscv_scalar._sphere(X)
    crit = lscv_scalar._ScalarLSCV(z, log_det_chol(chol), be, "float32")
    h0 = _nr_factor(n, d)
    hs = np.geomspace(h0 / 4.0, 4.0 * h0, GRID)
    points = z.astype(np.float32)
    scales = np.ones(3, dtype=np.float32)
    back = be.executor.zeros(3)
    for label, fn in (
        ("sphering (covariance, Cholesky, whitening)", lambda: lscv_scalar._sphere(X)),
        (f"grid pass ({GRID} h)", lambda: crit.values(hs)),
        ("Newton pass (3 h, with slopes)", lambda: crit.values_and_slopes(hs[GRID // 2 - 1 : GRID // 2 + 2])),
        (f"copy of the points to the device ({points.nbytes:,} bytes)", lambda: be.executor.to_device(points)),
        ("copy of 3 scales to the device", lambda: be.executor.to_device(scales)),
        ("copy of 3 doubles back", lambda: be.executor.to_host(back)),
    ):
        rows.append((label, *best_and_median(fn, stage_calls, sync)))
    lines = ["| stage | best (ms) | median (ms) |", "|---|---:|---:|"]
    lines += [f"| {label} | {best:.3f} | {median:.3f} |" for label, best, median in rows]
    return lines


def sweep(make_backend, n: int, d: int, device_timer, big_n: int = 16384, tiles=TILES, blocks=BLOCKS,
          repeats: int = 5) -> list:
    """Device ms a call of the buffered kernels for each pinned tile and block (markdown lines).
    ``make_backend(block, pair_tile)``; ``device_timer(fn, repeats)``, the best of ``repeats`` timed calls."""
    z = lscv_scalar._sphere(data(n, d))[0]
    z_big = lscv_scalar._sphere(data(big_n, d))[0]
    h0 = _nr_factor(n, d)
    scales = 1.0 / np.geomspace(h0 / 4.0, 4.0 * h0, GRID) ** 2
    w = lscv_scalar._lscv_w(d)
    lines = [
        f"| tile | block | grid f32 | grid f64 | Newton f32 | grid n = {big_n} f32 | moments n = {big_n} f32 |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    floor = _cuda.MIN_PAIR_TILE
    try:
        for tile in tiles:
            _cuda.MIN_PAIR_TILE = tile  # (pinned: the tile does not halve for small n in these runs)
            for block in blocks:
                be = make_backend(block, tile)
                cells = [
                    device_timer(lambda: be.lscv_pair_sums(z, scales, w, False, "float32"), repeats),
                    device_timer(lambda: be.lscv_pair_sums(z, scales, w, False, "float64"), repeats),
                    device_timer(lambda: be.lscv_pair_sums(z, scales[GRID // 2 : GRID // 2 + 3], w, True, "float32"),
                                 repeats),
                    device_timer(lambda: be.lscv_pair_sums(z_big, scales, w, False, "float32"), max(1, repeats // 2)),
                    device_timer(lambda: be.lscv_moments(z_big, w, "float32"), max(1, repeats // 2)),
                ]
                lines.append(f"| {tile} | {block} | " + " | ".join(f"{ms:.3f}" for ms in cells) + " |")
    finally:
        _cuda.MIN_PAIR_TILE = floor
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--d", type=int, default=16)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--sweep", action="store_true", help="also time each tile and block")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args(argv)
    reason = pg_kde.backends()["cuda"]
    if reason is not None:
        print(reason, file=sys.stderr)
        return 2
    name, sms, clock = device_info()
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        f"LSCV_h n = {args.n}, d = {args.d} on {name} ({sms} SMs), pg_kde {pg_kde.__version__}, {stamp}; command "
        f"`python benchmarks/cuda_lscv_h.py --n {args.n} --d {args.d} --calls {args.calls}"
        f"{' --sweep' if args.sweep else ''}`. Reduction {_cuda.DEFAULT_REDUCTION}; the buffered kernels' tile at "
        f"this n: {_cuda.filling_tile(args.n, _cuda.CudaBackend().pair_tile, sms)}.",
        "",
    ]
    lines += stages(lambda: _cuda.CudaBackend(), args.n, args.d, args.calls)
    print("\n".join(lines), flush=True)
    if args.sweep:
        table = sweep(lambda block, tile: _cuda.CudaBackend(block=block, pair_tile=tile), args.n, args.d,
                      device_time_ms)
        lines += ["", "Device ms a call (CUDA events, copies included; best of 5, of 2 at n = 16384):", ""] + table
        print("\n".join(lines[-len(table) - 2 :]), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cuda_lscv_h.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out / 'cuda_lscv_h.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
