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
kernels through CuPy (:mod:`pg_kde.backend.cuda`, with its kernels beside it).

Selectors, :func:`pg_kde.kde.evaluate` and the synopsis build take ``backend=`` as a name or as a backend
object; :func:`get_backend` turns a name into an object and passes options on: ``isa`` and ``threads`` for
native, ``reduction``, ``block``, ``pair_tile`` and ``buffer`` for cuda (no environment variable changes
what a backend does). A backend object passes through unchanged, so a selector that calls another (lscv_H
starts from lscv_h) hands on the very object it was given, fallback wrapper and options included.

``backend="auto"`` takes the first usable of :data:`AUTO_ORDER`; when that is cuda and the GPU runs out
of memory, it warns (:class:`BackendFallbackWarning`) and finishes on the next usable backend, and the
backend's ``name`` (which the selectors report) becomes that one's.
"""

from __future__ import annotations

import warnings
from typing import Callable, Optional, Protocol, Tuple, Union, runtime_checkable

import numpy as np

from .._errors import BackendFallbackWarning, BackendUnavailableError, DeviceOutOfMemoryError
from .._slices import recording
from .cuda import CudaBackend
from .native import NativeBackend, SequentialBackend
from .reference import ReferenceBackend

__all__ = [
    "AUTO_ORDER",
    "BACKENDS",
    "Backend",
    "CudaBackend",
    "NativeBackend",
    "ReferenceBackend",
    "SequentialBackend",
    "BackendFallbackWarning",
    "BackendUnavailableError",
    "DeviceOutOfMemoryError",
    "backend_names",
    "get_backend",
]

Interrupt = Optional[Callable[[], None]]


@runtime_checkable
class Backend(Protocol):
    """What every backend offers: a ``name`` and the four primitives of the module docstring. The data are
    float64 arrays the caller has centred and transformed; ``dtype`` is the working precision of the terms
    (sums are float64); ``interrupt`` is called before each slice of about 50 ms when given."""

    name: str

    def plugin_pair_sum(self, x: np.ndarray, g: float, order: int, dtype: str = "float64", *,
                        interrupt: Interrupt = None) -> float: ...

    def lscv_pair_sums(self, z: np.ndarray, scales: np.ndarray, w: float, derivative: bool = False,
                       dtype: str = "float64", *, interrupt: Interrupt = None
                       ) -> Tuple[np.ndarray, Optional[np.ndarray]]: ...

    def lscv_moments(self, z: np.ndarray, w: float, dtype: str = "float64", *,
                     interrupt: Interrupt = None) -> Tuple[float, np.ndarray]: ...

    def kde_sums(self, points: np.ndarray, sample: np.ndarray, dtype: str = "float64", *,
                 interrupt: Interrupt = None) -> np.ndarray: ...


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


def get_backend(name: Union[str, Backend] = "auto", **options) -> Backend:
    """Return a backend instance for ``name`` (``"auto"`` picks the first usable of :data:`AUTO_ORDER`),
    made with ``options`` (e.g. ``isa="avx2"`` for native, ``reduction="partials"`` for cuda). A backend
    object is returned as it is (options are then refused: it was made already).

    Raises ``ValueError`` for an unknown name (listing the valid ones) or options the backend does not
    take, and :class:`BackendUnavailableError` for a known backend that cannot run here.
    """
    if not isinstance(name, str) and isinstance(name, Backend):
        if options:
            raise ValueError(f"backend options {sorted(options)} need a backend name, not an object")
        return name
    if not isinstance(name, str) or name not in backend_names():
        raise ValueError(f"unknown backend {name!r}; valid backends: {', '.join(backend_names())}")
    if name == "auto":
        if options:
            raise ValueError(f"backend options {sorted(options)} need a backend name, not 'auto'")
        first = _first_usable(AUTO_ORDER)
        rest = AUTO_ORDER[AUTO_ORDER.index(first) + 1 :]
        if first != "cuda":
            return BACKENDS[first]()
        return FallbackBackend(BACKENDS[first](), lambda: BACKENDS[_first_usable(rest)]())
    cls = BACKENDS[name]
    reason = cls.unavailable_reason()
    if reason is not None:
        raise BackendUnavailableError(reason)
    try:
        return cls(**options)
    except TypeError as exc:
        raise ValueError(f"the {name} backend does not take these options: {exc}") from None
