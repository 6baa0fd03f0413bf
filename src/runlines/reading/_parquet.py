"""The Parquet copy of a log: `<name>.parquet` beside it, what load() and runs() read first.

The copy holds what the pyarrow engine made of the log's first bytes (its pieces, the values
Python read, the bad lines) and the run's `RunSummary`, so that readers take those bytes'
records without parsing them and parse only the JSONL appended after them. Its rows are the
records no later attempt supersedes, in line order, then the superseded ones: the first rows
of a column are then what load() gives pandas, without reordering or copying them.

The JSONL stays the record of truth: a copy is used only while it matches the bytes it covers
(see `_mismatch`), and is otherwise ignored with a warning.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import warnings
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import orjson

from runlines._layout import copy_path, open_regular
from runlines.errors import RunlinesWarning
from runlines.reading._arrow import (
    _attempts,
    _Columns,
    _FileReader,
    _ParsedLog,
    _Piece,
    checked,
)
from runlines.reading._files import LogFile, find_logs, is_locked, log_file
from runlines.reading._lines import LONG_INT, decode_line, skipped_lines_message
from runlines.reading._rules import Errors

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from runlines.reading._summary import RunSummary

__all__ = ["COPY_FORMAT", "compact", "copy_summary", "read_log", "write_copy"]

COPY_FORMAT: Final = 4  # bumped when the layout below changes: an older copy is ignored
# The Parquet key-value metadata: what the copy covers (and its format), what load() rebuilds
# the parsed log from, and the run summary, all runs() reads.
_KEY: Final = b"runlines.copy"
_PIECES_KEY: Final = b"runlines.pieces"
_SUMMARY_KEY: Final = b"runlines.summary"
# The copy's own bytes, in the footer alone (not in ARROW:schema): the sha256 of the whole file
# with this value's file digest as zeros, and the sha256 of the three values above. A copy
# damaged or rewritten by another tool no longer matches it, and is not used.
_DIGEST_KEY: Final = b"runlines.digest"
_DIGEST_PLACEHOLDER: Final = b"0" * 64
_COVERS: Final = ("covers_bytes", "covers_lines", "sha256", "sample_sha256", "log_size",
                  "log_mtime_ns")  # fmt: skip
_FOOTER_READ: Final = 16 << 10  # the end of a copy read at once: the footer of a small run
_CACHED: Final = 4096  # copies whose metadata one process keeps decoded
_SAMPLE_BYTES: Final = 4 << 10  # hashed at each end of the covered bytes, for the quick check
_HASH_CHUNK: Final = 4 << 20
_MAX_SLICES: Final = 64  # a table reordered in more runs than this is copied by take()
_LINE, _PATCH, _NULLS = "__line", "__patch", "__nulls"  # bookkeeping columns; fields are c<i>
# each row's attempt, whether it is superseded, and the group of pieces (of `_Meta.pieces`) it
# was read in
_ATTEMPT, _SUPERSEDED, _PIECE = "__attempt", "__superseded", "__piece"


@dataclass(frozen=True, slots=True)
class _Meta:
    """What a copy covers, and how to rebuild the parsed log from its columns."""

    covers_bytes: int  # the copy holds the records of the log's bytes [0, covers_bytes)
    covers_lines: int  # the newlines in them: the first line after them is line covers_lines+1
    sha256: str  # of those bytes
    sample_sha256: str  # of their first and last _SAMPLE_BYTES
    log_size: int  # the log's size and mtime when the copy was written
    log_mtime_ns: int
    pieces: list[dict[str, Any]]  # groups: columns [[field, storage column]], fields, event
    bad: list[list[Any]]  # [line, reason] of each line load() skips
    summary: dict[str, Any]  # RunSummary.state()
    summary_bad: list[int]  # the lines iter_events() skips (a BOM, which load() takes)

    def as_metadata(self) -> dict[bytes, bytes]:
        """Return the copy's key-value metadata: each part under its own key."""
        covers = {name: getattr(self, name) for name in _COVERS}
        summary = {"summary": self.summary, "summary_bad": self.summary_bad}
        return {
            _KEY: json.dumps({"format": COPY_FORMAT, **covers}).encode(),
            _PIECES_KEY: json.dumps({"pieces": self.pieces, "bad": self.bad}).encode(),
            # allow_nan: a summary holds the NaN and infinities the log holds
            _SUMMARY_KEY: json.dumps(summary, allow_nan=True).encode(),
        }


# --- writing ---------------------------------------------------------------------------------


