"""The core Run: records, identity, lifecycle, attempts, locking, threads, ranks and failures."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
from freezegun import freeze_time

import runlines
from runlines import FieldError, Run, RunLockedError, RunStateError

# Every test runs on log()'s C fast path and on its pure-Python path (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("fast_path")


def read(path: Path) -> list[dict[str, object]]:
    """Parse every line of a log, strictly: NaN tokens are refused."""
    lines = path.read_text().splitlines()
    return [json.loads(line, parse_constant=_refuse) for line in lines]


def _refuse(token: str) -> None:
    msg = f"non-strict JSON token {token}"
    raise AssertionError(msg)


def finish(child: subprocess.Popen[str]) -> int:
    """Wait for *child*, closing its pipes, and return its exit code."""
    child.communicate(timeout=60)
    return child.returncode


def events(path: Path, name: str) -> list[dict[str, object]]:
    return [r for r in read(path) if r["event"] == name]


def run_child(code: str, *, env: dict[str, str] | None = None, **kw: Any) -> subprocess.Popen[str]:
    """Start a Python child running *code* with runlines importable."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


class TestRecords:
    def test_record_starts_with_ts_event_run_then_fields_in_order(self, run_dir: Path) -> None:
        with freeze_time("2026-01-01T00:00:00Z"), Run("baseline", run_dir, stdout=False) as run:
            run.log("train_step", epoch=3, step=1200, loss=0.412, lr=3e-4)
            run.log("train_step", epoch=3, step=1201, loss=0.5, lr=3e-4)  # the C path's, if on

        lines = run.path.read_text().splitlines()[1:3]
        assert lines == [
            '{"ts":1767225600.0,"event":"train_step","run":"baseline",'
            '"epoch":3,"step":1200,"loss":0.412,"lr":0.0003}',
            '{"ts":1767225600.0,"event":"train_step","run":"baseline",'
            '"epoch":3,"step":1201,"loss":0.5,"lr":0.0003}',
        ]

    def test_log_file_is_named_after_the_run_in_a_created_directory(self, run_dir: Path) -> None:
        with Run("exp-1", run_dir / "deep" / "er", stdout=False) as run:
            pass

        assert run.path == run_dir / "deep" / "er" / "exp-1.jsonl"
        assert run.path.exists()
        assert run.name == "exp-1"

    def test_run_ids_are_unique_and_sort_by_start_time(self, run_dir: Path) -> None:
        with freeze_time("2026-01-01T00:00:00Z") as frozen:
            first = Run("a", run_dir, stdout=False)
            frozen.tick(1)
            second = Run("b", run_dir, stdout=False)
        first.close()
        second.close()

        assert first.id != second.id
        assert sorted([second.id, first.id]) == [first.id, second.id]

    def test_every_record_reaches_the_file_before_log_returns(self, run_dir: Path) -> None:
        with Run("r", run_dir, stdout=False) as run:
            for step in (1, 2):
                run.log("step", step=step)

                assert events(run.path, "step")[-1] == {
                    "ts": events(run.path, "step")[-1]["ts"],
                    "event": "step",
                    "run": "r",
                    "step": step,
                }

    def test_non_string_event_name_is_a_type_error(self, run_dir: Path) -> None:
        with (
            Run("r", run_dir, stdout=False) as run,
            pytest.raises(TypeError, match="event name must be a str"),
        ):
            run.log(["not", "a", "name"])  # type: ignore[arg-type]

    def test_empty_event_name_is_a_value_error(self, run_dir: Path) -> None:
        with (
            Run("r", run_dir, stdout=False) as run,
            pytest.raises(ValueError, match="event name is empty"),
        ):
            run.log("")

    @pytest.mark.parametrize("reserved", ["ts", "event", "run", "rank", "_nonfinite"])
    def test_reserved_field_name_is_refused_with_its_name(
        self, run_dir: Path, reserved: str
    ) -> None:
        with Run("r", run_dir, stdout=False) as run:
            with pytest.raises(FieldError, match=f"field '{reserved}' is reserved"):
                run.log("step", **{reserved: 1})
            run.log("step", step=1)  # the run goes on
            run.log("step", step=2)

        assert [r["step"] for r in events(run.path, "step")] == [1, 2]

    def test_bad_run_name_says_what_a_name_may_hold(self, run_dir: Path) -> None:
        with pytest.raises(FieldError, match="letters, digits"):
            Run("../escape", run_dir, stdout=False)

    def test_log_after_close_names_the_run_and_the_fix(self, run_dir: Path) -> None:
        run = Run("exp-3", run_dir, stdout=False)
        run.close()

        with pytest.raises(RunStateError, match="cannot log to run 'exp-3' after it closed"):
            run.log("step", step=1)

    def test_reentering_a_closed_run_is_refused(self, run_dir: Path) -> None:
        run = Run("r", run_dir, stdout=False)
        run.close()

        with pytest.raises(RunStateError, match="cannot be reopened"), run:
            pass


