"""Which files make up a run: log files, rank files, folders of logs, and the writer's lock."""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from runlines import _sync
from runlines._layout import (
    LOG_SUFFIX,
    hash_path,
    is_log_name,
    lock_held,
    lock_path,
    not_regular_reason,
    run_and_rank,
)
from runlines.errors import ReadError, RunlinesWarning

__all__ = [
    "LOG_SUFFIX",
    "LogFile",
    "find_logs",
    "is_locked",
    "lock_path",
    "log_file",
    "real_path",
    "run_labels",
    "sha256_of",
]


@dataclass(frozen=True, slots=True)
class LogFile:
    """One log file: its path, the run it belongs to and, for `<name>.rank<R>.jsonl`, the rank."""

    path: Path
    run: str
    rank: int | None = None


def log_file(path: str | os.PathLike[str]) -> LogFile:
    """Return the `LogFile` for *path*, naming its run and rank from the file name."""
    path = Path(path)
    stem = path.name[: -len(LOG_SUFFIX)] if path.name.endswith(LOG_SUFFIX) else path.stem
    run, rank = run_and_rank(stem)
    return LogFile(path, run, rank)


def find_logs(*sources: str | os.PathLike[str]) -> list[LogFile]:
    """Return the log files of *sources*: each file as given, each directory's `*.jsonl` logs.

    A URL (`s3://bucket/runs`) is a destination of `runlines sync`: it is synced down into a
    local folder first (`_sync.local_copy`, docs/sync.md), whose logs are returned.

    Raises:
        ReadError: a source that does not exist, or a directory without logs.
    """
    if not sources:
        msg = "no log given; pass a .jsonl log file or a folder of logs"
        raise ReadError(msg)
    found: dict[Path, LogFile] = {}
    folders: dict[Path, Path] = {}
    for source in sources:
        for log in _logs_of(Path(_sync.local_copy(source))):
            found.setdefault(real_path(log.path, folders), log)
    return list(found.values())


def real_path(path: Path, folders: dict[Path, Path]) -> Path:
    """Return `path.resolve()`, resolving each folder once (*folders* caches them).

    A log in a folder of logs is seldom a link itself: resolving the folder and adding the
    name costs one `lstat` for the file instead of one per part of its path.
    """
    if path.is_symlink():
        return path.resolve()
    folder = folders.get(path.parent)
    if folder is None:
        folder = folders[path.parent] = path.parent.resolve()
    return folder / path.name


def _logs_of(source: Path) -> list[LogFile]:
    if source.is_dir():
        logs = _logs_in(source)
        if not logs:
            msg = (
                f"{source} has no *{LOG_SUFFIX} logs; pass a log file or the folder that holds them"
            )
            raise ReadError(msg, str(source))
        return sorted(logs, key=lambda log: (log.run, log.rank or 0))
    check_source(source)
    return [log_file(source)]


def _logs_in(folder: Path) -> list[LogFile]:
    """Return the `*.jsonl` logs of *folder* (as `glob` finds them: no hidden names).

    An entry the listing names a plain file needs no stat; a link, or an entry of a kind the
    listing does not say, is looked at (`_is_log_file`).
    """
    logs = []
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.name.startswith(".") or not is_log_name(entry.name):  # no notes file
                continue
            path = folder / entry.name
            if entry.is_file(follow_symlinks=False) or _is_log_file(path):
                logs.append(log_file(path))
    return logs


def check_source(source: Path) -> None:
    """Raise ReadError unless *source* is a folder or a regular file (never a FIFO)."""
    if not source.exists():
        msg = f"no such log or folder: {source}; pass a folder of logs or a .jsonl log file"
        raise ReadError(msg, str(source))
    kind = not_regular_reason(source)
    if kind is not None:
        msg = f"{source} is {kind}, not a regular file; pass a folder of logs or a .jsonl log file"
        raise ReadError(msg, str(source))


def is_locked(log: str | os.PathLike[str]) -> bool:
    """Return whether *log*'s run is alive: the one check of every view's running or died.

    Alive: a live process holds its lock file here, or *log* is a copy that `runlines sync`
    made beside a fresh live-at-source marker (the source's lock was held when sync last
    looked; an expired marker counts for nothing, docs/sync.md). Never creates a lock file.
    """
    return lock_held(log) or _sync.live_at_source(log)


def _is_log_file(path: Path) -> bool:
    """Return whether *path* in a folder of logs is a regular file; warn about a FIFO or such."""
    kind = not_regular_reason(path)
    if kind is not None:
        msg = f"skipped {path}: it is {kind}, not a regular file; only log files are read"
        warnings.warn(msg, RunlinesWarning, stacklevel=5)
    return kind is None and path.is_file()


def sha256_of(path: str | os.PathLike[str]) -> str:
    """Return the hex sha256 of a regular file, or of a folder as artifact records hash it."""
    return hash_path(Path(path))[1]


def run_labels(logs: Sequence[LogFile]) -> dict[Path, str]:
    """Return a label for each log whose run name another folder's log shares, by its path.

    A run is its log file: `exp1/baseline.jsonl` and `exp2/baseline.jsonl` are two runs,
    labelled by their path relative to the logs' common folder (`exp1/baseline`,
    `exp2/baseline`). Logs whose names collide with no other keep their plain names (no label).
    """
    resolved: dict[Path, Path] = {}
    parents = {log.path: real_path(log.path, resolved).parent for log in logs}
    folders: dict[str, set[Path]] = {}
    for log in logs:
        folders.setdefault(log.run, set()).add(parents[log.path])
    colliding = [log for log in logs if len(folders[log.run]) > 1]
    if not colliding:
        return {}
    common = Path(os.path.commonpath([str(parents[log.path]) for log in colliding]))
    labels = {}
    for log in colliding:
        folder = parents[log.path].relative_to(common)
        labels[log.path] = (folder / log.run).as_posix()
    return labels
