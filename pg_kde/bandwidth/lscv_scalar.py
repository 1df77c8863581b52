"""LSCV_h: least-squares cross-validation over one scalar, H = h²Σ̂ (data sphered by the sample covariance)."""

from __future__ import annotations

import math

import numpy as np

from .._linalg import covariance, log_det_chol, times_exp, whiten
from .._slices import Interrupt
from .._validate import as_data, check_dtype, positive_array
from ..backend import get_backend
from .reference_rule import _nr_factor
from .result import BandwidthResult, _ties, _warn_boundary

#: How many times the grid may go on past an end of [h0/4, 4h0], a factor 16 each (see lscv_h).
EXTENSIONS = 2


def _lscv_w(d: int) -> float:
    """2K(u)/(K*K)(u) at u = 0 for the Gaussian: 2 (4π)^{d/2} / (2π)^{d/2} = 2^{1 + d/2}."""
    return 2.0 ** (1.0 + d / 2.0)


def _sphere(data: np.ndarray):
    """Centre and sphere by the sample covariance: Z = L⁻¹(X − x̄), Σ̂ = LLᵀ."""
    mean, sigma, chol = covariance(data)
    return whiten(data, mean, chol), sigma, chol


class _ScalarLSCV:
    """LSCV(h) for H = h²Σ̂ on sphered data Z, in the sphered data's units (|Σ̂|^{1/2} times the data's):

    L(h) = a h^{−d} [2 n^{−2} A(h) + n^{−1}],  A(h) = Σ_{i<j} e(1 − w e),  e = exp(−Sᵢⱼ/(4h²)),
    L′(h) = −(d/h) L(h) + a h^{−d−3} n^{−2} D(h),  D(h) = Σ_{i<j} Sᵢⱼ e(1 − 2w e),
    with a = (4π)^{−d/2} and Sᵢⱼ = ‖zᵢ − zⱼ‖². The search runs on these, which do not depend on the data's
    scale; :meth:`in_data_units` multiplies by |Σ̂|^{−1/2}, which can leave float64's range on its own (a
    column scale of 2⁴⁹⁵ or 2⁻⁴⁷⁰ in d = 3) where the criterion in data units need not.
    """

    def __init__(self, z, log_det_sigma, backend, dtype, interrupt: Interrupt = None):
        self.z, self.backend, self.dtype, self.interrupt = z, backend, dtype, interrupt
        self.n, self.d = z.shape
        self.w = _lscv_w(self.d)
        self.a = (4.0 * math.pi) ** (-self.d / 2.0)
        self.log_det_sigma = log_det_sigma
        self.passes = 0

    def in_data_units(self, values):
        """L in data units: ``values`` · |Σ̂|^{−1/2} (see :func:`pg_kde._linalg.times_exp`)."""
        return times_exp(values, -0.5 * self.log_det_sigma)

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


def lscv_h(
    X, *, backend: str = "auto", dtype="float64", grid: int = 150, interrupt: Interrupt = None
) -> BandwidthResult:
    """Least-squares cross-validation over H = h²Σ̂ (one scalar on data sphered by the sample covariance).

    ``grid`` values of h, spaced geometrically over [h₀/4, 4h₀] with h₀ the normal-reference value, are
    evaluated in one fused pass over the pairs; when the best is an end, the grid goes on past it with the
    same spacing, a factor 16 a pass, up to twice each way (h₀/1024 to 1024h₀; not below h₀/4 on data with
    duplicated rows, where LSCV falls without bound as h → 0); the best is then refined to the root of the analytic
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
        When the minimum is at an end of the (extended) grid (typically tied or rounded data: LSCV falls
        without bound as h → 0). The result is then that end, flagged ``at_boundary=True``.

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
    # A minimum on an end of [h0/4, 4h0] may lie beyond it (skewed or heavy-tailed data): the grid goes on
    # with the same spacing, a factor 16 a pass, at most EXTENSIONS times each way. Not downwards on data
    # with duplicated rows, where LSCV falls without bound as h -> 0 and the lower end is the answer to flag.
    ratio = hs[1] / hs[0]
    steps = int(np.ceil(np.log(16.0) / np.log(ratio)))
    tied = None  # whether rows repeat: asked only when the minimum is the lower end (sorting n rows costs)
    for _ in range(EXTENSIONS):
        if k == 0 and tied is None:
            tied = _ties(data) > 0
        if k == 0 and not tied:
            more = hs[0] * ratio ** -np.arange(steps, 0, -1.0)
            hs, values = np.concatenate([more, hs]), np.concatenate([crit.values(more), values])
        elif k == len(hs) - 1:
            more = hs[-1] * ratio ** np.arange(1.0, steps + 1)
            hs, values = np.concatenate([hs, more]), np.concatenate([values, crit.values(more)])
        else:
            break
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
        objective=crit.in_data_units(objective),
        at_boundary=at_boundary,
        details={"h0": h0, "grid": hs, "grid_objective": crit.in_data_units(values), "passes": crit.passes},
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
    crit = _ScalarLSCV(z, log_det_chol(chol), be, dt, interrupt)
    values = crit.in_data_units(crit.values(hs))
    return float(values[0]) if np.ndim(h) == 0 else values.reshape(np.shape(h))
