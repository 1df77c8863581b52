"""The CUDA section of benchmarks/bandwidth.py, run end to end on the emulated cuda backend with small
sizes, so that the benchmark a GPU session runs (make gpu-check) cannot rot where no GPU is."""

import argparse
import os
import time

from pg_kde import backend as _backends
from pg_kde.backend import cuda as _cuda

from benchhelpers import load_benchmark


def test_cuda_section_end_to_end(emulated_cuda_class, monkeypatch, rng):
    bench = load_benchmark("bandwidth.py")
    monkeypatch.setitem(_backends.BACKENDS, "cuda", emulated_cuda_class)
    monkeypatch.delenv("PG_KDE_CUDA_REDUCTION", raising=False)

    def wall_ms(fn, repeats):
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) * 1e3

    x = rng.standard_normal(300)
    z = rng.standard_normal((80, 3))
    kernels = [("PLUGIN pair sum", 300 * 299 / 2, 10 * 300 * 299 / 2, lambda be: be.plugin_pair_sum(x, 0.4, 4, "float32")),
               ("KDE sums", 80.0**2, 9 * 80.0**2, lambda be: be.kde_sums(z, z, "float32"))]
    targets = {("plugin", 300, 1): 1e6, ("lscv_h", 60, 2): 1e6, ("lscv_H_objective", 90, 2): 1e-9, ("kde", 120, 2): 1e6}
    args = argparse.Namespace(dtype="float32", quick=False, repeats=1)
    lines, met = bench.cuda_section(args, device=("Emulator", 4, 1.0e9), device_timer=wall_ms, kernels=kernels,
                                    make_backend=emulated_cuda_class, targets=targets)
    text = "\n".join(lines)
    assert "on Emulator (4 SMs, 1.00 GHz)" in text
    assert "| target | paper GTX 480 (ms) | required | partials | thread_atomic | block_atomic | median | met |" in text
    assert all(line.count("|") == 9 for line in lines if line.startswith("| plugin n=300"))
    assert "| lscv_H_objective n=90 d=2 |" in text and text.count("| NO |") == 1  # the 1e-9 ms target
    assert met is False
    assert "Fastest strategy over these targets" in text
    assert "| PLUGIN pair sum |" in text and "| KDE sums |" in text
    assert "PG_KDE_CUDA_REDUCTION" not in os.environ  # restored


def test_lscv_h_stages_and_layout_sweep_run_on_the_emulator(emulated_cuda, monkeypatch):
    """benchmarks/cuda_lscv_h.py's own code (what a GPU session runs) on the emulated backend, tiny sizes:
    one row a stage, one a pinned tile and block, and the tile floor restored after the sweep."""
    bench = load_benchmark("cuda_lscv_h.py")
    lines = bench.stages(lambda: emulated_cuda(block=64), 40, 2, calls=2, stage_calls=2)
    assert lines[0] == "| stage | best (ms) | median (ms) |" and len(lines) == 2 + 8
    assert lines[2].startswith("| lscv_h end to end, float32 (2 calls) |") and "copy of 3 doubles back" in lines[-1]
    timed = []

    def wall_ms(fn, repeats):
        timed.append(repeats)
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) * 1e3

    made = []

    def make(block, tile):
        made.append((block, tile))
        return emulated_cuda(block=block, pair_tile=tile)

    table = bench.sweep(make, 40, 2, wall_ms, big_n=48, tiles=(8, 16), blocks=(64,), repeats=2)
    assert made == [(64, 8), (64, 16)] and len(table) == 4 and table[2].startswith("| 8 | 64 | ")
    assert all(row.count("|") == 8 for row in table[2:]) and set(timed) == {2, 1}
    assert _cuda.MIN_PAIR_TILE == 16