def write_copy(path: str | os.PathLike[str]) -> Path | None:
    """Write the Parquet copy of log *path*'s complete lines; return it, or None for no lines.

    Written to a temporary file first and renamed over the copy: a reader never sees half a
    copy, and a copy is never newer than the bytes it records.

    Raises:
        ReadError: the log cannot be read.
        ImportError: pyarrow is not installed.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from runlines.reading._buffers import from_numpy

    # the summary's modules are imported where a copy is written: `load` never needs them
    from runlines.reading._summary_columns import declines, line_reader, summary_state

    log = log_file(path)
    info, data = _complete_lines(log.path)
    if not len(data):
        return None
    # hashed before parsing: the parser overwrites the lines it hands to Python
    covers_bytes, sha256 = len(data), hashlib.sha256(data).hexdigest()  # type: ignore[arg-type]
    sample = _sample_hash(bytes(data[:_SAMPLE_BYTES]), bytes(data[-_SAMPLE_BYTES:]))
    python_pass = declines(data)
    reader = _FileReader(log, data, None, find_nulls=True)
    parsed = reader.read()
    columns = _Columns([parsed])
    state = None
    if not python_pass:
        read_line = line_reader(log.path, reader.main.starts, reader.main.ends)
        try:
            state = summary_state(parsed, columns, read_line)
        except (OSError, ValueError, KeyError):  # the log changed under us: read it in Python
            state = None
        finally:
            read_line.close()
    summary_bad = [line for line, _ in parsed.bad]
    if state is None:
        state, summary_bad = _python_summary(log.path, covers_bytes)
    table, pieces, group_of = _table(pa, parsed.pieces)
    # the records no later attempt supersedes, in line order, then the superseded ones: the
    # columns' first rows are then load()'s columns as they are (see `_arrow._in_order`)
    positions = columns.full.positions
    where = np.concatenate(positions) if positions else np.zeros(0, np.int64)
    attempt, superseded = _attempts(columns, [parsed])
    by_line = np.empty(len(where), dtype=np.int64)  # each record's table row, in line order
    by_line[where] = np.arange(len(where))
    first = np.argsort(superseded, kind="stable")  # records (in line order), kept ones first
    order = by_line[first]
    sizes = [piece.table.num_rows for piece in parsed.pieces]
    piece_of = np.repeat(np.asarray(group_of, dtype=np.int32), sizes)[order]
    table = _reordered(pa, table, order)
    table = table.append_column(_ATTEMPT, from_numpy(attempt[first], pa.int64()))
    table = table.append_column(_SUPERSEDED, from_numpy(superseded[first], pa.bool_()))
    table = table.append_column(_PIECE, from_numpy(piece_of, pa.int32()))
    meta = _Meta(
        covers_bytes=covers_bytes,
        covers_lines=len(reader.main.starts),
        sha256=sha256,
        sample_sha256=sample,
        log_size=info.st_size,
        log_mtime_ns=info.st_mtime_ns,
        pieces=pieces,
        bad=[list(item) for item in parsed.bad],
        summary=state,
        summary_bad=summary_bad,
    )
    target = copy_path(log.path)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    metadata = meta.as_metadata()
    try:
        # the metadata in the footer alone: as the schema's, pyarrow would store it twice
        with pq.ParquetWriter(temporary, table.schema, **_encodings(pa, table.schema)) as writer:
            writer.write_table(table)
            digest = _digest_value(_DIGEST_PLACEHOLDER, metadata)
            writer.add_key_value_metadata({**metadata, _DIGEST_KEY: digest})
        _seal(temporary)
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)
    return target


def _reordered(pa: Any, table: Any, order: npt.NDArray[np.int64]) -> Any:
    """Return *table*'s rows in *order*: as slices where the order runs in steps of one.

    The rows of a log's main events are in line order already, and a few others (run_start,
    run_end) go between them: a handful of runs of rows, each a slice of the table (no copy),
    where `take` would copy every column.
    """
    import numpy as np

    from runlines.reading._buffers import from_numpy

    if not len(order):
        return table
    cuts = np.flatnonzero(np.diff(order) != 1) + 1
    if len(cuts) > _MAX_SLICES:
        return table.take(from_numpy(order, pa.int64()))
    starts = np.concatenate(([0], cuts))
    ends = np.concatenate((cuts, [len(order)]))
    parts = [table.slice(int(order[a]), int(b - a)) for a, b in zip(starts, ends, strict=True)]
    return pa.concat_tables(parts) if len(parts) > 1 else parts[0]


def _encodings(pa: Any, schema: Any) -> dict[str, Any]:
    """Return the writer's options for *schema*: each column in the encoding that suits it.

    Ints (steps, line numbers, attempts) are delta-encoded, floats split by byte, so that zstd
    finds the bytes that repeat; strings and bools keep Parquet's dictionary and run lengths.
    """
    encoding: dict[str, str] = {}
    for field in schema:
        if pa.types.is_integer(field.type):
            encoding[field.name] = "DELTA_BINARY_PACKED"
        elif pa.types.is_floating(field.type):
            encoding[field.name] = "BYTE_STREAM_SPLIT"
    dictionary = [name for name in schema.names if name not in encoding]
    return {
        "compression": "zstd",
        "use_dictionary": dictionary,
        "column_encoding": encoding,
    }


def compact(*sources: str | os.PathLike[str]) -> list[Path]:
    """Write the Parquet copy of every log of *sources*; return the copies written."""
    return [copy for log in find_logs(*sources) if (copy := write_copy(log.path)) is not None]


def _complete_lines(path: Path) -> tuple[os.stat_result, npt.NDArray[np.uint8]]:
    """Return the log's stat and its bytes up to the end of its last complete line."""
    import numpy as np

    with open_regular(path) as stream:
        info = os.fstat(stream.fileno())
        data = np.empty(info.st_size, dtype=np.uint8)
        count = stream.readinto(memoryview(data))  # type: ignore[arg-type]
    end = count
    while end > 0:
        start = max(0, end - _HASH_CHUNK)
        found = np.flatnonzero(data[start:end] == 10)
        if len(found):
            return info, data[: start + int(found[-1]) + 1]
        end = start
    return info, data[:0]


