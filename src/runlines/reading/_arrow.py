"""The pyarrow engine: a log's lines into Arrow tables, and columns over several logs.

load() reads a log with pyarrow's JSON reader: lines bucketed by event (one narrow schema per
call), each bucket in blocks. Python (orjson) takes only the lines pyarrow cannot: torn, odd,
nested, non-finite or type-conflicting ones. numpy and pyarrow are imported in the functions.
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import re
import threading
import warnings
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

import orjson

from runlines._encoding import NONFINITE_KEY, restore_nonfinite
from runlines.errors import FieldError, ReadError, RunlinesWarning
from runlines.reading._files import LogFile
from runlines.reading._lines import (
    INT64_PAST,
    bad_line_error,
    decode_line,
    open_log,
    skipped_lines_message,
)
from runlines.reading._rules import (
    FIRST_COLUMNS,
    Errors,
    attempt_numbers,
    did_you_mean,
    step_cutoffs,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    _Ints = npt.NDArray[np.int64]
    _Bytes = npt.NDArray[np.uint8]
    _Bools = npt.NDArray[np.bool_]

_T = TypeVar("_T")


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
    # each column's place in the table: a name lookup per column must not scan all names
    places: dict[str, int] = field(default_factory=dict)
    event: str | None = None  # the one event of all rows, when the piece is one event's bucket

    def column(self, name: str) -> Any:
        """Return column *name* of the table, or None when it has none."""
        place = self.places.get(name)
        return None if place is None else self.table.column(place)

    def __post_init__(self) -> None:
        self.places = {name: i for i, name in enumerate(self.table.column_names)}
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
    # each output row's attempt and whether it is superseded, when a Parquet copy knows them
    attempts: tuple[_Ints, _Bools] | None = None
    # a copy's one piece: its first `in_order` rows are the records no later attempt
    # supersedes, in line order, and the superseded ones follow (see `_layout`)
    in_order: int | None = None
    late: _Ints | None = None  # with in_order: the output places of the rows after those
    refused: bool = False  # a line pyarrow read is one that orjson refuses (iter_events skips)

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
    rows: _Ints, keys: npt.NDArray[np.uint64], least: int
) -> tuple[list[tuple[int, _Ints]], _Ints]:
    """Return the keys of at least *least* rows, the commonest first, each with its *rows* in
    line order; and the other rows, in line order.

    One stable sort: half the time of np.unique's sort followed by a second one for the rows.
    Only the common keys are split out: a log not in Run's format can give each line a key.
    """
    import numpy as np

    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    cuts = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1
    bounds = np.concatenate(([0], cuts, [len(ordered)]))
    counts = np.diff(bounds)
    common = np.flatnonzero(counts >= least)
    common = common[np.argsort(-counts[common], kind="stable")]
    by_key = rows[order]
    big = [(int(ordered[bounds[i]]), by_key[bounds[i] : bounds[i + 1]]) for i in common.tolist()]
    rare = np.ones(len(rows), dtype=bool)
    for i in common.tolist():
        rare[bounds[i] : bounds[i + 1]] = False
    return big, np.sort(by_key[rare])


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

    def __init__(
        self,
        log: LogFile,
        data: _Bytes,
        events: Collection[str] | None,
        *,
        find_nulls: bool = False,
    ) -> None:
        self.log = log
        self.events = None if events is None else {*events, "run_start"}  # attempts need these
        # the rows holding a field as null: an event filter needs them (see _Piece.nulls)
        self.find_nulls = find_nulls or events is not None
        self.records: dict[int, dict[str, Any]] = {}
        self.bad: list[tuple[int, str]] = []
        self.skipped: set[str] = set()
        self.string_columns: set[str] = set()
        self.refused = False
        if bytes(data[:3]) == b"\xef\xbb\xbf":
            data[:3] = 32  # a byte-order mark some editors add: spaces
        self.main = _Lines(self, data, *_line_bounds(data), None)

    def read(self) -> _ParsedLog:
        """Return the log's records as Arrow tables with Python patches, and its bad lines."""
        import numpy as np

        self.main.sort_lines()
        buckets = self.main.buckets()
        names = [self._event_of(bucket) for bucket in buckets]
        skip = [self.events is not None and n is not None and n not in self.events for n in names]
        self.skipped.update(n for n, no in zip(names, skip, strict=True) if no and n is not None)
        take = self.main.gather  # pyarrow reads spans: a bucket's lines are moved together
        parts = [
            (take(bucket.lines), name)
            for bucket, name, no in zip(buckets[1:], names[1:], skip[1:], strict=True)
            if not no
        ]
        unwanted = [bucket for bucket, no in zip(buckets, skip, strict=True) if no]
        if skip and skip[0]:  # the commonest event is not wanted: read only what is left
            for bucket in unwanted:
                self.main.is_row[bucket.lines] = False
            parts.append((take(np.flatnonzero(self.main.is_row)), None))
        else:
            for bucket in unwanted:
                self.main.blank(bucket.lines)
            parts.insert(0, (self.main, None))
        pieces = []
        for lines, name in parts:
            for piece in lines.read():
                piece.event = name
                pieces.append(piece)
        parsed = _ParsedLog(self.log, pieces, sorted(self.bad), self.skipped)
        parsed.refused = self.refused
        return parsed

    def _event_of(self, bucket: _Bucket) -> str | None:
        """Return the one event all lines of *bucket* hold, or None when it may hold several."""
        if bucket.key == 0:
            return None
        line = int(bucket.lines[0])
        head = bytes(self.main.view[int(self.main.starts[line]) : int(self.main.ends[line])][:64])
        match = _RUN_HEAD.match(head)
        # the key covers the name only when it is 15 bytes or fewer
        return None if match is None else match[1].decode()


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
        common, rare = _groups(rows, _event_keys(self.bytes, self.starts[rows]), _MIN_BUCKET)
        if not common:
            return []
        big = [_Bucket(lines, key) for key, lines in common]
        return big + ([_Bucket(rare, 0)] if len(rare) else [])

    def gather(self, lines: _Ints) -> _Lines:
        """Move *lines* into a buffer of their own, leaving spaces in this one."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        from runlines.reading._buffers import from_numpy

        # Each line with its newline is one value of a binary array over the buffer (every line
        # ends in a newline, see _read_bytes): one take() copies them all, in C.
        bounds = np.append(self.starts, len(self.bytes)).astype(np.int64)
        buffers = [None, pa.py_buffer(bounds), pa.py_buffer(self.bytes)]
        every = pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(self.starts), buffers)
        taken = pc.take(every, from_numpy(lines, pa.int64()), memory_pool=_memory_pool())
        offsets = np.frombuffer(taken.buffers()[1], dtype=np.int64)[: len(lines) + 1]
        data = np.frombuffer(taken.buffers()[2], dtype=np.uint8)[: int(offsets[-1])]  # writable
        new_starts = offsets[:-1]
        lengths = self.ends[lines] - self.starts[lines]
        ids = lines if self.ids is None else self.ids[lines]
        moved = _Lines(self.owner, data, new_starts, new_starts + lengths, ids)
        moved.in_python[:] = self.in_python[lines]
        self.blank(lines)
        return moved

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
        """Return this buffer's records, one piece per block that pyarrow read."""
        import numpy as np

        cuts = np.arange(_BLOCK_BYTES, len(self.bytes), _BLOCK_BYTES)
        bounds = np.unique(
            np.concatenate(([0], np.searchsorted(self.starts, cuts), [len(self.starts)]))
        )
        ranges = list(itertools.pairwise(bounds.tolist()))
        return [p for i0, i1 in ranges for p in self._read_range(i0, i1)]

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

    def _piece(self, table: Any, i0: int, i1: int) -> _Piece:
        """Wrap *table*, re-parsing in Python the rows that hold nested or non-finite values."""
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
        if self.owner.find_nulls:
            self._find_nulls(piece, lines)
        return piece

    def _note_fields(self, piece: _Piece, lines: _Ints) -> None:
        """Count the rows of *piece* holding a value (not None) per field, and note where the
        first one is: its line, and the field's place in that line (see `_column_names`).
        """
        import numpy as np

        from runlines.reading._buffers import valid_of

        table = piece.table
        held: dict[str, tuple[int, int]] = {}  # name: (count, first row)
        valid: dict[str, _Bools] = {}
        for name, column in zip(table.column_names, table.columns, strict=True):
            count = len(column) - column.null_count
            if column.null_count:
                valid[name] = valid_of(column)
            if count:
                held[name] = (count, int(np.argmax(valid[name])) if name in valid else 0)
        for name, (rows, values) in piece.patches.items():
            mask = valid.get(name)
            in_table = name in piece.places
            mine = [
                row
                for row, value in zip(rows, values, strict=True)
                if value is not None and (not in_table or (mask is not None and not mask[row]))
            ]
            if mine:  # rows whose value only Python has (a nested row's is in the table too)
                count, row = held.get(name, (0, mine[0]))
                held[name] = (count + len(mine), min(row, min(mine)))
        order: dict[int, dict[str, int]] = {}
        for name, (count, row) in held.items():
            if row not in order:
                order[row] = {k: i for i, k in enumerate(self._keys(int(lines[row]), table))}
            keys = order[row]
            place = keys.get(name, len(keys))
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

        from runlines.reading._buffers import numpy_of

        found: dict[str, _Ints] = {}
        for name, column in zip(table.column_names, table.columns, strict=True):
            if _arrow_kind(column.type) != "float" or column.null_count == len(column):
                continue
            extremes = pc.min_max(column).as_py()
            if max(abs(extremes["min"]), abs(extremes["max"])) < 2.0**63:
                continue
            values = numpy_of(column)
            with np.errstate(invalid="ignore"):
                suspects = np.flatnonzero(np.abs(values) >= 2.0**63).tolist()
            spans = ((int(self.starts[lines[r]]), int(self.ends[lines[r]])) for r in suspects)
            if any(INT64_PAST.search(bytes(self.view[a:b])) for a, b in spans):
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
            self.owner.refused = True
            record: dict[str, Any] = table.slice(row, 1).to_pylist()[0]
            return restore_nonfinite(record)


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

    from runlines.reading._buffers import valid_of

    mask = np.zeros(table.num_rows, dtype=bool)
    for column in table.columns:
        if pa.types.is_nested(column.type):
            mask |= valid_of(column)
    return np.flatnonzero(mask)


