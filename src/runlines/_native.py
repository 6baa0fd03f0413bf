"""The optional C extension, or None: not built, or RUNLINES_NO_SPEEDUPS=1.

`speedups` (`_speedups/speedups.c`) is the fast path of Run.log and spans.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType


def _load(name: str) -> ModuleType | None:
    if os.environ.get("RUNLINES_NO_SPEEDUPS"):
        return None
    try:
        return importlib.import_module(name)
    except ImportError:  # installed without a C compiler: the pure-Python paths run
        return None


speedups: ModuleType | None = _load("runlines._speedups.speedups")
