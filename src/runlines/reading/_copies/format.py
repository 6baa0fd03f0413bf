"""The copy's format: its schema, its footer keys, and the check that a copy matches its log.

A copy is ``<name>.parquet`` beside its log (see `runlines._layout.copy_path`): one row group
table of the records of the log's first ``covers_bytes`` bytes, then its footer.

Columns:
    ``c<i>``        a field's values of one type (a field whose values have several types has
                    one column per type); which field each is, the footer's pieces say
    ``__line``      int64: the row's 0-based line in the log
    ``__patch``     large_string: the values Python read for the row (nested values,
                    non-finite floats, ints beyond 64 bits, whole lines pyarrow could not take),
                    as a JSON object; null where it has none
    ``__nulls``     list<string>: the fields the row's line holds as null
    ``__attempt``   int64: the row's attempt
    ``__superseded`` bool: whether a later attempt supersedes the row
    ``__piece``     int32: the group of `Meta.pieces` the row was read in

The rows are the records no later attempt supersedes, in line order, then the superseded ones:
the first rows of a column are then what load() gives pandas, without reordering them.

Footer keys (JSON values, in the Parquet footer's key-value metadata alone):
    ``runlines.copy``     the format (`COPY_FORMAT`) and what the copy covers (`COVERS`)
    ``runlines.pieces``   the groups of pieces (their storage columns, fields, event), the bad
                          lines
    ``runlines.summary``  the run's `RunSummary.state()` and the lines iter_events() skips
    ``runlines.digest``   ``file=<sha256 of the file, these 64 bytes as zeros>;meta=<sha256 of
                          the three values above>``: a copy damaged or rewritten by another tool
                          no longer matches it, and is not used

The JSONL stays the record of truth: a copy is used only while it matches the bytes it covers
(see `mismatch`), and is otherwise ignored with a warning. The footer is read by pyarrow; this
module imports it where it reads one, so that a reader without it reads the JSONL.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson

from runlines._layout import copy_path, open_regular
from runlines.errors import RunlinesWarning
from runlines.reading._files import LogFile
from runlines.reading._lines import LONG_INT

COPY_FORMAT: Final = 4  # bumped when the layout below changes: an older copy is ignored
# The Parquet key-value metadata: what the copy covers (and its format), what load() rebuilds
# the parsed log from, and the run summary, all runs() reads.
KEY: Final = b"runlines.copy"
PIECES_KEY: Final = b"runlines.pieces"
SUMMARY_KEY: Final = b"runlines.summary"
# The copy's own bytes, in the footer alone (not in ARROW:schema): the sha256 of the whole file
# with this value's file digest as zeros, and the sha256 of the three values above. A copy
# damaged or rewritten by another tool no longer matches it, and is not used.
DIGEST_KEY: Final = b"runlines.digest"
DIGEST_PLACEHOLDER: Final = b"0" * 64
COVERS: Final = ("covers_bytes", "covers_lines", "sha256", "sample_sha256", "log_size",
                  "log_mtime_ns")  # fmt: skip
CACHED: Final = 4096  # copies whose metadata one process keeps decoded
SAMPLE_BYTES: Final = 4 << 10  # hashed at each end of the covered bytes, for the quick check
HASH_CHUNK: Final = 4 << 20
LINE, PATCH, NULLS = "__line", "__patch", "__nulls"  # bookkeeping columns; fields are c<i>
# each row's attempt, whether it is superseded, and the group of pieces (of `Meta.pieces`) it
# was read in
ATTEMPT, SUPERSEDED, PIECE = "__attempt", "__superseded", "__piece"


@dataclass(frozen=True, slots=True)
class Meta:
    """What a copy covers, and how to rebuild the parsed log from its columns."""

    covers_bytes: int  # the copy holds the records of the log's bytes [0, covers_bytes)
    covers_lines: int  # the newlines in them: the first line after them is line covers_lines+1
    sha256: str  # of those bytes
    sample_sha256: str  # of their first and last SAMPLE_BYTES
    log_size: int  # the log's size and mtime when the copy was written
    log_mtime_ns: int
    pieces: list[dict[str, Any]]  # groups: columns [[field, storage column]], fields, event
    bad: list[list[Any]]  # [line, reason] of each line load() skips
    summary: dict[str, Any]  # RunSummary.state()
    summary_bad: list[int]  # the lines iter_events() skips (a BOM, which load() takes)

    def as_metadata(self) -> dict[bytes, bytes]:
        """Return the copy's key-value metadata: each part under its own key."""
        covers = {name: getattr(self, name) for name in COVERS}
        summary = {"summary": self.summary, "summary_bad": self.summary_bad}
        return {
            KEY: json.dumps({"format": COPY_FORMAT, **covers}).encode(),
            PIECES_KEY: json.dumps({"pieces": self.pieces, "bad": self.bad}).encode(),
            # allow_nan: a summary holds the NaN and infinities the log holds
            SUMMARY_KEY: json.dumps(summary, allow_nan=True).encode(),
        }


