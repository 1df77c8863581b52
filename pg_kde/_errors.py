"""The exceptions and warnings of the package: the backend layer's (re-exported by :mod:`pg_kde`), and the
error a caller of the SQL functions can fix (:class:`UserError`, raised by :mod:`pg_kde.synopsis` and
:mod:`pg_kde.sql_entry`)."""

from __future__ import annotations


class BackendUnavailableError(RuntimeError):
    """The requested backend cannot run here (missing module, device or build)."""


class DeviceOutOfMemoryError(MemoryError):
    """The GPU ran out of memory for a computation of the cuda backend."""


class BackendFallbackWarning(RuntimeWarning):
    """``backend="auto"`` could not finish on the backend it chose and went on with the next one."""


class UserError(Exception):
    """An error the caller can fix: becomes one PostgreSQL error with this SQLSTATE, detail and hint."""

    def __init__(self, message: str, *, sqlstate: str = "22023", hint: str | None = None, detail: str | None = None):
        super().__init__(message)
        self.error = {"message": message, "sqlstate": sqlstate, "hint": hint, "detail": detail}


class NoValuesError(UserError):
    """The relation or column holds no non-NULL value: nothing to describe (a partitioned table's empty
    partitions are left out of its synopsis)."""

    def __init__(self, message: str, *, rows: int = 0, **kwargs):
        super().__init__(message, **kwargs)
        self.rows = rows  # the relation's rows, all of them NULL in the column(s)
