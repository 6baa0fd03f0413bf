"""Read logs back: iter_events (stdlib), load and compare (pandas), quick looks for the CLI."""

from __future__ import annotations

import difflib
import itertools
import json
import math
import os
import re
import sys
import warnings
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, TypeGuard, TypeVar

import orjson

from runlines import _native
from runlines._attempts import attempt_numbers, event_names, step_cutoffs
from runlines.encoding import NONFINITE_KEY, restore_nonfinite
from runlines.errors import FieldError, ReadError, RunlinesWarning

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pandas as pd

    _Ints = npt.NDArray[np.int64]
    _Bytes = npt.NDArray[np.uint8]
    _Bools = npt.NDArray[np.bool_]

__all__ = [
    "AGGREGATIONS",
    "LOG_SUFFIX",
    "ArtifactMatch",
    "Errors",
    "LogFile",
    "LogFollower",
    "RunDetails",
    "RunSummary",
    "attempt_count",
    "compare",
    "decode_line",
    "describe",
    "find_artifact",
    "find_logs",
    "head_record",
    "is_locked",
    "iter_events",
    "last_records",
    "last_value",
    "lifecycle",
    "lines_containing",
    "load",
    "lock_path",
    "log_file",
    "main_metric",
    "numeric_fields",
    "run_status",
    "sha256_of",
    "skipped_lines_message",
    "summarize",
]

Errors = Literal["warn", "raise"]
_T = TypeVar("_T")
LOG_SUFFIX: Final = ".jsonl"
_RANK_NAME: Final = re.compile(r"^(?P<run>.+)\.rank(?P<rank>\d+)$")
_HINT: Final = "the run may have crashed mid-write"
_FIRST: Final = ("ts", "event", "run")
AGGREGATIONS: Final = ("mean", "median", "min", "max", "first", "last", "sum", "count", "std")


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
    match = _RANK_NAME.match(stem)
    if match is None:
        return LogFile(path, stem)
    return LogFile(path, match["run"], int(match["rank"]))


def find_logs(*sources: str | os.PathLike[str]) -> list[LogFile]:
    """Return the log files of *sources*: each file as given, each directory's `*.jsonl` logs.

    Raises:
        ReadError: a source that does not exist, or a directory without logs.
    """
    if not sources:
        msg = "no log given; pass a .jsonl log file or a folder of logs"
        raise ReadError(msg)
    found: dict[Path, LogFile] = {}
    for source in sources:
        for log in _logs_of(Path(source)):
            found.setdefault(log.path.resolve(), log)
    return list(found.values())


def _logs_of(source: Path) -> list[LogFile]:
    if source.is_dir():
        logs = [log_file(p) for p in source.glob(f"*{LOG_SUFFIX}") if p.is_file()]
        if not logs:
            msg = (
                f"{source} has no *{LOG_SUFFIX} logs; pass a log file or the folder that holds them"
            )
            raise ReadError(msg, str(source))
        return sorted(logs, key=lambda log: (log.run, log.rank or 0))
    if not source.exists():
        msg = f"no such log: {source}; pass a .jsonl log file or a folder of logs"
        raise ReadError(msg, str(source))
    return [log_file(source)]


# --- line decoding (stdlib and orjson) -------------------------------------------------------


def decode_line(raw: bytes) -> dict[str, Any]:
    """Return the record on one line, non-finite floats restored.

    Integers stay exact at any size. A line that orjson refuses but Python's json module reads
    (the NaN and Infinity that `json.dumps` writes, a number beyond a double, which reads as
    an infinity) is read that way.

    Raises:
        ValueError: the line is not one complete JSON object.
    """
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as err:
        # only where orjson's refusal is about numbers: json would also take lone surrogates
        if "infinity" not in str(err) and b"NaN" not in raw and b"Infinity" not in raw:
            raise
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError):
            raise err from None
    else:
        if _LONG_INT.search(raw) is not None:  # orjson reads an int beyond 64 bits as a float
            try:
                value = json.loads(raw)
            except (ValueError, RecursionError):  # nested deeper than json's recursion limit
                pass
    if not isinstance(value, dict):
        kind = "array" if isinstance(value, list) else type(value).__name__
        msg = f"a JSON {kind}, not an object"
        raise ValueError(msg)
    return restore_nonfinite(value)


# A JSON number that may not fit 64 bits: a minus sign and 19 digits, or 20 digits
_LONG_INT: Final = re.compile(rb"[:\[,]\s*(?:-\d{19}|\d{20})")
# A JSON number that may not fit int64, which pyarrow reads as a float: 19 digits (2**63 has 19)
_INT64_PAST: Final = re.compile(rb"[:\[,]\s*-?\d{19}")


def skipped_lines_message(path: str | os.PathLike[str], lines: Sequence[int]) -> str:
    """Return the warning text for *lines* (1-based) of *path* that were skipped."""
    shown = ", ".join(str(n) for n in lines[:5]) + (", ..." if len(lines) > 5 else "")
    noun = "line" if len(lines) == 1 else "lines"
    return (
        f"{path}: skipped {len(lines)} {noun} that {'is' if len(lines) == 1 else 'are'} not a "
        f"complete JSON object ({noun} {shown}); {_HINT}. Pass errors='raise' to stop at the first"
    )


def _bad_line_error(path: str | os.PathLike[str], line: int, reason: str) -> ReadError:
    msg = f"{path} line {line} is not a complete JSON object ({reason}); {_HINT}"
    return ReadError(msg, str(path), line)


def iter_events(
    path: str | os.PathLike[str], *, errors: Errors = "warn"
) -> Iterator[dict[str, Any]]:
    """Yield the records of one log file in order, with NaN and infinities restored.

    Lines that are not complete JSON objects are skipped with one `RunlinesWarning` once the
    file is exhausted; blank lines are skipped silently. Needs no pandas.

    Raises:
        ReadError: the file cannot be opened, or ``errors="raise"`` and a line is bad.
    """
    _check_errors(errors)
    skipped: list[int] = []
    with _open_log(path) as lines:
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            try:
                record = decode_line(raw)
            except ValueError as err:
                if errors == "raise":
                    raise _bad_line_error(path, number, str(err)) from err
                skipped.append(number)
                continue
            yield record
    if skipped:
        warnings.warn(skipped_lines_message(path, skipped), RunlinesWarning, stacklevel=2)


def _open_log(path: str | os.PathLike[str]) -> Any:
    try:
        return open(path, "rb")
    except IsADirectoryError as err:
        msg = f"{path} is a folder; pass one .jsonl log file"
        raise ReadError(msg, str(path)) from err
    except OSError as err:
        msg = f"cannot read log {path}: {err.strerror or err}; check the path"
        raise ReadError(msg, str(path)) from err


def _load_duckdb(
    sources: tuple[str | os.PathLike[str], ...],
    event: str | Iterable[str] | None,
    columns: Iterable[str] | None,
    superseded: bool,
    errors: str,
    engine: str,
) -> pd.DataFrame:
    """Return load()'s frame read through DuckDB."""
    if engine != "duckdb":
        msg = f"engine must be 'pandas' or 'duckdb', got {engine!r}"
        raise ValueError(msg)
    if errors == "raise":
        msg = "engine='duckdb' skips bad lines and cannot raise on them; use engine='pandas'"
        raise ValueError(msg)
    from runlines.sql import load_duckdb

    return load_duckdb(*sources, event=event, columns=columns, superseded=superseded)


def _check_errors(errors: str) -> None:
    if errors not in ("warn", "raise"):
        msg = f"errors must be 'warn' or 'raise', got {errors!r}"
        raise ValueError(msg)


# --- the fast reader: one file into Arrow tables ---------------------------------------------
#
# load() reads a log with pyarrow's JSON reader: lines bucketed by event (one narrow schema per
# call), each bucket in blocks. Python (orjson) takes only the lines pyarrow cannot: torn, odd,
# nested, non-finite or type-conflicting ones. numpy and pyarrow are imported in the functions.

_BLOCK_BYTES: Final = 16 << 20  # one pyarrow call per block: a bad line costs a block, not a file
_ARROW_BLOCK: Final = 1 << 20  # pyarrow's own parallel unit inside a block
_SCAN_BYTES: Final = 8 << 20  # newline scan in cache-sized slices
_PYTHON_LINES: Final = 256  # a failing range this small goes to Python whole
# A line with more brackets than this goes to Python (orjson refuses deeper nesting cleanly);
# pyarrow's parser crashes the process on a line nested some 10,000 levels deep.
_MAX_NESTING: Final = 1024
_MAX_TRIES: Final = 8
_THREADS: Final = min(4, os.cpu_count() or 1)
_MIN_BUCKET: Final = 1024  # an event with fewer lines joins the mixed bucket
_KEY_WINDOW: Final = 32  # where the comma after `{"ts":<number>` falls
_KEY_BATCH: Final = 1 << 16
_SPACES: Final = b" " * (1 << 16)
_RUN_HEAD: Final = re.compile(rb'\{"ts":[-0-9.eE+]+,"event":"([^"\\]{0,15})"')
_CONFLICT: Final = re.compile(r"Column\((/[^)]*)\) changed from (\w+) to (\w+)")
_KIND_START: Final = {
    "number": rb"[-0-9]",
    "string": rb'"',
    "timestamp": rb'"',
    "boolean": rb"[tf]",
    "null": rb"n",
    "object": rb"\{",
    "array": rb"\[",
}


