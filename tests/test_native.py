"""The C extension is optional: `runlines --version` says whether they are on, and why not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from _extensions import import_extension

SRC = Path(__file__).resolve().parents[1] / "src"


def version_in_child(setup: str = "", **env: str) -> str:
    """`runlines --version` in a fresh interpreter, after *setup*, as one unwrapped line."""
    code = f"{setup}\nfrom runlines.cli import main\nmain(['--version'])"
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(SRC), "RUNLINES_NO_SPEEDUPS": "", **env},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return " ".join(done.stdout.split())


def test_version_says_the_fast_path_is_on_when_the_extension_loads() -> None:
    import_extension("_speedups.speedups")

    assert version_in_child().endswith(", C fast path: on")


def test_version_says_why_the_fast_path_is_off_when_switched_off() -> None:
    said = version_in_child(RUNLINES_NO_SPEEDUPS="1")

    assert said.endswith(", C fast path: off (RUNLINES_NO_SPEEDUPS is set)")


def test_an_extension_that_is_not_built_is_off_with_the_fix_named() -> None:
    """As after an install without a C compiler: the import fails, the pure paths run."""
    said = version_in_child("import sys; sys.modules['runlines._speedups.speedups'] = None")

    assert "C fast path: on" not in said
    assert "(not built: no C compiler at install time? reinstall with one to build it)" in said


def test_the_writer_and_spans_run_in_python_when_speedups_is_missing(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['runlines._speedups.speedups'] = None\n"
        "import runlines._writer, runlines.spans\n"
        "from runlines import Run\n"
        f"with Run('r', {str(tmp_path)!r}, stdout=False) as run:\n"
        "    run.log('step', loss=0.5)\n"
        "print(runlines._writer._CWriter, runlines.spans._SpanBase.__module__)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(SRC)},
        capture_output=True,
        text=True,
        check=True,
    )

    assert done.stdout.split() == ["None", "runlines.spans"]
    assert '"event":"step"' in (tmp_path / "r.jsonl").read_text()
