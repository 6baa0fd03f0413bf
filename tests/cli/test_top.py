"""`runlines top`: one frame from fixed rows, the model fed appended bytes, the view on a pty."""

from __future__ import annotations

import fcntl
import math
import os
import re
import select
import statistics
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from _logs import T0, line, refuse_to_open, write
from runlines import runs
from runlines.cli import _top, main
from runlines.cli._top import LOCK_EVERY_S, SPARKS, Top, TopRow, Trend, render_frame, sparkline
from runlines.errors import RunlinesWarning
from runlines.reading import lock_path

SRC = Path(__file__).resolve().parents[2] / "src"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def steps(run: str, first: int, last: int, *, t0: float = T0, every_s: float = 0.5) -> bytes:
    """Return train_step records first..last, *every_s* apart from *t0*, loss falling."""
    return b"".join(
        line("train_step", run, t0 + (s - first) * every_s, step=s, loss=1.0 / s, lr=0.1)
        for s in range(first, last + 1)
    )


def start(run: str, ts: float = T0) -> bytes:
    return line("run_start", run, ts, attempt=1)


def always_alive(path: Path) -> bool:
    return True


# --- one frame, from fixed rows -----------------------------------------------------------------


class TestSparkline:
    def test_lowest_is_the_first_bar_highest_the_last(self) -> None:
        assert sparkline([0, 1, 2, 3, 4, 5, 6, 7], 8) == SPARKS

    def test_more_values_than_bars_are_averaged_in_runs(self) -> None:
        assert sparkline([0.0, 2.0, 10.0, 12.0, 4.0, 6.0], 3) == SPARKS[0] + SPARKS[-1] + SPARKS[3]


class TestTrend:
    def test_keeps_every_value_until_full(self) -> None:
        trend = Trend(4)
        for value in range(7):
            trend.add(float(value))

        assert trend.values() == tuple(float(v) for v in range(7))

    def test_a_long_run_is_kept_as_means_of_neighbours(self) -> None:
        trend = Trend(4)
        for value in range(1000):
            trend.add(float(value))

        values = trend.values()
        assert 4 <= len(values) <= 8
        assert values[0] == pytest.approx(statistics.fmean(range(trend.stride)))
        assert values[-1] > 900

    def test_a_flat_metric_is_a_flat_line_and_nan_is_left_out(self) -> None:
        assert sparkline([2.0, float("nan"), 2.0], 5) == SPARKS[4] * 2

    def test_nothing_to_show_is_empty(self) -> None:
        assert sparkline([], 10) == ""
        assert sparkline([1.0], 0) == ""


ROWS = [
    TopRow(
        run="baseline",
        status="running",
        step=1200,
        steps_per_s=10.5,
        metric="train_step.loss",
        value=0.21234,
        trend=(3.0, 2.0, 1.0),
        last=(("lr", 0.0003), ("eval.accuracy", 0.91)),
        cpu_percent=97.4,
        rss_bytes=3.5 * 2**30,
        gpu_util_percent=88.0,
        gpu_mem_used_bytes=40 * 2**30,
        gpu_mem_total_bytes=80 * 2**30,
    ),
    TopRow(run="lr-1e-3", status="stalled", step=80, metric="train_step.loss", value=1.5),
]