@dataclass(slots=True)
class _Piece:
    """Consecutive records of one bucket as an Arrow table, and the rows Python parsed."""

    table: Any
    lines: _Ints  # the 0-based log line of each row
    rows: list[int]
    records: list[dict[str, Any]]
    patches: dict[str, tuple[list[int], list[Any]]] = field(default_factory=dict)
    # with an event filter: per field, the rows pyarrow read that hold it as null (the column
    # cannot tell a null from a missing field), so that a field logged as None is kept
    nulls: dict[str, _Ints] = field(default_factory=dict)
    # per field: the rows holding a value (not None), and the first one's line and place in it
    fields: dict[str, tuple[int, tuple[int, int]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for row, record in zip(self.rows, self.records, strict=True):
            for key, value in record.items():
                rows, values = self.patches.setdefault(key, ([], []))
                rows.append(row)
                values.append(value)


@dataclass(slots=True)
class _ParsedLog:
    log: LogFile
    pieces: list[_Piece]
    bad: list[tuple[int, str]]
    skipped: set[str] = field(default_factory=set)  # events of buckets left unread

    @property
    def num_rows(self) -> int:
        return sum(piece.table.num_rows for piece in self.pieces)


def _line_bounds(data: Any) -> tuple[_Ints, _Ints]:
    """Return the start and end (exclusive, without the newline) of every line of *data*."""
    import numpy as np

    size = len(data)
    offsets = range(0, size, _SCAN_BYTES)
    parts = _in_threads(lambda i: np.flatnonzero(data[i : i + _SCAN_BYTES] == 10) + i, offsets)
    ends = np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)
    starts = np.concatenate(([0], ends + 1)).astype(np.int64)
    if size == 0 or data[size - 1] == 10:
        starts = starts[:-1]
    else:
        ends = np.concatenate((ends, [size])).astype(np.int64)
    return starts, ends


def _in_threads(work: Callable[[Any], _T], items: Iterable[Any]) -> list[_T]:
    """Return ``[work(item) for item in items]``, computed on a few threads.

    numpy and pyarrow release the GIL in their loops, so their work runs in parallel.
    """
    from concurrent.futures import ThreadPoolExecutor

    items = list(items)
    if len(items) < 2 or _THREADS < 2:
        return [work(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(_THREADS, len(items))) as pool:
        return list(pool.map(work, items))


def _event_keys(data: Any, starts: _Ints) -> npt.NDArray[np.uint64]:
    """Return a key per line that tells its event apart, from the bytes after ``,"event":"``.

    Keys only group lines for speed: lines that share a key, or lines not in Run's format
    (``{"ts":...,"event":"<name>",...``), are still read correctly, if more slowly.
    """
    import numpy as np

    keys = np.zeros(len(starts), dtype=np.uint64)
    size = len(data)
    if size < _KEY_WINDOW + 32:
        return keys
    # rows of bytes from each offset: gathering whole rows is several times faster than
    # gathering unaligned 8-byte words one by one
    heads = np.lib.stride_tricks.sliding_window_view(data, _KEY_WINDOW)
    names = np.lib.stride_tricks.sliding_window_view(data, 16)
    fits = np.flatnonzero(starts + _KEY_WINDOW + 32 <= size)  # name and its 16 bytes inside
    for first in range(0, len(fits), _KEY_BATCH):
        rows = fits[first : first + _KEY_BATCH]
        batch = starts[rows]
        # `{"ts":` is 6 bytes; the event name starts 10 bytes after the comma that ends ts
        name = batch + np.argmax(heads[batch + 6] == ord(","), axis=1) + 16
        words = names[name].view("<u8")  # two 8-byte numbers per line
        keys[rows] = words[:, 0] ^ (words[:, 1] * np.uint64(0x9E3779B97F4A7C15))
    return keys


def _groups(
    rows: _Ints, keys: npt.NDArray[np.uint64]
) -> tuple[npt.NDArray[np.uint64], _Ints, list[_Ints]]:
    """Return the distinct *keys* in order, their counts, and their *rows* in line order.

    One stable sort: half the time of np.unique's sort followed by a second one for the rows.
    """
    import numpy as np

    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    cuts = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1
    bounds = np.concatenate(([0], cuts, [len(ordered)]))
    return ordered[bounds[:-1]], np.diff(bounds), np.split(rows[order], cuts)


@dataclass(frozen=True, slots=True)
class _Bucket:
    lines: _Ints
    key: int  # 0: lines not in Run's format, or rare events lumped together


class _FileReader:
    """Parse one log: its lines bucketed by event, each bucket read by pyarrow in blocks.

    One event per pyarrow call keeps its schema narrow, which more than halves the parse time of
    a mixed log. With *events* given, a bucket whose event is known and not wanted is not read
    at all. The records Python parsed and the bad lines are kept here for all buckets.
    """

    def __init__(self, log: LogFile, data: _Bytes, events: Collection[str] | None) -> None:
        self.log = log
        self.events = None if events is None else {*events, "run_start"}  # attempts need these
        self.records: dict[int, dict[str, Any]] = {}
        self.bad: list[tuple[int, str]] = []
        self.skipped: set[str] = set()
        self.string_columns: set[str] = set()
        if bytes(data[:3]) == b"\xef\xbb\xbf":
            data[:3] = 32  # a byte-order mark some editors add: spaces
        self.main = _Lines(self, data, *_line_bounds(data), None)

    def read(self) -> _ParsedLog:
        """Return the log's records as Arrow tables with Python patches, and its bad lines."""
        import numpy as np

        self.main.sort_lines()
        buckets = self.main.buckets()
        skip = [self._is_unwanted(bucket) for bucket in buckets]
        pairs = list(zip(buckets, skip, strict=True))
        # the C reader reads lines where they are; pyarrow reads spans, so it needs them moved
        fast = _native.readfast is not None
        take = self.main.select if fast else self.main.gather
        parts = [take(bucket.lines) for bucket, no in pairs[1:] if not no]
        unwanted = [bucket for bucket, no in pairs if no]
        if skip and skip[0]:  # the commonest event is not wanted: read only what is left
            for bucket in unwanted:
                self.main.is_row[bucket.lines] = False
            parts.append(take(np.flatnonzero(self.main.is_row)))
        else:
            for bucket in unwanted:
                if fast:
                    self.main.is_row[bucket.lines] = False
                else:
                    self.main.blank(bucket.lines)
            parts.insert(0, self.main)
        pieces = [piece for lines in parts for piece in lines.read()]
        return _ParsedLog(self.log, pieces, sorted(self.bad), self.skipped)

    def _is_unwanted(self, bucket: _Bucket) -> bool:
        """Return whether all lines of *bucket* hold one event that is not wanted."""
        if self.events is None or bucket.key == 0:
            return False
        line = int(bucket.lines[0])
        head = bytes(self.main.view[int(self.main.starts[line]) : int(self.main.ends[line])][:64])
        match = _RUN_HEAD.match(head)
        if match is None:  # the key covers the name only when it is 15 bytes or fewer
            return False
        name = match[1].decode()
        if name in self.events:
            return False
        self.skipped.add(name)
        return True


class _Lines:
    """A buffer of lines that pyarrow reads in blocks; the lines it cannot take go to Python.

    Lines that Python takes are overwritten in the buffer: a record with ``{}`` (an empty row
    that Python's values fill later), a blank or bad line with spaces (pyarrow skips it).
    """

    def __init__(
        self, owner: _FileReader, data: _Bytes, starts: _Ints, ends: _Ints, ids: _Ints | None
    ) -> None:
        import numpy as np

        self.owner = owner
        self.bytes = data
        self.view = memoryview(data)  # type: ignore[arg-type]
        self.starts, self.ends = starts, ends
        self.ids = ids  # each line's number in the log, when this buffer holds a bucket
        self.is_row = np.full(len(starts), ids is not None, dtype=bool)
        self.in_python = np.zeros(len(starts), dtype=bool)
        self.routes: list[re.Pattern[bytes]] = []

    def sort_lines(self) -> None:
        """Send to Python every line that does not start with '{' and end with '}', and every
        line that may nest deeper than _MAX_NESTING (pyarrow's parser overflows its stack).
        """
        import numpy as np

        ok = (self.ends - self.starts) >= 2
        idx = np.flatnonzero(ok)
        ok[idx] = (self.bytes[self.starts[idx]] == 0x7B) & (self.bytes[self.ends[idx] - 1] == 0x7D)
        long_lines = np.flatnonzero(ok & (self.ends - self.starts > 2 * _MAX_NESTING))
        for line in long_lines.tolist():
            start, end = int(self.starts[line]), int(self.ends[line])
            text = self.view[start:end]
            if bytes(text).count(b"[") + bytes(text).count(b"{") > _MAX_NESTING:
                ok[line] = False  # brackets, counted in strings too: deep at most, not surely
        self.is_row[:] = ok
        for line in np.flatnonzero(~ok).tolist():
            self._take_python(line)

    def buckets(self) -> list[_Bucket]:
        """Return the lines of each event, the commonest first, rare events lumped together."""
        import numpy as np

        rows = np.flatnonzero(self.is_row & ~self.in_python)
        if len(rows) < 2 * _MIN_BUCKET:
            return []
        keys, counts, groups = _groups(rows, _event_keys(self.bytes, self.starts[rows]))
        order = sorted(range(len(groups)), key=lambda i: -counts[i])
        big = [_Bucket(groups[i], int(keys[i])) for i in order if counts[i] >= _MIN_BUCKET]
        rare = [groups[i] for i in order[len(big) :]]
        if not big:
            return []
        return big + ([_Bucket(np.sort(np.concatenate(rare)), 0)] if rare else [])

    def gather(self, lines: _Ints) -> _Lines:
        """Move *lines* into a buffer of their own, leaving spaces in this one."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        # Each line with its newline is one value of a binary array over the buffer (every line
        # ends in a newline, see _read_bytes): one take() copies them all, in C.
        bounds = np.append(self.starts, len(self.bytes)).astype(np.int64)
        buffers = [None, pa.py_buffer(bounds), pa.py_buffer(self.bytes)]
        every = pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(self.starts), buffers)
        taken = pc.take(every, pa.array(lines, type=pa.int64()), memory_pool=_memory_pool())
        offsets = np.frombuffer(taken.buffers()[1], dtype=np.int64)[: len(lines) + 1]
        data = np.frombuffer(taken.buffers()[2], dtype=np.uint8)[: int(offsets[-1])]  # writable
        new_starts = offsets[:-1]
        lengths = self.ends[lines] - self.starts[lines]
        ids = lines if self.ids is None else self.ids[lines]
        moved = _Lines(self.owner, data, new_starts, new_starts + lengths, ids)
        moved.in_python[:] = self.in_python[lines]
        self.blank(lines)
        return moved

    def select(self, lines: _Ints) -> _Lines:
        """Return *lines* as a buffer of their own over the same bytes, for the C reader only.

        Its lines are not contiguous, so pyarrow reads none of its spans: see `_fallback`.
        """
        ids = lines if self.ids is None else self.ids[lines]
        chosen = _Lines(self.owner, self.bytes, self.starts[lines], self.ends[lines], ids)
        chosen.in_python[:] = self.in_python[lines]
        self.is_row[lines] = False
        return chosen

    def _fallback(self, i0: int, i1: int) -> list[_Piece]:
        """Read lines [i0, i1) with pyarrow, copied into a buffer of their own first."""
        import numpy as np

        lines = np.flatnonzero(self.is_row[i0:i1]) + i0
        if not len(lines):
            return []
        starts, ends = self.starts[lines].tolist(), self.ends[lines].tolist()
        view = self.view
        text = b"".join([bytes(view[a:b]) + b"\n" for a, b in zip(starts, ends, strict=True)])
        lengths = self.ends[lines] - self.starts[lines]
        new_starts = np.concatenate(([0], np.cumsum(lengths + 1)[:-1])).astype(np.int64)
        ids = lines if self.ids is None else self.ids[lines]
        data = np.frombuffer(bytearray(text), dtype=np.uint8)
        moved = _Lines(self.owner, data, new_starts, new_starts + lengths, ids)
        moved.in_python[:] = self.in_python[lines]
        self.is_row[lines] = False
        return moved._read_range(0, len(lines))

    def blank(self, lines: _Ints) -> None:
        """Overwrite *lines* with spaces."""
        spaces = memoryview(_SPACES)
        for start, end in zip(self.starts[lines].tolist(), self.ends[lines].tolist(), strict=True):
            length = end - start
            self.view[start:end] = spaces[:length] if length <= len(spaces) else b" " * length
        self.is_row[lines] = False

    def _line_id(self, line: int) -> int:
        return line if self.ids is None else int(self.ids[line])

    def _take_python(self, line: int, record: dict[str, Any] | None = None) -> None:
        start, end = int(self.starts[line]), int(self.ends[line])
        raw = bytes(self.view[start:end])
        line_id = self._line_id(line)
        if record is not None:
            self.owner.records[line_id] = record
        elif raw.strip():
            try:
                self.owner.records[line_id] = decode_line(raw)
            except ValueError as err:
                self.owner.bad.append((line_id + 1, str(err)))
        self.bytes[start:end] = 32
        self.is_row[line] = self.in_python[line] = line_id in self.owner.records
        if self.is_row[line]:
            self.bytes[start : start + 2] = (0x7B, 0x7D)

    def read(self) -> list[_Piece]:
        """Return this buffer's records, one piece per block read.

        The C reader (`_readfast`), when built, reads the blocks on a few threads; pyarrow reads
        a block it leaves (a field of two kinds, an int beyond 64 bits), and all of them without it.
        """
        import numpy as np

        fast = _native.readfast
        if fast is None:
            cuts = np.arange(_BLOCK_BYTES, len(self.bytes), _BLOCK_BYTES)
            bounds = np.unique(
                np.concatenate(([0], np.searchsorted(self.starts, cuts), [len(self.starts)]))
            )
            ranges = list(itertools.pairwise(bounds.tolist()))
            return [p for i0, i1 in ranges for p in self._read_range(i0, i1)]
        sizes = np.cumsum(self.ends - self.starts + 1)  # the lines may lie apart: their own bytes
        cuts = np.searchsorted(
            sizes, np.arange(_BLOCK_BYTES, int(sizes[-1]) if len(sizes) else 0, _BLOCK_BYTES)
        )
        bounds = np.unique(np.concatenate(([0], cuts, [len(self.starts)])))
        ranges = list(itertools.pairwise(bounds.tolist()))
        parsed = _in_threads(lambda bounds: self._parse_fast(fast, *bounds), ranges)
        pieces: list[_Piece] = []
        for (i0, i1), (lines, result) in zip(ranges, parsed, strict=True):
            taken = None if result is None else self._fast_piece(lines, result, i0, i1)
            pieces.extend(self._fallback(i0, i1) if taken is None else taken)
        return pieces

    def _parse_fast(self, fast: Any, i0: int, i1: int) -> tuple[_Ints, Any]:
        """Return the rows of lines [i0, i1) and what the C reader made of them (no GIL held)."""
        import numpy as np

        lines = np.flatnonzero(self.is_row[i0:i1]) + i0
        return lines, fast.parse_lines(self.bytes, self.starts[lines], self.ends[lines])

    def _fast_piece(self, lines: _Ints, result: Any, i0: int, i1: int) -> list[_Piece] | None:
        """Wrap the C reader's columns of *lines* as a table; the lines it refused go to Python.

        Returns None (pyarrow reads the block) when a refused line holds a field with values of
        another kind than the table's, or an int beyond 64 bits: pyarrow, which reads such a
        line (a nested one), would type the column from it too.
        """
        import numpy as np
        import pyarrow as pa

        names, columns, refused = result
        kinds = {name: column[0] for name, column in zip(names, columns, strict=True)}
        records: dict[int, dict[str, Any]] = {}
        for line in lines[np.frombuffer(refused, dtype=np.int64)].tolist():
            raw = bytes(self.view[int(self.starts[line]) : int(self.ends[line])])
            try:
                records[line] = record = decode_line(raw)
            except ValueError:
                continue  # a bad line: _take_python notes it
            for key, value in record.items():
                kind = _scalar_kind(value)
                if kind is None:
                    continue
                known = kinds.setdefault(key, kind)
                if kind == "bigint" or known not in (kind, "null"):
                    return None
                kinds[key] = kind
        for line in lines[np.frombuffer(refused, dtype=np.int64)].tolist():
            self._take_python(line, records.get(line))
        arrays = [_fast_array(len(lines), *column[:4]) for column in columns]
        if names:
            table = pa.Table.from_arrays(arrays, names=names)
        else:  # lines without fields ({}): a table of no columns that keeps its row count
            table = pa.table({"": pa.nulls(len(lines))}).drop_columns([""])
        kept = self.is_row[lines]
        if not kept.any():
            return []
        row_of = np.cumsum(kept) - 1
        if not kept.all():  # a refused line that Python cannot read either: a bad line
            table = table.filter(pa.array(kept))
        nulls = {}
        for name, column in zip(names, columns, strict=True):
            if column[4]:  # rows holding the field as null (a null line is never refused)
                nulls[name] = row_of[np.frombuffer(column[4], dtype=np.int64)]
        return [self._piece(table, i0, i1, nulls)]

    def _read_range(self, i0: int, i1: int) -> list[_Piece]:
        """Read lines [i0, i1) with pyarrow, routing conflicts to Python or splitting on failure."""
        import pyarrow as pa

        for route in self.routes:
            self._apply_route(route, i0, i1)
        for _ in range(_MAX_TRIES):
            expected = int(self.is_row[i0:i1].sum())
            if expected == 0:
                return []
            try:
                table = self._arrow(i0, i1)
            except pa.ArrowException as err:
                if self._route_conflict(str(err), i0, i1):
                    continue
                return self._split(i0, i1)
            if table.num_rows != expected:
                return self._split(i0, i1)
            if not self._learn_timestamps(table):
                return [self._piece(table, i0, i1)]
        return self._split(i0, i1)

    def _split(self, i0: int, i1: int) -> list[_Piece]:
        import numpy as np

        if i1 - i0 > _PYTHON_LINES:
            middle = (i0 + i1) // 2
            return self._read_range(i0, middle) + self._read_range(middle, i1)
        for line in (np.flatnonzero(self.is_row[i0:i1] & ~self.in_python[i0:i1]) + i0).tolist():
            self._take_python(line)
        if not self.is_row[i0:i1].any():
            return []
        return [self._piece(self._arrow(i0, i1), i0, i1)]

    def _arrow(self, i0: int, i1: int) -> Any:
        import pyarrow as pa
        import pyarrow.json as pj

        start, end = int(self.starts[i0]), min(int(self.ends[i1 - 1]) + 1, len(self.bytes))
        longest = int((self.ends[i0:i1] - self.starts[i0:i1]).max())
        block_size = max(_ARROW_BLOCK, 1 << (longest + 2).bit_length())
        strings = sorted(self.owner.string_columns)
        return pj.read_json(
            pa.BufferReader(pa.py_buffer(self.view[start:end])),
            read_options=pj.ReadOptions(block_size=block_size),
            parse_options=pj.ParseOptions(
                explicit_schema=pa.schema([(n, pa.string()) for n in strings])
            ),
            memory_pool=_memory_pool(),
        )

    def _learn_timestamps(self, table: Any) -> bool:
        """Keep strings that pyarrow read as timestamps as strings: re-read with them typed."""
        import pyarrow as pa

        found = {f.name for f in table.schema if pa.types.is_temporal(f.type)}
        if found <= self.owner.string_columns:
            return False
        self.owner.string_columns |= found
        return True

    def _route_conflict(self, message: str, i0: int, i1: int) -> bool:
        """Send the lines of the rarer JSON type of a conflicting field to Python."""
        match = _CONFLICT.search(message)
        if match is None or match[1] in ("", "/"):
            return False
        segments = match[1].split("/")[1:]
        key = re.escape(orjson.dumps(segments[0].replace("~1", "/").replace("~0", "~")))
        if len(segments) > 1:  # inside a nested value: that whole field goes to Python
            candidates = [re.compile(key + rb"\s*:")]
        else:
            kinds = (match[2], match[3])
            candidates = [re.compile(key + rb"\s*:\s*" + _KIND_START.get(k, b"")) for k in kinds]
        route = min(candidates, key=lambda pattern: self._count(pattern, i0, i1))
        self.routes.append(route)
        return self._apply_route(route, i0, i1) > 0

    def _span(self, i0: int, i1: int) -> tuple[int, int]:
        return int(self.starts[i0]), int(self.ends[i1 - 1])

    def _count(self, pattern: re.Pattern[bytes], i0: int, i1: int) -> int:
        return sum(1 for _ in pattern.finditer(self.view, *self._span(i0, i1)))

    def _apply_route(self, pattern: re.Pattern[bytes], i0: int, i1: int) -> int:
        import numpy as np

        hits = [m.start() for m in pattern.finditer(self.view, *self._span(i0, i1))]
        lines = np.unique(np.searchsorted(self.starts, hits, side="right") - 1)
        lines = lines[self.is_row[lines] & ~self.in_python[lines]]
        for line in lines.tolist():
            self._take_python(line)
        return len(lines)

    def _piece(self, table: Any, i0: int, i1: int, nulls: dict[str, _Ints] | None = None) -> _Piece:
        """Wrap *table*, re-parsing in Python the rows that hold nested or non-finite values.

        *nulls*: the rows that hold a field as null, when the reader knows them.
        """
        import numpy as np

        lines = np.flatnonzero(self.is_row[i0:i1]) + i0
        rows = np.union1d(_nested_rows(table), np.flatnonzero(self.in_python[lines]))
        big = self._big_int_rows(table, lines)
        rows = np.union1d(rows, np.concatenate([np.zeros(0, np.int64), *big.values()]))
        # pyarrow's values of the plain columns stand: a row it read needs only its nested
        # values and the non-finite floats (null in pyarrow) from Python
        plain = {f.name for f in table.schema if _arrow_kind(f.type) is not None} - set(big)
        records = []
        for row in rows.tolist():
            line = int(lines[row])
            record = self._record(line, table, row)
            if plain and not self.in_python[line]:
                record = {k: v for k, v in record.items() if k not in plain or _is_nonfinite(v)}
            records.append(record)
        ids = lines if self.ids is None else self.ids[lines]
        piece = _Piece(table, ids, rows.tolist(), records)
        self._note_fields(piece, lines)
        if nulls is not None:
            piece.nulls = nulls
        elif self.owner.events is not None:
            self._find_nulls(piece, lines)
        return piece

    def _note_fields(self, piece: _Piece, lines: _Ints) -> None:
        """Count the rows of *piece* holding a value (not None) per field, and note where the
        first one is: its line, and the field's place in that line (see `_column_names`).
        """
        import numpy as np

        table = piece.table
        held: dict[str, tuple[int, int]] = {}  # name: (count, first row)
        valid: dict[str, _Bools] = {}
        for name, column in zip(table.column_names, table.columns, strict=True):
            count = len(column) - column.null_count
            if column.null_count:
                valid[name] = column.is_valid().to_numpy(zero_copy_only=False)
            if count:
                held[name] = (count, int(np.argmax(valid[name])) if name in valid else 0)
        for name, (rows, values) in piece.patches.items():
            mask = valid.get(name)
            in_table = name in table.column_names
            mine = [
                row
                for row, value in zip(rows, values, strict=True)
                if value is not None and (not in_table or (mask is not None and not mask[row]))
            ]
            if mine:  # rows whose value only Python has (a nested row's is in the table too)
                count, row = held.get(name, (0, mine[0]))
                held[name] = (count + len(mine), min(row, min(mine)))
        order: dict[int, list[str]] = {}
        for name, (count, row) in held.items():
            if row not in order:
                order[row] = self._keys(int(lines[row]), table)
            keys = order[row]
            place = keys.index(name) if name in keys else len(keys)
            piece.fields[name] = (count, (int(piece.lines[row]), place))
        for name in {*table.column_names, *piece.patches} - held.keys():
            piece.fields[name] = (0, (0, 0))  # only ever None here

    def _keys(self, line: int, table: Any) -> list[str]:
        """Return the keys of *line* in order (the table's, for a line orjson refuses)."""
        if self.in_python[line]:
            return list(self.owner.records[self._line_id(line)])
        try:
            return list(
                decode_line(bytes(self.view[int(self.starts[line]) : int(self.ends[line])]))
            )
        except ValueError:
            return list(table.column_names)

    def _big_int_rows(self, table: Any, lines: _Ints) -> dict[str, _Ints]:
        """Return, per float column that holds an int beyond int64, its rows with a value.

        pyarrow reads such an int as a float, and the other ints of its column and block too;
        Python reads those rows again, exactly. A float that large is searched for a long run
        of digits in its line first, so that big floats (1e20) cost only that search.
        """
        import numpy as np
        import pyarrow.compute as pc

        found: dict[str, _Ints] = {}
        for name, column in zip(table.column_names, table.columns, strict=True):
            if _arrow_kind(column.type) != "float" or column.null_count == len(column):
                continue
            extremes = pc.min_max(column).as_py()
            if max(abs(extremes["min"]), abs(extremes["max"])) < 2.0**63:
                continue
            values = column.to_numpy()
            with np.errstate(invalid="ignore"):
                suspects = np.flatnonzero(np.abs(values) >= 2.0**63).tolist()
            spans = ((int(self.starts[lines[r]]), int(self.ends[lines[r]])) for r in suspects)
            if any(_INT64_PAST.search(bytes(self.view[a:b])) for a, b in spans):
                found[name] = np.flatnonzero(~np.isnan(values))
        return found

    def _find_nulls(self, piece: _Piece, lines: _Ints) -> None:
        """Note the rows of *piece* whose line holds a field as null, for the fields it lacks.

        Only the columns with more nulls than Python values are searched, in their lines' bytes.
        """
        import numpy as np

        if not len(lines):
            return
        span = int(self.starts[lines[0]]), int(self.ends[lines[-1]])
        for name, column in zip(piece.table.column_names, piece.table.columns, strict=True):
            if column.null_count <= len(piece.patches.get(name, ((), ()))[0]):
                continue
            key = re.escape(orjson.dumps(name)) + rb"\s*:\s*null"
            hits = [m.start() for m in re.compile(key).finditer(self.view, *span)]
            if hits:
                at = np.searchsorted(self.starts[lines], hits, side="right") - 1
                piece.nulls[name] = np.unique(at)

    def _record(self, line: int, table: Any, row: int) -> dict[str, Any]:
        if self.in_python[line]:
            return self.owner.records[self._line_id(line)]
        raw = bytes(self.view[int(self.starts[line]) : int(self.ends[line])])
        try:
            return decode_line(raw)
        except ValueError:  # pyarrow took a line that orjson refuses: keep pyarrow's values
            record: dict[str, Any] = table.slice(row, 1).to_pylist()[0]
            return restore_nonfinite(record)


def _fast_array(rows: int, kind: str, validity: Any, values: Any, data: Any) -> Any:
    """Return one column of the C reader as the Arrow array pyarrow's JSON reader would make."""
    import pyarrow as pa

    if kind == "null":
        return pa.nulls(rows)
    kinds = {"int": pa.int64(), "float": pa.float64(), "bool": pa.bool_(), "str": pa.string()}
    buffers = [None if validity is None else pa.py_buffer(validity), pa.py_buffer(values)]
    if data is not None:
        buffers.append(pa.py_buffer(data))
    return pa.Array.from_buffers(kinds[kind], rows, buffers)


def _scalar_kind(value: Any) -> str | None:
    """Return the C reader's kind of a value Python read; None for None, NaN, nested values."""
    kind = type(value)
    if kind is int:
        return "int" if -(2**63) <= value < 2**63 else "bigint"
    if kind is float:
        return "float" if math.isfinite(value) else None
    return {str: "str", bool: "bool"}.get(kind)


def _is_nonfinite(value: Any) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


def _memory_pool() -> Any:
    """Return the pool for pyarrow's big allocations: malloc, not pyarrow's default mimalloc.

    mimalloc gives each call fresh huge pages that the kernel must zero: with it, that zeroing
    took a sixth of load()'s CPU time (measured), malloc reuses the pages it has.
    """
    import pyarrow as pa

    return pa.system_memory_pool()


def _nested_rows(table: Any) -> _Ints:
    """Return the rows of *table* with a value in a nested (object or array) column."""
    import numpy as np
    import pyarrow as pa

    mask = np.zeros(table.num_rows, dtype=bool)
    for column in table.columns:
        if pa.types.is_nested(column.type):
            mask |= column.is_valid().to_numpy(zero_copy_only=False)
    return np.flatnonzero(mask)


def _read_log(log: LogFile, errors: Errors, events: Collection[str] | None = None) -> _ParsedLog:
    """Parse one log file (*events* only, when given); warn once about its bad lines, or raise."""
    parsed = _FileReader(log, _read_bytes(log.path), events).read()
    if parsed.bad and errors == "raise":
        line, reason = parsed.bad[0]
        raise _bad_line_error(log.path, line, reason)
    if parsed.bad and not parsed.pieces:
        msg = (
            f"{log.path} is not a runlines log: none of its {len(parsed.bad)} lines is a JSON "
            "object; pass a .jsonl log written by runlines.Run"
        )
        raise ReadError(msg, str(log.path), parsed.bad[0][0])
    if parsed.bad:
        lines = [line for line, _ in parsed.bad]
        warnings.warn(skipped_lines_message(log.path, lines), RunlinesWarning, stacklevel=4)
    return parsed


def _read_bytes(path: Path) -> _Bytes:
    """Return the bytes of *path*, a newline added when its last line has none.

    numpy's empty buffer skips the zero-filling a bytearray of that size costs.
    """
    import numpy as np

    with _open_log(path) as stream:
        size = path.stat().st_size
        data = np.empty(size + 1, dtype=np.uint8)
        count = stream.readinto(memoryview(data)[:size])  # type: ignore[arg-type]
    if count == 0 or data[count - 1] == 10:
        return data[:count]
    data[count] = 10
    return data[: count + 1]


# --- columns over several parsed logs --------------------------------------------------------


def _arrow_kind(kind: Any) -> str | None:
    """Return the value kind of an Arrow type, or None when its values come from Python."""
    import pyarrow as pa

    if pa.types.is_null(kind) or pa.types.is_nested(kind):
        return None
    if pa.types.is_signed_integer(kind):
        return "int"
    if pa.types.is_floating(kind):
        return "float"
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return "str"
    return "bool" if pa.types.is_boolean(kind) else "other"


def _python_kind(value: Any) -> str | None:
    kind = type(value)
    if value is None:
        return None
    if kind is int and not -(2**63) <= value < 2**63:
        return "bigint"  # exact in an object column, not rounded into floats
    if kind in (bool, int, float, str):
        return kind.__name__
    return "other"


def _common_type(kinds: set[str | None]) -> Any:
    """Return the Arrow type for values of *kinds*, or None for an object column."""
    import pyarrow as pa

    kinds.discard(None)
    if kinds == {"int"}:
        return pa.int64()
    if kinds and kinds <= {"int", "float"}:
        return pa.float64()
    if kinds == {"str"}:
        return pa.string()
    return pa.bool_() if kinds == {"bool"} else None


@dataclass(frozen=True, slots=True)
class _Numbers:
    """A number or boolean column as numpy values and where they are present.

    Floats hold NaN where missing; ints and bools hold 0 or False there.
    """

    values: npt.NDArray[Any]
    valid: _Bools

    def __len__(self) -> int:
        return len(self.values)


@dataclass(frozen=True, slots=True)
class _Layout:
    """Where each piece's rows go in the output: one array per piece, -1 for a dropped row."""

    size: int
    positions: list[_Ints]


class _Columns:
    """The columns of several parsed logs, each built straight into output order.

    A piece holds one bucket's rows, so the pieces of a log are not in line order; the output
    has the logs in turn and each log's records in line order.
    """

    def __init__(self, logs: list[_ParsedLog]) -> None:
        self.pieces = [piece for log in logs for piece in log.pieces]
        self.num_rows = sum(piece.table.num_rows for piece in self.pieces)
        self.names = _column_names(logs)
        self.full = _layout(logs, None)
        self._built: dict[str, Any] = {}

    def get(self, name: str) -> Any:
        """Return column *name* over all rows in output order (cached)."""
        if name not in self._built:
            self._built[name] = self.build(name, self.full)
        return self._built[name]

    def matches(self, name: str, wanted: Sequence[str]) -> _Bools:
        """Return, per output row, whether text field *name* is one of *wanted*.

        Works piece by piece, without building the column.
        """
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        out = np.zeros(self.full.size, dtype=bool)
        choices = pa.array(list(wanted), type=pa.string())
        for piece, positions in zip(self.pieces, self.full.positions, strict=True):
            hit = np.zeros(piece.table.num_rows, dtype=bool)
            column = piece.table.column(name) if name in piece.table.column_names else None
            if column is not None and _arrow_kind(column.type) == "str":
                found = pc.is_in(column.cast(pa.string()), value_set=choices)
                hit = found.to_numpy(zero_copy_only=False).astype(bool)
            rows, values = piece.patches.get(name, ([], []))
            for row, value in zip(rows, values, strict=True):
                hit[row] = isinstance(value, str) and value in wanted
            out[positions] = hit
        return out

    def build(self, name: str, layout: _Layout) -> Any:
        """Return column *name* laid out by *layout*.

        Numbers and booleans come as `_Numbers`, strings as a pyarrow array, anything else
        (nested values, mixed types) as a numpy object array.
        """
        import pyarrow as pa

        kinds = {_python_kind(v) for p in self.pieces for v in p.patches.get(name, ((), ()))[1]}
        for piece in self.pieces:
            if name in piece.table.column_names:
                kinds.add(_arrow_kind(piece.table.schema.field(name).type))
        kind = _common_type(kinds)
        if kind is not None:
            build = self._arrow_column if kind == pa.string() else self._numbers
            try:
                return build(name, kind, layout)
            except (pa.ArrowException, OverflowError):  # an int beyond 64 bits
                pass
        return self._object_column(name, layout)

    def _numbers(self, name: str, kind: Any, layout: _Layout) -> _Numbers:
        """Scatter each piece's numbers straight into numpy arrays in output order."""
        import numpy as np
        import pyarrow as pa

        is_float = pa.types.is_floating(kind)
        # one spare slot at the end takes the dropped rows (position -1): no masks, no copies
        size = layout.size + 1
        values = np.full(size, np.nan) if is_float else np.zeros(size, kind.to_pandas_dtype())
        valid = np.zeros(size, dtype=bool)
        for piece, positions in zip(self.pieces, layout.positions, strict=True):
            arrays = _arrow_chunks(piece, name, kind)
            if not arrays:
                continue
            column = pa.chunked_array(arrays, type=kind)
            filler = False if pa.types.is_boolean(kind) else 0
            numbers = column if is_float else column.fill_null(filler)
            values[positions] = numbers.to_numpy()
            if column.null_count:
                valid[positions] = column.is_valid().to_numpy(zero_copy_only=False)
            else:  # the common case: no bitmap to expand
                valid[positions] = True
        return _Numbers(values[:-1], valid[:-1])

    def _arrow_column(self, name: str, kind: Any, layout: _Layout) -> Any:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        chunks: list[Any] = []
        where: list[_Ints] = []
        for piece, positions in zip(self.pieces, layout.positions, strict=True):
            arrays = _arrow_chunks(piece, name, kind)
            if arrays:
                chunks.extend(arrays)
                where.append(positions)
        # large_string: what pandas' string dtype holds, so to_pandas() need not copy it again
        wide = pa.large_string()
        if not chunks:
            return pa.nulls(layout.size, wide)
        pool = _memory_pool()
        values = pa.chunked_array([chunk.cast(wide, memory_pool=pool) for chunk in chunks], wide)
        positions = np.concatenate(where)
        if len(positions) == layout.size and (positions == np.arange(layout.size)).all():
            return values
        index = np.full(layout.size, -1, dtype=np.int64)
        kept = positions >= 0
        index[positions[kept]] = np.flatnonzero(kept)
        return pc.take(values, pa.array(index, mask=index < 0), memory_pool=pool)

    def _object_column(self, name: str, layout: _Layout) -> Any:
        import numpy as np

        out = np.full(layout.size, None, dtype=object)
        for piece, positions in zip(self.pieces, layout.positions, strict=True):
            column = piece.table.column(name) if name in piece.table.column_names else None
            if column is not None and _arrow_kind(column.type) is not None:
                valid = column.is_valid()
                at = positions[valid.to_numpy(zero_copy_only=False)]
                values = column.filter(valid).to_numpy(zero_copy_only=False)
                out[at[at >= 0]] = values[at >= 0]
            rows, patched = piece.patches.get(name, ([], []))
            for row, value in zip(rows, patched, strict=True):
                if positions[row] >= 0:
                    out[positions[row]] = value
        return out


def _layout(logs: list[_ParsedLog], keep: _Bools | None) -> _Layout:
    """Return where each piece row goes: the logs in turn, each in line order, *keep* rows only."""
    import numpy as np

    target: list[_Ints] = []
    offset = 0
    for log in logs:
        lines = np.concatenate([p.lines for p in log.pieces]) if log.pieces else np.zeros(0, int)
        # each line's rank among the log's rows: a running count, no sort (lines are distinct)
        present = np.zeros(int(lines.max()) + 1 if len(lines) else 0, dtype=np.int64)
        present[lines] = 1
        target.append((np.cumsum(present) - 1)[lines] + offset)
        offset += len(lines)
    where = np.concatenate(target) if target else np.zeros(0, np.int64)
    size = offset
    if keep is not None:
        renumber = np.cumsum(keep) - 1
        where = np.where(keep[where], renumber[where], -1)
        size = int(keep.sum())
    sizes = [p.table.num_rows for log in logs for p in log.pieces]
    return _Layout(size, np.split(where, np.cumsum(sizes)[:-1]) if sizes else [])


def _arrow_chunks(piece: _Piece, name: str, kind: Any) -> list[Any]:
    """Return column *name* of *piece* as arrays of type *kind*, Python values patched in.

    Returns no arrays when the piece has no value for *name*.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    table = piece.table
    column = table.column(name) if name in table.column_names else None
    rows, values = piece.patches.get(name, ([], []))
    if column is None or _arrow_kind(column.type) is None:
        if not rows:
            return []
        column = pa.chunked_array([pa.nulls(table.num_rows, kind)], type=kind)
    elif column.type != kind:
        column = column.cast(kind)
    if rows:
        mask = np.zeros(table.num_rows, dtype=bool)
        mask[rows] = True
        column = pc.replace_with_mask(column, pa.array(mask), pa.array(values, type=kind))
    return list(column.chunks) if isinstance(column, pa.ChunkedArray) else [column]


def _column_names(logs: list[_ParsedLog]) -> list[str]:
    """Return the field names, the commonest first, `_nonfinite` left out.

    A field's count is the number of records holding a value (not None) for it; fields as
    common as each other come in the order the logs first hold them (by line, then by place
    in the line), and fields only ever None last, by name. The order is the same whichever
    reader (C, pyarrow, Python) took a line.
    """
    counts: dict[str, int] = {}
    first: dict[str, tuple[int, int, int]] = {}
    for number, log in enumerate(logs):
        for piece in log.pieces:
            for name, (count, (line, place)) in piece.fields.items():
                counts[name] = counts.get(name, 0) + count
                if count:
                    where = (number, line, place)
                    first[name] = min(first.get(name, where), where)
    counts.pop(NONFINITE_KEY, None)
    held = sorted((n for n in counts if counts[n]), key=lambda n: (-counts[n], first[n]))
    none_only = sorted(n for n in counts if not counts[n])
    return [*_FIRST, *(n for n in [*held, *none_only] if n not in _FIRST)]


def _values_at(column: Any, rows: _Ints) -> list[Any]:
    import numpy as np
    import pyarrow as pa

    if isinstance(column, _Numbers):
        values = column.values[rows].tolist()
        return [v if ok else None for v, ok in zip(values, column.valid[rows], strict=True)]
    if isinstance(column, np.ndarray):
        return column[rows].tolist()  # type: ignore[no-any-return]
    return column.take(pa.array(rows)).to_pylist()  # type: ignore[no-any-return]


def _as_floats(column: Any) -> npt.NDArray[np.float64]:
    """Return *column* as floats: NaN where missing or not a number."""
    import numpy as np
    import pyarrow as pa

    if isinstance(column, _Numbers):
        if column.values.dtype == np.float64:
            return column.values
        if column.values.dtype == np.bool_:
            return np.full(len(column), np.nan)
        return np.where(column.valid, column.values, np.nan)
    if isinstance(column, np.ndarray):
        return np.array([_number_or_nan(v) for v in column], dtype=np.float64)
    if _arrow_kind(column.type) in ("int", "float"):
        return column.cast(pa.float64()).to_numpy()  # type: ignore[no-any-return]
    return np.full(len(column), np.nan)


def _number_or_nan(value: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return float("nan")


# --- rows: attempts, rewinds, event filter ---------------------------------------------------


def _rows_per_log(logs: list[_ParsedLog]) -> list[tuple[int, int]]:
    bounds: list[tuple[int, int]] = []
    start = 0
    for log in logs:
        bounds.append((start, start + log.num_rows))
        start += log.num_rows
    return bounds


def _start_fields(table: _Columns, starts: _Ints, name: str) -> list[Any]:
    """Return field *name* of the run_start records at output rows *starts*."""
    if name not in table.names:
        return [None] * len(starts)
    return _values_at(table.get(name), starts)


def _attempts(table: _Columns, logs: list[_ParsedLog]) -> tuple[_Ints, _Bools]:
    """Return each row's attempt and whether a later attempt's resume_step supersedes it."""
    import numpy as np

    attempt = np.ones(table.num_rows, dtype=np.int64)
    superseded = np.zeros(table.num_rows, dtype=bool)
    starts = np.flatnonzero(table.matches("event", ["run_start"]))
    numbers = _start_fields(table, starts, "attempt")
    resumes = np.array([_number_or_nan(r) for r in _start_fields(table, starts, "resume_step")])
    steps = None
    if not np.isnan(resumes).all() and "step" in table.names:
        steps = _as_floats(table.get("step"))
    for first, stop in _rows_per_log(logs):
        mine = (starts >= first) & (starts < stop)
        # the rows before the first run_start, then those from each run_start to the next
        lengths = np.diff(np.concatenate(([0], starts[mine] - first, [stop - first])))
        nums = attempt_numbers([n for n, m in zip(numbers, mine, strict=True) if m])
        attempt[first:stop] = np.repeat([1, *nums], lengths)
        if steps is not None:
            cutoff = np.repeat(step_cutoffs(resumes[mine].tolist()), lengths)
            superseded[first:stop] = steps[first:stop] > cutoff
    return attempt, superseded


def _event_rows(table: _Columns, names: list[str], skipped: set[str]) -> _Bools:
    """Return where the event is one of *names*; raise when none of them occurs at all.

    *skipped* are the events of the buckets that were not read.
    """
    found = table.matches("event", names)
    if found.any() or (table.num_rows == 0 and not skipped):
        return found
    read = {v for v in _distinct(table.get("event")) if isinstance(v, str)}
    present = sorted(read | skipped)
    hint = _did_you_mean(names[0], present)
    msg = f"no record has event {' or '.join(map(repr, names))}{hint}; events: {', '.join(present)}"
    raise FieldError(msg)


def _distinct(column: Any) -> list[Any]:
    import numpy as np
    import pyarrow.compute as pc

    if isinstance(column, _Numbers):
        return []
    if isinstance(column, np.ndarray):
        return list({v for v in column.tolist() if isinstance(v, str)})
    return pc.unique(column).to_pylist()  # type: ignore[no-any-return]


def _did_you_mean(name: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


# --- the frame -------------------------------------------------------------------------------


def _import_pandas(caller: str) -> Any:
    try:
        import pandas as pd
        import pyarrow  # noqa: F401 - the fast reader needs it
    except ImportError as err:
        msg = f"{caller} needs pandas and pyarrow: pip install 'runlines[pandas]'"
        raise ImportError(msg) from err
    return pd


def _prefetch_pandas(caller: str) -> None:
    """Start importing pandas on a thread while the logs are parsed; fail early when absent.

    A first import of pandas takes a third of a second, mostly in Python, while the parse
    mostly runs in pyarrow's threads without the GIL. numpy and pyarrow, which pandas imports
    too, are imported here first, so the two threads never wait on the same module.
    """
    import importlib.util
    import threading

    if "pandas" in sys.modules:
        return
    try:
        missing = not all(importlib.util.find_spec(name) for name in ("pandas", "pyarrow"))
    except (ImportError, ValueError):
        missing = True
    if missing:
        _import_pandas(caller)  # raises the install hint
    import numpy  # noqa: F401
    import pyarrow.compute
    import pyarrow.json  # noqa: F401

    threading.Thread(target=importlib.import_module, args=("pandas",), daemon=True).start()


def load(
    *sources: str | os.PathLike[str],
    event: str | Iterable[str] | None = None,
    columns: Iterable[str] | None = None,
    superseded: bool = False,
    errors: Errors = "warn",
    engine: Literal["pandas", "duckdb"] = "pandas",
) -> pd.DataFrame:
    """Return the records of *sources* (log files or folders of logs) as one DataFrame.

    Args:
        sources: log files, or folders whose ``*.jsonl`` logs (rank files merged) are all read.
        event: keep only records of this event name (or names), before the frame is built.
        columns: the fields to keep; ``ts``, ``event`` and ``run`` are always kept.
        superseded: keep records that a resumed attempt rewound past (dropped by default).
        errors: ``"warn"`` skips bad lines with one warning per file; ``"raise"`` raises.
        engine: ``"duckdb"`` reads through DuckDB (``runlines[duckdb]``), out of core; the
            default pandas reader is faster at every size measured (docs/scale.md).

    Raises:
        ReadError: a missing or unreadable log, or a bad line with ``errors="raise"``.
        FieldError: an event name or a column that no record has.
    """
    import numpy as np

    _check_errors(errors)
    if engine != "pandas":
        return _load_duckdb(sources, event, columns, superseded, errors, engine)
    names = event_names(event)
    found = find_logs(*sources)
    _prefetch_pandas("load()")
    logs = [_read_log(log, errors, names) for log in found]
    pd = _import_pandas("load()")
    table = _Columns(logs)
    attempt, rewound = _attempts(table, logs)
    keep = np.ones(table.num_rows, dtype=bool) if superseded else ~rewound
    if names is not None:
        keep &= _event_rows(table, names, {e for log in logs for e in log.skipped})
    frame = _frame(pd, table, logs, keep, attempt, _output_names(table, logs, columns))
    if names is None or columns is not None:
        return frame
    empty = [n for n in frame.columns if n not in _FIRST and frame[n].isna().all()]
    logged = _logged_fields(empty, table, table.matches("event", names))
    return frame.drop(columns=[n for n in empty if n not in logged])  # other events' fields


def _logged_fields(names: list[str], table: _Columns, wanted: _Bools) -> set[str]:
    """Return which of *names* a record of the wanted events has, as None, NaN or anything.

    *wanted* is, per output row, whether its event is wanted.
    """
    found: set[str] = set()
    for piece, positions in zip(table.pieces, table.full.positions, strict=True):
        mine = wanted[positions]
        for name in names:
            rows = piece.patches.get(name, ([], []))[0]
            if mine[rows].any() or mine[piece.nulls.get(name, [])].any():
                found.add(name)
    return found


def _has_rank(table: _Columns, logs: list[_ParsedLog]) -> bool:
    return "rank" in table.names or any(p.log.rank is not None for p in logs)


def _output_names(
    table: _Columns, logs: list[_ParsedLog], columns: Iterable[str] | None
) -> list[str]:
    derived = ["rank", "attempt"] if _has_rank(table, logs) else ["attempt"]
    if columns is None:
        rest = [n for n in table.names if n not in _FIRST and n not in derived]
        return [*_FIRST, *derived, *rest]
    wanted = [columns] if isinstance(columns, str) else list(columns)
    known = set(table.names) | set(derived)
    unknown = [c for c in wanted if c not in known]
    if unknown:
        fields = ", ".join(sorted(known - set(_FIRST)))
        hint = _did_you_mean(unknown[0], known)
        msg = f"no record has field {unknown[0]!r}{hint}; fields: {fields}"
        raise FieldError(msg)
    return [*_FIRST, *dict.fromkeys(c for c in wanted if c not in _FIRST)]


def _frame(
    pd: Any,
    table: _Columns,
    logs: list[_ParsedLog],
    keep: _Bools,
    attempt: _Ints,
    names: list[str],
) -> pd.DataFrame:
    import numpy as np

    layout = table.full if keep.all() else _layout(logs, keep)

    def built(name: str) -> Any:
        return table.get(name) if layout is table.full else table.build(name, layout)

    which_log = np.repeat(np.arange(len(logs)), [log.num_rows for log in logs])[keep]

    def column(name: str) -> Any:
        if name == "attempt":
            derived = attempt[keep]
            return _own_attempts(built(name), derived) if name in table.names else derived
        if name == "run":
            return _run_column(pd, built(name), logs, which_log)
        if name == "rank":
            return _rank_column(pd, table, layout, logs, which_log)
        return _series(pd, built(name), as_float=name == "ts")

    return pd.DataFrame(dict(zip(names, _in_threads(column, names), strict=True)), copy=False)


def _own_attempts(own: Any, derived: _Ints) -> Any:
    """Return the attempt of each row: the record's own `attempt` field where it has one.

    Run writes `attempt` on run_start and run_end only, where it is the attempt; a record that
    logs a field of that name keeps its value, so nothing is lost. Where every such value is an
    integer the column stays int64; otherwise it holds Python objects.
    """
    import numpy as np

    if isinstance(own, _Numbers) and own.values.dtype == np.int64:
        return np.where(own.valid, own.values, derived)
    if isinstance(own, _Numbers):
        rows = np.flatnonzero(own.valid & ~np.isnan(own.values.astype(np.float64)))
    elif isinstance(own, np.ndarray):
        rows = np.flatnonzero(np.array([v is not None for v in own], dtype=bool))
    else:
        rows = np.flatnonzero(own.is_valid().to_numpy(zero_copy_only=False))
    merged = derived.astype(object)
    for row, value in zip(rows.tolist(), _values_at(own, rows), strict=True):
        merged[row] = value
    return merged


def _series(pd: Any, column: Any, *, as_float: bool = False) -> Any:
    """Return a column for pandas: int64 and bool, or nullable Int64 and boolean with gaps."""
    import numpy as np
    import pyarrow as pa

    if as_float:
        return _as_floats(column)
    if isinstance(column, _Numbers):
        return _numbers_for_pandas(pd, column)
    if isinstance(column, np.ndarray):
        return pd.Series(column, dtype=object, copy=False)
    if column.null_count and _arrow_kind(column.type) in ("int", "bool"):
        nullable = {pa.int64(): pd.Int64Dtype(), pa.bool_(): pd.BooleanDtype()}
        return column.to_pandas(types_mapper=nullable.get)
    return column.to_pandas()


def _numbers_for_pandas(pd: Any, column: _Numbers) -> Any:
    """Return numbers as numpy, or as pandas' nullable Int64 and boolean when some are missing."""
    import numpy as np

    if column.values.dtype == np.float64 or column.valid.all():
        return column.values
    if column.values.dtype == np.bool_:
        return pd.arrays.BooleanArray(column.values, ~column.valid)
    return pd.arrays.IntegerArray(column.values, ~column.valid)


def _run_column(pd: Any, column: Any, logs: list[_ParsedLog], which: _Ints) -> Any:
    """Return the `run` column, filled from the file name where a record has none."""
    import numpy as np

    if not isinstance(column, (np.ndarray, _Numbers)) and column.null_count == 0:
        return column.to_pandas()
    values = np.asarray(_series(pd, column), dtype=object)
    fallback = np.array([log.log.run for log in logs], dtype=object)[which]
    filled = np.where(pd.isna(values), fallback, values)
    return pd.Series(filled, dtype=object if pd.__version__ < "3" else "str")


def _rank_column(
    pd: Any, table: _Columns, layout: _Layout, logs: list[_ParsedLog], which: _Ints
) -> Any:
    """Return the `rank` column, filled from rank file names (and 0 for their main file)."""
    import numpy as np

    ranked = {log.log.run for log in logs if log.log.rank is not None}
    fallback = np.array([_file_rank(log.log, ranked) for log in logs], dtype=np.float64)[which]
    values = _as_floats(table.build("rank", layout)) if "rank" in table.names else fallback
    values = np.where(np.isnan(values), fallback, values)
    with np.errstate(invalid="ignore"):  # a rank no int64 holds (1e300, 2.5) is no rank
        values[(np.abs(values) >= 2**62) | (values != np.floor(values))] = np.nan
    if np.isnan(values).any():
        return pd.array([None if np.isnan(v) else int(v) for v in values], dtype="Int64")
    return values.astype(np.int64)


def _file_rank(log: LogFile, ranked: set[str]) -> float:
    if log.rank is not None:
        return float(log.rank)
    return 0.0 if log.run in ranked else float("nan")


# --- compare ---------------------------------------------------------------------------------


def numeric_fields(frame: pd.DataFrame) -> list[str]:
    """Return the names of the numeric fields of *frame*, bookkeeping columns left out."""
    import pandas as pd

    skip = {"ts", "attempt", "rank", "pid", "dropped", "resume_step", "world_size", "exit_code"}
    return [
        name
        for name in frame.columns
        if name not in skip
        and pd.api.types.is_numeric_dtype(frame[name].dtype)
        and not pd.api.types.is_bool_dtype(frame[name].dtype)
    ]


def _check_numeric(frame: pd.DataFrame, name: str, role: str) -> None:
    fields = numeric_fields(frame)
    if name in fields and frame[name].notna().any():
        return
    what = "is not numeric" if name in frame.columns else "is in no record"
    hint = _did_you_mean(name, fields)
    listed = ", ".join(sorted(fields)) or "(none)"
    msg = f"{role} {name!r} {what}{hint}; numeric fields: {listed}"
    raise FieldError(msg)


def compare(
    *sources: str | os.PathLike[str],
    metric: str,
    by: str = "step",
    event: str | Iterable[str] | None = None,
    agg: str = "mean",
) -> pd.DataFrame:
    """Return one row per value of *by* and one column per run: *metric* aggregated by *agg*.

    Raises:
        FieldError: *metric* or *by* is not a numeric field of any record.
        ValueError: an unknown *agg*.
    """
    if agg not in AGGREGATIONS:
        msg = f"agg must be one of {', '.join(AGGREGATIONS)}, got {agg!r}"
        raise ValueError(msg)
    if metric == by:
        msg = f"metric and by are both {by!r}; compare a metric by another field, e.g. step"
        raise FieldError(msg)
    pd = _import_pandas("compare()")
    frame = load(*sources, event=event)
    _check_numeric(frame, metric, "metric")
    _check_numeric(frame, by, "by")
    rows = frame[frame[metric].notna() & frame[by].notna()]
    table = rows.pivot_table(index=by, columns="run", values=metric, aggfunc=agg, sort=True)
    runs = [run for run in pd.unique(rows["run"]) if run in table.columns]
    table = table.reindex(columns=runs)
    table.columns.name = "run"
    return table


# --- quick looks for the command line (stdlib and orjson) ------------------------------------

_SCAN_CHUNK: Final = 16 << 20
_TAIL_BYTES: Final = 1 << 20  # `ls` looks for the last step and metric this far from the end
_NOT_METRICS: Final = frozenset(
    {"ts", "step", "epoch", "attempt", "rank", "pid", "world_size", "resume_step", "dropped",
     "duration_s", "bytes", "exit_code", "count"}
)  # fmt: skip
_LIFECYCLE: Final = frozenset({"run_start", "run_end", "span", "artifact", "signal"})


def lock_path(log: str | os.PathLike[str]) -> Path:
    """Return the lock file a live writer of *log* holds: ``<log>.lock``."""
    log = Path(log)
    return log.with_name(log.name + ".lock")


def is_locked(log: str | os.PathLike[str]) -> bool:
    """Return whether a live process holds *log*'s lock file; never create a lock file."""
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


def lines_containing(
    path: str | os.PathLike[str], needles: Sequence[bytes]
) -> Iterator[tuple[int, bytes]]:
    """Yield ``(offset, line)`` for each line of *path* that contains one of *needles*, in order.

    Reads in blocks and parses nothing, so it is fast on large logs.
    """
    with _open_log(path) as stream:
        base, carry = 0, b""
        while block := stream.read(_SCAN_CHUNK):
            data = carry + block
            cut = data.rfind(b"\n") + 1
            yield from _found_lines(data[:cut], base, needles)
            base, carry = base + cut, data[cut:]
        yield from _found_lines(carry, base, needles)


def _found_lines(data: bytes, base: int, needles: Sequence[bytes]) -> list[tuple[int, bytes]]:
    found: dict[int, bytes] = {}
    for needle in needles:
        at = data.find(needle)
        while at >= 0:
            start = data.rfind(b"\n", 0, at) + 1
            end = data.find(b"\n", at)
            end = len(data) if end < 0 else end
            found.setdefault(base + start, data[start:end])
            at = data.find(needle, end)
    return sorted(found.items())


def _records_of(lines: Iterable[tuple[int, bytes]]) -> Iterator[tuple[int, dict[str, Any]]]:
    for offset, raw in lines:
        try:
            yield offset, decode_line(raw)
        except ValueError:
            continue  # a torn line: the full readers warn about it


def head_record(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """Return the first record of *path*, or None when its first 64 KiB hold none."""
    with _open_log(path) as stream:
        for raw in stream.read(1 << 16).splitlines():
            try:
                return decode_line(raw)
            except ValueError:
                continue
    return None


def last_records(
    path: str | os.PathLike[str],
    count: int | None = None,
    *,
    events: Collection[str] | None = None,
    max_bytes: int | None = None,
) -> list[dict[str, Any]]:
    """Return up to *count* last records of *path* (all when None), oldest first.

    Reads backwards from the end, at most *max_bytes* when given; keeps only *events* when
    given; skips bad lines silently.
    """
    found: list[dict[str, Any]] = []
    for raw in _lines_backwards(path, max_bytes):
        try:
            record = decode_line(raw)
        except ValueError:
            continue
        if events is None or _event_of(record) in events:
            found.append(record)
        if count is not None and len(found) >= count:
            break
    return found[::-1]


def _lines_backwards(path: str | os.PathLike[str], max_bytes: int | None) -> Iterator[bytes]:
    with _open_log(path) as stream:
        end = stream.seek(0, 2)
        limit = 0 if max_bytes is None else max(0, end - max_bytes)
        # Pieces of the line that goes on past the block being read, nearest first: joined once
        # its start is found, so that a line of many blocks costs linear time, not quadratic.
        pending: list[bytes] = []
        while end > limit:
            start = max(limit, end - (1 << 16))
            stream.seek(start)
            block = stream.read(end - start)
            end = start
            if start > 0 and b"\n" not in block:
                pending.append(block)
                continue
            lines = (block + b"".join(reversed(pending))).split(b"\n")
            pending = [lines[0]] if start > 0 else []
            complete = lines[1:] if start > 0 else lines
            yield from (line for line in reversed(complete) if line.strip())


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def main_metric(records: Sequence[Mapping[str, Any]]) -> str | None:
    """Return the main metric of *records*, the one `runlines ls` shows.

    That is ``loss``, else the first field named like ``*loss*``, else the first numeric field of
    the last record that has a step; bookkeeping fields (step, epoch, pid, ...) never count.
    """
    names = [k for r in records for k, v in r.items() if _is_number(v) and k not in _NOT_METRICS]
    if "loss" in names:
        return "loss"
    lossy = [name for name in names if "loss" in name]
    if lossy:
        return lossy[0]
    for record in reversed(records):
        if "step" in record and _event_of(record) not in _LIFECYCLE:
            numeric: list[str] = [
                k for k, v in record.items() if _is_number(v) and k not in _NOT_METRICS
            ]
            if numeric:
                return numeric[0]
    return None


def last_value(records: Sequence[Mapping[str, Any]], name: str) -> Any:
    """Return the last numeric value of field *name* in *records*, or None."""
    for record in reversed(records):
        if _is_number(record.get(name)):
            return record[name]
    return None


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What `runlines ls` shows of one run: from its lifecycle records and its last records."""

    log: LogFile
    status: str  # ok, failed, interrupted, terminated, running or died
    attempts: int
    started: float | None  # ts of the first record
    last: float | None  # ts of the last record
    step: Any
    metric: str | None
    value: Any

    @property
    def duration_s(self) -> float | None:
        """Seconds from the first record to the last."""
        if self.started is None or self.last is None:
            return None
        return self.last - self.started


def lifecycle(path: str | os.PathLike[str]) -> list[tuple[int, dict[str, Any]]]:
    """Return ``(offset, record)`` for the run_start and run_end records of *path*."""
    lines = lines_containing(path, (b'"run_start"', b'"run_end"'))
    return [(at, r) for at, r in _records_of(lines) if r.get("event") in ("run_start", "run_end")]


def run_status(path: str | os.PathLike[str], marks: list[tuple[int, dict[str, Any]]]) -> str:
    """Return how the last attempt of *path* ended, or running/died when it has no run_end."""
    starts = [at for at, r in marks if r.get("event") == "run_start"]
    ends = [(at, r) for at, r in marks if r.get("event") == "run_end"]
    if ends and (not starts or ends[-1][0] > starts[-1]):
        status = ends[-1][1].get("status")
        return status if isinstance(status, str) and status else "ok"
    return "running" if is_locked(path) else "died"


def attempt_count(marks: list[tuple[int, dict[str, Any]]]) -> int:
    """Return the number of attempts: the highest run_start `attempt`, or their count."""
    numbers = [r.get("attempt") for _, r in marks if r.get("event") == "run_start"]
    ints = [n for n in numbers if isinstance(n, int) and not isinstance(n, bool)]
    return max([len(numbers), *ints]) if numbers else 1


def summarize(log: LogFile) -> RunSummary:
    """Return the `ls` line of *log*: it reads the lifecycle lines and the last MiB only."""
    marks = lifecycle(log.path)
    tail = last_records(log.path, max_bytes=_TAIL_BYTES)
    first = head_record(log.path)
    metric = main_metric(tail)
    steps = [r["step"] for r in tail if _is_number(r.get("step"))]
    return RunSummary(
        log=log,
        status=run_status(log.path, marks),
        attempts=attempt_count(marks) if tail or marks else 0,
        started=_ts(first),
        last=_ts(tail[-1]) if tail else None,
        step=steps[-1] if steps else None,
        metric=metric,
        value=last_value(tail, metric) if metric else None,
    )


def _ts(record: Mapping[str, Any] | None) -> float | None:
    value = None if record is None else record.get("ts")
    try:
        return float(value) if _is_number(value) else None
    except OverflowError:  # an int beyond any float, from a foreign writer
        return None


def _event_of(record: Mapping[str, Any]) -> str | None:
    """Return the record's event name, or None when it has none or it is not a string."""
    event = record.get("event")
    return event if isinstance(event, str) else None


@dataclass(slots=True)
class RunDetails:
    """What `runlines show` prints of one log file, gathered in one pass."""

    log: LogFile
    starts: list[dict[str, Any]] = field(default_factory=list)
    ends: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    spans: dict[str, dict[str, float]] = field(default_factory=dict)
    last: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # field -> (value, step)
    first_ts: float | None = None
    last_ts: float | None = None
    status: str = "died"

    def add(self, record: dict[str, Any]) -> None:
        """Count *record* in."""
        event = record.get("event")
        name = event if isinstance(event, str) else "(no event)"
        self.counts[name] = self.counts.get(name, 0) + 1
        ts = _ts(record)
        self.first_ts = ts if self.first_ts is None else self.first_ts
        self.last_ts = ts if ts is not None else self.last_ts
        if name == "run_start":
            self.starts.append(record)
        elif name == "run_end":
            self.ends.append(record)
        elif name == "artifact":
            self.artifacts.append(record)
        elif name == "span":
            _add_span(self.spans, record)
        elif name not in _LIFECYCLE:
            self._add_values(record)

    def _add_values(self, record: dict[str, Any]) -> None:
        step = record.get("step")
        for key, value in record.items():
            if _is_number(value) and key not in ("ts", "rank", "step"):
                self.last[key] = (value, step)


def _add_span(spans: dict[str, dict[str, float]], record: Mapping[str, Any]) -> None:
    name, duration = record.get("name"), record.get("duration_s")
    if not isinstance(name, str) or not _is_number(duration):
        return
    stats = spans.setdefault(name, {"count": 0, "total_s": 0.0, "mean_s": 0.0, "max_s": 0.0})
    stats["count"] += 1
    stats["total_s"] += duration
    stats["mean_s"] = stats["total_s"] / stats["count"]
    stats["max_s"] = max(stats["max_s"], duration)


def describe(log: LogFile) -> RunDetails:
    """Return what `runlines show` prints of *log*, reading every record once.

    Raises:
        ReadError: the log has no records (empty, or not JSON Lines).
    """
    details = RunDetails(log)
    seen_end_after_start = False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for record in iter_events(log.path):
            details.add(record)
            if record.get("event") in ("run_start", "run_end"):
                seen_end_after_start = record.get("event") == "run_end"
    if not details.counts:
        what = "none of its lines is a JSON object" if caught else "it is empty"
        msg = f"{log.path} has no records: {what}; pass a .jsonl log written by runlines.Run"
        raise ReadError(msg, str(log.path))
    for warning in caught:
        warnings.warn(warning.message, warning.category, stacklevel=2)
    if "(no event)" in details.counts and len(details.counts) == 1:
        msg = f"{log.path} is not a runlines log: no record has an 'event' field"
        raise ReadError(msg, str(log.path))
    _finish(details, ended=seen_end_after_start)
    return details


def _finish(details: RunDetails, *, ended: bool) -> None:
    """Set the status (from the last run_end, or the lock) and the run_end's span summary."""
    if details.ends and ended:
        status = details.ends[-1].get("status")
        details.status = status if isinstance(status, str) and status else "ok"
    else:
        details.status = "running" if is_locked(details.log.path) else "died"
    spans = details.ends[-1].get("spans") if details.ends else None
    if isinstance(spans, dict) and all(isinstance(stats, dict) for stats in spans.values()):
        details.spans = spans


def sha256_of(path: str | os.PathLike[str]) -> str:
    """Return the hex SHA-256 of the file at *path*, read in 1 MiB blocks."""
    import hashlib

    digest = hashlib.sha256()
    with _open_log(path) as stream:
        while block := stream.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True, slots=True)
class ArtifactMatch:
    """A run that registered a file: where, in which attempt and at which step."""

    log: LogFile
    attempt: int
    record: dict[str, Any]


def find_artifact(digest: str, logs: Iterable[LogFile]) -> list[ArtifactMatch]:
    """Return the artifact records with sha256 *digest* in *logs*.

    Only the lines that hold both ``"artifact"`` and the digest are parsed, and the run_start
    lines, for the attempt.
    """
    needle = digest.lower().encode()
    matches: list[ArtifactMatch] = []
    for log in logs:
        attempt = 1
        found = lines_containing(log.path, (needle, b'"run_start"'))
        lines = ((at, raw) for at, raw in found if b'"run_start"' in raw or b'"artifact"' in raw)
        for _, record in _records_of(lines):
            if record.get("event") == "run_start":
                attempt = record["attempt"] if _is_number(record.get("attempt")) else attempt + 1
            elif record.get("event") == "artifact" and record.get("sha256") == digest.lower():
                matches.append(ArtifactMatch(log, attempt, record))
    return matches


class LogFollower:
    """Read the records appended to a log since the last call, like ``tail -f``.

    Keeps a torn last line until its newline arrives; starts over when the file shrinks.
    """

    def __init__(self, path: str | os.PathLike[str], offset: int = 0) -> None:
        self.path = Path(path)
        self.offset = offset
        self.pending = b""
        self.skipped = 0

    def poll(self) -> list[dict[str, Any]]:
        """Return the complete records written since the last poll, oldest first."""
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return []
        if size < self.offset:  # truncated or replaced: read it again from the start
            self.offset, self.pending = 0, b""
        with _open_log(self.path) as stream:
            stream.seek(self.offset)
            data = self.pending + stream.read(size - self.offset)
        self.offset = size
        cut = data.rfind(b"\n") + 1
        self.pending = data[cut:]
        return self._decode(data[:cut].split(b"\n"))

    def _decode(self, lines: list[bytes]) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = []
        for raw in lines:
            if not raw.strip():
                continue
            try:
                records.append(decode_line(raw))
            except ValueError:
                self.skipped += 1
        return records
