"""The one registry of selectors: names, the dimensions each takes, how its bandwidth shrinks with n, and
what ``auto`` means. :func:`pg_kde.bandwidth.select`, the synopsis build and the SQL layer all decide here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from .lscv_matrix import lscv_H
from .lscv_scalar import lscv_h
from .plugin import plugin, plugin_cdf
from .reference_rule import normal_reference
from .result import BandwidthResult

#: What a bandwidth is for: a density estimate f̂, or the distribution function F̂ (range counts).
TARGETS = ("density", "counts")


@dataclass(frozen=True)
class SelectorSpec:
    """A selector and its facts.

    ``one_dimensional``: takes 1-D data only. ``estimates``: "density" (AMISE of f̂, h ∝ n^{−1/(d+4)}) or
    "distribution" (AMISE of F̂, h ∝ n^{−1/3}, 1-D). ``scaled``: takes ``scale=`` (the plug-in family's
    σ̂, :data:`pg_kde.bandwidth.SCALES`).
    """

    name: str
    function: Callable[..., BandwidthResult]
    one_dimensional: bool
    estimates: str = "density"
    scaled: bool = False

    def rate(self, d: int) -> float:
        """The exponent r of h ∝ n^{−r} (H ∝ n^{−2r}) of this selector's bandwidth in d dimensions."""
        return 1.0 / 3.0 if self.estimates == "distribution" else 1.0 / (d + 4.0)

    def check_dimensions(self, d: int) -> None:
        if self.one_dimensional and d != 1:
            raise ValueError(f"method {self.name!r} is for one column; use lscv_h, lscv_H or normal_reference")


SELECTORS = {
    spec.name: spec
    for spec in (
        SelectorSpec("plugin", plugin, one_dimensional=True, scaled=True),
        SelectorSpec("plugin_cdf", plugin_cdf, one_dimensional=True, estimates="distribution", scaled=True),
        SelectorSpec("lscv_h", lscv_h, one_dimensional=False),
        SelectorSpec("lscv_H", lscv_H, one_dimensional=False),
        SelectorSpec("normal_reference", normal_reference, one_dimensional=False),
    )
}

#: Selectors by name (the functions); :func:`check_method` lists these names.
METHODS = {name: spec.function for name, spec in SELECTORS.items()}

#: What ``auto`` resolves to, by target and by one column or several.
AUTO = {
    "density": {"one": "plugin", "many": "lscv_H"},
    "counts": {"one": "plugin_cdf", "many": "lscv_H"},
}


def check_method(method: str) -> str:
    """``method`` if it is ``"auto"`` or a name in :data:`METHODS`, else ``ValueError`` listing them."""
    if method != "auto" and method not in METHODS:
        raise ValueError(f"unknown bandwidth method {method!r}; valid methods: auto, {', '.join(METHODS)}")
    return method


def resolve(method: str, d: int, target: str = "density") -> SelectorSpec:
    """The selector ``method`` names for d-dimensional data, ``auto`` resolved for ``target`` ("density":
    plugin in 1-D, lscv_H otherwise; "counts": plugin_cdf in 1-D, lscv_H otherwise). ``ValueError`` for an
    unknown name or a 1-D selector on several columns."""
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; valid targets: {', '.join(TARGETS)}")
    if check_method(method) == "auto":
        method = AUTO[target]["one" if d == 1 else "many"]
    spec = SELECTORS[method]
    spec.check_dimensions(d)
    return spec


def _dimensions(X) -> int:
    return 1 if np.ndim(X) <= 1 else int(np.shape(X)[1])


def select(X, method: str = "auto", *, target: Optional[str] = "density", **kwargs) -> BandwidthResult:
    """Run the selector called ``method``; ``"auto"`` is resolved by :func:`resolve` for ``target``
    (default: a density bandwidth, ``plugin`` for 1-D data and ``lscv_H`` otherwise).

    ``kwargs`` go to the selector: ``backend``, ``dtype`` and ``interrupt`` are accepted by every one.
    Raises ``ValueError`` listing the valid names for an unknown method.
    """
    check_method(method)
    if method == "auto":
        method = resolve(method, _dimensions(X), target).name
    return METHODS[method](X, **kwargs)
