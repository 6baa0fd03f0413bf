"""How a run ends while other things happen: threads logging, signals, forks, Ctrl-C.

Each runs on the C fast path and on the pure-Python one (the `fast_path` fixture), the jobs in
child processes too.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import runlines
from runlines import Run, RunStateError, _lifecycle, _writer

# Every test runs on log()'s C fast path and on its pure-Python path (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("fast_path")

SRC = Path(runlines.__file__).resolve().parents[1]  # children import the runlines under test
WATCHDOG_S = 60  # a child that hangs fails its test instead of stopping the suite


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line]


@pytest.fixture(name="fast_switching")
def _fast_switching() -> Iterator[None]:
    """Switch threads as often as the interpreter allows, so races show in a few rounds."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def log_until_refused(run: Run, thread: int, started: Any, outcomes: list[str]) -> None:
    started.wait()
    try:
        for i in range(1_000_000):
            run.log("tick", thread=thread, i=i)
    except RunStateError:
        outcomes.append("refused")


class TestCloseRacingLog:
    @pytest.mark.parametrize(
        "options",
        [
            pytest.param({"stdout": False}, id="direct-writes"),
            pytest.param({"console": "json"}, id="through-the-sinks"),  # sys.stdout is pytest's
        ],
    )
    def test_a_file_opened_right_after_close_gets_no_line_of_the_run(
        self,
        tmp_path: Path,
        fast_switching: None,
        capfd: pytest.CaptureFixture[str],
        options: dict[str, Any],
    ) -> None:
        """Threads log while the run closes; the next file takes the log's descriptor number."""
        payload = b"checkpoint-bytes;" * 4096
        for round_ in range(20):
            run = Run(f"r{round_}", tmp_path, **options)
            started = threading.Barrier(5)
            outcomes: list[str] = []
            threads = [
                threading.Thread(target=log_until_refused, args=(run, t, started, outcomes))
                for t in range(4)
            ]
            for thread in threads:
                thread.start()
            started.wait()
            run.close()
            checkpoint = tmp_path / f"ckpt{round_}.bin"
            with open(checkpoint, "wb", buffering=0) as file:
                for start in range(0, len(payload), 4096):
                    file.write(payload[start : start + 4096])
            for thread in threads:
                thread.join(WATCHDOG_S)

            assert checkpoint.read_bytes() == payload
            assert outcomes == ["refused"] * 4
            logged = records(run.path)
            assert logged[-1]["event"] == "run_end"
            assert [r["event"] for r in logged].count("run_end") == 1
            # a write to the closed descriptor, which no other file took this time
            assert "Bad file descriptor" not in capfd.readouterr().err

    def test_log_after_close_raises_and_writes_nothing(self, tmp_path: Path) -> None:
        run = Run("r", tmp_path, stdout=False)
        run.log("tick", i=1)
        run.close()

        with pytest.raises(RunStateError, match="after it closed"):
            run.log("tick", i=2)
        assert [r["event"] for r in records(run.path)] == ["run_start", "tick", "run_end"]


class TestSignalWhileALockIsHeld:
    """The handler never waits for a lock the interrupted code may hold (here: the test)."""

    def test_sigterm_while_the_samplers_lock_is_held_ends_the_run_once_it_is_free(
        self, tmp_path: Path
    ) -> None:
        run = Run("r", tmp_path, stdout=False)
        run.sample("batch", every=10, aggregate=True)
        for i in range(15):
            run.log("batch", loss=float(i))
        sampler = run._samplers["batch"]

        with sampler._lock:  # as when SIGTERM lands inside log() of the aggregated event
            assert call_handler(run, signal.SIGTERM, ends_process=True) is False
            assert not run._ended.is_set()
        assert run._ended.wait(WATCHDOG_S)

        logged = records(run.path)
        assert [r["event"] for r in logged] == ["run_start", "batch", "batch", "run_end"]
        assert [r["n"] for r in logged[1:3]] == [10, 5]
        assert logged[-1]["status"] == "terminated"
        assert logged[-1]["signal"] == "SIGTERM"

    def test_sigterm_while_the_write_lock_is_held_ends_the_run_once_it_is_free(
        self, tmp_path: Path
    ) -> None:
        run = Run("r", tmp_path, stdout=False)
        run.log("tick", i=1)

        with run._io_lock:  # as when SIGTERM lands between log()'s check and its writes
            assert call_handler(run, signal.SIGTERM, ends_process=True) is False
        assert run._ended.wait(WATCHDOG_S)

        assert [r["event"] for r in records(run.path)] == ["run_start", "tick", "run_end"]
        assert run.closed

    def test_a_notice_signal_while_the_write_lock_is_held_is_written_once_it_is_free(
        self, tmp_path: Path
    ) -> None:
        run = Run("r", tmp_path, stdout=False)

        with run._io_lock:
            assert call_handler(run, signal.SIGUSR1, ends_process=False) is True
        run.close()

        events = [r["event"] for r in records(run.path)]
        assert events in (
            ["run_start", "signal", "run_end"],
            ["run_start", "run_end"],  # the helper came after the close: nothing after run_end
        )
        assert events[-1] == "run_end"


