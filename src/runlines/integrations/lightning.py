"""Lightning: `RunlinesLogger` writes hyperparameters, metrics, media and checkpoints to a run.

See docs/integrations.md. Importing this module imports lightning.
"""

from __future__ import annotations

import os
import re
import sys
import weakref
from argparse import Namespace
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, cast

try:
    from lightning.fabric.loggers.logger import rank_zero_experiment
    from lightning.pytorch.callbacks import ModelCheckpoint
    from lightning.pytorch.loggers.logger import Logger
    from lightning.pytorch.utilities import rank_zero_only
except ImportError as err:  # pragma: no cover - depends on the environment
    msg = "RunlinesLogger needs lightning: pip install 'runlines[lightning]'"
    raise ImportError(msg) from err

from runlines.integrations import _agreed_name, _strip_prefix
from runlines.run import Run

__all__ = ["RunlinesLogger"]

# Metric name prefixes -> (event, split). Names without one are training metrics.
_SPLITS: Final = (
    (("val_", "val/", "valid_", "valid/", "validation_", "validation/"), "eval", "val"),
    (("test_", "test/"), "eval", "test"),
    (("train_", "train/"), "train_step", None),
)
_SHARED: Final = ("epoch",)  # a field every record of one log_metrics() call carries
_STEP_IN_NAME: Final = re.compile(r"(?:^|[-_])step=(\d+)")  # Lightning's default file names