def meta_digest(values: dict[bytes, bytes]) -> str:
    """Return the sha256 of the copy's three metadata values, each after its length."""
    digest = hashlib.sha256()
    for key in (KEY, PIECES_KEY, SUMMARY_KEY):
        digest.update(b"%d:" % len(values[key]))
        digest.update(values[key])
    return digest.hexdigest()


def digest_value(file_digest: bytes, values: dict[bytes, bytes]) -> bytes:
    """Return the digest key's value: the file's digest first, at a fixed place in it."""
    return b"file=" + file_digest + b";meta=" + meta_digest(values).encode()


def file_digest_at(fd: int, size: int, value: bytes) -> int | None:
    """Return the offset in the file of the file digest in the footer, whose digest key holds
    *value* (as pyarrow reads it), or None without one."""
    if not value.startswith(b"file=") or len(value) < 5 + 64:
        return None
    length = int.from_bytes(os.pread(fd, 4, max(0, size - 8)), "little")
    footer_at = max(0, size - 8 - length)
    place = os.pread(fd, size - footer_at, footer_at).rfind(value)
    return None if place < 0 else footer_at + place + 5


def file_digest(fd: int, size: int, at: int) -> str:
    """Return the sha256 of open file *fd*'s bytes, the 64 from *at* taken as zeros."""
    digest = hashlib.sha256()
    start = 0
    for end, skip in ((at, True), (size, False)):
        while start < end:
            chunk = os.pread(fd, min(HASH_CHUNK, end - start), start)
            if not chunk:
                msg = "the copy is shorter than its footer says"
                raise OSError(msg)
            digest.update(chunk)
            start += len(chunk)
        if skip:
            digest.update(DIGEST_PLACEHOLDER)
            start += len(DIGEST_PLACEHOLDER)
    return digest.hexdigest()


def sample_hash(head: bytes, tail: bytes) -> str:
    digest = hashlib.sha256(head)
    digest.update(tail)
    return digest.hexdigest()


def checked_copy(
    log: LogFile, keys: tuple[bytes, ...], *, whole: bool, stacklevel: int = 5
) -> tuple[dict[bytes, Any], Path, int] | None:
    """Return the copy's metadata *keys* (decoded), its path and the log's size, when the copy
    matches the log; None when it has none, or warn and return None when it does not match.
    """
    path = copy_path(log.path)
    try:
        parts = copy_metadata(path, keys, whole=whole)
        if parts is None:
            return None
        reason, log_size = mismatch(log.path, parts[KEY])
    except (OSError, ValueError, KeyError, TypeError) as err:  # unreadable, half written
        reason, log_size = f"it cannot be read ({err})", 0
    except ImportError:
        return None  # no pyarrow: load() says so, and runs() reads the JSONL
    if reason is None and parts is not None:
        return parts, path, log_size
    msg = (
        f"{path} is not used: {reason}; reading {log.path.name} instead "
        f"(`runlines compact {log.path}` writes a fresh copy)"
    )
    warnings.warn(msg, RunlinesWarning, stacklevel=stacklevel)
    return None


# decoded metadata by copy: (path, size, mtime, ctime, inode) -> {key: value}; under
# VERIFIED, that the whole file matched its digest (hashed once per process and copy)
cache: dict[tuple[str, int, int, int, int], dict[bytes, Any]] = {}
VERIFIED: Final = b""
RAW: Final = (KEY, PIECES_KEY, SUMMARY_KEY, DIGEST_KEY)


