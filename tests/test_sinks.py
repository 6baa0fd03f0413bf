"""Sinks: one write per line, partial writes finished, failures counted once and warned once."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from runlines import Run
from runlines.sinks import FileSink, Sink, StdoutSink
from runlines.testing import MemorySink, capture_records


class TestFileSink:
    def test_appends_one_line_per_write(self, tmp_path: Path) -> None:
        sink = FileSink(tmp_path / "a.jsonl")

        sink.write(b'{"a":1}\n')
        sink.write(b'{"a":2}\n')
        sink.close()

        assert (tmp_path / "a.jsonl").read_bytes() == b'{"a":1}\n{"a":2}\n'

    def test_file_mode_follows_the_umask(self, tmp_path: Path) -> None:
        old = os.umask(0o027)
        try:
            FileSink(tmp_path / "a.jsonl").close()
        finally:
            os.umask(old)

        assert (tmp_path / "a.jsonl").stat().st_mode & 0o777 == 0o640

    def test_partial_write_is_finished(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        sink = FileSink(tmp_path / "a.jsonl")
        real_write = os.write
        calls: list[int] = []

        def half_write(fd: int, data: bytes) -> int:
            calls.append(len(data))
            return real_write(fd, bytes(data[: max(1, len(data) // 2)]))

        monkeypatch.setattr(os, "write", half_write)
        sink.write(b'{"a":12345}\n')
        monkeypatch.undo()
        sink.close()

        assert (tmp_path / "a.jsonl").read_bytes() == b'{"a":12345}\n'
        assert len(calls) > 1
        assert sink.dropped == 0

    def test_line_after_a_torn_write_starts_on_its_own_line(self, tmp_path: Path) -> None:
        sink = FileSink(tmp_path / "a.jsonl")
        sink.write(b'{"a":1}\n')
        full = os.open("/dev/full", os.O_WRONLY)
        saved = os.dup(sink.fd)
        real = sink.fd
        os.dup2(full, real)
        sink._torn = True  # as a partial write that then hit a full disk leaves it
        sink.write(b'{"a":2}\n')
        os.dup2(saved, real)
        os.close(full)
        os.close(saved)

        sink.write(b'{"a":3}\n')
        sink.close()

        assert (tmp_path / "a.jsonl").read_bytes() == b'{"a":1}\n\n{"a":3}\n'
        assert sink.dropped == 1

    def test_full_device_counts_drops_and_warns_once(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        sink = FileSink(Path("/dev/full"))

        for _ in range(3):
            sink.write(b'{"a":1}\n')
        sink.close()

        assert sink.dropped == 3
        assert capsys.readouterr().err.count("runlines: warning: the file sink failed") == 1


class TestStdoutSink:
    def test_replaced_stdout_gets_text(self) -> None:
        stream = io.StringIO()
        sink = StdoutSink(stream)

        sink.write(b'{"a":1}\n')

        assert stream.getvalue() == '{"a":1}\n'
        assert sink.fd == -1

    def test_closed_stream_counts_a_drop(self, capsys: pytest.CaptureFixture[str]) -> None:
        stream = io.StringIO()
        sink = StdoutSink(stream)
        stream.close()

        sink.write(b'{"a":1}\n')

        assert sink.dropped == 1
        assert "the stdout sink failed" in capsys.readouterr().err

    def test_once_it_stops_waiting_a_full_pipe_drops_lines_instead_of_blocking(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """As when a signal ends the process while a log collector has stopped reading."""
        read_end, write_end = os.pipe()
        os.set_blocking(read_end, False)
        stream = os.fdopen(write_end, "w")
        try:
            sink = StdoutSink(stream)
            filled = _fill_pipe(write_end)
            stream.write("printed")  # still in the stream's buffer
            sink.stop_waiting()

            sink.write(b'{"a":1}\n')  # returns at once: the pipe takes nothing more
            sink.write_text("a console line\n")
            sink.flush()  # leaves the buffered print alone: flushing it would block
            drained = _drain(read_end)
            sink.write(b'{"a":2}\n')

            assert drained == b"x" * filled
            assert _drain(read_end) == b'{"a":2}\n'
            assert sink.dropped == 2
            assert "the stdout sink failed" in capsys.readouterr().err
        finally:
            stream.close()
            os.close(read_end)


def _fill_pipe(write_end: int) -> int:
    """Fill the pipe *write_end* writes to, through a non-blocking description of its own."""
    filler = os.open(f"/proc/self/fd/{write_end}", os.O_WRONLY | os.O_NONBLOCK)
    filled = 0
    try:
        for size in (4096, 1):  # whole pages, then the last page's free bytes
            while True:
                try:
                    filled += os.write(filler, b"x" * size)
                except BlockingIOError:
                    break
    finally:
        os.close(filler)
    return filled


def _drain(read_end: int) -> bytes:
    """Read everything the non-blocking pipe *read_end* holds now."""
    chunks: list[bytes] = []
    while True:
        try:
            chunk = os.read(read_end, 1 << 16)
        except BlockingIOError:
            return b"".join(chunks)
        chunks.append(chunk)


@pytest.mark.usefixtures("fast_path")
def test_fast_path_failure_counts_drops_and_recovers(run_dir: Path) -> None:
    """With stdout off, log() writes the file descriptor directly; a failure leaves that path."""
    with Run("r", run_dir, stdout=False) as run:
        run.log("step", step=0)
        saved = os.dup(run._file.fd)
        full = os.open("/dev/full", os.O_WRONLY)
        os.dup2(full, run._file.fd)
        run.log("step", step=1)
        run.log("step", step=2)
        os.dup2(saved, run._file.fd)
        os.close(full)
        os.close(saved)
        run.log("step", step=3)
        dropped = run.dropped

    lines = run.path.read_text().splitlines()
    assert dropped == 2
    assert [line for line in lines if '"step"' in line and '"event":"step"' in line][-1].endswith(
        '"step":3}'
    )
    assert '"dropped":2' in lines[-1]


@pytest.mark.usefixtures("fast_path")
def test_closed_sys_stdout_never_breaks_log(run_dir: Path) -> None:
    """A program that closed sys.stdout still logs: the file gets every record."""
    read_end, write_end = os.pipe()
    stream = os.fdopen(write_end, "w")
    with Run("r", run_dir, console="json") as run:
        run._writer._fds = (run._file.fd,)  # log()'s direct path, as outside pytest's capture
        run._writer._flush_stdout = stream.flush  # as if sys.stdout were this stream
        stream.close()
        run.log("step", step=1)
    os.close(read_end)

    assert '"step":1' in run.path.read_text()


class _Broken:
    kind = "broken"

    def write(self, line: bytes) -> None:
        msg = "the collector is down"
        raise ConnectionError(msg)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.mark.usefixtures("fast_path")
class TestUserSinks:
    def test_a_sink_gets_every_line_the_file_gets(self, run_dir: Path) -> None:
        sink = MemorySink()

        with Run("r", run_dir, stdout=False, sinks=[sink]) as run:
            run.log("train_step", step=1, loss=0.5)
            run.log("train_step", step=2, loss=0.25)

        assert b"".join(sink.lines) == run.path.read_bytes()
        assert [r["step"] for r in sink.events("train_step")] == [1, 2]
        assert sink.closed

    def test_a_sink_that_raises_is_counted_and_the_run_goes_on(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        with Run("r", run_dir, stdout=False, sinks=[_Broken()]) as run:
            run.log("train_step", step=1)
            run.log("train_step", step=2)

        end = [json.loads(x) for x in run.path.read_text().splitlines()][-1]
        assert end["dropped_by_sink"] == {"file": 0, "broken": 3}  # run_start and two steps
        assert run.dropped_by_sink == {"file": 0, "broken": 4}  # run_end too
        assert capsys.readouterr().err.count("ConnectionError") == 1

    def test_an_object_without_the_sink_methods_is_refused_before_the_disk(
        self, run_dir: Path
    ) -> None:
        with pytest.raises(TypeError, match=r"has no write, flush, close"):
            Run("r", run_dir, stdout=False, sinks=[object()])  # type: ignore[list-item]

        assert not run_dir.exists()

    def test_a_binary_stream_is_a_sink(self, run_dir: Path) -> None:
        stream = io.BytesIO()

        with Run("r", run_dir, stdout=False, sinks=[stream]) as run:
            run.log("train_step", step=1)

        assert run.dropped_by_sink == {"file": 0, "BytesIO": 0}

    def test_the_sink_protocol_is_write_flush_and_close(self) -> None:
        assert isinstance(MemorySink(), Sink)
        assert not hasattr(Sink, "fd")
        assert not hasattr(Sink, "recover")


@pytest.mark.usefixtures("fast_path")
class TestCaptureRecords:
    def test_captures_the_records_of_runs_opened_inside(self, run_dir: Path) -> None:
        with capture_records() as records:
            with Run("a", run_dir, stdout=False) as run:
                run.log("train_step", step=1)
            assert [r["event"] for r in records] == ["run_start", "train_step", "run_end"]

        with Run("b", run_dir, stdout=False) as other:
            other.log("train_step", step=2)
        assert len(records) == 3  # a run opened after the block is not captured

    def test_runs_opened_inside_write_no_memory_sink_afterwards(self, run_dir: Path) -> None:
        with capture_records():
            pass

        with Run("r", run_dir, stdout=False) as run:
            run.log("train_step", step=1)
        assert set(run.dropped_by_sink) == {"file"}