def _read_log(log: LogFile, errors: Errors, events: Collection[str] | None = None) -> _ParsedLog:
    """Parse one log file (*events* only, when given); warn once about its bad lines, or raise."""
    parsed = _FileReader(log, _read_bytes(log.path), events).read()
    return checked(parsed, errors, stacklevel=5)


def checked(parsed: _ParsedLog, errors: Errors, *, stacklevel: int) -> _ParsedLog:
    """Return *parsed*; raise on its first bad line, or warn once about them all.

    Raises:
        ReadError: a bad line with ``errors="raise"``, or a file with no record at all.
    """
    log = parsed.log
    if parsed.bad and errors == "raise":
        line, reason = parsed.bad[0]
        raise bad_line_error(log.path, line, reason)
    if parsed.bad and not parsed.pieces:
        msg = (
            f"{log.path} is not a runlines log: none of its {len(parsed.bad)} lines is a JSON "
            "object; pass a .jsonl log written by runlines.Run"
        )
        raise ReadError(msg, str(log.path), parsed.bad[0][0])
    if parsed.bad:
        lines = [line for line, _ in parsed.bad]
        warnings.warn(
            skipped_lines_message(log.path, lines), RunlinesWarning, stacklevel=stacklevel
        )
    return parsed


def _read_bytes(path: Path) -> _Bytes:
    """Return the bytes of *path*, a newline added when its last line has none.

    numpy's empty buffer skips the zero-filling a bytearray of that size costs.
    """
    import numpy as np

    with open_log(path) as stream:
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


