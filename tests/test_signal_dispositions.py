"""Inherited signal dispositions: an ignored signal stays ignored; the suite resets them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from runlines import Run

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(name="sigterm_ignored")
def _sigterm_ignored() -> Iterator[None]:
    """SIGTERM ignored, as in a job started with `trap '' TERM`; restored afterwards."""
    before = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    yield
    signal.signal(signal.SIGTERM, before)


@pytest.mark.usefixtures("sigterm_ignored")
def test_a_signal_ignored_before_the_run_stays_ignored(run_dir: Path) -> None:
    with Run("r", run_dir, stdout=False):
        during = signal.getsignal(signal.SIGTERM)

    assert during is signal.SIG_IGN
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN


def test_the_suite_starts_from_default_dispositions_whatever_it_inherited() -> None:
    """tests/conftest.py resets SIGINT and SIGTERM that `trap '' INT TERM` left ignored."""
    code = (
        "import signal, sys; import conftest; conftest.pytest_configure();"
        "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler,"
        " signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT / "src")])}

    done = subprocess.run(
        ["bash", "-c", f"trap '' INT TERM; exec {sys.executable} -c \"$0\"", code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )

    assert done.stdout.split() == ["True", "True"]
