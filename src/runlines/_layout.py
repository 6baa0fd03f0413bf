"""The on-disk contract the writer and every reader share: file names, lifecycle events, hashing.

A run named N in folder D writes `D/N.jsonl` (rank R > 0 of a distributed run:
`D/N.rank<R>.jsonl`), holds `D/N.jsonl.lock` while it is open, and keeps side files in
`D/N.artifacts/` (media: `D/N.artifacts/media/<media name>/`). A finished log may have a
Parquet copy, `D/N.parquet` (docs/scale.md).
Tags and notes go to `D/N.notes.jsonl`, which only `runlines tag`/`note` append to: it ends
in `.jsonl` but is no log (`is_log_name`), and no run may be named `*.notes`.
A run with console capture writes `D/N.console.log` (docs/console.md).
Only regular files are ever opened: a FIFO or a device named like a log would block a reader
forever.

A new launch of a name whose last attempt ended `ok` writes the next free name instead,
`N-2`, `N-3`, ... (see `rerun_name` and docs/run.md); it chooses while it holds
`D/N.jsonl.name.lock`, only for that moment.
"""

from __future__ import annotations

import errno
import hashlib
import mmap
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import orjson

LOG_SUFFIX: Final = ".jsonl"
LOCK_SUFFIX: Final = ".lock"
ARTIFACTS_SUFFIX: Final = ".artifacts"
COPY_SUFFIX: Final = ".parquet"
NOTES_SUFFIX: Final = ".notes.jsonl"
CONSOLE_SUFFIX: Final = ".console.log"
RANK_NAME: Final = re.compile(r"^(?P<run>.+)\.rank(?P<rank>\d+)$")

# The events runlines writes itself; every other event is the user's.
RUN_START: Final = "run_start"
RUN_END: Final = "run_end"
SPAN: Final = "span"
ARTIFACT: Final = "artifact"
SIGNAL: Final = "signal"
LIFECYCLE_EVENTS: Final = frozenset({RUN_START, RUN_END, SPAN, ARTIFACT, SIGNAL})
# The run_end status of a run a sweep stopped early (Run.close(status=...), integrations/optuna)
PRUNED: Final = "pruned"
# Written while a run is watched (docs/watching.md) and by capture (warnings, logging).
SYSTEM: Final = "system"
STALL: Final = "stall"
STALL_END: Final = "stall_end"
NONFINITE: Final = "nonfinite"
WARNING: Final = "warning"
LOG: Final = "log"
# Written by the run's watcher thread: no sign that training makes progress.
BACKGROUND_EVENTS: Final = frozenset({SYSTEM, STALL, STALL_END})
# Media records (docs/media.md): each points at a side file under `<name>.artifacts/media/`,
# or holds its values inline (a histogram, a short text).
IMAGE: Final = "image"
HISTOGRAM: Final = "histogram"
TABLE: Final = "table"
TEXT: Final = "text"
AUDIO: Final = "audio"
MEDIA_EVENTS: Final = (IMAGE, HISTOGRAM, TABLE, TEXT, AUDIO)
MEDIA_DIR: Final = "media"
# Written by the drop-ins (docs/compat.md): a run's declared final values (`values`, by
# column) and a metric's declared direction (`column`, `goal`: "min" or "max").
SUMMARY: Final = "summary"
DEFINE_METRIC: Final = "define_metric"

_NAME_LOCK_SUFFIX: Final = ".name.lock"
_EVENT_START: Final = b'"event":"run_start"'
_EVENT_END: Final = b'"event":"run_end"'

_CHUNK: Final = 1 << 20  # bytes read at a time when hashing a file


def log_path(directory: Path, name: str, rank: int | None = None) -> Path:
    """Return a run's log file: `<name>.jsonl`, or `<name>.rank<R>.jsonl` for rank R > 0."""
    if not rank:
        return directory / f"{name}{LOG_SUFFIX}"
    return directory / f"{name}.rank{rank}{LOG_SUFFIX}"


def lock_path(log: str | os.PathLike[str]) -> Path:
    """Return the lock file a live writer of *log* holds: `<log>.lock`."""
    log = Path(log)
    return log.with_name(log.name + LOCK_SUFFIX)


def lock_held(log: str | os.PathLike[str]) -> bool:
    """Return whether a live process holds *log*'s lock file here; never create a lock file.

    Whether *log*'s run is alive is `reading._files.is_locked`'s to say (a synced copy's
    marker too); this is the lock alone, as `sync` probes it at the source.
    """
    path = lock_path(log)
    if not path.exists():
        return False
    from filelock import FileLock, Timeout

    probe = FileLock(path, timeout=0)
    try:
        probe.acquire()
    except Timeout:
        return True
    except OSError:  # an unreadable lock file: nobody we can see holds it
        return False
    probe.release()
    return False


def name_lock_path(directory: Path, name: str) -> Path:
    """Return the lock a launch of run *name* holds while it chooses its name (`rerun_name`)."""
    return directory / f"{name}{LOG_SUFFIX}{_NAME_LOCK_SUFFIX}"


def rerun_name(name: str, number: int) -> str:
    """Return the name of the *number*-th run launched as *name*: `name`, `name-2`, `name-3`..."""
    return name if number == 1 else f"{name}-{number}"


