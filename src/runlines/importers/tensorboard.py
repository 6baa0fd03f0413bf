"""Import TensorBoard event files as runlines logs (docs/compat.md).

The events are read by the `tensorboard` package's own record reader and compat layers (what
its `EventFileLoader` does; no TensorFlow). Each folder holding event files becomes one log:
scalars map as the drop-ins' keys do (`train/loss`: the field `loss` of the event `train`),
histograms, images and text go to `histogram`, `image` and `text` records, hparams to the
config. Every record keeps the event's step and wall time (its `ts`).

The log is written here, not through `Run.log`, which stamps the current time: each record is
the dict `Run.log` would build, with the event's wall time as its `ts`, encoded by the same
`_encoding.encode_line_safe` that writes runlines' own records. Everything is written under a
hidden staging folder in the output folder and renamed into place at the end, so a failed
import leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Final

from runlines import _context, _encoding, _layout
from runlines._version import __version__
from runlines.compat._keys import split_key
from runlines.errors import RunlinesError

__all__ = ["ImportedRun", "TensorBoardImportError", "find_runs", "import_tensorboard"]

_PIP: Final = "pip install 'runlines[import-tensorboard]'"
_EVENTS_MARK: Final = "tfevents"
_SOURCE: Final = "tensorboard"
_TEXT_SUFFIX: Final = "/text_summary"  # torch's add_text adds it to the tag
_Record = tuple[str, dict[str, Any]]  # (event, fields)


class TensorBoardImportError(RunlinesError, ValueError):
    """A log folder that cannot be imported: no event files, or a corrupted one."""


@dataclass
class ImportedRun:
    """One run folder's import: its log, and whether this call wrote it."""

    source: Path
    path: Path
    written: bool  # False: the same source files were imported before (nothing written)
    records: int = 0
    skipped: dict[str, int] = field(default_factory=dict)  # plugin -> values left out


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
        ImportError: the `tensorboard` package is not installed.
    """
    _require_tensorboard()
    root = Path(logdir)
    folders = find_runs(root)
    if not folders:
        msg = f"no TensorBoard event files (*tfevents*) under {root}; check the folder"
        raise TensorBoardImportError(msg)
    target = Path(out)
    target.mkdir(parents=True, exist_ok=True)
    results: list[ImportedRun] = []
    staged: list[tuple[Path, Path]] = []  # (staging folder, final log)
    try:
        for folder in folders:
            name = _run_name(root, folder)
            files = sorted(p for p in folder.iterdir() if p.is_file() and _is_events(p.name))
            digest = _sha256(files)
            log = _context.log_path(target, name, None)
            if log.exists():
                if _imported_sha(log) == digest:
                    results.append(ImportedRun(folder, log, written=False))
                    continue
                msg = (
                    f"{log} exists and was not imported from {folder}'s event files; "
                    "remove it or import into another folder (-o)"
                )
                raise TensorBoardImportError(msg)
            if _layout.artifacts_dir(log).exists():
                msg = (
                    f"{_layout.artifacts_dir(log)} exists without its log; remove it or "
                    "import into another folder (-o)"
                )
                raise TensorBoardImportError(msg)
            stage = Path(tempfile.mkdtemp(prefix=f".import-{name}.", dir=target))
            staged.append((stage, log))
            result = _import_run(folder, files, digest, name, stage)
            result.path = log
            results.append(result)
        for stage, log in staged:
            _move_into_place(stage, log)
    finally:
        for stage, _ in staged:
            shutil.rmtree(stage, ignore_errors=True)
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
    run_id = _context.new_run_id()
    start = {
        "ts": first,
        "event": "run_start",
        "run": name,
        "id": run_id,
        "attempt": 1,
        "imported_from": {
            "tool": _SOURCE,
            "path": str(folder.resolve()),
            "files": [p.name for p in files],
            "sha256": digest,
        },
        "runlines": __version__,
        "writer": "import",
        "config": converter.config,
    }
    end = {
        "ts": last,
        "event": "run_end",
        "run": name,
        "id": run_id,
        "attempt": 1,
        "status": "ok",
        "duration_s": round(last - first, 6),
        "dropped": 0,
    }
    with (stage / f"{name}.jsonl").open("wb") as log, body.open("rb") as records:
        log.write(_encoding.encode_line_safe(start))
        shutil.copyfileobj(records, log, 1 << 20)
        log.write(_encoding.encode_line_safe(end))
        log.flush()
        os.fsync(log.fileno())
    body.unlink()
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
        from tensorboard import data_compat, dataclass_compat
        from tensorboard.compat.tensorflow_stub import errors

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
                    continue
                values = event.summary.value
                if all(v.WhichOneof("value") == "simple_value" for v in values):
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

    def _record(self, value: Any, step: int) -> list[_Record]:
        """The (event, fields) records of one summary value (none: nothing to write)."""
        from tensorboard.util import tensor_util

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
        if plugin == "hparams":
            self._hparams(value)
            return []
        key = plugin or "(no plugin)"
        self.result.skipped[key] = self.result.skipped.get(key, 0) + 1
        return []

    def _histogram(self, tag: str, buckets: Any, step: int) -> list[_Record]:
        from runlines import _media

        if buckets.ndim != 2 or len(buckets) == 0:
            return []  # an empty histogram: no bins to write
        edges = [float(x) for x in buckets[:, 0]] + [float(buckets[-1, 1])]
        counts = [round(float(x)) for x in buckets[:, 2]]
        if edges[0] == edges[-1]:  # all values equal: TensorBoard's one bucket of width 0
            edges[-1] = edges[0] + 1.0
        record = _media.histogram_record(_media_name(tag), (counts, edges), step=step)
        return [(_layout.HISTOGRAM, record)]

    def _images(self, tag: str, parts: list[bytes], step: int) -> list[_Record]:
        from runlines import _media

        width, height, images = int(parts[0]), int(parts[1]), parts[2:]
        name = _media_name(tag)
        records: list[_Record] = []
        for index, data in enumerate(images):
            ext, kind = ("jpg", "jpeg") if data[:2] == b"\xff\xd8" else ("png", "png")
            _, fields = _media._save(self.stage, self.artifacts, name, step, ext, data)
            fields.update(format=kind, width=width, height=height)
            if len(images) > 1:
                fields["index"] = index
            records.append((_layout.IMAGE, fields))
        return records

    def _text(self, tag: str, array: Any, step: int) -> _Record:
        from runlines import _media

        items = [x.decode("utf-8", "replace") if isinstance(x, bytes) else str(x) for x in
                 array.reshape(-1).tolist()]  # fmt: skip
        name = _media_name(tag.removesuffix(_TEXT_SUFFIX))
        _, record = _media.text_record(
            self.stage, self.artifacts, name, "\n".join(items), step=step
        )
        return _layout.TEXT, record

    def _hparams(self, value: Any) -> None:
        from tensorboard.plugins.hparams import metadata

        if value.tag != metadata.SESSION_START_INFO_TAG:
            return  # the experiment's domains and the session's end: no values of the run
        content = value.metadata.plugin_data.content
        start = metadata.parse_session_start_info_plugin_data(content)
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
    from tensorboard.backend.event_processing import event_file_loader
    from tensorboard.compat.proto import event_pb2

    parse = event_pb2.Event.FromString
    for raw in event_file_loader._make_tf_record_iterator(str(path)):
        yield parse(raw)


# -- helpers ---------------------------------------------------------------------------------


def _require_tensorboard() -> None:
    try:
        import tensorboard  # noqa: F401
    except ImportError as err:
        msg = f"runlines import tensorboard needs the tensorboard package: {_PIP}"
        raise ImportError(msg) from err


def _is_events(filename: str) -> bool:
    return _EVENTS_MARK in filename and not filename.startswith(".")


def _run_name(root: Path, folder: Path) -> str:
    """The log's name: the folder's path under *root* (`a/b` -> `a-b`), or *root*'s name."""
    relative = folder.relative_to(root)
    parts = relative.parts or (root.resolve().name,)
    text = "-".join(parts)
    cleaned = "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "_" for c in text)
    return _context.check_run_name(cleaned.lstrip(".") or "imported")


def _media_name(tag: str) -> str:
    """A tag as a media name: the path-like parts kept, anything odd replaced by `_`."""
    parts = [
        "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "_" for c in part)
        for part in tag.split("/")
        if part
    ]
    return "/".join(p.lstrip(".") or "_" for p in parts) or "_"


def _sha256(files: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0")
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def _imported_sha(log: Path) -> str | None:
    """The sha256 of the event files *log* was imported from, or None (not an import)."""
    import orjson

    try:
        with log.open("rb") as handle:
            first = orjson.loads(handle.readline())
    except (OSError, orjson.JSONDecodeError):
        return None
    source = first.get("imported_from") if isinstance(first, dict) else None
    return source.get("sha256") if isinstance(source, dict) else None


def _move_into_place(stage: Path, log: Path) -> None:
    """Move the staged artifacts, then the log (last: a log present is a finished import)."""
    artifacts = stage / _layout.artifacts_dir(log).name
    if artifacts.exists():
        os.replace(artifacts, _layout.artifacts_dir(log))
    os.replace(stage / log.name, log)
