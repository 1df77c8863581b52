"""pg_kde: kernel density synopses for approximate aggregate queries in PostgreSQL.

The numerical core is importable on its own:

- :mod:`pg_kde.bandwidth` — PLUGIN, LSCV_h, LSCV_H and normal-reference bandwidth selectors;
- :mod:`pg_kde.kde` — Gaussian KDE evaluation at many points;
- :func:`backends` — which backends exist and which can run here.
"""

from ._backends import BACKENDS, BackendFallbackWarning, BackendUnavailableError, DeviceOutOfMemoryError, get_backend

__version__ = "0.2.0"

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