def _python_summary(path: Path, size: int) -> tuple[dict[str, Any], list[int]]:
    """Return the `RunSummary` state of the log's first *size* bytes, read as `iter_events`
    reads them, and the lines it skips (the copy records them, and runs() warns about them).
    """
    from runlines.reading._summary import RunSummary

    summary = RunSummary(path)
    bad: list[int] = []
    with open_regular(path) as stream:
        for number, raw in enumerate(io.BytesIO(stream.read(size)), start=1):
            if not raw.strip():
                continue
            try:
                record = decode_line(raw)
            except ValueError:
                bad.append(number)
                continue
            summary.add(record)
    return summary.state(), bad


def _table(pa: Any, pieces: list[_Piece]) -> tuple[Any, list[dict[str, Any]], list[int]]:
    """Return the pieces as one table (a storage column per field and type), the map of their
    groups, and each piece's group.

    Each piece's rows follow the ones before; a storage column is null in the rows of pieces
    without it. Columns whose values all come from Python (nested, null) are left out. The
    pieces of one event (or of mixed events) form one group: what a reader of the copy asks of
    a piece (its event, its fields' storage columns, counts and first places) is the same of
    its group, and the map then grows with the log's events and fields, not with its size.
    """
    from runlines.reading._arrow import _arrow_kind

    storage: dict[tuple[str, str], int] = {}
    types: list[Any] = []
    groups: dict[str | None, int] = {}
    described: list[dict[str, Any]] = []
    group_of: list[int] = []
    mapped: list[list[list[Any]]] = []  # each piece's columns, [[field, storage column]]
    for piece in pieces:
        columns = []
        for name, column in zip(piece.table.column_names, piece.table.columns, strict=True):
            if _arrow_kind(column.type) is None:
                continue
            # strings as large_string: what load() gives pandas, read without a cast
            kind = pa.large_string() if pa.types.is_string(column.type) else column.type
            key = (name, str(kind))
            if key not in storage:
                storage[key] = len(types)
                types.append(kind)
            columns.append([name, storage[key]])
        mapped.append(columns)
        number = groups.setdefault(piece.event, len(described))
        if number == len(described):
            described.append({"columns": [], "fields": {}, "event": piece.event})
        group_of.append(number)
        about = described[number]
        about["columns"].extend(pair for pair in columns if pair not in about["columns"])
        for name, (count, (line, place)) in piece.fields.items():
            total, *first = about["fields"].get(name, [0, line, place])
            if count and (not total or [line, place] < first):
                first = [line, place]  # the first value's place, over the pieces holding one
            about["fields"][name] = [total + count, *first]
    arrays: list[list[Any]] = [[] for _ in types]
    for piece, columns in zip(pieces, mapped, strict=True):
        mine = {index: piece.table.column(name) for name, index in columns}
        for index, kind in enumerate(types):
            column = mine.get(index)
            arrays[index].extend(
                [pa.nulls(piece.table.num_rows, kind)]
                if column is None
                else column.cast(kind).chunks
            )
    names = [f"c{i}" for i in range(len(types))]
    columns = [pa.chunked_array(chunks, kind) for chunks, kind in zip(arrays, types, strict=True)]
    extra = _bookkeeping(pa, pieces)
    table = pa.table([*columns, *extra.values()], names=[*names, *extra])
    return table, described, group_of


