"""The heavy optional packages of some tests: without one, its tests skip and say so.

The core suite runs without torch, PySpark, transformers, Lightning, Playwright and matplotlib
(.ci/pythons.sh on a new Python, where some of them publish no wheel yet).
"""

from __future__ import annotations

import importlib.util

import pytest


def skip_without(name: str) -> None:
    """Skip the calling test (or module) when package *name* is not installed."""
    if importlib.util.find_spec(name) is None:
        reason = (
            f"{name} is not installed (it may publish no wheel for this Python): pip install {name}"
        )
        pytest.skip(reason, allow_module_level=True)