class TestRenderFrame:
    def test_a_wide_terminal_shows_every_column(self) -> None:
        frame = render_frame(ROWS, width=200, height=None, title="T")

        assert frame == [
            "T",
            "RUN       STATUS   STEP  STEP/S  METRIC                  TREND                 CPU"
            "   RSS  GPU      GPU MEM  LAST",
            "baseline  running  1200    10.5  train_step.loss=0.2123  █▅▁                   97%"
            "  3.5G  88%  40.0G/80.0G  lr=0.0003 eval.accuracy=0.91",
            "lr-1e-3   stalled    80       -  train_step.loss=1.5                             -"
            "     -    -            -  -",
        ]

    def test_a_narrow_terminal_keeps_run_and_status_and_cuts_every_line(self) -> None:
        frame = render_frame(
            ROWS, width=30, height=None, title="runlines top  runs  2 logs  12:00:00  q: quit"
        )

        assert all(len(text) <= 30 for text in frame)
        assert frame[1].split() == ["RUN", "STATUS", "STEP"]
        assert frame[2].split() == ["baseline", "running", "1200"]
        assert frame[0].endswith("…")

    def test_columns_drop_least_useful_first(self) -> None:
        frame = render_frame(ROWS, width=100, height=None, title="T")

        header = frame[1].split()
        assert "LAST" not in header
        assert "GPU" in header
        assert "METRIC" in header

    def test_a_narrow_terminal_keeps_the_rank_of_a_distributed_run(self) -> None:
        rows = [TopRow(run="ddp", status="running", rank=r, step=9, value=1.0) for r in (0, 1)]

        frame = render_frame(rows, width=20, height=None, title="T")

        assert frame[1].split() == ["RUN", "RANK", "STATUS"]
        assert frame[3].split() == ["ddp", "1", "running"]

    def test_rows_that_do_not_fit_are_counted(self) -> None:
        rows = [TopRow(run=f"r{i}", status="ok") for i in range(10)]

        frame = render_frame(rows, width=80, height=5, title="T")

        assert len(frame) == 5
        assert [text.split()[0] for text in frame[2:4]] == ["r0", "r1"]
        assert frame[4].startswith("... 8 more runs")

    def test_control_characters_in_a_row_are_escaped_before_widths_are_measured(self) -> None:
        rows = [
            TopRow(run="a\x1b[2J", status="ok", metric="e.f\x07", value="\x9b", last=(("k", 1),)),
            TopRow(run="b", status="ok", metric="e.f", value=1),
        ]

        frame = render_frame(rows, width=200, height=None, title="top \x1b]0;t\x07")

        assert frame[0] == "top \\x1b]0;t\\x07"
        assert frame[2].split() == ["a\\x1b[2J", "ok", "e.f\\x07=\\x9b", "k=1"]
        assert frame[2].index("ok") == frame[3].index("ok")

    def test_columns_no_run_has_are_left_out(self) -> None:
        rows = [TopRow(run="a", status="ok", step=3, metric="eval.loss", value=0.5)]

        frame = render_frame(rows, width=200, height=None, title="T")

        assert frame[1].split() == ["RUN", "STATUS", "STEP", "METRIC", "LAST"]


# --- the model: what refresh() reads and what rows() say ----------------------------------------