class TestLifecycle:
    def test_run_start_describes_the_process_and_config(self, run_dir: Path) -> None:
        with Run("r", run_dir, config={"lr": 3e-4, "batch_size": 64}, stdout=False) as run:
            pass

        start = events(run.path, "run_start")[0]
        assert start["id"] == run.id
        assert start["attempt"] == 1
        assert start["pid"] == os.getpid()
        assert start["runlines"] == runlines.__version__
        assert start["python"] == ".".join(map(str, sys.version_info[:3]))
        assert start["argv"] == sys.argv
        assert start["cwd"] == os.getcwd()
        assert isinstance(start["host"], str)
        assert start["config"] == {"lr": 3e-4, "batch_size": 64}

    def test_run_start_records_git_commit_and_dirty_flag(
        self, run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        repo = tmp_path / "repo"
        repo.mkdir()
        git = ["git", "-c", "user.email=a@b.c", "-c", "user.name=t"]
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        (repo / "train.py").write_text("x = 1\n")
        subprocess.run([*git, "-C", str(repo), "add", "."], check=True)
        subprocess.run([*git, "-C", str(repo), "commit", "-qm", "init"], check=True)
        commit = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        (repo / "train.py").write_text("x = 2\n")
        monkeypatch.chdir(repo)

        with Run("r", run_dir, stdout=False) as run:
            pass

        start = events(run.path, "run_start")[0]
        assert start["git_commit"] == commit
        assert start["git_dirty"] is True

    def test_config_may_be_a_dataclass_or_namespace(self, run_dir: Path) -> None:
        import argparse
        import dataclasses

        @dataclasses.dataclass
        class Config:
            lr: float = 0.1

        with Run("a", run_dir, config=Config(), stdout=False) as a:
            pass
        with Run("b", run_dir, config=argparse.Namespace(lr=0.2), stdout=False) as b:
            pass

        assert events(a.path, "run_start")[0]["config"] == {"lr": 0.1}
        assert events(b.path, "run_start")[0]["config"] == {"lr": 0.2}

    def test_config_of_another_type_is_refused_with_the_fix(self, run_dir: Path) -> None:
        with pytest.raises(TypeError, match=r"config must be a mapping.*config=dict"):
            Run("r", run_dir, config=[1, 2], stdout=False)

    def test_run_end_has_duration_and_status_ok(self, run_dir: Path) -> None:
        with freeze_time("2026-01-01T00:00:00Z") as frozen, Run("r", run_dir, stdout=False) as run:
            frozen.tick(2.5)

        end = events(run.path, "run_end")[0]
        assert end["status"] == "ok"
        assert end["duration_s"] == pytest.approx(2.5)
        assert end["dropped"] == 0
        assert end["id"] == run.id

    def test_exception_is_recorded_as_failed_and_propagates(self, run_dir: Path) -> None:
        with pytest.raises(ZeroDivisionError), Run("r", run_dir, stdout=False) as run:
            1 / 0  # noqa: B018

        end = events(run.path, "run_end")[0]
        assert end["status"] == "failed"
        assert end["exc_type"] == "ZeroDivisionError"
        assert end["exc_message"] == "division by zero"
        assert "ZeroDivisionError" in str(end["traceback"])

    def test_keyboard_interrupt_is_recorded_as_interrupted(self, run_dir: Path) -> None:
        with pytest.raises(KeyboardInterrupt), Run("r", run_dir, stdout=False) as run:
            raise KeyboardInterrupt

        assert events(run.path, "run_end")[0]["status"] == "interrupted"

    def test_sys_exit_records_its_code(self, run_dir: Path) -> None:
        with pytest.raises(SystemExit), Run("r", run_dir, stdout=False) as run:
            sys.exit(3)

        end = events(run.path, "run_end")[0]
        assert (end["status"], end["exit_code"]) == ("failed", 3)

    def test_run_works_without_with_and_closes_once(self, run_dir: Path) -> None:
        run = Run("r", run_dir, stdout=False)
        run.log("step", step=1)
        run.log("step", step=2)
        run.close()
        run.close()

        assert [r["event"] for r in read(run.path)] == ["run_start", "step", "step", "run_end"]
        assert run.closed

    def test_run_left_open_is_closed_at_interpreter_exit(self, run_dir: Path) -> None:
        child = run_child(
            f"""
            from runlines import Run
            run = Run("r", {str(run_dir)!r}, stdout=False)
            run.log("step", step=1)
            """
        )

        assert finish(child) == 0
        assert [r["event"] for r in read(run_dir / "r.jsonl")] == ["run_start", "step", "run_end"]
        assert events(run_dir / "r.jsonl", "run_end")[0]["status"] == "ok"

    def test_a_child_process_writes_on_the_path_of_the_test(
        self, run_dir: Path, fast_path: str
    ) -> None:
        """tests/conftest.py: on the "python" side, a child starts without the extension."""
        child = run_child(
            f"""
            from runlines import Run
            with Run("r", {str(run_dir)!r}, stdout=False) as run:
                run.log("step", step=1)
                run.log("step", step=2)
            """
        )

        assert finish(child) == 0
        assert events(run_dir / "r.jsonl", "run_start")[0]["writer"] == fast_path

    def test_uncaught_exception_without_with_is_recorded_as_failed(self, run_dir: Path) -> None:
        child = run_child(
            f"""
            from runlines import Run
            run = Run("r", {str(run_dir)!r}, stdout=False)
            raise ValueError("boom")
            """
        )

        assert finish(child) == 1
        end = events(run_dir / "r.jsonl", "run_end")[0]
        assert (end["status"], end["exc_type"]) == ("failed", "ValueError")


class TestSignals:
    def test_a_forked_child_gets_the_signal_handlers_it_had_without_runlines(
        self, run_dir: Path
    ) -> None:
        """Its parent owns run_end; and a Pool worker told to end must end, not wait to run
        a handler in Python (it may be blocked on a lock)."""
        before = signal.getsignal(signal.SIGTERM)
        with Run("r", run_dir, stdout=False) as run:
            assert signal.getsignal(signal.SIGTERM) is not before  # runlines' own, here
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: report its handlers, then leave without cleanup
                same = all(
                    signal.getsignal(s) == was
                    for s, was in [(signal.SIGTERM, before), (signal.SIGUSR1, signal.SIG_DFL)]
                )
                os.write(write, b"1" if same else b"0")
                os._exit(0)
            os.close(write)
            _, status = os.waitpid(pid, 0)
            told = os.read(read, 1)
            os.close(read)
            run.log("step", seq=1)
        assert (status, told) == (0, b"1")

    def test_sigterm_writes_terminated_then_ends_the_process_by_the_signal(
        self, run_dir: Path
    ) -> None:
        child = run_child(
            f"""
            import sys
            from runlines import Run
            with Run("r", {str(run_dir)!r}, stdout=False) as run:
                run.log("step", step=1)
                print("ready", flush=True)
                sys.stdin.readline()
            """,
            stdin=subprocess.PIPE,
        )
        assert child.stdout is not None
        assert child.stdout.readline() == "ready\n"

        child.send_signal(signal.SIGTERM)

        assert finish(child) == -signal.SIGTERM
        end = events(run_dir / "r.jsonl", "run_end")[0]
        assert (end["status"], end["signal"]) == ("terminated", "SIGTERM")

    def test_sigterm_chains_to_the_users_handler(self, run_dir: Path) -> None:
        child = run_child(
            f"""
            import os, signal, sys
            from runlines import Run
            def handler(signum, frame):
                print("user handler", flush=True)
                sys.exit(7)
            signal.signal(signal.SIGTERM, handler)
            with Run("r", {str(run_dir)!r}, stdout=False):
                os.write(1, b"ready\\n")  # not print(): the handler's print() may run inside it
                sys.stdin.readline()
            """,
            stdin=subprocess.PIPE,
        )
        assert child.stdout is not None
        assert child.stdout.readline() == "ready\n"

        child.send_signal(signal.SIGTERM)

        out, _ = child.communicate(timeout=60)
        assert child.returncode == 7
        assert out == "user handler\n"
        assert events(run_dir / "r.jsonl", "run_end")[0]["status"] == "terminated"

    def test_sigusr1_is_recorded_and_ends_nothing(self, run_dir: Path) -> None:
        seen: list[int] = []
        previous = signal.signal(signal.SIGUSR1, lambda signum, frame: seen.append(signum))
        try:
            with Run("r", run_dir, stdout=False) as run:
                run.log("step", step=1)
                os.kill(os.getpid(), signal.SIGUSR1)
                run.log("step", step=2)
        finally:
            signal.signal(signal.SIGUSR1, previous)

        assert seen == [signal.SIGUSR1]
        assert [r["event"] for r in read(run.path)] == [
            "run_start",
            "step",
            "signal",
            "step",
            "run_end",
        ]
        assert events(run.path, "signal")[0]["signal"] == "SIGUSR1"

    def test_handlers_are_restored_after_close(self, run_dir: Path) -> None:
        before = signal.getsignal(signal.SIGTERM)

        with Run("r", run_dir, stdout=False):
            assert signal.getsignal(signal.SIGTERM) is not before

        assert signal.getsignal(signal.SIGTERM) is before


class TestDurability:
    def test_sigkill_loses_no_acknowledged_record(self, run_dir: Path) -> None:
        child = run_child(
            f"""
            import sys
            from runlines import Run
            run = Run("r", {str(run_dir)!r}, stdout=False)
            for step in range(1_000_000):
                run.log("train_step", step=step, loss=1.0 / (step + 1), note="x" * (step % 50))
                sys.stdout.write(f"{{step}}\\n")
                sys.stdout.flush()
            """
        )
        assert child.stdout is not None
        for _ in range(2000):
            acknowledged = int(child.stdout.readline())

        child.kill()
        finish(child)

        lines = (run_dir / "r.jsonl").read_bytes().split(b"\n")
        parsed = [json.loads(line) for line in lines[:-1]]  # every complete line parses
        steps = [r["step"] for r in parsed if r["event"] == "train_step"]
        assert steps[: acknowledged + 1] == list(range(acknowledged + 1))

    def test_fsync_syncs_every_record(self, run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        import runlines.sinks

        synced: list[int] = []
        monkeypatch.setattr(runlines.sinks, "_sync", synced.append)

        with Run("r", run_dir, stdout=False, fsync=True) as run:
            run.log("step", step=1)

        assert len(synced) == 3  # run_start, step, run_end

    def test_eight_threads_write_whole_lines(self, run_dir: Path) -> None:
        with Run("r", run_dir, stdout=False) as run:

            def work(thread: int) -> None:
                for step in range(5000):
                    run.log("train_step", thread=thread, step=step, loss=0.5)

            threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()

        steps = events(run.path, "train_step")
        assert len(steps) == 40_000
        for thread in range(8):
            assert [r["step"] for r in steps if r["thread"] == thread] == list(range(5000))


class TestAttempts:
    def test_reopening_appends_with_the_next_attempt(self, run_dir: Path) -> None:
        with Run("r", run_dir, stdout=False) as first:
            first.log("step", step=1)
            first.log("step", step=2)
        with Run("r", run_dir, stdout=False, resume_step=2, resume="allow") as second:
            second.log("step", step=3)
            second.log("step", step=4)

        starts = events(second.path, "run_start")
        assert [s["attempt"] for s in starts] == [1, 2]
        assert starts[1]["resume_step"] == 2
        assert second.attempt == 2
        assert [r["step"] for r in events(second.path, "step")] == [1, 2, 3, 4]

    def test_torn_last_line_is_ended_before_the_next_attempt(self, run_dir: Path) -> None:
        with Run("r", run_dir, stdout=False) as first:
            first.log("step", step=1)
        with first.path.open("ab") as file:
            file.write(b'{"ts":1.0,"event":"step","ru')

        with Run("r", run_dir, stdout=False, resume="allow") as second:
            second.log("step", step=2)
            second.log("step", step=3)

        lines = second.path.read_text().splitlines()
        torn = [line for line in lines if line.endswith('"ru')]
        assert torn == ['{"ts":1.0,"event":"step","ru']
        assert [json.loads(line)["event"] for line in lines if line not in torn][-4:] == [
            "run_start",
            "step",
            "step",
            "run_end",
        ]

    def test_bad_resume_step_is_refused(self, run_dir: Path) -> None:
        with pytest.raises(FieldError, match="resume_step must be a non-negative int"):
            Run("r", run_dir, stdout=False, resume_step=-1)

    def test_second_live_process_is_refused_with_pid_and_host(self, run_dir: Path) -> None:
        child = run_child(
            f"""
            import sys
            from runlines import Run
            with Run("r", {str(run_dir)!r}, stdout=False):
                print("ready", flush=True)
                sys.stdin.readline()
            """,
            stdin=subprocess.PIPE,
        )
        assert child.stdout is not None
        assert child.stdout.readline() == "ready\n"

        with pytest.raises(
            RunLockedError, match=rf"already being written by pid {child.pid} on host"
        ):
            Run("r", run_dir, stdout=False, resume="allow")

        child.communicate("\n", timeout=60)
        assert child.returncode == 0
        Run("r", run_dir, stdout=False, resume="allow").close()  # free once the holder ended


class TestDistributed:
    def test_two_ranks_write_one_run_in_per_rank_files(self, run_dir: Path) -> None:
        # rank 0 stays open until rank 1 has run: a rank 1 that opens after its rank 0 ended
        # waits 30 s for it before it chooses from its own logs (_logfile._rank_zero_run)
        code = f"""
            import os, sys
            from runlines import Run
            with Run("ddp", {str(run_dir)!r}, console="json") as run:
                if os.environ["RANK"] == "0":
                    print("open", file=sys.stderr, flush=True)
                    sys.stdin.readline()
                for step in range(100):
                    run.log("train_step", step=step, loss=0.1)
            """
        env = {"WORLD_SIZE": "2", "LOCAL_RANK": "0"}
        first = run_child(code, env={**env, "RANK": "0"}, stdin=subprocess.PIPE)
        assert first.stderr is not None
        assert first.stderr.readline() == "open\n"
        second = run_child(code, env={**env, "RANK": "1", "LOCAL_RANK": "1"})
        output1 = second.communicate(timeout=60)[0]
        output0 = first.communicate(input="go\n", timeout=60)[0]
        children, outputs = [first, second], [output0, output1]

        assert [child.returncode for child in children] == [0, 0]
        rank0, rank1 = run_dir / "ddp.jsonl", run_dir / "ddp.rank1.jsonl"
        assert {r["rank"] for r in read(rank0)} == {0}
        assert {r["rank"] for r in read(rank1)} == {1}
        assert len(events(rank0, "train_step")) == len(events(rank1, "train_step")) == 100
        assert events(rank0, "run_start")[0]["world_size"] == 2
        assert len(outputs[0].splitlines()) == 102  # rank 0 alone writes to stdout
        assert outputs[1] == ""

    def test_rank_is_none_outside_a_distributed_job(
        self, run_dir: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv("WORLD_SIZE", raising=False)

        with Run("r", run_dir, stdout=False) as run:
            run.log("step", step=1)
            run.log("step", step=2)

        assert run.rank is None
        assert ["rank" in r for r in events(run.path, "step")] == [False, False]


class TestConsole:
    def test_stdout_gets_json_when_not_a_terminal(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        with Run("r", run_dir) as run:
            run.log("train_step", step=1, loss=0.5)

        out = capsys.readouterr().out.splitlines()
        assert [json.loads(line)["event"] for line in out] == ["run_start", "train_step", "run_end"]

    def test_terminal_gets_compact_aligned_lines(
        self, run_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        monkeypatch.setattr(sys.stdout, "isatty", lambda: True)

        with freeze_time("2026-01-01T12:00:01"), Run("r", run_dir) as run:
            run.log("train_step", epoch=3, step=1200, loss=0.412, lr=3e-4)

        # a hot event's status line, left on screen as a line when the run ends
        line = capsys.readouterr().out.split("\n")[1].rsplit("\r\x1b[K", 1)[-1]
        assert line.endswith("train_step   epoch=3 step=1200 loss=0.412 lr=0.0003")
        assert json.loads(run.path.read_text().splitlines()[1])["loss"] == 0.412  # file stays JSON

    def test_console_pretty_and_json_force_the_format(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        with Run("a", run_dir, console="pretty") as run:
            run.log("train_step", step=1)
        pretty = capsys.readouterr().out.split("\n")[1]  # the status line, left as a line
        with Run("b", run_dir, console="json") as run:
            run.log("train_step", step=1)
        as_json = capsys.readouterr().out.splitlines()[1]

        assert "train_step" in pretty
        assert "step=1" in pretty
        assert json.loads(as_json)["step"] == 1

    def test_stdout_false_writes_nothing_to_stdout(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        with Run("r", run_dir, stdout=False) as run:
            run.log("step", step=1)
            run.log("step", step=2)

        assert capsys.readouterr().out == ""

    def test_unknown_console_mode_is_refused(self, run_dir: Path) -> None:
        with pytest.raises(ValueError, match="console must be 'auto', 'json' or 'pretty'"):
            Run("r", run_dir, console="fancy")  # type: ignore[arg-type]


class TestFailures:
    def test_full_disk_counts_drops_and_keeps_stdout_working(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        with Run("r", run_dir, console="json") as run:
            full = os.open("/dev/full", os.O_WRONLY)
            os.dup2(full, run._file.fd)
            os.close(full)
            for step in range(3):
                run.log("step", step=step)
            assert run.dropped == 3

        captured = capsys.readouterr()
        assert captured.err.count("runlines: warning: the file sink failed") == 1
        out = [json.loads(line) for line in captured.out.splitlines()]
        assert [r["step"] for r in out if r["event"] == "step"] == [0, 1, 2]
        assert out[-1]["event"] == "run_end"
        assert out[-1]["dropped"] == 3

    def test_directory_that_cannot_be_created_fails_at_once(self, tmp_path: Path) -> None:
        blocker = tmp_path / "file"
        blocker.write_text("")

        with pytest.raises(OSError, match="cannot create the run directory"):
            Run("r", blocker / "runs", stdout=False)
