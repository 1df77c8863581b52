"""LSCV_H: least-squares cross-validation over unconstrained symmetric positive-definite matrices."""

from __future__ import annotations

import math
import warnings
from typing import Optional

import numpy as np

from .._linalg import apply_inverse, log_det_chol, lower_inverse, times_exp
from .._slices import Interrupt
from .._validate import as_data, bandwidth_matrix, check_dtype
from ..backend import get_backend
from .lscv_scalar import _lscv_w, _sphere, lscv_h
from .reference_rule import _nr_factor
from .result import BandwidthResult, LSCVBoundaryWarning, _warn_boundary


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

    def _log_norm(self, chol) -> float:
        """log of (4π)^{−d/2} |H|^{−1/2}, H = LLᵀ (the norm itself can leave float64's range: times_exp)."""
        return -0.5 * self.d * math.log(4.0 * math.pi) - 0.5 * log_det_chol(chol)

    def value_chol(self, chol: np.ndarray) -> float:
        self.evaluations += 1
        y = apply_inverse(self.z, lower_inverse(chol))
        A, _ = self.backend.lscv_pair_sums(y, np.array([1.0]), self.w, False, self.dtype,
                                           interrupt=self.interrupt)
        return times_exp(2.0 * A[0] / self.n**2 + 1.0 / self.n, self._log_norm(chol))

    def value_and_gradient_chol(self, chol: np.ndarray):
        """LSCV(LLᵀ) and ∂LSCV/∂L (a full d×d matrix; only its lower triangle is meaningful)."""
        self.evaluations += 1
        n, d = self.n, self.d
        inverse = lower_inverse(chol)
        y = apply_inverse(self.z, inverse)
        A, M = self.backend.lscv_moments(y, self.w, self.dtype, interrupt=self.interrupt)
        base = 2.0 * A / n**2 + 1.0 / n
        log_norm = self._log_norm(chol)
        G = -0.5 * base * np.eye(d) + M / (2.0 * n**2)
        return times_exp(base, log_norm), times_exp(2.0 * np.einsum("ki,kj->ij", inverse, G), log_norm)


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
    """Solve ∇LSCV(θ) = 0 from Nelder–Mead's θ with MINPACK: the hybrid Powell method (scipy ``root``,
    ``hybr``), then Levenberg–Marquardt (``lm``) from the same θ where Powell's did not converge.

    Root finding on the gradient, not minimisation: near the optimum the criterion changes by ~1e-15 of
    its size, below its own rounding, so line searches on values stall there, while the gradient is
    still resolved. A root is kept only if the criterion did not get worse (beyond rounding) and the
    gradient shrank. Powell's method can stall far from the root where Nelder–Mead stopped early ("not
    making good progress": on 400 correlated normal rows in 5-D its end point had a gradient of 1e-4 and a
    criterion 2.6% above the minimum that Levenberg–Marquardt then reached, to a gradient of 1e-18).
    """
    _, grad0 = objective_and_gradient(theta)
    grad_max0 = float(np.max(np.abs(grad0)))
    # MINPACK differences the gradient to build its Jacobian, with a step of sqrt(eps) relative; the
    # float64 default would be lost in float32 rounding of the gradient, so float32 steps by ~1e-4.
    options = {"xtol": 1e-13} if dtype == "float64" else {"xtol": 1e-10, "eps": 1e-8}
    from scipy.optimize import root  # imported when used: scipy.optimize costs ~0.3 s to import

    # "Not worse" up to the criterion's own rounding in this precision; the gradient's noise floor: its terms
    # cancel to ~1e-15 (float64) / ~1e-6 (float32) of |LSCV|.
    slack = (1e-12 if dtype == "float64" else 1e-6) * abs(value)
    limit = (1e-9 if dtype == "float64" else 1e-5) * abs(value)
    best, best_value, grad_max, messages, evaluations = theta, value, grad_max0, [], 0
    for method in ("hybr", "lm"):  # (both take xtol and eps, the difference step)
        sol = root(lambda t: objective_and_gradient(t)[1], theta, method=method, options=options)
        new_value, new_grad = objective_and_gradient(sol.x)
        new_max = float(np.max(np.abs(new_grad)))
        messages.append(f"{method}: {sol.message.strip()}")
        evaluations += int(sol.nfev)
        if np.isfinite(new_value) and new_value <= value + slack and new_max <= grad_max0 and (
                new_max <= limit or new_max < grad_max):
            best, best_value, grad_max = sol.x, float(new_value), new_max
        if grad_max <= limit:
            break
    return best, best_value, {"converged": grad_max <= limit, "gradient_max": grad_max,
                              "message": "; ".join(messages), "gradient_evaluations": evaluations}


