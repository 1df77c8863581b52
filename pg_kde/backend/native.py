"""The native backends: the C++ SIMD module pg_kde._native, and its single-threaded scalar baseline."""

from __future__ import annotations

import numpy as np

from .._linalg import symmetric_from_upper
from .._slices import kde_terms, pair_slices, pair_terms, point_slices
from .._validate import check_dtype


def _import_native():
    try:
        from .. import _native
    except ImportError as exc:  # pragma: no cover - only without a compiled module
        return None, str(exc)
    return _native, None


class NativeBackend:
    """The C++ module pg_kde._native: SIMD (AVX-512, AVX2 or portable), threads over tiles.

    ``isa`` picks an instruction set ("avx512", "avx2", "generic"; default "": the best the CPU has);
    ``threads`` <= 0 means ``PG_KDE_THREADS`` if set, else every hardware thread.

    With an interrupt check, each call of the module covers a range of rows of the pair matrix (or of
    points) worth ``SLICE_TERMS_PER_THREAD[dtype]`` pair terms per thread: about 50 ms with AVX2 on the
    2-core AMD EPYC the constants were measured on, idle (float32 ~2.4·10⁹ and float64 ~0.7·10⁹ PLUGIN
    pairs per second and thread), up to twice that when other work shares the cores. Each call copies the
    data once (O(n d), ~0.3 ms for 600 000 rows), and its thinner tiles run ~3 % slower (docs/benchmarks.md).
    """

    name = "native"
    sequential = False
    #: Pair terms per thread in one slice (see :mod:`pg_kde._slices`).
    SLICE_TERMS_PER_THREAD = {"float32": 1 << 27, "float64": 1 << 25}

    def __init__(self, isa: str | None = None, threads: int = 0, slice_terms: float | None = None):
        self._native, _ = _import_native()
        self.isa = isa or ""
        self.threads = threads
        self._slice_terms = slice_terms

    @staticmethod
    def unavailable_reason():
        native, error = _import_native()
        if native is None:
            return f"the native backend is not available: the compiled module pg_kde._native did not import ({error})"
        return None

    def _array(self, a, dtype):
        return np.ascontiguousarray(a, dtype=np.dtype(check_dtype(dtype)))

    def slice_terms(self, dtype) -> float:
        """Pair terms in one slice: ``slice_terms`` if given, else the per-thread budget times the threads
        the module will use."""
        if self._slice_terms is not None:
            return float(self._slice_terms)
        threads = self.threads if self.threads > 0 else self._native.default_threads()
        return float(self.SLICE_TERMS_PER_THREAD[check_dtype(dtype)] * max(1, threads))

    def _slices(self, n, terms_per_pair, dtype, interrupt):
        """Row ranges of the pair matrix, with the check before each."""
        for i0, i1 in pair_slices(n, terms_per_pair, self.slice_terms(dtype)):
            interrupt()
            yield i0, i1

    def plugin_pair_sum(self, x, g, order, dtype="float64", *, interrupt=None):
        x = self._array(x, dtype)
        args = (x, float(g), int(order), self.isa, self.threads, self.sequential)
        if interrupt is None:
            return self._native.plugin_pair_sum(*args)
        total = 0.0
        for i0, i1 in self._slices(x.shape[0], pair_terms("plugin"), dtype, interrupt):
            total += self._native.plugin_pair_sum(*args, i0, i1)
        return total

    def lscv_pair_sums(self, z, scales, w, derivative=False, dtype="float64", *, interrupt=None):
        z = self._array(z, dtype)
        scales = np.ascontiguousarray(scales, dtype=np.float64)
        args = (z, scales, float(w), bool(derivative), self.isa, self.threads, self.sequential)
        if interrupt is None:
            return self._native.lscv_pair_sums(*args)
        d = z.shape[1] if z.ndim == 2 else 1
        a_sum = np.zeros(scales.shape[0])
        d_sum = np.zeros(scales.shape[0]) if derivative else None
        terms = pair_terms("lscv", d, scales.shape[0], derivative)
        for i0, i1 in self._slices(z.shape[0], terms, dtype, interrupt):
            a_part, d_part = self._native.lscv_pair_sums(*args, i0, i1)
            a_sum += a_part
            if derivative:
                d_sum += d_part
        return a_sum, d_sum

    def lscv_moments(self, z, w, dtype="float64", *, interrupt=None):
        z = self._array(z, dtype)
        d = z.shape[1] if z.ndim == 2 else 1
        args = (z, float(w), self.isa, self.threads, self.sequential)
        if interrupt is None:
            a_sum, upper = self._native.lscv_moments(*args)
        else:
            a_sum, upper = 0.0, np.zeros(d * (d + 1) // 2)
            for i0, i1 in self._slices(z.shape[0], pair_terms("moments", d), dtype, interrupt):
                a_part, upper_part = self._native.lscv_moments(*args, i0, i1)
                a_sum += a_part
                upper += upper_part
        return a_sum, symmetric_from_upper(upper, d)

    def kde_sums(self, points, sample, dtype="float64", *, interrupt=None):
        points, sample = self._array(points, dtype), self._array(sample, dtype)
        if interrupt is None:
            return self._native.kde_sums(points, sample, self.isa, self.threads, self.sequential)
        # A point's sum does not depend on the other points: a range of points is a slice of the array.
        out = np.zeros(points.shape[0])
        d = sample.shape[1] if sample.ndim == 2 else 1
        for a, b in point_slices(points.shape[0], kde_terms(sample.shape[0], d), self.slice_terms(dtype)):
            interrupt()
            out[a:b] = self._native.kde_sums(points[a:b], sample, self.isa, self.threads, self.sequential)
        return out


class SequentialBackend(NativeBackend):
    """The paper's "Sequential" baseline: one thread, scalar C++, a plain loop over i<j with std::exp.
    Its slices are sized for its speed: ~0.15–0.19·10⁹ PLUGIN pairs per second in either precision."""

    name = "sequential"
    sequential = True
    SLICE_TERMS_PER_THREAD = {"float32": 1 << 23, "float64": 1 << 23}

    def __init__(self, slice_terms: float | None = None):
        super().__init__(isa="", threads=1, slice_terms=slice_terms)