def copy_metadata(path: Path, keys: tuple[bytes, ...], *, whole: bool) -> dict[bytes, Any] | None:
    """Return the copy's metadata *keys*, decoded, or None when *path* is no regular file.

    The metadata is checked against the digest in the footer; with *whole*, the whole file
    is as well (what the columns' readers need; runs() reads the metadata alone).

    Raises:
        ValueError: the file is no runlines copy of this format, a key is missing, or its
            bytes are not those it was written with.
        OSError: it cannot be read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        stamp = (str(path), info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)
        known = cache.get(stamp, {})
        wanted = [key for key in keys if key not in known]
        unverified = whole and VERIFIED not in known
        if wanted or unverified:
            raw = raw_values(fd)
            known = {**known, **decoded_parts(raw, wanted)}
            if unverified:
                verify_file(fd, info.st_size, raw[DIGEST_KEY])
                known = {**known, VERIFIED: True}
        if len(cache) >= CACHED and stamp not in cache:
            cache.pop(next(iter(cache)))
        cache[stamp] = known
    finally:
        os.close(fd)
    return {key: known[key] for key in keys}


def raw_values(fd: int) -> dict[bytes, bytes]:
    """Return the copy's metadata values as stored, after checking them against its digest."""
    raw = footer_values(fd)
    decoded_parts(raw, [])  # no copy, or one of another format, says so first
    if any(key not in raw for key in RAW):
        msg = "it has no digest of its bytes"
        raise ValueError(msg)
    if not raw[DIGEST_KEY].endswith(b";meta=" + meta_digest(raw).encode()):
        msg = "its metadata is not what it was written with (damaged, or edited)"
        raise ValueError(msg)
    return raw


def verify_file(fd: int, size: int, value: bytes) -> None:
    """Raise ValueError unless the copy's bytes hash to the digest its footer holds (*value*)."""
    at = file_digest_at(fd, size, value)
    if at is None or os.pread(fd, 64, at) != file_digest(fd, size, at).encode():
        msg = "its bytes are not those it was written with (damaged, or rewritten by a tool)"
        raise ValueError(msg)


def decoded_parts(raw: dict[bytes, bytes], keys: list[bytes]) -> dict[bytes, Any]:
    """Return *keys* of the metadata *raw*, decoded, after checking the copy's format."""
    if KEY not in raw:
        msg = "it is no runlines copy"
        raise ValueError(msg)
    covers = loads(raw[KEY])
    found = covers.get("format") if isinstance(covers, dict) else None
    if found != COPY_FORMAT:
        msg = f"it is of copy format {found!r}, and this runlines reads format {COPY_FORMAT}"
        raise ValueError(msg)
    return {key: covers if key == KEY else loads(raw[key]) for key in keys}