def _bookkeeping(pa: Any, pieces: list[_Piece]) -> dict[str, Any]:
    """Return each row's log line, its Python values (JSON) and the fields it holds as null."""
    import numpy as np

    from runlines.reading._buffers import from_numpy, sparse_lists, sparse_strings

    lines = np.concatenate([p.lines for p in pieces]) if pieces else np.zeros(0, np.int64)
    patched: list[int] = []  # the rows with Python values, and those values as JSON
    patches: list[str] = []
    nulls: dict[int, list[str]] = {}  # row: the fields it holds as null
    offset = 0
    for piece in pieces:
        patched.extend(offset + row for row in piece.rows)
        # json, not orjson: it keeps ints beyond 64 bits, NaN and infinities exactly
        patches.extend(json.dumps(record, allow_nan=True) for record in piece.records)
        for name, rows in piece.nulls.items():
            for row in rows.tolist():
                nulls.setdefault(offset + int(row), []).append(name)
        offset += piece.table.num_rows
    held = sorted(nulls)
    return {
        _LINE: from_numpy(lines, pa.int64()),
        _PATCH: sparse_strings(len(lines), patched, patches, pa.large_string()),
        _NULLS: sparse_lists(len(lines), held, [nulls[row] for row in held]),
    }


def _meta_digest(values: dict[bytes, bytes]) -> str:
    """Return the sha256 of the copy's three metadata values, each after its length."""
    digest = hashlib.sha256()
    for key in (_KEY, _PIECES_KEY, _SUMMARY_KEY):
        digest.update(b"%d:" % len(values[key]))
        digest.update(values[key])
    return digest.hexdigest()


def _digest_value(file_digest: bytes, values: dict[bytes, bytes]) -> bytes:
    """Return the digest key's value: the file's digest first, at a fixed place in it."""
    return b"file=" + file_digest + b";meta=" + _meta_digest(values).encode()


def _seal(path: Path) -> None:
    """Write the sha256 of the copy at *path* (its file digest as zeros) over the zeros."""
    fd = os.open(path, os.O_RDWR)
    try:
        size = os.fstat(fd).st_size
        at = _file_digest_at(fd, size)
        if at is None:
            msg = f"{path}: the digest pyarrow was given is not in its footer"
            raise ValueError(msg)
        os.pwrite(fd, _file_digest(fd, size, at).encode(), at)
    finally:
        os.close(fd)


def _file_digest_at(fd: int, size: int) -> int | None:
    """Return the offset in the file of the file digest in the footer, or None without one."""
    found = _footer_values(fd, size, [_DIGEST_KEY])
    if found is None:  # not where runlines puts it: find the value pyarrow reads
        value = _pyarrow_metadata(fd).get(_DIGEST_KEY, b"")
        length = int.from_bytes(os.pread(fd, 4, size - 8), "little")
        footer_at = max(0, size - 8 - length)
        place = os.pread(fd, size - footer_at, footer_at).rfind(value) if value else -1
        found = {_DIGEST_KEY: (value, footer_at + place)} if place >= 0 else {}
    if _DIGEST_KEY not in found:
        return None
    value, at = found[_DIGEST_KEY]
    if not value.startswith(b"file=") or len(value) < 5 + 64:
        return None
    return at + 5


def _file_digest(fd: int, size: int, at: int) -> str:
    """Return the sha256 of open file *fd*'s bytes, the 64 from *at* taken as zeros."""
    digest = hashlib.sha256()
    start = 0
    for end, skip in ((at, True), (size, False)):
        while start < end:
            chunk = os.pread(fd, min(_HASH_CHUNK, end - start), start)
            if not chunk:
                msg = "the copy is shorter than its footer says"
                raise OSError(msg)
            digest.update(chunk)
            start += len(chunk)
        if skip:
            digest.update(_DIGEST_PLACEHOLDER)
            start += len(_DIGEST_PLACEHOLDER)
    return digest.hexdigest()


def _sample_hash(head: bytes, tail: bytes) -> str:
    digest = hashlib.sha256(head)
    digest.update(tail)
    return digest.hexdigest()


# --- reading ---------------------------------------------------------------------------------


def read_log(log: LogFile, errors: Errors, events: Collection[str] | None = None) -> _ParsedLog:
    """Parse one log as load() does, from its copy and the JSONL after it when it has one."""
    from runlines.reading._arrow import _read_bytes

    found = _usable_copy(log)
    parsed = None if found is None else _copy_or_none(log, *found, events)
    if parsed is None:
        parsed = _FileReader(log, _read_bytes(log.path), events).read()
    elif found is not None:
        meta = found[0]
        tail = _tail_bytes(log.path, meta.covers_bytes)
        if len(tail):
            parsed.attempts = parsed.late = None  # a later attempt may supersede records
            parsed.in_order = None  # and the copy's records are no longer first in the output
            _append(parsed, _FileReader(log, tail, events).read(), meta.covers_lines)
    return checked(parsed, errors, stacklevel=5)