def last_attempt(
    path: str | os.PathLike[str],
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """Return the last `run_start` of the log at *path* and the `run_end` after it, or None.

    (None, None) for a missing, empty or unreadable log; (start, None) while the last attempt
    runs, or when it died. Maps the file: only the two lines are parsed.
    """
    try:
        with open_regular(path) as file:
            if os.fstat(file.fileno()).st_size == 0:
                return None, None
            with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
                at, start = _last_record(data, _EVENT_START, RUN_START, 0, orjson.loads)
                if start is None:
                    return None, None
                end = _last_record(data, _EVENT_END, RUN_END, at, orjson.loads)[1]
    except (OSError, ValueError):
        return None, None
    return start, end


def _last_record(
    data: Any, pattern: bytes, event: str, after: int, loads: Any
) -> tuple[int, dict[str, Any] | None]:
    """Return (offset, record) of the last *event* record of *data* past offset *after*.

    The pattern may also match inside a user's value (`meta={"event": "run_end"}`): such a
    line is passed over.
    """
    end = len(data)
    while (at := data.rfind(pattern, after, end)) >= 0:
        first = data.rfind(b"\n", 0, at) + 1
        last = data.find(b"\n", at)
        try:
            record = loads(data[first : last if last >= 0 else len(data)])
        except ValueError:  # a torn last line
            record = None
        if isinstance(record, dict) and record.get("event") == event:
            return at, record
        end = first
    return -1, None


def artifacts_dir(log: Path) -> Path:
    """Return the folder of a run's side files: `<name>.artifacts` next to its log."""
    return log.with_suffix(ARTIFACTS_SUFFIX)


def media_dir(artifacts: Path, name: str) -> Path:
    """Return the folder of media *name*'s files: `<name>.artifacts/media/<name>`; a name's
    `/` makes sub-folders (`val/samples`)."""
    return artifacts.joinpath(MEDIA_DIR, *name.split("/"))


def copy_path(log: Path) -> Path:
    """Return the Parquet copy of a log's records: `<name>.parquet` next to `<name>.jsonl`."""
    return log.with_suffix(COPY_SUFFIX)


def notes_path(log: Path) -> Path:
    """Return the side file of a run's tags and notes: `<name>.notes.jsonl` next to its log
    (a rank file's run's: `<name>.rank1.jsonl` has the notes of `<name>`).
    """
    stem = log.name.removesuffix(LOG_SUFFIX)
    return log.with_name(run_and_rank(stem)[0] + NOTES_SUFFIX)


def is_log_name(name: str) -> bool:
    """Return whether a file named *name* in a folder of logs is a log: `*.jsonl`, no notes."""
    return name.endswith(LOG_SUFFIX) and not name.endswith(NOTES_SUFFIX)


def console_path(log: Path) -> Path:
    """Return a run's captured console: `<name>.console.log` next to `<name>.jsonl`."""
    return log.with_suffix(CONSOLE_SUFFIX)


def run_and_rank(stem: str) -> tuple[str, int | None]:
    """Return the run name and rank a log's file name without `.jsonl` stands for."""
    match = RANK_NAME.match(stem)
    return (stem, None) if match is None else (match["run"], int(match["rank"]))


def not_regular_reason(path: str | os.PathLike[str]) -> str | None:
    """Return what *path* is when it exists but is no regular file (a FIFO...), else None."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None  # missing or unreadable: opening it says so
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    kinds = {stat.S_ISFIFO: "a FIFO", stat.S_ISSOCK: "a socket", stat.S_ISCHR: "a device"}
    return next((name for test, name in kinds.items() if test(mode)), "a special file")


def open_regular(path: str | os.PathLike[str]) -> Any:
    """Open *path* for reading bytes, refusing anything but a regular file without blocking.

    Raises:
        OSError: as `open` does; `OSError(EINVAL)` naming the kind for a FIFO, socket or device.
    """
    # O_NONBLOCK: opening a FIFO with no writer would block; a regular file ignores the flag
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", os.fspath(path))
        if not stat.S_ISREG(mode):
            kind = not_regular_reason(path) or "not a regular file"
            raise OSError(errno.EINVAL, f"{kind}, not a regular file", os.fspath(path))
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def hash_file(path: str | os.PathLike[str], digest: Any) -> int:
    """Feed the bytes of regular file *path* to *digest*; return their count."""
    size = 0
    buffer = bytearray(_CHUNK)
    view = memoryview(buffer)
    with open_regular(path) as file:
        while count := file.readinto(buffer):
            digest.update(view[:count])
            size += count
    return size


def hash_path(path: Path) -> tuple[int, str, list[str]]:
    """Return (bytes, sha256 hex, files left out) of a file, or of a folder's regular files.

    A folder's sha256 is that of a `sha256sum`-style manifest, one "<hex>  <relative path>\\n"
    per regular file in sorted order (see docs/artifacts.md); FIFOs, sockets and devices in it
    are left out, and named in the third item.
    """
    if not path.is_dir():
        digest = hashlib.sha256()
        return hash_file(path, digest), digest.hexdigest(), []
    manifest = hashlib.sha256()
    total = 0
    left_out: list[str] = []
    for rel, file in _walk_files(path):
        if not file.is_file():
            left_out.append(rel)
            continue
        digest = hashlib.sha256()
        total += hash_file(file, digest)
        manifest.update(f"{digest.hexdigest()}  {rel}\n".encode("utf-8", "surrogateescape"))
    return total, manifest.hexdigest(), left_out


def _walk_files(folder: Path) -> list[tuple[str, Path]]:
    # Symlinks to files are followed (a Hugging Face snapshot is made of them); symlinked
    # folders are not, so a link cycle cannot loop.
    files = []
    for root, _dirs, names in os.walk(folder):
        for file_name in names:
            file = Path(root, file_name)
            files.append((file.relative_to(folder).as_posix(), file))
    return sorted(files)


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Return nested *config* as one level with dotted keys: ``{"optim.lr": 0.1}``."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, Mapping) and value:
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat
