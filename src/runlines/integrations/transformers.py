"""Hugging Face Trainer: `RunlinesCallback` writes the Trainer's logs, evaluations and checkpoints.

See docs/integrations.md. Importing this module imports transformers.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

try:
    from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
except ImportError as err:  # pragma: no cover - depends on the environment
    msg = "RunlinesCallback needs transformers: pip install 'runlines[transformers]'"
    raise ImportError(msg) from err

from runlines.integrations import _agreed_name, _strip_prefix
from runlines.run import Run
from runlines.spans import Span

__all__ = ["RunlinesCallback"]

_CHECKPOINT_PREFIX: Final = "checkpoint"  # transformers' PREFIX_CHECKPOINT_DIR
_NOT_A_NAME: Final = re.compile(r"[^A-Za-z0-9_.\-]+")


class RunlinesCallback(TrainerCallback):
    """Log a `transformers.Trainer` run: metrics, evaluation spans, checkpoints as artifacts.

    The run opens at `on_train_begin`, named *name* (default: `args.run_name`, else the last
    part of `args.output_dir`) in *directory* (default: `args.output_dir`), with the training
    arguments as its config; *run_kwargs* go to `Run` as well. It closes at `on_train_end`.
    Pass `run=` to log into a run of your own instead: the callback joins it and leaves
    closing it to you.
    """

    def __init__(
        self,
        name: str | None = None,
        directory: str | os.PathLike[str] | None = None,
        *,
        run: Run | None = None,
        **run_kwargs: Any,
    ) -> None:
        if run is not None and (name is not None or directory is not None or run_kwargs):
            msg = (
                "RunlinesCallback(run=...) joins that run as it is; pass either run= or the "
                "options of a run to open (name, directory, config, ...), not both"
            )
            raise TypeError(msg)
        self.run = run
        self._owns_run = run is None
        self._name = name
        self._directory = directory
        self._run_kwargs = run_kwargs
        self._eval_span: Span | None = None

    # -- the run ------------------------------------------------------------------------------

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Open the run (or join the one already open) with the training arguments as config.

        Training resumed from a checkpoint of step S opens it with `resume_step=S`.
        """
        self._joined(args, state, resume_step=state.global_step or None)

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Close the run with status ok, unless it was passed in with `run=`."""
        self._end_eval()
        if self._owns_run and self.run is not None:
            self.run.close()

    def _joined(
        self, args: TrainingArguments, state: TrainerState, resume_step: int | None = None
    ) -> Run:
        """Return the run to log to, opening it when there is none open of this callback's."""
        run = self.run
        if run is None or (run.closed and self._owns_run):
            run = self.run = self._open(args, state, resume_step)
        return run

    def _open(self, args: TrainingArguments, state: TrainerState, resume_step: int | None) -> Run:
        kwargs = dict(self._run_kwargs)
        config: dict[str, Any] = args.to_dict()  # type: ignore[no-untyped-call]
        extra = kwargs.pop("config", None)
        if isinstance(extra, Mapping):
            config.update(extra)
        # Only the main process prints; every process writes its own file (docs/run.md).
        kwargs["stdout"] = kwargs.get("stdout", True) and state.is_world_process_zero
        if resume_step is not None:  # records of earlier attempts past it are superseded
            kwargs.setdefault("resume_step", resume_step)
            kwargs.setdefault("resume", "allow")  # from a checkpoint: the run's next attempt
        name = self._name if self._name is not None else _run_name(args)
        directory = self._directory if self._directory is not None else _output_dir(args)
        return Run(name, directory, config=config, **kwargs)

    # -- records ------------------------------------------------------------------------------

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Write the Trainer's logs as a `train_step`, `eval` or `train_end` record with `step`."""
        if not logs:
            return
        event, fields = _record(logs)
        self._joined(args, state).log(event, **{"step": state.global_step, **fields})

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Start the evaluation span when the Trainer is about to evaluate after this step."""
        if control.should_evaluate:
            self._begin_eval(args, state)

    def on_epoch_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Start the evaluation span when the Trainer is about to evaluate after this epoch."""
        if control.should_evaluate:
            self._begin_eval(args, state)

    def on_evaluate(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """End the evaluation span."""
        self._end_eval()

    def on_save(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        """Register the checkpoint folder the Trainer just saved as a `checkpoint` artifact."""
        folder = Path(_output_dir(args), f"{_CHECKPOINT_PREFIX}-{state.global_step}")
        if args.should_save and folder.is_dir():
            run = self._joined(args, state)
            run.artifact(_CHECKPOINT_PREFIX, path=folder, step=state.global_step)

    def _begin_eval(self, args: TrainingArguments, state: TrainerState) -> None:
        if self._eval_span is None:
            span = self._joined(args, state).span("eval", step=state.global_step)
            self._eval_span = span.__enter__()

    def _end_eval(self) -> None:
        span, self._eval_span = self._eval_span, None
        if span is not None:
            span.__exit__(None, None, None)


def _record(logs: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """Return the event and fields, in runlines' names, of one `Trainer.log()` call."""
    if any(key.startswith("eval_") for key in logs):
        event, prefixes, extra = "eval", ("eval_",), {}
    elif any(key.startswith("test_") for key in logs):
        event, prefixes, extra = "eval", ("test_",), {"split": "test"}
    else:  # the final summary is the one train log with train_loss
        event = "train_end" if "train_loss" in logs else "train_step"
        prefixes, extra = ("train_",), {}
    fields: dict[str, Any] = {}
    for key, value in logs.items():
        name = _agreed_name(_strip_prefix(key, prefixes))
        fields[key if name in fields or name in logs else name] = value
    fields.update(extra)
    return event, fields


def _run_name(args: TrainingArguments) -> str:
    """Return a run name from `args.run_name` or the output folder, made a valid file name."""
    raw = args.run_name or Path(_output_dir(args)).name or "trainer"
    return _NOT_A_NAME.sub("-", raw).lstrip(".-") or "trainer"


def _output_dir(args: TrainingArguments) -> str:
    return args.output_dir or "trainer_output"  # transformers' own default
