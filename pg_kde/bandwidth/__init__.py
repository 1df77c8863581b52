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

Layout: one module per family (:mod:`.plugin`, :mod:`.lscv_scalar`, :mod:`.lscv_matrix`,
:mod:`.reference_rule`), the result type (:mod:`.result`), and one registry (:mod:`.registry`) that says which
dimensions each selector takes, how its bandwidth shrinks with n, and what ``auto`` means.

Every selector takes ``backend=`` (a name, see :func:`pg_kde.backends`, or a backend object from
:mod:`pg_kde.backend`) and ``dtype=`` (``"float64"`` or
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

from .lscv_matrix import lscv_H, lscv_H_objective
from .lscv_scalar import lscv_h, lscv_h_objective
from .plugin import SCALES, plugin, plugin_cdf
from .reference_rule import normal_reference
from .registry import AUTO, METHODS, SELECTORS, SelectorSpec, check_method, resolve, select
from .result import BandwidthResult, LSCVBoundaryWarning

__all__ = [
    "AUTO",
    "BandwidthResult",
    "LSCVBoundaryWarning",
    "METHODS",
    "SCALES",
    "SELECTORS",
    "SelectorSpec",
    "check_method",
    "lscv_H",
    "lscv_H_objective",
    "lscv_h",
    "lscv_h_objective",
    "normal_reference",
    "plugin",
    "plugin_cdf",
    "resolve",
    "select",
]
