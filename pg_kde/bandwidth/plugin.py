"""The plug-in family (1-D): the paper's two-stage direct plug-in for the density, and a third stage for
the distribution function (range counts)."""

from __future__ import annotations

import math

import numpy as np

from .._slices import Interrupt
from .._validate import as_data, check_dtype, check_spread
from ..backend import get_backend
from .result import BandwidthResult

_SQRT_2PI = math.sqrt(2.0 * math.pi)
_SQRT_PI = math.sqrt(math.pi)


#: The scale σ̂ the plug-in stages standardise by. "sd": the sample standard deviation, √V̂ with V̂ the
#: unbiased (n − 1) variance (the paper's eq. 12–13, the default); "minim": min(s, IQR/1.349), the robust
#: scale of KernSmooth's dpik and R's ks::hpi (s alone when the IQR is 0, over half the rows tied).
SCALES = ("sd", "minim")


def _plugin_sigma(x: np.ndarray, scale: str = "sd") -> float:
    """σ̂ by ``scale`` (see :data:`SCALES`; :func:`_plugin_stages` has checked it)."""
    s = float(np.std(x, ddof=1))
    if scale == "sd":
        return s
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


def _plugin_stages(x, backend, dtype, method: str, interrupt: Interrupt, scale: str):
    """Checks, then the shared stages of the plug-in selectors on x/σ̂: (data, σ̂, backend, dtype, g1, Ψ̂6, g2, Ψ̂4)."""
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; valid scales: {', '.join(SCALES)}")
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
    sigma = _plugin_sigma(x1, scale)
    # Work on the standardised scale (σ̂ = 1): the selector is scale-equivariant, and unit-scale numbers
    # keep float32 pair sums accurate. Ψ₈ for a normal with σ = 1: 105 / (32 √π).
    z = (x1 - x1.mean()) / sigma
    psi8 = 105.0 / (32.0 * _SQRT_PI)
    g1 = (30.0 / (_SQRT_2PI * psi8 * n)) ** (1.0 / 9.0)  # (−2K⁽⁶⁾(0) / (μ₂ Ψ₈ n))^{1/9}
    psi6 = _psi_estimate(be, z, g1, 6, dt, interrupt)
    g2 = (6.0 / (_SQRT_2PI * -psi6 * n)) ** (1.0 / 7.0)  # (−2K⁽⁴⁾(0) / (μ₂ Ψ̂₆ n))^{1/7}
    psi4 = _psi_estimate(be, z, g2, 4, dt, interrupt)
    return z, n, sigma, be, dt, g1, psi6, g2, psi4


def plugin(x, *, backend="auto", dtype="float64", scale: str = "sd", interrupt: Interrupt = None) -> BandwidthResult:
    """Two-stage direct plug-in bandwidth for 1-D data.

    Estimates Ψ₆ with a normal-reference pilot, then Ψ₄ with the pilot that Ψ̂₆ implies, then
    h = [R(K) / (μ₂(K)² Ψ̂₄ n)]^{1/5}. Each stage is an exact O(n²) pair sum.

    Parameters
    ----------
    x : array_like, shape (n,) or (n, 1)
        Data; n >= 2, finite, not constant.
    backend : {"auto", "reference", "native", "sequential", "cuda"}
    dtype : {"float64", "float32"}
    scale : {"sd", "minim"}
        The scale σ̂ the stages standardise by: "sd" the sample standard deviation (the paper's eq. 12–13),
        "minim" min(s, IQR/1.349) (KernSmooth's and R ks's convention; robust to outliers). See
        :data:`SCALES`.
    interrupt : callable, optional
        Called with no arguments before each slice of the pair sums (see the module docstring); what it
        raises propagates.

    Returns
    -------
    BandwidthResult
        ``h`` in data units, ``H = [[h²]]``; ``details`` holds the scale used, σ̂, g1, g2, psi6, psi4.

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
    Wand & Jones (1995), §3.6.1 (h_DPI,2); Sheather & Jones (1991); Andrzejewski et al. (2015), eq. 12–19 (σ̂ of eq. 12–13 is ``scale="sd"``).
    """
    z, n, sigma, be, dt, g1, psi6, g2, psi4 = _plugin_stages(x, backend, dtype, "plugin", interrupt, scale)
    h = sigma * (1.0 / (2.0 * _SQRT_PI * psi4 * n)) ** 0.2  # R(K) = 1/(2√π), μ₂(K) = 1
    return BandwidthResult(
        H=np.array([[h * h]]),
        h=h,
        method="plugin",
        backend=be.name,
        dtype=dt,
        n=n,
        d=1,
        details={"scale": scale, "sigma": sigma, "g1": g1 * sigma, "g2": g2 * sigma, "psi6": psi6, "psi4": psi4},
    )


def plugin_cdf(x, *, backend="auto", dtype="float64", scale: str = "sd", interrupt: Interrupt = None) -> BandwidthResult:
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
    scale : {"sd", "minim"}
        The scale σ̂ the stages standardise by: "sd" the sample standard deviation (the paper's eq. 12–13),
        "minim" min(s, IQR/1.349) (KernSmooth's and R ks's convention; robust to outliers). See
        :data:`SCALES`.
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
    z, n, sigma, be, dt, g1, psi6, g2, psi4 = _plugin_stages(x, backend, dtype, "plugin_cdf", interrupt, scale)
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
        details={"scale": scale, "sigma": sigma, "g1": g1 * sigma, "g2": g2 * sigma, "g3": g3 * sigma, "psi6": psi6,
                 "psi4": psi4, "psi2": psi2},
    )
