"""Children forked from a training process log through the inherited Run.

Data-loader workers with the fork start method: no duplicated or torn lines, no deadlock on an
inherited lock, and neither run_end nor the run's lock from a child.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from _fork_writer import CHILD_RECORDS, POOL_RECORDS
from _reliability import CHILD_TIMEOUT_S, finish, read_log, spawn, strict_loads

from runlines.reading import is_locked

# Every test runs on log()'s C fast path and on its pure-Python path (tests/conftest.py); the
# child processes follow it (RUNLINES_NO_SPEEDUPS=1 on the "python" side).
pytestmark = pytest.mark.usefixtures("fast_path")


def _by_writer(records: list[dict[str, Any]]) -> dict[str, list[int]]:
    seqs: dict[str, list[int]] = defaultdict(list)
    for record in records:
        if record["event"] == "tick":
            seqs[record["writer"]].append(record["seq"])
    return seqs


@pytest.mark.parametrize(
    "rounds",
    [pytest.param(3, id="3-rounds"), pytest.param(60, id="60-rounds", marks=pytest.mark.long)],
)
def test_forked_children_log_whole_lines_once_and_leave_run_end_and_lock_to_the_parent(
    run_dir: Path, tmp_path: Path, rounds: int
) -> None:
    with (tmp_path / "stdout").open("wb") as stdout:
        child = spawn(
            "_fork_writer.py",
            str(run_dir),
            str(rounds),
            stdin=subprocess.PIPE,
            stdout=stdout,
            new_session=True,
        )
    assert child.stderr is not None
    # A deadlock the writer notices exits 3 at its join timeout, with a message; one it cannot
    # notice (a child that never ends) meets this watchdog, which ends the whole process group.
    watchdog = threading.Timer(CHILD_TIMEOUT_S, os.killpg, (child.pid, signal.SIGKILL))
    watchdog.start()
    try:
        line = child.stderr.readline()
    finally:
        watchdog.cancel()
    if line != b"children done\n":
        code, _, err = finish(child)
        raise AssertionError(f"exit {code}: {(line + err.encode()).decode()}")

    locked_while_open = is_locked(run_dir / "r.jsonl")
    code, _, err = finish(child, b"go\n")
    out = (tmp_path / "stdout").read_text()

    assert code == 0, err
    assert "runlines: warning" not in err
    assert locked_while_open, "a child released the parent's lock"
    assert not is_locked(run_dir / "r.jsonl")
    records, tail = read_log(run_dir / "r.jsonl")
    assert tail == b""
    assert [r["event"] for r in records].count("run_end") == 1
    assert (records[0]["event"], records[-1]["event"]) == ("run_start", "run_end")
    assert records[-1]["status"] == "ok"
    seqs = _by_writer(records)
    for writer, numbers in seqs.items():
        if writer.startswith("parent"):
            assert numbers == list(range(len(numbers))), writer
        elif writer.startswith("pool"):
            assert numbers == list(range(POOL_RECORDS)), writer
        else:
            assert numbers == list(range(CHILD_RECORDS)), writer
    children = {w for w in seqs if not w.startswith("parent")}
    assert len(children) == rounds * 5 + 1  # 4 pool tasks and a Process per round, a plain fork
    streamed = [strict_loads(text) for text in out.splitlines()]
    assert sorted(map(repr, streamed)) == sorted(map(repr, records)), "stdout and file differ"
