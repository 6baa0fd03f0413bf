"""A run's log file: its lock, the name a launch writes, and the clean-up after a failed start.

`open_log` refuses a log that an open Run of this process writes, checks `resume=`, takes the
run lock (with `resume="auto"`, first the name: a rerun of a name that ended ok writes the next
free one, see docs/run.md), and opens the log. The `LogFile` it returns holds the lock until
`release`. The file names are `_layout`'s; the log's last attempt is read through it too, and
`config_change` says how a launch that continues the run changed its config.

Imported when the first run opens (see `run._load`): filelock and orjson come with it.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any, Final

import filelock
import orjson

from runlines import _encoding, _layout, _lifecycle
from runlines._warnings import say
from runlines.errors import RunLockedError
from runlines.sinks import FileSink

if TYPE_CHECKING:
    from pathlib import Path

    from runlines._context import Distributed
    from runlines.redaction import Redactor

__all__ = ["LogFile", "config_change", "open_log"]

_LOCK_WAIT_S: Final = 0.5  # rides over a reader's momentary probe of the lock
_NAME_WAIT_S: Final = 30.0  # another launch holds the name lock only while it chooses
_RANK_WAIT_S: Final = 30.0  # a rank R > 0 waits this long for its rank 0 to open the run
_RANK_POLL_S: Final = 0.02
_END_TAIL_BYTES: Final = 1 << 16  # run_end with its traceback (20,000 characters) fits


class LogFile:
    """The log file a run writes, held under its run lock until `release()`.

    *name* and *path* are those of the run this launch writes (resume="auto" may have chosen
    another name than the one asked for, and *new_because* then says why), *sink* writes the
    log.
    """

    def __init__(
        self, name: str, path: Path, sink: FileSink, lock: filelock.BaseFileLock, new_because: str
    ) -> None:
        self.name = name
        self.path = path
        self.sink = sink
        self.new_because = new_because
        self._lock = lock

    def release(self, *, failed_start: bool = False) -> None:
        """Release the lock, once the sink has closed; after a failed start, first remove the
        log if this start created it and it is still empty.

        Never the lock file: another process may have it open, waiting for the lock, and would
        then hold a file that a third one, finding no file there, can create and lock too.
        """
        if failed_start:
            self._remove_phantom()  # after the sink's close: a closing FileSink re-creates a log
        self._lock.release()

    def ends_with_run_end(self, run_id: str) -> bool:
        """Return whether the log's last whole line is the run_end of run *run_id*."""
        try:
            with open(self.path, "rb") as file:
                size = os.fstat(file.fileno()).st_size
                tail = os.pread(file.fileno(), _END_TAIL_BYTES, max(0, size - _END_TAIL_BYTES))
            record = orjson.loads(tail[: tail.rindex(b"\n")].rpartition(b"\n")[2])
        except (OSError, ValueError):
            return False
        return (
            isinstance(record, dict)
            and record.get("event") == "run_end"
            and (record.get("id") == run_id)
        )

    def _remove_phantom(self) -> None:
        if not self.sink.created:
            return
        try:
            if self.path.stat().st_size == 0:
                self.path.unlink()
        except OSError:
            pass  # gone already, or not ours to remove


def open_log(
    directory: Path, name: str, dist: Distributed | None, *, resume: str, fsync: bool
) -> LogFile:
    """Take the run lock of run *name* in *directory*, then open its log for appending.

    The checks come first and only read: a run they refuse leaves nothing on disk. After them
    the lock file stays, whatever happens.

    Raises:
        RunLockedError: an open Run of this process, or another process, writes the log.
        FileExistsError, FileNotFoundError: the log's existence goes against *resume*.
        OSError: the folder, the lock or the log cannot be made; the message says which.
    """
    rank = None if dist is None else dist.rank
    path = _layout.log_path(directory, name, rank)
    _check_not_open_here(path, name, directory)
    _check_resume(resume, name, directory, path)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        msg = (
            f"cannot create the run directory {str(directory)!r} ({err}); pass a writable directory"
        )
        raise OSError(err.errno, msg) from err
    new_because = ""
    if resume == "auto":
        name, lock, new_because = _claim_name(directory, name, dist)
        path = _layout.log_path(directory, name, rank)
    else:
        lock = _acquire_lock(directory, name, path)
    try:
        # Again under the lock: the log may have appeared while this call waited for it.
        _check_resume(resume, name, directory, path)
        sink = _open_sink(path, fsync)
    except BaseException:
        lock.release()
        raise
    return LogFile(name, path, sink, lock, new_because)


