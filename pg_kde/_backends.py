"""Backends: who computes the O(n²) pair sums behind the selectors and KDE evaluation.

One registry, :data:`BACKENDS`. Each backend offers the same four primitives on data that the
caller has already centred and transformed (sphered, or multiplied by L⁻¹ where H = LLᵀ) in float64:

``plugin_pair_sum(x, g, order, dtype)``
    Σ_{i<j} p_r(u²) exp(−u²/2), u = (xᵢ − xⱼ)/g, where K⁽ʳ⁾(u) = p_r(u²) φ(u), r = 2, 4 or 6.
``lscv_pair_sums(z, scales, w, derivative, dtype)``
    for each scale s: A = Σ_{i<j} e(1 − w e) and, if wanted, D = Σ_{i<j} S e(1 − 2w e), with
    S = ‖zᵢ − zⱼ‖² and e = exp(−S s / 4).
``lscv_moments(z, w, dtype)``
    the LSCV_H value and gradient sums at scale 1: A = Σ_{i<j} e(1 − w e) and the symmetric matrix
    M = Σ_{i<j} e(1 − 2w e) u uᵀ, with u = zᵢ − zⱼ and e = exp(−‖u‖²/4).
``kde_sums(points, sample, dtype)``
    for each point p: Σⱼ exp(−‖p − xⱼ‖² / 2).

Every primitive also takes ``interrupt=`` (a callable with no arguments, or None): when given, the sum runs
in slices of about 50 ms (row ranges of the pair matrix, or ranges of points; :mod:`pg_kde._slices`) and
``interrupt()`` is called before each slice; what it raises propagates unchanged. Each backend sizes its
slices with its own ``slice_terms`` budget. Without it, nothing is sliced.

``reference`` is the oracle: plain NumPy in float64, chunked so memory stays bounded; it ignores
``dtype`` (always float64). ``native`` is the C++ SIMD module. ``sequential`` is the naive
single-threaded scalar C++ loop, the baseline the benchmarks compare against. ``cuda`` runs CUDA
kernels through CuPy (:mod:`pg_kde._cuda`).

``backend="auto"`` takes the first usable of :data:`AUTO_ORDER`; when that is cuda and the GPU runs out
of memory, it warns (:class:`BackendFallbackWarning`) and finishes on the next usable backend, and the
backend's ``name`` (which the selectors report) becomes that one's.
"""

from __future__ import annotations

import os
import warnings

import numpy as np

from ._cuda import CudaBackend
from ._errors import BackendFallbackWarning, BackendUnavailableError, DeviceOutOfMemoryError
from ._linalg import symmetric_from_upper
from ._slices import kde_terms, pair_slices, pair_terms, point_slices, recording
from ._validate import check_dtype

__all__ = [
    "AUTO_ORDER",
    "BACKENDS",
    "BackendFallbackWarning",
    "BackendUnavailableError",
    "DeviceOutOfMemoryError",
    "backend_names",
    "get_backend",
]

# Largest temporary the reference backend creates, in float64 elements (16 MiB): about 50 ms of NumPy work
# per block here (2-core AMD EPYC), which is also its slice when an interrupt check is given.
_REFERENCE_BLOCK = 1 << 21


