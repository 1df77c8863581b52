"""Input checks shared by the selectors and KDE evaluation.

Every check raises ``ValueError`` (or ``TypeError`` for a wrong kind of argument) with a message that
names the argument and what is wrong with it; nothing is computed on bad input.
"""

from __future__ import annotations

import numbers

import numpy as np

DTYPES = ("float64", "float32")


def check_dtype(dtype) -> str:
    """Return ``"float64"`` or ``"float32"`` for any spelling NumPy understands."""
    try:
        name = np.dtype(dtype).name
    except TypeError:
        name = None
    if name not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}; got {dtype!r}")
    return name


def as_data(X, *, name: str = "X", min_rows: int = 2) -> np.ndarray:
    """Data of shape (n,) or (n, d) as a C-contiguous float64 (n, d) array, checked.

    Raises ``ValueError`` for a wrong shape, fewer than ``min_rows`` rows, no columns, or any NaN or
    infinite value (with the count and the first position).
    """
    arr = np.asarray(X)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise TypeError(f"{name} must be numeric; got an array of dtype {arr.dtype}")
    if np.iscomplexobj(arr):
        raise TypeError(f"{name} must be real-valued; got complex values")
    if arr.ndim == 1:
        arr = arr.reshape(-1, 1)
    elif arr.ndim != 2:
        raise ValueError(f"{name} must have shape (n,) or (n, d); got shape {arr.shape}")
    n, d = arr.shape
    if d == 0:
        raise ValueError(f"{name} has no columns")
    if n < min_rows:
        raise ValueError(f"{name} has {n} row(s); at least {min_rows} are needed")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    finite = np.isfinite(arr)
    if not finite.all():
        n_nan = int(np.isnan(arr).sum())
        n_inf = int(arr.size - finite.sum()) - n_nan
        row, col = (int(v[0]) for v in np.nonzero(~finite))
        raise ValueError(
            f"{name} contains {n_nan} NaN and {n_inf} infinite value(s) (first at row {row}, column {col}); "
            "remove or impute them before choosing a bandwidth"
        )
    return arr


#: Rows compared at a time by check_spread.
_SPREAD_BLOCK_ROWS = 1 << 14


def check_spread(X: np.ndarray, *, name: str = "X") -> None:
    """Raise ``ValueError`` if a column is constant (zero variance)."""
    # every value equal to the column's first (not np.ptp: max − min overflows for ±1e308; and one pass of
    # comparisons, where max and min along the rows were two slower ones), a block of rows at a time: the
    # comparisons' booleans take a block's, not the data's (1/8 of its bytes), and the pass ends as soon as
    # every column has shown two values (as a rule in the first block)
    constant = (X[:_SPREAD_BLOCK_ROWS] == X[:1]).all(axis=0)
    for start in range(_SPREAD_BLOCK_ROWS, X.shape[0], _SPREAD_BLOCK_ROWS):
        open_cols = np.flatnonzero(constant)
        if open_cols.size == 0:
            break
        block = X[start:start + _SPREAD_BLOCK_ROWS]
        if open_cols.size < X.shape[1]:
            block = block[:, open_cols]
        constant[open_cols] = (block == X[0, open_cols]).all(axis=0)
    for col in np.flatnonzero(constant):
        raise ValueError(
            f"column {col} of {name} is constant (every value is {X[0, col]!r}): a bandwidth needs data "
            "with spread"
        )


def positive_scalar(value, *, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number; got {type(value).__name__}")
    v = float(value)
    if not np.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be positive and finite; got {v!r}")
    return v


def positive_array(values, *, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim > 1:
        raise ValueError(f"{name} must be a scalar or a one-dimensional array")
    bad = ~np.isfinite(arr) | (arr <= 0)
    if bad.any():
        raise ValueError(f"{name} must be positive and finite; got {arr[bad].ravel()[0]!r}")
    return np.atleast_1d(arr)


def bandwidth_matrix(H, d: int, *, name: str = "H") -> np.ndarray:
    """A symmetric positive-definite (d, d) float64 matrix, checked; returns its lower Cholesky factor."""
    M = np.asarray(H, dtype=np.float64)
    if M.ndim == 0 and d == 1:
        M = M.reshape(1, 1)
    if M.shape != (d, d):
        raise ValueError(f"{name} must have shape ({d}, {d}) to match the data; got shape {M.shape}")
    if not np.isfinite(M).all():
        raise ValueError(f"{name} contains NaN or infinite values")
    if not np.allclose(M, M.T, rtol=1e-10, atol=0.0):
        raise ValueError(f"{name} must be symmetric")
    try:
        from scipy.linalg import cholesky  # imported when used: a refresh's first call imports less

        return cholesky(M, lower=True)
    except np.linalg.LinAlgError:
        raise ValueError(f"{name} must be positive definite") from None
