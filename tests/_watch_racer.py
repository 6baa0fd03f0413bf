"""Workers of tests/cli/test_watch.py's race: `runlines watch --once` passes over one folder,
sharing one state file, released together at a barrier. Imported by the spawned processes.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

from runlines.cli import main

PASSES = 3  # passes per worker: later ones find what the others sent


def watcher(runs: str, state: str, args: list[str], barrier: Any) -> None:
    """Watch *runs* PASSES times, each a `--once` pass with *args* (the targets), once released."""
    try:
        barrier.wait()
        with contextlib.redirect_stderr(io.StringIO()):  # each pass says what it sent
            for _ in range(PASSES):
                assert main(["watch", runs, "--state", state, "--once", *args]) == 0
    except BaseException:
        barrier.abort()
        raise
