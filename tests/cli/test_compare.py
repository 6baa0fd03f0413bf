"""`runlines compare` and `runlines.compare`: a metric per run and event, one row per step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import runlines
from _logs import T0, line, raw, train, write
from runlines.cli import main


class TestCompare:
    def test_prints_one_column_per_run(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        train(run_dir, "a", range(1, 4))
        train(run_dir, "b", range(1, 3))

        assert (
            main(
                ["compare", str(run_dir / "a.jsonl"), str(run_dir / "b.jsonl"), "--metric", "loss"]
            )
            == 0
        )

        assert capsys.readouterr().out.splitlines() == [
            "step         a    b",
            "   1         1    1",
            "   2       0.5  0.5",
            "   3  0.333333    -",
        ]

    def test_run_names_and_by(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        train(run_dir, "a", range(1, 25))
        monkeypatch.chdir(run_dir)

        assert main(["compare", "a", "--metric", "loss", "--by", "epoch", "--agg", "max"]) == 0

        assert capsys.readouterr().out.splitlines()[1].split() == ["0", "1"]

    def test_unknown_metric_is_one_error_line(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = train(run_dir, "a", range(1, 3))

        assert main(["compare", str(log), "--metric", "acc"]) == 1

        err = capsys.readouterr().err
        assert err.startswith("runlines: error: metric 'acc' is in no record; numeric fields: ")
        assert err.count("\n") == 1

    def test_compare_json(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        log = write(tmp_path / "r.jsonl", line("eval", run="r", step=1, loss=0.5))

        assert main(["compare", "--json", str(log), "--metric", "loss"]) == 0

        assert json.loads(capsys.readouterr().out) == [{"step": 1, "r": 0.5}]


class TestMetricOfOneEvent:
    def _log(self, tmp_path: Path) -> Path:
        return write(
            tmp_path / "lr1e-2.jsonl",
            line("train_step", run="lr1e-2", step=50, loss=0.0975),
            line("eval", run="lr1e-2", ts=T0 + 1, step=50, loss=0.1085),
        )

    def test_compare_never_averages_train_and_eval_loss(self, tmp_path: Path) -> None:
        table = runlines.compare(self._log(tmp_path), metric="loss")

        assert list(table.columns) == ["lr1e-2 · train_step", "lr1e-2 · eval"]
        assert table.loc[50].tolist() == [0.0975, 0.1085]

    def test_a_record_whose_event_is_no_string_is_no_metric(self, tmp_path: Path) -> None:
        log = write(
            tmp_path / "r.jsonl",
            line("train_step", run="r", step=1, loss=0.5),
            line("train_step", run="r", step=2, loss=0.25),
            raw({"ts": T0, "event": [], "run": "r", "step": 1, "loss": 9.0}),  # hand-written
        )

        table = runlines.compare(log, metric="loss")

        assert table["r"].to_dict() == {1: 0.5, 2: 0.25}

    def test_no_record_holding_both_fields_gives_an_empty_table(self, tmp_path: Path) -> None:
        log = write(
            tmp_path / "r.jsonl",
            line("train_step", run="r", step=1),
            line("eval", run="r", loss=0.5),  # no step
        )

        table = runlines.compare(log, metric="loss")

        assert table.empty
        assert list(table.columns) == []

    def test_cli_compare_prints_a_column_per_event(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["compare", str(self._log(tmp_path)), "--metric", "loss"]) == 0

        out = capsys.readouterr().out
        assert "0.0975" in out
        assert "0.1085" in out
        assert "0.10299" not in out

    def test_same_names_in_two_folders_are_two_columns(self, tmp_path: Path) -> None:
        for folder, loss in (("exp1", 0.1), ("exp2", 0.2)):
            write(
                tmp_path / folder / "baseline.jsonl",
                line("eval", run="baseline", step=1, loss=loss),
            )

        table = runlines.compare(tmp_path / "exp1", tmp_path / "exp2", metric="loss")

        assert table.loc[1].to_dict() == {"exp1/baseline": 0.1, "exp2/baseline": 0.2}

    def test_compare_by_elapsed_seconds(self, tmp_path: Path) -> None:
        table = runlines.compare(self._log(tmp_path), metric="loss", by="elapsed_s", event="eval")

        assert table.index.tolist() == [1.0]
