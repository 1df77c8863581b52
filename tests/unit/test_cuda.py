"""The cuda backend where no GPU is needed: every kernel file compiles with nvcc for sm_80 and sm_90, the
loader's source keeps file names and line numbers, the triangular tile map is exact for large indices, the
launch arithmetic (grids, batches, excess blocks) holds in the host emulator, and selection and fallback
behave. The kernels' numbers are checked in test_kernels.py and test_parity.py (emulated, and on a GPU)."""

import ctypes
import math
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import pg_kde
from pg_kde import backend as _backends
from pg_kde.backend import cuda as _cuda
from pg_kde import bandwidth, kde
from pg_kde.backend import FallbackBackend, NativeBackend, ReferenceBackend

REPO_CUDA = Path(__file__).resolve().parents[2] / "pg_kde" / "backend" / "cuda"
REF = ReferenceBackend()


def nvcc():
    path = shutil.which("nvcc")
    if path is None:
        if os.environ.get("PG_KDE_REQUIRE_NVCC"):
            pytest.fail("nvcc is not on PATH, and PG_KDE_REQUIRE_NVCC asks for the kernels to be compiled")
        pytest.skip("nvcc is not installed here (CI sets PG_KDE_REQUIRE_NVCC=1 so it cannot be skipped there)")
    return path


def test_installed_kernels_are_the_repository_files():
    files = sorted(p.name for p in REPO_CUDA.iterdir() if p.suffix in (".cu", ".cuh"))
    assert files == ["common.cuh", "kde.cu", "pair_sums.cu"]
    for name in files:
        assert (_cuda.kernel_dir() / name).read_bytes() == (REPO_CUDA / name).read_bytes(), (
            f"the installed {name} differs from pg_kde/backend/cuda/{name}: reinstall (pip install .)"
        )
    assert sorted(set(_cuda.KERNEL_FILES.values())) == [p.name for p in sorted(REPO_CUDA.glob("*.cu"))]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_every_kernel_file_compiles_with_nvcc(arch, tmp_path):
    for source in sorted(REPO_CUDA.glob("*.cu")):
        result = subprocess.run(
            [nvcc(), "--cubin", f"-arch={arch}", "-std=c++17", "-ftz=true", "--Werror", "all-warnings", f"-I{REPO_CUDA}",
             "-o", str(tmp_path / f"{source.stem}.cubin"), str(source)],
            capture_output=True, text=True,
        )
        assert result.returncode == 0, f"{source.name} for {arch}:\n{result.stderr}"