_KINDS: Final = {type(None): None, bool: "bool", int: "int", float: "float", str: "str"}


def _python_kinds(values: Sequence[Any]) -> set[str | None]:
    """Return the value kinds of Python *values* (None for None), by their distinct types."""
    types = set(map(type, values))
    kinds = {_KINDS.get(kind, "other") for kind in types}
    if int in types:
        ints = [value for value in values if type(value) is int]
        if not -(2**63) <= min(ints) <= max(ints) < 2**63:
            kinds.add("bigint")  # exact in an object column, not rounded into floats
    return kinds


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


class _Numbers:
    """A number or boolean column as numpy values and where they are present.

    Floats hold NaN where missing; ints and bools hold 0 or False there. Where they are
    present may be made on first use (*validity*): a frame of floats never asks.
    """

    __slots__ = ("_valid", "_validity", "values")

    def __init__(
        self,
        values: npt.NDArray[Any],
        valid: _Bools | None = None,
        *,
        validity: Callable[[], _Bools] | None = None,
    ) -> None:
        self.values = values
        self._valid = valid
        self._validity = validity

    @property
    def valid(self) -> _Bools:
        """Return, per row, whether it holds a value."""
        if self._valid is None:
            assert self._validity is not None, "a _Numbers needs valid or validity"
            self._valid, self._validity = self._validity(), None
        return self._valid

    def __len__(self) -> int:
        return len(self.values)


