"""The training console: a status line for hot events, lines for the rest, tqdm left whole."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from _optional import skip_without
from _watching_fakes import FakeClock
from runlines import Run
from runlines._console import ConsoleOptions, TrainingConsole
from runlines.sinks import StdoutSink

T0 = 1767268800.0


def line(event: str, **fields: Any) -> bytes:
    return orjson.dumps({"ts": T0, "event": event, "run": "r", **fields}) + b"\n"


def screen(data: str, width: int = 200) -> list[str]:
    """What a terminal shows after *data*: \\r, \\n, ESC[K (erase right) and ESC[A (up)."""
    rows: list[list[str]] = [[]]
    row = col = 0
    i = 0
    while i < len(data):
        char = data[i]
        if char == "\x1b":
            match = re.match(r"\x1b\[(\??)(\d*)([A-Za-z])", data[i:])
            assert match, f"unknown escape at {data[i : i + 8]!r}"
            count, code = int(match.group(2) or 1), match.group(3)
            if match.group(1):
                pass  # a private mode: the cursor shown or hidden
            elif code == "K" and count == 2:
                rows[row].clear()
            elif code == "K":
                del rows[row][col:]
            elif code == "A":
                row = max(0, row - count)
            i += match.end()
            continue
        if char == "\r":
            col = 0
        elif char == "\n":
            row += 1
            col = 0
            while len(rows) <= row:
                rows.append([])
        else:
            cells = rows[row]
            while len(cells) < col:
                cells.append(" ")
            if col < len(cells):
                cells[col] = char
            else:
                cells.append(char)
            col += 1
        i += 1
    return ["".join(cells).rstrip() for cells in rows]


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def console(
    out: io.StringIO, clock: FakeClock, every: float | None = None, events: Any = None
) -> TrainingConsole:
    return TrainingConsole(
        StdoutSink(out), ConsoleOptions.of(every, events), clock=clock, width=lambda: 120
    )


class TestStatusLine:
    def test_hot_events_rewrite_one_line_and_others_print_as_lines(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        out = _Tty()
        monkeypatch.setattr(sys, "stdout", out)
        clock = FakeClock()
        shown = console(out, clock)

        shown.show(line("run_start", id="x"))
        for step in range(1, 301):
            clock.tick(0.05)
            shown.show(line("train_step", step=step, loss=1.0 / step))
            if step == 150:
                shown.show(line("eval", step=step, accuracy=0.5))
        shown.show(line("run_end", status="ok"))

        rows = [row for row in screen(out.getvalue()) if row]
        assert len(rows) == 4
        assert "run_start" in rows[0]
        assert " eval " in rows[1]
        assert "accuracy=0.5" in rows[1]
        assert " train_step " in rows[2]
        assert "step=300" in rows[2]
        assert "20 steps/s" in rows[2]
        assert "run_end" in rows[3]

    def test_status_line_never_wraps(self, monkeypatch: pytest.MonkeyPatch) -> None:
        out = _Tty()
        monkeypatch.setattr(sys, "stdout", out)
        shown = console(out, FakeClock())

        shown.show(line("train_step", step=1, **{f"metric_{i}": 0.5 for i in range(40)}))

        assert max(len(row) for row in screen(out.getvalue())) < 120

    def test_console_every_prints_a_line_every_n_seconds(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        out = _Tty()
        monkeypatch.setattr(sys, "stdout", out)
        clock = FakeClock()
        shown = console(out, clock, every=10.0)

        for step in range(1, 101):  # 50 s of steps
            clock.tick(0.5)
            shown.show(line("train_step", step=step, loss=0.1))

        rows = [row for row in screen(out.getvalue()) if row]
        assert "\r" not in out.getvalue()
        assert 5 <= len(rows) <= 6
        assert all("train_step" in row for row in rows)

    def test_console_events_names_the_hot_events(self, monkeypatch: pytest.MonkeyPatch) -> None:
        out = _Tty()
        monkeypatch.setattr(sys, "stdout", out)
        clock = FakeClock()
        shown = console(out, clock, events=["batch"])

        for step in range(5):
            clock.tick(1.0)
            shown.show(line("batch", step=step))
            shown.show(line("train_step", step=step))

        rows = [row for row in screen(out.getvalue()) if row]
        assert sum("train_step" in row for row in rows) == 5
        assert sum("batch" in row for row in rows) == 1

    def test_bad_options_are_refused(self) -> None:
        with pytest.raises(ValueError, match="console_every must be seconds above 0"):
            ConsoleOptions.of(0, None)
        with pytest.raises(TypeError, match=r"console_events must be a list of event names"):
            ConsoleOptions.of(None, "train_step")


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, 1 << 16)
    except BlockingIOError:
        return b""


def test_a_tqdm_bar_on_the_same_terminal_is_never_torn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A real tqdm bar and the console on one pseudo-terminal: read its bytes back."""
    import fcntl
    import struct
    import termios

    skip_without("tqdm")
    import tqdm

    master, slave = os.openpty()
    os.set_blocking(master, False)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # 24x120
    tty = open(slave, "w", buffering=1, encoding="utf-8")  # noqa: SIM115 - closed below
    monkeypatch.setattr(sys, "stdout", tty)
    monkeypatch.setattr(sys, "stderr", tty)
    clock = FakeClock()
    shown = TrainingConsole(
        StdoutSink(tty), ConsoleOptions.of(None, None), clock=clock, width=lambda: 120
    )
    chunks: list[bytes] = []
    try:
        bar = tqdm.tqdm(total=50, file=tty, mininterval=0, miniters=1, ncols=60)
        for step in range(1, 51):
            clock.tick(1.0)
            bar.update(1)
            shown.show(line("train_step", step=step, loss=0.5))
            if step % 10 == 0:
                shown.show(line("eval", step=step, accuracy=step / 100))
            tty.flush()
            chunks.append(_read(master))
        bar.close()
        tty.flush()
        chunks.append(_read(master))
    finally:
        tty.close()
        os.close(master)

    text = b"".join(chunks).decode("utf-8").replace("\r\n", "\n")  # the pty's own \r\n
    rows = [row for row in screen(text) if row]
    evals = [row for row in rows if " eval " in row]
    assert len(evals) == 5
    for row in evals:  # each line whole, on its own: no bar before it or after it
        assert re.fullmatch(r"\d\d:\d\d:\d\d eval +step=\d+ accuracy=[\d.]+", row), row
    hot = [row for row in rows if "train_step" in row]
    assert hot, rows
    for row in hot:
        assert re.fullmatch(r"\d\d:\d\d:\d\d train_step +step=\d+ loss=0\.5.*", row), row
    assert re.fullmatch(r"100%\|█+\| 50/50 \[.*\]", rows[-1]), rows[-1]  # the bar, whole


def _pty(monkeypatch: pytest.MonkeyPatch) -> tuple[int, Any]:
    """A pseudo-terminal of 24x120 as sys.stdout: (its master fd, the tty file)."""
    import fcntl
    import struct
    import termios

    master, slave = os.openpty()
    os.set_blocking(master, False)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    tty = open(slave, "w", buffering=1, encoding="utf-8")  # noqa: SIM115 - closed by the test
    monkeypatch.setattr(sys, "stdout", tty)
    return master, tty


def test_a_rich_progress_display_is_never_torn(monkeypatch: pytest.MonkeyPatch) -> None:
    """rich replaces sys.stdout while it shows progress; lines go through it, above the bar."""
    skip_without("rich")
    from rich.console import Console
    from rich.progress import Progress

    master, tty = _pty(monkeypatch)
    clock = FakeClock()
    shown = TrainingConsole(
        StdoutSink(tty), ConsoleOptions.of(None, None), clock=clock, width=lambda: 120
    )  # opened before the progress display, as a Run would be
    chunks: list[bytes] = []
    try:
        terminal = Console(file=tty, force_terminal=True, color_system=None, width=120)
        with Progress(console=terminal, redirect_stdout=True, auto_refresh=False) as progress:
            task = progress.add_task("train", total=50)
            for step in range(1, 51):
                clock.tick(1.0)
                progress.advance(task)
                progress.refresh()
                shown.show(line("train_step", step=step, loss=0.5))
                if step % 10 == 0:
                    shown.show(line("eval", step=step, accuracy=step / 100))
                chunks.append(_read(master))
        tty.flush()
        chunks.append(_read(master))
    finally:
        tty.close()
        os.close(master)

    rows = [row for row in screen(b"".join(chunks).decode().replace("\r\n", "\n")) if row]
    evals = [row for row in rows if " eval " in row]
    assert len(evals) == 5
    for row in evals:
        assert re.fullmatch(r"\d\d:\d\d:\d\d eval +step=\d+ accuracy=[\d.]+", row), row
    assert re.fullmatch(r"train .*50/50.*|train .*100%.*", rows[-1]), rows[-1]


def test_file_and_json_stdout_keep_every_record(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)

    with Run("r", run_dir, system=False) as run:
        for step in range(300):
            run.log("train_step", step=step, loss=0.5)

    rows = [row for row in screen(capsys.readouterr().out) if row]
    assert len(rows) <= 3  # run_start, the last status, run_end
    assert len(run.path.read_text().splitlines()) == 302
    assert json.loads(run.path.read_text().splitlines()[-2])["step"] == 299


_JOB = """
import sys
from runlines import Run

with Run("r", sys.argv[1], console=sys.argv[2], system=False) as run:
    run.log("eval", split="validación", note="→ ok 😀")
"""


@pytest.mark.parametrize(
    ("encoding", "shown"),
    [
        ("ascii", "split=validaci\\xf3n note=\\u2192 ok \\U0001f600"),
        ("latin-1", "split=validación note=\\u2192 ok \\U0001f600"),
    ],
)
def test_a_stdout_that_cannot_write_utf8_shows_console_lines_escaped(
    run_dir: Path, encoding: str, shown: str
) -> None:
    env = {**os.environ, "PYTHONIOENCODING": encoding, "LC_ALL": "C"}

    done = subprocess.run(
        [sys.executable, "-c", _JOB, str(run_dir), "pretty"],
        capture_output=True,
        env=env,
        check=True,
        timeout=60,
    )

    out = done.stdout.decode(encoding)
    assert shown in out
    end = json.loads(Path(run_dir, "r.jsonl").read_text(encoding="utf-8").splitlines()[-1])
    assert end["dropped_by_sink"] == {"file": 0, "stdout": 0}
    assert b"failed" not in done.stderr


def test_json_lines_through_an_ascii_stream_come_out_in_json_ascii_form() -> None:
    buffer = io.BytesIO()
    stream = io.TextIOWrapper(buffer, encoding="ascii")
    sink = StdoutSink(stream)
    record = {"split": "validación", "note": "→ ok 😀", "back": "a\\xff"}

    sink.write(orjson.dumps(record) + b"\n")

    assert sink.dropped == 0
    written = buffer.getvalue()
    assert written.isascii()
    assert json.loads(written) == record


class TestOwnWarningsAndOrder:
    def test_runlines_warnings_show_once_as_console_lines_and_never_tear_the_status_line(
        self, run_dir: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """stdout and stderr are one pseudo-terminal, as in a shell; Python's warnings print."""
        import warnings

        master, tty = _pty(monkeypatch)
        monkeypatch.setattr(sys, "stderr", tty)
        chunks: list[bytes] = []
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("default")
                with Run("r", run_dir, console="pretty", system=False) as run:
                    for step in range(1, 4):
                        run.log("train_step", step=step, loss=1.0 / step)
                    run.log("train_step", step=4, loss=float("nan"))
                    run.log("train_step", step=5, learning_rate=0.1)
                    run.log("train_step", step=6, loss=0.5)
                    tty.flush()
                    chunks.append(_read(master))
            tty.flush()
            chunks.append(_read(master))
        finally:
            tty.close()
            os.close(master)

        text = b"".join(chunks).decode("utf-8").replace("\r\n", "\n")
        rows = [row for row in screen(text) if row]
        assert text.count("FieldDriftWarning") == 1, rows
        assert text.count("NonfiniteWarning") == 0, rows  # the nonfinite line says it
        assert sum(" nonfinite " in row for row in rows) == 1
        for row in rows:  # each a whole console line: nothing printed into the status line
            assert re.match(r"\d\d:\d\d:\d\d \S+ ", row), row
            assert row.count(":") < 2 or re.fullmatch(r"\d\d:\d\d:\d\d [^/]*(/[^:]*)?.*", row)
            assert "run.log(" not in row, row

    def test_without_a_pretty_console_python_shows_them(self, run_dir: Path) -> None:
        from runlines import FieldDriftWarning

        with (
            pytest.warns(FieldDriftWarning, match="learning_rate"),
            Run("r", run_dir, stdout=False, system=False) as run,
        ):
            run.log("train_step", step=1, learning_rate=0.1)

    def test_the_status_line_leads_with_the_users_hot_event(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        out = _Tty()
        monkeypatch.setattr(sys, "stdout", out)
        clock = FakeClock()
        shown = console(out, clock)

        for step in range(1, 4):
            clock.tick(1.0)
            shown.show(line("span", name="forward", duration_s=0.01, status="ok"))
            shown.show(line("train_step", step=step, loss=0.5))
            shown.show(line("system", cpu=2.0))

        (status,) = [row for row in screen(out.getvalue()) if row]
        assert re.match(r"\d\d:\d\d:\d\d train_step +step=\d", status), status
        assert " span " in status

    def test_summary_lines_come_in_time_order(self, monkeypatch: pytest.MonkeyPatch) -> None:
        out = _Tty()
        monkeypatch.setattr(sys, "stdout", out)
        clock = FakeClock()
        shown = console(out, clock, every=10.0)

        shown.show(line("train_step", step=1, loss=0.5))  # the first summary
        clock.tick(5.0)
        shown.show(line("train_step", step=2, loss=0.4))
        clock.tick(1.0)
        shown.show(line("batch_stats", step=2, grad_norm=1.0))
        clock.tick(1.0)
        shown.show(line("throughput", tokens=100))
        clock.tick(1.0)
        shown.show(line("train_step", step=3, loss=0.3))
        clock.tick(3.0)
        shown.show(line("train_step", step=4, loss=0.2))  # 11 s: the second summary

        rows = [row for row in screen(out.getvalue()) if row]
        events = [row.split()[1] for row in rows[1:]]
        assert events == ["batch_stats", "throughput", "train_step"], rows

    def test_an_artifact_line_has_a_short_hash_and_does_not_wrap(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        out = _Tty()
        monkeypatch.setattr(sys, "stdout", out)
        shown = console(out, FakeClock())
        sha256 = "ab" * 32

        shown.show(
            line(
                "artifact",
                name="checkpoint",
                path="baseline-lr3e-4-warmup.artifacts/checkpoint-step-001200.pt",
                bytes=1_234_567_890,
                sha256=sha256,
                format="torch",
                step=1200,
            )
        )

        (row,) = [row for row in screen(out.getvalue()) if row]  # one row: it did not wrap
        assert f"sha256={sha256[:12]} " in row
        assert sha256[:13] not in row
        assert len(row) < 120