class RunlinesLogger(Logger):
    """Log a Lightning `Trainer` to a runlines run, on the global-zero process only.

    The run, named *name* in *directory*, opens at its first metric, checkpoint or use of
    `experiment`, with the hyperparameters Lightning handed over as its `config`; *run_kwargs*
    go to `Run`. `finalize` closes it with the status Lightning reports. Pass `run=` to log
    into a run of your own instead: the logger joins it and leaves closing it to you.

    Every record's `step` is the trainer's `global_step` (optimizer steps taken) when it was
    written: metrics, evaluations and checkpoints of one point in training share a step.
    """

    def __init__(
        self,
        name: str = "lightning",
        directory: str | os.PathLike[str] = ".",
        *,
        run: Run | None = None,
        **run_kwargs: Any,
    ) -> None:
        super().__init__()
        if run is not None and run_kwargs:
            msg = (
                "RunlinesLogger(run=...) joins that run as it is; pass either run= or the "
                f"options of a run to open, not both (got {sorted(run_kwargs)})"
            )
            raise TypeError(msg)
        self._run = run
        self._owns_run = run is None
        self._name = run.name if run is not None else name
        self._directory = Path(run.directory if run is not None else directory)
        self._run_kwargs = run_kwargs
        self._hyperparams: dict[str, Any] = {}
        self._registered: dict[str, tuple[int, int, int]] = {}  # checkpoint -> its stat stamp
        self._trainer: Callable[[], Any] | None = None  # a weakref, set by log_graph()

    # -- what Lightning asks of a logger ------------------------------------------------------

    @property
    def name(self) -> str:
        """The run's name."""
        return self._name

    @property
    def version(self) -> str:
        """Empty: a runlines run appends attempts to one log instead of numbering versions."""
        return ""

    @property
    def save_dir(self) -> str:
        """The run's directory; checkpoints default to `<directory>/<name>/checkpoints`."""
        return str(self._directory)

    @property
    def root_dir(self) -> str:
        """The folder of this run's checkpoints and other files: `<directory>/<name>`."""
        return str(self._directory / self._name)

    @property
    def path(self) -> Path | None:
        """The run's log file, once the run has opened (None before, and on other ranks)."""
        return None if self._run is None else self._run.path

    @property
    @rank_zero_experiment
    def experiment(self) -> Run:
        """The run. Until the first use it is a stand-in that opens the run when used."""
        if self._is_open() and self._run is not None:
            return self._run
        return cast(Run, _DeferredRun(self))

    @rank_zero_only
    def log_hyperparams(
        self, params: dict[str, Any] | Namespace, *args: Any, **kwargs: Any
    ) -> None:
        """Put *params* in the config of the run's `run_start`, or a `hyperparams` record."""
        params = dict(vars(params) if isinstance(params, Namespace) else params)
        if self._is_open():
            self._open().log("hyperparams", config=params)
        else:
            # Not opened here: Lightning installs its signal handlers next and, when a fit
            # fails, restores them after finalize(); a run opened now would leave its own.
            self._hyperparams.update(params)

    def log_graph(self, model: Any, input_array: Any = None) -> None:
        """Note the trainer of *model*: Lightning calls this as each stage starts."""
        try:
            trainer = model.trainer
        except Exception:  # a module not attached to a trainer (RuntimeError)
            return
        if trainer is not None:
            self._trainer = weakref.ref(trainer)

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Write *metrics* as `train_step` and `eval` records (val_ and test_ names) with step.

        The step is the trainer's `global_step`; *step* (Lightning's count of logged batches,
        one behind it during training) only without a trainer.
        """
        run = self._open()
        step = self._global_step(step)
        head = {"step": step} if step is not None else {}
        for event, fields in _records(metrics):
            run.log(event, **head, **fields)

    # -- media, with the signatures of Lightning's WandbLogger --------------------------------

    @rank_zero_only
    def log_image(
        self, key: str, images: list[Any], step: int | None = None, **kwargs: Any
    ) -> None:
        """Write *images* (arrays, tensors, PIL images, files) as `image` records named *key*.

        One image is `run.image`, several `run.images` (with `index`); `caption=` is a list of
        one caption per image. *step* defaults to the trainer's `global_step`.
        """
        captions = _per_item("log_image", images, kwargs, ("caption",)).get("caption")
        run, at = self._open(), self._media_step("log_image", step)
        if len(images) == 1:
            run.image(key, images[0], step=at, caption=None if captions is None else captions[0])
        else:
            run.images(key, images, step=at, captions=captions)

    @rank_zero_only
    def log_table(
        self,
        key: str,
        columns: list[str] | None = None,
        data: list[list[Any]] | None = None,
        dataframe: Any = None,
        step: int | None = None,
    ) -> None:
        """Write a table, *columns* and rows of *data* or a pandas *dataframe*, as Parquet."""
        table = _table(columns, data, dataframe)
        self._open().table(key, table, step=self._media_step("log_table", step))

    @rank_zero_only
    def log_text(
        self,
        key: str,
        columns: list[str] | None = None,
        data: list[list[str]] | str | None = None,
        dataframe: Any = None,
        step: int | None = None,
    ) -> None:
        """Write text: a table of strings, as Lightning's WandbLogger does, or a `text` record
        when *data* is one str."""
        if isinstance(data, str) and columns is None and dataframe is None:
            self._open().text(key, data, step=self._media_step("log_text", step))
        else:
            self.log_table(key, columns, data, dataframe, step)  # type: ignore[arg-type]

    @rank_zero_only
    def log_audio(
        self, key: str, audios: list[Any], step: int | None = None, **kwargs: Any
    ) -> None:
        """Write each of *audios* (samples in -1..1) as an `audio` record; `sample_rate=` is a
        list of one rate per clip. Several are named `<key>/<index>`."""
        rates = _per_item("log_audio", audios, kwargs, ("sample_rate",)).get("sample_rate")
        if rates is None:
            msg = "log_audio() needs sample_rate=[...]: one rate (samples per second) per clip"
            raise TypeError(msg)
        run, at = self._open(), self._media_step("log_audio", step)
        for index, (samples, rate) in enumerate(zip(audios, rates, strict=True)):
            run.audio(key if len(audios) == 1 else f"{key}/{index}", samples, rate, step=at)

    @rank_zero_only
    def after_save_checkpoint(self, checkpoint_callback: ModelCheckpoint) -> None:
        """Register each checkpoint file the callback saved (best, last) as an artifact."""
        for path in _checkpoint_paths(checkpoint_callback):
            try:
                stat = os.stat(path)
            except OSError:
                continue  # removed already, or on a filesystem of its own (s3://)
            stamp = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
            if self._registered.get(path) != stamp:
                self._registered[path] = stamp
                step = self._global_step(_step_of(path))
                self._open().artifact("checkpoint", path=path, step=step)

    @rank_zero_only
    def finalize(self, status: str) -> None:
        """End the run with Lightning's status: success as ok, failed with its exception.

        A stage that logged nothing leaves no run, unless it failed.
        """
        if not self._owns_run:
            return
        ok = status in ("success", "finished")  # finished: paused for a requeue, checkpoint saved
        run = self._open() if self._is_open() or not ok else None
        self._hyperparams = {}  # Lightning hands them over again at its next stage
        if run is None:
            return
        if ok:
            run.close()
            return
        exc = sys.exc_info()[1]  # Lightning finalizes from inside its `except` block
        if exc is None:
            exc = RuntimeError(f"Lightning finalized the run with status {status!r}")
        run.__exit__(type(exc), exc, exc.__traceback__)

    # -- the run ------------------------------------------------------------------------------

    def _global_step(self, fallback: int | None) -> int | None:
        """Return the trainer's global_step, or *fallback* when no trainer is known."""
        trainer = None if self._trainer is None else self._trainer()
        step = getattr(trainer, "global_step", None)
        return step if isinstance(step, int) else fallback

    def _media_step(self, call: str, step: int | None) -> int:
        """Return *step*, else the trainer's global_step; a media record needs one."""
        at = step if step is not None else self._global_step(None)
        if at is None:
            msg = f"{call}() needs step= when the logger knows no trainer (outside trainer.fit)"
            raise ValueError(msg)
        return at

    def _is_open(self) -> bool:
        run = self._run
        return run is not None and not (run.closed and self._owns_run)

    def _open(self) -> Run:
        """Return the run, opening it (a new attempt after a finalize) when needed."""
        run = self._run
        if run is None or not self._is_open():
            kwargs = dict(self._run_kwargs)
            config = {**dict(kwargs.pop("config", None) or {}), **self._hyperparams}
            if run is not None:  # a fit or test after finalize: the same run's next attempt
                kwargs.setdefault("resume", "allow")
            run = self._run = Run(self._name, self._directory, config=config, **kwargs)
        return run