class _Layout:
    """Where each piece's rows go in the output: one array per piece, -1 for a dropped row.

    Where each piece's kept rows are in output order (copies alone), `taken` says which
    rows of each piece the output takes in turn: its first N rows (an int: slices of the
    piece's columns, nothing reordered), or those of a mask. The positions are
    then made only when asked for.
    """

    __slots__ = ("_offsets", "_positions", "rows", "size", "taken")

    def __init__(
        self,
        size: int,
        positions: list[_Ints] | None = None,
        *,
        taken: list[int | _Bools] | None = None,
        rows: list[int] | None = None,
    ) -> None:
        self.size = size
        self._positions = positions
        self.taken = taken
        self.rows = rows  # each piece's row count, with `taken`
        self._offsets: list[int] | None = None  # with `taken`: each piece's first place

    @property
    def positions(self) -> list[_Ints]:
        """Return, per piece, each row's place in the output (-1: dropped)."""
        import numpy as np

        if self._positions is None:
            counts = self.rows or []
            self._positions = [self.places(i, np.arange(count)) for i, count in enumerate(counts)]
        return self._positions

    def places(self, piece: int, rows: _Ints) -> _Ints:
        """Return the output places of rows *rows* of piece number *piece* (-1: dropped),
        without the positions of all its rows where `taken` says them."""
        if self.taken is None:
            return self.positions[piece][rows]
        if self._offsets is None:
            counts = map(self.kept, range(len(self.taken)))
            self._offsets = list(itertools.accumulate(counts, initial=0))
        return _places(rows, self.taken[piece], self._offsets[piece])

    def kept(self, piece: int) -> int:
        """Return how many rows of piece number *piece* the output takes (with `taken`)."""
        taken = (self.taken or [])[piece]
        return taken if isinstance(taken, int) else int(taken.sum())


