"""Bandwidth selectors for Gaussian kernel density estimates.

Selectors
---------
:func:`plugin`
    Two-stage direct plug-in for 1-D data (Wand & Jones 1995, §3.6.1; Andrzejewski et al., eq. 12–19).
:func:`plugin_cdf`
    Plug-in bandwidth for the kernel distribution function estimate (range counts), h ∝ n^{−1/3}.
:func:`lscv_h`
    Least-squares cross-validation over H = h²Σ̂ (data sphered by the sample covariance), grid search
    then a root of the analytic derivative.
:func:`lscv_H`
    Least-squares cross-validation over an unconstrained symmetric positive-definite H.
:func:`normal_reference`
    The normal-reference (rule-of-thumb) matrix.

Every selector takes ``backend=`` (see :func:`pg_kde.backends`) and ``dtype=`` (``"float64"`` or
``"float32"``: the working precision of the pair sums; sums are always accumulated in float64) and returns a
:class:`BandwidthResult`. The formulas, as implemented, are in ``docs/math.md``.

Every selector and objective also takes ``interrupt=``: a callable with no arguments (default None). When
given, every pair sum runs in slices of about 50 ms and ``interrupt()`` is called before each slice; an
exception it raises stops the selection and propagates unchanged (it is meant for the SQL layer: a check
that raises when PostgreSQL has a cancel request or a statement timeout pending). The result is the same up to the
order in which float64 partial sums are added (:mod:`pg_kde._slices`, docs/math.md §10).

References
----------
M. P. Wand and M. C. Jones, *Kernel Smoothing*, Chapman & Hall, 1995.
W. Andrzejewski, A. Gramacki, J. Gramacki, "Density estimations for approximate query processing on SIMD
architectures", arXiv:1505.01998, 2015.
T. Duong and M. L. Hazelton, "Cross-validation bandwidth matrices for multivariate kernel density
estimation", Scandinavian Journal of Statistics 32, 2005.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
from scipy.optimize import minimize, root

from ._backends import get_backend
from ._linalg import apply_inverse, covariance, log_det_chol, lower_inverse, whiten
from ._slices import Interrupt
from ._validate import as_data, bandwidth_matrix, check_dtype, check_spread, positive_array

__all__ = [
    "BandwidthResult",
    "LSCVBoundaryWarning",
    "METHODS",
    "check_method",
    "lscv_H",
    "lscv_H_objective",
    "lscv_h",
    "lscv_h_objective",
    "normal_reference",
    "plugin",
    "plugin_cdf",
    "select",
]

_SQRT_2PI = math.sqrt(2.0 * math.pi)
_SQRT_PI = math.sqrt(math.pi)


class LSCVBoundaryWarning(UserWarning):
    """The LSCV minimum lies on the edge of the search range: the answer is not a proper minimiser."""


@dataclass(frozen=True)
class BandwidthResult:
    """A selected bandwidth.

    Attributes
    ----------
    H : ndarray, shape (d, d)
        Bandwidth matrix in data units (squared units: for d = 1, H = [[h²]]).
    h : float or None
        The scalar the method chose: data units for ``plugin``; sphered units for ``lscv_h`` and
        ``normal_reference`` (H = h²Σ̂); None for ``lscv_H``, which chooses a full matrix.
    method, backend, dtype : str
        The selector, the backend that actually ran, and the working precision of the pair sums.
    n, d : int
        Rows and columns of the data.
    objective : float or None
        The LSCV criterion at H (eq. 24 / 32), in data units; None for non-LSCV methods.
    at_boundary : bool or None
        LSCV only: True when the minimum sat on the edge of the search range (see
        :class:`LSCVBoundaryWarning`).
    details : dict
        Method-specific diagnostics (pilot bandwidths, functional estimates, iterations).
    """

    H: np.ndarray
    h: Optional[float]
    method: str
    backend: str
    dtype: str
    n: int
    d: int
    objective: Optional[float] = None
    at_boundary: Optional[bool] = None
    details: dict = field(default_factory=dict, compare=False)

    def __repr__(self) -> str:
        h = "None" if self.h is None else f"{self.h:.6g}"
        extra = ""
        if self.objective is not None:
            extra = f", objective={self.objective:.6g}, at_boundary={self.at_boundary}"
        H = np.array2string(self.H, precision=6, separator=", ").replace("\n", "")
        return (
            f"BandwidthResult(method={self.method!r}, h={h}, H={H}, backend={self.backend!r}, "
            f"dtype={self.dtype!r}, n={self.n}, d={self.d}{extra})"
        )


# ---------------------------------------------------------------------------------------------------- plug-in
def _plugin_sigma(x: np.ndarray) -> float:
    """σ̂ = min(s, IQR/1.349) (paper eq. 12–13); s alone when the IQR is 0 (over half the rows tied)."""
    s = float(np.std(x, ddof=1))
    q75, q25 = np.percentile(x, [75.0, 25.0])
    iqr = float(q75 - q25)
    return min(s, iqr / 1.349) if iqr > 0 else s


def _psi(pair_sum: float, n: int, g: float, r: int) -> float:
    """Ψ̂_r(g) = [n K⁽ʳ⁾(0) + 2 Σ_{i<j} K⁽ʳ⁾((xᵢ−xⱼ)/g)] / (n² g^{r+1}); pair_sum lacks the 1/√(2π) of φ."""
    k0 = {2: -1.0, 4: 3.0, 6: -15.0}[r]  # K⁽ʳ⁾(0)√(2π)
    return (n * k0 + 2.0 * pair_sum) / (_SQRT_2PI * n * n * g ** (r + 1))


def _psi_estimate(be, z: np.ndarray, g: float, r: int, dt, interrupt: Interrupt) -> float:
    """Ψ̂_r(g) on z from the backend's pair sum; Ψ_r has the sign of (−1)^{r/2}, and an estimate of the
    other sign means the data are too degenerate for the plug-in selectors."""
    psi = _psi(be.plugin_pair_sum(z, g, r, dt, interrupt=interrupt), z.shape[0], g, r)
    negative = (r // 2) % 2 == 1
    if not (psi < 0 if negative else psi > 0):
        raise ValueError(
            f"the plug-in estimate of psi_{r} is {psi:.3g}, but it must be {'negative' if negative else 'positive'}; "
            "the data are too degenerate for the plug-in selector (use normal_reference)"
        )
    return psi


def _plugin_stages(x, backend: str, dtype, method: str, interrupt: Interrupt):
    """Checks, then the shared stages of the plug-in selectors on x/σ̂: (data, σ̂, backend, dtype, g1, Ψ̂6, g2, Ψ̂4)."""
    data = as_data(x, name="x")
    if data.shape[1] != 1:
        raise ValueError(
            f"{method} is a 1-D selector but x has {data.shape[1]} columns; use lscv_h or lscv_H for "
            "multivariate data"
        )
    dt = check_dtype(dtype)
    be = get_backend(backend)
    check_spread(data, name="x")
    x1 = data[:, 0]
    n = x1.shape[0]
    sigma = _plugin_sigma(x1)
    # Work on the standardised scale (σ̂ = 1): the selector is scale-equivariant, and unit-scale numbers
    # keep float32 pair sums accurate. Ψ₈ for a normal with σ = 1: 105 / (32 √π).
    z = (x1 - x1.mean()) / sigma
    psi8 = 105.0 / (32.0 * _SQRT_PI)
    g1 = (30.0 / (_SQRT_2PI * psi8 * n)) ** (1.0 / 9.0)  # (−2K⁽⁶⁾(0) / (μ₂ Ψ₈ n))^{1/9}
    psi6 = _psi_estimate(be, z, g1, 6, dt, interrupt)
    g2 = (6.0 / (_SQRT_2PI * -psi6 * n)) ** (1.0 / 7.0)  # (−2K⁽⁴⁾(0) / (μ₂ Ψ̂₆ n))^{1/7}
    psi4 = _psi_estimate(be, z, g2, 4, dt, interrupt)
    return z, n, sigma, be, dt, g1, psi6, g2, psi4


def plugin(x, *, backend: str = "auto", dtype="float64", interrupt: Interrupt = None) -> BandwidthResult:
    """Two-stage direct plug-in bandwidth for 1-D data.

    Estimates Ψ₆ with a normal-reference pilot, then Ψ₄ with the pilot that Ψ̂₆ implies, then
    h = [R(K) / (μ₂(K)² Ψ̂₄ n)]^{1/5}. Each stage is an exact O(n²) pair sum.

    Parameters
    ----------
    x : array_like, shape (n,) or (n, 1)
        Data; n >= 2, finite, not constant.
    backend : {"auto", "reference", "native", "sequential", "cuda"}
    dtype : {"float64", "float32"}
    interrupt : callable, optional
        Called with no arguments before each slice of the pair sums (see the module docstring); what it
        raises propagates.

    Returns
    -------
    BandwidthResult
        ``h`` in data units, ``H = [[h²]]``; ``details`` holds g1, g2, psi6, psi4.

    Examples
    --------
    >>> import numpy as np
    >>> from pg_kde import bandwidth
    >>> x = np.random.default_rng(0).standard_normal(1000)
    >>> r = bandwidth.plugin(x, backend="reference")
    >>> round(r.h, 3)
    0.263

    References
    ----------
    Wand & Jones (1995), §3.6.1 (h_DPI,2); Sheather & Jones (1991); Andrzejewski et al. (2015), eq. 12–19.
    """
    z, n, sigma, be, dt, g1, psi6, g2, psi4 = _plugin_stages(x, backend, dtype, "plugin", interrupt)
    h = sigma * (1.0 / (2.0 * _SQRT_PI * psi4 * n)) ** 0.2  # R(K) = 1/(2√π), μ₂(K) = 1
    return BandwidthResult(
        H=np.array([[h * h]]),
        h=h,
        method="plugin",
        backend=be.name,
        dtype=dt,
        n=n,
        d=1,
        details={"sigma": sigma, "g1": g1 * sigma, "g2": g2 * sigma, "psi6": psi6, "psi4": psi4},
    )


def plugin_cdf(x, *, backend: str = "auto", dtype="float64", interrupt: Interrupt = None) -> BandwidthResult:
    """Plug-in bandwidth for the kernel estimate of the distribution function F (1-D), for range counts.

    Range counts are differences of F̂, and the AMISE-optimal bandwidth for F̂(x) = n⁻¹ Σ 𝒦((x − Xᵢ)/h)
    is h_F = [ψ(K) / (μ₂(K)² R(f′) n)]^{1/3}, with ψ(K) = 2∫u K(u) 𝒦(u) du = 1/√π for the Gaussian and
    R(f′) = −Ψ₂. It shrinks as n^{−1/3}, faster than a density bandwidth (n^{−1/5}). Ψ₂ is estimated by a
    third plug-in stage after :func:`plugin`'s Ψ₆ and Ψ₄: g₃ = [−2K⁽²⁾(0) / (μ₂ Ψ̂₄ n)]^{1/5}.

    Parameters
    ----------
    x : array_like, shape (n,) or (n, 1)
    backend : {"auto", "reference", "native", "sequential", "cuda"}
    dtype : {"float64", "float32"}
    interrupt : callable, optional
        Called with no arguments before each slice of the pair sums (see the module docstring); what it
        raises propagates.

    Returns
    -------
    BandwidthResult
        ``h`` = h_F in data units; ``details`` holds the pilots and functional estimates.

    Examples
    --------
    >>> import numpy as np
    >>> from pg_kde import bandwidth
    >>> x = np.random.default_rng(0).standard_normal(1000)
    >>> r = bandwidth.plugin_cdf(x, backend="reference")
    >>> bool(r.h < bandwidth.plugin(x, backend="reference").h)
    True

    References
    ----------
    Azzalini (1981), "A note on the estimation of a distribution function and quantiles by a kernel method";
    Polansky & Baker (2000), "Multistage plug-in bandwidth selection for kernel distribution function
    estimates"; Wand & Jones (1995), §3.5.
    """
    z, n, sigma, be, dt, g1, psi6, g2, psi4 = _plugin_stages(x, backend, dtype, "plugin_cdf", interrupt)
    g3 = (2.0 / (_SQRT_2PI * psi4 * n)) ** 0.2  # (−2K⁽²⁾(0) / (μ₂ Ψ̂₄ n))^{1/5}, K⁽²⁾(0) = −1/√(2π)
    psi2 = _psi_estimate(be, z, g3, 2, dt, interrupt)
    h = sigma * (1.0 / (_SQRT_PI * -psi2 * n)) ** (1.0 / 3.0)
    return BandwidthResult(
        H=np.array([[h * h]]),
        h=h,
        method="plugin_cdf",
        backend=be.name,
        dtype=dt,
        n=n,
        d=1,
        details={"sigma": sigma, "g1": g1 * sigma, "g2": g2 * sigma, "g3": g3 * sigma, "psi6": psi6,
                 "psi4": psi4, "psi2": psi2},
    )


# ------------------------------------------------------------------------------------------- normal reference
def _nr_factor(n: int, d: int) -> float:
    """h for H = h²Σ: (4 / ((d + 2) n))^{1/(d+4)} (the paper's eq. 28 with its slip corrected)."""
    return (4.0 / ((d + 2.0) * n)) ** (1.0 / (d + 4.0))


def normal_reference(
    X, *, backend: str = "auto", dtype="float64", interrupt: Interrupt = None
) -> BandwidthResult:
    """Normal-reference bandwidth matrix H = (4/(d+2))^{2/(d+4)} n^{−2/(d+4)} Σ̂.

    Optimal (AMISE) when the data are Gaussian; oversmooths multimodal data. Needs no pair sums: the
    backend name is checked but the computation is a few NumPy operations (``backend`` reports
    ``"reference"``).

    Parameters
    ----------
    X : array_like, shape (n,) or (n, d)
    interrupt : callable, optional
        Called once, before the covariance (O(n d²), one slice).

    Returns
    -------
    BandwidthResult
        ``h`` in sphered units (H = h²Σ̂).

    Examples
    --------
    >>> import numpy as np
    >>> from pg_kde import bandwidth
    >>> x = np.random.default_rng(0).standard_normal(1000)
    >>> r = bandwidth.normal_reference(x)
    >>> round(r.h, 4)  # (4/(3n))^(1/5), sphered units: H = h² s²
    0.2661

    References
    ----------
    Wand & Jones (1995), eq. (4.16) and §4.7; Andrzejewski et al. (2015), eq. 28 and 37.
    """
    data = as_data(X)
    dt = check_dtype(dtype)
    get_backend(backend)
    if interrupt is not None:
        interrupt()
    n, d = data.shape
    _, sigma, _ = covariance(data)
    h = _nr_factor(n, d)
    return BandwidthResult(H=h * h * sigma, h=h, method="normal_reference", backend="reference", dtype=dt, n=n, d=d)


# ------------------------------------------------------------------------------------------------- LSCV common
def _lscv_w(d: int) -> float:
    """2K(u)/(K*K)(u) at u = 0 for the Gaussian: 2 (4π)^{d/2} / (2π)^{d/2} = 2^{1 + d/2}."""
    return 2.0 ** (1.0 + d / 2.0)


def _sphere(data: np.ndarray):
    """Centre and sphere by the sample covariance: Z = L⁻¹(X − x̄), Σ̂ = LLᵀ."""
    mean, sigma, chol = covariance(data)
    return whiten(data, mean, chol), sigma, chol


class _ScalarLSCV:
    """LSCV(h) for H = h²Σ̂ on sphered data Z, in data units:

    L(h) = a h^{−d} [2 n^{−2} A(h) + n^{−1}],  A(h) = Σ_{i<j} e(1 − w e),  e = exp(−Sᵢⱼ/(4h²)),
    L′(h) = −(d/h) L(h) + a h^{−d−3} n^{−2} D(h),  D(h) = Σ_{i<j} Sᵢⱼ e(1 − 2w e),
    with a = (4π)^{−d/2} |Σ̂|^{−1/2} and Sᵢⱼ = ‖zᵢ − zⱼ‖².
    """

    def __init__(self, z, log_det_sigma, backend, dtype, interrupt: Interrupt = None):
        self.z, self.backend, self.dtype, self.interrupt = z, backend, dtype, interrupt
        self.n, self.d = z.shape
        self.w = _lscv_w(self.d)
        self.a = (4.0 * math.pi) ** (-self.d / 2.0) * math.exp(-0.5 * log_det_sigma)
        self.passes = 0

    def _sums(self, hs: np.ndarray, derivative: bool):
        return self.backend.lscv_pair_sums(self.z, 1.0 / hs**2, self.w, derivative, self.dtype,
                                           interrupt=self.interrupt)

    def values(self, hs: np.ndarray) -> np.ndarray:
        self.passes += 1
        A, _ = self._sums(hs, False)
        return self.a * hs ** (-self.d) * (2.0 * A / self.n**2 + 1.0 / self.n)

    def values_and_slopes(self, hs: np.ndarray):
        """L and L′ at every h in ``hs``, in one pass over the pairs."""
        self.passes += 1
        A, D = self._sums(hs, True)
        values = self.a * hs ** (-self.d) * (2.0 * A / self.n**2 + 1.0 / self.n)
        return values, -self.d / hs * values + self.a * hs ** (-self.d - 3) * D / self.n**2

    def minimise(self, lo: float, hi: float, h: float, tol: float, max_passes: int = 12):
        """Root of L′ in (lo, hi) from h: safeguarded Newton steps.

        Each pass evaluates L′ at h and h(1 ± δ) together (one sweep over the pairs), which gives L″ by a
        central difference; a step that leaves the bracket, or a non-positive L″, falls back to bisection.
        Stops when the step is below ``tol``·h, or no longer halves (the rounding floor of L′), and returns
        that h (where L was evaluated) and L(h).
        """
        delta = 1e-4
        value = float("nan")
        last_step = np.inf
        for _ in range(max_passes):
            hs = np.array([h * (1.0 - delta), h, h * (1.0 + delta)])
            values, slopes = self.values_and_slopes(hs)
            value = float(values[1])
            for hh, slope in zip(hs, slopes):
                if slope < 0:
                    lo = max(lo, hh)
                elif slope > 0:
                    hi = min(hi, hh)
            curvature = (slopes[2] - slopes[0]) / (hs[2] - hs[0])
            step = -slopes[1] / curvature if curvature > 0 else np.inf
            # Converged, or at the rounding floor of L′: Newton steps no longer shrink.
            if abs(step) <= tol * h or abs(step) > 0.5 * last_step:
                break
            last_step = abs(step)
            h_next = h + step
            h = h_next if lo < h_next < hi else 0.5 * (lo + hi)
        return float(h), value


def _grid_offset(values: np.ndarray, k: int) -> float:
    """Where the criterion's minimum lies near grid point k, in grid steps (log h is evenly spaced).

    The minimum of the quartic through the five grid values around k (within ~1e-7 relative of the true
    minimiser on the default grid), or of the parabola through three where k is next to an end.
    """
    if 2 <= k <= len(values) - 3:
        steps = np.arange(-2.0, 3.0)
        coef = np.polyfit(steps, values[k - 2 : k + 3], 4)
        critical = np.roots(np.polyder(coef))
        inside = [r.real for r in critical if abs(r.imag) < 1e-12 and -1.0 < r.real < 1.0]
        if inside:
            return float(min(inside, key=lambda t: np.polyval(coef, t)))
    lm, l0, lp = values[k - 1], values[k], values[k + 1]
    return float(0.5 * (lm - lp) / (lm - 2.0 * l0 + lp))  # |offset| <= 1/2 since l0 is the least


def _ties(data: np.ndarray) -> int:
    return int(data.shape[0] - np.unique(data, axis=0).shape[0])


def _warn_boundary(method: str, where: str, data: np.ndarray, stacklevel: int = 3) -> None:
    ties = _ties(data)
    cause = (
        f"the data hold {ties} duplicated row(s) (rounded or integer values), which drive LSCV towards h -> 0"
        if ties and where == "lower"
        else "the criterion is still falling at the edge of the search range"
    )
    warnings.warn(
        f"{method}: the LSCV minimum lies at the {where} end of the search range, so the result is not a "
        f"proper minimiser; {cause}. Use plugin (1-D) or normal_reference instead, or remove the rounding.",
        LSCVBoundaryWarning,
        stacklevel=stacklevel,
    )


def lscv_h(
    X, *, backend: str = "auto", dtype="float64", grid: int = 150, interrupt: Interrupt = None
) -> BandwidthResult:
    """Least-squares cross-validation over H = h²Σ̂ (one scalar on data sphered by the sample covariance).

    ``grid`` values of h, spaced geometrically over [h₀/4, 4h₀] with h₀ the normal-reference value, are
    evaluated in one fused pass over the pairs; the best is then refined to the root of the analytic
    derivative L′(h) between its grid neighbours (safeguarded Newton steps, L″ by central differences of
    L′, three values of h per pass), so the answer is not limited to the grid.

    Parameters
    ----------
    X : array_like, shape (n,) or (n, d)
        n >= 2, finite, no constant column, columns not collinear.
    backend : {"auto", "reference", "native", "sequential", "cuda"}
    dtype : {"float64", "float32"}
    grid : int
        Number of grid values (>= 3).
    interrupt : callable, optional
        Called with no arguments before each slice of the pair sums (see the module docstring); what it
        raises propagates.

    Returns
    -------
    BandwidthResult
        ``h`` in sphered units, ``H = h²Σ̂``, ``objective`` = eq. (24) at h, ``at_boundary``.

    Warns
    -----
    LSCVBoundaryWarning
        When the minimum is at an end of the grid (typically tied or rounded data: LSCV falls without bound
        as h → 0). The result is then that end, flagged ``at_boundary=True``.

    Examples
    --------
    >>> import numpy as np
    >>> from pg_kde import bandwidth
    >>> X = np.random.default_rng(1).standard_normal((500, 2))
    >>> r = bandwidth.lscv_h(X, backend="reference")
    >>> r.at_boundary, r.H.shape
    (False, (2, 2))

    References
    ----------
    Wand & Jones (1995), §3.3 and §4.7; Andrzejewski et al. (2015), eq. 20–30.
    """
    data = as_data(X)
    dt = check_dtype(dtype)
    be = get_backend(backend)
    if int(grid) != grid or grid < 3:
        raise ValueError(f"grid must be an integer >= 3; got {grid!r}")
    n, d = data.shape
    z, sigma, chol = _sphere(data)
    crit = _ScalarLSCV(z, log_det_chol(chol), be, dt, interrupt)
    h0 = _nr_factor(n, d)
    hs = np.geomspace(h0 / 4.0, 4.0 * h0, int(grid))
    values = crit.values(hs)
    k = int(np.argmin(values))
    at_boundary = k in (0, len(hs) - 1)
    if at_boundary:
        h, objective = float(hs[k]), float(values[k])
        _warn_boundary("lscv_h", "lower" if k == 0 else "upper", data)
    else:
        tol = 1e-13 if dt == "float64" else 1e-7
        start = float(np.exp(np.log(hs[k]) + _grid_offset(values, k) * np.log(hs[1] / hs[0])))
        h, objective = crit.minimise(float(hs[k - 1]), float(hs[k + 1]), start, tol)
    return BandwidthResult(
        H=h * h * sigma,
        h=h,
        method="lscv_h",
        backend=be.name,
        dtype=dt,
        n=n,
        d=d,
        objective=objective,
        at_boundary=at_boundary,
        details={"h0": h0, "grid": hs, "grid_objective": values, "passes": crit.passes},
    )


def lscv_h_objective(X, h, *, backend: str = "auto", dtype="float64", interrupt: Interrupt = None):
    """The LSCV criterion of eq. (24) for H = h²Σ̂, in data units.

    L(h) = h^{−d} [2 n^{−2} Σ_{i<j} T((Xᵢ − Xⱼ)/h) + n^{−1} R(K)], T = K*K − 2K, K the N(0, Σ̂) density,
    R(K) = (4π)^{−d/2} |Σ̂|^{−1/2}. Equal to ``lscv_H_objective(X, h**2 * cov(X))``.

    Parameters
    ----------
    X : array_like, shape (n,) or (n, d)
    h : float or array_like of float
        Sphered-unit bandwidth(s); an array is evaluated in one pass over the pairs.
    interrupt : callable, optional
        Called with no arguments before each slice of the pair sums (see the module docstring); what it
        raises propagates.

    Returns
    -------
    float, or ndarray of the shape of ``h``.
    """
    data = as_data(X)
    dt = check_dtype(dtype)
    be = get_backend(backend)
    hs = positive_array(h, name="h")
    z, _, chol = _sphere(data)
    values = _ScalarLSCV(z, log_det_chol(chol), be, dt, interrupt).values(hs)
    return float(values[0]) if np.ndim(h) == 0 else values.reshape(np.shape(h))


class _MatrixLSCV:
    """LSCV(H) of eq. (32) on data Z: (4π)^{−d/2}|H|^{−1/2} [2 n^{−2} Σ_{i<j} (e − w e²) + n^{−1}],
    e = exp(−¼ (zᵢ−zⱼ)ᵀH⁻¹(zᵢ−zⱼ)), computed on zL⁻ᵀ (H = LLᵀ) so each pair costs O(d).

    Its gradient (docs/math.md): ∇_H LSCV = c |H|^{−1/2} L⁻ᵀ G L⁻¹ with c = (4π)^{−d/2},
    G = −½ (2A/n² + 1/n) I + M/(2n²), M = Σ_{i<j} e(1 − 2we) u uᵀ, u = L⁻¹(zᵢ − zⱼ); hence
    ∂LSCV/∂L = 2c |H|^{−1/2} L⁻ᵀ G.
    """

    def __init__(self, z, backend, dtype, interrupt: Interrupt = None):
        self.z, self.backend, self.dtype, self.interrupt = z, backend, dtype, interrupt
        self.n, self.d = z.shape
        self.w = _lscv_w(self.d)
        self.evaluations = 0

    def _norm(self, chol):
        return (4.0 * math.pi) ** (-self.d / 2.0) * math.exp(-0.5 * log_det_chol(chol))

    def value_chol(self, chol: np.ndarray) -> float:
        self.evaluations += 1
        y = apply_inverse(self.z, lower_inverse(chol))
        A, _ = self.backend.lscv_pair_sums(y, np.array([1.0]), self.w, False, self.dtype,
                                           interrupt=self.interrupt)
        return self._norm(chol) * (2.0 * A[0] / self.n**2 + 1.0 / self.n)

    def value_and_gradient_chol(self, chol: np.ndarray):
        """LSCV(LLᵀ) and ∂LSCV/∂L (a full d×d matrix; only its lower triangle is meaningful)."""
        self.evaluations += 1
        n, d = self.n, self.d
        inverse = lower_inverse(chol)
        y = apply_inverse(self.z, inverse)
        A, M = self.backend.lscv_moments(y, self.w, self.dtype, interrupt=self.interrupt)
        base = 2.0 * A / n**2 + 1.0 / n
        norm = self._norm(chol)
        G = -0.5 * base * np.eye(d) + M / (2.0 * n**2)
        return norm * base, 2.0 * norm * np.einsum("ki,kj->ij", inverse, G)


def lscv_H_objective(X, H, *, backend: str = "auto", dtype="float64", interrupt: Interrupt = None) -> float:
    """The LSCV criterion of eq. (32) for a full bandwidth matrix H, in data units.

    LSCV(H) = 2 n^{−2} Σ_{i<j} T_H(Xᵢ − Xⱼ) + n^{−1} (4π)^{−d/2} |H|^{−1/2}, with
    T_H = K_H * K_H − 2K_H = (4π)^{−d/2}|H|^{−1/2} e − 2 (2π)^{−d/2}|H|^{−1/2} e², e = exp(−¼ vᵀH⁻¹v).

    Parameters
    ----------
    X : array_like, shape (n,) or (n, d)
    H : array_like, shape (d, d)
        Symmetric positive definite (for d = 1 a scalar h² is accepted).
    interrupt : callable, optional
        Called with no arguments before each slice of the pair sums (see the module docstring); what it
        raises propagates.
    """
    data = as_data(X)
    dt = check_dtype(dtype)
    be = get_backend(backend)
    chol = bandwidth_matrix(H, data.shape[1])
    return _MatrixLSCV(np.ascontiguousarray(data - data.mean(axis=0)), be, dt, interrupt).value_chol(chol)


def _theta_to_chol(theta: np.ndarray, d: int, scale: float) -> np.ndarray:
    """L = scale · (diag(exp θ[:d]) + strictly-lower(θ[d:])): positive definite LLᵀ for every θ."""
    chol = np.zeros((d, d))
    chol[np.diag_indices(d)] = np.exp(theta[:d])
    chol[np.tril_indices(d, -1)] = theta[d:]
    return scale * chol


def _polish_stationary(objective_and_gradient, theta, value, dtype):
    """Solve ∇LSCV(θ) = 0 from Nelder–Mead's θ with MINPACK's hybrid Powell method (scipy ``root``).

    Root finding on the gradient, not minimisation: near the optimum the criterion changes by ~1e-15 of
    its size, below its own rounding, so line searches on values stall there, while the gradient is
    still resolved. The root is kept only if the criterion did not get worse (beyond rounding) and the
    gradient shrank.
    """
    _, grad0 = objective_and_gradient(theta)
    # MINPACK differences the gradient to build its Jacobian, with a step of sqrt(eps) relative; the
    # float64 default would be lost in float32 rounding of the gradient, so float32 steps by ~1e-4.
    options = {"xtol": 1e-13} if dtype == "float64" else {"xtol": 1e-10, "eps": 1e-8}
    sol = root(lambda t: objective_and_gradient(t)[1], theta, method="hybr", options=options)
    new_value, new_grad = objective_and_gradient(sol.x)
    grad_max0, grad_max = float(np.max(np.abs(grad0))), float(np.max(np.abs(new_grad)))
    # "Not worse" up to the criterion's own rounding in this precision.
    slack = (1e-12 if dtype == "float64" else 1e-6) * abs(value)
    if np.isfinite(new_value) and new_value <= value + slack and grad_max <= grad_max0:
        theta, value = sol.x, float(new_value)
    else:
        grad_max = grad_max0
    # Gradient noise floor: its terms cancel to ~1e-15 (float64) / ~1e-6 (float32) of |LSCV|.
    limit = (1e-9 if dtype == "float64" else 1e-5) * abs(value)
    return theta, value, {"converged": grad_max <= limit, "gradient_max": grad_max, "message": sol.message,
                          "gradient_evaluations": int(sol.nfev)}


def _chol_gradient_to_theta(grad_chol: np.ndarray, chol: np.ndarray, scale: float) -> np.ndarray:
    """Chain rule through _theta_to_chol: ∂L_kk/∂θ_k = L_kk, ∂L_ab/∂θ_(ab) = scale."""
    d = chol.shape[0]
    return np.concatenate([np.diag(grad_chol) * np.diag(chol), grad_chol[np.tril_indices(d, -1)] * scale])


# log|H| may range over [log|H_NR| − ln 1e10, log|H_NR| + ln 1e10], as in R's ks.
_LOG_DET_GUARD = math.log(1e10)


def lscv_H(
    X,
    *,
    backend: str = "auto",
    dtype="float64",
    max_evaluations: Optional[int] = None,
    interrupt: Interrupt = None,
) -> BandwidthResult:
    """Least-squares cross-validation over unconstrained symmetric positive-definite bandwidth matrices.

    Minimises eq. (32) on sphered data over H = LLᵀ, L lower triangular with a log-parametrised diagonal,
    so every iterate is positive definite. The search starts from whichever of the normal-reference matrix
    and the :func:`lscv_h` optimum scores lower; Nelder–Mead (SciPy, derivative-free) explores from there,
    with log|H| kept within 10^{±10} of the normal-reference determinant (LSCV_H has spurious minima as
    |H| → 0); a root solve of the analytic gradient then converges to the stationary point, so the answer does
    not depend on the path Nelder–Mead took (or on the backend's rounding). The polish solves ∇LSCV = 0
    (MINPACK hybrid Powell) with the analytic gradient of docs/math.md.

    Parameters
    ----------
    X : array_like, shape (n, d)
    backend : {"auto", "reference", "native", "sequential", "cuda"}
    dtype : {"float64", "float32"}
    max_evaluations : int, optional
        Criterion evaluations allowed to Nelder–Mead (default 200 + 100·p for p = d(d+1)/2 parameters).
    interrupt : callable, optional
        Called with no arguments before each slice of the pair sums (see the module docstring); what it
        raises propagates.

    Returns
    -------
    BandwidthResult
        ``H`` in data units, ``h`` None, ``objective`` = eq. (32) at H, ``at_boundary`` True when
        log|H| ends within a decade of the determinant guard, or when there is no stationary point and the
        criterion still falls as H shrinks.

    Warns
    -----
    LSCVBoundaryWarning
        When the minimum is on the lower or upper edge (typically tied or rounded data).
    RuntimeWarning
        When the gradient polish stops with a gradient clearly above its rounding floor.

    Examples
    --------
    >>> import numpy as np
    >>> from pg_kde import bandwidth
    >>> rng = np.random.default_rng(2)
    >>> X = rng.multivariate_normal([0, 0], [[1, 0.8], [0.8, 1]], size=400)
    >>> r = bandwidth.lscv_H(X, backend="reference")
    >>> bool(r.H[0, 1] > 0)
    True

    References
    ----------
    Duong & Hazelton (2005); Wand & Jones (1995), §4.7; Andrzejewski et al. (2015), eq. 31–37.
    """
    data = as_data(X)
    dt = check_dtype(dtype)
    be = get_backend(backend)
    n, d = data.shape
    z, sigma, chol_sigma = _sphere(data)
    crit = _MatrixLSCV(z, be, dt, interrupt)
    p = d * (d + 1) // 2
    if max_evaluations is None:
        max_evaluations = 200 + 100 * p

    # Starting points in sphered units: c·I for the normal reference and for the lscv_h optimum.
    c_nr = _nr_factor(n, d) ** 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LSCVBoundaryWarning)
        scalar = lscv_h(z, backend=be.name, dtype=dt, interrupt=interrupt)
    starts = [c_nr, scalar.h**2]
    start_values = [crit.value_chol(math.sqrt(c) * np.eye(d)) for c in starts]
    scale = math.sqrt(starts[int(np.argmin(start_values))])
    log_det_nr = d * math.log(c_nr)

    def inside_guard(theta):
        return abs(2.0 * (d * math.log(scale) + float(np.sum(theta[:d]))) - log_det_nr) <= _LOG_DET_GUARD

    def objective(theta):
        return crit.value_chol(_theta_to_chol(theta, d, scale)) if inside_guard(theta) else np.inf

    def objective_and_gradient(theta):
        if not inside_guard(theta):
            return np.inf, np.zeros_like(theta)
        chol = _theta_to_chol(theta, d, scale)
        value, grad_chol = crit.value_and_gradient_chol(chol)
        return value, _chol_gradient_to_theta(grad_chol, chol, scale)

    theta0 = np.zeros(p)
    f0 = min(start_values)
    nm = minimize(
        objective,
        theta0,
        method="Nelder-Mead",
        options={
            "initial_simplex": np.vstack([theta0, theta0 + 0.25 * np.eye(p)]),
            "xatol": 1e-6,
            "fatol": 1e-12 * abs(f0),
            "maxfev": max_evaluations,
        },
    )
    theta, value = nm.x, float(nm.fun)
    polish = {"converged": False, "gradient_max": None}
    still_shrinking = False
    if inside_guard(theta):
        theta, value, polish = _polish_stationary(objective_and_gradient, theta, value, dt)
        # No stationary point, and the criterion still falls when H shrinks (|H| / e^d): the minimum is on
        # the lower edge, as with tied data, not an optimiser failure.
        still_shrinking = not polish["converged"] and objective(theta - np.r_[np.full(d, 0.5), np.zeros(p - d)]) < value
    chol_h = _theta_to_chol(theta, d, scale)
    H_z = chol_h @ chol_h.T
    log_det = log_det_chol(chol_h)
    at_boundary = still_shrinking or abs(log_det - log_det_nr) > _LOG_DET_GUARD - math.log(10.0)
    if at_boundary:
        _warn_boundary("lscv_H", "lower" if still_shrinking or log_det < log_det_nr else "upper", data, stacklevel=2)
    elif not polish["converged"]:
        warnings.warn(
            f"lscv_H: the gradient polish stopped with max |gradient| = {polish['gradient_max']:.3g} "
            f"({polish['message']}); the result is the best matrix found",
            RuntimeWarning,
            stacklevel=2,
        )
    H = chol_sigma @ H_z @ chol_sigma.T
    H = 0.5 * (H + H.T)
    return BandwidthResult(
        H=H,
        h=None,
        method="lscv_H",
        backend=be.name,
        dtype=dt,
        n=n,
        d=d,
        objective=value * math.exp(-0.5 * log_det_chol(chol_sigma)),  # LSCV_X(H) = |Σ̂|^{−1/2} LSCV_Z(H_z)
        at_boundary=at_boundary,
        details={
            "evaluations": crit.evaluations,
            "nelder_mead_evaluations": int(nm.nfev),
            "polish": polish,
            "start_scale": scale,
        },
    )


#: Selectors by name; :func:`select` and the SQL layer check method names against this registry.
METHODS = {
    "plugin": plugin,
    "plugin_cdf": plugin_cdf,
    "lscv_h": lscv_h,
    "lscv_H": lscv_H,
    "normal_reference": normal_reference,
}


def check_method(method: str) -> str:
    """``method`` if it is ``"auto"`` or a name in :data:`METHODS`, else ``ValueError`` listing them."""
    if method != "auto" and method not in METHODS:
        raise ValueError(f"unknown bandwidth method {method!r}; valid methods: auto, {', '.join(METHODS)}")
    return method


def select(X, method: str = "auto", **kwargs) -> BandwidthResult:
    """Run the selector called ``method``; ``"auto"`` is ``plugin`` for 1-D data and ``lscv_H`` otherwise.

    ``kwargs`` go to the selector: ``backend``, ``dtype`` and ``interrupt`` are accepted by every one.
    Raises ``ValueError`` listing the valid names for an unknown method.
    """
    if check_method(method) == "auto":
        method = "plugin" if np.ndim(X) == 1 or np.shape(X)[1] == 1 else "lscv_H"
    return METHODS[method](X, **kwargs)
