"""The zygotes of the SIGKILL trials: a process that imports once and forks one writer per trial.

In the zygote (`_kill_writer.py`, `_media_writer.py`): `fork_trials(write_trial)` reads one
JSON trial spec a line on stdin and forks a writer for each, which prints `pid <pid>`, then
`ack <seq>` after every call that returned, until the test kills it; the zygote then prints
`done <wait status>`. Every line is one os.write below PIPE_BUF, so it arrives whole.
In the test: `Zygote(script)` drives one such process a trial at a time.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from _reliability import CHILD_TIMEOUT_S, spawn

import runlines._context


def no_git(cwd: str, timeout_s: float = 0.0) -> dict[str, Any]:
    """run_start's git probe starts subprocesses per Run; it has no part in durability."""
    return {}


def fork_trials(write_trial: Callable[[dict[str, Any]], None]) -> None:
    """Fork a writer running *write_trial(spec)* for each spec on stdin, one at a time."""
    runlines._context.git_state = no_git
    for line in sys.stdin:
        spec = json.loads(line)
        pid = os.fork()
        if pid == 0:
            try:
                write_trial(spec)
            except BaseException:
                traceback.print_exc()
            os._exit(70)  # only reached when the writer failed: the test sees status 70
        _, status = os.waitpid(pid, 0)
        os.write(1, b"done %d\n" % status)


@dataclass(frozen=True)
class Outcome:
    pid: int
    acked: int  # the highest seq acknowledged, -1 for none
    status: int  # the writer's wait status


class Zygote:
    """A zygote process (*script* with *args*), driven one trial at a time."""

    def __init__(self, script: str, *args: str) -> None:
        self.child = spawn(script, *args, stdin=subprocess.PIPE)
        self.writer = 0  # the pid of the trial's writer, once it said it

    def run(self, spec: dict[str, Any], acks: int, delay_s: float = 0.0) -> Outcome:
        """Start a writer for *spec*, SIGKILL it *delay_s* after *acks* acknowledgements, reap it.

        The delay lands the kill at a random point of the next call.
        """
        watchdog = threading.Timer(CHILD_TIMEOUT_S, self._kill_all)
        watchdog.start()
        try:
            return self._run(spec, acks, delay_s)
        finally:
            watchdog.cancel()
            self.writer = 0

    def close(self) -> None:
        self.child.communicate(timeout=CHILD_TIMEOUT_S)

    def _run(self, spec: dict[str, Any], acks: int, delay_s: float) -> Outcome:
        assert self.child.stdin is not None
        self.child.stdin.write(json.dumps(spec).encode() + b"\n")
        self.child.stdin.flush()
        self.writer = int(self._line().removeprefix("pid "))
        acked = -1
        while acked < acks - 1:
            line = self._line()
            assert line.startswith("ack "), f"writer failed before the kill: {line!r}"
            acked = int(line.removeprefix("ack "))
        if delay_s:
            time.sleep(delay_s)  # not a wait for time: where the kill lands is the point
        os.kill(self.writer, signal.SIGKILL)
        while (line := self._line()).startswith("ack "):
            acked = int(line.removeprefix("ack "))  # acknowledged before the kill landed
        return Outcome(self.writer, acked, int(line.removeprefix("done ")))

    def _kill_all(self) -> None:
        """The watchdog: a trial that hangs fails, it does not stop the suite."""
        if self.writer:
            os.kill(self.writer, signal.SIGKILL)
        self.child.kill()

    def _line(self) -> str:
        assert self.child.stdout is not None
        line = self.child.stdout.readline().decode()
        if not line:
            _, err = self.child.communicate()
            msg = f"the zygote ended early: {err.decode(errors='replace')}"
            raise AssertionError(msg)
        return line
