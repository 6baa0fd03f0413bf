"""Shared fixtures: a run directory under tmp_path; freezegun kept out of heavy libraries."""

from __future__ import annotations

import signal
from pathlib import Path

import freezegun
import pytest

from _extensions import REQUIRED

# freeze_time() scans every loaded module for clock functions. Lazy modules such as
# transformers' import whole sub-packages when scanned (and crashed the interpreter once):
# these libraries never hold our clock, so freezegun leaves them alone.
freezegun.configure(
    extend_ignore_list=[
        "transformers",
        "lightning",
        "lightning_fabric",
        "pytorch_lightning",
        "torch",
        "accelerate",
        "pyspark",
        "py4j",
        "duckdb",
        "pandas",
        "pyarrow",
        "numpy",
        "matplotlib",
    ]
)


def pytest_configure() -> None:
    """Start from the default signal dispositions, whatever this process inherited.

    A suite started with `nohup`, `&` or `trap '' INT TERM` inherits ignored signals, and so would
    the jobs the tests start: runlines rightly leaves an ignored signal ignored, so the signal
    tests would see a job that never ends. Tests of that case ignore the signal themselves.
    """
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    for name in ("SIGTERM", "SIGUSR1", "SIGUSR2"):  # SIGUSR1/2 do not exist on Windows
        signum = getattr(signal, name, None)
        if signum is not None and signal.getsignal(signum) is signal.SIG_IGN:
            signal.signal(signum, signal.SIG_DFL)


@pytest.fixture(name="run_dir")
def _run_dir(tmp_path: Path) -> Path:
    """A fresh directory for one test's runs."""
    return tmp_path / "runs"


def pytest_addoption(parser: pytest.Parser) -> None:
    """`--long` from the repository root too (tests/reliability/conftest.py reads it)."""
    parser.addoption(
        "--long",
        action="store_true",
        default=False,
        help="run the long variants of tests/reliability (same as RUNLINES_LONG=1)",
    )


@pytest.fixture(name="pure_python")
def _pure_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs opened in this test use log()'s pure-Python path, not the C fast path.

    For tests that replace the Python functions log() writes with: the C path calls write(2)
    itself and would not see the replacement.
    """
    import runlines._writer

    monkeypatch.setattr(runlines._writer, "_CWriter", None)


@pytest.fixture(name="fast_path", params=["c", "python"])
def _fast_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test once on log()'s C fast path and once on its pure-Python path.

    Returns the path's name, as `run_start`'s `writer` field says it. The C side is skipped,
    with its reason, only where the extension is not built (or RUNLINES_NO_SPEEDUPS=1), and
    fails there instead when RUNLINES_REQUIRE_SPEEDUPS=1 (as in CI).
    """
    import runlines._writer

    if request.param == "python":
        monkeypatch.setattr(runlines._writer, "_CWriter", None)
    elif runlines._writer._CWriter is None:
        reason = "the C extension is not built (or RUNLINES_NO_SPEEDUPS=1)"
        if REQUIRED:
            pytest.fail(f"{reason}; RUNLINES_REQUIRE_SPEEDUPS=1 requires it")
        pytest.skip(reason)
    return str(request.param)


@pytest.fixture(autouse=True)
def _children_follow_the_path(request: pytest.FixtureRequest) -> None:
    """On `fast_path`'s "python" side, processes the test starts run pure Python too.

    RUNLINES_NO_SPEEDUPS=1 is read when runlines is imported: this process keeps its extension
    (the fixture switches it off per run), a child never loads it. So a test that logs from a
    child process covers both paths as well.
    """
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and callspec.params.get("fast_path") == "python":
        request.getfixturevalue("monkeypatch").setenv("RUNLINES_NO_SPEEDUPS", "1")
