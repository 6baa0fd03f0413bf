"""The block reader: one log's lines into Arrow tables, bucketed by event, read in blocks.

`read_log` reads a log with pyarrow's JSON reader: lines bucketed by event (one narrow schema
per call), each bucket in blocks. Python (orjson) takes only the lines pyarrow cannot: torn,
odd, nested, non-finite or type-conflicting ones.
"""

from __future__ import annotations

import itertools
import math
import os
import re
import warnings
from collections.abc import Callable, Collection, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeVar

import numpy as np
import numpy.typing as npt
import orjson
import pyarrow as pa
import pyarrow.json as pj

from runlines._encoding import restore_nonfinite
from runlines.errors import ReadError, RunlinesWarning
from runlines.reading._buffers import compute as pc
from runlines.reading._buffers import distinct, from_numpy, numpy_of, valid_of
from runlines.reading._files import LogFile
from runlines.reading._lines import (
    INT64_PAST,
    bad_line_error,
    decode_line,
    open_log,
    skipped_lines_message,
)
from runlines.reading._rules import (
    Errors,
)

T = TypeVar("T")
Ints = npt.NDArray[np.int64]
Bytes = npt.NDArray[np.uint8]
Bools = npt.NDArray[np.bool_]


BLOCK_BYTES: Final = 16 << 20  # one pyarrow call per block: a bad line costs a block, not a file
ARROW_BLOCK: Final = 1 << 20  # pyarrow's own parallel unit inside a block
SCAN_BYTES: Final = 8 << 20  # newline scan in cache-sized slices
PYTHON_LINES: Final = 256  # a failing range this small goes to Python whole
# A line with more brackets than this goes to Python (orjson refuses deeper nesting cleanly);
# pyarrow's parser crashes the process on a line nested some 10,000 levels deep.
MAX_NESTING: Final = 1024
MAX_TRIES: Final = 8
THREADS: Final = min(4, os.cpu_count() or 1)
MIN_BUCKET: Final = 1024  # an event with fewer lines joins the mixed bucket
FEW_LINES: Final = 4096  # lines gathered by numpy's slices, not pyarrow.compute's take
KEY_WINDOW: Final = 32  # where the comma after `{"ts":<number>` falls
KEY_BATCH: Final = 1 << 16
SPACES: Final = b" " * (1 << 16)
RUN_HEAD: Final = re.compile(rb'\{"ts":[-0-9.eE+]+,"event":"([^"\\]{0,15})"')
CONFLICT: Final = re.compile(r"Column\((/[^)]*)\) changed from (\w+) to (\w+)")
KIND_START: Final = {
    "number": rb"[-0-9]",
    "string": rb'"',
    "timestamp": rb'"',
    "boolean": rb"[tf]",
    "null": rb"n",
    "object": rb"\{",
    "array": rb"\[",
}


@dataclass(slots=True)
class Piece:
    """Consecutive records of one bucket as an Arrow table, and the rows Python parsed."""

    table: Any
    lines: Ints  # the 0-based log line of each row
    rows: list[int]
    records: list[dict[str, Any]]
    patches: dict[str, tuple[list[int], list[Any]]] = field(default_factory=dict)
    # with an event filter: per field, the rows pyarrow read that hold it as null (the column
    # cannot tell a null from a missing field), so that a field logged as None is kept
    nulls: dict[str, Ints] = field(default_factory=dict)
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
class ParsedLog:
    log: LogFile
    pieces: list[Piece]
    bad: list[tuple[int, str]]
    skipped: set[str] = field(default_factory=set)  # events of buckets left unread
    # each output row's attempt and whether it is superseded, when a Parquet copy knows them
    attempts: tuple[Ints, Bools] | None = None
    # a copy's one piece: its first `in_order` rows are the records no later attempt
    # supersedes, in line order, and the superseded ones follow (see `lay_out`)
    in_order: int | None = None
    late: Ints | None = None  # with in_order: the output places of the rows after those
    refused: bool = False  # a line pyarrow read is one that orjson refuses (iter_events skips)

    @property
    def num_rows(self) -> int:
        return sum(piece.table.num_rows for piece in self.pieces)


