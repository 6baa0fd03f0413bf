"""The optional C extension, or None, and why it is off.

`speedups` (`_speedups/speedups.c`) is the fast path of Run.log and spans. It is None when it
was not built (no C compiler at install time, Windows, a free-threaded Python) or when
RUNLINES_NO_SPEEDUPS=1 is set: then the pure-Python paths run, with the same results.
`off_reason` says why, and `runlines --version` prints it (see `describe`).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

_MODULE = "runlines._speedups.speedups"

# Why the extension is off; None when it loaded.
off_reason: str | None = None


def _not_built_reason() -> str:
    """Say why setup.py did not build the extension here (see setup.py)."""
    import sysconfig  # only when the extension is missing: a normal import stays light

    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        return "not built for free-threaded Python: the C code relies on the GIL"
    if os.name != "posix":
        return "not built on Windows: it writes with POSIX write(2)"
    return "not built: no C compiler at install time? reinstall with one to build it"


def _load() -> ModuleType | None:
    global off_reason
    if os.environ.get("RUNLINES_NO_SPEEDUPS"):
        off_reason = "RUNLINES_NO_SPEEDUPS is set"
        return None
    try:
        return importlib.import_module(_MODULE)
    except ImportError:  # the pure-Python paths run
        off_reason = _not_built_reason()
        return None


speedups: ModuleType | None = _load()


def describe() -> str:
    """Say in one line whether the C fast path is on, and why it is off."""
    return "C fast path: on" if off_reason is None else f"C fast path: off ({off_reason})"
