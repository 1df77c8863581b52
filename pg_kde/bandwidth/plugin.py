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


def _power_of_two_above(x: np.ndarray) -> float:
    """2^k near max |x| (1 for zeros; at most 2^1023, so quotients stay below 2): dividing by it is exact,
    and squares of the quotients neither overflow (values near 1e308) nor underflow (values near 1e-300)."""
    top = float(np.max(np.abs(x)))
    return math.ldexp(1.0, min(math.frexp(top)[1], 1023)) if top > 0 else 1.0


def _plugin_sigma(x: np.ndarray, scale: str = "sd") -> float:
    """σ̂ by ``scale`` (see :data:`SCALES`; :func:`_plugin_stages` has checked it), computed on x / 2^k so
    that it neither overflows nor underflows, whatever the values' magnitude."""
    unit = _power_of_two_above(x)
    y = x / unit
    s = float(np.std(y, ddof=1)) * unit
    if scale == "sd":
        return s
    q75, q25 = np.percentile(y, [75.0, 25.0])
    iqr = float(q75 - q25) * unit
    return min(s, iqr / 1.349) if iqr > 0 else s


#: Pair distances of at least REACH pilot bandwidths add nothing to a stage's pair sum: every kernel
#: derivative used (order ≤ 6) is below float64's smallest number there (|u|⁶ e^{−u²/2} at u = 40).
REACH = 40.0


class _Standardised:
    """The data on the σ̂ scale for the pair sums of each stage.

    Where sorted neighbours lie more than REACH pilot bandwidths apart (a far outlier: 1e300 among values
    near 1, or values near 1e-300 beside a 1), the gap is shortened to REACH bandwidths: no pair term
    changes (each across the gap was and stays 0), and the standardised values stay small enough for
    float32 and for exact differences near the bulk, whose median is put at 0. Elsewhere the values are
    (x − x̄) / σ̂, as the paper's eq. 12–13 standardise them."""

    def __init__(self, x: np.ndarray, sigma: float):
        self._x, self._sigma = x, sigma
        order = np.sort(x)
        with np.errstate(over="ignore"):  # a difference past float8's range is a gap past any reach
            self._gaps = np.diff(order) / sigma
        self._plain = None

    def at(self, g: float) -> np.ndarray:
        """The standardised values for a stage with pilot bandwidth g (σ̂ units)."""
        reach = REACH * g
        if not (self._gaps > reach).any():
            if self._plain is None:
                unit = _power_of_two_above(self._x)
                self._plain = (self._x - float(np.mean(self._x / unit)) * unit) / self._sigma
            return self._plain
        z = np.concatenate([[0.0], np.cumsum(np.minimum(self._gaps, reach))])
        return z - z[len(z) // 2]


def _psi(pair_sum: float, n: int, g: float, r: int) -> float:
    """Ψ̂_r(g) = [n K⁽ʳ⁾(0) + 2 Σ_{i<j} K⁽ʳ⁾((xᵢ−xⱼ)/g)] / (n² g^{r+1}); pair_sum lacks the 1/√(2π) of φ."""
    k0 = {2: -1.0, 4: 3.0, 6: -15.0}[r]  # K⁽ʳ⁾(0)√(2π)
    return (n * k0 + 2.0 * pair_sum) / (_SQRT_2PI * n * n * g ** (r + 1))


def _psi_estimate(be, data: _Standardised, g: float, r: int, dt, interrupt: Interrupt) -> float:
    """Ψ̂_r(g) on the standardised data from the backend's pair sum; Ψ_r has the sign of (−1)^{r/2}, and an estimate of the
    other sign means the data are too degenerate for the plug-in selectors."""
    z = data.at(g)
    psi = _psi(be.plugin_pair_sum(z, g, r, dt, interrupt=interrupt), z.shape[0], g, r)
    negative = (r // 2) % 2 == 1
    if not (psi < 0 if negative else psi > 0):
        raise ValueError(
            f"the plug-in estimate of psi_{r} is {psi:.3g}, but it must be {'negative' if negative else 'positive'}; "
            "the data are too degenerate for the plug-in selector (use normal_reference)"
        )
    return psi


def _checked_bandwidth(h: float, sigma: float, method: str) -> float:
    """h, or a clear error where h or H = h² leaves float64's range (σ̂ of values near 1e300 times a large
    factor; values spread over 1e-300)."""
    if not (math.isfinite(h * h) and h * h >= np.finfo(np.float64).tiny):  # (a subnormal H has lost its digits)
        raise ValueError(
            f"{method}'s bandwidth is {h:.3g} (σ̂ = {sigma:.3g}): H = h² leaves float64's range; rescale the data "
            "(bandwidths are scale-equivariant), or use scale='minim', which far outliers do not inflate"
        )
    return h


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
    z = _Standardised(x1, sigma)
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
    # R(K) = 1/(2√π), μ₂(K) = 1
    h = _checked_bandwidth(sigma * (1.0 / (2.0 * _SQRT_PI * psi4 * n)) ** 0.2, sigma, "plugin")
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
    h = _checked_bandwidth(sigma * (1.0 / (_SQRT_PI * -psi2 * n)) ** (1.0 / 3.0), sigma, "plugin_cdf")
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
