"""The ends of a sync: what a run's files are to it, and a folder (local disk, NFS mount).

A file is one of three kinds, by its path relative to the folder synced: `lines` (a log, a
rank log, `<name>.notes.jsonl`, `<name>.console.log`: appended to, sent up to their last
newline), `artifact` (under `<name>.artifacts/`: written once under its final name, sent once,
deduplicated by sha256) or `whole` (the Parquet copy: sent again whenever it changes). Lock
files, live-at-source markers (`<log>.live`, `live.py`: written by the pass, not copied as
files) and hidden names (temporary files, this module's state) are no part of a run's data.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final, Protocol

from runlines._layout import (
    ARTIFACTS_SUFFIX,
    CONSOLE_SUFFIX,
    COPY_SUFFIX,
    LOCK_SUFFIX,
    LOG_SUFFIX,
    RANK_NAME,
    lock_held,
    open_regular,
)
from runlines._sync.live import is_fresh, marker, read_marker

__all__ = [
    "ARTIFACT",
    "LINES",
    "STATE_NAME",
    "WHOLE",
    "End",
    "Entry",
    "FolderEnd",
    "kind_of",
]

LINES: Final = "lines"
ARTIFACT: Final = "artifact"
WHOLE: Final = "whole"
# The destination's record of what it holds (hidden: no reader takes it for a run's file).
STATE_NAME: Final = ".runlines-sync.json"


@dataclass(frozen=True, slots=True)
class Entry:
    """One file of a source: its POSIX path relative to the source, kind, size and stamp.

    The stamp changes whenever the file may have (a modification time, an object's ETag):
    a file whose size and stamp are those of the last pass is not read again.
    """

    rel: str
    kind: str
    size: int
    stamp: str


class End(Protocol):
    """One end of a sync; a source is read with `entries` and `read`, a destination written."""

    def entries(self) -> Iterator[Entry]:
        """Yield the run files, each file of a folder before what its subfolders hold."""
        ...

    def read(self, rel: str, start: int, end: int) -> bytes:
        """Return the bytes of *rel* from offset *start* up to *end* (fewer at its end)."""
        ...

    def open_read(self, rel: str) -> IO[bytes]:
        """Open file *rel* (an artifact or a whole file) for reading bytes."""
        ...

    def lines_size(self, rel: str) -> int:
        """Return how many bytes of lines file *rel* the destination holds (0: none)."""
        ...

    def append(self, rel: str, data: bytes) -> None:
        """Append *data* (whole lines) to lines file *rel*."""
        ...

    def reset(self, rel: str) -> None:
        """Empty lines file *rel*: its source was replaced by another file."""
        ...

    def put(self, rel: str, source: IO[bytes]) -> None:
        """Write file *rel* from *source*, whole: a reader sees the old file or the new one."""
        ...

    def size_of(self, rel: str) -> int | None:
        """Return the size of file *rel* (an artifact or a whole file), None when missing."""
        ...

    def copy(self, from_rel: str, rel: str) -> None:
        """Make *rel* a copy of the destination's own *from_rel*, sending no bytes."""
        ...

    def load_state(self) -> dict[str, Any]:
        """Return the state `save_state` wrote last, or an empty one."""
        ...

    def save_state(self, state: dict[str, Any]) -> None:
        """Write *state* whole: a crash leaves the old state or the new one."""
        ...

    def live(self, rel: str, live_for_s: float) -> bytes | None:
        """Return the live-at-source marker (`live.py`) to write beside the copy of log
        *rel*, or None when its run is not live here: a new marker, for *live_for_s* seconds,
        when its lock is held here, else this end's own fresh marker (a copy's), as it is."""
        ...

    def refresh(self, entry: Entry) -> Entry | None:
        """Return *entry* as its file is now (None: gone): a log whose run ended meanwhile."""
        ...

    def remove(self, rel: str) -> None:
        """Remove file *rel*, if there."""
        ...


def kind_of(rel: str) -> str | None:
    """Return the kind of the file at POSIX path *rel*, or None for no run file."""
    parts = rel.split("/")
    if any(part.startswith(".") for part in parts):
        return None
    if any(part.endswith(ARTIFACTS_SUFFIX) for part in parts[:-1]):
        return ARTIFACT
    name = parts[-1]
    if name.endswith(LOCK_SUFFIX):
        return None
    if name.endswith((LOG_SUFFIX, CONSOLE_SUFFIX)):
        return LINES
    if name.endswith(COPY_SUFFIX):
        return WHOLE
    return None


def is_of_run(rel: str, stem: str) -> bool:
    """Return whether *rel* is a file of the run whose log is `<stem>.jsonl`."""
    top = rel.split("/")[0]
    names = (LOG_SUFFIX, ".notes.jsonl", CONSOLE_SUFFIX, COPY_SUFFIX, ARTIFACTS_SUFFIX)
    if top in {stem + suffix for suffix in names}:
        return True
    match = RANK_NAME.match(top.removesuffix(LOG_SUFFIX))
    return match is not None and top.endswith(LOG_SUFFIX) and match["run"] == stem


class FolderEnd:
    """A folder: the source's own, or a destination on a local disk or a shared mount.

    A log file as source is its folder with only that run's files (`only`: the log's name
    without `.jsonl`). Lines are appended in place; a whole file is written to a hidden
    temporary name and renamed; a deduplicated artifact is a hard link where it can be.
    """

    def __init__(self, root: Path, *, only: str | None = None) -> None:
        self.root = root
        self.only = only

    def __str__(self) -> str:
        return str(self.root)

    def entries(self) -> Iterator[Entry]:
        # os.walk yields a folder's files before it lists its subfolders: a log is looked
        # at before the artifacts its records point at are listed (passes.py relies on it)
        for folder, dirs, names in os.walk(self.root):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            base = Path(folder).relative_to(self.root).as_posix()
            for name in sorted(names):
                rel = name if base == "." else f"{base}/{name}"
                kind = kind_of(rel)
                if kind is None or (self.only is not None and not is_of_run(rel, self.only)):
                    continue
                try:
                    info = os.stat(Path(folder, name))
                except OSError:  # deleted since it was listed
                    continue
                yield Entry(rel, kind, info.st_size, str(info.st_mtime_ns))

    def read(self, rel: str, start: int, end: int) -> bytes:
        with open_regular(self._path(rel)) as file:
            file.seek(start)
            data: bytes = file.read(max(0, end - start))
            return data

    def open_read(self, rel: str) -> IO[bytes]:
        file: IO[bytes] = open_regular(self._path(rel))
        return file

    def lines_size(self, rel: str) -> int:
        try:
            return self._path(rel).stat().st_size
        except FileNotFoundError:
            return 0

    def append(self, rel: str, data: bytes) -> None:
        path = self._path(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("ab") as file:
            file.write(data)

    def reset(self, rel: str) -> None:
        self._path(rel).write_bytes(b"")

    def put(self, rel: str, source: IO[bytes]) -> None:
        path = self._path(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = self._temp(path)
        try:
            with temp.open("wb") as out:
                shutil.copyfileobj(source, out)
            os.replace(temp, path)
        finally:
            temp.unlink(missing_ok=True)

    def size_of(self, rel: str) -> int | None:
        try:
            return self._path(rel).stat().st_size
        except FileNotFoundError:
            return None

    def copy(self, from_rel: str, rel: str) -> None:
        path = self._path(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = self._temp(path)
        try:
            try:
                os.link(self._path(from_rel), temp)
            except OSError:  # no hard links here (another disk, some shared mounts)
                shutil.copyfile(self._path(from_rel), temp)
            os.replace(temp, path)
        finally:
            temp.unlink(missing_ok=True)

    def load_state(self) -> dict[str, Any]:
        try:
            state: dict[str, Any] = json.loads(self._path(STATE_NAME).read_bytes())
        except (FileNotFoundError, ValueError):
            return {}
        return state

    def save_state(self, state: dict[str, Any]) -> None:
        path = self._path(STATE_NAME)
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = self._temp(path)
        try:
            temp.write_text(json.dumps(state, sort_keys=True), encoding="utf-8")
            os.replace(temp, path)
        finally:
            temp.unlink(missing_ok=True)

    def live(self, rel: str, live_for_s: float) -> bytes | None:
        path = self._path(rel)
        if lock_held(path):
            return marker(str(path.absolute()), live_for_s)
        data = read_marker(path)
        return data if data is not None and is_fresh(data) else None

    def refresh(self, entry: Entry) -> Entry | None:
        try:
            info = os.stat(self._path(entry.rel))
        except FileNotFoundError:
            return None
        return Entry(entry.rel, entry.kind, info.st_size, str(info.st_mtime_ns))

    def remove(self, rel: str) -> None:
        self._path(rel).unlink(missing_ok=True)

    def _path(self, rel: str) -> Path:
        return self.root.joinpath(*rel.split("/"))

    @staticmethod
    def _temp(path: Path) -> Path:
        # one name per file, not per process: a pass killed while it wrote it leaves one
        # hidden file, which the next pass writes over (one sync per destination at a time)
        return path.with_name(f".{path.name}.sync.tmp")
