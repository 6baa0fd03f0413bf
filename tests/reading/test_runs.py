"""runlines.runs() and RunSummary: one row per run, a metric is a field of one event."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import runlines
from _logs import T0, line, write
from runlines.cli import main
from runlines.dashboard._runs import _File
from runlines.reading import RunSummary
from runlines.reading._copies import write_copy
from runlines.reading._follow import LogFollower
from runlines.reading._rules import NOT_METRIC_EVENTS
from runlines.reading._summary import is_stalled


def _sweep(folder: Path) -> Path:
    for i, lr in enumerate((0.1, 0.01, 0.001)):
        with runlines.Run(
            f"lr{lr}", folder, config={"optim": {"lr": lr}, "seed": i}, stdout=False
        ) as run:
            for step in range(3):
                run.log("train_step", step=step, loss=1.0 - 0.1 * step, n=4)
            run.log("eval", step=2, loss=0.5 + lr, accuracy=0.9 - lr)
    return folder


def test_runs_of_a_sweep_shows_config_and_eval_accuracy_per_run(tmp_path: Path) -> None:
    table = runlines.runs(_sweep(tmp_path)).set_index("run")

    assert sorted(table.index) == ["lr0.001", "lr0.01", "lr0.1"]
    assert table.loc["lr0.01", "config.optim.lr"] == 0.01
    assert table.loc["lr0.1", "eval.accuracy"] == pytest.approx(0.8)
    assert table.loc["lr0.1", "eval.accuracy.best"] == pytest.approx(0.8)
    assert (table["status"] == "ok").all()
    assert isinstance(table["started"].dtype, pd.DatetimeTZDtype)


def test_train_and_eval_loss_stay_apart_and_bookkeeping_is_no_metric(tmp_path: Path) -> None:
    table = runlines.runs(_sweep(tmp_path)).set_index("run")

    assert table.loc["lr0.1", "train_step.loss"] == pytest.approx(0.8)
    assert table.loc["lr0.1", "train_step.loss.best"] == pytest.approx(0.8)
    assert table.loc["lr0.1", "eval.loss"] == pytest.approx(0.6)
    assert "loss" not in table.columns
    assert "train_step.n" not in table.columns
    assert "train_step.step" not in table.columns


def _watched(path: Path) -> Path:
    """Write a run with runlines' own records among its metrics, as a watched run has."""
    return write(
        path,
        line("run_start", run="w", attempt=1),
        line("train_step", run="w", ts=T0 + 1, step=1, loss=math.nan),
        line("nonfinite", run="w", ts=T0 + 1, of_event="train_step", field="loss", step=1,
             value="NaN", last_finite=0.5),
        line("warning", run="w", ts=T0 + 2, category="UserWarning", message="m", lineno=12),
        line("log", run="w", ts=T0 + 2, level="INFO", message="m", lineno=34),
        line("stall", run="w", ts=T0 + 3, idle_s=700.0),
        line("stall_end", run="w", ts=T0 + 4, idle_s=701.0),
        line("system", run="w", ts=T0 + 4, cpu_percent=99.0, gpu0_mem_used_bytes=2**30),
        line("span", run="w", ts=T0 + 5, name="fwd", duration_s=0.1),
        line("run_end", run="w", ts=T0 + 6, attempt=1, status="ok"),
    )  # fmt: skip


def test_runlines_own_records_are_no_metrics_and_system_has_no_best(tmp_path: Path) -> None:
    table = runlines.runs(_watched(tmp_path / "w.jsonl"))

    metrics = [c for c in table.columns if "." in c]
    assert metrics == ["train_step.loss", "train_step.loss.best", "system.cpu_percent",
                       "system.gpu0_mem_used_bytes"]  # fmt: skip
    assert table.loc[0, "system.gpu0_mem_used_bytes"] == 2**30


def test_ls_json_and_the_dashboard_charts_follow_the_same_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _watched(tmp_path / "w.jsonl")
    charted = _File(0, LogFollower(log))
    for record in runlines.iter_events(log):
        charted.take(record)

    assert main(["ls", "--json", str(tmp_path)]) == 0
    row = json.loads(capsys.readouterr().out)[0]

    assert not [key for key in row if key.split(".")[0] in NOT_METRIC_EVENTS]
    assert {event for event, _ in charted.series} == {"train_step", "system", "span"}


def test_same_names_in_two_folders_are_two_rows(tmp_path: Path) -> None:
    for folder, loss in (("exp1", 0.1), ("exp2", 0.2)):
        write(tmp_path / folder / "baseline.jsonl", line("eval", run="baseline", step=1, loss=loss))

    table = runlines.runs(tmp_path / "exp1", tmp_path / "exp2").set_index("run")

    assert table.loc["exp1/baseline", "eval.loss"] == 0.1
    assert table.loc["exp2/baseline", "eval.loss"] == 0.2


