"""What every selector returns, and the warning for an LSCV minimum on the edge of its search range."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Optional

import numpy as np


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


def _ties(data: np.ndarray) -> int:
    """Rows that repeat an earlier row exactly (n minus the number of distinct rows)."""
    n = data.shape[0]
    first = np.sort(data[:, 0])
    if not (first[1:] == first[:-1]).any():  # a column without ties: no row repeats (one sort, not n rows')
        return 0
    return int(n - np.unique(data, axis=0).shape[0])


def _warn_boundary(method: str, where: str, data: np.ndarray, stacklevel: int = 3) -> None:
    """Warn that an LSCV minimum sits on the ``where`` ("lower" or "upper") edge, naming the duplicated rows
    of ``data`` when there are any and what to use instead."""
    n, d = data.shape
    ties = _ties(data)
    shrink = "as h -> 0" if method == "lscv_h" else "as H shrinks towards a singular matrix"
    if ties and where == "lower":
        cause = (
            f"the data hold {ties} duplicated row(s) of {n} (rounded or integer values), and on such "
            f"data LSCV falls without bound {shrink}"
        )
    elif ties:
        cause = (
            f"the criterion is still falling at the edge of the search range; the data hold {ties} "
            f"duplicated row(s) of {n} (rounded or integer values), on which LSCV is not well-behaved"
        )
    elif where == "lower" and method != "lscv_h":
        cause = f"the criterion keeps falling {shrink} (typically a column on a coarse lattice)"
    else:
        cause = "the criterion is still falling at the edge of the search range"
    alternative = "plugin or normal_reference" if d == 1 else "normal_reference"
    warnings.warn(
        f"{method}: the LSCV minimum lies at the {where} end of the search range, so the result is not a "
        f"proper minimiser; {cause}. Use {alternative} instead, or remove the rounding (jitter each value by "
        "up to half its rounding unit).",
        LSCVBoundaryWarning,
        stacklevel=stacklevel,
    )
