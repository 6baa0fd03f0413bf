"""runlines.diff and `runlines diff`: config, environment, and the first step where runs part."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

import runlines
from _logs import T0, line, write
from runlines.cli import main


def _run(path: Path, *, part_at: int | None, **start: Any) -> Path:
    records = [line("run_start", run=path.stem, attempt=1, config={"optim": {"lr": 0.1}}, **start)]
    for step in range(1, 51):
        drift = 0.01 if part_at is not None and step >= part_at else 0.0
        loss = 1 / step + drift
        records.append(line("train_step", run=path.stem, ts=T0 + step, step=step, loss=loss))
    records.append(line("eval", run=path.stem, ts=T0 + 60, step=50, accuracy=0.5))
    return write(path, *records)


@pytest.fixture(name="pair")
def _pair(tmp_path: Path) -> tuple[Path, Path]:
    env_a = {"git_commit": "aaa", "python": "3.11.7", "env": {"packages": {"torch": "2.4"}}}
    env_b = {"git_commit": "bbb", "python": "3.11.7", "env": {"packages": {"torch": "2.5"}}}
    a = _run(tmp_path / "a.jsonl", part_at=None, **env_a)
    b = _run(tmp_path / "b.jsonl", part_at=41, **env_b)
    return a, b


def test_diff_of_runs_that_agree_up_to_step_40_reports_step_41(pair: tuple[Path, Path]) -> None:
    found = runlines.diff(*pair)

    loss = next(m for m in found.metrics if (m.event, m.field) == ("train_step", "loss"))
    assert loss.step == 41
    assert loss.a == pytest.approx(1 / 41)
    assert loss.b == pytest.approx(1 / 41 + 0.01)
    accuracy = next(m for m in found.metrics if m.field == "accuracy")
    assert accuracy.agrees
    assert accuracy.last_shared_step == 50


def test_diff_reports_the_environment_both_recorded(pair: tuple[Path, Path]) -> None:
    found = runlines.diff(*pair)

    assert found.environment == {
        "env.packages.torch": ("2.4", "2.5"),
        "git_commit": ("aaa", "bbb"),
    }
    assert found.changed == {}


def test_diff_reports_config_added_removed_changed(tmp_path: Path) -> None:
    a = write(tmp_path / "a.jsonl", line("run_start", config={"lr": 0.1, "old": 1, "same": 2}))
    b = write(tmp_path / "b.jsonl", line("run_start", config={"lr": 0.2, "new": 3, "same": 2}))

    found = runlines.diff(a, b)

    assert found.added == {"new": 3}
    assert found.removed == {"old": 1}
    assert found.changed == {"lr": (0.1, 0.2)}


def test_a_tolerance_hides_small_differences(pair: tuple[Path, Path]) -> None:
    found = runlines.diff(*pair, atol=0.02)

    assert all(m.agrees for m in found.metrics)


def test_cli_diff_text_and_json(
    pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["diff", str(pair[0]), str(pair[1])]) == 0
    text = capsys.readouterr().out
    assert main(["diff", "--json", str(pair[0]), str(pair[1])]) == 0
    data = json.loads(capsys.readouterr().out)

    assert "train_step.loss  first differ at step 41" in text
    assert 'git_commit: "aaa" -> "bbb"' in text
    assert {m["field"]: m["step"] for m in data["metrics"]} == {"loss": 41, "accuracy": None}


def _losses(path: Path, losses: list[float | None]) -> Path:
    """Write a run whose train_step at step i + 1 logs losses[i] (None: no loss field)."""
    records = [line("run_start", run=path.stem, attempt=1)]
    for step, loss in enumerate(losses, start=1):
        fields = {} if loss is None else {"loss": loss}
        records.append(line("train_step", run=path.stem, ts=T0 + step, step=step, **fields))
    return write(path, *records)


def _loss_diff(tmp_path: Path, a: list[float | None], b: list[float | None]) -> Any:
    found = runlines.diff(_losses(tmp_path / "a.jsonl", a), _losses(tmp_path / "b.jsonl", b))
    return next(m for m in found.metrics if (m.event, m.field) == ("train_step", "loss"))


class TestNonfinite:
    def test_nan_where_the_other_run_is_finite_is_a_difference(self, tmp_path: Path) -> None:
        loss = _loss_diff(tmp_path, [1.0, 0.5, 0.25], [1.0, math.nan, 0.25])

        assert (loss.step, loss.a) == (2, 0.5)
        assert math.isnan(loss.b)

    def test_nan_in_the_first_run_is_a_difference_too(self, tmp_path: Path) -> None:
        loss = _loss_diff(tmp_path, [1.0, math.nan, 0.25], [1.0, 0.5, 0.25])

        assert loss.step == 2
        assert math.isnan(loss.a)
        assert loss.b == 0.5

    def test_nan_on_both_sides_agrees(self, tmp_path: Path) -> None:
        loss = _loss_diff(tmp_path, [1.0, math.nan, 0.25], [1.0, math.nan, 0.25])

        assert loss.agrees
        assert loss.last_shared_step == 3

    def test_inf_and_minus_inf_differ(self, tmp_path: Path) -> None:
        loss = _loss_diff(tmp_path, [1.0, math.inf], [1.0, -math.inf])

        assert (loss.step, loss.a, loss.b) == (2, math.inf, -math.inf)

    def test_a_field_only_nan_in_one_run_is_still_compared(self, tmp_path: Path) -> None:
        loss = _loss_diff(tmp_path, [1.0, 0.5], [math.nan, math.nan])

        assert loss.step == 1

    def test_a_step_where_one_run_lacks_the_field_is_not_compared(self, tmp_path: Path) -> None:
        loss = _loss_diff(tmp_path, [1.0, 0.5, 0.25, 0.125], [1.0, None, 0.25, None])

        assert loss.agrees
        assert loss.last_shared_step == 3

    def test_cli_shows_nan_in_text_and_as_the_log_names_it_in_json(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        a = _losses(tmp_path / "a.jsonl", [1.0, 0.5])
        b = _losses(tmp_path / "b.jsonl", [1.0, math.nan])

        assert main(["diff", str(a), str(b)]) == 0
        text = capsys.readouterr().out
        assert main(["diff", "--json", str(a), str(b)]) == 0
        data = json.loads(capsys.readouterr().out)

        assert "train_step.loss  first differ at step 2: 0.5 vs nan" in text
        assert data["metrics"][0] | {"agrees": False} == {
            "event": "train_step", "field": "loss", "step": 2, "a": 0.5, "b": "NaN",
            "last_shared_step": 2, "where": {}, "agrees": False,
        }  # fmt: skip


def test_runlines_own_records_are_not_diffed(tmp_path: Path) -> None:
    def run(path: Path, lineno: int) -> Path:
        return write(
            path,
            line("run_start", run=path.stem, attempt=1),
            line("train_step", run=path.stem, step=1, loss=1.0),
            line("warning", run=path.stem, step=1, lineno=lineno, message="careful"),
        )

    found = runlines.diff(run(tmp_path / "a.jsonl", 10), run(tmp_path / "b.jsonl", 20))

    assert [(m.event, m.field) for m in found.metrics] == [("train_step", "loss")]


def _evals(path: Path, splits: dict[str, list[float]]) -> Path:
    """Write a run that logs one eval record per split at each step: splits[name][step - 1]."""
    records = [line("run_start", run=path.stem, attempt=1)]
    for name, losses in splits.items():
        for step, loss in enumerate(losses, start=1):
            records.append(line("eval", run=path.stem, step=step, split=name, loss=loss))
    return write(path, *records)


def _eval_loss(found: Any) -> Any:
    return next(m for m in found.metrics if (m.event, m.field) == ("eval", "loss"))


class TestEveryRecordOfAStep:
    def test_a_split_logged_before_another_at_the_same_step_is_compared(
        self, tmp_path: Path
    ) -> None:
        a = _evals(tmp_path / "a.jsonl", {"val": [0.5, 0.4], "test": [0.7, 0.6]})
        b = _evals(tmp_path / "b.jsonl", {"val": [0.5, 0.9], "test": [0.7, 0.6]})

        loss = _eval_loss(runlines.diff(a, b))

        assert (loss.step, loss.a, loss.b, loss.where) == (2, 0.4, 0.9, {"split": "val"})

    def test_records_are_matched_by_their_split_not_their_order(self, tmp_path: Path) -> None:
        a = _evals(tmp_path / "a.jsonl", {"val": [0.5, 0.4], "test": [0.7, 0.6]})
        b = _evals(tmp_path / "b.jsonl", {"test": [0.7, 0.6], "val": [0.5, 0.4]})

        loss = _eval_loss(runlines.diff(a, b))

        assert loss.agrees
        assert loss.last_shared_step == 2

    def test_a_split_only_one_run_logged_is_not_compared(self, tmp_path: Path) -> None:
        a = _evals(tmp_path / "a.jsonl", {"val": [0.5, 0.4], "test": [0.7, 0.6]})
        b = _evals(tmp_path / "b.jsonl", {"val": [0.5, 0.4]})

        assert _eval_loss(runlines.diff(a, b)).agrees

    def test_records_without_a_telling_field_are_matched_in_order(self, tmp_path: Path) -> None:
        def run(path: Path, second: float) -> Path:
            return write(
                path,
                line("run_start", run=path.stem, attempt=1),
                line("train_step", run=path.stem, step=1, loss=1.0, note=path.stem),
                line("train_step", run=path.stem, step=1, loss=second, note=path.stem),
            )

        found = runlines.diff(run(tmp_path / "a.jsonl", 0.5), run(tmp_path / "b.jsonl", 0.6))

        loss = found.metrics[0]
        assert (loss.step, loss.a, loss.b, loss.where) == (1, 0.5, 0.6, {})

    def test_cli_names_the_split_that_differs(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        a = _evals(tmp_path / "a.jsonl", {"val": [0.5], "test": [0.7]})
        b = _evals(tmp_path / "b.jsonl", {"val": [0.5], "test": [0.8]})

        assert main(["diff", str(a), str(b)]) == 0
        text = capsys.readouterr().out

        assert "eval.loss  first differ at step 1 (split=test): 0.7 vs 0.8" in text


def test_config_values_nan_on_both_sides_are_no_change(tmp_path: Path) -> None:
    config = {"dropout": math.nan, "betas": [0.9, math.nan], "lr": 0.1}
    a = write(tmp_path / "a.jsonl", line("run_start", config=config))
    b = write(tmp_path / "b.jsonl", line("run_start", config={**config, "lr": 0.2}))

    found = runlines.diff(a, b)

    assert found.changed == {"lr": (0.1, 0.2)}


@pytest.mark.parametrize("tolerance", [-math.inf, math.nan, -1e-9, math.inf])
@pytest.mark.parametrize("name", ["rtol", "atol"])
def test_a_tolerance_that_is_no_finite_number_at_least_0_is_refused(
    pair: tuple[Path, Path], name: str, tolerance: float
) -> None:
    tolerances = {"rtol": 1e-5, "atol": 1e-8, name: tolerance}

    with pytest.raises(ValueError, match=f"{name} must be a finite number >= 0"):
        runlines.diff(*pair, rtol=tolerances["rtol"], atol=tolerances["atol"])


def test_a_run_agrees_with_itself_at_a_tolerance_of_0(pair: tuple[Path, Path]) -> None:
    found = runlines.diff(pair[0], pair[0], rtol=0, atol=0)

    assert all(m.agrees for m in found.metrics)


def test_cli_refuses_a_negative_tolerance_as_a_usage_error(
    pair: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["diff", "--atol=-inf", str(pair[0]), str(pair[1])]) == 2

    assert "atol must be a finite number >= 0" in capsys.readouterr().err


class TestCommandLine:
    """The command line (run_start's `argv`) is compared along with the config."""

    def _run(self, path: Path, *argvs: list[str] | None) -> Path:
        """Write a run of one attempt per argv (None: an attempt that recorded none)."""
        records = []
        for attempt, argv in enumerate(argvs, start=1):
            start: dict[str, Any] = {} if argv is None else {"argv": argv}
            records.append(line("run_start", run=path.stem, attempt=attempt, **start))
            records.append(line("train_step", run=path.stem, step=attempt, loss=1.0))
        return write(path, *records)

    def test_different_command_lines_are_reported_with_both(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        a = self._run(tmp_path / "a.jsonl", ["train.py", "--lr", "1e-3"])
        b = self._run(tmp_path / "b.jsonl", ["train.py", "--lr", "1e-2", "--name", "my run"])

        found = runlines.diff(a, b)
        assert main(["diff", str(a), str(b)]) == 0
        text = capsys.readouterr().out
        assert main(["diff", "--json", str(a), str(b)]) == 0
        data = json.loads(capsys.readouterr().out)

        assert found.argv == (
            ["train.py", "--lr", "1e-3"],
            ["train.py", "--lr", "1e-2", "--name", "my run"],
        )
        assert data["argv"] == [list(found.argv[0]), list(found.argv[1])]
        assert "argv" not in found.environment
        assert (
            "\ncommand\n  a: train.py --lr 1e-3\n  b: train.py --lr 1e-2 --name 'my run'\n" in text
        )

    def test_the_same_command_line_is_same(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        a = self._run(tmp_path / "a.jsonl", ["train.py", "--lr", "1e-3"])
        b = self._run(tmp_path / "b.jsonl", ["train.py", "--lr", "1e-3"])

        assert runlines.diff(a, b).argv is None
        assert main(["diff", str(a), str(b)]) == 0
        assert "\ncommand\n  same\n" in capsys.readouterr().out
        assert main(["diff", "--json", str(a), str(b)]) == 0
        assert json.loads(capsys.readouterr().out)["argv"] is None

    def test_the_last_attempts_command_line_counts(self, tmp_path: Path) -> None:
        a = self._run(tmp_path / "a.jsonl", ["train.py"], ["train.py", "--resume"])
        b = self._run(tmp_path / "b.jsonl", ["train.py", "--resume"])

        assert runlines.diff(a, b).argv is None

    def test_a_run_that_recorded_none_differs_from_one_that_did(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        a = self._run(tmp_path / "a.jsonl", None)
        b = self._run(tmp_path / "b.jsonl", ["train.py"])

        assert runlines.diff(a, b).argv == (None, ["train.py"])
        assert main(["diff", str(a), str(b)]) == 0
        assert "\ncommand\n  a: - (not recorded)\n  b: train.py\n" in capsys.readouterr().out
