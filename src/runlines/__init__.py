"""runlines: structured JSON Lines logging for machine-learning training runs."""


from runlines._version import __version__
from runlines.errors import (
    FieldDriftWarning,
    FieldError,
    ReadError,
    RunlinesError,
    RunlinesWarning,
    RunLockedError,
    RunStateError,
)
from runlines.reading import compare, iter_events, load
from runlines.run import Run

__all__ = [
    "FieldDriftWarning",
    "FieldError",
    "ReadError",
    "Run",
    "RunLockedError",
    "RunStateError",
    "RunlinesError",
    "RunlinesWarning",
    "__version__",
    "compare",
    "iter_events",
    "load",
]
