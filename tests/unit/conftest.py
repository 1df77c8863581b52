"""The host emulator of the CUDA kernels (tests/unit/cuda_emulator): the kernels of pg_kde/backend/cuda/*.cu compiled as
C++ and run block by block on the CPU, driven by the cuda backend's own Python code through an executor
with the same interface as the CuPy one. It checks the kernels' indexing, masking, tiling and reductions
and the backend's launch arithmetic where no GPU is present; the `gpu` tests run the same checks on a
device."""

import ctypes
import shutil
import subprocess
import sys
import weakref
from pathlib import Path

import numpy as np
import pytest

from pg_kde.backend import cuda as _cuda

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchhelpers, shared by the test modules here

EMULATOR_DIR = Path(__file__).resolve().parent / "cuda_emulator"

_CTYPES = {
    np.dtype(np.uint64): ctypes.c_uint64,
    np.dtype(np.int32): ctypes.c_int32,
    np.dtype(np.uint32): ctypes.c_uint32,
    np.dtype(np.float32): ctypes.c_float,
    np.dtype(np.float64): ctypes.c_double,
}


class EmulatorExecutor:
    """Executor for :class:`pg_kde.backend.cuda.CudaBackend` that launches kernels in the host emulator.

    "Device" arrays are NumPy arrays. Kernel arguments must be NumPy arrays or NumPy scalars of the exact
    C type of the parameter, as CuPy needs them; anything else is refused, so a launch that would pass a
    wrong type on the device fails here too."""

    xp = np
    #: Bytes after every "device" array that a kernel must never write (checked after each launch).
    GUARD_BYTES = 256

    def __init__(self, library, sm_count=4):
        self.library = library
        self.sm_count = sm_count
        self.launches = []
        self.synchronizations = 0
        self._guarded = []

    def _allocate(self, shape, dtype):
        dtype = np.dtype(dtype)
        size = int(np.prod(shape, dtype=np.int64))
        base = np.empty(size * dtype.itemsize + self.GUARD_BYTES, dtype=np.uint8)
        base[size * dtype.itemsize :] = 0xA5
        self._guarded.append((weakref.ref(base), size * dtype.itemsize))
        return base[: size * dtype.itemsize].view(dtype).reshape(shape)

    def to_device(self, a):
        a = np.asarray(a)
        out = self._allocate(a.shape, a.dtype)
        out[...] = a
        return out

    def zeros(self, size):
        out = self._allocate((int(size),), np.float64)
        out[...] = 0.0
        return out

    def to_host(self, a):
        return np.array(a, copy=True)

    def synchronize(self):
        """Launches run to completion when they are made; this only counts the waits."""
        self.synchronizations += 1

    def launch(self, kernel, grid, block, args, shared_bytes):
        keep, pointers = [], []
        for arg in args:
            if isinstance(arg, np.ndarray):
                assert arg.flags.c_contiguous, f"{kernel}: non-contiguous array argument"
                value = ctypes.c_void_p(arg.ctypes.data)
            elif isinstance(arg, np.generic) and arg.dtype in _CTYPES:
                value = _CTYPES[arg.dtype](arg.item())
            else:
                raise TypeError(f"{kernel}: argument {arg!r} of type {type(arg).__name__} is not a NumPy array or a typed NumPy scalar")
            keep.append(value)
            pointers.append(ctypes.cast(ctypes.pointer(value), ctypes.c_void_p))
        argv = (ctypes.c_void_p * len(pointers))(*pointers)
        error = ctypes.create_string_buffer(512)
        gx, gy = (int(v) for v in grid)
        self.launches.append((kernel, (gx, gy), int(block), int(shared_bytes)))
        status = self.library.pg_kde_emulator_launch(
            kernel.encode(), gx, gy, int(block), int(shared_bytes), argv, error, len(error)
        )
        if status != 0:
            raise RuntimeError(f"emulated launch of {kernel} failed: {error.value.decode()}")
        live = []
        for ref, nbytes in self._guarded:  # the arrays still referenced (their views hold the base)
            base = ref()
            if base is None:
                continue
            if np.any(base[nbytes:] != 0xA5):
                raise RuntimeError(f"emulated launch of {kernel} wrote past the end of a {nbytes}-byte device array")
            live.append((ref, nbytes))
        self._guarded = live


