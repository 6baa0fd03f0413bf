"""Import TensorBoard event files as runlines logs (docs/compat.md).

The events are read by the `tensorboard` package's own record reader and compat layers (what
its `EventFileLoader` does; no TensorFlow). Each folder holding event files becomes one log:
scalars map as the drop-ins' keys do (`train/loss`: the field `loss` of the event `train`),
histograms, images, audio and text go to `histogram`, `image`, `audio` and `text` records,
PR curves to `pr_curve` records, hparams to the config; graphs are left out (counted). Every
record keeps the event's step and wall time (its `ts`).

The log is written here, not through `Run.log`, which stamps the current time: each record is
the dict `Run.log` would build, with the event's wall time as its `ts`, encoded by the same
`_encoding.encode_line_safe` that writes runlines' own records. Everything is written under a
hidden staging folder in the output folder and renamed into place at the end, so a failed
import leaves nothing behind.
"""

from __future__ import annotations

import io
import os
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, Final

from runlines import _context, _encoding, _layout, _media
from runlines.compat._keys import split_key
from runlines.errors import RunlinesError
from runlines.importers._common import (
    ImportedRun,
    Staging,
    bookends,
    clean_name,
    copy_body,
    sha256_files,
    write_log,
)

_PIP: Final = "pip install 'runlines[import-tensorboard]'"
try:  # this module is the door: imported only when an import of TensorBoard files runs
    from tensorboard import data_compat, dataclass_compat
    from tensorboard.backend.event_processing import event_file_loader
    from tensorboard.compat.proto import event_pb2
    from tensorboard.compat.tensorflow_stub import errors
    from tensorboard.plugins.hparams import metadata as hparams_metadata
    from tensorboard.util import tensor_util
except ImportError as err:
    msg = f"runlines import tensorboard needs the tensorboard package: {_PIP}"
    raise ImportError(msg) from err

__all__ = ["PR_CURVE", "ImportedRun", "TensorBoardImportError", "find_runs", "import_tensorboard"]

_EVENTS_MARK: Final = "tfevents"
_SOURCE: Final = "tensorboard"
_TEXT_SUFFIX: Final = "/text_summary"  # torch's add_text adds it to the tag
_GRAPH_EVENTS: Final = frozenset({"graph_def", "meta_graph_def", "tagged_run_metadata"})
PR_CURVE: Final = "pr_curve"  # the event of an imported PR curve (docs/compat.md)
_PR_ROWS: Final = ("tp", "fp", "tn", "fn", "precision", "recall")  # TensorBoard's order
_Record = tuple[str, dict[str, Any]]  # (event, fields)


class TensorBoardImportError(RunlinesError, ValueError):
    """A log folder that cannot be imported: no event files, or a corrupted one."""


def find_runs(logdir: str | os.PathLike[str]) -> list[Path]:
    """Return the folders under *logdir* (itself included) that hold event files, sorted."""
    root = Path(logdir)
    if not root.is_dir():
        msg = f"{root} is not a folder; give the TensorBoard log folder (the --logdir)"
        raise TensorBoardImportError(msg)
    found = [Path(d) for d, _, files in os.walk(root) if any(_is_events(f) for f in files)]
    return sorted(found)


def import_tensorboard(
    logdir: str | os.PathLike[str], out: str | os.PathLike[str]
) -> list[ImportedRun]:
    """Import every run folder under *logdir* as a log in *out*; return what was done.

    A run folder whose files were imported before (the same sha256) is left as it is.

    Raises:
        TensorBoardImportError: no event files under *logdir*, a corrupted event file, or a
            log of that name in *out* imported from other files. Nothing is written then.
    """
    root = Path(logdir)
    folders = find_runs(root)
    if not folders:
        msg = f"no TensorBoard event files (*tfevents*) under {root}; check the folder"
        raise TensorBoardImportError(msg)
    results: list[ImportedRun] = []
    with Staging(Path(out), TensorBoardImportError) as staging:
        for folder in folders:
            name = _run_name(root, folder)
            files = sorted(p for p in folder.iterdir() if p.is_file() and _is_events(p.name))
            digest = sha256_files(files)
            log = _context.log_path(staging.out, name, None)
            stage = staging.claim(log, digest, f"{folder}'s event files")
            if stage is None:
                results.append(ImportedRun(folder, log, written=False))
                continue
            result = _import_run(folder, files, digest, name, stage)
            result.path = log
            results.append(result)
        staging.commit()
    return results


# -- one run folder ------------------------------------------------------------------------------


