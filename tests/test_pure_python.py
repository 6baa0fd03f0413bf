"""The suites of the paths that have C versions, run again as runlines runs without them.

Without a C compiler at install time (or with RUNLINES_NO_SPEEDUPS=1), log(), spans and load()
run in pure Python and pyarrow. These suites run in a child process with the C paths off.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUITES = [
    "tests/test_run.py",
    "tests/test_run_lifecycle.py",
    "tests/test_run_start.py",
    "tests/test_spans.py",
    "tests/test_sampling.py",
    "tests/test_reading.py",
    "tests/test_load_fixes.py",
    "tests/test_query.py",
    "tests/test_cli.py",
]


def test_the_suites_of_the_c_paths_pass_without_them() -> None:
    env = {**os.environ, "RUNLINES_NO_SPEEDUPS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *SUITES],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout
    assert " skipped" not in done.stdout
