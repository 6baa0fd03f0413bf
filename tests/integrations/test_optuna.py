"""RunlinesCallback on real Optuna studies: one run per trial, pruned trials `pruned`.

The sweep runs on Optuna's file journal storage from two processes at once, as hosts on a
shared filesystem would: no database, no server.
"""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("optuna", reason="optuna is not installed: pip install 'runlines[optuna]'")

import optuna

import _optuna_sweep
import runlines
from _optuna_sweep import FAILED, PRUNED, STEPS
from runlines.cli import main
from runlines.integrations.optuna import RunlinesCallback

_TIMEOUT_S = 120
_TRIALS = 10


@pytest.fixture(autouse=True)
def _quiet_optuna() -> None:
    optuna.logging.set_verbosity(optuna.logging.ERROR)


def _records(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


@pytest.fixture(name="swept", scope="module")
def _swept(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, optuna.Study]:
    """A study of 10 trials (3 pruned, 1 failed) swept by two processes on one journal file."""
    folder = tmp_path_factory.mktemp("sweep")
    journal, runs = str(folder / "journal.log"), str(folder / "runs")
    study = optuna.create_study(study_name="sweep", storage=_optuna_sweep.storage(journal))
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(2, timeout=_TIMEOUT_S)
    workers = [
        context.Process(
            target=_optuna_sweep.sweep, args=(journal, runs, "sweep", _TRIALS // 2, barrier)
        )
        for _ in range(2)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(_TIMEOUT_S)
        if worker.is_alive():
            worker.kill()
    assert [worker.exitcode for worker in workers] == [0, 0]
    study = optuna.load_study(study_name="sweep", storage=_optuna_sweep.storage(journal))
    return folder / "runs" / "sweep", study


def test_each_trial_of_a_journal_study_is_one_run_named_after_its_number(
    swept: tuple[Path, optuna.Study],
) -> None:
    folder, study = swept

    frame = runlines.runs(folder).set_index("run").sort_index()

    assert len(study.trials) == _TRIALS
    assert sorted(frame.index) == sorted(f"trial-{n}" for n in range(_TRIALS))
    assert sorted(p.name for p in folder.glob("*.jsonl")) == sorted(
        f"trial-{n}.jsonl" for n in range(_TRIALS)
    )


def test_the_trial_state_is_the_run_status_pruned_its_own(
    swept: tuple[Path, optuna.Study],
) -> None:
    folder, study = swept

    frame = runlines.runs(folder).set_index("run")

    for trial in study.trials:
        expected = {"COMPLETE": "ok", "PRUNED": "pruned", "FAIL": "failed"}[trial.state.name]
        assert frame.loc[f"trial-{trial.number}", "status"] == expected, trial.number
    statuses = frame["status"].value_counts().to_dict()
    assert statuses == {"ok": _TRIALS - len(PRUNED) - len(FAILED), "pruned": 3, "failed": 1}


def test_config_is_the_params_and_the_records_are_the_reports_and_the_value(
    swept: tuple[Path, optuna.Study],
) -> None:
    folder, study = swept

    frame = runlines.runs(folder).set_index("run")

    for trial in study.trials:
        row = frame.loc[f"trial-{trial.number}"]
        assert {k: row[f"config.{k}"] for k in trial.params} == trial.params
        records = _records(folder / f"trial-{trial.number}.jsonl")
        steps = [(r["step"], r["loss"]) for r in records if r["event"] == "report"]
        assert steps == sorted(trial.intermediate_values.items())
        assert trial.last_step is not None
        assert row["report.loss"] == trial.intermediate_values[trial.last_step]
        if trial.state is optuna.trial.TrialState.COMPLETE:
            assert row["objective.loss"] == trial.value
            assert row["step"] == STEPS - 1
    best = study.best_trial
    assert frame["objective.loss"].min() == best.value
    assert frame["objective.loss.best"].min() == best.value  # `loss`: lower is better


def test_the_failed_trial_says_why_and_ls_and_show_name_the_statuses(
    swept: tuple[Path, optuna.Study], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, _ = swept
    (failed,) = FAILED
    end = _records(folder / f"trial-{failed}.jsonl")[-1]

    assert main(["ls", str(folder)]) == 0
    listing = capsys.readouterr().out
    assert main(["show", str(folder / f"trial-{min(PRUNED)}.jsonl")]) == 0
    shown = capsys.readouterr().out

    assert (end["event"], end["status"], end["exc_type"]) == ("run_end", "failed", "RuntimeError")
    assert listing.count(" pruned ") == len(PRUNED)
    assert "status    pruned" in shown


def test_one_process_study_writes_the_objective_summary_and_the_trial_times(
    tmp_path: Path,
) -> None:
    study = optuna.create_study(study_name="one/two", direction="maximize")

    study.optimize(
        lambda trial: trial.suggest_int("layers", 1, 4) * 0.1,
        n_trials=2,
        callbacks=[RunlinesCallback(tmp_path, metric="accuracy")],
    )

    folder = tmp_path / "one-two"  # the study name made a folder name
    records = _records(folder / "trial-1.jsonl")
    objective = records[-2]
    assert [r["event"] for r in records] == ["run_start", "objective", "run_end"]
    assert records[0]["config"] == study.trials[1].params
    assert objective["accuracy"] == study.trials[1].value
    assert (objective["number"], objective["state"]) == (1, "complete")
    assert objective["trial_duration_s"] >= 0
    assert "trial_started" in objective


def test_a_multi_objective_study_names_each_value(tmp_path: Path) -> None:
    study = optuna.create_study(directions=["minimize", "maximize"])
    with pytest.warns(optuna.exceptions.ExperimentalWarning):
        study.set_metric_names(["loss", "accuracy"])

    callback = RunlinesCallback(tmp_path)
    study.optimize(lambda t: (t.suggest_float("x", 0, 1), 0.5), n_trials=1, callbacks=[callback])

    (log,) = (tmp_path / study.study_name).glob("*.jsonl")
    objective = _records(log)[-2]
    assert objective["loss"] == study.trials[0].values[0]
    assert objective["accuracy"] == 0.5
