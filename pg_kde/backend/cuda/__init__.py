"""The cuda backend: the pair sums and KDE sums of :mod:`pg_kde.backend` as CUDA kernels run by CuPy.

The kernels are real files beside this module (``pg_kde/backend/cuda/*.cu``, ``common.cuh``). One loader,
:func:`load_module`, reads a file, inlines the headers it includes with ``#line`` directives (so compiler
errors point at the file and line, and CuPy's kernel cache sees a header change), and returns a
``cupy.RawModule``, cached per device. Python chooses every grid and block size (see
:class:`CudaBackend`); docs/math.md §9 describes the kernels and the numbers they compute.

CuPy is an optional dependency: ``pip install 'pg_kde[cuda12]'`` or ``'pg_kde[cuda13]'``.
"""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path

import numpy as np

from ..._errors import DeviceOutOfMemoryError
from ..._linalg import symmetric_from_upper
from ..._slices import kde_terms, pair_terms, point_slices, recording
from ..._validate import check_dtype

#: How block partial sums reach the result; the numbers are the ``Reduction`` enum of cuda/common.cuh.
#: ``partials``: each block reduces (warp shuffles, then shared memory) and writes its own slot, and a
#: second pass sums the slots on the device (bit-for-bit reproducible); ``thread_atomic``: one atomicAdd
#: per thread; ``block_atomic``: the block reduces, then one atomicAdd per block.
REDUCTIONS = {"partials": 0, "thread_atomic": 1, "block_atomic": 2}
#: The default strategy. ``benchmarks/bandwidth.py`` times all three on the device; see docs/benchmarks.md.
DEFAULT_REDUCTION = "block_atomic"

#: Which file holds which kernel family (kernel names are ``<family>_<f32|f64>_...``).
KERNEL_FILES = {
    "plugin_pair_sum": "pair_sums.cu",
    "lscv_pair_sums": "pair_sums.cu",
    "lscv_moments": "pair_sums.cu",
    "kde_sums": "kde.cu",
}

MAX_GRID_X = 2**31 - 1
MAX_GRID_Y = 65535
#: Dynamic shared memory a block may use without opting in to more (every device since Kepler).
SHARED_BYTES = 48 * 1024
#: Outputs one launch of a buffered pair kernel computes (one thread per output at least).
MAX_OUTPUTS = 256
#: The buffered pair kernels' tile shrinks (from ``pair_tile``, halving) until n points make at least this many
#: tile pairs, one block each, per multiprocessor, or it reaches MIN_PAIR_TILE (below which the tiles'
#: loads and reductions cost more than the idle multiprocessors did: 8 was slower than 16 and 32 on the H200).
FILL_BLOCKS = 4
MIN_PAIR_TILE = 16
#: Doubles in one batch's partial-sum buffer (128 MiB); larger launches run in batches.
PARTIAL_SLOTS = 1 << 24
#: Pair terms (pg_kde._slices) in one launch when an interrupt check is given; the backend waits for each
#: launch to finish before the next check. An estimate, not a measurement (no GPU was at hand): an H100
#: computes ~10¹¹–10¹² float32 PLUGIN pairs per second, so 2³³ terms take ~10–80 ms there, and a GPU ten
#: times slower stays under a second; float64 is budgeted for 1/8 of that.
SLICE_TERMS = {"float32": 1 << 33, "float64": 1 << 30}

#: Compiler options for NVRTC, which CuPy uses (the tests compile the same source with them). Flushing
#: float denormals to zero makes exp2f one hardware instruction; terms below 2⁻¹²⁶ do not matter.
NVRTC_OPTIONS = ("-std=c++17", "--ftz=true")

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$')


def kernel_dir() -> Path:
    """Where the installed ``.cu`` files are."""
    return Path(__file__).resolve().parent


def kernel_file(kernel: str) -> str:
    """The ``.cu`` file that defines ``kernel`` (a name such as ``lscv_pair_sums_f32``)."""
    for family, filename in KERNEL_FILES.items():
        if kernel.startswith(family + "_"):
            return filename
    raise ValueError(f"no CUDA kernel family matches {kernel!r}; known: {', '.join(KERNEL_FILES)}")


