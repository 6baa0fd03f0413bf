"""Optuna: `RunlinesCallback` writes each trial of a study as one run.

See docs/integrations.md. Importing this module imports optuna.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

try:
    import optuna
    from optuna.trial import FrozenTrial, TrialState
except ImportError as err:  # pragma: no cover - depends on the environment
    msg = "RunlinesCallback needs optuna: pip install 'runlines[optuna]'"
    raise ImportError(msg) from err

from runlines._layout import PRUNED
from runlines.run import Run

__all__ = ["OBJECTIVE_EVENT", "REPORT_EVENT", "RunlinesCallback"]

REPORT_EVENT: Final = "report"  # one record per `trial.report(value, step)`
OBJECTIVE_EVENT: Final = "objective"  # the trial's value(s): its summary
_NOT_A_NAME: Final = re.compile(r"[^A-Za-z0-9_.\-]+")
# Each trial's run is written at once when the trial ends: no console, no watcher thread.
_RUN_DEFAULTS: Final = {"stdout": False, "system": False, "capture": False}


class RunlinesCallback:
    """Write each finished trial of an Optuna study as the run `<directory>/<study>/trial-<n>`.

    Pass it to `study.optimize(..., callbacks=[RunlinesCallback("runs")])`. The run's config is
    the trial's params; each intermediate value (`trial.report(value, step)`) is a `report`
    record with `step` and *metric* (default "value"; name it `loss` or `accuracy` and runs()
    keeps its best); the trial's value is its `objective` record; its status is `ok` for a
    complete trial, `pruned` for a pruned one and `failed` for one that failed (with
    `catch=`). *run_kwargs* go to `Run` (defaults: stdout, system and capture off).

    Optuna calls callbacks when a trial has ended, so each run is written then: its records'
    `ts` are the time of writing; the trial's own start and duration are fields of the
    `objective` record. Each process of a sweep writes its own trials' runs, so a study on
    JournalStorage with a file backend sweeps from many hosts on a shared filesystem, no server.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str] = "runs",
        *,
        metric: str | Sequence[str] = "value",
        **run_kwargs: Any,
    ) -> None:
        self.directory = Path(directory)
        self._metric = metric
        self._run_kwargs = {**_RUN_DEFAULTS, **run_kwargs}

    def __call__(self, study: optuna.Study, trial: FrozenTrial) -> None:
        """Write *trial*'s run; a trial still running or waiting is left alone."""
        if trial.state not in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL):
            return
        run = Run(
            f"trial-{trial.number}",
            self.directory / _study_folder(study.study_name),
            config=dict(trial.params),
            **self._run_kwargs,
        )
        try:
            self._write(run, study, trial)
        except BaseException as err:
            run.__exit__(type(err), err, err.__traceback__)
            raise
        _close(run, trial)

    def _write(self, run: Run, study: optuna.Study, trial: FrozenTrial) -> None:
        names = self._names(study)
        for step, value in sorted(trial.intermediate_values.items()):
            run.log(REPORT_EVENT, step=step, **{names[0]: value})
        fields: dict[str, Any] = {"number": trial.number, "state": trial.state.name.lower()}
        if trial.values is not None:
            fields.update(zip(names, trial.values, strict=False))
        if trial.last_step is not None:
            fields["step"] = trial.last_step
        if trial.datetime_start is not None:
            fields["trial_started"] = trial.datetime_start
        if trial.duration is not None:
            fields["trial_duration_s"] = trial.duration.total_seconds()
        run.log(OBJECTIVE_EVENT, **fields)

    def _names(self, study: optuna.Study) -> list[str]:
        """Return the field name of each objective: *metric*, the study's, or value_<i>."""
        count = len(study.directions)
        if not isinstance(self._metric, str):
            return list(self._metric)
        if count == 1:
            return [self._metric]
        given = study.metric_names
        return list(given) if given else [f"{self._metric}_{i}" for i in range(count)]


def _study_folder(name: str) -> str:
    """Return the folder name of study *name*: what can name a folder, '-' for the rest."""
    return _NOT_A_NAME.sub("-", name).lstrip(".-") or "study"


def _close(run: Run, trial: FrozenTrial) -> None:
    """End *run* with the status *trial*'s state maps to."""
    if trial.state is TrialState.PRUNED:
        run.close(status=PRUNED)
    elif trial.state is TrialState.FAIL:
        reason = trial.system_attrs.get("fail_reason") or f"trial {trial.number} failed"
        err = RuntimeError(reason)
        run.__exit__(RuntimeError, err, None)
    else:
        run.close()