def finish(child: Any, hung: str) -> tuple[str, str]:
    """Wait for *child* under the watchdog and return its output; a hang fails the test."""
    try:
        out, err = child.communicate(timeout=WATCHDOG_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        pytest.fail(hung)
    return out, err


def call_handler(run: Run, signum: int, *, ends_process: bool) -> bool:
    """Call the run's part of the signal handler; fail, instead of hanging, if it blocks."""
    result: list[bool] = []
    handler = threading.Thread(
        target=lambda: result.append(run._on_signal(signum, ends_process)), daemon=True
    )
    handler.start()
    handler.join(WATCHDOG_S / 4)
    assert result, "the signal handler waited for a lock that the interrupted code holds"
    return result[0]


def run_child(script: str, tmp_path: Path) -> Any:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script), str(tmp_path)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


HOT_AGGREGATED_LOOP = """
    import sys
    from runlines import Run

    run = Run("hot", sys.argv[1], stdout=False)
    run.sample("batch", every=7, aggregate=True)
    with run:
        for i in range(100_000_000):
            run.log("batch", step=i, loss=0.5)
            if i == 2000:
                print("ready", flush=True)
"""


def test_sigterm_in_a_hot_aggregated_loop_ends_the_job_with_run_end(tmp_path: Path) -> None:
    for trial in range(5):
        folder = tmp_path / str(trial)
        child = run_child(HOT_AGGREGATED_LOOP, folder)
        assert child.stdout is not None
        assert child.stdout.readline() == "ready\n"

        child.send_signal(signal.SIGTERM)
        _, err = finish(child, f"trial {trial}: the job hung after SIGTERM")

        assert child.returncode == -signal.SIGTERM, err
        logged = records(folder / "hot.jsonl")
        assert logged[-1]["event"] == "run_end"
        assert logged[-1]["status"] == "terminated"
        steps = [r["step_last"] for r in logged if r["event"] == "batch"]
        assert steps == sorted(steps)
        assert sum(r["n"] for r in logged if r["event"] == "batch") == steps[-1] + 1


SIGNAL_DURING_CLOSE = """
    import os, signal, sys
    from runlines import Run

    run = Run("r", sys.argv[1], stdout=False)
    run.sample("batch", every=10, aggregate=True)
    for i in range(5):
        run.log("batch", step=i)
    kind = type(run._samplers["batch"])
    flush = kind.flush

    def flush_and_signal(self, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)  # lands while the run closes
        return flush(self, **kwargs)

    kind.flush = flush_and_signal
    {how}
    print("survived", flush=True)
"""


@pytest.mark.parametrize(
    "how",
    [
        pytest.param("run.close()", id="sigterm-during-close"),
        pytest.param("os.kill(os.getpid(), signal.SIGTERM)", id="second-sigterm-during-the-first"),
    ],
)
def test_sigterm_while_the_run_closes_still_writes_run_end(tmp_path: Path, how: str) -> None:
    child = run_child(SIGNAL_DURING_CLOSE.replace("{how}", how), tmp_path)
    out, err = finish(child, "the job hung after SIGTERM")

    assert child.returncode == -signal.SIGTERM, err
    assert "survived" not in out
    logged = records(tmp_path / "r.jsonl")
    assert [r["event"] for r in logged] == ["run_start", "batch", "run_end"]
    assert logged[1]["n"] == 5


TWO_SIGNALS_LOOP = """
    import sys
    from runlines import Run

    with Run("r", sys.argv[1], stdout=False) as run:
        for i in range(100_000_000):
            run.log("tick", i=i)
            if i == 2000:
                print("ready", flush=True)
"""