def kernel_source(filename: str, directory=None) -> str:
    """The source of ``directory/filename`` with its ``#include "..."`` files inlined, each part headed by a
    ``#line`` directive naming its file, so that every line keeps its file and number for the compiler."""
    directory = Path(directory) if directory is not None else kernel_dir()
    included = set()

    def expand(path: Path) -> list:
        out = [f'#line 1 "{path}"']
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            match = _INCLUDE.match(line)
            if match is None:
                out.append(line)
                continue
            header = directory / match.group(1)
            if not header.is_file():
                raise FileNotFoundError(f"{path}:{number}: included file {header} does not exist")
            if header not in included:
                included.add(header)
                out.extend(expand(header))
            out.append(f'#line {number + 1} "{path}"')
        return out

    return "\n".join(expand(directory / filename)) + "\n"


_modules: dict = {}


def load_module(filename: str, device_id=None):
    """The ``cupy.RawModule`` of ``cuda/<filename>`` for a device (default: the current one), compiled once
    per device and process (CuPy also keeps compiled binaries on disk across processes)."""
    import cupy

    if device_id is None:
        device_id = cupy.cuda.Device().id
    key = (int(device_id), filename)
    module = _modules.get(key)
    if module is None:
        with cupy.cuda.Device(device_id):
            module = cupy.RawModule(code=kernel_source(filename), options=NVRTC_OPTIONS)
        _modules[key] = module
    return module