class _Columns:
    """The columns of several parsed logs, each built straight into output order.

    A piece holds one bucket's rows, so the pieces of a log are not in line order; the output
    has the logs in turn and each log's records in line order.
    """

    def __init__(self, logs: list[_ParsedLog]) -> None:
        self.pieces = [piece for log in logs for piece in log.pieces]
        self.num_rows = sum(piece.table.num_rows for piece in self.pieces)
        self.names = _column_names(logs)
        self._logs = logs
        self._full: _Layout | None = None
        self._built: dict[str, Any] = {}
        self._releasing = threading.Lock()

    @property
    def full(self) -> _Layout:
        """Return the layout of all rows, each log's records in line order (made once)."""
        if self._full is None:
            self._full = _layout(self._logs, None)
        return self._full

    def release(self, name: str) -> None:
        """Drop the pieces' Arrow values of column *name*: the frame that was built from them
        holds them now, and a frame's peak memory is not then the table's and the frame's.

        Column *name* reads as missing afterwards.
        """
        import pyarrow as pa

        with self._releasing:  # the frame's columns are built (and released) on threads
            self._built.pop(name, None)
            for piece in self.pieces:
                place = piece.places.get(name)
                if place is not None:
                    nulls = pa.nulls(piece.table.num_rows)  # type null: no buffers
                    piece.table = piece.table.set_column(place, name, nulls)
        # the freed pages stay in pyarrow's pool (mimalloc) for the columns built next: giving
        # them back to the system after each column cost more time than it saved memory

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

        from runlines.reading._buffers import numpy_of, strings

        out = np.zeros(self.full.size, dtype=bool)
        choices = strings(list(wanted))
        for piece, positions in zip(self.pieces, self.full.positions, strict=True):
            hit = np.zeros(piece.table.num_rows, dtype=bool)
            column = piece.column(name)
            if column is not None and _arrow_kind(column.type) == "str":
                found = pc.is_in(column.cast(pa.string()), value_set=choices)
                hit = numpy_of(found)  # a null as False
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

        kinds: set[str | None] = set()
        for piece in self.pieces:
            kinds |= _python_kinds(piece.patches.get(name, ((), ()))[1])
            place = piece.places.get(name)
            if place is not None:
                kinds.add(_arrow_kind(piece.table.schema.field(place).type))
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

        from runlines.reading._buffers import numpy_of, valid_of

        if layout.taken is not None:
            return self._numbers_in_order(name, kind, layout)
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
            values[positions] = numpy_of(column)  # NaN, 0 or False where missing
            if column.null_count:
                valid[positions] = valid_of(column)
            else:  # the common case: no bitmap to expand
                valid[positions] = True
        return _Numbers(values[:-1], valid[:-1])

    def _numbers_in_order(self, name: str, kind: Any, layout: _Layout) -> _Numbers:
        """Take each piece's numbers as they are, its kept rows only: pieces in output order.

        Each column is one copy of the Arrow values into numpy (whose arrays pandas may write
        into in place), none reordered.
        """
        import numpy as np
        import pyarrow as pa

        from runlines.reading._buffers import numpy_of

        is_float = pa.types.is_floating(kind)
        dtype = np.float64 if is_float else kind.to_pandas_dtype()
        values: list[npt.NDArray[Any]] = []
        valid: list[Callable[[], _Bools]] = []  # per piece, a maker of its present mask
        for number, (piece, taken) in enumerate(zip(self.pieces, layout.taken or [], strict=True)):
            arrays = _arrow_chunks(piece, name, kind)
            if not arrays:
                kept = layout.kept(number)
                values.append(np.full(kept, np.nan) if is_float else np.zeros(kept, dtype))
                valid.append(functools.partial(_same, np.zeros(kept, dtype=bool)))
                continue
            column = pa.chunked_array(arrays, type=kind)
            if isinstance(taken, int):
                column = column.slice(0, taken)
            present = _validity(column)
            if is_float:  # NaN where missing
                numbers = numpy_of(column)
            else:  # ints and bools use their mask now
                mask = present()
                present = functools.partial(_same, mask)
                ints = pa.types.is_integer(kind)
                numbers = _own_ints(column, mask) if ints else numpy_of(column)
            if isinstance(taken, int):
                # pandas writes into a frame's columns in place: numpy's own, not Arrow's
                values.append(numbers if numbers.flags.writeable else numbers.copy())
                valid.append(present)
            else:
                values.append(numbers[taken])
                valid.append(functools.partial(_rows_of, present, taken))
        if not values:
            return _Numbers(np.zeros(0, dtype), np.zeros(0, dtype=bool))
        joined = values[0] if len(values) == 1 else np.concatenate(values)
        validity = functools.partial(_joined, valid)
        # a float column's mask is made only when asked for: load() never asks
        return _Numbers(joined, validity=validity) if is_float else _Numbers(joined, validity())

    def _arrow_column(self, name: str, kind: Any, layout: _Layout) -> Any:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        from runlines.reading._buffers import from_numpy

        if layout.taken is not None:  # pieces in output order: their kept rows, in turn
            return self._arrow_in_order(name, layout)
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
        return pc.take(values, from_numpy(index, pa.int64(), valid=index >= 0), memory_pool=pool)

    def _arrow_in_order(self, name: str, layout: _Layout) -> Any:
        import pyarrow as pa
        import pyarrow.compute as pc

        from runlines.reading._buffers import from_numpy

        wide = pa.large_string()
        pool = _memory_pool()
        parts: list[Any] = []
        for number, (piece, taken) in enumerate(zip(self.pieces, layout.taken or [], strict=True)):
            arrays = _arrow_chunks(piece, name, wide)
            if not arrays:
                parts.append(pa.nulls(layout.kept(number), wide))
                continue
            column = pa.chunked_array([c.cast(wide, memory_pool=pool) for c in arrays], wide)
            if isinstance(taken, int):
                column = column.slice(0, taken)
            else:
                column = pc.filter(column, from_numpy(taken, pa.bool_()), memory_pool=pool)
            parts.extend(column.chunks)
        return pa.chunked_array(parts, wide)

    def _object_column(self, name: str, layout: _Layout) -> Any:
        """Return an object column, placing only the rows that hold a value."""
        import numpy as np

        from runlines.reading._buffers import valid_of

        out = np.empty(layout.size, dtype=object)  # numpy fills its slots with None
        for number, piece in enumerate(self.pieces):
            column = piece.column(name)
            kind = None if column is None else _arrow_kind(column.type)
            if column is not None and kind is not None:
                at = layout.places(number, np.flatnonzero(valid_of(column)))
                values = np.empty(len(at), dtype=object)
                if kind == "other":  # numpy's values, as pandas would hold them
                    values[:] = column.drop_null().to_numpy(zero_copy_only=False)
                else:  # Python's str, int, float and bool, as to_numpy() gives them
                    values[:] = column.drop_null().to_pylist()
                out[at[at >= 0]] = values[at >= 0]
            rows, patched = piece.patches.get(name, ([], []))
            if rows:
                at = layout.places(number, np.asarray(rows, dtype=np.int64))
                out[at[at >= 0]] = _objects(patched)[at >= 0]
        return out


