"""Shared fixtures: a run directory under tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(name="run_dir")
def _run_dir(tmp_path: Path) -> Path:
    """A fresh directory for one test's runs."""
    return tmp_path / "runs"
