"""What the importers share: staging folders renamed into place, and the log's lines.

Every importer writes each log (its artifacts, its notes file) under a hidden `.import-*`
folder in the output folder and renames them into place once every source run has been read,
so a failed import leaves nothing behind. The records are the dicts `Run.log` would build,
with the source's own times as their `ts`, encoded by runlines' own encoder.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import orjson

from runlines import _context, _encoding, _layout
from runlines._version import __version__
from runlines.errors import RunlinesError

__all__ = [
    "ImportedRun",
    "Staging",
    "bookends",
    "clean_name",
    "copy_body",
    "imported_sha",
    "sha256_files",
    "write_log",
]


@dataclass
class ImportedRun:
    """One source run's import: its log, and whether this call wrote it."""

    source: Path | str
    path: Path
    written: bool  # False: the same source was imported before (nothing written)
    records: int = 0
    skipped: dict[str, int] = field(default_factory=dict)  # what was left out -> how many
    note: str = ""  # a line for the command to say (e.g. a run still running)


def clean_name(text: str, fallback: str = "imported") -> str:
    """*text* as a run or folder name: anything but letters, digits, `._-` becomes `_`."""
    cleaned = "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "_" for c in text)
    return _context.check_run_name(cleaned.lstrip(".") or fallback)


def sha256_files(files: list[Path]) -> str:
    """The sha256 of *files*' names and bytes, in the order given."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0")
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def imported_sha(log: Path) -> str | None:
    """The sha256 of the source *log* was imported from, or None (not an import)."""
    try:
        with log.open("rb") as handle:
            first = orjson.loads(handle.readline())
    except (OSError, orjson.JSONDecodeError):
        return None
    source = first.get("imported_from") if isinstance(first, dict) else None
    return source.get("sha256") if isinstance(source, dict) else None


class Staging:
    """The staging folders of one import: `claim` each log, `commit` at the end.

    Leaving the `with` block removes every staging folder, so an error before `commit`
    leaves the output folder as it was (save folders `claim` made for the logs).
    """

    def __init__(self, out: Path, error: type[RunlinesError]) -> None:
        self.out = out
        self.error = error
        self._staged: list[tuple[Path, Path]] = []  # (staging folder, final log)
        self._claimed: dict[Path, str] = {}  # final log -> the source that claimed it

    def __enter__(self) -> Staging:
        self.out.mkdir(parents=True, exist_ok=True)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        for stage, _ in self._staged:
            shutil.rmtree(stage, ignore_errors=True)

    def claim(self, log: Path, digest: str, source: str) -> Path | None:
        """A staging folder for *log*, or None: *log* was imported from this source before.

        Raises the importer's error when *log* exists from another source, when its artifacts
        folder is left over without it, or when another source of this import maps to it.
        """
        if log in self._claimed:
            msg = (
                f"{self._claimed[log]} and {source} would both be imported as {log}; "
                "import them into separate folders (-o)"
            )
            raise self.error(msg)
        self._claimed[log] = source
        if log.exists():
            if imported_sha(log) == digest:
                return None
            msg = (
                f"{log} exists and was not imported from {source} as it is now; remove it "
                "(to import again) or import into another folder (-o)"
            )
            raise self.error(msg)
        artifacts = _layout.artifacts_dir(log)
        if artifacts.exists():
            msg = (
                f"{artifacts} exists without its log; remove it or import into another folder (-o)"
            )
            raise self.error(msg)
        name = log.name.removesuffix(_layout.LOG_SUFFIX)
        stage = Path(tempfile.mkdtemp(prefix=f".import-{name}.", dir=self.out))
        self._staged.append((stage, log))
        return stage

    def commit(self) -> None:
        """Move every staged log into place: its artifacts and notes first, the log last."""
        for stage, log in self._staged:
            log.parent.mkdir(parents=True, exist_ok=True)
            for side in (_layout.artifacts_dir(log), _layout.notes_path(log)):
                staged = stage / side.name
                if staged.exists():
                    os.replace(staged, side)
            os.replace(stage / log.name, log)  # last: a log present is a finished import


def bookends(
    name: str,
    first: float,
    last: float,
    source: dict[str, Any],
    config: dict[str, Any],
    status: str | None,
    exit_code: int | None = None,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The `run_start` (naming *source* as `imported_from`) and `run_end` of one imported run.

    *status* None: the source run has not ended, so there is no `run_end`.
    """
    run_id = _context.new_run_id()
    start = {
        "ts": first,
        "event": "run_start",
        "run": name,
        "id": run_id,
        "attempt": 1,
        "imported_from": source,
        "runlines": __version__,
        "writer": "import",
        "config": config,
    }
    if status is None:
        return start, None
    end: dict[str, Any] = {
        "ts": last,
        "event": "run_end",
        "run": name,
        "id": run_id,
        "attempt": 1,
        "status": status,
        "duration_s": round(last - first, 6),
        "dropped": 0,
    }
    if exit_code:
        end["exit_code"] = exit_code
    return start, end


def write_log(
    path: Path, start: dict[str, Any], lines: Iterable[bytes], end: dict[str, Any] | None
) -> None:
    """Write *start*, the encoded *lines*, then *end* (None: no run_end) as the log *path*."""
    with path.open("wb") as log:
        log.write(_encoding.encode_line_safe(start))
        log.writelines(lines)
        if end is not None:
            log.write(_encoding.encode_line_safe(end))
        log.flush()
        os.fsync(log.fileno())


def copy_body(body: Path) -> Iterable[bytes]:
    """The lines of a staged body file, in chunks (for `write_log`); the file is removed."""
    with body.open("rb") as handle:
        yield from iter(lambda: handle.read(1 << 20), b"")
    body.unlink()
