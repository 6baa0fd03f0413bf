"""The one model of runs: every view reads a run through `RunSummary` and `_rules`.

One rule each for an attempt's status, a run's duration, what is a metric, last and best
values, the run's config, and what is a runlines log at all.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

import runlines
from _logs import T0, line, raw, write
from runlines.cli import main
from runlines.cli._top import Top
from runlines.dashboard._runs import NOT_SERIES, RunStore, _File
from runlines.errors import ReadError, RunlinesWarning
from runlines.reading import RunSummary
from runlines.reading._copies import write_copy
from runlines.reading._follow import LogFollower
from runlines.reading._rules import BOOKKEEPING, direction
from runlines.reading._table import summary_of


def _resumed(folder: Path, *, third: dict[str, Any] | None = None) -> Path:
    """A run killed after 10 s, resumed 100 s later without a config (as Run writes it: {}),
    which ends ok after 5 s; *third*: a third attempt with that config, ok after 2 s.
    """
    lines = [
        line("run_start", run="r", attempt=1, config={"lr": 0.001, "seed": 1}),
        line("train", run="r", ts=T0 + 1, step=1, **{"train/loss": 2.0}, duration_s=0.5),
        line("train", run="r", ts=T0 + 2, step=2, **{"train/loss": 1.5}, bytes=10, dropped=1),
        line("warning", run="r", ts=T0 + 3, lineno=42, message="careful"),
        line("span", run="r", ts=T0 + 4, name="fwd", duration_s=0.5),
        line("train", run="r", ts=T0 + 10, step=3, **{"train/loss": 1.4}),
        line("run_start", run="r", ts=T0 + 110, attempt=2, config={}, resume_step=2),
        line("train", run="r", ts=T0 + 111, step=3, **{"train/loss": 1.2}),
        line("span", run="r", ts=T0 + 112, name="fwd", duration_s=0.25),
        line(
            "run_end",
            run="r",
            ts=T0 + 115,
            status="ok",
            dropped=3,
            dropped_by_sink={"console": 2, "wandb": 1},
            spans={"fwd": {"count": 1, "total_s": 0.25, "mean_s": 0.25, "max_s": 0.25}},
        ),
    ]
    if third is not None:
        lines += [
            line("run_start", run="r", ts=T0 + 200, attempt=3, config=third, resume_step=3),
            line("run_end", run="r", ts=T0 + 202, status="ok"),
        ]
    return write(folder / "r.jsonl", *lines)


def _cli_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    capsys.readouterr()
    assert main([*argv]) == 0
    return json.loads(capsys.readouterr().out)


class TestAttemptsAndDuration:
    def test_ls_show_and_runs_agree_on_a_resumed_runs_duration(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = _resumed(tmp_path)

        (row,) = _cli_json(capsys, "ls", "--json", str(tmp_path))
        shown = _cli_json(capsys, "show", "--json", str(log))
        assert main(["show", str(log)]) == 0
        header = capsys.readouterr().out.split("\n\n")[0]

        # 10 s and 5 s of attempts; the 100 s between them never count
        assert row["duration_s"] == shown["duration_s"] == 15.0
        assert runlines.runs(tmp_path)["duration_s"].tolist() == [15.0]
        assert "duration  15.0s" in header

    def test_each_attempt_has_its_own_status_and_duration(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = _resumed(tmp_path)

        shown = _cli_json(capsys, "show", "--json", str(log))
        attempts = _summary_of(log).attempts_detail(alive=False)

        for found in (shown["attempts"], attempts):
            assert [a["status"] for a in found] == ["died", "ok"]
            assert [a["duration_s"] for a in found] == [10.0, 5.0]
        assert sum(a["duration_s"] for a in attempts) == _summary_of(log).duration_s

    def test_an_attempt_without_run_end_died_whatever_came_later(self, tmp_path: Path) -> None:
        log = write(
            tmp_path / "r.jsonl",
            line("run_start", attempt=1),
            line("run_start", ts=T0 + 5, attempt=2),
            line("run_end", ts=T0 + 6, status="failed", exc_type="ValueError"),
            line("run_start", ts=T0 + 7, attempt=3),
        )

        statuses = [a["status"] for a in _summary_of(log).attempts_detail(alive=True, now=T0)]

        assert statuses == ["died", "failed", "running"]

    def test_a_restored_summary_reads_its_historys_attempts_again(self, tmp_path: Path) -> None:
        log = _resumed(tmp_path, third={"lr": 0.01, "seed": 1})
        write_copy(log)
        with log.open("ab") as stream:  # a fourth attempt after the copy
            stream.write(line("run_start", run="r", ts=T0 + 300, attempt=4, config={}))

        from_copy = summary_of(runlines.reading.log_file(log))
        whole = _summary_of(log)

        assert from_copy.attempts_detail(alive=False) == whole.attempts_detail(alive=False)
        assert [a["status"] for a in whole.attempts_detail(alive=False)][-1] == "died"


def _summary_of(path: Path) -> RunSummary:
    summary = RunSummary(path)
    for record in runlines.iter_events(path):
        summary.add(record)
    return summary


class TestMetrics:
    def test_show_leaves_bookkeeping_out_of_last_values(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = _resumed(tmp_path)

        shown = _cli_json(capsys, "show", "--json", str(log))
        assert main(["show", str(log)]) == 0
        text = capsys.readouterr().out.split("last values\n")[1]

        fields = {(v["event"], v["field"]) for v in shown["last"]}
        assert fields == {("train", "train/loss")}  # no lineno, duration_s, bytes or dropped
        assert "lineno" not in text
        assert "duration_s" not in text

    def test_show_prints_drops_per_sink_as_a_table(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = _resumed(tmp_path)

        assert main(["show", str(log)]) == 0
        out = capsys.readouterr().out

        table = out.split("drops per sink\n")[1].split("\n\n")[0].splitlines()
        assert table[0].split() == ["ATTEMPT", "SINK", "DROPPED"]
        assert [row.split() for row in table[1:]] == [["2", "console", "2"], ["2", "wandb", "1"]]
        assert '{"console"' not in out

    def test_a_wandb_style_name_gets_a_best_from_its_last_part(self, tmp_path: Path) -> None:
        log = _resumed(tmp_path)

        row = runlines.runs(log).iloc[0]

        assert direction("train/loss") == "min"
        assert direction("eval/accuracy") == "max"
        assert direction("loss/scale") is None  # a loss scaler's value is no loss
        assert row["train.train/loss.best"] == 1.2

    def test_runs_ls_and_show_agree_on_last_and_best(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = _resumed(tmp_path)

        (row,) = _cli_json(capsys, "ls", "--json", str(tmp_path))
        shown = _cli_json(capsys, "show", "--json", str(log))
        frame = runlines.runs(log).iloc[0]

        (value,) = shown["last"]
        assert value["value"] == row["train.train/loss"] == frame["train.train/loss"] == 1.2
        assert value["best"] == row["train.train/loss.best"] == frame["train.train/loss.best"]
        assert value["step"] == 3

    def test_the_dashboard_charts_no_field_that_runs_calls_bookkeeping(
        self, tmp_path: Path
    ) -> None:
        log = _resumed(tmp_path)
        charted = _File(0, LogFollower(log))
        for record in runlines.iter_events(log):
            charted.take(record)

        columns = {c for c in runlines.runs(log).columns if c.startswith("train.")}

        assert NOT_SERIES == BOOKKEEPING
        assert {f"train.{name}" for _, name in charted.series if _ == "train"} == {
            c for c in columns if not c.endswith(".best")
        }


class TestSpans:
    def test_show_counts_the_spans_of_every_attempt_as_the_dashboard(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = _resumed(tmp_path)
        store = RunStore([tmp_path])
        store.refresh(force=True)

        shown = _cli_json(capsys, "show", "--json", str(log))
        (count, total, _) = store.runs["r"].files[0].spans["fwd"]

        assert shown["spans"]["fwd"]["count"] == count == 2
        assert shown["spans"]["fwd"]["total_s"] == total == 0.75


class TestConfig:
    def test_an_attempt_without_config_keeps_the_runs_config_in_every_view(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = _resumed(tmp_path)
        other = write(
            tmp_path / "other" / "o.jsonl", line("run_start", run="o", config={"lr": 0.001})
        )
        store = RunStore([log])
        store.refresh(force=True)

        (row,) = _cli_json(capsys, "ls", "--json", str(tmp_path))
        shown = _cli_json(capsys, "show", "--json", str(log))
        frame = runlines.runs(log)

        assert row["config.lr"] == frame["config.lr"].tolist()[0] == 0.001
        assert shown["config"] == {"lr": 0.001, "seed": 1}
        assert store.runs["r"].config == {"lr": 0.001, "seed": 1}
        difference = runlines.diff(log, other)
        assert difference.removed == {"seed": 1}
        assert difference.changed == {}

    def test_the_copy_keeps_the_runs_config_as_the_log(self, tmp_path: Path) -> None:
        log = _resumed(tmp_path)
        write_copy(log)

        assert runlines.runs(log)["config.lr"].tolist() == [0.001]

    def test_show_names_what_an_attempt_changed_in_the_config(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = _resumed(tmp_path, third={"lr": 0.01, "seed": 1, "warmup": 5})
        store = RunStore([log])
        store.refresh(force=True)

        shown = _cli_json(capsys, "show", "--json", str(log))
        assert main(["show", str(log)]) == 0
        out = capsys.readouterr().out

        changes = [a["config_changes"] for a in shown["attempts"]]
        assert changes == [{}, {}, {"lr": [0.001, 0.01], "warmup": [None, 5]}]
        assert "lr: 0.001 -> 0.01, warmup: - -> 5" in out
        assert [a["config_changes"] for a in store.runs["r"].attempts] == changes

    def test_diff_lists_each_attempt_and_what_it_changed(self, tmp_path: Path) -> None:
        log = _resumed(tmp_path, third={"lr": 0.01, "seed": 1, "warmup": 5})
        other = write(tmp_path / "o" / "o.jsonl", line("run_start", run="o", config={"lr": 0.01}))

        found = runlines.diff(log, other)

        assert found.attempts["a"] == [
            {"attempt": 1, "status": "died", "config_changes": {}},
            {"attempt": 2, "status": "ok", "config_changes": {}},
            {
                "attempt": 3,
                "status": "ok",
                "config_changes": {"lr": [0.001, 0.01], "warmup": [None, 5]},
            },
        ]
        assert found.changed == {}  # the run's config is its last attempt's: lr 0.01
        assert found.to_dict()["attempts"]["b"] == [
            {"attempt": 1, "status": "died", "config_changes": {}}
        ]

    def test_diff_prints_each_attempt_and_what_it_changed(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = _resumed(tmp_path, third={"lr": 0.01, "seed": 1, "warmup": 5})
        other = write(tmp_path / "o" / "o.jsonl", line("run_start", run="o", config={"lr": 0.01}))

        assert main(["diff", str(log), str(other)]) == 0
        out = capsys.readouterr().out

        attempts = out.split("\nattempts\n")[1].split("\n\n")[0].splitlines()
        assert attempts == [
            "  a: attempt 1 died",
            "  a: attempt 2 ok",
            "  a: attempt 3 ok; config: lr 0.001 -> 0.01, warmup null -> 5",
            "  b: attempt 1 died",
        ]


class TestForeignLogs:
    @pytest.fixture
    def folder(self, tmp_path: Path) -> Path:
        _resumed(tmp_path)
        write(tmp_path / "data.jsonl", raw({"text": "hello", "label": 1}), raw({"text": "x"}))
        return tmp_path

    def test_ls_leaves_a_foreign_jsonl_out_with_one_note(
        self, folder: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        rows = _cli_json(capsys, "ls", "--json", str(folder))
        assert main(["ls", str(folder)]) == 0
        captured = capsys.readouterr()

        assert [r["run"] for r in rows] == ["r"]
        assert "data" not in captured.out
        assert captured.err.count("data.jsonl") == 1
        assert "data.jsonl: it is not a runlines log" in captured.err

    def test_runs_leaves_a_foreign_jsonl_out_with_one_warning(self, folder: Path) -> None:
        with pytest.warns(RunlinesWarning, match=r"data\.jsonl: it is not a runlines log") as w:
            frame = runlines.runs(folder)

        assert frame["run"].tolist() == ["r"]
        assert len(w) == 1

    def test_top_leaves_a_foreign_jsonl_out_with_one_warning(self, folder: Path) -> None:
        top = Top([folder], alive=lambda _: False, clock=lambda: T0 + 200)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            top.refresh()
            rows = top.rows()
            top.rows()

        assert [row.run for row in rows] == ["r"]
        assert [str(w.message).count("data.jsonl") for w in caught] == [1]

    def test_the_dashboard_leaves_a_foreign_jsonl_out_with_one_note(
        self, folder: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        store = RunStore([folder])
        store.refresh(force=True)
        store.refresh(force=True)

        assert list(store.runs) == ["r"]
        assert capsys.readouterr().err.count("data.jsonl") == 1

    def test_diff_and_compare_refuse_a_foreign_jsonl(
        self, folder: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        foreign = folder / "data.jsonl"
        with pytest.raises(ReadError, match=r"data\.jsonl is not a runlines log"):
            runlines.diff(folder / "r.jsonl", foreign)
        with pytest.raises(ReadError, match=r"data\.jsonl is not a runlines log"):
            runlines.compare(folder / "r.jsonl", foreign, metric="label")

        assert main(["diff", str(folder / "r.jsonl"), str(foreign)]) == 1
        assert "data.jsonl is not a runlines log" in capsys.readouterr().err
        assert main(["compare", str(folder / "r.jsonl"), str(foreign), "--metric", "label"]) == 1
        assert "data.jsonl is not a runlines log" in capsys.readouterr().err

    def test_load_of_a_foreign_jsonl_warns_that_it_is_none(self, folder: Path) -> None:
        with pytest.warns(RunlinesWarning, match=r"data\.jsonl is not a runlines log"):
            frame = runlines.load(folder / "data.jsonl")

        assert frame["label"].tolist()[0] == 1

    def test_a_runlines_log_gets_no_such_warning(self, tmp_path: Path) -> None:
        log = _resumed(tmp_path)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            runlines.load(log)
            runlines.load(log, event="train")
            runlines.runs(log)
            write_copy(log)
            runlines.load(log)
