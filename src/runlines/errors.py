"""Every exception and warning runlines raises, in one place to avoid import loops.

The tree::

    RunlinesError
    ├── FieldError(RunlinesError, ValueError)       bad event or field name, reserved key,
    │                                                a value too large to inline
    ├── RunStateError(RunlinesError, RuntimeError)  log after close, re-entering a closed run
    ├── RunLockedError(RunlinesError, RuntimeError) another live process holds the run
    ├── ReadError(RunlinesError, ValueError)        a log that cannot be read (path, line)
    └── QueryError(RunlinesError, ValueError)       SQL that DuckDB refused (runlines.query)

    RunlinesWarning(UserWarning)                    a failure outside runlines during a run
    ├── FieldDriftWarning(RunlinesWarning)          a drifting field name or type
    └── NonfiniteWarning(RunlinesWarning)           a NaN or infinity logged (on_nonfinite)

Each error subclasses the builtin a caller would expect, so ``except ValueError`` still works.
"""

from __future__ import annotations

__all__ = [
    "FieldDriftWarning",
    "FieldError",
    "NonfiniteWarning",
    "QueryError",
    "ReadError",
    "RunLockedError",
    "RunStateError",
    "RunlinesError",
    "RunlinesWarning",
]


class RunlinesError(Exception):
    """Base class of every error runlines raises."""


class FieldError(RunlinesError, ValueError):
    """An event name, field name or field value that runlines cannot log."""


class RunStateError(RunlinesError, RuntimeError):
    """An operation that the run's lifecycle state does not allow."""


class RunLockedError(RunlinesError, RuntimeError):
    """Another live process is writing the same run."""


class ReadError(RunlinesError, ValueError):
    """A log that cannot be read; carries the path and, where known, the line number."""

    def __init__(self, message: str, path: str | None = None, line: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.line = line


class QueryError(RunlinesError, ValueError):
    """SQL that DuckDB refused, with DuckDB's message and a hint about the ``records`` view."""


class RunlinesWarning(UserWarning):
    """A failure outside runlines during a run: a sink that failed, a value it could not encode."""


class FieldDriftWarning(RunlinesWarning):
    """A field logged under a drifting alias, or with a type that changed between records."""


class NonfiniteWarning(RunlinesWarning):
    """The first NaN or infinity of a field, with `Run(..., on_nonfinite="warn")`."""