def _row_blocks(n_rows: int, cost_per_row: float, interrupt=None, terms_per_row: float = 0.0):
    """Row blocks whose temporaries hold about _REFERENCE_BLOCK elements. With an interrupt check, blocks
    are also cut to about _REFERENCE_BLOCK pair terms (``terms_per_row``: several LSCV scales cost several
    passes over one temporary) and the check runs before each."""
    cost = max(cost_per_row, terms_per_row) if interrupt is not None else cost_per_row
    step = max(1, int(_REFERENCE_BLOCK // max(cost, 1)))
    for a in range(0, n_rows, step):
        if interrupt is not None:
            interrupt()
        yield a, min(n_rows, a + step)


class ReferenceBackend:
    """NumPy float64, chunked: slow, simple, the oracle every fast backend is tested against. Its row
    blocks are its slices (see :func:`_row_blocks`)."""

    name = "reference"

    @staticmethod
    def unavailable_reason():
        return None

    def plugin_pair_sum(self, x, g, order, dtype="float64", *, interrupt=None):
        x = np.asarray(x, dtype=np.float64)
        n = x.shape[0]
        total = 0.0
        for a, b in _row_blocks(n, n, interrupt):
            u = (x[a:b, None] - x[None, a:]) / g  # rows i in [a, b), columns j in [a, n)
            u2 = u * u
            if order == 2:
                poly = u2 - 1.0
            elif order == 4:
                poly = (u2 - 6.0) * u2 + 3.0
            else:
                poly = ((u2 - 15.0) * u2 + 45.0) * u2 - 15.0
            total += np.triu(poly * np.exp(-0.5 * u2), k=1).sum()  # keep j > i
        return float(total)

    def lscv_pair_sums(self, z, scales, w, derivative=False, dtype="float64", *, interrupt=None):
        z = np.asarray(z, dtype=np.float64)
        z = z.reshape(z.shape[0], -1)
        n, d = z.shape
        scales = np.asarray(scales, dtype=np.float64)
        a_sum = np.zeros(scales.shape[0])
        d_sum = np.zeros(scales.shape[0]) if derivative else None
        terms = n * pair_terms("lscv", d, scales.shape[0], derivative)
        for a, b in _row_blocks(n, n * d, interrupt, terms):
            diff = z[a:b, None, :] - z[None, a:, :]
            s = np.einsum("ijk,ijk->ij", diff, diff)[np.triu(np.ones((b - a, n - a), dtype=bool), k=1)]
            for m, scale in enumerate(scales):
                e = np.exp(-s * (scale / 4.0))
                a_sum[m] += np.sum(e * (1.0 - w * e))
                if derivative:
                    d_sum[m] += np.sum(s * e * (1.0 - 2.0 * w * e))
        return a_sum, d_sum

    def lscv_moments(self, z, w, dtype="float64", *, interrupt=None):
        z = np.asarray(z, dtype=np.float64)
        z = z.reshape(z.shape[0], -1)
        n, d = z.shape
        a_sum, m_sum = 0.0, np.zeros((d, d))
        for a, b in _row_blocks(n, n * d, interrupt, n * pair_terms("moments", d)):
            diff = z[a:b, None, :] - z[None, a:, :]
            u = diff[np.triu(np.ones((b - a, n - a), dtype=bool), k=1)]  # one row per pair i<j
            e = np.exp(-0.25 * np.einsum("pk,pk->p", u, u))
            a_sum += np.sum(e * (1.0 - w * e))
            m_sum += np.einsum("p,pa,pb->ab", e * (1.0 - 2.0 * w * e), u, u)
        return float(a_sum), m_sum

    def kde_sums(self, points, sample, dtype="float64", *, interrupt=None):
        points = np.asarray(points, dtype=np.float64)
        sample = np.asarray(sample, dtype=np.float64)
        points = points.reshape(points.shape[0], -1)
        sample = sample.reshape(sample.shape[0], -1)
        out = np.zeros(points.shape[0])
        terms = kde_terms(sample.shape[0], sample.shape[1])
        for a, b in _row_blocks(points.shape[0], sample.shape[0] * sample.shape[1], interrupt, terms):
            diff = points[a:b, None, :] - sample[None, :, :]
            out[a:b] = np.exp(-0.5 * np.einsum("ijk,ijk->ij", diff, diff)).sum(axis=1)
        return out


def _import_native():
    try:
        from . import _native
    except ImportError as exc:  # pragma: no cover - only without a compiled module
        return None, str(exc)
    return _native, None


class NativeBackend:
    """The C++ module pg_kde._native: SIMD (AVX-512, AVX2 or portable), threads over tiles.

    ``isa`` picks an instruction set (default: ``PG_KDE_NATIVE_ISA`` if set, else the best the CPU has);
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
        self.isa = isa if isa is not None else os.environ.get("PG_KDE_NATIVE_ISA", "")
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


BACKENDS = {
    "reference": ReferenceBackend,
    "native": NativeBackend,
    "sequential": SequentialBackend,
    "cuda": CudaBackend,
}

#: Order in which ``backend="auto"`` tries backends.
AUTO_ORDER = ("cuda", "native", "reference")


def backend_names():
    return ("auto",) + tuple(BACKENDS)


class FallbackBackend:
    """A backend that runs on ``primary`` and, the first time the GPU runs out of memory there, warns and
    runs that call and every later one on ``fallback()``. ``name`` is the backend that ran last. An
    exception raised by the caller's interrupt check is never a reason to fall back: it propagates."""

    def __init__(self, primary, fallback):
        self._active, self._fallback = primary, fallback

    @property
    def name(self):
        return self._active.name

    def _call(self, method, *args, interrupt=None):
        check = recording(interrupt)
        try:
            return getattr(self._active, method)(*args, interrupt=check)
        except DeviceOutOfMemoryError as exc:
            if self._fallback is None or (check is not None and check.is_source_of(exc)):
                raise
            failed, self._active, self._fallback = self._active.name, self._fallback(), None
            warnings.warn(
                f"backend='auto': the {failed} backend failed ({exc}); the computation continues on the "
                f"{self._active.name} backend, and its result names that backend",
                BackendFallbackWarning,
                stacklevel=4,
            )
            return getattr(self._active, method)(*args, interrupt=check)

    def plugin_pair_sum(self, *args, interrupt=None):
        return self._call("plugin_pair_sum", *args, interrupt=interrupt)

    def lscv_pair_sums(self, *args, interrupt=None):
        return self._call("lscv_pair_sums", *args, interrupt=interrupt)

    def lscv_moments(self, *args, interrupt=None):
        return self._call("lscv_moments", *args, interrupt=interrupt)

    def kde_sums(self, *args, interrupt=None):
        return self._call("kde_sums", *args, interrupt=interrupt)


def _first_usable(names):
    for candidate in names:
        if BACKENDS[candidate].unavailable_reason() is None:
            return candidate
    raise BackendUnavailableError("no backend is available")  # pragma: no cover - reference always is


def get_backend(name="auto"):
    """Return a backend instance for ``name`` (``"auto"`` picks the first usable of :data:`AUTO_ORDER`).

    Raises ``ValueError`` for an unknown name (listing the valid ones) and
    :class:`BackendUnavailableError` for a known backend that cannot run here.
    """
    if not isinstance(name, str) or name not in backend_names():
        raise ValueError(f"unknown backend {name!r}; valid backends: {', '.join(backend_names())}")
    if name == "auto":
        first = _first_usable(AUTO_ORDER)
        rest = AUTO_ORDER[AUTO_ORDER.index(first) + 1 :]
        if first != "cuda":
            return BACKENDS[first]()
        return FallbackBackend(BACKENDS[first](), lambda: BACKENDS[_first_usable(rest)]())
    cls = BACKENDS[name]
    reason = cls.unavailable_reason()
    if reason is not None:
        raise BackendUnavailableError(reason)
    return cls()