@pytest.fixture(scope="session")
def cuda_emulator_library(tmp_path_factory):
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.fail("the CUDA kernel emulator needs a C++ compiler (g++); make system-deps installs it")
    out = tmp_path_factory.mktemp("cuda_emulator") / "emulator.so"
    # The installed kernel files: the ones CuPy would compile.
    subprocess.run(
        [compiler, "-std=c++17", "-O2", "-U_FORTIFY_SOURCE", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared",
         f"-I{EMULATOR_DIR}", f"-I{_cuda.kernel_dir()}", str(EMULATOR_DIR / "driver.cpp"), "-o", str(out)],
        check=True, capture_output=True, text=True,
    )
    library = ctypes.CDLL(str(out))
    library.pg_kde_emulator_launch.restype = ctypes.c_int
    library.pg_kde_emulator_launch.argtypes = [
        ctypes.c_char_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_ulonglong,
        ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p, ctypes.c_int,
    ]
    library.pg_kde_emulator_set_schedule.restype = None
    library.pg_kde_emulator_set_schedule.argtypes = [ctypes.c_ulonglong]
    library.pg_kde_emulator_tile_of.restype = None
    library.pg_kde_emulator_tile_of.argtypes = [
        ctypes.c_ulonglong, ctypes.POINTER(ctypes.c_ulonglong), ctypes.POINTER(ctypes.c_ulonglong)
    ]
    return library


@pytest.fixture
def emulated_cuda(cuda_emulator_library):
    """make(reduction, **sizes) -> a CudaBackend whose kernels run in the host emulator."""

    def make(reduction="block_atomic", **sizes):
        return _cuda.CudaBackend(reduction, executor=EmulatorExecutor(cuda_emulator_library), **sizes)

    return make


def _native_isas():
    from pg_kde import _native

    return _native.available_isas()


# Small tiles and blocks make even the small test inputs span many tiles, tails and diagonal tiles.
EMULATED_SMALL = {"block": 64, "pair_tile": 16, "buffer": 64}

FAST_BACKENDS = (
    [f"native-{isa}" for isa in _native_isas()]
    + [f"cuda-emulated-{reduction}" for reduction in _cuda.REDUCTIONS]
    + ["cuda-emulated-default"]
    + [pytest.param(f"cuda-{reduction}", marks=pytest.mark.gpu) for reduction in _cuda.REDUCTIONS]
)


@pytest.fixture(params=FAST_BACKENDS)
def fast_backend(request):
    """Every fast backend's primitives: each native instruction set, the CUDA kernels in the host emulator
    with each reduction strategy (small tiles) and with the default sizes, and on a GPU when there is one."""
    from pg_kde.backend import NativeBackend

    kind, _, rest = request.param.partition("-")
    if kind == "native":
        return NativeBackend(isa=rest)
    if rest.startswith("emulated-"):
        make = request.getfixturevalue("emulated_cuda")
        choice = rest[len("emulated-") :]
        return make() if choice == "default" else make(choice, **EMULATED_SMALL)
    return _cuda.CudaBackend(rest)


PARITY_BACKENDS = (
    [f"native-{isa}" for isa in _native_isas()]
    + ["cuda-emulated"]
    + [pytest.param("cuda", marks=pytest.mark.gpu)]
)


@pytest.fixture(params=PARITY_BACKENDS)
def parity_backend(request, monkeypatch):
    """The name to pass as backend= for the whole selectors: native with each instruction set, cuda with
    its kernels in the host emulator (registered as the cuda backend for the test), and the real cuda
    backend on a GPU."""
    from pg_kde import backend as _backends

    kind, _, rest = request.param.partition("-")
    if kind == "native":  # the native backend, made with this instruction set whenever it is asked for by name

        class PinnedNative(_backends.NativeBackend):
            def __init__(self, isa=None, threads=0, slice_terms=None):
                super().__init__(isa=rest, threads=threads, slice_terms=slice_terms)

        monkeypatch.setitem(_backends.BACKENDS, "native", PinnedNative)
        return "native"
    if rest == "emulated":
        monkeypatch.setitem(_backends.BACKENDS, "cuda", request.getfixturevalue("emulated_cuda_class"))
    return "cuda"


@pytest.fixture
def emulated_cuda_class(cuda_emulator_library):
    """A cuda backend class (for the BACKENDS registry) whose kernels run in the host emulator: what
    backend="cuda" then builds. 64 threads a block keep the emulator quick (it switches between every
    thread at each barrier); the tile sizes stay the defaults."""

    class EmulatedCuda(_cuda.CudaBackend):
        def __init__(self, reduction=None):
            super().__init__(reduction, block=64, executor=EmulatorExecutor(cuda_emulator_library))

        @staticmethod
        def unavailable_reason():
            return None

    return EmulatedCuda