def _check_resume(resume: Any, name: str, directory: Path, path: Path) -> None:
    """Refuse an existing log with resume="never", a missing one with resume="must"."""
    if resume not in ("auto", "allow", "never", "must"):
        msg = f"resume must be 'auto', 'allow', 'never' or 'must', got {resume!r}"
        raise ValueError(msg)
    try:
        exists = path.stat().st_size > 0
    except OSError:
        exists = False
    where = f"run {name!r} in {str(directory)!r}"
    if resume == "never" and exists:
        msg = (
            f"{where} exists already ({path}) and resume='never'; give this run another name, "
            "or pass resume='auto' to continue it, or start the next free name after an ok end"
        )
        raise FileExistsError(msg)
    if resume == "must" and not exists:
        msg = (
            f"{where} has no log to continue ({path} is missing) and resume='must'; check the "
            "name and directory, or pass resume='auto' to start it"
        )
        raise FileNotFoundError(msg)


def _check_not_open_here(path: Path, name: str, directory: Path) -> None:
    """Refuse a run that an open Run of this process writes (a notebook cell run twice)."""
    for earlier in _lifecycle.open_runs():
        open_path = getattr(earlier, "path", None)
        if open_path is not None and os.path.abspath(open_path) == os.path.abspath(path):
            msg = (
                f"run {name!r} in {str(directory)!r} is already open in this "
                f"process as {earlier!r}; call close() on that Run (or use 'with Run(...)') "
                "before opening it again"
            )
            raise RunLockedError(msg)


def _open_sink(path: Path, fsync: bool) -> FileSink:
    try:
        return FileSink(path, fsync=fsync)
    except OSError as err:
        msg = (
            f"cannot open the log file {str(path)!r} for writing ({err}); pass a writable directory"
        )
        raise OSError(err.errno, msg) from err


def _acquire_lock(directory: Path, name: str, path: Path) -> filelock.BaseFileLock:
    """Return the run lock of the log at *path*, taken; refuse when a live process holds it."""
    lock = filelock.FileLock(_layout.lock_path(path), timeout=_LOCK_WAIT_S)
    if not _take(lock, path):
        holder = _layout.last_attempt(path)[0] or {}
        who = f"pid {holder.get('pid', '?')} on host {holder.get('host', '?')}"
        msg = (
            f"run {name!r} in {str(directory)!r} is already being written by {who}; "
            "wait for that process to end, or give this run another name"
        )
        raise RunLockedError(msg)
    return lock


def _take(lock: filelock.BaseFileLock, where: Path) -> bool:
    """Take *lock*; return False when another process holds it past the lock's timeout.

    Raises:
        OSError: the lock file cannot be made; the message names *where* (a log or a folder).
    """
    try:
        lock.acquire()
    except filelock.Timeout:
        return False
    except OSError as err:
        msg = f"cannot lock {str(where)!r} ({err}); pass a writable directory"
        raise OSError(err.errno, msg) from err
    return True


# -- resume="auto": a rerun is a new run, a restart continues (docs/run.md) ----------------------


def _claim_name(
    directory: Path, name: str, dist: Distributed | None
) -> tuple[str, filelock.BaseFileLock, str]:
    """Return (the run this launch of *name* writes, its run lock, taken; why not the run
    before it, or "").

    Rank 0 (or a process alone) chooses under the name lock, so that two launches never
    take one name; a rank R > 0 joins the run its launch's rank 0 writes.
    """
    rank = None if dist is None else dist.rank
    if rank:
        chosen = _rank_zero_run(directory, name, dist)
        if chosen is not None:
            return (
                chosen,
                _acquire_lock(directory, chosen, _layout.log_path(directory, chosen, rank)),
                "",
            )
    path = _layout.log_path(directory, name, rank)
    lock = _try_lock(path)  # the usual case: a first run, or a restart of the name
    if lock is not None:
        start, end = _layout.last_attempt(path)
        if start is None:
            return name, lock, ""
        newer = _layout.log_path(directory, _layout.rerun_name(name, 2), rank)
        if (end is None or end.get("status") != "ok") and not _has_records(newer):
            return name, lock, ""
        lock.release()  # a rerun: the name lock decides which name it takes
    naming = filelock.FileLock(_layout.name_lock_path(directory, name), timeout=_NAME_WAIT_S)
    if not _take(naming, directory):
        msg = (
            f"another launch of run {name!r} in {str(directory)!r} has been "
            f"choosing its name for {_NAME_WAIT_S:g} s; try again, or give this run "
            "another name"
        )
        raise RunLockedError(msg)
    try:
        return _choose_run(directory, name, rank)
    finally:
        naming.release()