def test_loader_source_compiles_and_errors_point_at_the_file(tmp_path):
    # What CuPy is given: the header inlined, with #line directives.
    source = _cuda.kernel_source("pair_sums.cu")
    assert f'#line 1 "{_cuda.kernel_dir() / "common.cuh"}"' in source
    assert '#include "common.cuh"' not in source
    (tmp_path / "whole.cu").write_text(source)
    ok = subprocess.run([nvcc(), "--cubin", "-arch=sm_90", "-std=c++17", "-o", str(tmp_path / "w.cubin"),
                         str(tmp_path / "whole.cu")], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    # A fault after the include line is reported at its own file and line.
    broken = tmp_path / "kernels"
    broken.mkdir()
    shutil.copy(REPO_CUDA / "common.cuh", broken)
    lines = (REPO_CUDA / "kde.cu").read_text().splitlines()
    target = next(k for k, line in enumerate(lines) if "part += exp2_neg" in line)
    lines[target] = lines[target].replace("exp2_neg", "exp2_negative")
    (broken / "kde.cu").write_text("\n".join(lines) + "\n")
    (tmp_path / "broken.cu").write_text(_cuda.kernel_source("kde.cu", broken))
    bad = subprocess.run([nvcc(), "--cubin", "-arch=sm_90", "-o", str(tmp_path / "b.cubin"),
                          str(tmp_path / "broken.cu")], capture_output=True, text=True)
    assert bad.returncode != 0
    assert f"{broken / 'kde.cu'}({target + 1})" in bad.stderr, bad.stderr


def _nvrtc():
    """libnvrtc from the CUDA toolkit, or from the nvidia-cuda-nvrtc wheel CuPy installs, or None."""
    import ctypes.util
    import glob
    import sys

    candidates = [ctypes.util.find_library("nvrtc")]
    for base in sys.path:
        candidates += sorted(glob.glob(os.path.join(base, "nvidia", "cu*", "lib", "libnvrtc.so*")))
        candidates += sorted(glob.glob(os.path.join(base, "nvidia", "cuda_nvrtc", "lib", "libnvrtc.so*")))
    for candidate in candidates:
        if candidate and "builtins" not in candidate:
            try:
                return ctypes.CDLL(candidate)
            except OSError:
                continue
    return None


@pytest.mark.parametrize("filename", sorted(set(_cuda.KERNEL_FILES.values())))
def test_loader_source_compiles_with_nvrtc(filename):
    # NVRTC is what CuPy compiles with: no host headers, its own option set. Where it is installed (with
    # CuPy, or in a CUDA toolkit that has it), the loader's exact source and options must compile.
    lib = _nvrtc()
    if lib is None:
        pytest.skip("no libnvrtc here (it comes with CuPy's CUDA wheels and with full CUDA toolkits)")
    source = _cuda.kernel_source(filename).encode()
    program = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(program), source, filename.encode(), 0, None, None) == 0
    try:
        for arch in ("compute_80", "compute_90"):
            options = [o.encode() for o in _cuda.NVRTC_OPTIONS] + [f"--gpu-architecture={arch}".encode()]
            status = lib.nvrtcCompileProgram(program, len(options), (ctypes.c_char_p * len(options))(*options))
            size = ctypes.c_size_t()
            lib.nvrtcGetProgramLogSize(program, ctypes.byref(size))
            log = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetProgramLog(program, log)
            assert status == 0, f"{filename} for {arch}:\n{log.value.decode()}"
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(program))


def test_kernel_source_reports_a_missing_include(tmp_path):
    (tmp_path / "k.cu").write_text('// a kernel\n#include "absent.cuh"\n')
    with pytest.raises(FileNotFoundError, match=r"k.cu:2: included file .*absent.cuh does not exist"):
        _cuda.kernel_source("k.cu", tmp_path)
    with pytest.raises(ValueError, match="no CUDA kernel family"):
        _cuda.kernel_file("quantum_sums_f32")


def _exact_tile(lam: int):
    row = (math.isqrt(8 * lam + 1) - 1) // 2
    return row, lam - row * (row + 1) // 2


