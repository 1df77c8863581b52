"""The small linear algebra around the pair sums: covariance, Cholesky factors, whitening.

These run on the caller's thread with NumPy's own loops (``einsum`` without ``optimize``), not
through BLAS on purpose: a threaded BLAS call leaves its worker threads spinning for a while after it
returns, and on a small machine they then take the cores the native backend's threads are about to
use (measured here: LSCV_h at n = 1024, d = 16 went from 11 ms to 17–23 ms). The work is O(n d²),
small next to the O(n² d) pair sums.
"""

from __future__ import annotations

import numpy as np

from ._validate import check_spread

#: Magnitudes whose squares (and sums of n of them) stay inside float64: 2^500 ≈ 3e150 and 2^-480 ≈ 3e-145.
_LARGEST = 2.0**500
_SMALLEST = 2.0**-480


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
    mean = X.mean(axis=0)
    centred = X - mean
    sigma = np.einsum("ni,nj->ij", centred, centred) / (n - 1)
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
    """L⁻¹ for a lower-triangular L by forward substitution (SciPy's solve_triangular would use BLAS)."""
    d = chol.shape[0]
    inverse = np.zeros((d, d))
    for i in range(d):  # row i of L M = I: L[i,i] M[i,j] = −Σ_{k<i} L[i,k] M[k,j] for j < i
        inverse[i, :i] = -np.einsum("k,kj->j", chol[i, :i], inverse[:i, :i]) / chol[i, i]
        inverse[i, i] = 1.0 / chol[i, i]
    return inverse


def symmetric_from_upper(upper, d: int) -> np.ndarray:
    """The symmetric d×d matrix whose upper triangle, row by row (``np.triu_indices`` order), is ``upper``."""
    m = np.zeros((d, d))
    m[np.triu_indices(d)] = upper
    return m + np.triu(m, 1).T


def apply_inverse(X: np.ndarray, inverse: np.ndarray) -> np.ndarray:
    """Rows M x as a C-contiguous (n, d) float64 array, for M = L⁻¹ from :func:`lower_inverse`."""
    return np.ascontiguousarray(np.einsum("nd,kd->nk", X, inverse))


def whiten(X: np.ndarray, mean: np.ndarray, chol: np.ndarray) -> np.ndarray:
    """Rows L⁻¹(x − mean) as a C-contiguous (n, d) float64 array, where chol = L is lower triangular."""
    return apply_inverse(X - mean, lower_inverse(chol))


def log_det_chol(chol: np.ndarray) -> float:
    """log |LLᵀ| from the Cholesky factor L."""
    return 2.0 * float(np.sum(np.log(np.diag(chol))))
