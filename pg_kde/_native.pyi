"""Type stub for pg_kde._native, the compiled C++ backend (native/bindings.cpp).

Array arguments are C-contiguous float32 or float64, all of one dtype per call; results are float64.
``isa`` "" picks the best instruction set; ``threads`` <= 0 uses PG_KDE_THREADS or every hardware thread;
``sequential=True`` runs the naive single-threaded scalar loop instead. The pair sums take a row range:
only the pairs (i, j), j > i, with ``row_begin <= i < row_end`` (``row_end`` None: up to n) are summed,
and sums over consecutive ranges add up to the whole sum (pg_kde._slices runs long sums that way).
"""

from typing import Optional, Tuple

import numpy as np
import numpy.typing as npt

class NativeArgumentError(ValueError): ...

def available_isas() -> list[str]: ...
def default_threads() -> int: ...
def plugin_pair_sum(
    x: npt.NDArray[np.floating],
    g: float,
    order: int,
    isa: str = "",
    threads: int = 0,
    sequential: bool = False,
    row_begin: int = 0,
    row_end: Optional[int] = None,
) -> float: ...
def lscv_pair_sums(
    z: npt.NDArray[np.floating],
    scales: npt.NDArray[np.float64],
    w: float,
    derivative: bool = False,
    isa: str = "",
    threads: int = 0,
    sequential: bool = False,
    row_begin: int = 0,
    row_end: Optional[int] = None,
) -> Tuple[npt.NDArray[np.float64], Optional[npt.NDArray[np.float64]]]: ...
def lscv_moments(
    z: npt.NDArray[np.floating],
    w: float,
    isa: str = "",
    threads: int = 0,
    sequential: bool = False,
    row_begin: int = 0,
    row_end: Optional[int] = None,
) -> Tuple[float, npt.NDArray[np.float64]]: ...
def kde_sums(
    points: npt.NDArray[np.floating],
    sample: npt.NDArray[np.floating],
    isa: str = "",
    threads: int = 0,
    sequential: bool = False,
) -> npt.NDArray[np.float64]: ...
def exp_nonpos(x: npt.NDArray[np.floating], isa: str = "") -> npt.NDArray[np.floating]: ...
