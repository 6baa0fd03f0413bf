"""A job that opens a run which other jobs open at the same moment (a requeued job, started
while the old one still runs). Imported by the spawn workers of test_concurrent_writers.py.

Each round, every worker is released by one barrier and opens the round's run; a refused worker
tries once more at once, as a scheduler's retry would. A worker that opens the run keeps it open
until every worker has reported, then checks that its lock file is still the one it locked.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from runlines import Run, RunLockedError

_TRIES = 2


def open_rounds(worker: int, run_dir: str, rounds: int, barrier: Any, results: Any) -> None:
    """Open run `round<N>` in *run_dir* each round; put (worker, round, what happened)."""
    try:
        _rounds(worker, Path(run_dir), rounds, barrier, results)
    except BaseException:
        barrier.abort()  # the test fails at once instead of waiting for this worker
        raise


def _rounds(worker: int, run_dir: Path, rounds: int, barrier: Any, results: Any) -> None:
    for round_ in range(rounds):
        barrier.wait()  # all released together
        run, refusals, locked = _open(run_dir, f"round{round_}")
        results.put((worker, round_, "opened" if run is not None else "refused", refusals))
        barrier.wait()  # every worker has reported: the run is still held by who opened it
        if run is not None:
            lock = run.path.with_name(run.path.name + ".lock")
            kept = locked is not None and _same_file(lock, locked)
            results.put((worker, round_, "lock kept", kept))
            run.log("held", worker=worker)
            run.close()
        barrier.wait()  # every run of this round is closed


def _open(run_dir: Path, name: str) -> tuple[Run | None, int, os.stat_result | None]:
    """Open *name*, trying again once when refused.

    Returns the run (None when refused every time), the refusals, and the lock file it holds
    (None when that was gone already).
    """
    for tries in range(_TRIES):
        try:
            # resume="allow": every job means this one run (with "auto" a job that finds it
            # live would start a run of its own, see test_reruns_racing)
            run = Run(name, run_dir, stdout=False, system=False, capture=False, resume="allow")
        except RunLockedError:
            continue
        try:
            locked = os.stat(run.path.with_name(run.path.name + ".lock"))  # the file it locked
        except OSError:
            locked = None  # removed already
        run.log("opened", tries=tries)
        return run, tries, locked
    return None, _TRIES, None


def _same_file(path: Path, before: os.stat_result) -> bool:
    """Return whether *path* is still the file *before* describes (not deleted, not replaced)."""
    try:
        return os.path.samestat(os.stat(path), before)
    except OSError:
        return False
