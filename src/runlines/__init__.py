"""runlines: structured JSON Lines logging for machine-learning training runs.

The public surface: `Run`, the `Redactor` and the `Vocabulary` of `Field` names it applies, the
readers (`load`, `iter_events`, `compare`, `query`, `export`, `console`) and the errors.
"""

from __future__ import annotations

import importlib
import typing

from runlines._version import __version__
from runlines.errors import (
    FieldDriftWarning,
    FieldError,
    NonfiniteWarning,
    QueryError,
    ReadError,
    RunlinesError,
    RunlinesWarning,
    RunLockedError,
    RunStateError,
)

if typing.TYPE_CHECKING:
    from runlines._notes import note, tag, untag
    from runlines.dashboard import report, serve
    from runlines.fields import Field, Vocabulary
    from runlines.reading import (
        compare,
        console,
        diff,
        histograms,
        iter_events,
        load,
        media,
        runs,
    )
    from runlines.redaction import Redactor
    from runlines.run import Run
    from runlines.sql import export, query

__all__ = [
    "Field",
    "FieldDriftWarning",
    "FieldError",
    "NonfiniteWarning",
    "QueryError",
    "ReadError",
    "Redactor",
    "Run",
    "RunLockedError",
    "RunStateError",
    "RunlinesError",
    "RunlinesWarning",
    "Vocabulary",
    "__version__",
    "compare",
    "console",
    "diff",
    "export",
    "histograms",
    "iter_events",
    "load",
    "media",
    "note",
    "query",
    "report",
    "runs",
    "serve",
    "tag",
    "untag",
]

# Imported on first use: a training process that only writes never pays for the read side,
# nor for the vocabulary before its first Run opens; a process that only reads (`load` in a
# notebook, the CLI) never pays for the writer.
_LAZY = {
    "Redactor": "runlines.redaction",
    "Run": "runlines.run",
    **dict.fromkeys(("Field", "Vocabulary"), "runlines.fields"),
    **dict.fromkeys(
        ("compare", "console", "diff", "histograms", "iter_events", "load", "media", "runs"),
        "runlines.reading",
    ),
    **dict.fromkeys(("export", "query"), "runlines.sql"),
    **dict.fromkeys(("report", "serve"), "runlines.dashboard"),
    **dict.fromkeys(("note", "tag", "untag"), "runlines._notes"),
}


def __getattr__(name: str) -> typing.Any:
    module = _LAZY.get(name)
    if module is None:
        msg = f"module 'runlines' has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
