"""pg_kde: kernel density synopses for approximate aggregate queries in PostgreSQL.

The numerical core is importable on its own:

- :mod:`pg_kde.bandwidth` — PLUGIN, LSCV_h, LSCV_H and normal-reference bandwidth selectors;
- :mod:`pg_kde.kde` — Gaussian KDE evaluation at many points;
- :mod:`pg_kde.backend` — the backends behind them (reference, native, sequential, cuda);
- :func:`backends` — which backends exist and which can run here.

The version is written once, in pyproject.toml; the package reads it from its installed metadata, and the
build writes it into the extension's control file and SQL script.
"""

from ._errors import BackendFallbackWarning, BackendUnavailableError, DeviceOutOfMemoryError
from ._version import __version__
from .backend import BACKENDS, get_backend

__all__ = [
    "BackendFallbackWarning",
    "BackendUnavailableError",
    "DeviceOutOfMemoryError",
    "backends",
    "get_backend",
    "__version__",
]


def backends() -> dict:
    """Every backend name mapped to None if it can run here, else the reason it cannot.

    ``backend="auto"`` uses the first available in the order cuda, native, reference.
    """
    return {name: cls.unavailable_reason() for name, cls in BACKENDS.items()}