def _chol_gradient_to_theta(grad_chol: np.ndarray, chol: np.ndarray, scale: float) -> np.ndarray:
    """Chain rule through _theta_to_chol: ∂L_kk/∂θ_k = L_kk, ∂L_ab/∂θ_(ab) = scale."""
    d = chol.shape[0]
    return np.concatenate([np.diag(grad_chol) * np.diag(chol), grad_chol[np.tril_indices(d, -1)] * scale])


# log|H| may range over [log|H_NR| − ln 1e10, log|H_NR| + ln 1e10], as in R's ks.
_LOG_DET_GUARD = math.log(1e10)
#: How far the collapse check shrinks H: a decade, uniformly and along the smallest eigendirection.
_COLLAPSE_STEP = 0.1


def _chol_of_factor(factor: np.ndarray) -> np.ndarray:
    """The lower-triangular L with LLᵀ = FFᵀ, from a QR of Fᵀ (a Cholesky of a nearly singular FFᵀ fails)."""
    lower = np.linalg.qr(factor.T, mode="r").T
    return lower * np.where(np.diag(lower) < 0.0, -1.0, 1.0)  # column signs: a positive diagonal


def _collapse_steps(chol: np.ndarray):
    """H = LLᵀ shrunk by a decade towards singular: uniformly (H/10), and along its smallest eigendirection
    only (λ_min/10, the other eigenpairs kept), each as a lower-triangular factor. The eigenpairs come from
    the SVD of L (H = U S² Uᵀ), which keeps λ_min accurate where H is nearly singular."""
    u, s, _ = np.linalg.svd(chol)
    shrunk = s.copy()
    shrunk[-1] *= math.sqrt(_COLLAPSE_STEP)
    return chol * math.sqrt(_COLLAPSE_STEP), _chol_of_factor(u * shrunk)


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
        criterion still falls when H shrinks by a decade, uniformly or along its smallest eigendirection
        (LSCV collapsing towards a singular H, as on tied data; docs/math.md §5).

    Warns
    -----
    LSCVBoundaryWarning
        When the minimum is on the lower or upper edge (typically tied or rounded data); the message gives
        the number of duplicated rows and what to use instead.
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
        scalar = lscv_h(z, backend=be, dtype=dt, interrupt=interrupt)
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
    from scipy.optimize import minimize  # imported when used (see above)

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
    if inside_guard(theta):
        theta, value, polish = _polish_stationary(objective_and_gradient, theta, value, dt)
    chol_h = _theta_to_chol(theta, d, scale)
    # Collapse check: no stationary point, and the criterion still falls when H shrinks by a decade towards
    # singular, uniformly or along its smallest eigendirection. Duplicated rows make LSCV unbounded below
    # as H becomes singular; Nelder–Mead may stop anywhere on the way down (its evaluations run out, or it
    # collapses H along one direction while log|H| stays far from the guard), so the end point is tested
    # for descent rather than for its determinant. A proper minimum rises both ways (docs/math.md §5).
    collapse_values = []
    if not polish["converged"]:
        collapse_values = [crit.value_chol(step) for step in _collapse_steps(chol_h)]
    slack = (1e-9 if dt == "float64" else 1e-5) * abs(value)
    collapsing = any(np.isfinite(v) and v < value - slack for v in collapse_values)
    H_z = chol_h @ chol_h.T
    log_det = log_det_chol(chol_h)
    at_boundary = collapsing or abs(log_det - log_det_nr) > _LOG_DET_GUARD - math.log(10.0)
    if at_boundary:
        where = "lower" if collapsing or log_det < log_det_nr else "upper"
        _warn_boundary("lscv_H", where, data, stacklevel=2)
    elif not polish["converged"]:
        warnings.warn(
            f"lscv_H: the gradient polish stopped with max |gradient| = {polish['gradient_max']:.3g} "
            f"({polish['message']}); the result is the best matrix found",
            RuntimeWarning,
            stacklevel=2,
        )
    H = chol_sigma @ H_z @ chol_sigma.T
    H = 0.5 * (H + H.T)
    to_data = -0.5 * log_det_chol(chol_sigma)  # LSCV_X(H) = |Σ̂|^{−1/2} LSCV_Z(H_z), in logarithms (times_exp)
    return BandwidthResult(
        H=H,
        h=None,
        method="lscv_H",
        backend=be.name,
        dtype=dt,
        n=n,
        d=d,
        objective=times_exp(value, to_data),
        at_boundary=at_boundary,
        details={
            "evaluations": crit.evaluations,
            "nelder_mead_evaluations": int(nm.nfev),
            "polish": polish,
            "start_scale": scale,
            # LSCV (data units) at H shrunk by a decade uniformly and along its smallest eigendirection; empty
            # when the polish converged (the collapse check only runs without a stationary point).
            "collapse_values": [times_exp(v, to_data) for v in collapse_values],
        },
    )
