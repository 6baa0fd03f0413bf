"""The optional packages of some tests: without one, its tests skip and say so.

The core suite runs with only the core and the `[pandas]` extra installed (.ci/run checks it in
a second venv): without DuckDB, torch, PySpark, transformers, Lightning, Playwright or
matplotlib, whose tests skip (on a new Python some of them publish no wheel yet).
"""

from __future__ import annotations

import importlib.util

import pytest

# An import name whose package on PyPI is named otherwise.
_PYPI = {"PIL": "pillow"}


def _reason(name: str) -> str:
    package = _PYPI.get(name, name)
    return (
        f"{name} is not installed (it may publish no wheel for this Python): pip install {package}"
    )


def skip_without(name: str) -> None:
    """Skip the calling test (or module) when package *name* is not installed."""
    if importlib.util.find_spec(name) is None:
        pytest.skip(_reason(name), allow_module_level=True)


def needs(name: str) -> pytest.MarkDecorator:
    """Mark a test, a class or a parametrized case to skip when package *name* is not installed."""
    return pytest.mark.skipif(importlib.util.find_spec(name) is None, reason=_reason(name))
