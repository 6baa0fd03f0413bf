"""The copy read back: its records as the pyarrow engine's parsed log, and the JSONL after it."""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Collection
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from runlines._encoding import encode_line
from runlines._layout import open_regular
from runlines.errors import RunlinesWarning
from runlines.reading._columnar import FileReader, ParsedLog, Piece, checked, read_bytes
from runlines.reading._copies.format import (
    ATTEMPT,
    LINE,
    NULLS,
    PATCH,
    PIECE,
    SUPERSEDED,
    Copy,
    Meta,
    usable_copy,
)
from runlines.reading._files import LogFile
from runlines.reading._rules import Errors


def read_log(log: LogFile, errors: Errors, events: Collection[str] | None = None) -> ParsedLog:
    """Parse one log as load() does: from its copy and the JSONL after it, when it has one."""
    copy = usable_copy(log, stacklevel=3)
    parsed = None if copy is None else read_copy(copy, events, stacklevel=5)
    if parsed is None:
        parsed = FileReader(log, read_bytes(log.path), events).read()
    elif copy is not None:
        tail = tail_bytes(log.path, copy.covers_bytes)
        if len(tail):
            parsed.attempts = parsed.late = None  # a later attempt may supersede records
            parsed.in_order = None  # and the copy's records are no longer first in the output
            append_tail(parsed, FileReader(log, tail, events).read(), copy.covers_lines)
    return checked(parsed, errors, stacklevel=5)


def read_copy(
    copy: Copy, events: Collection[str] | None = None, *, stacklevel: int = 1
) -> ParsedLog | None:
    """Return the records *copy* covers as the parsed log the engine would make of them (with
    *events*, those of the pieces that may hold them); warn (at *stacklevel*, 1 for the
    caller) and return None when its data is damaged. The log's records after them are the
    JSONL's from `Copy.covers_bytes` on.
    """
    try:
        return from_copy(copy.log, copy.meta, copy.path, events)
    except (pa.ArrowException, OSError, ValueError, KeyError) as err:
        msg = (
            f"{copy.path} is not used: it cannot be read ({err}); "
            f"reading {copy.log.path.name} instead"
        )
        warnings.warn(msg, RunlinesWarning, stacklevel=stacklevel + 1)
        return None


def from_copy(log: LogFile, meta: Meta, path: Path, events: Collection[str] | None) -> ParsedLog:
    """Return the parsed log the copy holds, as one piece in the copy's row order (see
    `write_copy`); with *events*, only the rows of the pieces that may hold them, as the JSONL
    reader reads only those buckets.
    """
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
    bookkeeping = [LINE, PATCH, ATTEMPT, SUPERSEDED]
    bookkeeping += [] if events is None else [NULLS] if every else [NULLS, PIECE]
    names = [f"c{index}" for index in sorted({i for held in storage.values() for i in held})]
    with pq.ParquetFile(path) as copy:  # one chunk per row group: read_table's dataset
        table = copy.read(columns=[*names, *bookkeeping])  # splits columns into batches
    pa.default_memory_pool().release_unused()  # the pages the read used and freed
    if not every:
        rows = np.isin(table.column(PIECE).to_numpy(), np.asarray(kept, dtype=np.int32))
        table = table.filter(pa.array(rows))
    patches = table.column(PATCH)
    at = np.flatnonzero(patches.is_valid().to_numpy(zero_copy_only=False))
    records = decoded(patches.take(pa.array(at)).to_pylist())
    columns = {name: one_column(table, held) for name, held in storage.items()}
    if columns:
        piece_table = pa.table({name: column for name, (column, _) in columns.items()})
    else:  # rows without fields ({}): a table of no columns that keeps its row count
        piece_table = pa.table({"": pa.nulls(table.num_rows)}).drop_columns([""])
    piece = Piece(piece_table, table.column(LINE).to_numpy(), at.tolist(), records)
    for name, (_, others) in columns.items():
        if others:
            piece.patches[name] = merged(piece.patches.get(name, ([], [])), others)
    piece.fields = fields
    if events is not None:
        piece.nulls = nulls_of(table.column(NULLS))
    bad = [(int(line), str(reason)) for line, reason in meta.bad]
    parsed = ParsedLog(log, [piece] if kept else [], bad, skipped)
    superseded = table.column(SUPERSEDED).to_numpy(zero_copy_only=False).astype(bool)
    parsed.in_order = first = int(len(superseded) - superseded.sum())
    parsed.late = late = late_places(piece.lines, first)
    if every and events is None:  # in output order: the log's records in line order
        rewound = np.zeros(table.num_rows, dtype=bool)
        rewound[late] = True
        attempts = stored = table.column(ATTEMPT).to_numpy().astype(np.int64, copy=False)
        if len(late):
            attempts = np.empty_like(stored)
            attempts[~rewound] = stored[:first]
            attempts[late] = stored[first:]
        parsed.attempts = attempts, rewound
    return parsed


