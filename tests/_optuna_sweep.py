"""A small Optuna sweep for tests/integrations/test_optuna.py: the objective, and a worker that
joins the study from its own process, as a host of a sweep on a shared filesystem would.
"""

from __future__ import annotations

from typing import Any

import optuna
from optuna.storages.journal import JournalFileBackend  # optuna >= 4.0

from runlines.integrations.optuna import RunlinesCallback

STEPS = 5
PRUNED = {1, 4, 7}  # trial numbers the objective prunes after two reports
FAILED = {8}  # and the one that fails (optimize(catch=ValueError) goes on)


def objective(trial: optuna.Trial) -> float:
    """Report a falling loss for STEPS steps; prune or fail the trials the sets above name."""
    x = trial.suggest_float("x", -3.0, 3.0)
    lr = trial.suggest_float("lr", 1e-4, 1e-1, log=True)
    trial.suggest_categorical("optimizer", ["adam", "sgd"])
    loss: float = x * x + 1.0
    for step in range(STEPS):
        loss *= 1.0 - lr
        trial.report(loss, step)
        if step == 1 and trial.number in PRUNED:
            raise optuna.TrialPruned
    if trial.number in FAILED:
        msg = "diverged"
        raise ValueError(msg)
    return loss


def storage(journal: str) -> optuna.storages.JournalStorage:
    """Return the study's storage: a journal file, no database and no server."""
    return optuna.storages.JournalStorage(JournalFileBackend(journal))


def sweep(journal: str, runs: str, study_name: str, trials: int, barrier: Any = None) -> None:
    """Join study *study_name* and run *trials* trials, each written to *runs* as a run."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    try:
        study = optuna.create_study(
            study_name=study_name,
            storage=storage(journal),
            load_if_exists=True,
            sampler=optuna.samplers.RandomSampler(seed=0),
        )
        if barrier is not None:
            barrier.wait()
        callback = RunlinesCallback(runs, metric="loss")
        study.optimize(objective, n_trials=trials, callbacks=[callback], catch=(ValueError,))
    except BaseException:
        if barrier is not None:
            barrier.abort()
        raise
