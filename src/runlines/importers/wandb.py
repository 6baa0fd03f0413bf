"""Import offline W&B runs (`wandb/offline-run-*`) as runlines logs (docs/compat.md).

wandb 0.31 has no Python reader of its run files (`run-*.wandb`, a LevelDB-framed log of
protobuf records): its own reader is in `wandb-core`, the Go binary that `wandb sync` runs.
This importer reads through it, by the `wandb leet inspect --json` command, which prints
each record of the file as one JSON line, and refuses a file it calls corrupt or incomplete.
History rows become records (keys with `/` split as the drop-in splits them), the config the
run's config, the values set in the summary a `summary` record, tags and notes the notes file.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import orjson

from runlines import _context, _encoding, _layout, _notes
from runlines.compat._keys import column_of, split_key
from runlines.errors import FieldError, RunlinesError
from runlines.importers._common import (
    ImportedRun,
    Staging,
    bookends,
    clean_name,
    sha256_files,
    write_log,
)

__all__ = ["WandbImportError", "import_wandb"]

_PIP: Final = "pip install 'runlines[import-wandb]'"
_SOURCE: Final = "wandb"
_READER: Final = ("leet", "inspect", "--json")  # wandb-core's reader, through wandb's CLI
_READER_SINCE: Final = (0, 31)  # the first wandb whose `leet inspect` prints --json
_BAD_READ: Final = ("corrupt", "incomplete")  # what the reader says of a damaged file
# the run record's keys -> the drop-in's run_info fields
_RUN_INFO: Final = {"project": "project", "run_id": "id", "tags": "tags", "notes": "notes",
                    "run_group": "group", "job_type": "job_type"}  # fmt: skip
_SPECIAL: Final = "_"  # `_step`, `_timestamp`, `_runtime`, `_wandb`: W&B's own keys


def _wandb_version() -> tuple[int, ...]:
    try:
        text = importlib.metadata.version("wandb")
    except importlib.metadata.PackageNotFoundError as err:
        msg = f"runlines import wandb reads run files through the wandb package: {_PIP}"
        raise ImportError(msg) from err
    parts = []
    for part in text.split(".")[:2]:
        digits = "".join(c for c in part if c.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


# this module is the door: checked when an import of W&B runs runs
_VERSION: Final = _wandb_version()


class WandbImportError(RunlinesError, ValueError):
    """A W&B run that cannot be imported: no run file, or one its reader refuses."""


def _find_run_files(path: str | os.PathLike[str]) -> list[Path]:
    """The `.wandb` files of *path*: itself, those in it, or those of its `*run-*` folders."""
    root = Path(path)
    if root.is_file():
        return [root]
    if not root.is_dir():
        msg = f"{root} does not exist; give a W&B run folder (wandb/offline-run-*)"
        raise WandbImportError(msg)
    found = sorted(root.glob("*.wandb")) or sorted(root.glob("*run-*/*.wandb"))
    return [p for p in found if p.is_file()]


def import_wandb(path: str | os.PathLike[str], out: str | os.PathLike[str]) -> list[ImportedRun]:
    """Import the offline W&B run(s) of *path* as logs in *out*, `<project>/<run name>`.

    *path* is a run folder (`wandb/offline-run-*`), its `.wandb` file, or the `wandb/` folder
    of several runs. A run file imported before (the same sha256) is left as it is.

    Raises:
        WandbImportError: no run file, one the reader refuses (corrupt, truncated), a wandb
            older than 0.31, or a log of that name in *out* from elsewhere. Nothing is
            written then.
    """
    if _VERSION < _READER_SINCE:
        msg = (
            f"runlines import wandb reads run files with `wandb leet inspect --json`, which "
            f"wandb {'.'.join(map(str, _READER_SINCE))} has and this one "
            f"({'.'.join(map(str, _VERSION))}) has not: pip install 'wandb>=0.31'"
        )
        raise WandbImportError(msg)
    files = _find_run_files(path)
    if not files:
        msg = f"no W&B run file (*.wandb) in {path}; give a run folder (wandb/offline-run-*)"
        raise WandbImportError(msg)
    runs = [(file, _Run(file, list(_read(file)))) for file in files]
    results: list[ImportedRun] = []
    with Staging(Path(out), WandbImportError) as staging:
        for file, run in runs:
            digest = sha256_files([file])
            log = _context.log_path(staging.out / run.project, run.name, None)
            stage = staging.claim(log, digest, str(file))
            if stage is None:
                results.append(ImportedRun(file, log, written=False))
                continue
            result = run.write(stage / log.name, digest)
            result.path = log
            results.append(result)
        staging.commit()
    return results


def _read(file: Path) -> Iterator[dict[str, Any]]:
    """The records of *file*, as wandb's own reader prints them; raises on a damaged file."""
    command = [sys.executable, "-m", "wandb", *_READER, str(file)]
    env = {**os.environ, "WANDB_SILENT": "true"}
    done = subprocess.run(command, capture_output=True, env=env, check=False)
    said = done.stderr.decode("utf-8", "replace").strip()
    if done.returncode != 0 or any(word in said for word in _BAD_READ):
        msg = (
            f"wandb's reader (`wandb {' '.join(_READER)}`) refuses {file}: "
            f"{said or f'exit status {done.returncode}'}; nothing was imported"
        )
        raise WandbImportError(msg)
    for line in done.stdout.splitlines():
        if line.strip():
            yield orjson.loads(line)