class TestRunSummary:
    def test_row_has_exactly_the_keys_of_a_runs_row(self, tmp_path: Path) -> None:
        path = _sweep(tmp_path) / "lr0.1.jsonl"
        summary = RunSummary(path)
        for record in runlines.iter_events(path):
            summary.add(record)

        row = summary.row(alive=False)

        assert list(row) == list(runlines.runs(path).columns)
        assert row["run"] == "lr0.1"
        assert row["step"] == 2

    def test_attempts_and_duration_leave_the_gap_between_attempts_out(self) -> None:
        summary = RunSummary("r.jsonl")
        for record in (
            {"ts": T0, "event": "run_start", "attempt": 1},
            {"ts": T0 + 10, "event": "train", "step": 1, "loss": 0.5},
            {"ts": T0 + 11, "event": "run_end", "status": "failed"},
            {"ts": T0 + 1000, "event": "run_start", "attempt": 2, "resume_step": 0},
            {"ts": T0 + 1005, "event": "train", "step": 1, "loss": 0.7},
            {"ts": T0 + 1006, "event": "run_end", "status": "ok"},
        ):
            summary.add(record)

        row = summary.row(alive=False)

        assert row["attempts"] == 2
        assert row["duration_s"] == pytest.approx(11 + 6)
        assert row["status"] == "ok"
        assert row["train.loss"] == 0.7
        assert row["train.loss.best"] == 0.7  # attempt 2 rewrote step 1: 0.5 is superseded

    def test_best_keeps_what_a_rewinding_attempt_did_not_rewrite(self) -> None:
        summary = RunSummary("r.jsonl")
        records = [{"ts": T0, "event": "run_start", "attempt": 1}]
        records += [{"ts": T0 + s, "event": "eval", "step": s, "loss": 1.0 / s} for s in (1, 2, 3)]
        records += [{"ts": T0 + 9, "event": "run_start", "attempt": 2, "resume_step": 1}]
        records += [{"ts": T0 + 10, "event": "eval", "step": 2, "loss": 0.9}]
        for record in records:
            summary.add(record)

        row = summary.row(alive=False)

        assert row["eval.loss.best"] == 0.9  # steps 2 and 3 of attempt 1 were rewound
        assert row["status"] == "died"

    def test_best_keeps_what_a_restart_without_resume_step_did_not_rewrite(self) -> None:
        summary = RunSummary("r.jsonl")
        records = [{"ts": T0, "event": "run_start", "attempt": 1}]
        records += [{"ts": T0, "event": "eval", "step": s, "loss": 1.0 / s} for s in range(1, 11)]
        records += [{"ts": T0 + 9, "event": "run_start", "attempt": 2}]
        records += [{"ts": T0 + 10, "event": "eval", "step": s, "loss": 0.9} for s in (1, 2, 3)]
        for record in records:
            summary.add(record)

        row = summary.row(alive=False)

        assert row["eval.loss.best"] == 0.1  # attempt 1's steps 4 to 10 are kept: step 10's

    def test_best_leaves_out_a_record_whose_step_a_later_attempt_rewrote_without_it(
        self,
    ) -> None:
        summary = RunSummary("r.jsonl")
        for record in (
            {"ts": T0, "event": "run_start", "attempt": 1},
            {"ts": T0 + 1, "event": "eval", "step": 1, "loss": 0.5},
            {"ts": T0 + 2, "event": "eval", "step": 2, "loss": 0.1},
            {"ts": T0 + 3, "event": "run_start", "attempt": 2},
            {"ts": T0 + 4, "event": "eval", "step": 2, "note": "rewritten, no loss"},
        ):
            summary.add(record)

        assert summary.row(alive=False)["eval.loss.best"] == 0.5

    def test_best_leaves_out_a_fractional_step_past_a_resume_step(self) -> None:
        summary = RunSummary("r.jsonl")
        for record in (
            {"ts": T0, "event": "run_start", "attempt": 1},
            {"ts": T0 + 1, "event": "eval", "step": 2, "loss": 0.5},
            {"ts": T0 + 2, "event": "eval", "step": 2.25, "loss": 0.1},
            {"ts": T0 + 3, "event": "run_start", "attempt": 2, "resume_step": 2},
        ):
            summary.add(record)

        assert summary.row(alive=False)["eval.loss.best"] == 0.5

    @pytest.mark.parametrize("rewrites", [range(1, 11), range(5, 7)])
    def test_a_restored_summary_goes_on_with_the_same_best(
        self, tmp_path: Path, rewrites: range
    ) -> None:
        records: list[dict[str, Any]] = [{"ts": T0, "event": "run_start", "attempt": 1}]
        records += [{"ts": T0, "event": "eval", "step": s, "loss": 1.0 / s} for s in range(1, 11)]
        records += [{"ts": T0 + 9, "event": "run_start", "attempt": 2}]
        records += [{"ts": T0 + 10, "event": "eval", "step": s, "loss": 0.9} for s in rewrites]
        path = write(tmp_path / "r.jsonl", *(line(**r) for r in records))
        whole, half = RunSummary(path), RunSummary(path)
        for record in records:
            whole.add(record)
        for record in records[:11]:  # the first attempt: a copy's summary holds its best only
            half.add(record)

        restored = RunSummary.restored(path, json.loads(json.dumps(half.state())))
        for record in records[11:]:
            restored.add(record)

        assert restored.row(alive=False) == whole.row(alive=False)
        assert len(json.dumps(half.state()["best"])) < 100  # its size is no record count's

    def test_a_restored_best_whose_log_went_away_is_no_best_rather_than_a_wrong_one(
        self, tmp_path: Path
    ) -> None:
        records: list[dict[str, Any]] = [{"ts": T0, "event": "run_start", "attempt": 1}]
        records += [{"ts": T0, "event": "eval", "step": s, "loss": 1.0 / s} for s in (1, 2)]
        path = write(tmp_path / "r.jsonl", *(line(**r) for r in records))
        half = RunSummary(path)
        for record in records:
            half.add(record)
        restored = RunSummary.restored(path, half.state())
        path.unlink()

        restored.add({"ts": T0 + 9, "event": "run_start", "attempt": 2})
        restored.add({"ts": T0 + 10, "event": "eval", "step": 2, "loss": 0.9})

        assert restored.row(alive=False)["eval.loss.best"] is None

    @pytest.mark.parametrize(
        ("now", "status"), [(T0 + 30 + 59, "running"), (T0 + 30 + 61, "stalled")]
    )
    def test_a_live_run_stalls_after_a_minute_of_silence(self, now: float, status: str) -> None:
        summary = RunSummary("r.jsonl")
        for second in range(31):
            summary.add({"ts": T0 + second, "event": "train", "step": second, "loss": 1.0})

        assert summary.row(alive=True, now=now)["status"] == status