def _validity(column: Any) -> Callable[[], _Bools]:
    """Return a maker of *column*'s present mask: its bitmap is taken now, and unpacked into
    bools (a byte a row) only when called."""
    import numpy as np

    from runlines.reading._buffers import valid_of

    size = len(column)
    if not column.null_count:
        return lambda: np.ones(size, dtype=bool)
    return functools.partial(valid_of, column)


def _same(mask: _Bools) -> _Bools:
    """Return *mask* (a maker of a mask already made)."""
    return mask


def _rows_of(present: Callable[[], _Bools], taken: _Bools) -> _Bools:
    """Return the rows *taken* of the mask *present* makes."""
    return present()[taken]


def _joined(makers: list[Callable[[], _Bools]]) -> _Bools:
    """Return the masks *makers* make, as one mask."""
    import numpy as np

    masks = [make() for make in makers]
    return masks[0] if len(masks) == 1 else np.concatenate(masks)


def _objects(values: list[Any]) -> npt.NDArray[np.object_]:
    """Return *values* as a numpy object array, one slot each (a list stays one value)."""
    import numpy as np

    return np.fromiter(values, dtype=object, count=len(values))


def _layout(logs: list[_ParsedLog], keep: _Bools | None) -> _Layout:
    """Return where each piece row goes: the logs in turn, each in line order, *keep* rows only."""
    import numpy as np

    if logs and all(log.in_order is not None for log in logs):
        found = _in_order(logs, keep)
        if found is not None:
            return found
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


def _places(rows: _Ints, taken: int | _Bools, offset: int) -> _Ints:
    """Return the output places of rows *rows* of a piece that the output takes as *taken*
    says (see `_Layout`), from *offset* on; -1 for a row it drops."""
    import numpy as np

    if isinstance(taken, int):
        return np.where(rows < taken, rows + offset, -1)
    return np.where(taken[rows], np.cumsum(taken, dtype=np.int64)[rows] - 1 + offset, -1)


def _own_ints(column: Any, present: _Bools) -> _Ints:
    """Return an int64 column as a numpy array of its own, 0 where missing: one copy of the
    Arrow values (`fill_null` would make a second)."""
    import numpy as np

    from runlines.reading._buffers import numpy_of

    # one chunk as it is: combine_chunks() would copy a slice of it
    chunk = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    if not chunk.null_count:
        return np.array(numpy_of(chunk), dtype=np.int64)
    if chunk.null_count > len(chunk) // 2:  # mostly missing: zeros (pages the system gives
        values = np.zeros(len(chunk), dtype=np.int64)  # untouched), the few values placed
        values[present] = numpy_of(chunk.drop_null())
        return values
    data = np.frombuffer(chunk.buffers()[1], dtype=np.int64)
    return np.where(present, data[chunk.offset : chunk.offset + len(chunk)], 0)


def _in_order(logs: list[_ParsedLog], keep: _Bools | None) -> _Layout | None:
    """Return the layout of copies' pieces that takes each one's rows as they are, or None
    where the output needs a superseded row (which a copy stores after the others)."""
    import numpy as np

    taken: list[int | _Bools] = []
    rows: list[int] = []
    offset = 0
    for log in logs:
        size = log.num_rows
        for piece in log.pieces:  # one, or none
            first = log.in_order or 0
            late = log.late if log.late is not None else np.zeros(0, np.int64)
            mine = None if keep is None else keep[offset : offset + size]
            if mine is None or mine.all():
                if first < size:
                    return None  # superseded rows wanted: in line order only by positions
                taken.append(size)
            elif mine[late].any():
                return None
            else:
                early = np.delete(mine, late) if len(late) else mine  # the first rows' keep
                if early.all():
                    taken.append(first)
                else:
                    mask = np.zeros(size, dtype=bool)
                    mask[:first] = early
                    taken.append(mask)
            rows.append(piece.table.num_rows)
        offset += size
    layout = _Layout(0, taken=taken, rows=rows)
    layout.size = sum(layout.kept(number) for number in range(len(taken)))
    return layout


