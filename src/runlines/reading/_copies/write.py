"""The copy written: a log's complete lines as the pyarrow engine reads them, sealed by a digest."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from runlines._layout import copy_path, open_regular
from runlines.reading._buffers import from_numpy, large_text, sparse_lists, sparse_strings
from runlines.reading._columnar import Columns, FileReader, Piece, arrow_kind, attempts_of
from runlines.reading._copies.format import (
    ATTEMPT,
    DIGEST_KEY,
    DIGEST_PLACEHOLDER,
    HASH_CHUNK,
    LINE,
    NULLS,
    PATCH,
    PIECE,
    SAMPLE_BYTES,
    SUPERSEDED,
    Meta,
    digest_value,
    file_digest,
    file_digest_at,
    footer_values,
    sample_hash,
)
from runlines.reading._copies.summary import declines, line_reader, python_summary, summary_state
from runlines.reading._files import find_logs, log_file

MAX_SLICES: Final = 64  # a table reordered in more runs than this is copied by take()


def write_copy(path: str | os.PathLike[str]) -> Path | None:
    """Write the Parquet copy of log *path*'s complete lines; return it, or None for no lines.

    Written to a temporary file first and renamed over the copy: a reader never sees half a
    copy, and a copy is never newer than the bytes it records.

    Raises:
        ReadError: the log cannot be read.
        ImportError: pyarrow is not installed.
    """
    log = log_file(path)
    info, data = complete_lines(log.path)
    if not len(data):
        return None
    # hashed before parsing: the parser overwrites the lines it hands to Python
    covers_bytes, sha256 = len(data), hashlib.sha256(data).hexdigest()  # type: ignore[arg-type]
    sample = sample_hash(bytes(data[:SAMPLE_BYTES]), bytes(data[-SAMPLE_BYTES:]))
    python_pass = declines(data)
    reader = FileReader(log, data, None, find_nulls=True)
    parsed = reader.read()
    columns = Columns([parsed])
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
        state, summary_bad = python_summary(log.path, covers_bytes)
    table, pieces, group_of = storage_table(parsed.pieces)
    # the records no later attempt supersedes, in line order, then the superseded ones: the
    # columns' first rows are then load()'s columns as they are (see `in_order_layout`)
    positions = columns.full.positions
    where = np.concatenate(positions) if positions else np.zeros(0, np.int64)
    attempt, superseded = attempts_of(columns, [parsed])
    by_line = np.empty(len(where), dtype=np.int64)  # each record's table row, in line order
    by_line[where] = np.arange(len(where))
    first = np.argsort(superseded, kind="stable")  # records (in line order), kept ones first
    order = by_line[first]
    sizes = [piece.table.num_rows for piece in parsed.pieces]
    piece_of = np.repeat(np.asarray(group_of, dtype=np.int32), sizes)[order]
    table = reordered(table, order)
    table = table.append_column(ATTEMPT, from_numpy(attempt[first], pa.int64()))
    table = table.append_column(SUPERSEDED, from_numpy(superseded[first], pa.bool_()))
    table = table.append_column(PIECE, from_numpy(piece_of, pa.int32()))
    meta = Meta(
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
        with pq.ParquetWriter(temporary, table.schema, **encodings(table.schema)) as writer:
            writer.write_table(table)
            digest = digest_value(DIGEST_PLACEHOLDER, metadata)
            writer.add_key_value_metadata({**metadata, DIGEST_KEY: digest})
        seal(temporary)
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)
    return target


def reordered(table: Any, order: npt.NDArray[np.int64]) -> Any:
    """Return *table*'s rows in *order*: as slices where the order runs in steps of one.

    The rows of a log's main events are in line order already, and a few others (run_start,
    run_end) go between them: a handful of runs of rows, each a slice of the table (no copy),
    where `take` would copy every column.
    """
    if not len(order):
        return table
    cuts = np.flatnonzero(np.diff(order) != 1) + 1
    if len(cuts) > MAX_SLICES:
        return table.take(from_numpy(order, pa.int64()))
    starts = np.concatenate(([0], cuts))
    ends = np.concatenate((cuts, [len(order)]))
    parts = [table.slice(int(order[a]), int(b - a)) for a, b in zip(starts, ends, strict=True)]
    return pa.concat_tables(parts) if len(parts) > 1 else parts[0]


def encodings(schema: Any) -> dict[str, Any]:
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


def complete_lines(path: Path) -> tuple[os.stat_result, npt.NDArray[np.uint8]]:
    """Return the log's stat and its bytes up to the end of its last complete line."""
    with open_regular(path) as stream:
        info = os.fstat(stream.fileno())
        data = np.empty(info.st_size, dtype=np.uint8)
        count = stream.readinto(memoryview(data))  # type: ignore[arg-type]
    end = count
    while end > 0:
        start = max(0, end - HASH_CHUNK)
        found = np.flatnonzero(data[start:end] == 10)
        if len(found):
            return info, data[: start + int(found[-1]) + 1]
        end = start
    return info, data[:0]


def storage_table(pieces: list[Piece]) -> tuple[Any, list[dict[str, Any]], list[int]]:
    """Return the pieces as one table (a storage column per field and type), the map of their
    groups, and each piece's group.

    Each piece's rows follow the ones before; a storage column is null in the rows of pieces
    without it. Columns whose values all come from Python (nested, null) are left out. The
    pieces of one event (or of mixed events) form one group: what a reader of the copy asks of
    a piece (its event, its fields' storage columns, counts and first places) is the same of
    its group, and the map then grows with the log's events and fields, not with its size.
    """
    storage: dict[tuple[str, str], int] = {}
    types: list[Any] = []
    groups: dict[str | None, int] = {}
    described: list[dict[str, Any]] = []
    group_of: list[int] = []
    mapped: list[list[list[Any]]] = []  # each piece's columns, [[field, storage column]]
    for piece in pieces:
        columns = []
        for name, column in zip(piece.table.column_names, piece.table.columns, strict=True):
            if arrow_kind(column.type) is None:
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
                else [large_text(chunk) if chunk.type != kind else chunk for chunk in column.chunks]
            )
    names = [f"c{i}" for i in range(len(types))]
    columns = [pa.chunked_array(chunks, kind) for chunks, kind in zip(arrays, types, strict=True)]
    extra = bookkeeping_columns(pieces)
    table = pa.table([*columns, *extra.values()], names=[*names, *extra])
    return table, described, group_of


def bookkeeping_columns(pieces: list[Piece]) -> dict[str, Any]:
    """Return each row's log line, its Python values (JSON) and the fields it holds as null."""
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
        LINE: from_numpy(lines, pa.int64()),
        PATCH: sparse_strings(len(lines), patched, patches, pa.large_string()),
        NULLS: sparse_lists(len(lines), held, [nulls[row] for row in held]),
    }


def seal(path: Path) -> None:
    """Write the sha256 of the copy at *path* (its file digest as zeros) over the zeros."""
    fd = os.open(path, os.O_RDWR)
    try:
        size = os.fstat(fd).st_size
        at = file_digest_at(fd, size, footer_values(fd).get(DIGEST_KEY, b""))
        if at is None:
            msg = f"{path}: the digest pyarrow was given is not in its footer"
            raise ValueError(msg)
        os.pwrite(fd, file_digest(fd, size, at).encode(), at)
    finally:
        os.close(fd)