def test_a_slow_run_stalls_after_ten_of_its_gaps() -> None:
    gaps = [600.0] * 10

    assert not is_stalled(0.0, gaps, now=5_999.0)
    assert is_stalled(0.0, gaps, now=6_001.0)


def test_the_quick_summary_of_a_big_log_has_the_same_key_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runlines.reading import _table

    records = [line("run_start", run="big", attempt=1, config={"lr": 0.1})]
    records += [line("train", run="big", ts=T0 + s, step=s, loss=1 / (s + 1)) for s in range(500)]
    records += [line("run_end", run="big", ts=T0 + 501, status="failed")]
    records += [line("run_start", run="big", ts=T0 + 900, attempt=2, resume_step=400)]
    records += [
        line("train", run="big", ts=T0 + 901 + s, step=400 + s, loss=0.5) for s in range(300)
    ]
    log = write(tmp_path / "big.jsonl", *records)
    monkeypatch.setattr(_table, "QUICK_BYTES", 1_000)
    monkeypatch.setattr(_table, "_TAIL_BYTES", 2_000)

    quick = _table.quick_summary_of(runlines.reading.log_file(log)).row(alive=False)
    full = _table.summary_of(runlines.reading.log_file(log)).row(alive=False)

    keys = ["run", "status", "attempts", "started", "duration_s", "step", "config.lr", "train.loss"]
    assert {k: quick[k] for k in keys} == {k: full[k] for k in keys}
    assert quick["attempts"] == 2
    assert quick["duration_s"] == pytest.approx(501 + 300)  # the gap between attempts left out


_steps = st.one_of(st.integers(0, 4), st.sampled_from([None, 1.5]))
_values = st.one_of(st.floats(0, 1), st.just(math.nan))
_log_records = st.lists(
    st.one_of(
        st.fixed_dictionaries(
            {"event": st.just("run_start")}, optional={"resume_step": st.integers(0, 4)}
        ),
        st.fixed_dictionaries(
            {"event": st.sampled_from(["eval", "train"])},
            optional={"step": _steps, "loss": _values, "accuracy": _values},
        ),
    ),
    max_size=14,
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(records=_log_records, through_copy=st.booleans(), cut=st.integers(0, 14))
def test_each_best_is_the_best_of_the_records_load_keeps(
    tmp_path_factory: pytest.TempPathFactory,
    records: list[dict[str, Any]],
    through_copy: bool,
    cut: int,
) -> None:
    path = tmp_path_factory.mktemp("best") / "r.jsonl"
    lines = [line("run_start", attempt=1), *(line(**r) for r in records)]
    if through_copy:  # runs() reads the summary a copy of the first lines stores, then the rest
        write(path, *lines[: cut + 1])
        assert write_copy(path) is not None
        with path.open("ab") as log:
            log.write(b"".join(lines[cut + 1 :]))
    else:
        write(path, *lines)

    row = runlines.runs(path).iloc[0]
    frame = runlines.load(path)
    live = RunSummary(path)  # as the dashboard: a row asked for after every record
    for record in runlines.iter_events(path):
        live.add(record)
        live.row(alive=False)

    for event in ("eval", "train"):
        for field, best in (("loss", min), ("accuracy", max)):
            kept = frame.loc[frame["event"] == event, field] if field in frame else []
            values = [v for v in kept if not math.isnan(v)]
            expected = best(values) if values else None
            got = row.get(f"{event}.{field}.best")
            assert (None if got is None or pd.isna(got) else got) == expected, (event, field)
            assert live.row(alive=False).get(f"{event}.{field}.best") == expected