class _Run:
    """One run file's records, gathered into a log's lines."""

    def __init__(self, file: Path, records: list[dict[str, Any]]) -> None:
        self.file = file
        self.info: dict[str, Any] = {}
        self.config: dict[str, Any] = {}
        self.summary: dict[str, Any] = {}
        self.rows: list[dict[str, Any]] = []
        self.exit_code: int | None = None
        self.skipped: dict[str, int] = {}
        for record in records:
            kind = record.get("type")
            body = record.get(kind, {}) if isinstance(kind, str) else {}
            if kind == "run":
                self.info = body
                self._configure(body.get("config", {}))
            elif kind == "config":
                self._configure(body)
            elif kind == "history":
                self.rows.append(body.get("item", {}))
            elif kind == "summary":
                self.summary.update(body.get("update", {}))
                for key in body.get("remove", []) or []:
                    self.summary.pop(key, None)
            elif kind == "exit":
                self.exit_code = int(body.get("exit_code", 0))
            elif kind in ("stats", "output", "output_raw"):
                what = "system stats" if kind == "stats" else "console lines"
                self.skipped[what] = self.skipped.get(what, 0) + 1
        if not self.info:
            msg = f"{file} holds no run record; is it a W&B run file?"
            raise WandbImportError(msg)
        self.project = clean_name(str(self.info.get("project") or "uncategorized"))
        run_id = str(self.info.get("run_id") or "run")
        self.name = clean_name(str(self.info.get("display_name") or run_id))

    def _configure(self, body: Mapping[str, Any]) -> None:
        update = body.get("update", {})
        self.config.update({k: v for k, v in update.items() if k != "_wandb"})
        for key in body.get("remove", []) or []:
            self.config.pop(key, None)

    def write(self, path: Path, digest: str) -> ImportedRun:
        """Write the log *path* and its notes file; return what was done."""
        result = ImportedRun(self.file, path, written=True, skipped=self.skipped)
        name, info = self.name, self.info
        lines, last_values = self._history_lines(result)
        times = [row["_timestamp"] for row in self.rows if "_timestamp" in row]
        started = _timestamp(info.get("start_time"))
        first = started if started is not None else min(times, default=0.0)
        last = max([first, *times])
        source = {
            "tool": _SOURCE,
            "path": str(self.file.resolve()),
            "run_id": info.get("run_id"),
            "sha256": digest,
        }
        status = None
        if self.exit_code is not None:
            status = "ok" if self.exit_code == 0 else "failed"
        start, end = bookends(name, first, last, source, self.config, status, self.exit_code)
        run_info = {"ts": first, "event": "run_info", "run": name}
        run_info.update({field: info.get(key) for key, field in _RUN_INFO.items()})
        body = [_encoding.encode_line_safe(run_info), *lines]
        values = self._summary_values(last_values)
        if values:
            summary = {"ts": last, "event": _layout.SUMMARY, "run": name, "values": values}
            body.append(_encoding.encode_line_safe(summary))
        if end is None:
            result.note = "no exit record (the run was killed, or still runs): no run_end"
        write_log(path, start, body, end)
        self._notes(path, result)
        return result

    def _history_lines(self, result: ImportedRun) -> tuple[list[bytes], dict[str, Any]]:
        """One record per event of each history row, at its `_step` and `_timestamp`."""
        encode, name = _encoding.encode_line_safe, self.name
        lines: list[bytes] = []
        last: dict[str, Any] = {}
        for row in self.rows:
            step, ts = row.get("_step"), row.get("_timestamp")
            records: dict[str, dict[str, Any]] = {}
            for key, value in row.items():
                if key.startswith(_SPECIAL):
                    continue
                if isinstance(value, dict) and "_type" in value:  # media: its file not read
                    what = f"media ({value['_type']})"
                    result.skipped[what] = result.skipped.get(what, 0) + 1
                    continue
                event, field = split_key(key)
                record = records.get(event)
                if record is None:
                    record = records[event] = {"ts": ts, "event": event, "run": name}
                    if step is not None:
                        record["step"] = step
                record[field] = value
                last[key] = value
            for record in records.values():
                lines.append(encode(record))
                result.records += 1
        return lines, last

    def _summary_values(self, last_values: dict[str, Any]) -> dict[str, Any]:
        """The summary's values that are not a key's last logged one, by runs() column."""
        values: dict[str, Any] = {}
        for key, value in self.summary.items():
            if key.startswith(_SPECIAL) or last_values.get(key, object()) == value:
                continue
            if isinstance(value, dict) and "_type" in value:
                continue  # a media value's summary: its file is not read
            values.update(_flat(column_of(key), value))
        return values

    def _notes(self, log: Path, result: ImportedRun) -> None:
        """init()'s tags and notes in the notes file, as the drop-in writes them."""
        for tag in self.info.get("tags") or []:
            try:
                _notes.tag(log, str(tag))
            except FieldError:
                what = "tags (not a runlines tag: in run_info only)"
                result.skipped[what] = result.skipped.get(what, 0) + 1
        notes = self.info.get("notes")
        if notes:
            _notes.note(log, str(notes))


def _timestamp(text: object) -> float | None:
    """An RFC 3339 time (`2026-12-03T08:06:02.761113Z`) as Unix seconds, or None."""
    if not isinstance(text, str):
        return None
    head, dot, fraction = text.removesuffix("Z").partition(".")
    try:
        moment = datetime.datetime.fromisoformat(head).replace(tzinfo=datetime.UTC)
    except ValueError:
        return None
    digits = "".join(c for c in fraction if c.isdigit())
    return moment.timestamp() + (int(digits) / 10 ** len(digits) if dot and digits else 0.0)


def _flat(column: str, value: Any) -> dict[str, Any]:
    """*value* under *column*, a nested mapping's keys dotted below it (as the drop-in)."""
    if not isinstance(value, Mapping):
        return {column: value}
    flat: dict[str, Any] = {}
    for key, inner in value.items():
        flat.update(_flat(f"{column}.{key}", inner))
    return flat
