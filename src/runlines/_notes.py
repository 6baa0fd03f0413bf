"""A run's tags and notes: records appended to `<name>.notes.jsonl` next to its log.

The log belongs to its writer; tags and notes never touch it. Each call appends one record
(docs/format.md) in one `O_APPEND` write of at most `PIPE_BUF` bytes, under an exclusive
`flock` of the file, so that writers racing on one file (two `runlines tag` calls, a training
job's `run.tag()`) never interleave. Nothing
is rewritten: an untag is a later record. A reader takes every line that is a valid record and
passes over the others (a torn last line, a line of another program).
"""

from __future__ import annotations

import os
import re
import stat
import time
from pathlib import Path
from typing import Any, Final, NamedTuple

import orjson

from runlines._layout import notes_path
from runlines.errors import FieldError, ReadError

try:
    import fcntl
except ImportError:  # Windows: see _lock
    fcntl = None  # type: ignore[assignment]

__all__ = ["NOTE", "TAG", "UNTAG", "Notes", "note", "read_notes", "tag", "untag"]

TAG: Final = "tag"
UNTAG: Final = "untag"
NOTE: Final = "note"
# POSIX guarantees PIPE_BUF >= 512; Linux and macOS: 4096. One byte is kept for the newline
# that ends a torn last line first.
_MAX_LINE_BYTES: Final = 4096 - 1
_TAG_RE: Final = re.compile(r"[^\s,]{1,100}")


class Notes(NamedTuple):
    """What a run's notes file says: its tags now (in the order added), and its notes."""

    tags: list[str]
    notes: list[dict[str, Any]]  # {"ts": Unix seconds, "text": ...}, in the order written


_EMPTY: Final = Notes([], [])
_cache: dict[Path, tuple[tuple[int, int, int], Notes]] = {}


def tag(log: str | os.PathLike[str], *tags: str) -> None:
    """Tag the run of *log* (its `.jsonl` file) with *tags*; a tag it has already is kept once.

    Raises:
        FieldError: a tag that is empty, holds whitespace or a comma, or is over 100 characters.
        ReadError: *log* is no log file.
    """
    _append(log, {"op": TAG, "tags": _checked_tags(tags)})


def untag(log: str | os.PathLike[str], *tags: str) -> None:
    """Remove *tags* from the run of *log*: a later record, the earlier ones stay as written."""
    _append(log, {"op": UNTAG, "tags": _checked_tags(tags)})


def note(log: str | os.PathLike[str], text: str) -> None:
    """Add the note *text* to the run of *log*.

    Raises:
        FieldError: *text* is empty, or over about 4,000 bytes as JSON (one atomic append).
        ReadError: *log* is no log file.
    """
    if not isinstance(text, str) or not text.strip():
        msg = f"a note must be a non-empty str, got {text!r}"
        raise FieldError(msg)
    _append(log, {"op": NOTE, "text": text})


def read_notes(log: str | os.PathLike[str]) -> Notes:
    """Return the tags and notes of the run of *log*; none when it has no notes file.

    A line that is no valid record is passed over. The file is parsed again only when it
    changed since the last call.
    """
    path = notes_path(Path(log))
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return _EMPTY
    if not stat.S_ISREG(info.st_mode):
        return _EMPTY
    key = (info.st_ino, info.st_size, info.st_mtime_ns)
    cached = _cache.get(path)
    if cached is not None and cached[0] == key:
        return cached[1]
    try:
        with open(path, "rb") as file:  # a regular file, by the stat above
            data = file.read()
    except OSError:
        return _EMPTY
    found = _parse(data)
    _cache[path] = (key, found)
    return found


def _parse(data: bytes) -> Notes:
    tags: dict[str, None] = {}
    notes: list[dict[str, Any]] = []
    for line in data.split(b"\n"):
        try:
            record = orjson.loads(line) if line.strip() else None
        except orjson.JSONDecodeError:
            continue  # torn, or not ours: the other lines still count
        if not isinstance(record, dict):
            continue
        op, ts = record.get("op"), record.get("ts")
        if op in (TAG, UNTAG) and _valid_tags(record.get("tags")):
            for name in record["tags"]:
                if op == TAG:
                    tags.setdefault(name, None)
                else:
                    tags.pop(name, None)
        elif op == NOTE and isinstance(record.get("text"), str):
            when = ts if isinstance(ts, int | float) else None
            notes.append({"ts": when, "text": record["text"]})
    return Notes(list(tags), notes)


def _valid_tags(tags: Any) -> bool:
    return isinstance(tags, list) and all(isinstance(name, str) for name in tags)


def _checked_tags(tags: tuple[str, ...]) -> list[str]:
    if not tags:
        msg = "no tag given; pass one or more tags, e.g. tag(log, 'baseline')"
        raise FieldError(msg)
    for name in tags:
        if not isinstance(name, str) or not _TAG_RE.fullmatch(name):
            msg = (
                f"tag {name!r} cannot be used; a tag is 1 to 100 characters without whitespace "
                "or commas (e.g. 'baseline', 'lr-sweep')"
            )
            raise FieldError(msg)
    return list(dict.fromkeys(tags))


def _append(log: str | os.PathLike[str], fields: dict[str, Any]) -> None:
    """Append one record to the notes file of *log* in one O_APPEND write."""
    log = Path(log)
    if not log.is_file():
        msg = f"no such log: {log}; pass the .jsonl log of the run to tag or note"
        raise ReadError(msg, str(log))
    line = orjson.dumps({"ts": time.time(), **fields}) + b"\n"
    if len(line) > _MAX_LINE_BYTES:
        msg = (
            f"this record is {len(line)} bytes as JSON, over the {_MAX_LINE_BYTES} one atomic "
            "append allows; shorten the note (or save the text as a file and note its path)"
        )
        raise FieldError(msg)
    _write_line(notes_path(log), line)


def _write_line(path: Path, line: bytes) -> None:
    # O_RDWR: the last byte is read first; O_NONBLOCK: a FIFO named like the file must not block
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0), 0o666)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            msg = f"{path} is no regular file; move it away to tag or note this run"
            raise ReadError(msg, str(path))
        _lock(fd)  # the last byte and the write below, one appender at a time
        # A record torn by a full disk would swallow the next one: end it first.
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line
        written = os.write(fd, line)
        if written != len(line):
            msg = f"wrote {written} of {len(line)} bytes to {path}; is the disk full?"
            raise OSError(msg)
    finally:
        os.close(fd)  # releases the lock


def _lock(fd: int) -> None:
    """Hold an exclusive flock on *fd* until it is closed; where there is none, the one
    O_APPEND write still keeps records whole.
    """
    if fcntl is None:  # Windows
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:  # a filesystem without locks (ENOLCK): the one write still holds
        return
