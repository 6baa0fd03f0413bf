"""The read side at its edges: FIFOs, live files, attempts, no extras, CLI hints, deep JSON."""

from __future__ import annotations

import io
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from filelock import FileLock

import runlines
from _logs import T0, line, write
from _optional import needs
from runlines import ReadError, Run, RunlinesWarning
from runlines.cli import _tail, follow, main
from runlines.reading import LogFollower, lock_path

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")


@needs_fifo
class TestFifo:
    """A FIFO named like a log is refused at once, never opened for a read that blocks."""

    @pytest.fixture(name="fifo")
    def _fifo(self, tmp_path: Path) -> Path:
        path = tmp_path / "x.jsonl"
        os.mkfifo(path)
        return path

    @pytest.mark.parametrize(
        "read",
        [
            runlines.load,
            lambda p: list(runlines.iter_events(p)),
            pytest.param(
                lambda p: runlines.query("SELECT * FROM records", p), marks=needs("duckdb")
            ),
            pytest.param(
                lambda p: runlines.export(p, output=p.with_name("out.parquet")),
                marks=needs("duckdb"),
            ),
        ],
        ids=["load", "iter_events", "query", "export"],
    )
    def test_readers_refuse_a_fifo(self, fifo: Path, read: object) -> None:
        with pytest.raises(ReadError, match="FIFO, not a regular file"):
            read(fifo)  # type: ignore[operator]

    @needs("duckdb")
    @pytest.mark.parametrize("command", ["query", "export"])
    def test_the_cli_refuses_a_fifo(
        self, fifo: Path, command: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        args = ["SELECT 1", str(fifo)] if command == "query" else [str(fifo), "-o", "o.parquet"]

        assert main([command, *args]) == 1

        assert "FIFO" in capsys.readouterr().err

    def test_a_folder_of_logs_skips_a_fifo_with_a_warning(self, fifo: Path) -> None:
        write(fifo.with_name("real.jsonl"), line("train", run="real", step=1))

        with pytest.warns(RunlinesWarning, match="x.jsonl: it is a FIFO"):
            frame = runlines.load(fifo.parent)

        assert frame["run"].tolist() == ["real"]

    def test_an_artifact_folder_with_a_fifo_is_hashed_without_it(self, tmp_path: Path) -> None:
        folder = tmp_path / "ckpt"
        folder.mkdir()
        (folder / "weights.bin").write_bytes(b"w")
        os.mkfifo(folder / "pipe")

        with Run("a", tmp_path, stdout=False) as run, pytest.warns(RunlinesWarning, match="pipe"):
            run.artifact("ckpt", path=folder)

        record = [r for r in runlines.iter_events(tmp_path / "a.jsonl") if r["event"] == "artifact"]
        assert record[0]["bytes"] == 1


class TestLiveLastLine:
    """A last line without its newline in a log whose lock is held is still being written."""

    def _live(self, tmp_path: Path) -> Path:
        whole = line("train", run="live", step=1, loss=0.5)
        return write(tmp_path / "live.jsonl", whole, line("train", run="live", step=2)[:15])

    def test_iter_events_does_not_call_it_torn(self, tmp_path: Path) -> None:
        log = self._live(tmp_path)

        with FileLock(lock_path(log)), warnings.catch_warnings():
            warnings.simplefilter("error")
            records = list(runlines.iter_events(log))

        assert [r["step"] for r in records] == [1]

    def test_without_the_lock_it_is_torn(self, tmp_path: Path) -> None:
        log = self._live(tmp_path)

        with pytest.warns(RunlinesWarning, match="not a complete JSON object"):
            assert len(list(runlines.iter_events(log))) == 1

    def test_show_of_a_live_run_warns_of_nothing(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = self._live(tmp_path)

        with FileLock(lock_path(log)):
            assert main(["show", str(log)]) == 0

        assert "warning" not in capsys.readouterr().err


class TestFollowReplaced:
    def test_a_log_replaced_by_a_longer_one_is_read_from_its_start(self, tmp_path: Path) -> None:
        log = write(tmp_path / "r.jsonl", line("old", run="r", n=1))
        follower = LogFollower(log, log.stat().st_size)
        longer = write(tmp_path / "copy.jsonl", *(line("new", run="r", n=i) for i in range(5)))

        os.replace(longer, log)

        assert [r["n"] for r in follower.poll()] == [0, 1, 2, 3, 4]

    def test_tail_f_waits_for_a_run_that_has_not_started(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = tmp_path / "later.jsonl"
        steps: Iterator[Callable[[], object]] = iter(
            [lambda: None, lambda: write(log, line("train", run="later", step=7))]
        )

        def fake_sleep(_s: float) -> None:
            step = next(steps, None)
            if step is None:
                raise KeyboardInterrupt
            step()

        monkeypatch.setattr(_tail, "_sleep", fake_sleep)

        assert main(["tail", "-f", str(log)]) == 0

        captured = capsys.readouterr()
        assert "waiting for" in captured.err
        assert "step=7" in captured.out


def test_follow_reads_a_file_that_appears_later(tmp_path: Path) -> None:
    log = tmp_path / "r.jsonl"
    out = io.StringIO()
    follower_polls = iter([False, False, True])
    write(log, line("train", run="r", n=3))

    follow(log, out, offset=0, should_stop=lambda: next(follower_polls), poll_s=0)

    assert "n=3" in out.getvalue()


class TestHugeAttempt:
    def _log(self, tmp_path: Path) -> Path:
        return write(
            tmp_path / "b.jsonl",
            line("run_start", run="b", attempt=2**80),
            line("train", run="b", ts=T0 + 1, step=1, loss=0.5),
        )

    def test_load_reads_an_attempt_beyond_int64_as_missing(self, tmp_path: Path) -> None:
        frame = runlines.load(self._log(tmp_path))

        assert frame["attempt"].tolist() == [1, 1]

    def test_compare_prints_a_table(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["compare", str(self._log(tmp_path)), "--metric", "loss"]) == 0

        assert "0.5" in capsys.readouterr().out


class TestLaterAttemptWins:
    """A later attempt's record wins over an earlier one's at the same (event, step)."""

    def _rerun(self, tmp_path: Path) -> Path:
        return write(
            tmp_path / "x.jsonl",
            line("run_start", run="x", attempt=1),
            line("train", run="x", step=1, loss=1.0),
            line("train", run="x", step=2, loss=0.9),
            line("run_start", run="x", attempt=2),  # a rerun: no resume_step
            line("train", run="x", step=1, loss=0.7),
        )

    def test_load_keeps_the_later_record(self, tmp_path: Path) -> None:
        frame = runlines.load(self._rerun(tmp_path), event="train")

        assert list(zip(frame["step"], frame["loss"], strict=True)) == [(2, 0.9), (1, 0.7)]

    def test_superseded_shows_all(self, tmp_path: Path) -> None:
        frame = runlines.load(self._rerun(tmp_path), event="train", superseded=True)

        assert frame["loss"].tolist() == [1.0, 0.9, 0.7]

    def test_compare_never_averages_two_attempts(self, tmp_path: Path) -> None:
        table = runlines.compare(self._rerun(tmp_path), metric="loss", event="train")

        assert table.loc[1, "x"] == 0.7


class TestCoreOnly:
    """Without pandas, numpy or pyarrow every reader names the extra to install."""

    @pytest.mark.parametrize("missing", ["pandas", "numpy", "pyarrow"])
    @pytest.mark.parametrize(
        "read",
        [runlines.load, runlines.runs, lambda p: runlines.compare(p, metric="loss")],
        ids=["load", "runs", "compare"],
    )
    def test_readers_name_the_extra(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, missing: str, read: object
    ) -> None:
        log = write(tmp_path / "r.jsonl", line("train", run="r", step=1, loss=0.5))
        monkeypatch.setitem(sys.modules, missing, None)

        with pytest.raises(ImportError, match=r"pip install 'runlines\[pandas\]'"):
            read(log)  # type: ignore[operator]

    def test_iter_events_needs_none_of_them(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        log = write(tmp_path / "r.jsonl", line("train", run="r", step=1, loss=0.5))
        for name in ("pandas", "numpy", "pyarrow"):
            monkeypatch.setitem(sys.modules, name, None)

        assert [r["loss"] for r in runlines.iter_events(log)] == [0.5]


class TestCliHints:
    def test_show_finds_a_bare_name_under_runs(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        write(tmp_path / "runs" / "baseline.jsonl", line("train", run="baseline", step=1))
        monkeypatch.chdir(tmp_path)

        assert main(["show", "baseline"]) == 0

        assert "runs/baseline.jsonl" in capsys.readouterr().out

    def test_the_torn_line_warning_tells_no_python_option(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = write(tmp_path / "t.jsonl", line("train", run="t", step=1), b'{"ts": 1, "ev\n')

        assert main(["show", str(log)]) == 0

        err = capsys.readouterr().err
        assert "not a complete JSON object" in err
        assert "errors=" not in err


class TestDeepLine:
    """A line nested too deep for load() is skipped, with a warning, by every engine."""

    def _log(self, tmp_path: Path) -> Path:
        deep = b"[" * 50_000 + b"]" * 50_000
        return write(
            tmp_path / "d.jsonl",
            line("train", run="d", ts=T0, step=1, loss=0.5, grid=[[i] for i in range(1_100)]),
            b'{"ts": 1767225601, "event": "train", "run": "d", "step": 2, "v": ' + deep + b"}\n",
            b'{"ts": 1767225602, "event": "train", "run": "d", "step": 3, "v": [1, '
            + deep
            + b"]}\n",
            line("train", run="d", ts=T0 + 3, step=4, loss=0.25),
        )

    @needs("duckdb")
    def test_query_reads_the_records_load_reads(self, tmp_path: Path) -> None:
        log = self._log(tmp_path)
        with pytest.warns(RunlinesWarning, match="not a complete JSON object"):
            expected = runlines.load(log)["step"].tolist()

        with pytest.warns(RunlinesWarning, match=r"d\.jsonl: skipped 2 lines nested deeper") as w:
            got = runlines.query("SELECT step FROM records ORDER BY ts", log)["step"].tolist()

        assert got == expected == [1, 4]
        assert w[0].filename == __file__

    @needs("duckdb")
    def test_load_through_duckdb_and_export_skip_them_too(self, tmp_path: Path) -> None:
        import pyarrow.parquet as pq

        log = self._log(tmp_path)

        with pytest.warns(RunlinesWarning, match="nested deeper than 1,024 levels"):
            frame = runlines.load(log, engine="duckdb")
        with pytest.warns(RunlinesWarning, match="nested deeper than 1,024 levels"):
            runlines.export(log, output=tmp_path / "d.parquet")

        assert frame["step"].tolist() == [1, 4]
        assert len(frame["grid"][0]) == 1_100  # many brackets, shallow: read
        assert pq.read_table(tmp_path / "d.parquet").column("step").to_pylist() == [1, 4]