def _copy_or_none(
    log: LogFile, meta: _Meta, path: Path, events: Collection[str] | None
) -> _ParsedLog | None:
    """Return the parsed log the copy holds; warn and return None when its data is damaged."""
    import pyarrow as pa

    try:
        return _from_copy(log, meta, path, events)
    except (pa.ArrowException, OSError, ValueError, KeyError) as err:
        msg = f"{path} is not used: it cannot be read ({err}); reading {log.path.name} instead"
        warnings.warn(msg, RunlinesWarning, stacklevel=6)
        return None


def copy_summary(log: LogFile, label: str | None = None) -> RunSummary | None:
    """Return the `RunSummary` of *log* from its copy and the JSONL after it, or None.

    Reads only the copy's footer: what it covers and the summary, not its columns.
    """
    from runlines.reading._summary import RunSummary

    found = _checked_copy(log, (_KEY, _SUMMARY_KEY), whole=False)
    if found is None:
        return None
    parts, _, log_size = found
    covers, stored = parts[_KEY], parts[_SUMMARY_KEY]
    summary = RunSummary.restored(log.path, stored["summary"], label=label)
    skipped = list(stored["summary_bad"])
    if log_size > covers["covers_bytes"]:
        _add_tail(summary, log.path, covers["covers_bytes"], covers["covers_lines"], skipped)
    if skipped:
        warnings.warn(skipped_lines_message(log.path, skipped), RunlinesWarning, stacklevel=4)
    return summary


def _add_tail(summary: RunSummary, path: Path, start: int, lines: int, skipped: list[int]) -> None:
    """Add the records from byte *start* (line *lines* + 1) on to *summary*; add the bad
    lines' numbers to *skipped*.
    """
    with open_regular(path) as stream:
        stream.seek(start)
        for number, raw in enumerate(stream, start=lines + 1):
            if not raw.strip():
                continue
            try:
                record = decode_line(raw)
            except ValueError:
                if not raw.endswith(b"\n") and is_locked(path):
                    break  # the live writer's record still being written
                skipped.append(number)
                continue
            summary.add(record)


def _usable_copy(log: LogFile, *, stacklevel: int = 5) -> tuple[_Meta, Path] | None:
    """Return the copy of *log* and what it covers, when it matches the log; warn (at
    *stacklevel*, counted from `_checked_copy`) when not."""
    keys = (_KEY, _PIECES_KEY, _SUMMARY_KEY)
    found = _checked_copy(log, keys, whole=True, stacklevel=stacklevel)
    if found is None:
        return None
    parts, path, _ = found
    covers = {name: parts[_KEY][name] for name in _COVERS}
    meta = _Meta(**covers, **parts[_PIECES_KEY], **parts[_SUMMARY_KEY])
    return meta, path


def _checked_copy(
    log: LogFile, keys: tuple[bytes, ...], *, whole: bool, stacklevel: int = 5
) -> tuple[dict[bytes, Any], Path, int] | None:
    """Return the copy's metadata *keys* (decoded), its path and the log's size, when the copy
    matches the log; None when it has none, or warn and return None when it does not match.
    """
    path = copy_path(log.path)
    try:
        parts = _metadata(path, keys, whole=whole)
        if parts is None:
            return None
        reason, log_size = _mismatch(log.path, parts[_KEY])
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
# _VERIFIED, that the whole file matched its digest (hashed once per process and copy)
_cache: dict[tuple[str, int, int, int, int], dict[bytes, Any]] = {}
_VERIFIED: Final = b""
_RAW: Final = (_KEY, _PIECES_KEY, _SUMMARY_KEY, _DIGEST_KEY)


def _metadata(path: Path, keys: tuple[bytes, ...], *, whole: bool) -> dict[bytes, Any] | None:
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
        known = _cache.get(stamp, {})
        wanted = [key for key in keys if key not in known]
        if wanted:
            known = {**known, **_decoded_parts(_raw_values(fd, info.st_size), wanted)}
        if whole and _VERIFIED not in known:
            _verify_file(fd, info.st_size)
            known = {**known, _VERIFIED: True}
        if len(_cache) >= _CACHED and stamp not in _cache:
            _cache.pop(next(iter(_cache)))
        _cache[stamp] = known
    finally:
        os.close(fd)
    return {key: known[key] for key in keys}