class _DeferredRun:
    """Stands for a logger's run until first used, then opens it and passes everything on.

    Lightning reads `logger.experiment` before it logs the hyperparameters; opening the run
    then would leave them out of `run_start`.
    """

    __slots__ = ("_logger",)

    def __init__(self, logger: RunlinesLogger) -> None:
        self._logger = logger

    def __getattr__(self, name: str) -> Any:
        return getattr(self._logger._open(), name)

    def __repr__(self) -> str:
        return f"<run {self._logger.name!r}, opened at first use>"


def _records(metrics: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Group *metrics* into records, in runlines' names: val_loss -> loss on an eval record."""
    shared = {key: metrics[key] for key in _SHARED if key in metrics}
    groups: dict[tuple[str, str | None], dict[str, Any]] = {}
    for key, value in metrics.items():
        if key in shared:
            continue
        event, split, name = _place(key)
        fields = groups.setdefault((event, split), dict(shared))
        fields[key if name in fields else name] = value
    if not groups and shared:
        groups["train_step", None] = shared
    return [
        (event, fields if split is None else {**fields, "split": split})
        for (event, split), fields in groups.items()
    ]


def _place(key: str) -> tuple[str, str | None, str]:
    """Return the event, split and runlines name of the metric named *key*."""
    for prefixes, event, split in _SPLITS:
        name = _strip_prefix(key, prefixes)
        if name != key:
            return event, split, _agreed_name(name)
    return "train_step", None, _agreed_name(key)


def _per_item(
    call: str, items: Sequence[Any], options: Mapping[str, Any], known: tuple[str, ...]
) -> dict[str, list[Any]]:
    """Return the per-item lists of *options*, checked as Lightning's WandbLogger checks them."""
    if not isinstance(items, list):
        msg = f"{call}() takes a list, found {type(items).__name__}"
        raise TypeError(msg)
    unknown = sorted(set(options) - set(known))
    if unknown:
        msg = f"{call}() takes {', '.join(f'{k}=' for k in known)} per item, not {unknown}"
        raise TypeError(msg)
    for name, values in options.items():
        if len(values) != len(items):
            msg = f"{call}() got {len(items)} items but {len(values)} values of {name}="
            raise ValueError(msg)
    return {name: list(values) for name, values in options.items()}


def _table(columns: list[str] | None, data: list[list[Any]] | None, dataframe: Any) -> Any:
    """Return what run.table() takes: the *dataframe*, or the rows of *data* as dicts."""
    if dataframe is not None:
        return dataframe
    if data is None:
        msg = "log_table() needs data= (rows, with columns=) or dataframe="
        raise TypeError(msg)
    names = columns or [f"c{i}" for i in range(len(data[0]) if data else 0)]
    return [dict(zip(names, row, strict=True)) for row in data]


def _checkpoint_paths(callback: ModelCheckpoint) -> list[str]:
    """Return the files *callback* may just have saved: the last one it wrote, best, last."""
    candidates = (
        getattr(callback, "_last_checkpoint_saved", ""),  # the file just written, if known
        callback.best_model_path,
        callback.last_model_path,
    )
    return list(dict.fromkeys(str(path) for path in candidates if path))


def _step_of(path: str) -> int | None:
    """Return the step in a checkpoint's file name (`epoch=0-step=40.ckpt`), if there is one."""
    match = _STEP_IN_NAME.search(Path(path).stem)
    return int(match[1]) if match else None
