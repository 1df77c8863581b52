"""The exceptions and warnings of the backend layer (re-exported by :mod:`pg_kde`)."""


class BackendUnavailableError(RuntimeError):
    """The requested backend cannot run here (missing module, device or build)."""


class DeviceOutOfMemoryError(MemoryError):
    """The GPU ran out of memory for a computation of the cuda backend."""


class BackendFallbackWarning(RuntimeWarning):
    """``backend="auto"`` could not finish on the backend it chose and went on with the next one."""
