"""What the `fast_path` fixture cannot switch: the span classes, chosen when runlines is imported.

Without a C compiler at install time (or with RUNLINES_NO_SPEEDUPS=1), `Span` is built on the
Python `_PySpanBase` instead of the C `SpanBase`. The fixture switches log()'s path per run, in
this process; the base class of `Span` stays the C one. So the tracer's suite runs again here, in
a child process without the extension. The Run-level suites run on both paths through the
fixture (tests/conftest.py), and tests/test_paths_agree.py compares a whole run written by such
a child with the C paths' one. The reading side has no C code: nothing of it runs here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUITES = ["tests/test_spans.py"]


def test_the_tracer_suite_passes_with_the_python_span_classes() -> None:
    env = {**os.environ, "RUNLINES_NO_SPEEDUPS": "1"}
    probe = "import runlines.spans as s; print(s.Span.__mro__[1].__name__)"
    base = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *SUITES],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )

    assert base.stdout.strip() == "_PySpanBase"
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout
    assert " skipped" not in done.stdout
