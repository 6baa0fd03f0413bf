"""A drop-in for torch's `SummaryWriter`, writing a runlines log (docs/compat.md).

`from runlines.compat.tensorboard import SummaryWriter`: the signature of
`torch.utils.tensorboard.SummaryWriter`. The log is `<log_dir>/<last part of log_dir>.jsonl`;
a tag maps as a wandb key does (`train/loss`: the field `loss` of the event `train`),
`global_step` is the record's `step` and a given `walltime` its `walltime` field. Images,
histograms and audio go to the run's media calls. Any other method raises an
AttributeError that names it.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from runlines import _layout
from runlines.compat._keys import column_of, split_key
from runlines.compat._media import Audio, Histogram, Image, Media, log_media
from runlines.fields import Vocabulary
from runlines.run import Run

__all__ = ["SummaryWriter"]

_DOCS: Final = "docs/compat.md"


class SummaryWriter:
    """Write what torch's `SummaryWriter` writes, as records of a runlines run in *log_dir*.

    *log_dir* defaults to `runs/<date>_<host><comment>`, as torch's does. *purge_step*,
    *max_queue*, *flush_secs* and *filename_suffix* are accepted and change nothing: every
    record is written (and flushed) when it is added.
    """

    def __init__(
        self,
        log_dir: str | os.PathLike[str] | None = None,
        comment: str = "",
        purge_step: int | None = None,
        max_queue: int = 10,
        flush_secs: int = 120,
        filename_suffix: str = "",
    ) -> None:
        if log_dir is None:
            stamp = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = Path("runs") / f"{stamp}_{socket.gethostname()}{comment}"
        self.log_dir = str(log_dir)
        folder = Path(log_dir)
        self._run: Run = Run(
            folder.resolve().name,
            folder,
            stdout=False,
            vocabulary=Vocabulary(aliases={}),  # the names are the tracker's: none drifts
        )

    def __getattr__(self, name: str) -> Any:
        msg = (
            f"SummaryWriter.{name} is not in the runlines drop-in: it covers the methods "
            f"listed in {_DOCS}; use torch.utils.tensorboard.SummaryWriter for this one"
        )
        raise AttributeError(msg)

    @property
    def path(self) -> Path:
        """The runlines log."""
        return self._run.path

    def get_logdir(self) -> str:
        """Return the folder of the run's log."""
        return self.log_dir

    # -- scalars and text ---------------------------------------------------------------------

    def add_scalar(
        self,
        tag: str,
        scalar_value: Any,
        global_step: int | None = None,
        walltime: float | None = None,
        new_style: bool = False,
        double_precision: bool = False,
    ) -> None:
        """Write *scalar_value* (a number, a numpy scalar or a one-element tensor) as *tag*."""
        event, field = split_key(tag)
        self._write(event, {field: _number(scalar_value)}, global_step, walltime)

    def add_scalars(
        self,
        main_tag: str,
        tag_scalar_dict: Mapping[str, Any],
        global_step: int | None = None,
        walltime: float | None = None,
    ) -> None:
        """Write each value as `<main_tag>/<tag>`: one record per event."""
        records: dict[str, dict[str, Any]] = {}
        for tag, value in tag_scalar_dict.items():
            event, field = split_key(f"{main_tag}/{tag}")
            records.setdefault(event, {})[field] = _number(value)
        for event, fields in records.items():
            self._write(event, fields, global_step, walltime)

    def add_text(
        self,
        tag: str,
        text_string: str,
        global_step: int | None = None,
        walltime: float | None = None,
    ) -> None:
        """Write *text_string* as *tag*."""
        event, field = split_key(tag)
        self._write(event, {field: str(text_string)}, global_step, walltime)

    def add_hparams(
        self,
        hparam_dict: Mapping[str, Any],
        metric_dict: Mapping[str, Any],
        hparam_domain_discrete: Mapping[str, list[Any]] | None = None,
        run_name: str | None = None,
        global_step: int | None = None,
    ) -> None:
        """Write an `hparams` record, the metrics as records, and the metrics as the run's
        declared final values (a `summary` record, which runs() reads)."""
        hparams = {k: _number(v) for k, v in hparam_dict.items()}
        self._write("hparams", {"hparams": hparams}, global_step, None)
        metrics = {k: _number(v) for k, v in metric_dict.items()}
        self._scalars(metrics, global_step)
        self._run.log(_layout.SUMMARY, values={column_of(k): v for k, v in metrics.items()})

    def _scalars(self, values: Mapping[str, Any], global_step: int | None) -> None:
        """Write each of *values* as its own tag: one record per event."""
        records: dict[str, dict[str, Any]] = {}
        for tag, value in values.items():
            event, field = split_key(tag)
            records.setdefault(event, {})[field] = value
        for event, fields in records.items():
            self._write(event, fields, global_step, None)

    # -- media ----------------------------------------------------------------------------------

    def add_histogram(
        self,
        tag: str,
        values: Any,
        global_step: int | None = None,
        bins: str = "tensorflow",
        walltime: float | None = None,
        max_bins: int | None = None,
    ) -> None:
        """Write the histogram of *values* (64 bins, or *max_bins*)."""
        self._media(tag, Histogram(_array(values), num_bins=max_bins or 64), global_step)

    def add_image(
        self,
        tag: str,
        img_tensor: Any,
        global_step: int | None = None,
        walltime: float | None = None,
        dataformats: str = "CHW",
    ) -> None:
        """Write one image, laid out as *dataformats* says (CHW, HWC, HW)."""
        self._media(tag, Image(_hwc(_array(img_tensor), dataformats)), global_step)

    def add_images(
        self,
        tag: str,
        img_tensor: Any,
        global_step: int | None = None,
        walltime: float | None = None,
        dataformats: str = "NCHW",
    ) -> None:
        """Write each image of a batch as `<tag>/<index>`."""
        batch = _array(img_tensor)
        each = dataformats.replace("N", "")
        for index in range(len(batch)):
            self._media(f"{tag}/{index}", Image(_hwc(batch[index], each)), global_step)

    def add_figure(
        self,
        tag: str,
        figure: Any,
        global_step: int | None = None,
        close: bool = True,
        walltime: float | None = None,
    ) -> None:
        """Write a matplotlib figure (or each of a list of them) as an image."""
        figures = figure if isinstance(figure, list) else [figure]
        for index, one in enumerate(figures):
            name = tag if len(figures) == 1 else f"{tag}/{index}"
            self._media(name, Image(one), global_step)
            pyplot = sys.modules.get("matplotlib.pyplot")  # a figure pyplot made, it holds
            if close and pyplot is not None:
                pyplot.close(one)

    def add_audio(
        self,
        tag: str,
        snd_tensor: Any,
        global_step: int | None = None,
        sample_rate: int = 44100,
        walltime: float | None = None,
    ) -> None:
        """Write audio samples (floats in -1..1) at *sample_rate* Hz."""
        samples = _array(snd_tensor).reshape(-1)
        self._media(tag, Audio(samples, sample_rate=sample_rate), global_step)

    # -- the end --------------------------------------------------------------------------------

    def flush(self) -> None:
        """Do nothing more: each record was written and flushed when it was added."""

    def close(self) -> None:
        """Close the run (`run_end`, status ok); closing twice does nothing."""
        self._run.close()

    def __enter__(self) -> SummaryWriter:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._run.__exit__(kind, exc, tb)

    def _write(
        self, event: str, fields: dict[str, Any], step: int | None, walltime: float | None
    ) -> None:
        if walltime is not None:
            fields["walltime"] = walltime
        if step is None:
            self._run.log(event, **fields)
        else:
            self._run.log(event, step=int(step), **fields)

    def _media(self, name: str, value: Media, step: int | None) -> None:
        log_media(self._run, name, value, None if step is None else int(step))


def _number(value: Any) -> Any:
    """Return a tensor's or numpy scalar's Python number; anything else as it is."""
    item = getattr(value, "item", None)
    return item() if callable(item) else value


def _array(value: Any) -> Any:
    """Return *value* (a tensor, an array, a list) as a numpy array."""
    import numpy as np  # the door to numpy: the scalars and text need none

    detach = getattr(value, "detach", None)
    if callable(detach):
        value = detach().cpu().numpy()
    return np.asarray(value)


def _hwc(image: Any, dataformats: str) -> Any:
    """Return *image*, laid out as *dataformats* (CHW, HWC, HW), as HWC (or HW)."""
    layout = dataformats.upper()
    if layout == "HW" or sorted(layout) != sorted("CHW"):
        return image
    return image.transpose([layout.index(axis) for axis in "HWC"])
