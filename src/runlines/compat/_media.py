"""Media values of the drop-ins (`wandb.Image`, ...) and the one function that logs them.

A media value holds what it was given; `log_media` hands it to the run's media call of its
kind: `run.image`, `run.histogram`, `run.table` or `run.audio` (docs/compat.md). A list of
them (Lightning's `log_image` logs one) is `run.images` for images, and one call per value,
named `<name>/<index>`, for the other kinds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from runlines.run import Run

__all__ = ["Audio", "Histogram", "Image", "Media", "Table", "is_media", "log_media"]


class Media:
    """A value that a media call of the run writes, not a field of a record."""

    kind: ClassVar[str]  # the name of the Run method that writes it
    given: tuple[tuple[Any, ...], dict[str, Any]]  # what it was made with (for tee=True)

    def arguments(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Return the arguments of the media call after its name."""
        raise NotImplementedError


class Image(Media):
    """An image: an array (HW, HWC), a PIL image, a matplotlib figure, or a file's path."""

    kind = "image"

    def __init__(self, data_or_path: Any, mode: str | None = None, caption: str | None = None):
        self.given = (data_or_path,), {"mode": mode, "caption": caption}
        self.data = data_or_path
        self.mode = mode
        self.caption = caption

    def arguments(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (self.data,), {"caption": self.caption}


class Histogram(Media):
    """The values of a histogram, counted into *num_bins* bins when written."""

    kind = "histogram"

    def __init__(self, sequence: Sequence[float] | Any, num_bins: int = 64):
        self.given = (sequence,), {"num_bins": num_bins}
        self.sequence = sequence
        self.num_bins = num_bins

    def arguments(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (self.sequence,), {"bins": self.num_bins}


class Table(Media):
    """A table: *columns* and rows of *data*, or a pandas *dataframe*."""

    kind = "table"

    def __init__(
        self,
        columns: Sequence[str] | None = None,
        data: Sequence[Sequence[Any]] | None = None,
        dataframe: Any = None,
    ):
        if dataframe is None and data is None:
            msg = "Table() needs data= (rows, with columns=) or dataframe="
            raise TypeError(msg)
        self.given = (), {"columns": columns, "data": data, "dataframe": dataframe}
        self.columns = list(columns) if columns is not None else None
        self.data = data
        self.dataframe = dataframe

    def arguments(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        if self.dataframe is not None:
            return (self.dataframe,), {}
        rows = self.data or []
        names = self.columns or [f"c{i}" for i in range(len(rows[0]) if rows else 0)]
        return ([dict(zip(names, row, strict=True)) for row in rows],), {}


class Audio(Media):
    """Audio samples (floats in -1..1) at *sample_rate* Hz."""

    kind = "audio"

    def __init__(
        self, data_or_path: Any, sample_rate: int | None = None, caption: str | None = None
    ):
        if sample_rate is None:
            msg = "Audio() needs sample_rate= (samples per second) for its samples"
            raise TypeError(msg)
        self.given = (data_or_path,), {"sample_rate": sample_rate, "caption": caption}
        self.data = data_or_path
        self.sample_rate = sample_rate
        self.caption = caption

    def arguments(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (self.data, self.sample_rate), {}


def is_media(value: Any) -> bool:
    """Return whether *value* is a media value, or a list or tuple that starts with one."""
    if isinstance(value, Media):
        return True
    return isinstance(value, list | tuple) and bool(value) and isinstance(value[0], Media)


def log_media(run: Run, name: str, value: Media | Sequence[Media], step: int | None) -> None:
    """Write *value* (one media value, or a list of one kind) as *name* at *step*."""
    if isinstance(value, Media):
        args, options = value.arguments()
        getattr(run, value.kind)(name, *args, step=step, **options)
        return
    kinds = {type(one) for one in value}
    if len(kinds) != 1 or not issubclass(kinds.pop(), Media):
        found = sorted({type(one).__name__ for one in value})
        msg = f"a list logged as {name!r} mixes {found}; log media values of one kind per key"
        raise TypeError(msg)
    if len(value) == 1:
        log_media(run, name, value[0], step)
    elif isinstance(value[0], Image):
        captions = [one.caption for one in value]  # type: ignore[attr-defined]
        images = [one.data for one in value]  # type: ignore[attr-defined]
        # step None: the run refuses it, as each media call does, naming `step`
        run.images(name, images, step=step, captions=captions if any(captions) else None)  # type: ignore[arg-type]
    else:
        for index, one in enumerate(value):
            log_media(run, f"{name}/{index}", one, step)