def _values(values: list[Any], kind: Any) -> Any:
    """Return Python *values* of one kind as an Arrow array of type *kind*."""
    import numpy as np
    import pyarrow as pa

    from runlines.reading._buffers import from_numpy, strings

    kinds = set(map(type, values))
    if kinds <= {str, type(None)} and (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        return strings(values, kind)
    exact = {int} if pa.types.is_integer(kind) else {float} if pa.types.is_floating(kind) else set()
    if (exact and kinds <= exact) or (pa.types.is_boolean(kind) and kinds <= {bool}):
        dtype = bool if pa.types.is_boolean(kind) else kind.to_pandas_dtype()
        try:
            return from_numpy(np.asarray(values, dtype=dtype), kind)
        except OverflowError:
            pass  # pyarrow says what does not fit
    return pa.array(values, type=kind)  # None among them, or another kind: pyarrow's rules


def _arrow_chunks(piece: _Piece, name: str, kind: Any) -> list[Any]:
    """Return column *name* of *piece* as arrays of type *kind*, Python values patched in.

    Returns no arrays when the piece has no value for *name*.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from runlines.reading._buffers import from_numpy

    table = piece.table
    column = piece.column(name)
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
        column = pc.replace_with_mask(column, from_numpy(mask, pa.bool_()), _values(values, kind))
    return list(column.chunks) if isinstance(column, pa.ChunkedArray) else [column]


def _column_names(logs: list[_ParsedLog]) -> list[str]:
    """Return the field names, the commonest first, `_nonfinite` left out.

    A field's count is the number of records holding a value (not None) for it; fields as
    common as each other come in the order the logs first hold them (by line, then by place
    in the line), and fields only ever None last, by name. The order is the same whichever
    reader (pyarrow, Python) took a line.
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
    return [*FIRST_COLUMNS, *(n for n in [*held, *none_only] if n not in FIRST_COLUMNS)]


def _values_at(column: Any, rows: _Ints) -> list[Any]:
    import numpy as np
    import pyarrow as pa

    from runlines.reading._buffers import from_numpy

    if isinstance(column, _Numbers):
        values = column.values[rows].tolist()
        return [v if ok else None for v, ok in zip(values, column.valid[rows], strict=True)]
    if isinstance(column, np.ndarray):
        return column[rows].tolist()  # type: ignore[no-any-return]
    taken = column.take(from_numpy(np.asarray(rows, dtype=np.int64), pa.int64()))
    return taken.to_pylist()  # type: ignore[no-any-return]


def _as_floats(column: Any) -> npt.NDArray[np.float64]:
    """Return *column* as floats: NaN where missing or not a number."""
    import numpy as np
    import pyarrow as pa

    from runlines.reading._buffers import numpy_of

    if isinstance(column, _Numbers):
        if column.values.dtype == np.float64:
            return column.values
        if column.values.dtype == np.bool_:
            return np.full(len(column), np.nan)
        return np.where(column.valid, column.values, np.nan)
    if isinstance(column, np.ndarray):
        return np.array([_number_or_nan(v) for v in column], dtype=np.float64)
    if _arrow_kind(column.type) in ("int", "float"):
        return numpy_of(column.cast(pa.float64()))
    return np.full(len(column), np.nan)


def _number_or_nan(value: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:  # an int beyond any float
            return math.inf if value > 0 else -math.inf
    return float("nan")


# --- rows: attempts, superseded records, event filter ----------------------------------------


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
    """Return each row's attempt and whether a later attempt supersedes it (see `_rules`)."""
    import numpy as np

    known = [log.attempts for log in logs]
    if logs and all(pair is not None for pair in known):  # every log read from its copy alone
        firsts = [pair[0] for pair in known if pair is not None]
        seconds = [pair[1] for pair in known if pair is not None]
        if len(logs) == 1:
            return firsts[0], seconds[0]
        return np.concatenate(firsts), np.concatenate(seconds)

    attempt = np.ones(table.num_rows, dtype=np.int64)
    superseded = np.zeros(table.num_rows, dtype=bool)
    segment = np.zeros(table.num_rows, dtype=np.int64)  # run_starts before the row, per log
    starts = np.flatnonzero(table.matches("event", ["run_start"]))
    numbers = _start_fields(table, starts, "attempt")
    resumes = np.array([_number_or_nan(r) for r in _start_fields(table, starts, "resume_step")])
    steps = _as_floats(table.get("step")) if "step" in table.names else None
    for first, stop in _rows_per_log(logs):
        mine = (starts >= first) & (starts < stop)
        # the rows before the first run_start, then those from each run_start to the next
        lengths = np.diff(np.concatenate(([0], starts[mine] - first, [stop - first])))
        nums = attempt_numbers([n for n, m in zip(numbers, mine, strict=True) if m])
        attempt[first:stop] = np.repeat([1, *nums], lengths)
        segment[first:stop] = np.repeat(np.arange(len(nums) + 1), lengths)
        if steps is not None and not np.isnan(resumes[mine]).all():
            cutoff = np.repeat(step_cutoffs(resumes[mine].tolist()), lengths)
            superseded[first:stop] = steps[first:stop] > cutoff
    if steps is not None and len(segment) and segment.max() > 0:
        superseded |= _rewritten(table, logs, segment, steps, superseded)
    return attempt, superseded


def _rewritten(
    table: _Columns, logs: list[_ParsedLog], segment: _Ints, steps: Any, known: _Bools
) -> _Bools:
    """Return where a later attempt of the same log wrote a record of the same (event, step).

    Rows *known* to be superseded, and those of each log's last attempt, are no candidates;
    only the rows that may be a candidate's twin are sorted (none, as a rule: a resumed
    attempt starts after its resume_step, past which the earlier records are *known*).
    """
    import numpy as np

    sizes = [log.num_rows for log in logs]
    which = np.repeat(np.arange(len(logs)), sizes)
    starts = np.cumsum([0, *sizes])[:-1]
    firsts = np.repeat(segment[np.minimum(starts, max(len(segment) - 1, 0))], sizes)
    ends = [segment[a : a + n].max() if n else 0 for a, n in zip(starts, sizes, strict=True)]
    lasts = np.repeat(ends, sizes)
    with np.errstate(invalid="ignore"):
        stepped = ~np.isnan(steps)
    candidates = stepped & ~known & (segment < lasts)
    out = np.zeros(table.num_rows, dtype=bool)
    if not candidates.any():
        return out
    low, high = steps[candidates].min(), steps[candidates].max()
    twins = stepped & (segment > firsts) & (steps >= low) & (steps <= high)
    if not twins.any():
        return out
    low, high = steps[twins].min(), steps[twins].max()
    candidates &= (steps >= low) & (steps <= high)
    codes = _codes(table.get("event"))
    rows = np.flatnonzero((candidates | twins) & (codes >= 0))
    order = rows[np.lexsort((steps[rows], codes[rows], which[rows]))]
    keys = np.stack((which[order], codes[order], steps[order]))
    cuts = np.flatnonzero((keys[:, 1:] != keys[:, :-1]).any(axis=0)) + 1
    bounds = np.concatenate(([0], cuts)).astype(np.int64)
    latest = np.zeros(0, np.int64)
    if len(order):
        latest = np.repeat(
            np.maximum.reduceat(segment[order], bounds), np.diff([*bounds, len(order)])
        )
    out = np.zeros(table.num_rows, dtype=bool)
    out[order] = segment[order] < latest
    return out


def _codes(column: Any) -> _Ints:
    """Return a code per row that tells its text value apart; -1 where it is no text."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from runlines.reading._buffers import numpy_of, strings, valid_of

    if isinstance(column, _Numbers):
        return np.full(len(column), -1, dtype=np.int64)
    if isinstance(column, np.ndarray):
        texts = [v if isinstance(v, str) else None for v in column.tolist()]
        column = strings(texts)
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    indices = pc.dictionary_encode(column).indices
    codes = numpy_of(indices).astype(np.int64)
    codes[~valid_of(indices)] = -1
    return codes


def _event_rows(table: _Columns, names: list[str], skipped: set[str]) -> _Bools:
    """Return where the event is one of *names*; raise when none of them occurs at all.

    *skipped* are the events of the buckets that were not read.
    """
    found = table.matches("event", names)
    if found.any() or (table.num_rows == 0 and not skipped):
        return found
    read = {v for v in _distinct(table.get("event")) if isinstance(v, str)}
    present = sorted(read | skipped)
    hint = did_you_mean(names[0], present)
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
