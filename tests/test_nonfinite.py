"""NaN alarms: a `nonfinite` record and one warning per (event, field), or a raise."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Any

import pytest

from runlines import NonfiniteWarning, Run
from runlines._watching.nonfinite import last_finite


def events(path: Path, name: str | None = None) -> list[dict[str, Any]]:
    out = [json.loads(line) for line in path.read_text().splitlines()]
    return [r for r in out if name is None or r["event"] == name]


@pytest.mark.usefixtures("fast_path")
class TestWarn:
    def test_first_nan_of_a_field_writes_a_record_after_it_and_warns_once(
        self, run_dir: Path
    ) -> None:
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            with Run("r", run_dir, stdout=False, system=False) as run:
                for step, loss in enumerate([0.5, 0.25, math.nan, math.nan, math.inf, 0.1]):
                    run.log("train_step", step=step, loss=loss)

        names = [r["event"] for r in events(run.path)]
        # the warning is captured as a `warning` record too, as every shown warning is
        assert names[3:7] == ["train_step", "nonfinite", "warning", "train_step"]
        assert names.count("nonfinite") == 1
        assert names.count("warning") == 1
        assert events(run.path, "nonfinite")[0] == {
            **events(run.path, "nonfinite")[0],
            "of_event": "train_step",
            "field": "loss",
            "step": 2,
            "value": "NaN",
            "last_finite": 0.25,
        }
        alarms = [w for w in said if issubclass(w.category, NonfiniteWarning)]
        assert len(alarms) == 1
        assert "'train_step' logged a non-finite value at step 2: loss=NaN" in str(
            alarms[0].message
        )
        assert alarms[0].filename == __file__  # points at the user's log call

    def test_each_event_and_field_alarms_on_its_own(self, run_dir: Path) -> None:
        with (
            pytest.warns(NonfiniteWarning) as said,
            Run("r", run_dir, stdout=False, system=False) as run,
        ):
            run.log("train_step", step=0, loss=1.0, grad_norm=2.0)
            run.log("train_step", step=1, loss=math.nan, grad_norm=-math.inf)
            run.log("eval", step=1, loss=math.nan)

        alarms = events(run.path, "nonfinite")
        assert [(a["of_event"], a["field"], a["value"], a["last_finite"]) for a in alarms] == [
            ("train_step", "loss", "NaN", 1.0),
            ("train_step", "grad_norm", "-Infinity", 2.0),
            ("eval", "loss", "NaN", None),  # no finite loss of eval before
        ]
        assert len(said) == 2  # one warning per line, naming its new fields

    def test_a_value_inside_a_field_is_named_by_its_pointer(self, run_dir: Path) -> None:
        with pytest.warns(NonfiniteWarning), Run("r", run_dir, stdout=False) as run:
            run.log("eval", scores={"top1": 0.5})
            run.log("eval", scores={"top1": math.nan})

        alarm = events(run.path, "nonfinite")[0]
        assert alarm["field"] == "/scores/top1"
        assert alarm["last_finite"] == 0.5

    def test_a_none_is_not_an_alarm(self, run_dir: Path) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with Run("r", run_dir, stdout=False) as run:
                run.log("train_step", step=1, loss=None)
                run.log("train_step", step=2, loss=None)

        assert events(run.path, "nonfinite") == []
        assert [r["loss"] for r in events(run.path, "train_step")] == [None, None]


@pytest.mark.usefixtures("fast_path")
class TestRaiseAndIgnore:
    def test_raise_writes_the_records_then_raises(self, run_dir: Path) -> None:
        with Run("r", run_dir, stdout=False, on_nonfinite="raise") as run:
            run.log("train_step", step=-1, loss=1.0)
            run.log("train_step", step=0, loss=0.5)  # the C path's, if on
            with pytest.raises(FloatingPointError, match=r"at step 1: loss=NaN"):
                run.log("train_step", step=1, loss=math.nan)
            with pytest.raises(FloatingPointError):  # every time, as numpy's seterr does
                run.log("train_step", step=2, loss=math.nan)

        names = [r["event"] for r in events(run.path)]
        assert names == ["run_start", "train_step", "train_step", "train_step", "nonfinite",
                         "train_step", "run_end"]  # fmt: skip
        assert events(run.path, "nonfinite")[0]["last_finite"] == 0.5

    def test_ignore_writes_null_and_nothing_else(self, run_dir: Path) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with Run("r", run_dir, stdout=False, on_nonfinite="ignore") as run:
                run.log("train_step", step=1, loss=math.nan)

        assert events(run.path, "nonfinite") == []
        assert events(run.path, "train_step")[0]["_nonfinite"] == {"/loss": "NaN"}


def test_an_unknown_choice_is_refused(run_dir: Path) -> None:
    with pytest.raises(ValueError, match="on_nonfinite must be 'warn', 'raise' or 'ignore'"):
        Run("r", run_dir, stdout=False, on_nonfinite="loud")  # type: ignore[arg-type]


def test_last_finite_skips_nulls_and_other_events() -> None:
    tail = (
        b'{"ts":1,"event":"train_step","run":"r","loss":0.3}\n'
        b'{"ts":2,"event":"eval","run":"r","loss":9.0}\n'
        b'{"ts":3,"event":"train_step","run":"r","loss":null,"_nonfinite":{"/loss":"NaN"}}\n'
    )

    assert last_finite(tail, "train_step", "/loss") == 0.3
    assert last_finite(tail, "eval", "/loss") == 9.0
    assert last_finite(tail, "train_step", "/lr") is None


@pytest.mark.usefixtures("fast_path")
class TestSampled:
    """Every non-finite value that reaches the log alarms once: aggregated, owed or at close."""

    def test_a_nan_inside_an_aggregated_window_warns_once_from_its_log_call(
        self, run_dir: Path
    ) -> None:
        losses = [0.5, 0.25, math.nan, 0.125, 0.1, *[math.nan] * 5]  # then a window of NaN only
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            with Run("r", run_dir, stdout=False, system=False) as run:
                run.sample("batch", every=5, aggregate=True)
                for step, loss in enumerate(losses):
                    run.log("batch", step=step, loss=loss)

        alarms = events(run.path, "nonfinite")
        assert [(a["field"], a["step"], a["value"]) for a in alarms] == [("loss", 2, "NaN")]
        windows = events(run.path, "batch")
        assert [(w["n"], w["loss_nan"]) for w in windows] == [(5, 1), (5, 5)]
        assert windows[1]["_nonfinite"]["/loss_min"] == "NaN"  # written, and no second alarm
        shown = [w for w in said if issubclass(w.category, NonfiniteWarning)]
        assert len(shown) == 1
        assert "'batch' logged a non-finite value at step 2: loss=NaN" in str(shown[0].message)
        assert shown[0].filename == __file__  # points at the user's log call

    def test_raise_raises_from_the_log_call_of_each_nonfinite_aggregated_value(
        self, run_dir: Path
    ) -> None:
        with Run("r", run_dir, stdout=False, system=False, on_nonfinite="raise") as run:
            run.sample("batch", every=3, aggregate=True)
            for step in range(1, 10):
                loss = math.nan if step == 2 else 1.0 / step
                norm = math.inf if step == 6 else 1.0
                if step in (2, 6):
                    with pytest.raises(FloatingPointError, match=f"at step {step}: "):
                        run.log("batch", step=step, loss=loss, grad_norm=norm)
                else:
                    run.log("batch", step=step, loss=loss, grad_norm=norm)

        names = [r["event"] for r in events(run.path)]
        # step 6 closes its window: the window is written before the alarm and the raise
        assert names == ["run_start", "nonfinite", "batch", "batch", "nonfinite", "batch",
                         "run_end"]  # fmt: skip
        windows = events(run.path, "batch")
        assert [(w["step_min"], w["step_max"], w["n"]) for w in windows] == [
            (1, 3, 3),
            (4, 6, 3),
            (7, 9, 3),
        ]
        alarms = events(run.path, "nonfinite")
        assert [(a["field"], a["value"]) for a in alarms] == [
            ("loss", "NaN"),
            ("grad_norm", "Infinity"),
        ]
        assert alarms[1]["last_finite"] == 1.0  # grad_norm_last of the window before

    def test_a_per_second_window_alarms_too(self, run_dir: Path) -> None:
        with Run("r", run_dir, stdout=False, system=False, on_nonfinite="raise") as run:
            run.sample("batch", per_second=0.001, aggregate=True)
            run.log("batch", step=1, loss=0.5)
            with pytest.raises(FloatingPointError, match="at step 2: loss=-Infinity"):
                run.log("batch", step=2, loss=-math.inf)

        assert [a["value"] for a in events(run.path, "nonfinite")] == ["-Infinity"]
        assert events(run.path, "batch")[0]["n"] == 2

    @pytest.mark.parametrize("mode", ["warn", "raise"])
    def test_a_nan_in_the_last_dropped_call_alarms_at_close_as_a_warning(
        self, run_dir: Path, mode: str
    ) -> None:
        with (
            pytest.warns(NonfiniteWarning, match="at step 4: loss=NaN") as said,
            Run("r", run_dir, stdout=False, system=False, on_nonfinite=mode) as run,  # type: ignore[arg-type]
        ):
            run.sample("batch", every=10)
            for step in range(5):
                run.log("batch", step=step, loss=math.nan if step == 4 else 1.0)

        names = [r["event"] for r in events(run.path)]
        assert names == ["run_start", "batch", "batch", "nonfinite", "run_end"]
        assert events(run.path, "run_end")[0]["status"] == "ok"
        assert events(run.path, "nonfinite")[0]["last_finite"] == 1.0
        assert len(said) == 1

    def test_a_nan_owed_when_sample_replaces_the_sampler_warns(self, run_dir: Path) -> None:
        with (
            pytest.warns(NonfiniteWarning, match="at step 2: loss=NaN"),
            Run("r", run_dir, stdout=False, system=False, on_nonfinite="raise") as run,
        ):
            run.sample("batch", every=10)
            for step in range(3):
                run.log("batch", step=step, loss=math.nan if step == 2 else 1.0)
            run.sample("batch", every=2)

        names = [r["event"] for r in events(run.path)]
        # the run is open: the warning is captured as a `warning` record, as every one is
        assert names == ["run_start", "batch", "batch", "nonfinite", "warning", "run_end"]