class TestTop:
    def test_a_refresh_reads_only_the_bytes_appended(self, tmp_path: Path) -> None:
        log = write(tmp_path / "a.jsonl", start("a"), steps("a", 1, 50))
        top = Top([tmp_path], alive=always_alive, clock=lambda: T0 + 30)
        assert top.refresh() == log.stat().st_size

        more = steps("a", 51, 52, t0=T0 + 25)
        with log.open("ab") as out:
            out.write(more)

        assert top.refresh() == len(more)
        assert top.refresh() == 0
        assert top.rows()[0].step == 52

    def test_a_torn_last_line_waits_for_its_newline(self, tmp_path: Path) -> None:
        log = write(tmp_path / "a.jsonl", start("a"), steps("a", 1, 2))
        top = Top([tmp_path], alive=always_alive, clock=lambda: T0 + 1)
        top.refresh()
        record = steps("a", 3, 3, t0=T0 + 1)
        with log.open("ab") as out:
            out.write(record[:10])
        top.refresh()
        assert top.rows()[0].step == 2

        with log.open("ab") as out:
            out.write(record[10:])
        top.refresh()

        assert top.rows()[0].step == 3

    def test_a_big_log_starts_from_its_lifecycle_lines_and_tail(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(_top, "QUICK_BYTES", 4000)
        monkeypatch.setattr(_top, "TAIL_BYTES", 1000)
        log = write(tmp_path / "a.jsonl", start("a"), steps("a", 1, 200), b'{"ts": 1, "ev')
        top = Top([tmp_path], alive=always_alive, clock=lambda: T0 + 100)
        assert top.refresh() == log.stat().st_size

        (row,) = top.rows()
        assert (row.status, row.step, row.metric) == ("running", 200, "train_step.loss")
        assert 0 < len(row.trend) < 20
        assert top.watches[log].summary.attempts == 1

        with log.open("ab") as out:
            out.write(b'ent": "x"}\n' + steps("a", 201, 201, t0=T0 + 100))
        top.refresh()

        assert top.rows()[0].step == 201

    def test_a_log_that_appears_in_the_folder_is_picked_up(self, tmp_path: Path) -> None:
        write(tmp_path / "a.jsonl", start("a"), steps("a", 1, 3))
        top = Top([tmp_path], alive=always_alive)
        top.refresh()

        write(tmp_path / "b.jsonl", start("b"), steps("b", 1, 3))
        top.refresh()

        assert [row.run for row in top.rows()] == ["a", "b"]

    def test_a_log_replaced_by_a_shorter_one_is_read_again(self, tmp_path: Path) -> None:
        log = write(tmp_path / "a.jsonl", start("a"), steps("a", 1, 40))
        top = Top([tmp_path], alive=always_alive)
        top.refresh()

        write(tmp_path / "new.jsonl", start("a"), steps("a", 1, 5))
        os.replace(tmp_path / "new.jsonl", log)
        top.refresh()

        (row,) = top.rows()
        assert row.step == 5
        assert len(row.trend) == 5

    @pytest.mark.parametrize("how", ["denied", "deleted"])
    def test_a_log_that_cannot_be_read_is_named_once_and_left_out(
        self, how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        write(tmp_path / "a.jsonl", start("a"), steps("a", 1, 3))
        theirs = write(tmp_path / "b.jsonl", start("b"), steps("b", 1, 3))
        write(tmp_path / "c.jsonl", start("c"), steps("c", 1, 3))
        refuse_to_open(monkeypatch, theirs, how)
        top = Top([tmp_path], alive=always_alive)

        with pytest.warns(RunlinesWarning) as caught:
            top.refresh()
            top.refresh()

        assert [row.run for row in top.rows()] == ["a", "c"]
        assert len(caught) == 1
        assert str(caught[0].message).startswith(f"left out {theirs}: it cannot be read (")

    def test_once_names_an_unreadable_log_on_stderr_and_shows_the_others(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        write(tmp_path / "a.jsonl", start("a"), steps("a", 1, 3))
        theirs = write(tmp_path / "b.jsonl", start("b"), steps("b", 1, 3))
        refuse_to_open(monkeypatch, theirs, "denied")

        assert main(["top", str(tmp_path), "--once"]) == 0

        captured = capsys.readouterr()
        assert [row.split()[0] for row in captured.out.splitlines()[2:]] == ["a"]
        assert "1 unreadable" in captured.out.splitlines()[0]
        assert captured.err == (
            f"runlines: warning: left out {theirs}: it cannot be read (Permission denied); "
            "the other logs are shown\n"
        )

    def test_a_log_rewritten_in_place_with_more_bytes_is_read_again(self, tmp_path: Path) -> None:
        log = write(tmp_path / "a.jsonl", start("a"), steps("a", 101, 105))
        top = Top([tmp_path], alive=always_alive)
        top.refresh()

        log.write_bytes(start("a", T0 + 100) + steps("a", 1, 40, t0=T0 + 100))  # same inode
        top.refresh()

        (row,) = top.rows()
        assert row.step == 40
        assert row.trend == pytest.approx([1.0 / s for s in range(1, 41)])

    def test_rank_files_show_as_ranks_of_their_run(self, tmp_path: Path) -> None:
        write(tmp_path / "ddp.jsonl", start("ddp"), steps("ddp", 1, 3))
        write(tmp_path / "ddp.rank1.jsonl", start("ddp"), steps("ddp", 1, 2))
        write(tmp_path / "solo.jsonl", start("solo"), steps("solo", 1, 2))
        top = Top([tmp_path], alive=always_alive)
        top.refresh()

        assert [(r.run, r.rank, r.step) for r in top.rows()] == [
            ("ddp", 0, 3),
            ("ddp", 1, 2),
            ("solo", None, 2),
        ]

    def test_the_main_metric_is_the_hottest_events_first_loss_like_field(
        self, tmp_path: Path
    ) -> None:
        records = [start("a")]
        for s in range(1, 11):
            ts = T0 + s
            records.append(line("train_step", "a", ts, step=s, lr=0.1, tokens=s, nll_loss=5 - s))
            if s % 5 == 0:
                records.append(line("eval", "a", ts, step=s, loss=0.3))
        records.append(line("system", "a", T0 + 11, cpu_percent=50.0))
        write(tmp_path / "a.jsonl", *records)
        top = Top([tmp_path], alive=always_alive, clock=lambda: T0 + 12)
        top.refresh()

        (row,) = top.rows()

        assert (row.metric, row.value) == ("train_step.nll_loss", -5)
        assert row.trend == tuple(float(5 - s) for s in range(1, 11))
        assert row.last[:2] == (("lr", 0.1), ("tokens", 10))
        assert ("eval.loss", 0.3) in row.last

    def test_the_metric_is_found_in_a_later_record_when_the_first_has_none(
        self, tmp_path: Path
    ) -> None:
        first = line("train_step", "a", T0, step=0)
        write(tmp_path / "a.jsonl", start("a"), first, steps("a", 1, 3, t0=T0 + 1))
        top = Top([tmp_path], alive=always_alive)
        top.refresh()

        (row,) = top.rows()

        assert (row.metric, row.trend) == ("train_step.loss", (1.0, 0.5, 1 / 3))

    def test_metric_option_names_the_metric_of_every_run(self, tmp_path: Path) -> None:
        records = [start("a"), steps("a", 1, 4)]
        records += [line("eval", "a", T0 + 2, step=s, accuracy=s / 10) for s in (2, 4)]
        write(tmp_path / "a.jsonl", *records)
        top = Top([tmp_path], metric="eval.accuracy", alive=always_alive)
        top.refresh()

        (row,) = top.rows()

        assert (row.metric, row.value, row.trend) == ("eval.accuracy", 0.4, (0.2, 0.4))

    def test_steps_per_second_from_the_records_times(self, tmp_path: Path) -> None:
        write(tmp_path / "a.jsonl", start("a"), steps("a", 1, 21, every_s=0.5))
        top = Top([tmp_path], alive=always_alive, clock=lambda: T0 + 11)
        top.refresh()

        assert top.rows()[0].steps_per_s == pytest.approx(2.0)

    def test_system_figures_come_from_system_records(self, tmp_path: Path) -> None:
        system = {
            "cpu_percent": 150.0,
            "rss_bytes": 2**30,
            "gpu0_util_percent": 80.0,
            "gpu1_util_percent": 60.0,
            "gpu0_mem_used_bytes": 10,
            "gpu1_mem_used_bytes": 20,
            "gpu0_mem_total_bytes": 100,
            "gpu1_mem_total_bytes": 100,
        }
        write(tmp_path / "a.jsonl", start("a"), line("system", "a", T0 + 1, **system))
        top = Top([tmp_path], alive=always_alive, clock=lambda: T0 + 2)
        top.refresh()

        (row,) = top.rows()

        assert (row.cpu_percent, row.rss_bytes) == (150.0, 2**30)
        assert (row.gpu_util_percent, row.gpu_mem_used_bytes, row.gpu_mem_total_bytes) == (
            70.0,
            30.0,
            200.0,
        )
        assert row.metric is None

    def test_a_live_runs_lock_is_probed_at_most_every_few_seconds(self, tmp_path: Path) -> None:
        write(tmp_path / "a.jsonl", start("a"), steps("a", 1, 3))
        write(tmp_path / "done.jsonl", start("done"), line("run_end", "done"))
        probes: list[Path] = []
        ticks = iter([0.0, 1.0, 2.0, LOCK_EVERY_S + 0.5])

        def alive(path: Path) -> bool:
            probes.append(path)
            return len(probes) == 1  # held at the first probe, let go by the next

        top = Top([tmp_path], alive=alive, monotonic=lambda: next(ticks), clock=lambda: T0 + 2)
        top.refresh()
        statuses = [top.rows()[0].status for _ in range(4)]

        assert statuses == ["running", "running", "running", "died"]
        assert probes == [tmp_path / "a.jsonl"] * 2  # a run that ended needs no probe

    def test_odd_records_of_a_foreign_log_are_shown_not_a_crash(self, tmp_path: Path) -> None:
        odd = [
            b'{"ts": "x", "event": ["train"], "step": [1], "loss": {"a": 1}}\n',
            b'{"event": 7, "ts": 1e300, "step": true, "loss": "nan"}\n',
            b'{"ts": 1.0, "event": "train", "step": 2, "loss": 0.5, "lr": null}\n',
            b"[1, 2]\n",
        ]
        write(tmp_path / "odd.jsonl", *odd)
        top = Top([tmp_path], alive=always_alive, clock=lambda: 2.0)
        top.refresh()

        (row,) = top.rows()
        frame = render_frame([row], width=120, height=None, title="T")

        assert (row.step, row.metric, row.value) == (2, "train.loss", 0.5)
        assert frame[2].split()[:3] == ["odd", "running", "2"]

    def test_a_missing_source_is_an_error_that_says_what_to_pass(self, tmp_path: Path) -> None:
        with pytest.raises(ValueError, match=r"no such log or folder: .*pass a folder of logs"):
            Top([tmp_path / "nope"])


class TestStalled:
    """`stalled` is one rule, RunSummary's, in `runs()`, `ls` and `top` alike."""

    @pytest.fixture(name="held")
    def _held(self, tmp_path: Path) -> Iterator[Path]:
        """A log silent for an hour whose lock a live process (this one) holds."""
        old = time.time() - 3600
        log = write(tmp_path / "hung.jsonl", start("hung", old), steps("hung", 1, 20, t0=old))
        with FileLock(lock_path(log)):
            yield log

    def test_runs_ls_and_top_agree(self, held: Path, capsys: pytest.CaptureFixture[str]) -> None:
        top = Top([held.parent])
        top.refresh()

        assert main(["ls", str(held.parent)]) == 0

        assert runs(held.parent)["status"].tolist() == ["stalled"]
        assert capsys.readouterr().out.splitlines()[1].split()[1] == "stalled"
        assert [row.status for row in top.rows()] == ["stalled"]

    def test_a_run_that_logged_lately_is_running(self, tmp_path: Path) -> None:
        now = time.time()
        log = write(tmp_path / "a.jsonl", start("a", now - 10), steps("a", 1, 20, t0=now - 10))

        with FileLock(lock_path(log)):
            assert runs(tmp_path)["status"].tolist() == ["running"]

    def test_the_background_records_are_no_sign_of_life(self, tmp_path: Path) -> None:
        records = [start("a"), steps("a", 1, 10, every_s=1.0)]
        records += [line("system", "a", T0 + 10 + 10 * i, cpu_percent=1.0) for i in range(60)]
        write(tmp_path / "a.jsonl", *records)
        top = Top([tmp_path], alive=always_alive, clock=lambda: T0 + 600)
        top.refresh()

        assert [row.status for row in top.rows()] == ["stalled"]

    def test_a_stall_record_is_stalled_until_the_run_logs_again(self, tmp_path: Path) -> None:
        log = write(tmp_path / "a.jsonl", start("a"), steps("a", 1, 10, every_s=1.0))
        with log.open("ab") as out:
            out.write(line("stall", "a", T0 + 12, idle_s=5.0))
        top = Top([tmp_path], alive=always_alive, clock=lambda: T0 + 13)
        top.refresh()
        assert [row.status for row in top.rows()] == ["stalled"]

        with log.open("ab") as out:
            out.write(steps("a", 11, 11, t0=T0 + 14) + line("stall_end", "a", T0 + 14))
        top.refresh()

        assert [row.status for row in top.rows()] == ["running"]


def test_help_lists_top(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0

    assert re.search(r"^\s+top\s+a live view of the runs", capsys.readouterr().out, re.M)


def test_once_prints_one_frame(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path / "a.jsonl", start("a"), steps("a", 1, 3), line("run_end", "a", T0 + 2))

    assert main(["top", str(tmp_path), "--once"]) == 0

    out = capsys.readouterr().out.splitlines()
    assert out[1].split()[:4] == ["RUN", "STATUS", "STEP", "METRIC"]
    assert out[2].split()[:4] == ["a", "ok", "3", "train_step.loss=0.3333"]


def test_once_escapes_control_characters_of_run_event_and_field_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clipboard, title, clear = "\x1b]52;c;cm0gLXJmIH4=\x07", "\x1b]0;pwned\x07", "\x1b[2J"
    fields = {f"loss{clear}": 0.5, "lr\x9b2J\u202e\r": 0.1}
    run = f"a{clipboard}"
    write(
        tmp_path / f"{run}.jsonl",
        start(run),
        line(f"train{title}", run, T0, step=1, **fields),
        line(f"train{title}", run, T0 + 1, step=2, **fields),
    )

    assert main(["top", str(tmp_path), "--once"]) == 0

    out = capsys.readouterr().out
    assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]", out), repr(out)
    assert "a\\x1b]52;c;" in out
    assert "train\\x1b]0;pwned\\x07.loss\\x1b[2J=0.5" in out


def test_a_bad_metric_option_says_the_form(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["top", str(tmp_path), "--metric", "loss", "--once"]) == 1

    assert (
        "--metric takes EVENT.FIELD (e.g. train_step.loss), got 'loss'" in capsys.readouterr().err
    )


class TestNonfinite:
    """A run that logged NaN or an infinity says so in its row, even once its metric recovered."""

    def test_the_row_counts_the_non_finite_values_and_names_the_last(self, tmp_path: Path) -> None:
        records = [start("a"), steps("a", 1, 3)]
        records.append(line("train_step", "a", T0 + 2, step=4, loss=math.nan, lr=0.1))
        records.append(line("eval", "a", T0 + 2, step=4, accuracy=-math.inf, n=math.nan))
        records.append(steps("a", 5, 6, t0=T0 + 3))  # finite again: the metric looks fine
        records.append(line("system", "a", T0 + 4, cpu_percent=math.nan))  # no metric
        write(tmp_path / "a.jsonl", *records)
        write(tmp_path / "b.jsonl", start("b"), steps("b", 1, 6))
        top = Top([tmp_path], alive=always_alive, clock=lambda: T0 + 5)
        top.refresh()

        a, b = top.rows()
        frame = render_frame([a, b], width=200, height=None, title="T")

        assert (a.nonfinite, a.last_nonfinite) == (2, ("eval.accuracy", -math.inf))
        assert (b.nonfinite, b.last_nonfinite) == (0, None)
        assert a.value == pytest.approx(1 / 6)
        header = frame[1].split()
        assert header[header.index("METRIC") + 1] == "NAN/INF"
        assert re.search(r"^a .*train_step\.loss=0\.1667 +2 \(eval\.accuracy=-inf\) ", frame[2])
        assert re.search(r"train_step\.loss=0\.1667 +- ", frame[3])

    def test_a_narrow_terminal_keeps_the_mark_longest(self) -> None:
        row = TopRow(
            run="a",
            status="running",
            step=1200,
            metric="train_step.loss",
            value=0.5,
            nonfinite=3,
            last_nonfinite=("train_step.loss", math.nan),
        )

        frame = render_frame([row], width=40, height=None, title="T")

        assert frame[1].split() == ["RUN", "STATUS", "NAN/INF"]
        assert frame[2].split() == ["a", "running", "3", "(train_step.loss=nan)"]

    def test_once_shows_the_mark(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        write(
            tmp_path / "a.jsonl",
            start("a"),
            line("train_step", "a", T0, step=1, loss=math.inf),
            line("run_end", "a", T0 + 1),
        )

        assert main(["top", str(tmp_path), "--once"]) == 0

        out = capsys.readouterr().out.splitlines()
        assert out[1].split()[:5] == ["RUN", "STATUS", "STEP", "METRIC", "NAN/INF"]
        assert out[2].split()[:5] == ["a", "ok", "1", "train_step.loss=inf", "1"]


class TestWaiting:
    """A source that is not there yet is waited for, as `tail -f` waits for a log."""

    def test_a_missing_folder_is_picked_up_once_it_appears(self, tmp_path: Path) -> None:
        folder = tmp_path / "runs"
        top = Top([folder], alive=always_alive, clock=lambda: T0 + 2, wait=True)
        top.refresh()
        assert top.rows() == []
        assert top.waiting == [folder]
        assert f"  {folder} (waiting for it to appear)  0 logs  " in _top.title_of(top, [], T0)

        write(folder / "a.jsonl", start("a"), steps("a", 1, 3))
        top.refresh()

        assert [(row.run, row.step) for row in top.rows()] == [("a", 3)]
        assert top.waiting == []
        assert "waiting" not in _top.title_of(top, top.rows(), T0)

    def test_a_missing_log_is_picked_up_once_it_appears(self, tmp_path: Path) -> None:
        log = tmp_path / "later" / "a.jsonl"
        write(tmp_path / "b.jsonl", start("b"), steps("b", 1, 2))
        top = Top([log, tmp_path / "b.jsonl"], alive=always_alive, clock=lambda: T0, wait=True)
        top.refresh()
        assert [row.run for row in top.rows()] == ["b"]

        write(log, start("a"), steps("a", 1, 3))
        top.refresh()

        assert [(row.run, row.step) for row in top.rows()] == [("a", 3), ("b", 2)]

    def test_a_fifo_that_appears_is_refused(self, tmp_path: Path) -> None:
        fifo = tmp_path / "a.jsonl"
        top = Top([fifo], wait=True)
        top.refresh()
        os.mkfifo(fifo)

        with pytest.raises(ValueError, match="is a FIFO"):
            top.refresh()

    def test_without_wait_a_missing_source_is_still_an_error(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["top", str(tmp_path / "nope"), "--once"]) == 1  # one frame waits for nothing

        assert "runlines: error: no such log or folder: " in capsys.readouterr().err

    def test_the_live_view_says_it_waits_and_draws_the_runs_once_they_appear(
        self,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        folder = tmp_path / "runs"
        frames: list[list[str]] = []

        class Screen:  # the terminal, driven frame by frame: no time passes
            def __init__(self, out: Any) -> None:
                pass

            def __enter__(self) -> Screen:
                return self

            def __exit__(self, *exc: object) -> None:
                pass

            def size(self) -> tuple[int, int]:
                return 160, 20

            def draw(self, lines: list[str]) -> None:
                frames.append(lines)

            def wait_key(self, timeout_s: float) -> str:
                if len(frames) == 1:  # the run starts while the view waits
                    write(folder / "a.jsonl", start("a"), steps("a", 1, 3))
                    return ""
                return "q"

        monkeypatch.setattr("runlines.cli._screen.Screen", Screen)
        monkeypatch.setattr(sys.stdout, "isatty", lambda: True)

        assert main(["top", str(folder), "--interval", "60"]) == 0

        err = capsys.readouterr().err
        assert err == f"runlines: waiting for {folder} to appear (Ctrl-C to stop)\n"
        first, last = frames
        assert f"  {folder} (waiting for it to appear)  0 logs  " in first[0]
        assert first[2:] == []
        assert "waiting" not in last[0]
        assert last[2].split()[:3] == ["a", "died", "3"]


# --- the live view, on a pseudo-terminal --------------------------------------------------------

# The child makes the pty its controlling terminal (a session leader opening a tty), so that
# Ctrl-C and a resize reach it as they would from a real terminal.
_CHILD = """
import os, runpy, sys
os.close(os.open(os.ttyname(0), os.O_RDWR))
sys.argv = ["runlines", *sys.argv[1:]]
runpy.run_module("runlines", run_name="__main__")
"""


class Terminal:
    """`runlines top ARGS` on a pseudo-terminal of *columns* x *lines*; what it drew, read back."""

    def __init__(self, args: list[str], *, columns: int = 160, lines: int = 30) -> None:
        self.master, slave = os.openpty()
        self.resize(columns, lines)
        env = {**os.environ, "PYTHONPATH": str(SRC), "PYTHONIOENCODING": "utf-8"}
        self.process = subprocess.Popen(
            [sys.executable, "-c", _CHILD, "top", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            start_new_session=True,
        )
        os.close(slave)
        self.seen = ""

    def resize(self, columns: int, lines: int) -> None:
        size = struct.pack("HHHH", lines, columns, 0, 0)
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, size)

    def press(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def read_until(self, pattern: str, timeout_s: float = 20.0) -> str:
        """Read until *pattern* shows (ANSI codes left out) after what was matched before."""
        deadline = time.monotonic() + timeout_s
        wanted = re.compile(pattern)
        while True:
            found = wanted.search(ANSI.sub("", self.seen))
            if found:
                self.seen = ANSI.sub("", self.seen)[found.end() :]
                return found.group(0)
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.master], [], [], max(0.0, left))
            if not ready:
                msg = f"{pattern!r} did not show within {timeout_s} s; the terminal showed:\n"
                raise AssertionError(msg + ANSI.sub("", self.seen)[-3000:])
            try:
                self.seen += os.read(self.master, 65536).decode(errors="replace")
            except OSError:  # the child closed the terminal
                msg = f"{pattern!r} did not show before top exited:\n{self.seen[-3000:]}"
                raise AssertionError(msg) from None

    def exit_status(self, timeout_s: float = 20.0) -> tuple[int, str]:
        """Wait for the child to end; return its status and the raw bytes it wrote last."""
        raw = self.seen
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            ready, _, _ = select.select(
                [self.master], [], [], max(0.0, deadline - time.monotonic())
            )
            if not ready:
                break
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                break
            if not chunk:
                break
            raw += chunk.decode(errors="replace")
        return self.process.wait(timeout=max(0.1, deadline - time.monotonic())), raw

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        os.close(self.master)


@pytest.fixture(name="terminal")
def _terminal() -> Iterator[Any]:
    opened: list[Terminal] = []

    def open_terminal(args: list[str], **size: int) -> Terminal:
        opened.append(Terminal(args, **size))
        return opened[-1]

    yield open_terminal
    for terminal in opened:
        terminal.close()


class TestLive:
    def test_shows_the_runs_updates_on_append_and_quits_on_q(
        self, tmp_path: Path, terminal: Any
    ) -> None:
        now = time.time()
        log = write(tmp_path / "live.jsonl", start("live", now), steps("live", 1, 5, t0=now))
        write(tmp_path / "done.jsonl", start("done"), steps("done", 1, 3), line("run_end", "done"))
        with FileLock(lock_path(log)):
            view = terminal([str(tmp_path), "--interval", "0.05"])
            view.read_until(r"done\s+ok\s+3")
            view.read_until(r"live\s+running\s+5")

            with log.open("ab") as out:
                out.write(steps("live", 6, 17, t0=now + 2.5))
            view.read_until(r"live\s+running\s+17\s+2\s+train_step\.loss=0\.05882")
            view.press(b"q")

            status, raw = view.exit_status()
        assert status == 0
        assert raw.rstrip().endswith("\x1b[?25h\x1b[?1049l")  # the screen given back

    def test_a_silent_run_whose_lock_is_held_shows_stalled(
        self, tmp_path: Path, terminal: Any
    ) -> None:
        old = time.time() - 3600
        log = write(tmp_path / "hung.jsonl", start("hung", old), steps("hung", 1, 9, t0=old))
        with FileLock(lock_path(log)):
            view = terminal([str(tmp_path), "--interval", "0.05"])

            view.read_until(r"hung\s+stalled\s+9")
            view.press(b"q")
            assert view.exit_status()[0] == 0

    def test_ctrl_c_quits_and_gives_the_terminal_back(self, tmp_path: Path, terminal: Any) -> None:
        write(tmp_path / "a.jsonl", start("a"), steps("a", 1, 3))
        view = terminal([str(tmp_path), "--interval", "0.05"])
        view.read_until(r"a\s+died\s+3")

        view.press(b"\x03")

        status, raw = view.exit_status()
        assert status == 0
        assert raw.rstrip().endswith("\x1b[?25h\x1b[?1049l")

    def test_a_missing_folder_is_waited_for_and_its_runs_drawn_once_it_appears(
        self, tmp_path: Path, terminal: Any
    ) -> None:
        folder = tmp_path / "runs"
        view = terminal([str(folder), "--interval", "0.05"], columns=400)
        view.read_until(rf"runlines: waiting for {re.escape(str(folder))} to appear")
        view.read_until(r"\(waiting for it to appear\)  0 logs")

        write(folder / "a.jsonl", start("a"), steps("a", 1, 3))

        view.read_until(r"a\s+died\s+3")
        view.press(b"q")
        assert view.exit_status()[0] == 0

    def test_a_resize_redraws_to_the_new_width(self, tmp_path: Path, terminal: Any) -> None:
        write(tmp_path / "a.jsonl", start("a"), steps("a", 1, 3))
        view = terminal([str(tmp_path), "--interval", "60"], columns=160)
        view.read_until(r"RUN\s+STATUS\s+STEP\s+METRIC\s+TREND\s+LAST")

        view.resize(24, 30)

        view.read_until(r"RUN\s+STATUS\s+STEP[ \r]*\n", timeout_s=20)  # long before the 60 s
        view.press(b"q")
        assert view.exit_status()[0] == 0

    def test_an_unreadable_log_is_counted_meanwhile_and_named_once_the_view_ends(
        self, tmp_path: Path, terminal: Any
    ) -> None:
        write(tmp_path / "a.jsonl", start("a"), steps("a", 1, 3))
        gone = write(tmp_path / "b.jsonl", start("b"), steps("b", 1, 3))
        view = terminal([str(tmp_path), "--interval", "0.05"])
        view.read_until(r"b\s+died\s+3")

        gone.unlink()
        gone.mkdir()  # a folder where the log was: it cannot be read as one
        view.read_until(r"1 logs \(1 died\), 1 unreadable")
        view.read_until(r"a\s+died\s+3")
        view.press(b"q")

        status, raw = view.exit_status()
        assert status == 0
        after = raw.rsplit("\x1b[?1049l", 1)[1]  # written to the terminal given back
        assert after.count("left out") == 1
        assert f"runlines: warning: left out {gone}: it cannot be read" in after