def _raw_values(fd: int, size: int) -> dict[bytes, bytes]:
    """Return the copy's metadata values as stored, after checking them against its digest."""
    found = _footer_values(fd, size, list(_RAW))
    if found is None:  # not where runlines puts it: ask pyarrow
        raw = _pyarrow_metadata(fd)
    else:
        raw = {key: value for key, (value, _) in found.items()}
    _decoded_parts(raw, [])  # no copy, or one of another format, says so first
    if any(key not in raw for key in _RAW):
        msg = "it has no digest of its bytes"
        raise ValueError(msg)
    if not raw[_DIGEST_KEY].endswith(b";meta=" + _meta_digest(raw).encode()):
        msg = "its metadata is not what it was written with (damaged, or edited)"
        raise ValueError(msg)
    return raw


def _verify_file(fd: int, size: int) -> None:
    """Raise ValueError unless the copy's bytes hash to the digest its footer holds."""
    at = _file_digest_at(fd, size)
    if at is None or os.pread(fd, 64, at) != _file_digest(fd, size, at).encode():
        msg = "its bytes are not those it was written with (damaged, or rewritten by a tool)"
        raise ValueError(msg)


def _decoded_parts(raw: dict[bytes, bytes], keys: list[bytes]) -> dict[bytes, Any]:
    """Return *keys* of the metadata *raw*, decoded, after checking the copy's format."""
    if _KEY not in raw:
        msg = "it is no runlines copy"
        raise ValueError(msg)
    covers = _loads(raw[_KEY])
    found = covers.get("format") if isinstance(covers, dict) else None
    if found != COPY_FORMAT:
        msg = f"it is of copy format {found!r}, and this runlines reads format {COPY_FORMAT}"
        raise ValueError(msg)
    return {key: covers if key == _KEY else _loads(raw[key]) for key in keys}


