"""The C extensions for the tests that need them: skipped when not built, unless CI requires them.

Without a C compiler at install time runlines runs in pure Python, and the README's test command
still passes: the tests of the C paths skip, with the reason. `.ci/run` sets
RUNLINES_REQUIRE_SPEEDUPS=1, so there a missing extension fails the suite instead.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

REQUIRED = bool(os.environ.get("RUNLINES_REQUIRE_SPEEDUPS"))


def import_extension(name: str) -> ModuleType:
    """Return the module `runlines.<name>`, or skip the calling test (or module) without it."""
    try:
        return importlib.import_module(f"runlines.{name}")
    except ImportError as err:
        reason = f"runlines.{name} is not built (no C compiler at install time?): {err}"
        if REQUIRED:
            msg = f"{reason}; RUNLINES_REQUIRE_SPEEDUPS=1 requires it: reinstall with a C compiler"
            raise ImportError(msg) from err
        pytest.skip(reason, allow_module_level=True)