def line_bounds(data: Any) -> tuple[Ints, Ints]:
    """Return the start and end (exclusive, without the newline) of every line of *data*."""
    size = len(data)
    offsets = range(0, size, SCAN_BYTES)
    parts = in_threads(lambda i: np.flatnonzero(data[i : i + SCAN_BYTES] == 10) + i, offsets)
    ends = np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)
    starts = np.concatenate(([0], ends + 1)).astype(np.int64)
    if size == 0 or data[size - 1] == 10:
        starts = starts[:-1]
    else:
        ends = np.concatenate((ends, [size])).astype(np.int64)
    return starts, ends


def in_threads(work: Callable[[Any], T], items: Iterable[Any]) -> list[T]:
    """Return ``[work(item) for item in items]``, computed on a few threads.

    numpy and pyarrow release the GIL in their loops, so their work runs in parallel.
    """
    items = list(items)
    if len(items) < 2 or THREADS < 2:
        return [work(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(THREADS, len(items))) as pool:
        return list(pool.map(work, items))


def event_keys(data: Any, starts: Ints) -> npt.NDArray[np.uint64]:
    """Return a key per line that tells its event apart, from the bytes after ``,"event":"``.

    Keys only group lines for speed: lines that share a key, or lines not in Run's format
    (``{"ts":...,"event":"<name>",...``), are still read correctly, if more slowly.
    """
    keys = np.zeros(len(starts), dtype=np.uint64)
    size = len(data)
    if size < KEY_WINDOW + 32:
        return keys
    # rows of bytes from each offset: gathering whole rows is several times faster than
    # gathering unaligned 8-byte words one by one
    heads = np.lib.stride_tricks.sliding_window_view(data, KEY_WINDOW)
    names = np.lib.stride_tricks.sliding_window_view(data, 16)
    fits = np.flatnonzero(starts + KEY_WINDOW + 32 <= size)  # name and its 16 bytes inside
    for first in range(0, len(fits), KEY_BATCH):
        rows = fits[first : first + KEY_BATCH]
        batch = starts[rows]
        # `{"ts":` is 6 bytes; the event name starts 10 bytes after the comma that ends ts
        name = batch + np.argmax(heads[batch + 6] == ord(","), axis=1) + 16
        words = names[name].view("<u8")  # two 8-byte numbers per line
        keys[rows] = words[:, 0] ^ (words[:, 1] * np.uint64(0x9E3779B97F4A7C15))
    return keys


def key_groups(
    rows: Ints, keys: npt.NDArray[np.uint64], least: int
) -> tuple[list[tuple[int, Ints]], Ints]:
    """Return the keys of at least *least* rows, the commonest first, each with its *rows* in
    line order; and the other rows, in line order.

    One stable sort: half the time of np.unique's sort followed by a second one for the rows.
    Only the common keys are split out: a log not in Run's format can give each line a key.
    """
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
class Bucket:
    lines: Ints
    key: int  # 0: lines not in Run's format, or rare events lumped together


class FileReader:
    """Parse one log: its lines bucketed by event, each bucket read by pyarrow in blocks.

    One event per pyarrow call keeps its schema narrow, which more than halves the parse time of
    a mixed log. With *events* given, a bucket whose event is known and not wanted is not read
    at all. The records Python parsed and the bad lines are kept here for all buckets.
    """

    def __init__(
        self,
        log: LogFile,
        data: Bytes,
        events: Collection[str] | None,
        *,
        find_nulls: bool = False,
    ) -> None:
        self.log = log
        self.events = None if events is None else {*events, "run_start"}  # attempts need these
        # the rows holding a field as null: an event filter needs them (see Piece.nulls)
        self.find_nulls = find_nulls or events is not None
        self.records: dict[int, dict[str, Any]] = {}
        self.bad: list[tuple[int, str]] = []
        self.skipped: set[str] = set()
        self.string_columns: set[str] = set()
        self.refused = False
        if bytes(data[:3]) == b"\xef\xbb\xbf":
            data[:3] = 32  # a byte-order mark some editors add: spaces
        self.main = Lines(self, data, *line_bounds(data), None)

    def read(self) -> ParsedLog:
        """Return the log's records as Arrow tables with Python patches, and its bad lines."""
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
        parsed = ParsedLog(self.log, pieces, sorted(self.bad), self.skipped)
        parsed.refused = self.refused
        return parsed

    def _event_of(self, bucket: Bucket) -> str | None:
        """Return the one event all lines of *bucket* hold, or None when it may hold several."""
        if bucket.key == 0:
            return None
        line = int(bucket.lines[0])
        head = bytes(self.main.view[int(self.main.starts[line]) : int(self.main.ends[line])][:64])
        match = RUN_HEAD.match(head)
        # the key covers the name only when it is 15 bytes or fewer
        return None if match is None else match[1].decode()


class Lines:
    """A buffer of lines that pyarrow reads in blocks; the lines it cannot take go to Python.

    Lines that Python takes are overwritten in the buffer: a record with ``{}`` (an empty row
    that Python's values fill later), a blank or bad line with spaces (pyarrow skips it).
    """

    def __init__(
        self, owner: FileReader, data: Bytes, starts: Ints, ends: Ints, ids: Ints | None
    ) -> None:
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
        line that may nest deeper than MAX_NESTING (pyarrow's parser overflows its stack).
        """
        ok = (self.ends - self.starts) >= 2
        idx = np.flatnonzero(ok)
        ok[idx] = (self.bytes[self.starts[idx]] == 0x7B) & (self.bytes[self.ends[idx] - 1] == 0x7D)
        long_lines = np.flatnonzero(ok & (self.ends - self.starts > 2 * MAX_NESTING))
        for line in long_lines.tolist():
            start, end = int(self.starts[line]), int(self.ends[line])
            text = self.view[start:end]
            if bytes(text).count(b"[") + bytes(text).count(b"{") > MAX_NESTING:
                ok[line] = False  # brackets, counted in strings too: deep at most, not surely
        self.is_row[:] = ok
        for line in np.flatnonzero(~ok).tolist():
            self._take_python(line)

    def buckets(self) -> list[Bucket]:
        """Return the lines of each event, the commonest first, rare events lumped together."""
        rows = np.flatnonzero(self.is_row & ~self.in_python)
        if len(rows) < 2 * MIN_BUCKET:
            return []
        common, rare = key_groups(rows, event_keys(self.bytes, self.starts[rows]), MIN_BUCKET)
        if not common:
            return []
        big = [Bucket(lines, key) for key, lines in common]
        return big + ([Bucket(rare, 0)] if len(rare) else [])

    def gather(self, lines: Ints) -> Lines:
        """Move *lines* into a buffer of their own, leaving spaces in this one."""
        # Each line with its newline is one value of a binary array over the buffer (every line
        # ends in a newline, see read_bytes): one take() copies them all, in C. A few lines
        # (a run's start and end) are joined by numpy, without importing pyarrow.compute.
        bounds = np.append(self.starts, len(self.bytes)).astype(np.int64)
        if len(lines) <= FEW_LINES:
            spans = [self.bytes[bounds[i] : bounds[i + 1]] for i in lines.tolist()]
            data = np.concatenate(spans) if spans else np.zeros(0, np.uint8)
            offsets = np.zeros(len(lines) + 1, np.int64)
            np.cumsum([len(span) for span in spans], out=offsets[1:])
        else:
            buffers = [None, pa.py_buffer(bounds), pa.py_buffer(self.bytes)]
            every = pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(self.starts), buffers)
            taken = pc.take(every, from_numpy(lines, pa.int64()), memory_pool=memory_pool())
            offsets = np.frombuffer(taken.buffers()[1], dtype=np.int64)[: len(lines) + 1]
            data = np.frombuffer(taken.buffers()[2], dtype=np.uint8)[: int(offsets[-1])]  # writable
        new_starts = offsets[:-1]
        lengths = self.ends[lines] - self.starts[lines]
        ids = lines if self.ids is None else self.ids[lines]
        moved = Lines(self.owner, data, new_starts, new_starts + lengths, ids)
        moved.in_python[:] = self.in_python[lines]
        self.blank(lines)
        return moved

    def blank(self, lines: Ints) -> None:
        """Overwrite *lines* with spaces."""
        spaces = memoryview(SPACES)
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

    def read(self) -> list[Piece]:
        """Return this buffer's records, one piece per block that pyarrow read."""
        cuts = np.arange(BLOCK_BYTES, len(self.bytes), BLOCK_BYTES)
        bounds = distinct(
            np.concatenate(([0], np.searchsorted(self.starts, cuts), [len(self.starts)]))
        )
        ranges = list(itertools.pairwise(bounds.tolist()))
        return [p for i0, i1 in ranges for p in self._read_range(i0, i1)]

    def _read_range(self, i0: int, i1: int) -> list[Piece]:
        """Read lines [i0, i1) with pyarrow, routing conflicts to Python or splitting on failure."""
        for route in self.routes:
            self._apply_route(route, i0, i1)
        for _ in range(MAX_TRIES):
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

    def _split(self, i0: int, i1: int) -> list[Piece]:
        if i1 - i0 > PYTHON_LINES:
            middle = (i0 + i1) // 2
            return self._read_range(i0, middle) + self._read_range(middle, i1)
        for line in (np.flatnonzero(self.is_row[i0:i1] & ~self.in_python[i0:i1]) + i0).tolist():
            self._take_python(line)
        if not self.is_row[i0:i1].any():
            return []
        return [self._piece(self._arrow(i0, i1), i0, i1)]

    def _arrow(self, i0: int, i1: int) -> Any:
        start, end = int(self.starts[i0]), min(int(self.ends[i1 - 1]) + 1, len(self.bytes))
        longest = int((self.ends[i0:i1] - self.starts[i0:i1]).max())
        block_size = max(ARROW_BLOCK, 1 << (longest + 2).bit_length())
        strings = sorted(self.owner.string_columns)
        return pj.read_json(
            pa.BufferReader(pa.py_buffer(self.view[start:end])),
            read_options=pj.ReadOptions(block_size=block_size),
            parse_options=pj.ParseOptions(
                explicit_schema=pa.schema([(n, pa.string()) for n in strings])
            ),
            memory_pool=memory_pool(),
        )

    def _learn_timestamps(self, table: Any) -> bool:
        """Keep strings that pyarrow read as timestamps as strings: re-read with them typed."""
        found = {f.name for f in table.schema if pa.types.is_temporal(f.type)}
        if found <= self.owner.string_columns:
            return False
        self.owner.string_columns |= found
        return True

    def _route_conflict(self, message: str, i0: int, i1: int) -> bool:
        """Send the lines of the rarer JSON type of a conflicting field to Python."""
        match = CONFLICT.search(message)
        if match is None or match[1] in ("", "/"):
            return False
        segments = match[1].split("/")[1:]
        key = re.escape(orjson.dumps(segments[0].replace("~1", "/").replace("~0", "~")))
        if len(segments) > 1:  # inside a nested value: that whole field goes to Python
            candidates = [re.compile(key + rb"\s*:")]
        else:
            kinds = (match[2], match[3])
            candidates = [re.compile(key + rb"\s*:\s*" + KIND_START.get(k, b"")) for k in kinds]
        route = min(candidates, key=lambda pattern: self._count(pattern, i0, i1))
        self.routes.append(route)
        return self._apply_route(route, i0, i1) > 0

    def _span(self, i0: int, i1: int) -> tuple[int, int]:
        return int(self.starts[i0]), int(self.ends[i1 - 1])

    def _count(self, pattern: re.Pattern[bytes], i0: int, i1: int) -> int:
        return sum(1 for _ in pattern.finditer(self.view, *self._span(i0, i1)))

    def _apply_route(self, pattern: re.Pattern[bytes], i0: int, i1: int) -> int:
        hits = [m.start() for m in pattern.finditer(self.view, *self._span(i0, i1))]
        lines = distinct(np.searchsorted(self.starts, hits, side="right") - 1)
        lines = lines[self.is_row[lines] & ~self.in_python[lines]]
        for line in lines.tolist():
            self._take_python(line)
        return len(lines)

    def _piece(self, table: Any, i0: int, i1: int) -> Piece:
        """Wrap *table*, re-parsing in Python the rows that hold nested or non-finite values."""
        lines = np.flatnonzero(self.is_row[i0:i1]) + i0
        rows = distinct(np.concatenate((nested_rows(table), np.flatnonzero(self.in_python[lines]))))
        big = self._big_int_rows(table, lines)
        rows = distinct(np.concatenate([rows, *big.values()]))
        # pyarrow's values of the plain columns stand: a row it read needs only its nested
        # values and the non-finite floats (null in pyarrow) from Python
        plain = {f.name for f in table.schema if arrow_kind(f.type) is not None} - set(big)
        records = []
        for row in rows.tolist():
            line = int(lines[row])
            record = self._record(line, table, row)
            if plain and not self.in_python[line]:
                record = {k: v for k, v in record.items() if k not in plain or is_nonfinite(v)}
            records.append(record)
        ids = lines if self.ids is None else self.ids[lines]
        piece = Piece(table, ids, rows.tolist(), records)
        self._note_fields(piece, lines)
        if self.owner.find_nulls:
            self._find_nulls(piece, lines)
        return piece

    def _note_fields(self, piece: Piece, lines: Ints) -> None:
        """Count the rows of *piece* holding a value (not None) per field, and note where the
        first one is: its line, and the field's place in that line (see `column_names`).
        """
        table = piece.table
        held: dict[str, tuple[int, int]] = {}  # name: (count, first row)
        valid: dict[str, Bools] = {}
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

    def _big_int_rows(self, table: Any, lines: Ints) -> dict[str, Ints]:
        """Return, per float column that holds an int beyond int64, its rows with a value.

        pyarrow reads such an int as a float, and the other ints of its column and block too;
        Python reads those rows again, exactly. A float that large is searched for a long run
        of digits in its line first, so that big floats (1e20) cost only that search.
        """
        found: dict[str, Ints] = {}
        for name, column in zip(table.column_names, table.columns, strict=True):
            if arrow_kind(column.type) != "float" or column.null_count == len(column):
                continue
            values = numpy_of(column)  # nulls as NaN, never a suspect
            with np.errstate(invalid="ignore"):
                suspects = np.flatnonzero(np.abs(values) >= 2.0**63).tolist()
            if not suspects:
                continue
            spans = ((int(self.starts[lines[r]]), int(self.ends[lines[r]])) for r in suspects)
            if any(INT64_PAST.search(bytes(self.view[a:b])) for a, b in spans):
                found[name] = np.flatnonzero(~np.isnan(values))
        return found

    def _find_nulls(self, piece: Piece, lines: Ints) -> None:
        """Note the rows of *piece* whose line holds a field as null, for the fields it lacks.

        Only the columns with more nulls than Python values are searched, in their lines' bytes.
        """
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
                piece.nulls[name] = distinct(at)

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


def is_nonfinite(value: Any) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


def memory_pool() -> Any:
    """Return the pool for pyarrow's big allocations: malloc, not pyarrow's default mimalloc.

    mimalloc gives each call fresh huge pages that the kernel must zero: with it, that zeroing
    took a sixth of load()'s CPU time (measured), malloc reuses the pages it has.
    """
    return pa.system_memory_pool()


def nested_rows(table: Any) -> Ints:
    """Return the rows of *table* with a value in a nested (object or array) column."""
    mask = np.zeros(table.num_rows, dtype=bool)
    for column in table.columns:
        if pa.types.is_nested(column.type):
            mask |= valid_of(column)
    return np.flatnonzero(mask)


def read_log(log: LogFile, errors: Errors, events: Collection[str] | None = None) -> ParsedLog:
    """Parse one log file (*events* only, when given); warn once about its bad lines, or raise."""
    parsed = FileReader(log, read_bytes(log.path), events).read()
    return checked(parsed, errors, stacklevel=5)


def checked(parsed: ParsedLog, errors: Errors, *, stacklevel: int) -> ParsedLog:
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


def read_bytes(path: Path) -> Bytes:
    """Return the bytes of *path*, a newline added when its last line has none.

    numpy's empty buffer skips the zero-filling a bytearray of that size costs.
    """
    with open_log(path) as stream:
        size = path.stat().st_size
        data = np.empty(size + 1, dtype=np.uint8)
        count = stream.readinto(memoryview(data)[:size])  # type: ignore[arg-type]
    if count == 0 or data[count - 1] == 10:
        return data[:count]
    data[count] = 10
    return data[: count + 1]


def arrow_kind(kind: Any) -> str | None:
    """Return the value kind of an Arrow type, or None when its values come from Python."""
    if pa.types.is_null(kind) or pa.types.is_nested(kind):
        return None
    if pa.types.is_signed_integer(kind):
        return "int"
    if pa.types.is_floating(kind):
        return "float"
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return "str"
    return "bool" if pa.types.is_boolean(kind) else "other"