def _choose_run(
    directory: Path, name: str, rank: int | None
) -> tuple[str, filelock.BaseFileLock, str]:
    """Return (the run a launch of *name* writes, its lock, held; why not the run before).

    Called under the name lock. The runs launched as *name* are `name`, `name-2`, ...: the
    newest one is continued when its last attempt did not end ok and nobody writes it; else
    the launch takes the first free name after it. Only this function, under the name lock,
    takes a name past *name*; *name* itself is also taken by `_claim_name` holding its run
    lock, which this function must hold too to take it.
    """
    number, why = 1, ""
    while True:
        candidate = _layout.rerun_name(name, number)
        path = _layout.log_path(directory, candidate, rank)
        start, end = _layout.last_attempt(path)
        newer = _layout.log_path(directory, _layout.rerun_name(name, number + 1), rank)
        if start is not None and end is not None and end.get("status") == "ok":
            why = f"{candidate!r} ended ok"
        elif start is not None and _has_records(newer):
            why = f"{candidate!r} was followed by a newer run"
        else:  # a free name, or the newest run, which did not end ok: continued
            lock = _try_lock(path)
            if lock is not None:
                return candidate, lock, why
            why = f"{candidate!r} is being written by another process"
        number += 1


def _rank_zero_run(directory: Path, name: str, dist: Distributed | None) -> str | None:
    """Return the run that rank 0 of this launch writes, once it has opened it; None if it
    has not within _RANK_WAIT_S (the rank then chooses from its own files).

    Rank 0's run is the newest of `name`, `name-2`, ... whose rank 0 log a live process holds,
    with an attempt of this world size that has not ended.
    """
    if not _has_records(_layout.log_path(directory, name)) and not _has_records(
        _layout.log_path(directory, name, None if dist is None else dist.rank)
    ):
        return name  # the first launch of the name
    world_size = None if dist is None else dist.world_size
    # polls counted, not a clock read: a test's frozen clock must not make it wait forever
    polls = int(_RANK_WAIT_S / _RANK_POLL_S)
    wait = threading.Event()
    while True:
        found = None
        number = 1
        while True:
            candidate = _layout.rerun_name(name, number)
            path = _layout.log_path(directory, candidate)
            if not _has_records(path):
                break
            start, end = _layout.last_attempt(path)
            if (
                start is not None
                and end is None
                and start.get("world_size") == world_size
                and _layout.lock_held(path)
            ):
                found = candidate
            number += 1
        if found is not None:
            return found
        polls -= 1
        if polls < 0:
            say(
                f"rank 0 of run {name!r} in {str(directory)!r} did not open it within "
                f"{_RANK_WAIT_S:g} s; this rank chooses from its own logs"
            )
            return None
        wait.wait(_RANK_POLL_S)


def _has_records(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except OSError:
        return False


def _try_lock(path: Path) -> filelock.BaseFileLock | None:
    """Return the run lock of the log at *path*, taken, or None when a live process holds it."""
    lock = filelock.FileLock(_layout.lock_path(path), timeout=_LOCK_WAIT_S)
    return lock if _take(lock, path) else None


_CHANGE_CHARS: Final = 160  # the stderr line names this much of the config's change


def config_change(
    previous: dict[str, Any] | None,
    given: object,
    config: dict[str, Any] | None,
    redactor: Redactor | None,
) -> str:
    """Return how this attempt's config differs from the previous attempt's, for the stderr
    line: "; config: lr 0.001 -> 0.01, +warmup, -dropout", shortened."""
    if given is None:
        return "; no config= given, the run's config is kept" if config else ""
    before = _encoding.restore_nonfinite(dict(previous)).get("config") if previous else None
    old = _layout.flatten(before if isinstance(before, dict) else {})
    try:  # compared as the log holds them: JSON values, secrets redacted
        line = _encoding.encode_line_safe({"config": config or {}}, None)
        after = _encoding.restore_nonfinite(orjson.loads(line))["config"]
        new = _layout.flatten(after if redactor is None else redactor.redact(after))  # type: ignore[arg-type]
    except (TypeError, ValueError, KeyError):
        return ""
    parts = [f"+{key}" for key in new if key not in old]
    parts += [f"-{key}" for key in old if key not in new]
    parts += [
        f"{key} {_short(old[key])} -> {_short(new[key])}"
        for key in new
        if key in old and not _same(old[key], new[key])
    ]
    if not parts:
        return "; config unchanged"
    text = ", ".join(parts)
    if len(text) > _CHANGE_CHARS:
        shown = text[:_CHANGE_CHARS].rsplit(", ", 1)[0]
        text = f"{shown}, ... ({len(parts) - shown.count(', ') - 1} more)"
    return f"; config: {text}"


def _same(old: object, new: object) -> bool:
    if isinstance(old, float) and isinstance(new, float) and old != old and new != new:
        return True  # NaN both times
    return type(old) is type(new) and old == new


def _short(value: object) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 24 else text[:21] + "..."
