"""Long sums in bounded slices, with the caller's interrupt check between them.

PostgreSQL acts on a cancel request or a ``statement_timeout`` only when control returns to it, so a
selector or a synopsis refresh that spends minutes inside one native or CUDA call cannot be stopped. Every
O(n²) sum in pg_kde therefore accepts ``interrupt``, a callable with no arguments: when it is given, the
sum runs in slices of bounded cost and ``interrupt()`` is called before the first slice and between
slices. Whatever it raises propagates unchanged (it is meant for the SQL layer: a function that runs a
trivial ``plpy.execute``, which raises when a cancel is pending). When it is None, nothing is sliced.

A slice of a pair sum is a range of rows [i0, i1) of the pair matrix: the pairs (i, j) with i0 <= i < i1
and j > i. The slices of one sum cover every row once, so their results add up to the same sum in another
order (docs/math.md §10). Slices are sized by their cost in *pair terms*: pairs × :func:`pair_terms` (the
kernel's relative cost per pair, measured on the native backend), against a budget each backend sets for
itself (``slice_terms``) so that one slice takes about 50 ms.
"""

from __future__ import annotations

import math
from typing import Callable, Iterator, Optional, Tuple

__all__ = ["Interrupt", "InterruptCheck", "kde_terms", "pair_slices", "pair_terms", "point_slices", "recording"]

#: The type of the ``interrupt`` arguments.
Interrupt = Optional[Callable[[], None]]


def pair_terms(kind: str, d: int = 1, values: int = 1, derivative: bool = False) -> float:
    """Cost of one pair of a primitive in pair terms (one PLUGIN pair = 1), from the native backend's speed
    (float32, AVX2, measured with benchmarks of each primitive): an LSCV pair costs one term per scale, half
    again for the derivative, plus the distance (½ a term per extra coordinate); an LSCV_H moments pair
    about 2 + d(d+1)/2 terms (the value, then one product per entry of the upper triangle)."""
    if kind == "plugin":
        return 1.0
    if kind == "lscv":
        return max(1, values) * (1.5 if derivative else 1.0) + 0.5 * (d - 1)
    if kind == "moments":
        return 2.0 + d * (d + 1) / 2.0
    raise ValueError(f"unknown pair kind {kind!r}")


def kde_terms(n_sample: int, d: int) -> float:
    """Cost of one point of a KDE sum in pair terms: the sample size, a quarter more per coordinate."""
    return max(1, n_sample) * (1.0 + 0.25 * d)


def _rows_within(n: int, i0: int, pairs: float) -> int:
    """The most rows from i0 on (at least one) whose pairs (i, j), j > i, number at most ``pairs``:
    rows [i0, i0 + r) hold r(n − 1 − i0) − r(r − 1)/2 pairs."""
    c = n - 1 - i0
    b = c + 0.5
    disc = b * b - 2.0 * pairs
    r = int(b - math.sqrt(disc)) if disc > 0 else n - i0
    r = max(1, min(r, n - i0))

    def count(rows):
        return rows * c - rows * (rows - 1) // 2

    while r > 1 and count(r) > pairs:  # the float root may land one row off
        r -= 1
    while r < n - i0 and count(r + 1) <= pairs:
        r += 1
    return r


def pair_slices(n: int, terms_per_pair: float, budget: float) -> Iterator[Tuple[int, int]]:
    """Consecutive row ranges [i0, i1) covering [0, n), each holding at most ``budget`` pair terms of pairs
    (i, j), j > i (a single row may hold more: a row is the smallest slice)."""
    pairs = max(1.0, budget / max(terms_per_pair, 1e-300))
    i0 = 0
    while i0 < n:
        i1 = i0 + _rows_within(n, i0, pairs)
        yield i0, i1
        i0 = i1


def point_slices(m: int, terms_per_point: float, budget: float) -> Iterator[Tuple[int, int]]:
    """Consecutive ranges [a, b) of m points, each costing at most ``budget`` (at least one point)."""
    step = max(1, int(budget // max(terms_per_point, 1e-300)))
    for a in range(0, m, step):
        yield a, min(m, a + step)


class InterruptCheck:
    """The caller's check, remembering what it raised, so that code which translates errors (the cuda
    backend's out-of-memory handling, ``backend="auto"``'s fallback) can tell the caller's exception from
    its own and let it pass untouched."""

    __slots__ = ("check", "raised")

    def __init__(self, check: Callable[[], None]):
        self.check = check
        self.raised: Optional[BaseException] = None

    def __call__(self) -> None:
        try:
            self.check()
        except BaseException as exc:  # recorded, then re-raised as it is
            self.raised = exc
            raise

    def is_source_of(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the exception the check raised."""
        return self.raised is not None and exc is self.raised


def recording(interrupt: Interrupt) -> Optional[InterruptCheck]:
    """``interrupt`` wrapped in an :class:`InterruptCheck` (None stays None; a check is not wrapped twice)."""
    if interrupt is None or isinstance(interrupt, InterruptCheck):
        return interrupt
    return InterruptCheck(interrupt)