def test_two_sigterms_100_us_apart_leave_run_end(tmp_path: Path) -> None:
    """A scheduler and a launcher that forwards its signal: two SIGTERMs, close together."""
    for trial in range(5):
        folder = tmp_path / str(trial)
        child = run_child(TWO_SIGNALS_LOOP, folder)
        assert child.stdout is not None
        assert child.stdout.readline() == "ready\n"

        os.kill(child.pid, signal.SIGTERM)
        os.sched_yield()
        os.kill(child.pid, signal.SIGTERM)
        _, err = finish(child, f"trial {trial}: the job hung after two SIGTERMs")

        assert child.returncode == -signal.SIGTERM, err
        logged = records(folder / "r.jsonl")
        assert logged[-1]["event"] == "run_end", f"trial {trial}"
        assert logged[-1]["status"] == "terminated"


def test_a_child_forked_while_a_thread_holds_the_samplers_lock_logs(tmp_path: Path) -> None:
    run = Run("r", tmp_path, stdout=False)
    run.sample("batch", every=3, aggregate=True)
    run.log("batch", loss=1.0)
    sampler = run._samplers["batch"]
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with sampler._lock:  # as another thread inside log() of the aggregated event
            holding.set()
            release.wait(WATCHDOG_S)

    holder = threading.Thread(target=hold)
    holder.start()
    holding.wait(WATCHDOG_S)
    with run._io_lock:  # and one between log()'s check and its writes
        pid = os.fork()
    if pid == 0:  # the child: its first log() must not block on the parent's locks
        try:
            for i in range(6):
                run.log("batch", loss=float(i), child=True)
        finally:
            os._exit(0)
    release.set()
    holder.join(WATCHDOG_S)
    _, status = _wait_with_watchdog(pid)
    run.close()

    assert os.waitstatus_to_exitcode(status) == 0
    child_windows = [r for r in records(run.path) if r.get("child") is True]
    assert [r["n"] for r in child_windows] == [3, 3]


def _wait_with_watchdog(pid: int) -> tuple[int, int]:
    timer = threading.Timer(WATCHDOG_S, os.kill, (pid, signal.SIGKILL))
    timer.start()
    try:
        return os.waitpid(pid, 0)
    finally:
        timer.cancel()


def test_ctrl_c_while_a_full_window_is_written_keeps_its_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_now = _writer._now
    calls = {"n": 0}

    def interrupted_once() -> float:
        calls["n"] += 1
        if calls["n"] == 1:
            raise KeyboardInterrupt  # as Ctrl-C, after the window left the sampler
        return real_now()

    with pytest.raises(KeyboardInterrupt), Run("r", tmp_path, stdout=False) as run:
        run.sample("batch", every=999, aggregate=True)
        monkeypatch.setattr(_writer, "_now", interrupted_once)
        for i in range(999 + 500):
            run.log("batch", step=i)

    logged = records(run.path)
    batches = [r for r in logged if r["event"] == "batch"]
    assert [r["n"] for r in batches] == [999]
    assert logged[-1]["status"] == "interrupted"


def test_the_signal_hooks_are_restored_after_the_last_run(tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGTERM)
    with Run("r", tmp_path, stdout=False):
        assert signal.getsignal(signal.SIGTERM) is _lifecycle._handler
    assert signal.getsignal(signal.SIGTERM) is before


def test_handlers_come_back_after_a_run_closed_in_another_thread(tmp_path: Path) -> None:
    """Only the main thread can set handlers: the next run still restores the original one."""
    before = signal.getsignal(signal.SIGTERM)
    first = Run("a", tmp_path, stdout=False)
    closer = threading.Thread(target=first.close)
    closer.start()
    closer.join(WATCHDOG_S)

    with Run("b", tmp_path, stdout=False):
        pass

    assert signal.getsignal(signal.SIGTERM) is before


def test_sys_exit_is_wrapped_only_while_a_run_is_open(tmp_path: Path) -> None:
    before = sys.exit
    with Run("r", tmp_path, stdout=False):
        wrapped = sys.exit
        with pytest.raises(SystemExit) as raised:
            sys.exit(7)

    assert (wrapped is not before, sys.exit is before, raised.value.code) == (True, True, 7)