def test_triangular_map_is_exact_for_large_indices(cuda_emulator_library):
    def tri(i):
        return i * (i + 1) // 2

    rows = [0, 1, 2, 3, 1000, 2**12, 2**20 - 1, 2**24 - 3, 2**24, 2**24 + 5, 2**26 + 1, 2**31 - 1, 2**31,
            2**32 - 2, 2**32 - 1]
    lambdas = sorted({lam for i in rows for lam in (tri(i) - 1, tri(i), tri(i) + i // 2, tri(i) + i)
                      if 0 <= lam < 2**63})
    row, col = ctypes.c_ulonglong(), ctypes.c_ulonglong()
    naive_float_wrong = naive_double_wrong = 0
    for lam in lambdas:
        cuda_emulator_library.pg_kde_emulator_tile_of(lam, ctypes.byref(row), ctypes.byref(col))
        expected = _exact_tile(lam)
        assert (row.value, col.value) == expected, lam
        assert 0 <= col.value <= row.value
        f32 = np.float32
        naive_float_wrong += int(np.floor(np.sqrt(f32(0.25) + f32(2) * f32(lam)) - f32(0.5))) != expected[0]
        naive_double_wrong += math.floor(math.sqrt(0.25 + 2.0 * lam) - 0.5) != expected[0]
    # The sample is hard enough that the uncorrected roots go wrong: the correction step is what passes.
    assert naive_float_wrong > 0 and naive_double_wrong > 0


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_kernels_do_not_depend_on_the_order_threads_run_in(dtype, emulated_cuda, cuda_emulator_library, rng):
    # Races on shared memory (a barrier missing between a write and another thread's read) change the
    # result with the order the emulator runs threads in; the partials strategy has no atomics, so a
    # correct kernel gives the same bits under every order.
    x = rng.standard_normal(300)
    z = rng.standard_normal((150, 5))
    points = rng.standard_normal((70, 3))

    def run():
        be = emulated_cuda("partials", block=64, pair_tile=16, buffer=64)
        a, d = be.lscv_pair_sums(z, [0.3, 1.0, 4.0], 2.0, True, dtype)
        m_a, m = be.lscv_moments(z, 2.0, dtype)
        return (be.plugin_pair_sum(x, 0.4, 6, dtype), tuple(a), tuple(d), m_a, tuple(m.ravel()),
                tuple(be.kde_sums(points, z[:, :3], dtype)), tuple(be.kde_sums(points[:, :1], x, dtype)))

    try:
        runs = []
        for seed in (0, 1, 0xDEADBEEF):
            cuda_emulator_library.pg_kde_emulator_set_schedule(seed)
            runs.append(run())
    finally:
        cuda_emulator_library.pg_kde_emulator_set_schedule(0)
    assert runs[1] == runs[0] and runs[2] == runs[0]


def test_grid_covers_blocks_within_device_limits():
    for blocks in [1, 2, 1000, _cuda.MAX_GRID_X, _cuda.MAX_GRID_X + 1, 10**12, _cuda.MAX_GRID_X * 65535]:
        gx, gy = _cuda.grid_for(blocks)
        assert 1 <= gx <= _cuda.MAX_GRID_X and 1 <= gy <= _cuda.MAX_GRID_Y
        assert blocks <= gx * gy < blocks + gy  # fewer than gy blocks of excess
    with pytest.raises(ValueError, match="batches"):
        _cuda.grid_for(_cuda.MAX_GRID_X * 65536)
    assert _cuda.tile_count(1, 64) == 1 and _cuda.tile_count(65, 64) == 3 and _cuda.tile_count(640, 64) == 55


@pytest.mark.parametrize("reduction", list(_cuda.REDUCTIONS))
def test_batches_and_excess_blocks(reduction, emulated_cuda, monkeypatch, rng):
    # Tiny device limits: 2-D grids with excess blocks, several batches with tile offsets.
    monkeypatch.setattr(_cuda, "MAX_GRID_X", 3)
    monkeypatch.setattr(_cuda, "MAX_GRID_Y", 2)
    monkeypatch.setattr(_cuda, "PARTIAL_SLOTS", 10)
    be = emulated_cuda(reduction, block=32, pair_tile=8, buffer=16)
    x = rng.standard_normal(200)
    z = rng.standard_normal((90, 3))
    assert be.plugin_pair_sum(x, 0.5, 4, "float64") == pytest.approx(REF.plugin_pair_sum(x, 0.5, 4), rel=1e-12)
    A, D = be.lscv_pair_sums(z, [0.7, 3.0], 2.5, True, "float64")
    A_ref, D_ref = REF.lscv_pair_sums(z, [0.7, 3.0], 2.5, True)
    np.testing.assert_allclose(A, A_ref, rtol=1e-12)
    np.testing.assert_allclose(D, D_ref, rtol=1e-12)
    launches = be.executor.launches
    assert len(launches) > 10 and any(grid[1] == 2 for _, grid, _, _ in launches)


def test_buffered_tiles_shrink_until_the_blocks_fill_the_device(emulated_cuda, rng):
    """The LSCV kernels' tile halves from pair_tile while n points make fewer than FILL_BLOCKS tile pairs per
    multiprocessor (the emulated device has 4), down to MIN_PAIR_TILE; many points keep pair_tile, and a
    pair_tile below the floor is kept. Each answer is the reference's."""
    def blocks(be, z, derivative=False):
        A, D = be.lscv_pair_sums(z, [0.5, 2.0], 2.5, derivative)
        A_ref, D_ref = REF.lscv_pair_sums(z, [0.5, 2.0], 2.5, derivative)
        np.testing.assert_allclose(A, A_ref, rtol=1e-12)
        if derivative:
            np.testing.assert_allclose(D, D_ref, rtol=1e-12)
        _, grid, _, _ = be.executor.launches[-1]
        return grid[0] * grid[1]

    assert _cuda.FILL_BLOCKS * 4 == 16 and _cuda.MIN_PAIR_TILE == 16
    z = rng.standard_normal((100, 3))
    assert blocks(emulated_cuda(), z) == _cuda.tile_count(100, 16) == 28  # 64 -> 32 (10 tile pairs) -> 16
    assert blocks(emulated_cuda(), z[:40], True) == _cuda.tile_count(40, 16) == 6  # the floor, however few
    assert blocks(emulated_cuda(pair_tile=8), z) == _cuda.tile_count(100, 8) == 91
    assert blocks(emulated_cuda(), rng.standard_normal((700, 2))) == _cuda.tile_count(700, 64) == 66
    be = emulated_cuda()
    be.lscv_moments(z, 4.0)
    assert be.executor.launches[-1][1][0] * be.executor.launches[-1][1][1] == 28


def test_more_outputs_than_one_launch_holds(emulated_cuda, rng):
    z = rng.standard_normal((40, 23))  # 23·24/2 + 1 = 277 moment sums: two launches
    scales = np.geomspace(0.1, 10, 300)  # 300 scales: two launches
    be = emulated_cuda(block=64, pair_tile=16)
    A, M = be.lscv_moments(z, 4.0)
    A_ref, M_ref = REF.lscv_moments(z, 4.0)
    assert A == pytest.approx(A_ref, rel=1e-12)
    np.testing.assert_allclose(M, M_ref, rtol=1e-10, atol=1e-12 * np.abs(M_ref).max())
    got, _ = be.lscv_pair_sums(z[:, :2], scales, 3.0, False)
    np.testing.assert_allclose(got, REF.lscv_pair_sums(z[:, :2], scales, 3.0)[0], rtol=1e-12)


def test_kde_splits_the_sample_into_chunks_for_few_points(emulated_cuda, rng):
    be = emulated_cuda("partials", block=32)
    points, sample = rng.standard_normal((5, 6)), rng.standard_normal((700, 6))
    np.testing.assert_allclose(be.kde_sums(points, sample), REF.kde_sums(points, sample), rtol=1e-12)
    kernel, grid, block, shared = be.executor.launches[-1]
    assert kernel == "kde_sums_f64_dn" and grid[0] == 1 and grid[1] > 1 and shared == 32 * 6 * 8


def test_backend_arguments_and_limits(emulated_cuda):
    with pytest.raises(ValueError, match="unknown reduction 'tree'; valid: partials, thread_atomic, block_atomic"):
        _cuda.CudaBackend("tree")
    with pytest.raises(ValueError, match="multiple of 32"):
        _cuda.CudaBackend(block=100)
    with pytest.raises(ValueError, match="powers of two"):
        _cuda.CudaBackend(pair_tile=48)
    be = emulated_cuda()
    with pytest.raises(ValueError, match="order must be 2, 4 or 6"):
        be.plugin_pair_sum(np.zeros(4), 1.0, 3)
    with pytest.raises(ValueError, match="d = 4000 coordinates"):
        be.lscv_moments(np.zeros((3, 4000)), 1.0)
    assert be.plugin_pair_sum(np.zeros(1), 1.0, 4) == 0.0
    assert be.kde_sums(np.zeros((0, 2)), np.zeros((3, 2))).shape == (0,)


def test_reduction_is_a_backend_option_not_the_environment(monkeypatch, emulated_cuda_class):
    monkeypatch.setenv("PG_KDE_CUDA_REDUCTION", "partials")  # the old switch: no longer read
    assert _cuda.CudaBackend().reduction == _cuda.DEFAULT_REDUCTION
    assert _cuda.CudaBackend("partials").reduction == "partials"
    with pytest.raises(ValueError, match="unknown reduction 'bogus'"):
        _cuda.CudaBackend("bogus")
    monkeypatch.setitem(_backends.BACKENDS, "cuda", emulated_cuda_class)
    assert _backends.get_backend("cuda", reduction="thread_atomic").reduction == "thread_atomic"
    with pytest.raises(ValueError, match="does not take these options"):
        _backends.get_backend("cuda", isa="avx2")


def test_without_a_device_cuda_is_a_clear_error_and_auto_uses_native(rng):
    reason = pg_kde.backends()["cuda"]
    if reason is None:
        pytest.skip("a CUDA device answers here")
    assert reason.startswith("the cuda backend is not available: ")
    assert "pg_kde[cuda12]" in reason or "device" in reason
    with pytest.raises(pg_kde.BackendUnavailableError, match="the cuda backend is not available"):
        bandwidth.plugin(rng.standard_normal(30), backend="cuda")
    with pytest.raises(pg_kde.BackendUnavailableError, match="the cuda backend is not available"):
        kde.evaluate([0.0], [0.0, 1.0], 1.0, backend="cuda")
    assert bandwidth.plugin(rng.standard_normal(30), backend="auto").backend == "native"


class OutOfMemoryExecutor:
    """An executor whose device has no memory: every allocation fails as CuPy's pool does."""

    xp = np
    sm_count = 1

    def zeros(self, size):
        raise MemoryError(f"Out of memory allocating {size * 8:,} bytes (allocated so far: 0 bytes).")

    def to_device(self, a):
        return self.zeros(np.asarray(a).size)


class OutOfMemoryCuda(_cuda.CudaBackend):
    def __init__(self):
        super().__init__(executor=OutOfMemoryExecutor())

    @staticmethod
    def unavailable_reason():
        return None


def test_out_of_memory_under_auto_falls_back_to_native_with_a_warning(monkeypatch, rng):
    monkeypatch.setitem(_backends.BACKENDS, "cuda", OutOfMemoryCuda)
    x = rng.standard_normal(400)
    with pytest.warns(pg_kde.BackendFallbackWarning, match="the cuda backend failed .*GPU ran out of memory.* continues on the native backend"):
        r = bandwidth.plugin(x, backend="auto")
    assert r.backend == "native"
    assert r.h == bandwidth.plugin(x, backend="native").h
    with pytest.warns(pg_kde.BackendFallbackWarning):
        f = kde.evaluate([0.0, 1.0], x, r.h, backend="auto")
    np.testing.assert_allclose(f, kde.evaluate([0.0, 1.0], x, r.h, backend="reference"), rtol=1e-12)
    # Named explicitly, cuda does not fall back: the error says what happened.
    with pytest.raises(pg_kde.DeviceOutOfMemoryError, match="the GPU ran out of memory"):
        bandwidth.plugin(x, backend="cuda")


def test_fallback_backend_switches_once_and_reports_the_backend_that_ran(emulated_cuda, rng):
    calls = []

    def fallback():
        calls.append(1)
        return NativeBackend()

    be = FallbackBackend(emulated_cuda(), fallback)
    x = rng.standard_normal(50)
    assert be.name == "cuda" and be.plugin_pair_sum(x, 0.5, 4, "float64") == pytest.approx(
        REF.plugin_pair_sum(x, 0.5, 4), rel=1e-12)
    assert calls == []
    oom = FallbackBackend(OutOfMemoryCuda(), fallback)
    with pytest.warns(pg_kde.BackendFallbackWarning):
        oom.lscv_pair_sums(x, [1.0], 2.0)
    assert oom.name == "native" and calls == [1]
    oom.lscv_pair_sums(x, [1.0], 2.0)  # no second warning, no second switch (filterwarnings = error)
    assert calls == [1]


def test_out_of_memory_is_recognised_from_cupy_runtime_messages():
    assert _cuda.is_out_of_memory(MemoryError("Out of memory allocating 8 bytes"))
    assert _cuda.is_out_of_memory(RuntimeError("cudaErrorMemoryAllocation: out of memory"))
    assert _cuda.is_out_of_memory(RuntimeError("CUDA_ERROR_OUT_OF_MEMORY: out of memory"))
    assert not _cuda.is_out_of_memory(RuntimeError("CUDA_ERROR_INVALID_VALUE: invalid argument"))
