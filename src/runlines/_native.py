"""The optional C speedups (`_speedups.c`), or None: not built, or RUNLINES_NO_SPEEDUPS=1."""

from __future__ import annotations

import importlib
import os
from types import ModuleType


def _load() -> ModuleType | None:
    if os.environ.get("RUNLINES_NO_SPEEDUPS"):
        return None
    try:
        return importlib.import_module("runlines._speedups")
    except ImportError:  # installed without a C compiler: the pure-Python paths run
        return None


speedups: ModuleType | None = _load()