def _loads(raw: bytes) -> Any:
    """Return the JSON value *raw*: by orjson, unless it holds NaN or an int beyond 64 bits."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:  # NaN and infinities, which json writes and reads
        return json.loads(raw)
    return json.loads(raw) if LONG_INT.search(raw) else value


def _footer_values(fd: int, size: int, keys: list[bytes]) -> dict[bytes, tuple[bytes, int]] | None:
    """Return the values of *keys* in the Parquet footer of open file *fd*, and the offset of
    each in the file, or None.

    A Parquet file ends with its footer (Thrift compact protocol), the footer's length and
    ``PAR1``. Its key-value metadata comes after the row groups and their statistics, each
    pair as ``0x18 <varint length> key 0x18 <varint length> value 0x00``: the last such run
    of bytes naming a key is the key's. Reading it here costs a tenth of pyarrow's
    `read_metadata`, which builds the whole schema (measured); None sends the caller there.
    """
    tail = os.pread(fd, min(size, _FOOTER_READ), max(0, size - _FOOTER_READ))
    if len(tail) < 8 or tail[-4:] != b"PAR1":
        return None
    length = int.from_bytes(tail[-8:-4], "little")
    if length + 8 > len(tail):
        if length + 8 > size:
            return None
        tail = os.pread(fd, length + 8, size - length - 8)
    footer = tail[len(tail) - 8 - length : -8]
    footer_at = size - 8 - length
    found = {}
    for key in {_KEY, *keys}:  # the format is checked even where only other keys are wanted
        marker = b"\x18" + _varint(len(key)) + key + b"\x18"
        at = footer.rfind(marker)
        if at < 0:
            return None
        count, start = _read_varint(footer, at + len(marker))
        if count is None or footer[start + count : start + count + 1] != b"\x00":
            return None
        found[key] = (footer[start : start + count], footer_at + start)
    return found


def _varint(number: int) -> bytes:
    out = bytearray()
    while number >= 0x80:
        out.append(number & 0x7F | 0x80)
        number >>= 7
    out.append(number)
    return bytes(out)


def _read_varint(data: bytes, at: int) -> tuple[int | None, int]:
    number = shift = 0
    while at < len(data) and shift < 64:
        byte = data[at]
        number |= (byte & 0x7F) << shift
        at += 1
        if not byte & 0x80:
            return number, at
        shift += 7
    return None, at


def _pyarrow_metadata(fd: int) -> dict[bytes, bytes]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    with pa.PythonFile(os.fdopen(os.dup(fd), "rb")) as file:
        return dict(pq.read_metadata(file).metadata or {})


# logs whose covered bytes were hashed whole and matched, by (device, inode, sha256 of the
# covered bytes): the size and mtime the log had then. A log is appended to, not rewritten:
# the same file seen again as it was, or longer, has its covered bytes checked by their two
# ends, as an unchanged log's are, not hashed whole on every read (a resumed run's log grows
# at every line); one rewritten in place keeps its size and changes its mtime, and is hashed
_verified: dict[tuple[int, int, str], tuple[int, int]] = {}


def _mismatch(log: Path, covers: dict[str, Any]) -> tuple[str | None, int]:
    """Return why the copy that *covers* says what it covers does not match the bytes of *log*
    now (None when it does), and the log's size.

    When the log's size and mtime are those recorded with the copy, the log is unchanged since
    (the test make and git use), and hashing the covered bytes' two ends guards against a
    rewrite that kept both. Otherwise (the log grew, or was copied or touched), all covered
    bytes are hashed again: one pass at the disk's speed, still far less than parsing them,
    and once per process while the file stays the one that was hashed (see `_verified`).
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
        size, mtime = _verified.get(seen, (info.st_size + 1, 0))
        if unchanged or info.st_size > size or (info.st_size, info.st_mtime_ns) == (size, mtime):
            head = os.pread(fd, min(_SAMPLE_BYTES, covered), 0)
            start = max(0, covered - _SAMPLE_BYTES)
            tail = os.pread(fd, covered - start, start)
            if _sample_hash(head, tail) == covers["sample_sha256"]:
                return None, info.st_size
            _verified.pop(seen, None)
            return "the log's bytes differ from those it was written from", info.st_size
        digest = hashlib.sha256()
        left = covered
        while left and (chunk := os.pread(fd, min(_HASH_CHUNK, left), covered - left)):
            digest.update(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    if left or digest.hexdigest() != covers["sha256"]:
        return "the log's bytes differ from those it was written from", info.st_size
    if len(_verified) >= _CACHED:
        _verified.pop(next(iter(_verified)))
    _verified[seen] = (info.st_size, info.st_mtime_ns)
    return None, info.st_size


def _from_copy(log: LogFile, meta: _Meta, path: Path, events: Collection[str] | None) -> _ParsedLog:
    """Return the parsed log the copy holds, as one piece in the copy's row order (see
    `write_copy`); with *events*, only the rows of the pieces that may hold them, as the JSONL
    reader reads only those buckets.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    wanted = None if events is None else {*events, "run_start"}
    kept = [
        number
        for number, about in enumerate(meta.pieces)
        if wanted is None or about["event"] is None or about["event"] in wanted
    ]
    skipped = {about["event"] for about in meta.pieces} - {
        meta.pieces[number]["event"] for number in kept
    }
    storage: dict[str, list[int]] = {}  # field: its storage columns in the kept pieces
    fields: dict[str, tuple[int, tuple[int, int]]] = {}
    for number in kept:
        about = meta.pieces[number]
        for name, index in about["columns"]:
            held = storage.setdefault(name, [])
            if index not in held:
                held.append(index)
        for name, (count, line, place) in about["fields"].items():
            total, first = fields.get(name, (0, (line, place)))
            if count and (not total or (line, place) < first):
                first = (line, place)  # the first value's place, over the pieces holding one
            fields[name] = (total + count, first)
    every = len(kept) == len(meta.pieces)
    bookkeeping = [_LINE, _PATCH, _ATTEMPT, _SUPERSEDED]
    bookkeeping += [] if events is None else [_NULLS] if every else [_NULLS, _PIECE]
    names = [f"c{index}" for index in sorted({i for held in storage.values() for i in held})]
    with pq.ParquetFile(path) as copy:  # one chunk per row group: read_table's dataset
        table = copy.read(columns=[*names, *bookkeeping])  # splits columns into batches
    pa.default_memory_pool().release_unused()  # the pages the read used and freed
    if not every:
        rows = np.isin(table.column(_PIECE).to_numpy(), np.asarray(kept, dtype=np.int32))
        table = table.filter(pa.array(rows))
    patches = table.column(_PATCH)
    at = np.flatnonzero(patches.is_valid().to_numpy(zero_copy_only=False))
    records = _decoded(patches.take(pa.array(at)).to_pylist())
    columns = {name: _one_column(table, held) for name, held in storage.items()}
    if columns:
        piece_table = pa.table({name: column for name, (column, _) in columns.items()})
    else:  # rows without fields ({}): a table of no columns that keeps its row count
        piece_table = pa.table({"": pa.nulls(table.num_rows)}).drop_columns([""])
    piece = _Piece(piece_table, table.column(_LINE).to_numpy(), at.tolist(), records)
    for name, (_, others) in columns.items():
        if others:
            piece.patches[name] = _merged(piece.patches.get(name, ([], [])), others)
    piece.fields = fields
    if events is not None:
        piece.nulls = _nulls_of(table.column(_NULLS))
    bad = [(int(line), str(reason)) for line, reason in meta.bad]
    parsed = _ParsedLog(log, [piece] if kept else [], bad, skipped)
    superseded = table.column(_SUPERSEDED).to_numpy(zero_copy_only=False).astype(bool)
    parsed.in_order = first = int(len(superseded) - superseded.sum())
    parsed.late = late = _late_places(piece.lines, first)
    if every and events is None:  # in output order: the log's records in line order
        rewound = np.zeros(table.num_rows, dtype=bool)
        rewound[late] = True
        attempts = stored = table.column(_ATTEMPT).to_numpy().astype(np.int64, copy=False)
        if len(late):
            attempts = np.empty_like(stored)
            attempts[~rewound] = stored[:first]
            attempts[late] = stored[first:]
        parsed.attempts = attempts, rewound
    return parsed


def _late_places(lines: npt.NDArray[np.int64], first: int) -> npt.NDArray[np.int64]:
    """Return the places, among all rows in line order, of the rows from *first* on, where
    the rows before *first* and those from it are each in line order (as a copy stores them).
    """
    import numpy as np

    late = lines[first:]
    return np.arange(len(late), dtype=np.int64) + np.searchsorted(lines[:first], late)


def _one_column(table: Any, held: list[int]) -> tuple[Any, list[Any]]:
    """Return a field's column: the storage column of *held* with the most values, and its
    other ones (values of other types), which `_merged` adds to the Python values.

    A piece's column has one type; values of other types are Python's, as when Python read
    their lines, and `_Columns.build` then makes of them what it makes of the JSONL's pieces.
    """
    stored = [table.column(f"c{index}") for index in held]
    stored.sort(key=lambda column: column.null_count)
    return stored[0], stored[1:]


def _merged(patch: tuple[list[int], list[Any]], others: list[Any]) -> tuple[list[int], list[Any]]:
    """Return a field's Python values (rows, values) with those of columns *others* added,
    in row order; where a row has both, its Python value wins."""
    import numpy as np

    rows = [np.asarray(patch[0], dtype=np.int64)]
    values = [np.fromiter(patch[1], dtype=object, count=len(patch[1]))]
    for column in others:  # as `_Columns._object_column` takes them: numpy's values
        valid = column.is_valid().to_numpy(zero_copy_only=False)
        found = np.flatnonzero(valid)
        found_values = np.empty(len(found), dtype=object)
        found_values[:] = column.drop_null().to_numpy(zero_copy_only=False)
        fresh = ~np.isin(found, np.concatenate(rows))
        rows.append(found[fresh])
        values.append(found_values[fresh])
    every = np.concatenate(rows)
    order = np.argsort(every, kind="stable")
    return every[order].tolist(), np.concatenate(values)[order].tolist()


def _decoded(texts: list[str]) -> list[dict[str, Any]]:
    """Return the records of JSON *texts*, decoded in one call (one call per text is slower)."""
    if not texts:
        return []
    # json, not orjson: orjson reads an int beyond 64 bits as a float, and refuses NaN
    return json.loads("[" + ",".join(texts) + "]")  # type: ignore[no-any-return]


def _nulls_of(column: Any) -> dict[str, Any]:
    """Return, per field, the rows that hold it as null, from a list column of field names."""
    import numpy as np
    import pyarrow.compute as pc

    column = column.combine_chunks()
    names = pc.list_flatten(column).to_numpy(zero_copy_only=False)
    rows = pc.list_parent_indices(column).to_numpy()
    found: dict[str, Any] = {}
    for name in dict.fromkeys(names.tolist()):
        found[name] = np.unique(rows[names == name]).astype(np.int64)
    return found


def _tail_bytes(path: Path, start: int) -> npt.NDArray[np.uint8]:
    """Return the log's bytes from *start* on, a newline added when its last line has none."""
    import numpy as np

    with open_regular(path) as stream:
        size = os.fstat(stream.fileno()).st_size
        stream.seek(start)
        data = np.empty(max(0, size - start) + 1, dtype=np.uint8)
        count = stream.readinto(memoryview(data)[: len(data) - 1])  # type: ignore[arg-type]
    if count == 0 or data[count - 1] == 10:
        return data[:count]
    data[count] = 10
    return data[: count + 1]


def _append(parsed: _ParsedLog, tail: _ParsedLog, first_line: int) -> None:
    """Add the pieces of the JSONL after the copy, their lines numbered in the whole log."""
    for piece in tail.pieces:
        piece.lines = piece.lines + first_line
        piece.fields = {
            name: (count, (line + first_line, place))
            for name, (count, (line, place)) in piece.fields.items()
        }
        parsed.pieces.append(piece)
    parsed.bad.extend((line + first_line, reason) for line, reason in tail.bad)
    parsed.skipped |= tail.skipped
