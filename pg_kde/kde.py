"""Gaussian kernel density estimates evaluated at many points.

References
----------
M. P. Wand and M. C. Jones, *Kernel Smoothing*, 1995, eq. (4.1).
"""

from __future__ import annotations

import math

import numpy as np

from .backend import get_backend
from ._linalg import apply_inverse, log_det_chol, lower_inverse, times_exp
from ._slices import Interrupt
from ._validate import as_data, bandwidth_matrix, check_dtype, positive_scalar
from .bandwidth import BandwidthResult

__all__ = ["evaluate"]


def _bandwidth_chol(bandwidth, d: int) -> np.ndarray:
    if isinstance(bandwidth, BandwidthResult):
        if bandwidth.d != d:
            raise ValueError(f"the bandwidth was chosen for d = {bandwidth.d} but the sample has d = {d}")
        return bandwidth_matrix(bandwidth.H, d, name="bandwidth.H")
    if np.ndim(bandwidth) == 0:
        h = positive_scalar(bandwidth if not isinstance(bandwidth, np.generic) else bandwidth.item(), name="bandwidth")
        return h * np.eye(d)
    return bandwidth_matrix(bandwidth, d, name="bandwidth")


def evaluate(
    points, sample, bandwidth, *, backend: str = "auto", dtype="float64", interrupt: Interrupt = None
) -> np.ndarray:
    """f̂(p) = n⁻¹ Σⱼ K_H(p − xⱼ) at every point p, with K_H the N(0, H) density.

    Parameters
    ----------
    points : array_like, shape (m,) or (m, d)
    sample : array_like, shape (n,) or (n, d)
    bandwidth : float, array_like of shape (d, d), or BandwidthResult
        A scalar h means H = h²I (for d = 1, the usual bandwidth h); a matrix is H itself (squared units).
    backend : {"auto", "reference", "native", "sequential", "cuda"}
    dtype : {"float64", "float32"}
    interrupt : callable, optional
        Called with no arguments before each slice of about 50 ms (a range of points); what it raises
        propagates (see :mod:`pg_kde._slices`). Each point's value is the same with or without it.

    Returns
    -------
    ndarray, shape (m,)

    Examples
    --------
    >>> import numpy as np
    >>> from pg_kde import kde
    >>> f = kde.evaluate([0.0], [0.0], 1.0, backend="reference")
    >>> round(float(f[0]), 6)  # the N(0, 1) density at 0
    0.398942
    """
    xs = as_data(sample, name="sample", min_rows=1)
    ps = as_data(points, name="points", min_rows=0)
    d = xs.shape[1]
    if ps.shape[1] != d:
        raise ValueError(f"points have {ps.shape[1]} column(s) but the sample has {d}")
    dt = check_dtype(dtype)
    be = get_backend(backend)
    chol = _bandwidth_chol(bandwidth, d)
    if ps.shape[0] == 0:
        return np.zeros(0)
    # Centre on the sample mean and multiply by L⁻¹ (H = LLᵀ) in float64: the kernel then sees unit-scale
    # numbers and ‖L⁻¹(p − x)‖² is the quadratic form (p − x)ᵀH⁻¹(p − x).
    mean, inverse = xs.mean(axis=0), lower_inverse(chol)
    z_points, z_sample = apply_inverse(ps, inverse, mean), apply_inverse(xs, inverse, mean)
    sums = be.kde_sums(z_points, z_sample, dt, interrupt=interrupt)
    log_norm = -0.5 * d * math.log(2.0 * math.pi) - 0.5 * log_det_chol(chol) - math.log(xs.shape[0])
    return times_exp(sums, log_norm)  # (the norm alone can leave float64's range for a tiny or huge H)
