"""`runlines tail RUN`: the last records; -f follows appends, restarts and a replaced file."""

from __future__ import annotations

import io
import math
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from _logs import line, train, write
from runlines import Run
from runlines.cli import _tail, follow, main


class TestTail:
    def test_prints_the_last_n_records_aligned(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = train(run_dir, "t", range(1, 6))

        assert main(["tail", "-n", "3", str(log)]) == 0

        rows = capsys.readouterr().out.splitlines()
        assert [r.split()[1] for r in rows] == ["train_step", "train_step", "run_end"]
        assert "step=5 loss=0.2" in rows[1]
        assert len({r.index(r.split()[2]) for r in rows}) == 1  # fields start in one column

    def test_event_filter(self, run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
        log = train(run_dir, "t", range(1, 6), evals=True)

        assert main(["tail", "--event", "eval", str(log)]) == 0

        assert [r.split()[1] for r in capsys.readouterr().out.splitlines()] == ["eval", "eval"]

    def test_unknown_event_lists_the_events(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = train(run_dir, "t", range(1, 3))

        assert main(["tail", "--event", "evl", str(log)]) == 1

        assert (
            "has event 'evl'; its events: run_end, run_start, train_step" in capsys.readouterr().err
        )

    def test_follow_prints_records_appended_by_a_restarted_attempt(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str], sleep_appends: Callable[..., None]
    ) -> None:
        log = write(
            run_dir / "live.jsonl",
            line("run_start", run="live", attempt=1),
            line("train_step", run="live", step=1),
        )
        appends = [
            line("train_step", run="live", step=2) + b'{"ts": 3, "event": "train_st',
            b"\n" + line("run_start", run="live", attempt=2, resume_step=1),
            line("train_step", run="live", step=2, loss=0.25)[:20],
            line("train_step", run="live", step=2, loss=0.25)[20:],
        ]
        sleep_appends(log, appends)

        assert main(["tail", "-f", "-n", "1", str(log)]) == 0

        captured = capsys.readouterr()
        assert [r.split()[1] for r in captured.out.splitlines()] == [
            "train_step",
            "train_step",
            "run_start",
            "train_step",
        ]
        assert "loss=0.25" in captured.out.splitlines()[-1]
        assert "runlines: warning:" in captured.err
        assert "not a complete JSON object" in captured.err

    def test_follow_finds_a_run_in_a_subfolder_and_refuses_an_ambiguous_name(
        self,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
        sleep_appends: Callable[..., None],
    ) -> None:
        log = train(tmp_path / "exp1", "base", range(1, 3))
        monkeypatch.chdir(tmp_path)
        sleep_appends(log, [line("train_step", run="base", step=9)])

        assert main(["tail", "-f", "-n", "1", "base"]) == 0
        captured = capsys.readouterr()
        assert [r.split()[1] for r in captured.out.splitlines()] == ["run_end", "train_step"]
        assert "step=9" in captured.out.splitlines()[-1]
        assert "waiting" not in captured.err

        train(tmp_path / "exp2", "base", range(1, 3))
        assert main(["tail", "-f", "base"]) == 1  # not a wait for ./base.jsonl
        assert "run 'base' is ambiguous: 2 logs" in capsys.readouterr().err

    def test_follow_filters_events_and_stops_when_asked(
        self, run_dir: Path, sleep_appends: Callable[..., None]
    ) -> None:
        log = write(run_dir / "f.jsonl", line("a", run="f"))
        out = io.StringIO()
        stops = iter([False] * 3)
        appends = [line("b", run="f"), line("a", run="f", n=2)]
        sleep_appends(log, appends, stop=False)

        follow(
            log,
            out,
            events={"a"},
            offset=log.stat().st_size,
            should_stop=lambda: next(stops, True),
        )

        assert [r.split()[1] for r in out.getvalue().splitlines()] == ["a"]
        assert "n=2" in out.getvalue()

    @pytest.mark.parametrize(
        ("argv", "named"),
        [
            (["tail", "f.jsonl"], "f.jsonl"),
            (["tail", "f"], "f.jsonl"),
            (["tail", "-f", "f.jsonl"], "f.jsonl"),
            (["tail", "-f", "f"], "f.jsonl"),
            (["tail", "-f", "g"], "runs/g.jsonl"),
        ],
    )
    def test_a_fifo_named_like_a_log_is_refused_not_waited_for(
        self,
        argv: list[str],
        named: str,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
        sleep_appends: Callable[..., None],
    ) -> None:
        (tmp_path / "runs").mkdir()
        os.mkfifo(tmp_path / "f.jsonl")
        os.mkfifo(tmp_path / "runs" / "g.jsonl")
        monkeypatch.chdir(tmp_path)
        sleep_appends(tmp_path / "unused.jsonl", [])  # a wait ends

        assert main(argv) == 1

        assert capsys.readouterr().err == (
            f"runlines: error: {named} is a FIFO, not a regular file; pass a folder of logs or a "
            ".jsonl log file\n"
        )

    def test_follow_starts_over_when_the_file_is_replaced(
        self, run_dir: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        log = write(run_dir / "r.jsonl", line("old", run="r"), line("old", run="r"))
        out = io.StringIO()
        stops = iter([False] * 2)
        monkeypatch.setattr(_tail, "_sleep", lambda _s: write(log, line("new", run="r")))

        follow(log, out, offset=log.stat().st_size, should_stop=lambda: next(stops, True))

        assert out.getvalue().split()[1] == "new"

    def test_follow_starts_over_when_the_file_is_rewritten_longer_in_place(
        self, run_dir: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        log = write(run_dir / "r.jsonl", line("old", run="r", n=0), line("old", run="r", n=1))
        out = io.StringIO()
        stops = iter([False] * 2)
        rewrite = b"".join(line("new", run="r", n=n) for n in range(10, 15))
        monkeypatch.setattr(_tail, "_sleep", lambda _s: log.write_bytes(rewrite))

        follow(log, out, offset=log.stat().st_size, should_stop=lambda: next(stops, True))

        assert [row.split()[-1] for row in out.getvalue().splitlines()] == [
            f"n={n}" for n in range(10, 15)
        ]


def test_nan_metric_prints_as_nan(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with Run("n", run_dir, stdout=False, on_nonfinite="ignore") as run:
        run.log("train_step", step=1, loss=math.nan)

    assert main(["tail", "-n", "1", "--event", "train_step", str(run_dir / "n.jsonl")]) == 0

    assert "loss=nan" in capsys.readouterr().out
