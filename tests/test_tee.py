"""Console capture, Run(..., console_capture=True): real jobs in child processes, and the tee's
line cutting in-process."""

from __future__ import annotations

import fcntl
import json
import math
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import textwrap
import threading
import time
from pathlib import Path

import pytest

import runlines
from _optional import needs
from runlines import Run
from runlines._tee import Lines
from runlines.cli import main
from runlines.reading import ConsoleLine
from runlines.reading._console import parse_line, read_console

_SRC = str(Path(runlines.__file__).resolve().parents[1])
_TIMEOUT_S = 60


def _job(tmp_path: Path, body: str) -> list[str]:
    """Write a job script that runs *body* (indented code) and return its command line."""
    script = tmp_path / "job.py"
    script.write_text(
        "import ctypes, os, subprocess, sys, threading\n"
        "from runlines import Run\n" + textwrap.dedent(body)
    )
    return [sys.executable, str(script), str(tmp_path)]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    env["PYTHONPATH"] = os.pathsep.join([_SRC, env.get("PYTHONPATH", "")])
    return env


def _texts(path: Path, stream: str) -> list[str]:
    return [line.text for line in read_console(path) if line.stream == stream]


def _run(command: list[str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(command, capture_output=True, env=_env(), timeout=_TIMEOUT_S, check=True)


def test_prints_fd_writes_c_writes_and_children_reach_side_file_and_terminal(
    tmp_path: Path,
) -> None:
    command = _job(
        tmp_path,
        """
        with Run("r", sys.argv[1], console_capture=True, stdout=False, system=False):
            print("python print", flush=True)
            os.write(1, b"fd 1 write\\n")
            ctypes.CDLL(None).write(1, b"C write\\n", 8)
            subprocess.run(["sh", "-c", "echo child out; echo child err >&2"], check=True)
            print("python to stderr", file=sys.stderr, flush=True)
            os.write(2, b"fd 2 write\\n")
        print("after close", flush=True)
        """,
    )

    done = _run(command)

    side = tmp_path / "r.console.log"
    assert _texts(side, "out") == ["python print", "fd 1 write", "C write", "child out"]
    assert _texts(side, "err") == ["child err", "python to stderr", "fd 2 write"]
    assert done.stdout.decode().splitlines() == [
        "python print",
        "fd 1 write",
        "C write",
        "child out",
        "after close",
    ]
    assert done.stderr.decode().splitlines() == ["child err", "python to stderr", "fd 2 write"]


def test_side_file_lines_carry_the_time_they_were_printed(tmp_path: Path) -> None:
    command = _job(
        tmp_path,
        """
        side = os.path.join(sys.argv[1], "r.console.log")
        with Run("r", sys.argv[1], console_capture=True, stdout=False, system=False) as run:
            os.write(1, b"first\\n")
            while b"first" not in open(side, "rb").read():
                pass  # the tee has stamped it: the step is logged after
            run.log("step", step=7)
            os.write(1, b"second\\n")
        """,
    )

    _run(command)

    first, second = read_console(tmp_path / "r.console.log")
    records = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    step_ts = round(next(r["ts"] for r in records if r["event"] == "step"), 3)
    assert (first.text, second.text) == ("first", "second")
    assert first.ts <= step_ts <= second.ts


def test_runs_stdout_lines_pass_through_the_tee_once(tmp_path: Path) -> None:
    command = _job(
        tmp_path,
        """
        with Run("r", sys.argv[1], console_capture=True, console="json", system=False) as run:
            print("between", flush=True)
            run.log("step", step=1)
        """,
    )

    done = _run(command)

    events = [line for line in done.stdout.decode().splitlines() if '"event"' in line]
    assert [e.split('"event":"')[1].split('"')[0] for e in events] == [
        "run_start",
        "step",
        "run_end",
    ]
    texts = _texts(tmp_path / "r.console.log", "out")
    assert texts[0] == "between"
    assert [t for t in texts if '"event":"step"' in t] == [events[1]]


def test_redrawn_progress_bar_keeps_its_last_state(tmp_path: Path) -> None:
    command = _job(
        tmp_path,
        """
        with Run("r", sys.argv[1], console_capture=True, stdout=False, system=False):
            for i in range(101):
                sys.stdout.write(f"\\rtraining {i:3d}%")
                sys.stdout.flush()
            sys.stdout.write("\\n")
            print("done", flush=True)
        """,
    )

    done = _run(command)

    assert _texts(tmp_path / "r.console.log", "out") == ["training 100%", "done"]
    assert done.stdout.count(b"\r") == 101  # the terminal gets every redraw


def test_sigkill_mid_print_keeps_every_line_printed_before_it(tmp_path: Path) -> None:
    command = _job(
        tmp_path,
        """
        import itertools
        with Run("r", sys.argv[1], console_capture=True, stdout=False, system=False):
            for n in itertools.count():
                os.write(1, b"line %d\\n" % n)
                if n % 3 == 0:
                    print(f"print {n}", file=sys.stderr, flush=True)
        """,
    )
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env()
    ) as child:
        assert child.stdout is not None
        assert child.stderr is not None
        # stderr is read all along: a full stderr pipe would hold the tee (and the job) back
        stderr = child.stderr
        reached_stderr: list[bytes] = []
        drain = threading.Thread(target=lambda: reached_stderr.append(stderr.read()))
        drain.start()
        seen = b""
        while b"line 2000\n" not in seen:
            seen += child.stdout.read1(1 << 16)  # type: ignore[attr-defined]

        child.send_signal(signal.SIGKILL)
        child.wait(_TIMEOUT_S)
        seen += child.stdout.read()  # EOF: the tee drained the pipes and exited
        drain.join(_TIMEOUT_S)

    printed = seen.decode().splitlines()
    texts = _texts(tmp_path / "r.console.log", "out")
    assert texts == printed
    assert texts == [f"line {n}" for n in range(len(texts))]
    errors = _texts(tmp_path / "r.console.log", "err")
    assert errors == [f"print {n}" for n in range(0, 3 * len(errors), 3)]
    assert len(errors) >= 2000 // 3
    assert errors == reached_stderr[0].decode().splitlines()  # the side file holds what reached it


def test_close_restores_the_descriptors_and_a_second_run_captures_again(tmp_path: Path) -> None:
    command = _job(
        tmp_path,
        """
        import warnings
        def where():
            return [os.readlink(f"/proc/self/fd/{fd}") for fd in (1, 2)]
        before = where()
        for name in ("one", "two"):
            with Run(name, sys.argv[1], console_capture=True, stdout=False, system=False,
                     capture=False):
                assert where() != before
                print(name, flush=True)
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    Run(name + "-nested", sys.argv[1], console_capture=True, stdout=False,
                        system=False, capture=False).close()
                assert "another run captures the console" in str(caught[0].message)
            assert where() == before
        print("after", flush=True)
        """,
    )

    done = _run(command)

    assert _texts(tmp_path / "one.console.log", "out") == ["one"]
    assert _texts(tmp_path / "two.console.log", "out") == ["two"]
    assert not (tmp_path / "one-nested.console.log").exists()
    assert done.stdout.decode().split() == ["one", "two", "after"]


def test_a_terminal_stays_a_terminal_of_the_same_size(tmp_path: Path) -> None:
    command = _job(
        tmp_path,
        """
        with Run("r", sys.argv[1], console_capture=True, stdout=False, system=False):
            size = os.get_terminal_size(1)
            print(os.isatty(1), os.isatty(2), sys.stdout.isatty(), size.columns, flush=True)
        """,
    )

    output, side = _in_pty(command, columns=97), tmp_path / "r.console.log"

    assert "True True True 97" in output
    assert _texts(side, "out") == ["True True True 97"]


@needs("tqdm")
def test_tqdm_renders_in_a_terminal_and_its_bar_collapses_in_the_file(tmp_path: Path) -> None:
    command = _job(
        tmp_path,
        """
        from tqdm import tqdm
        with Run("r", sys.argv[1], console_capture=True, stdout=False, system=False):
            for _ in tqdm(range(50), desc="epoch", mininterval=0, miniters=1):
                pass
        """,
    )

    output = _in_pty(command, columns=80)

    assert output.count("\r") > 10  # the terminal saw it redraw
    (bar,) = _texts(tmp_path / "r.console.log", "err")
    assert bar.startswith("epoch: 100%")
    assert "50/50" in bar


def _in_pty(command: list[str], *, columns: int) -> str:
    """Run *command* with a pseudo-terminal as its stdout and stderr; return what it showed."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    child = subprocess.Popen(command, stdout=slave, stderr=slave, env=_env())
    os.close(slave)
    shown = b""
    deadline = time.monotonic() + _TIMEOUT_S
    while time.monotonic() < deadline:
        if select.select([master], [], [], 1)[0]:
            try:
                data = os.read(master, 1 << 16)
            except OSError:  # EIO: every writer closed the terminal
                break
            if not data:
                break
            shown += data
    os.close(master)
    assert child.wait(_TIMEOUT_S) == 0, shown
    return shown.decode()


def test_sigterm_ends_a_capturing_job_blocked_on_a_full_stdout_pipe(tmp_path: Path) -> None:
    command = _job(
        tmp_path,
        """
        import itertools
        with Run("r", sys.argv[1], console="json", console_capture=True, system=False) as run:
            os.write(2, b"ready\\n")
            sys.stdin.buffer.read(1)  # the parent has read "ready": the tee forwarded stderr
            for step in itertools.count():
                run.log("step", step=step)
        """,
    )
    read_end, write_end = os.pipe()
    with subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=write_end, stderr=subprocess.PIPE, env=_env()
    ) as child:
        os.close(write_end)
        try:
            assert child.stdin is not None
            assert child.stderr is not None
            # the job logs only once "ready" is read: were stdout full first, the tee (one
            # thread for both streams) would be blocked on it and never forward "ready"
            assert child.stderr.readline() == b"ready\n"
            child.stdin.write(b"g")
            child.stdin.flush()
            _fill(read_end)  # the tee blocks on stdout, then the job on the tee's pipe

            child.send_signal(signal.SIGTERM)
            sent = time.monotonic()
            code = child.wait(10)
            took_s = time.monotonic() - sent
        finally:
            os.close(read_end)  # the tee, blocked on the full pipe, gets EPIPE and ends
            if child.poll() is None:
                child.kill()

    assert code == -signal.SIGTERM
    assert took_s < 1.5  # the tee, blocked, is not waited for (closing waits 2 s otherwise)
    last = (tmp_path / "r.jsonl").read_bytes().splitlines()[-1]
    assert b'"event":"run_end"' in last
    assert b'"status":"terminated"' in last


def _fill(read_end: int) -> None:
    """Fill the pipe that *read_end* reads, through a non-blocking description of its own."""
    filler = os.open(f"/proc/self/fd/{read_end}", os.O_WRONLY | os.O_NONBLOCK)
    try:
        while True:
            os.write(filler, b"x" * 4096)
    except BlockingIOError:
        pass
    finally:
        os.close(filler)


def test_console_capture_takes_only_a_bool(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="console_capture must be True or False"):
        Run("r", tmp_path, console_capture="yes")  # type: ignore[arg-type]

    assert not (tmp_path / "r.jsonl").exists()


def test_show_prints_the_tail_of_the_console(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Run("r", tmp_path, stdout=False, system=False) as run:
        run.log("step", step=1)
    lines = [f"1796231348.{n:03d} out line {n}\n" for n in range(30)]
    (tmp_path / "r.console.log").write_text("".join(lines) + "1796231349.000 err \x1b[31mboom\n")

    assert main(["show", str(tmp_path / "r.jsonl"), "--console", "3"]) == 0

    out = capsys.readouterr().out
    assert "console, last 3 lines" in out
    assert out.rstrip().splitlines()[-3:][0].endswith("   line 28")
    assert out.rstrip().endswith("! \\x1b[31mboom")  # escapes shown, not obeyed
    assert "line 27" not in out


class TestLines:
    def test_cuts_at_newlines_across_reads(self) -> None:
        lines = Lines("out")

        first = lines.feed(b"a\nb", 1.0)
        second = lines.feed(b"c\n", 2.0)

        assert first == b"1.000 out a\n"
        assert second == b"1.000 out bc\n"

    def test_a_carriage_return_redraw_keeps_the_last_state(self) -> None:
        lines = Lines("err")

        out = lines.feed(b"\r 1%", 1.0) + lines.feed(b"\r 2%\r 3%", 2.0) + lines.feed(b"\n", 3.0)

        assert out == b"2.000 err  3%\n"

    def test_crlf_and_a_carriage_return_ending_a_read_end_the_line_as_it_was(self) -> None:
        lines = Lines("out")

        out = lines.feed(b"x\r\ny\r", 1.0) + lines.feed(b"\n", 2.0)

        assert out == b"1.000 out x\n1.000 out y\n"

    def test_a_line_still_open_is_written_at_the_end(self) -> None:
        lines = Lines("out")

        assert lines.feed(b"prompt> ", 1.0) == b""
        assert lines.end() == b"1.000 out prompt> \n"
        assert lines.end() == b""

    def test_an_endless_line_is_written_in_pieces(self) -> None:
        lines = Lines("out")

        out = lines.feed(b"x" * (2 << 20), 1.0)

        assert out.startswith(b"1.000 out xxx")
        assert len(out) > 2 << 20

    def test_open_line_holds_one_state_only(self) -> None:
        lines = Lines("out")

        for n in range(10_000):
            lines.feed(b"\rstate %d" % n, 1.0)

        assert len(lines._open) < 20


def test_parse_line_keeps_a_foreign_line_whole() -> None:
    assert parse_line(b"12.5 err oops: a b\n") == (12.5, "err", "oops: a b")
    torn = parse_line(b"torn lin")
    assert math.isnan(torn[0])
    assert torn[1:] == ("", "torn lin")


def test_a_resized_terminal_resizes_the_pseudo_terminal_and_close_restores_the_handler(
    tmp_path: Path,
) -> None:
    command = _job(
        tmp_path,
        """
        import signal
        before = signal.getsignal(signal.SIGWINCH)
        with Run("r", sys.argv[1], console_capture=True, stdout=False, system=False):
            print("columns", os.get_terminal_size(1).columns, flush=True)
            sys.stdin.buffer.read(1)  # the parent resized the terminal and sent SIGWINCH
            print("columns", os.get_terminal_size(1).columns, os.get_terminal_size(2).lines,
                  flush=True)
        print("restored", signal.getsignal(signal.SIGWINCH) == before, flush=True)
        """,
    )
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    with subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=slave, stderr=slave, env=_env()
    ) as child:
        os.close(slave)
        assert child.stdin is not None
        shown = _read_until(master, b"columns 80")
        fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 132, 0, 0))
        child.send_signal(signal.SIGWINCH)  # what the terminal sends its foreground job
        child.stdin.write(b"g")
        child.stdin.flush()
        shown += _read_until(master, b"restored", to_the_end=True)
        assert child.wait(_TIMEOUT_S) == 0
    os.close(master)

    assert b"columns 132 50" in shown
    assert b"restored True" in shown
    assert _texts(tmp_path / "r.console.log", "out") == ["columns 80", "columns 132 50"]


def _read_until(fd: int, marker: bytes, *, to_the_end: bool = False) -> bytes:
    """Read *fd* until *marker* shows (and on to EOF *to_the_end*); fail past the deadline."""
    seen = b""
    deadline = time.monotonic() + _TIMEOUT_S
    while marker not in seen or to_the_end:
        assert time.monotonic() < deadline, f"no {marker!r} in {seen[-500:]!r}"
        if select.select([fd], [], [], 1)[0]:
            try:
                data = os.read(fd, 1 << 16)
            except OSError:  # EIO: every writer closed the terminal
                data = b""
            if not data and to_the_end and marker in seen:
                break
            assert data, f"EOF before {marker!r}: {seen[-500:]!r}"
            seen += data
    return seen


def test_stderr_goes_on_while_stdout_is_a_full_pipe_and_sigterm_still_ends_the_run(
    tmp_path: Path,
) -> None:
    command = _job(
        tmp_path,
        """
        import itertools
        side = os.path.join(sys.argv[1], "r.console.log")
        with Run("r", sys.argv[1], console_capture=True, stdout=False, system=False) as run:
            os.write(1, b"blocked\\n")  # the tee writes it to the file, then blocks on stdout
            while b"blocked" not in open(side, "rb").read():
                pass
            spam = threading.Thread(target=lambda: [os.write(1, b"o" * 999 + b"\\n")
                                                    for _ in itertools.count()], daemon=True)
            spam.start()  # stdout: the tee's pipe fills, then this thread blocks
            for n in itertools.count():
                run.log("step", step=n)
                if n < 200:
                    os.write(2, b"err %d\\n" % n)
        """,
    )
    read_end, write_end = os.pipe()
    _fill(read_end)  # nobody reads the job's stdout: full before it starts
    with subprocess.Popen(command, stdout=write_end, stderr=subprocess.PIPE, env=_env()) as child:
        os.close(write_end)
        try:
            assert child.stderr is not None
            shown = _read_until(child.stderr.fileno(), b"err 199\n")

            child.send_signal(signal.SIGTERM)
            code = child.wait(10)
        finally:
            os.close(read_end)  # the tee, blocked on the full pipe, gets EPIPE and ends
            if child.poll() is None:
                child.kill()

    assert shown.decode().splitlines()[:200] == [f"err {n}" for n in range(200)]
    assert code == -signal.SIGTERM
    last = (tmp_path / "r.jsonl").read_bytes().splitlines()[-1]
    assert b'"event":"run_end"' in last
    assert b'"status":"terminated"' in last
    side = tmp_path / "r.console.log"
    deadline = time.monotonic() + _TIMEOUT_S
    while b"err 199" not in side.read_bytes():  # the tee ends once its pipes are closed
        assert time.monotonic() < deadline
    assert _texts(side, "err")[:200] == [f"err {n}" for n in range(200)]
    out = _texts(side, "out")
    assert out[0] == "blocked"
    # what the tee holds for a terminal that takes nothing is bounded (1 MiB), then it reads
    # that stream no more: the job blocks on it, as it would without capture
    assert 0 < len(out) - 1 <= ((1 << 20) + 3 * (1 << 16)) // 1000


class TestConsoleAtStep:
    """runlines.console(): the lines stamped from a step's record to the next step's."""

    RECORDS = (
        (100.0, "run_start", {"attempt": 1}),
        (101.0, "train", {"step": 1}),
        (101.5, "eval", {"step": 1}),
        (102.0, "train", {"step": 2}),
        (103.0, "train", {"step": 3}),
        (200.0, "run_start", {"attempt": 2, "resume_step": 2}),
        (201.0, "train", {"step": 2}),
        (202.0, "train", {"step": 3}),
    )
    LINES = (
        (100.5, "out", "setup"),
        (101.0, "out", "step 1 a"),
        (101.2, "err", "step 1 b"),
        (101.5, "out", "step 1 eval"),
        (102.0, "out", "step 2"),
        (103.0, "out", "step 3"),
        (150.0, "err", "crash"),
        (200.5, "out", "resumed"),
        (201.0, "out", "step 2 again"),
        (202.5, "out", "step 3 again"),
    )

    @pytest.fixture(name="log")
    def _log(self, tmp_path: Path) -> Path:
        log = tmp_path / "r.jsonl"
        log.write_text(
            "".join(
                json.dumps({"ts": ts, "event": event, "run": "r", **fields}) + "\n"
                for ts, event, fields in self.RECORDS
            )
        )
        (tmp_path / "r.console.log").write_text(
            "".join(f"{ts:.3f} {stream} {text}\n" for ts, stream, text in self.LINES)
        )
        return log

    @staticmethod
    def _texts(lines: list[ConsoleLine]) -> list[str]:
        return [line.text for line in lines]

    def test_a_step_is_from_its_record_to_the_next_steps_in_the_last_attempt(
        self, log: Path
    ) -> None:
        assert self._texts(runlines.console(log, step=1)) == ["step 1 a", "step 1 b", "step 1 eval"]
        assert self._texts(runlines.console(log, step=2)) == ["step 2 again"]  # the resumed one
        assert self._texts(runlines.console(log, step=3)) == ["step 3 again"]  # to the end
        assert runlines.console(log, step=1)[1] == ConsoleLine(101.2, "err", "step 1 b")

    def test_an_attempt_and_an_event_choose_the_records(self, log: Path) -> None:
        assert self._texts(runlines.console(log, step=2, attempt=1)) == ["step 2"]
        assert self._texts(runlines.console(log, step=3, attempt=1)) == ["step 3", "crash"]
        assert self._texts(runlines.console(log, step=1, event="eval")) == [
            "step 1 eval", "step 2", "step 3", "crash",
        ]  # fmt: skip
        assert self._texts(runlines.console(log, attempt=2)) == [
            "resumed", "step 2 again", "step 3 again",
        ]  # fmt: skip
        assert len(runlines.console(log)) == len(self.LINES)

    def test_a_missing_step_attempt_or_console_is_an_error_that_says_so(
        self, log: Path, tmp_path: Path
    ) -> None:
        with pytest.raises(runlines.ReadError, match="no record of step 9"):
            runlines.console(log, step=9)
        with pytest.raises(runlines.ReadError, match="no record of step 2 of event 'eval'"):
            runlines.console(log, step=2, event="eval")
        with pytest.raises(runlines.ReadError, match="has no attempt 5; it has"):
            runlines.console(log, attempt=5)
        (tmp_path / "r.console.log").unlink()
        with pytest.raises(runlines.ReadError, match="console_capture=True"):
            runlines.console(log, step=1)

    def test_a_folder_of_one_run_is_that_run_and_of_two_an_error(
        self, log: Path, tmp_path: Path
    ) -> None:
        assert runlines.console(tmp_path, step=2) == runlines.console(log, step=2)

        (tmp_path / "other.jsonl").write_text(log.read_text())
        with pytest.raises(runlines.ReadError, match=r"reads one run; .* holds 2"):
            runlines.console(tmp_path)

    def test_show_console_at_prints_that_steps_lines(
        self, log: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["show", str(log), "--console-at", "1"]) == 0

        out = capsys.readouterr().out
        assert "console, at step 1, 3 lines" in out
        assert out.rstrip().endswith("step 1 eval")
        assert "setup" not in out


def test_many_threads_on_both_streams_reach_file_and_terminals_whole(tmp_path: Path) -> None:
    command = _job(
        tmp_path,
        """
        def write(n):
            for i in range(2000):
                os.write(1 + i % 2, b"thread %d line %d " % (n, i) + b"x" * (i % 300) + b"\\n")
        with Run("r", sys.argv[1], console_capture=True, stdout=False, system=False):
            threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        """,
    )

    done = _run(command)

    side = tmp_path / "r.console.log"
    for fd, stream, shown in ((1, "out", done.stdout), (2, "err", done.stderr)):
        expected = {
            f"thread {n} line {i} " + "x" * (i % 300)
            for n in range(8)
            for i in range(fd - 1, 2000, 2)
        }
        texts = _texts(side, stream)
        assert sorted(texts) == sorted(expected)
        assert sorted(shown.decode().splitlines()) == sorted(expected)
        for n in range(8):  # in order within a stream, for each writer
            mine = [t.split()[3] for t in texts if t.startswith(f"thread {n} ")]
            assert mine == [str(i) for i in range(fd - 1, 2000, 2)]