@functools.lru_cache(maxsize=None)
def unavailable_reason():
    """None if the cuda backend can run here, else why not (cached for the process)."""
    missing = [name for name in sorted(set(KERNEL_FILES.values())) if not (kernel_dir() / name).is_file()]
    if missing:
        return (
            f"the cuda backend is not available: its kernel files ({', '.join(missing)}) are missing from "
            f"{kernel_dir()}; reinstall pg_kde"
        )
    try:
        import cupy
    except Exception as exc:  # ImportError, or a CuPy built for another CUDA failing to load
        return (
            f"the cuda backend is not available: CuPy did not import ({exc}); install it with "
            "pip install 'pg_kde[cuda12]' (CUDA 12) or 'pg_kde[cuda13]' (CUDA 13)"
        )
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return f"the cuda backend is not available: no CUDA device answers ({exc})"
    if count < 1:
        return "the cuda backend is not available: CUDA reports no device"
    return None


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is the device running out of memory (CuPy's pool, the runtime or the driver)."""
    if isinstance(exc, MemoryError):
        return True
    text = str(exc)
    return "out of memory" in text.lower() or "OUT_OF_MEMORY" in text or "cudaErrorMemoryAllocation" in text


class CupyExecutor:
    """Runs kernels on the current CUDA device through CuPy: device arrays, launches, copies."""

    def __init__(self):
        import cupy

        self.xp = cupy
        device = cupy.cuda.Device()
        self.device_id = device.id
        self.sm_count = int(device.attributes["MultiProcessorCount"])
        self._functions = {}

    def to_device(self, a):
        return self.xp.asarray(a)

    def zeros(self, size: int):
        return self.xp.zeros(int(size), dtype=self.xp.float64)

    def to_host(self, a) -> np.ndarray:
        return self.xp.asnumpy(a)

    def synchronize(self):
        """Wait until the work queued so far has finished."""
        self.xp.cuda.get_current_stream().synchronize()

    def launch(self, kernel: str, grid, block: int, args, shared_bytes: int):
        function = self._functions.get(kernel)
        if function is None:
            function = load_module(kernel_file(kernel), self.device_id).get_function(kernel)
            self._functions[kernel] = function
        function(tuple(grid), (int(block),), tuple(args), shared_mem=int(shared_bytes))


def grid_for(blocks: int):
    """A 2-D grid of at least ``blocks`` blocks within the device's limits, wasting fewer than gy blocks:
    the kernels read (blockIdx.y, blockIdx.x) as one linear index and discard the excess."""
    if blocks < 1:
        raise ValueError("a launch needs at least one block")
    gy = -(-blocks // MAX_GRID_X)
    if gy > MAX_GRID_Y:
        raise ValueError(f"{blocks} blocks exceed one launch; split it into batches")
    return (-(-blocks // gy), gy)


def tile_count(n: int, tile: int) -> int:
    """Tile pairs (i, j), j ≤ i, of n points in tiles of ``tile``: the lower triangle with its diagonal."""
    per_side = -(-n // tile)
    return per_side * (per_side + 1) // 2


def filling_tile(n: int, pair_tile: int, sm_count: int) -> int:
    """The buffered kernels' tile for n points: ``pair_tile`` halved while its tile pairs (one block each) are
    fewer than FILL_BLOCKS a multiprocessor, not below MIN_PAIR_TILE (a pair_tile below it is kept). n = 1024
    on an H200's 132: 32, where 64 left the LSCV_h grid pass's 136 blocks one a multiprocessor and took twice as
    long (docs/benchmarks.md, GPU)."""
    tile = pair_tile
    while tile > MIN_PAIR_TILE and tile_count(n, tile) < FILL_BLOCKS * sm_count:
        tile //= 2
    return tile


def _suffix(dtype: np.dtype) -> str:
    return "f32" if dtype == np.float32 else "f64"


def _device_memory_errors(method):
    """Raise the device running out of memory as :class:`DeviceOutOfMemoryError` (what ``auto`` falls
    back on), whichever CuPy, runtime or driver error reported it; an exception of the caller's interrupt
    check passes untouched (even one whose message says "out of memory")."""

    @functools.wraps(method)
    def wrapper(*args, interrupt=None, **kwargs):
        check = recording(interrupt)
        try:
            return method(*args, interrupt=check, **kwargs)
        except DeviceOutOfMemoryError:
            raise
        except Exception as exc:
            if check is not None and check.is_source_of(exc):
                raise
            if is_out_of_memory(exc):
                raise DeviceOutOfMemoryError(f"the GPU ran out of memory ({exc})") from exc
            raise

    return wrapper


class CudaBackend:
    """CUDA kernels through CuPy (see the module's docstring).

    ``reduction``: one of :data:`REDUCTIONS` (default :data:`DEFAULT_REDUCTION`). ``block`` is the threads per block (a multiple of 32, at most 1024) and the
    tile side of the PLUGIN kernel; ``pair_tile`` the largest tile side of the buffered LSCV kernels (a
    power of two); ``buffer`` the pairs per chunk of those kernels. ``executor`` runs the kernels (default:
    CuPy on the current device). ``slice_terms`` is the pair terms in one launch when an interrupt check
    is given (default :data:`SLICE_TERMS` of the dtype).
    """

    name = "cuda"

    def __init__(self, reduction=None, *, block: int = 256, pair_tile: int = 64, buffer: int = 2048,
                 executor=None, slice_terms=None):
        reduction = reduction if reduction is not None else DEFAULT_REDUCTION
        if reduction not in REDUCTIONS:
            raise ValueError(f"unknown reduction {reduction!r}; valid: {', '.join(REDUCTIONS)}")
        if block % 32 or not 32 <= block <= 1024:
            raise ValueError(f"block must be a multiple of 32 in [32, 1024], not {block}")
        if pair_tile < 1 or pair_tile & (pair_tile - 1) or buffer < 1 or buffer & (buffer - 1):
            raise ValueError("pair_tile and buffer must be powers of two")
        self.reduction = reduction
        self.block, self.pair_tile, self.buffer = block, pair_tile, buffer
        self._executor = executor
        self._slice_terms = slice_terms

    @staticmethod
    def unavailable_reason():
        return unavailable_reason()

    @property
    def executor(self):
        if self._executor is None:
            self._executor = CupyExecutor()
        return self._executor

    def slice_terms(self, dtype) -> float:
        """Pair terms in one launch when an interrupt check is given."""
        return float(self._slice_terms if self._slice_terms is not None else SLICE_TERMS[check_dtype(dtype)])

    # -- launch plumbing -------------------------------------------------------------------------------

    def _pair_sums(self, kernel, n, tile, block, shared, n_vals, make_args, slice_terms=None,
                   interrupt=None) -> np.ndarray:
        """Launch ``kernel`` over every tile pair of n points (in batches) and return its n_vals sums.

        With an interrupt check, a batch holds at most ``slice_terms`` pair terms (tile² pairs per tile
        pair, at least one tile pair), the check runs before each batch, and each batch is waited for."""
        ex, code = self.executor, REDUCTIONS[self.reduction]
        tiles = tile_count(n, tile)
        batch = min(tiles, MAX_GRID_X * MAX_GRID_Y)
        if code == REDUCTIONS["partials"]:
            batch = max(1, min(batch, PARTIAL_SLOTS // n_vals))
        if interrupt is not None:
            batch = max(1, min(batch, int(slice_terms // (tile * tile))))
        out = ex.zeros(batch * n_vals if code == REDUCTIONS["partials"] else n_vals)
        total = None
        for offset in range(0, tiles, batch):
            if interrupt is not None:
                interrupt()
            count = min(batch, tiles - offset)
            args = make_args(np.uint64(tiles), np.uint64(offset), np.int32(code), out)
            ex.launch(kernel, grid_for(count), block, args, shared)
            if code == REDUCTIONS["partials"]:  # the second pass, on the device
                part = out[: count * n_vals].reshape(count, n_vals).sum(axis=0)
                total = part if total is None else total + part
            if interrupt is not None:
                ex.synchronize()
        return np.asarray(ex.to_host(out if total is None else total), dtype=np.float64)

    def _buffered_layout(self, n: int, d: int, itemsize: int, n_out: int):
        """(threads, tile side P, log2 chunk columns, shared bytes) of a buffered pair kernel over n points."""
        # At least two threads per output where that fits in ``block``; else one thread per output.
        block = self.block if 2 * n_out <= self.block else 32 * -(-n_out // 32)
        tile = filling_tile(n, self.pair_tile, self.executor.sm_count)
        while True:
            chunk = min(tile, max(1, self.buffer // tile))
            stride = d | 1  # the kernels' odd row stride (no shared-memory bank conflicts)
            shared = block * 8 + 2 * tile * stride * itemsize + tile * chunk * itemsize
            if shared <= SHARED_BYTES:
                return block, tile, chunk.bit_length() - 1, shared
            if tile == 1:
                raise ValueError(
                    f"the cuda backend cannot hold points of d = {d} coordinates in a block's shared memory; "
                    "use backend='native'"
                )
            tile //= 2

    def _prepare(self, z, dtype):
        dt = np.dtype(check_dtype(dtype))
        z = np.asarray(z, dtype=np.float64)
        z = np.ascontiguousarray(z[:, None] if z.ndim == 1 else z, dtype=dt)
        return z, dt

    def _buffered_sums(self, family, dz, n, d, dt, outputs, values_per_output, tail_args, terms_per_pair,
                       interrupt):
        """Run the buffered pair kernel ``family`` for ``outputs`` outputs, in launches of at most
        MAX_OUTPUTS. Yields (first output, outputs in the launch, sums shaped (values_per_output, n_out));
        ``tail_args(first, n_out)`` gives the kernel's arguments after ``out``; ``terms_per_pair(n_out)``
        the cost of a pair in a launch of n_out outputs (for the batches of an interrupt check)."""
        for first in range(0, outputs, MAX_OUTPUTS):
            n_out = min(MAX_OUTPUTS, outputs - first)
            block, tile, shift, shared = self._buffered_layout(n, d, dt.itemsize, n_out)
            tail = tail_args(first, n_out)
            vals = self._pair_sums(
                f"{family}_{_suffix(dt)}", n, tile, block, shared, n_out * values_per_output,
                lambda tiles, offset, code, out: (
                    dz, np.uint64(n), np.int32(d), np.uint32(tile), np.uint32(shift), tiles, offset, code, out, *tail
                ),
                self.slice_terms(dt) / terms_per_pair(n_out),
                interrupt,
            )
            yield first, n_out, vals.reshape(values_per_output, n_out)

    # -- the backend primitives (see pg_kde.backend) ---------------------------------------------------

    @_device_memory_errors
    def plugin_pair_sum(self, x, g, order, dtype="float64", *, interrupt=None):
        if order not in (2, 4, 6):
            raise ValueError(f"order must be 2, 4 or 6, not {order}")
        dt = np.dtype(check_dtype(dtype))
        # u = (xᵢ − xⱼ)/g: divide once, in float64, before rounding to the working precision.
        x = np.ascontiguousarray(np.asarray(x, dtype=np.float64).ravel() / float(g), dtype=dt)
        n = x.shape[0]
        if n < 2:
            return 0.0
        dx = self.executor.to_device(x)
        vals = self._pair_sums(
            f"plugin_pair_sum_{_suffix(dt)}_o{order}", n, self.block, self.block, self.block * dt.itemsize, 1,
            lambda tiles, offset, code, out: (dx, np.uint64(n), tiles, offset, code, out),
            self.slice_terms(dt) / pair_terms("plugin"),
            interrupt,
        )
        return float(vals[0])

    @_device_memory_errors
    def lscv_pair_sums(self, z, scales, w, derivative=False, dtype="float64", *, interrupt=None):
        z, dt = self._prepare(z, dtype)
        n, d = z.shape
        scales = np.asarray(scales, dtype=np.float64).ravel()
        a_sum = np.zeros(scales.shape[0])
        d_sum = np.zeros(scales.shape[0]) if derivative else None
        if n < 2:
            return a_sum, d_sum
        coef = (scales * (math.log2(math.e) / 4.0)).astype(dt)  # e = exp(−S s / 4) = 2^(−S coef)
        dz = self.executor.to_device(z)
        launches = self._buffered_sums(
            "lscv_pair_sums", dz, n, d, dt, coef.shape[0], 2 if derivative else 1,
            lambda first, n_out: (self.executor.to_device(coef[first : first + n_out]), np.uint32(n_out),
                                  dt.type(w), np.int32(bool(derivative))),
            lambda n_out: pair_terms("lscv", d, n_out, derivative),
            interrupt,
        )
        for first, n_out, vals in launches:
            a_sum[first : first + n_out] = vals[0]
            if derivative:
                d_sum[first : first + n_out] = vals[1]
        return a_sum, d_sum

    @_device_memory_errors
    def lscv_moments(self, z, w, dtype="float64", *, interrupt=None):
        z, dt = self._prepare(z, dtype)
        n, d = z.shape
        upper_a, upper_b = np.triu_indices(d)
        entry_a = np.concatenate([[-1], upper_a]).astype(np.int32)  # -1: the value sum A
        entry_b = np.concatenate([[-1], upper_b]).astype(np.int32)
        vals = np.zeros(entry_a.shape[0])
        if n >= 2:
            dz = self.executor.to_device(z)
            launches = self._buffered_sums(
                "lscv_moments", dz, n, d, dt, entry_a.shape[0], 1,
                lambda first, n_out: (self.executor.to_device(entry_a[first : first + n_out]),
                                      self.executor.to_device(entry_b[first : first + n_out]),
                                      np.uint32(n_out), dt.type(w)),
                lambda n_out: pair_terms("moments", d),
                interrupt,
            )
            for first, n_out, sums in launches:
                vals[first : first + n_out] = sums[0]
        return float(vals[0]), symmetric_from_upper(vals[1:], d)

    @_device_memory_errors
    def kde_sums(self, points, sample, dtype="float64", *, interrupt=None):
        points, dt = self._prepare(points, dtype)
        sample, _ = self._prepare(sample, dtype)
        m, d = points.shape
        n = sample.shape[0]
        if sample.shape[1] != d:
            raise ValueError(f"points have {d} column(s) but the sample has {sample.shape[1]}")
        if m == 0 or n == 0:
            return np.zeros(m)
        tile_rows = min(self.block, SHARED_BYTES // (d * dt.itemsize))
        if tile_rows < 1:
            raise ValueError(f"the cuda backend cannot hold a sample row of d = {d} in shared memory; use backend='native'")
        dsample = self.executor.to_device(sample)
        if interrupt is None:
            return self._kde_launch(points, dsample, n, d, dt, tile_rows)
        # A point's sum does not depend on the other points: one launch per range of points, each waited for.
        out = np.zeros(m)
        for a, b in point_slices(m, kde_terms(n, d), self.slice_terms(dt)):
            interrupt()
            out[a:b] = self._kde_launch(points[a:b], dsample, n, d, dt, tile_rows)
        return out

    def _kde_launch(self, points, dsample, n, d, dt, tile_rows):
        """kde_sums of ``points`` (host) against the sample already on the device, in one launch."""
        m = points.shape[0]
        block = self.block
        point_blocks = -(-m // block)
        if point_blocks > MAX_GRID_X:
            raise ValueError(f"{m} points exceed one launch of the cuda backend")
        code = REDUCTIONS[self.reduction]
        ex = self.executor
        # Split the sample into chunks (grid y) until the device has several blocks per multiprocessor.
        chunks = max(1, min(-(-n // tile_rows), MAX_GRID_Y, -(-8 * ex.sm_count // point_blocks)))
        if code == REDUCTIONS["partials"]:
            chunks = max(1, min(chunks, PARTIAL_SLOTS // m))
        chunk = -(-n // chunks)
        chunk = -(-chunk // tile_rows) * tile_rows
        chunks = -(-n // chunk)
        kernel = f"kde_sums_{_suffix(dt)}_d{d}" if d <= 4 else f"kde_sums_{_suffix(dt)}_dn"
        out = ex.zeros(chunks * m if code == REDUCTIONS["partials"] else m)
        args = (
            ex.to_device(points), np.uint64(m), dsample, np.uint64(n), np.int32(d),
            np.uint32(tile_rows), np.uint64(chunk), np.int32(code), out,
        )
        ex.launch(kernel, (point_blocks, chunks), block, args, tile_rows * d * dt.itemsize)
        if code == REDUCTIONS["partials"]:
            out = out.reshape(chunks, m).sum(axis=0)
        return np.asarray(ex.to_host(out), dtype=np.float64)
