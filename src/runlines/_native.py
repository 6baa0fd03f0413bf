"""The optional C extensions, or None, and why a missing one is off.

`speedups` (`_speedups.c`) is the fast path of Run.log and spans; `readfast` (`_readfast.c`)
parses the common lines of load(). Each is None when it was not built (no C compiler at install
time, `_speedups` on Windows, any on a free-threaded Python) or when RUNLINES_NO_SPEEDUPS=1 is
set: then the pure-Python paths run, with the same results. `off_reasons` says why, and
`runlines --version` prints it (see `describe`).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

# What each extension speeds up, for `describe`.
_ROLES = {"_speedups": "log() and spans", "_readfast": "load()"}

# Why an extension is off, by module name; one that loaded has no entry.
off_reasons: dict[str, str] = {}


def _not_built_reason(name: str) -> str:
    """Say why setup.py did not build *name* here (see setup.py)."""
    import sysconfig  # only when an extension is missing: a normal import stays light

    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        return "not built for free-threaded Python: the C code relies on the GIL"
    if name == "_speedups" and os.name != "posix":
        return "not built on Windows: it writes with POSIX write(2)"
    return "not built: no C compiler at install time? reinstall with one to build it"


def _load(name: str) -> ModuleType | None:
    if os.environ.get("RUNLINES_NO_SPEEDUPS"):
        off_reasons[name] = "RUNLINES_NO_SPEEDUPS is set"
        return None
    try:
        return importlib.import_module(f"runlines.{name}")
    except ImportError:  # the pure-Python paths run
        off_reasons[name] = _not_built_reason(name)
        return None


speedups: ModuleType | None = _load("_speedups")
readfast: ModuleType | None = _load("_readfast")


def describe() -> str:
    """Say in one line whether the C fast paths are on, and why one is off."""
    if not off_reasons:
        return "C fast path: on"
    if len(off_reasons) == len(_ROLES) and len(set(off_reasons.values())) == 1:
        return f"C fast path: off ({next(iter(off_reasons.values()))})"
    parts = [
        f"off for {role} ({off_reasons[name]})" if name in off_reasons else f"on for {role}"
        for name, role in _ROLES.items()
    ]
    return "C fast path: " + ", ".join(parts)
