"""The small linear algebra around the pair sums: covariance, Cholesky factors, whitening.

These run on the caller's thread, not through BLAS on purpose: a threaded BLAS call leaves its worker
threads spinning for a while after it returns, and on a small machine they then take the cores the
native backend's threads are about to use (measured here: LSCV_h at n = 1024, d = 16 went from 11 ms to
17–23 ms). The O(n d²) passes over the rows (the covariance's sums, whitening) are the native module's
plain loops (``_native.centred_gram``, ``_native.transform_rows``, ``_native.lower_inverse``); NumPy's
``einsum`` took 0.34 ms for them at n = 1024, d = 16 on the 2-core VM, as long as a CUDA pass there.
"""

from __future__ import annotations

import math

import numpy as np

from . import _native
from ._validate import check_spread

#: Magnitudes whose squares (and sums of n of them) stay inside float64: 2^500 ≈ 3e150 and 2^-480 ≈ 3e-145.
_LARGEST = 2.0**500
_SMALLEST = 2.0**-480


def _f64(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float64)


def covariance(X: np.ndarray, *, name: str = "X"):
    """Mean, sample covariance (ddof = 1) and its lower Cholesky factor.

    Raises ``ValueError`` if a column is constant or the columns are (nearly) collinear.
    """
    check_spread(X, name=name)
    top = float(np.max(np.abs(X)))
    if top > _LARGEST:
        raise ValueError(
            f"{name} holds a value of magnitude {top:.3g}: its squares overflow float64; rescale {name} "
            "(bandwidths are scale-equivariant: H(cX) = c²H(X)). The 1-D plug-in selectors accept far outliers"
        )
    n, d = X.shape
    X = _f64(X)
    mean = X.mean(axis=0)
    sigma = _native.centred_gram(X, mean) / (n - 1)
    scale = np.sqrt(np.diag(sigma))
    if not (scale > _SMALLEST).all():
        col = int(np.flatnonzero(~(scale > _SMALLEST))[0])
        raise ValueError(
            f"column {col} of {name} spreads over only {float(np.ptp(X[:, col])):.3g}: its squared deviations "
            f"underflow float64; rescale {name} (bandwidths are scale-equivariant: H(cX) = c²H(X))"
        )
    corr = sigma / np.outer(scale, scale)
    smallest = float(np.linalg.eigvalsh(corr).min())
    if smallest < 1e-10 * d:
        raise ValueError(
            f"the columns of {name} are collinear: the sample covariance is singular (smallest eigenvalue of "
            f"the correlation matrix {smallest:.3g}); drop or combine dependent columns"
        )
    from scipy.linalg import cholesky  # imported when used: a refresh's first call imports less

    return mean, sigma, cholesky(sigma, lower=True)


def lower_inverse(chol: np.ndarray) -> np.ndarray:
    """L⁻¹ for a lower-triangular L by forward substitution (``_native.lower_inverse``)."""
    return _native.lower_inverse(_f64(chol))


def symmetric_from_upper(upper, d: int) -> np.ndarray:
    """The symmetric d×d matrix whose upper triangle, row by row (``np.triu_indices`` order), is ``upper``."""
    m = np.zeros((d, d))
    m[np.triu_indices(d)] = upper
    return m + np.triu(m, 1).T


def apply_inverse(X: np.ndarray, inverse: np.ndarray, mean=None) -> np.ndarray:
    """Rows M(x − mean) (mean None: M x) as a C-contiguous (n, d) float64 array, for M = L⁻¹ from
    :func:`lower_inverse`; the centring is done row by row in the native loop, not as a copy of X."""
    X = _f64(X)
    return _native.transform_rows(X, np.zeros(X.shape[1]) if mean is None else _f64(mean), _f64(inverse))


def whiten(X: np.ndarray, mean: np.ndarray, chol: np.ndarray) -> np.ndarray:
    """Rows L⁻¹(x − mean) as a C-contiguous (n, d) float64 array, where chol = L is lower triangular."""
    return apply_inverse(X, lower_inverse(chol), mean)


def times_exp(values, log_factor: float):
    """``values`` · e^log_factor, where e^log_factor alone may leave float64's range and the products need not
    (a criterion in data units from the sphered data's, |Σ̂|^{−1/2} at a column scale of 2⁻⁴⁷⁰; a density's
    norm for a tiny H): the product taken in logarithms there, ±inf or ±0 only where it leaves the range
    itself, 0 where a value is 0. A float for a float, an array for an array."""
    if -700.0 < log_factor < 700.0:
        return values * math.exp(log_factor)
    v = np.asarray(values, dtype=np.float64)
    with np.errstate(divide="ignore", over="ignore", under="ignore"):
        out = np.sign(v) * np.exp(np.log(np.abs(v)) + log_factor)
    return float(out) if np.ndim(values) == 0 else out


def log_det_chol(chol: np.ndarray) -> float:
    """log |LLᵀ| from the Cholesky factor L."""
    return 2.0 * float(np.sum(np.log(np.diag(chol))))
