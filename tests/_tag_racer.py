"""Workers of tests/cli/test_tag.py's race: `runlines tag` and `note` calls, and the run's own
writer, released together at a barrier. Imported by the spawned processes.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

from runlines import Run
from runlines.cli import main

CALLS = 20  # `runlines tag` and `runlines note` calls per tagging worker
RECORDS = 3000  # what the run's writer logs meanwhile
NOTE_BYTES = 3000  # near PIPE_BUF: a record written in pieces would interleave


def note_text(worker: int, call: int) -> str:
    """Return the note *worker* writes at *call*: long, and says who wrote it."""
    head = f"w{worker}c{call}:"
    return head + "x" * (NOTE_BYTES - len(head))


def tagger(worker: int, log: str, barrier: Any) -> None:
    """Tag and note the run of *log* CALLS times each through the command line, when released."""
    try:
        barrier.wait()
        with contextlib.redirect_stdout(io.StringIO()):  # what each call prints: the tags
            for call in range(CALLS):
                assert main(["tag", log, f"w{worker}-{call}", "shared"]) == 0
                assert main(["note", log, note_text(worker, call)]) == 0
    except BaseException:
        barrier.abort()
        raise


def writer(run_dir: str, name: str, opened: Any, barrier: Any) -> None:
    """Open the run, say so, then log RECORDS records once released, and close it."""
    try:
        with Run(name, run_dir, stdout=False, system=False, capture=False) as run:
            opened.set()
            barrier.wait()
            for step in range(RECORDS):
                run.log("train_step", step=step, loss=1.0 / (step + 1))
    except BaseException:
        barrier.abort()
        raise