def _import_run(
    folder: Path, files: list[Path], digest: str, name: str, stage: Path
) -> ImportedRun:
    """Write *folder*'s events as `<stage>/<name>.jsonl` (and its artifacts beside it)."""
    result = ImportedRun(folder, stage, written=True)
    converter = _Converter(name, stage, result)
    body = stage / f"{name}.body"
    with body.open("wb") as sink:
        for path in files:
            converter.convert_file(path, sink)
    first, last = converter.first_ts, converter.last_ts
    if first is None or last is None:
        first = last = min(p.stat().st_mtime for p in files)
    source = {
        "tool": _SOURCE,
        "path": str(folder.resolve()),
        "files": [p.name for p in files],
        "sha256": digest,
    }
    start, end = bookends(name, first, last, source, converter.config, "ok")
    write_log(stage / f"{name}.jsonl", start, copy_body(body), end)
    return result


class _Converter:
    """Turn the events of one run folder into the lines of its log."""

    def __init__(self, name: str, stage: Path, result: ImportedRun) -> None:
        self.name = name
        self.stage = stage
        self.artifacts = _layout.artifacts_dir(stage / f"{name}.jsonl")
        self.result = result
        self.config: dict[str, Any] = {}
        self.initial: dict[str, Any] = {}  # tag -> its first metadata, as EventFileLoader keeps
        self.first_ts: float | None = None
        self.last_ts: float | None = None

    def convert_file(self, path: Path, sink: BinaryIO) -> None:
        fast, careful = _encoding.encode_line, _encoding.encode_line_safe
        name, count, initial = self.name, 0, self.initial
        keys: dict[str, tuple[str, str]] = {}  # tag -> (event, field)
        try:
            for event in _events(path):
                ts = event.wall_time
                if self.first_ts is None or ts < self.first_ts:
                    self.first_ts = ts
                if self.last_ts is None or ts > self.last_ts:
                    self.last_ts = ts
                if not event.HasField("summary"):
                    if event.WhichOneof("what") in _GRAPH_EVENTS:
                        self._skip("graphs")
                    continue
                values = event.summary.value
                if (
                    values[0].WhichOneof("value") == "simple_value"  # torch writes one a time
                    if len(values) == 1
                    else all(v.WhichOneof("value") == "simple_value" for v in values)
                ):
                    # a scalar of the legacy kind (torch's add_scalar): what the compat layers
                    # would turn into a float32 tensor of the `scalars` plugin, read as it is
                    for value in values:
                        tag = value.tag
                        key = keys.get(tag)
                        if key is None:
                            key = keys[tag] = split_key(tag)
                        kind, field = key
                        record = {"ts": ts, "event": kind, "run": name, "step": event.step}
                        record[field] = value.simple_value
                        sink.write(fast(record))
                        count += 1
                    continue
                migrated = dataclass_compat.migrate_event(data_compat.migrate_event(event), initial)
                for one in migrated:
                    for value in one.summary.value:
                        for kind, fields in self._record(value, one.step):
                            sink.write(careful({"ts": ts, "event": kind, "run": name, **fields}))
                            count += 1
        except errors.DataLossError as err:
            msg = (
                f"{path} is corrupted after {count} records ({err.message}); nothing was "
                "imported: restore the file, or move it out of the folder to import the rest"
            )
            raise TensorBoardImportError(msg) from err
        self.result.records += count

    def _skip(self, what: str) -> None:
        self.result.skipped[what] = self.result.skipped.get(what, 0) + 1

    def _record(self, value: Any, step: int) -> list[_Record]:
        """The (event, fields) records of one summary value (none: nothing to write)."""
        plugin = value.metadata.plugin_data.plugin_name
        tag = value.tag
        if plugin == "scalars":
            number = tensor_util.make_ndarray(value.tensor).item()
            event, name = split_key(tag)
            return [(event, {"step": step, name: number})]
        if plugin == "histograms":
            return self._histogram(tag, tensor_util.make_ndarray(value.tensor), step)
        if plugin == "images":
            return self._images(tag, list(value.tensor.string_val), step)
        if plugin == "text":
            return [self._text(tag, tensor_util.make_ndarray(value.tensor), step)]
        if plugin == "audio":
            return self._audio(tag, list(value.tensor.string_val), step)
        if plugin == "pr_curves":
            return [self._pr_curve(tag, tensor_util.make_ndarray(value.tensor), step)]
        if plugin == "hparams":
            self._hparams(value)
            return []
        self._skip(plugin or "(no plugin)")
        return []

    def _histogram(self, tag: str, buckets: Any, step: int) -> list[_Record]:
        if buckets.ndim != 2 or len(buckets) == 0:
            return []  # an empty histogram: no bins to write
        edges = [float(x) for x in buckets[:, 0]] + [float(buckets[-1, 1])]
        counts = [round(float(x)) for x in buckets[:, 2]]
        if edges[0] == edges[-1]:  # all values equal: TensorBoard's one bucket of width 0
            edges[-1] = edges[0] + 1.0
        record = _media.histogram_record(_media_name(tag), (counts, edges), step=step)
        return [(_layout.HISTOGRAM, record)]

    def _images(self, tag: str, parts: list[bytes], step: int) -> list[_Record]:
        width, height, images = int(parts[0]), int(parts[1]), parts[2:]
        name = _media_name(tag)
        records: list[_Record] = []
        for index, data in enumerate(images):
            ext, kind = ("jpg", "jpeg") if data[:2] == b"\xff\xd8" else ("png", "png")
            _, fields = _media.save_side_file(self.stage, self.artifacts, name, step, ext, data)
            fields.update(format=kind, width=width, height=height)
            if len(images) > 1:
                fields["index"] = index
            records.append((_layout.IMAGE, fields))
        return records

    def _audio(self, tag: str, parts: list[bytes], step: int) -> list[_Record]:
        """Audio clips (the tensor's rows: encoded clip, label), the WAV kept as it is."""
        name = _media_name(tag)
        clips = parts[0::2]  # a [k, 2] string tensor, flattened
        records: list[_Record] = []
        for index, data in enumerate(clips):
            if data[:4] != b"RIFF":
                self._skip("audio (not WAV)")
                continue
            with wave.open(io.BytesIO(data), "rb") as clip:
                rate, channels, frames = clip.getframerate(), clip.getnchannels(), clip.getnframes()
            _, fields = _media.save_side_file(self.stage, self.artifacts, name, step, "wav", data)
            fields.update(format="wav", sample_rate=rate, channels=channels, frames=frames)
            if len(clips) > 1:
                fields["index"] = index
            records.append((_layout.AUDIO, fields))
        return records

    def _pr_curve(self, tag: str, array: Any, step: int) -> _Record:
        """A `pr_curve` record: the thresholds and TensorBoard's six rows, as lists."""
        rows = array.reshape(len(_PR_ROWS), -1)
        thresholds = rows.shape[1]
        fields: dict[str, Any] = {"name": _media_name(tag), "step": step}
        fields["thresholds"] = [i / max(thresholds - 1, 1) for i in range(thresholds)]
        for key, row in zip(_PR_ROWS, rows, strict=True):
            numbers = [float(x) for x in row]
            fields[key] = numbers if key in ("precision", "recall") else [round(x) for x in numbers]
        return PR_CURVE, fields

    def _text(self, tag: str, array: Any, step: int) -> _Record:
        items = [x.decode("utf-8", "replace") if isinstance(x, bytes) else str(x) for x in
                 array.reshape(-1).tolist()]  # fmt: skip
        name = _media_name(tag.removesuffix(_TEXT_SUFFIX))
        _, record = _media.text_record(
            self.stage, self.artifacts, name, "\n".join(items), step=step
        )
        return _layout.TEXT, record

    def _hparams(self, value: Any) -> None:
        if value.tag != hparams_metadata.SESSION_START_INFO_TAG:
            return  # the experiment's domains and the session's end: no values of the run
        content = value.metadata.plugin_data.content
        start = hparams_metadata.parse_session_start_info_plugin_data(content)
        for key, hparam in start.hparams.items():
            kind = hparam.WhichOneof("kind")  # a google.protobuf.Value
            if kind in ("number_value", "string_value", "bool_value"):
                self.config[key] = getattr(hparam, kind)
            else:  # torch writes none of these: a null, or a list or struct as its text
                self.config[key] = None if kind in (None, "null_value") else str(hparam)


def _events(path: Path) -> Iterator[Any]:
    """Yield the events of *path* as `LegacyEventFileLoader` does, raising on a bad record.

    The loader stops quietly at a bad record (a live file may be mid-write); an import must
    not, so this reads with the loader's own record reader, then parses each Event as it does.
    """
    parse = event_pb2.Event.FromString
    for raw in event_file_loader._make_tf_record_iterator(str(path)):
        yield parse(raw)


# -- helpers ---------------------------------------------------------------------------------


def _is_events(filename: str) -> bool:
    return _EVENTS_MARK in filename and not filename.startswith(".")


def _run_name(root: Path, folder: Path) -> str:
    """The log's name: the folder's path under *root* (`a/b` -> `a-b`), or *root*'s name."""
    relative = folder.relative_to(root)
    parts = relative.parts or (root.resolve().name,)
    return clean_name("-".join(parts))


def _media_name(tag: str) -> str:
    """A tag as a media name: the path-like parts kept, anything odd replaced by `_`."""
    parts = [
        "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "_" for c in part)
        for part in tag.split("/")
        if part
    ]
    return "/".join(p.lstrip(".") or "_" for p in parts) or "_"
