"""How a run ends: the right run_end status, and the exit code the job would have had anyway.

Each scenario runs _ending.py twice side by side, with and without runlines, and compares the
two processes' exit codes and last stderr lines.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _reliability import finish, read_log, spawn

from runlines import cli
from runlines.reading import lifecycle, run_status

# Every test runs on log()'s C fast path and on its pure-Python path (tests/conftest.py); the
# child processes follow it (RUNLINES_NO_SPEEDUPS=1 on the "python" side).
pytestmark = pytest.mark.usefixtures("fast_path")

_ACKS_BEFORE_SIGNAL = 200


@dataclass(frozen=True)
class Ended:
    code: int
    out: str
    err: str


def _wait_ready(child: subprocess.Popen[bytes]) -> None:
    assert child.stdout is not None
    assert child.stdout.readline() == b"ready\n"


def _wait_acks(child: subprocess.Popen[bytes]) -> None:
    assert child.stdout is not None
    for _ in range(_ACKS_BEFORE_SIGNAL):
        assert child.stdout.readline().startswith(b"ack ")


def side_by_side(
    mode: str, run_dir: Path, prepare: Callable[[subprocess.Popen[bytes]], None] | None = None
) -> tuple[Ended, Ended]:
    """Run *mode* with and without runlines at once; *prepare* each, then signal or wait."""
    children = [
        spawn("_ending.py", mode, use, str(run_dir), stdin=subprocess.PIPE) for use in ("1", "0")
    ]
    ended = []
    try:
        for child in children:
            if prepare is not None:
                prepare(child)
        for child in children:
            if mode.startswith("sigterm"):
                child.send_signal(signal.SIGTERM)
            elif mode == "sigint":
                child.send_signal(signal.SIGINT)
    finally:
        for child in children:
            ended.append(Ended(*finish(child)))
    return ended[0], ended[1]


def _run_end(run_dir: Path) -> dict[str, Any] | None:
    records, tail = read_log(run_dir / "r.jsonl")
    assert tail == b"", "a run that ended by itself ends its last line"
    ends = [r for r in records if r["event"] == "run_end"]
    assert len(ends) <= 1
    if ends:
        assert records[-1] is ends[0], "run_end is the last record"
    return ends[0] if ends else None


def _last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else ""


@pytest.mark.parametrize(
    ("mode", "prepare", "code", "status", "details"),
    [
        ("sigterm", _wait_ready, -signal.SIGTERM, "terminated", {"signal": "SIGTERM"}),
        ("sigint", _wait_ready, -signal.SIGINT, "interrupted", {}),
        ("exception", None, 1, "failed", {"exc_type": "ValueError", "exc_message": "boom"}),
        ("exit3", None, 3, "failed", {"exit_code": 3, "exc_type": "SystemExit"}),
        ("exit_message", None, 1, "failed", {"exit_code": 1, "exc_message": "cannot continue"}),
    ],
)
def test_run_end_status_and_exit_code_match_the_job_without_runlines(
    run_dir: Path,
    mode: str,
    prepare: Callable[[subprocess.Popen[bytes]], None] | None,
    code: int,
    status: str,
    details: dict[str, Any],
) -> None:
    with_runlines, without = side_by_side(mode, run_dir, prepare)

    assert (with_runlines.code, without.code) == (code, code)
    assert _last_line(with_runlines.err) == _last_line(without.err)
    assert "runlines:" not in with_runlines.err
    end = _run_end(run_dir)
    assert end is not None
    assert end["status"] == status
    assert {key: end.get(key) for key in details} == details


def test_os_exit_leaves_no_run_end_and_the_readers_call_the_run_died(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with_runlines, without = side_by_side("os_exit", run_dir)

    assert (with_runlines.code, without.code) == (5, 5)
    assert _run_end(run_dir) is None
    log = run_dir / "r.jsonl"
    assert run_status(log, lifecycle(log)) == "died"
    assert cli.main(["ls", str(run_dir)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("r "))
    assert "died" in row


def test_sigterm_while_logging_at_full_speed_ends_with_run_end_after_every_ack(
    run_dir: Path,
) -> None:
    with_runlines, without = side_by_side("sigterm_busy", run_dir, _wait_acks)

    assert (with_runlines.code, without.code) == (-signal.SIGTERM, -signal.SIGTERM)
    # _wait_acks read the first acknowledgements; the rest came before the signal landed
    later = [int(line.split()[1]) for line in with_runlines.out.splitlines() if "ack" in line]
    last_acked = max([_ACKS_BEFORE_SIGNAL, *later])
    end = _run_end(run_dir)
    assert end is not None
    assert (end["status"], end["signal"]) == ("terminated", "SIGTERM")
    records, _ = read_log(run_dir / "r.jsonl")
    steps = [r["step"] for r in records if r["event"] == "step"]
    assert steps == list(range(len(steps)))
    assert steps[-1] >= last_acked


def test_sigterm_with_a_graceful_handler_lets_the_job_checkpoint_and_exit_zero(
    run_dir: Path,
) -> None:
    """The usual preemption pattern: the handler sets a flag, the loop checkpoints and leaves.

    runlines must not end the run under the job's feet: a log() after the signal must work.
    """
    with_runlines, without = side_by_side("sigterm_graceful", run_dir, _wait_acks)

    assert without.code == 0
    assert with_runlines.code == 0, _last_line(with_runlines.err)
    records, _ = read_log(run_dir / "r.jsonl")
    assert [r["event"] for r in records[-2:]] == ["checkpoint", "run_end"]
    end = _run_end(run_dir)
    assert end is not None
    assert (end["status"], end["signal"]) == ("terminated", "SIGTERM")


@pytest.mark.parametrize(
    ("where", "statuses"),
    [
        ("main", {"terminated"}),
        ("thread", {"terminated"}),
        ("close", {"ok", "terminated"}),  # "terminated" when SIGTERM landed before close()
    ],
    ids=["logging", "logging-in-a-thread", "closing"],
)
def test_sigterm_ends_a_job_blocked_on_a_full_stdout_pipe_with_run_end(
    run_dir: Path, where: str, statuses: set[str]
) -> None:
    """A log collector stopped reading: the job's writes to stdout block, SIGTERM still ends it."""
    read_end, write_end = os.pipe()
    try:
        child = spawn(
            "_full_stdout.py", where, str(run_dir), stdout=write_end, stdin=subprocess.PIPE
        )
    finally:
        os.close(write_end)
    try:
        assert child.stderr is not None
        assert child.stdin is not None
        assert child.stderr.readline() == b"ready\n"
        _fill(read_end)  # every write to stdout blocks from now on
        if where == "close":
            child.stdin.write(b"go\n")
            child.stdin.flush()
            assert child.stderr.readline() == b"closing\n"

        child.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        try:
            code = child.wait(timeout=2 * _ENDS_WITHIN_S)
        except subprocess.TimeoutExpired:
            child.kill()
            raise AssertionError("SIGTERM did not end a job blocked on stdout") from None
        took_s = time.monotonic() - sent
    finally:
        os.close(read_end)  # a child still blocked on stdout gets EPIPE
        finish(child)

    assert code == -signal.SIGTERM
    assert took_s < _ENDS_WITHIN_S
    end = _run_end(run_dir)
    assert end is not None
    assert end["status"] in statuses
    assert end.get("signal") == (None if end["status"] == "ok" else "SIGTERM")


_ENDS_WITHIN_S = 5.0


def _fill(read_end: int) -> None:
    """Fill the pipe that *read_end* reads, through a non-blocking description of its own."""
    # /proc/self/fd opens a new open file description: O_NONBLOCK on it leaves the job's blocking
    filler = os.open(f"/proc/self/fd/{read_end}", os.O_WRONLY | os.O_NONBLOCK)
    try:
        for size in (4096, 1):  # whole pages, then the last page's free bytes
            while True:
                try:
                    os.write(filler, b"x" * size)
                except BlockingIOError:
                    break
    finally:
        os.close(filler)