def late_places(lines: npt.NDArray[np.int64], first: int) -> npt.NDArray[np.int64]:
    """Return the places, among all rows in line order, of the rows from *first* on, where
    the rows before *first* and those from it are each in line order (as a copy stores them).
    """
    late = lines[first:]
    return np.arange(len(late), dtype=np.int64) + np.searchsorted(lines[:first], late)


def one_column(table: Any, held: list[int]) -> tuple[Any, list[Any]]:
    """Return a field's column: the storage column of *held* with the most values, and its
    other ones (values of other types), which `merged` adds to the Python values.

    A piece's column has one type; values of other types are Python's, as when Python read
    their lines, and `Columns.build` then makes of them what it makes of the JSONL's pieces.
    """
    stored = [table.column(f"c{index}") for index in held]
    stored.sort(key=lambda column: column.null_count)
    return stored[0], stored[1:]


def merged(patch: tuple[list[int], list[Any]], others: list[Any]) -> tuple[list[int], list[Any]]:
    """Return a field's Python values (rows, values) with those of columns *others* added,
    in row order; where a row has both, its Python value wins."""
    rows = [np.asarray(patch[0], dtype=np.int64)]
    values = [np.fromiter(patch[1], dtype=object, count=len(patch[1]))]
    for column in others:  # as `Columns._object_column` takes them: numpy's values
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


def decoded(texts: list[str]) -> list[dict[str, Any]]:
    """Return the records of JSON *texts*, decoded in one call (one call per text is slower)."""
    if not texts:
        return []
    # json, not orjson: orjson reads an int beyond 64 bits as a float, and refuses NaN
    return json.loads("[" + ",".join(texts) + "]")  # type: ignore[no-any-return]


def nulls_of(column: Any) -> dict[str, Any]:
    """Return, per field, the rows that hold it as null, from a list column of field names."""
    column = column.combine_chunks()
    names = pc.list_flatten(column).to_numpy(zero_copy_only=False)
    rows = pc.list_parent_indices(column).to_numpy()
    found: dict[str, Any] = {}
    for name in dict.fromkeys(names.tolist()):
        found[name] = np.unique(rows[names == name]).astype(np.int64)
    return found


def tail_bytes(path: Path, start: int) -> npt.NDArray[np.uint8]:
    """Return the log's bytes from *start* on, a newline added when its last line has none."""
    with open_regular(path) as stream:
        size = os.fstat(stream.fileno()).st_size
        stream.seek(start)
        data = np.empty(max(0, size - start) + 1, dtype=np.uint8)
        count = stream.readinto(memoryview(data)[: len(data) - 1])  # type: ignore[arg-type]
    if count == 0 or data[count - 1] == 10:
        return data[:count]
    data[count] = 10
    return data[: count + 1]


def append_tail(parsed: ParsedLog, tail: ParsedLog, first_line: int) -> None:
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


_SAMPLE_VALUES: Final = {"int": 0, "float": 0.5, "str": "", "bool": True}


def _sample_kind(kind: Any) -> str:
    if pa.types.is_integer(kind):
        return "int"
    if pa.types.is_floating(kind):
        return "float"
    return "bool" if pa.types.is_boolean(kind) else "str"


def sample_lines(copy: Copy) -> set[bytes]:
    """Return log lines that hold *copy*'s values, for an engine that infers a schema from
    lines (Spark): one line per field and storage type, and each distinct patched record
    re-encoded as Run writes it (a restored non-finite float null again, and marked).
    """
    lines: set[bytes] = set()
    storage = [column for held in copy.storage.values() for column in held]
    table = pq.read_table(copy.path, columns=[*storage, PATCH])
    patched: dict[str, Any] = {}  # per field, the rows whose patch holds it
    for row, text in enumerate(table.column(PATCH).to_pylist()):
        if text is None:
            continue
        record = json.loads(text)
        for name in record:
            patched.setdefault(name, np.zeros(table.num_rows, dtype=bool))[row] = True
        lines.add(encode_line(record))  # a non-finite float: null and marked, as logged
    for name, held in copy.storage.items():
        for column in held:
            kind = _sample_kind(table.schema.field(column).type)
            valid = table.column(column).is_valid().to_numpy(zero_copy_only=False)
            if name in patched:  # values the patch shadows: ints beyond 64 bits
                valid = valid & ~patched[name]
            if valid.any():
                lines.add(encode_line({name: _SAMPLE_VALUES[kind]}))
    return lines