def loads(raw: bytes) -> Any:
    """Return the JSON value *raw*: by orjson, unless it holds NaN or an int beyond 64 bits."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:  # NaN and infinities, which json writes and reads
        return json.loads(raw)
    return json.loads(raw) if LONG_INT.search(raw) else value


def footer_values(fd: int) -> dict[bytes, bytes]:
    """Return the key-value metadata of the Parquet footer of open file *fd*, read by pyarrow.

    Raises:
        ImportError: pyarrow is not installed.
        ValueError: the file has no Parquet footer.
        OSError: it cannot be read.
    """
    # the one import of pyarrow a reader of the footer alone needs
    from pyarrow import ArrowException, PythonFile, parquet

    try:
        with PythonFile(os.fdopen(os.dup(fd), "rb")) as file:
            return dict(parquet.read_metadata(file).metadata or {})
    except ArrowException as err:  # not all of pyarrow's errors are ValueError or OSError
        msg = f"its footer is no Parquet footer ({err})"
        raise ValueError(msg) from err


# logs whose covered bytes were hashed whole and matched, by (device, inode, sha256 of the
# covered bytes): the size and mtime the log had then. A log is appended to, not rewritten:
# the same file seen again as it was, or longer, has its covered bytes checked by their two
# ends, as an unchanged log's are, not hashed whole on every read (a resumed run's log grows
# at every line); one rewritten in place keeps its size and changes its mtime, and is hashed
verified: dict[tuple[int, int, str], tuple[int, int]] = {}


def mismatch(log: Path, covers: dict[str, Any]) -> tuple[str | None, int]:
    """Return why the copy that *covers* says what it covers does not match the bytes of *log*
    now (None when it does), and the log's size.

    When the log's size and mtime are those recorded with the copy, the log is unchanged since
    (the test make and git use), and hashing the covered bytes' two ends guards against a
    rewrite that kept both. Otherwise (the log grew, or was copied or touched), all covered
    bytes are hashed again: one pass at the disk's speed, still far less than parsing them,
    and once per process while the file stays the one that was hashed (see `verified`).
    """
    covered = covers["covers_bytes"]
    fd = os.open(log, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO must not block
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return "the log is no regular file", 0
        if info.st_size < covered:
            return f"the log is shorter than the {covered} bytes it covers", info.st_size
        seen = (info.st_dev, info.st_ino, covers["sha256"])
        unchanged = (info.st_size, info.st_mtime_ns) == (covers["log_size"], covers["log_mtime_ns"])
        size, mtime = verified.get(seen, (info.st_size + 1, 0))
        if unchanged or info.st_size > size or (info.st_size, info.st_mtime_ns) == (size, mtime):
            head = os.pread(fd, min(SAMPLE_BYTES, covered), 0)
            start = max(0, covered - SAMPLE_BYTES)
            tail = os.pread(fd, covered - start, start)
            if sample_hash(head, tail) == covers["sample_sha256"]:
                return None, info.st_size
            verified.pop(seen, None)
            return "the log's bytes differ from those it was written from", info.st_size
        digest = hashlib.sha256()
        left = covered
        while left and (chunk := os.pread(fd, min(HASH_CHUNK, left), covered - left)):
            digest.update(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    if left or digest.hexdigest() != covers["sha256"]:
        return "the log's bytes differ from those it was written from", info.st_size
    if len(verified) >= CACHED:
        verified.pop(next(iter(verified)))
    verified[seen] = (info.st_size, info.st_mtime_ns)
    return None, info.st_size


DEPTH: Final = "depth"  # in orjson's message for a line nested deeper than it reads


@dataclass(frozen=True, slots=True)
class Copy:
    """A log's usable copy: where it is, what it covers, and where the JSONL after it starts."""

    log: LogFile
    path: Path
    meta: Meta
    log_size: int  # when the copy was checked: bytes past covers_bytes are the tail
    # field: its storage columns (one per value type), in the copy's order
    storage: dict[str, list[str]]
    # per field holding a value: the line (from 0) and place in it of its first one
    first_values: dict[str, tuple[int, int]]
    deep_lines: tuple[int, ...]  # lines the copy skipped for nesting too deep (from 1)

    @property
    def covers_bytes(self) -> int:
        """The copy holds the records of the log's bytes [0, covers_bytes): the tail follows."""
        return self.meta.covers_bytes

    @property
    def covers_lines(self) -> int:
        """The lines those bytes hold: the tail's first line is line covers_lines + 1."""
        return self.meta.covers_lines

    @property
    def has_tail(self) -> bool:
        """True when the log holds bytes after those the copy covers."""
        return self.log_size > self.covers_bytes


def usable_copy(log: LogFile, *, stacklevel: int) -> Copy | None:
    """Return *log*'s copy when it matches the log's bytes; warn (at *stacklevel*, 1 for the
    caller) when it does not, or when the file at the copy's path is no copy. None without a
    copy or without pyarrow.

    The one way to a copy: every reader (load, DuckDB, Spark, the dashboard) asks here, reads
    what it covers from it, and the log's bytes from `Copy.covers_bytes` on from the JSONL.
    """
    found = checked_copy(log, (KEY, PIECES_KEY, SUMMARY_KEY), whole=True, stacklevel=stacklevel + 2)
    if found is None:
        return None
    parts, path, log_size = found
    covers = {name: parts[KEY][name] for name in COVERS}
    meta = Meta(**covers, **parts[PIECES_KEY], **parts[SUMMARY_KEY])
    storage: dict[str, list[str]] = {}
    for piece in meta.pieces:
        for name, index in piece["columns"]:
            held = storage.setdefault(name, [])
            if f"c{index}" not in held:
                held.append(f"c{index}")
    deep = tuple(int(line) for line, reason in meta.bad if DEPTH in str(reason))
    return Copy(log, path, meta, log_size, storage, first_values(meta.pieces), deep)


def first_values(pieces: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """Return where the first value of each field of *pieces* is: its line and place in it."""
    first: dict[str, tuple[int, int]] = {}
    for piece in pieces:
        for name, (count, line, place) in piece["fields"].items():
            if count and (name not in first or (line, place) < first[name]):
                first[name] = (line, place)
    return first


def write_tail(copy: Copy, folder: Path) -> Path:
    """Write the log's bytes after those *copy* covers to a new file in *folder*; return it."""
    folder.mkdir(parents=True, exist_ok=True)
    tail = folder / f"{len(list(folder.iterdir()))}-{copy.log.path.name}"
    with open_regular(copy.log.path) as source, tail.open("xb") as target:
        source.seek(copy.covers_bytes)
        shutil.copyfileobj(source, target, length=1 << 20)
    return tail
