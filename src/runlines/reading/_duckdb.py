"""SQL over runlines logs with DuckDB: `query`, `connect`, `load_duckdb` and `export`, out of core.

The logs are exposed as one view, ``records``, with `runlines.load`'s decoding: non-finite
floats restored, torn lines skipped, rank files merged into their run, each record's
``attempt``, and records superseded by a resumed attempt dropped. See docs/scale.md.

How it reads: a first pass over the files (DuckDB's ``read_json_objects`` and
``json_structure``) learns every record's shape and where each ``run_start`` is; the view then
reads the files with ``read_json`` and explicit column types, so no record's field is lost to
type sampling. That first pass is cached per file (path, size, mtime) for the life of the
process. A torn line reads as a row of NULLs; the view drops it by columns that every record
has a value in (usually ``ts`` alone), so that DuckDB still reads only the columns a query uses.
A line nested deeper than `runlines.load` reads is found by the first pass; its file is read
alone, rows numbered, and that row skipped: the other files' read is unchanged.

Which attempt a record belongs to depends on its place in the file. For a file whose only
``run_start`` is its first record (the common case) the attempt is a constant. For the others
the view counts the ``run_start`` records before each row with window functions that have no
ORDER BY (``lag() OVER ()``, ``sum() OVER (ROWS UNBOUNDED PRECEDING)``): DuckDB runs them as
streaming windows over the scan in file order, with ``preserve_insertion_order`` on, which we
set (DuckDB's "order preservation" guarantee; tests/reading/test_duckdb.py checks it over many
attempts and two threads).

A finished log with a Parquet copy that matches it is read from the copy and the JSONL after
it (see "Parquet copies" below): same rows, columns and types as the JSONL alone gives.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import shutil
import sys
import tempfile
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import orjson

from runlines._encoding import NONFINITE_KEY, restore_nonfinite
from runlines._layout import COPY_SUFFIX
from runlines.errors import FieldError, QueryError, ReadError, RunlinesWarning
from runlines.reading._copies import LINE, NULLS, PATCH, Copy, usable_copy, write_tail
from runlines.reading._files import LogFile, find_logs, run_labels
from runlines.reading._rules import attempt_numbers, event_names, step_cutoffs

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

__all__ = ["VIEW", "QueryError", "connect", "export", "load_duckdb", "query", "query_to_file"]

#: The name of the view that holds every record of the sources.
VIEW: Final = "records"
_FIRST: Final = ("ts", "event", "run")
_TEXT_FIELDS: Final = ("event", "run")
_BASE: Final = "__runlines_base"
_FILES: Final = "__runlines_files"
_STARTS: Final = "__runlines_starts"
_FILE: Final = "__runlines_file"
_ROW: Final = "__runlines_row"
_FIDX: Final = "__runlines_fidx"
_K: Final = "__runlines_k"
_IS_START: Final = "__runlines_is_start"
_PREV: Final = "__runlines_prev"
_SEEN: Final = "__runlines_seen"
_INTERNAL: Final = "__runlines_"
_LINE: Final = "__runlines_line"
_MAX_DEPTH: Final = 1024  # orjson's limit: load() skips a line nested deeper
_MAX_STRUCT_FIELDS: Final = 200  # wider objects stay JSON, as DuckDB's own map inference does
_INSTALL: Final = "pip install 'runlines[duckdb]'"

# A field's kind: a JSON scalar kind, ("object", {name: kind}) or ("array", kind).
Kind: TypeAlias = str | tuple[str, Any]
_STRUCTURE_KINDS: Final = {
    "NULL": "null",
    "BOOLEAN": "bool",
    "UBIGINT": "int",
    "BIGINT": "int",
    "DOUBLE": "float",
    "VARCHAR": "str",
}
_SQL_TYPES: Final = {
    "null": "JSON",
    "json": "JSON",
    "bool": "BOOLEAN",
    "int": "BIGINT",
    "float": "DOUBLE",
    "str": "VARCHAR",
}
_NUMBERS: Final = ("int", "float", "null")


# --- the discovery pass ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Start:
    """One ``run_start`` record: its row in the discovery pass, `attempt` and `resume_step`."""

    row: int
    attempt: Any
    resume_step: Any


@dataclass(frozen=True, slots=True)
class _Scan:
    """What the discovery pass learned about one log file."""

    shapes: tuple[tuple[str | None, str, int, int], ...]  # event, json_structure, count, first row
    first_row: int
    starts: tuple[_Start, ...]
    deep: tuple[int, ...] = ()  # the rows in the file (from 1) of records nested too deep

    @property
    def is_simple(self) -> bool:
        """True when every record has one attempt: no run_start, or one as the first record."""
        return not self.starts or (len(self.starts) == 1 and self.starts[0].row == self.first_row)


# (resolved path, size, mtime_ns, with event names) -> its scan
_scans: dict[tuple[str, int, int, bool], _Scan] = {}

# Lines that are not JSON objects have a NULL or non-object shape: `_scan_of` leaves them out.
# The event of each shape costs one more parse per line: only load_duckdb(event=...) needs it.
# A line with more brackets than _MAX_DEPTH (counted in strings too) may nest deeper than load()
# reads: its text comes back, and `_too_deep` decides as load() does. json_structure cannot: it
# folds a mixed array into "JSON", however deep its items.
_DISCOVER_SQL: Final = """
SELECT filename, {event} AS event, json_structure(json) AS shape, count(*) AS n,
       min(row) AS first_row,
       list({{'row': row, 'attempt': json_extract(json, '$.attempt'),
              'resume_step': json_extract(json, '$.resume_step')}} ORDER BY row)
         FILTER (WHERE contains(json, 'run_start')
                 AND json_extract_string(json, '$.event') = 'run_start') AS starts,
       list({{'row': row, 'text': json::VARCHAR}} ORDER BY row)
         FILTER (WHERE strlen(json::VARCHAR) > 2 * {depth}
                 AND strlen(json::VARCHAR)
                     - strlen(replace(replace(json::VARCHAR, '[', ''), '{{', '')) > {depth})
         AS deep
FROM (
    SELECT filename, json, row_number() OVER () AS row
    FROM read_json_objects({files}, format='newline_delimited', ignore_errors=true, filename=true)
)
GROUP BY ALL
"""


def _cache_key(path: Path, events: bool) -> tuple[str, int, int, bool]:
    try:
        stat = path.stat()
    except OSError as err:
        msg = f"cannot read log {path}: {err.strerror or err}; check the path"
        raise ReadError(msg, str(path)) from err
    return (str(path.resolve()), stat.st_size, stat.st_mtime_ns, events)


def _discover(
    con: duckdb.DuckDBPyConnection, paths: Sequence[Path], *, events: bool, cache: bool = True
) -> list[_Scan]:
    """Return the scan of each file, reading only those not cached (or changed since).

    Without *cache*, the scans are not kept: for files read once, such as a log's tail.
    """
    keys = [_cache_key(path, events) for path in paths]
    todo = {str(path): key for path, key in zip(paths, keys, strict=True) if key not in _scans}
    found: dict[str, list[tuple[Any, ...]]] = {path: [] for path in todo}
    if todo:
        event = "json_extract_string(json, '$.event')" if events else "NULL::VARCHAR"
        sql = _DISCOVER_SQL.format(files=_sql_list(list(todo)), event=event, depth=_MAX_DEPTH)
        for row in con.execute(sql).fetchall():
            found[row[0]].append(row[1:])
    scans = {key: _scan_of(found[path]) for path, key in todo.items()}
    if cache:
        _scans.update(scans)
    return [scans[key] if key in scans else _scans[key] for key in keys]


def _scan_of(groups: list[tuple[Any, ...]]) -> _Scan:
    objects = [group for group in groups if group[1] is not None and group[1].startswith("{")]
    base = min((int(group[3]) for group in groups), default=1)  # the file's first row
    too_deep = [
        [int(found["row"]) for found in candidates or () if _too_deep(found["text"])]
        for *_, candidates in objects
    ]
    # the view skips the records nested too deep: their shapes are not the schema's
    shapes = tuple(
        (event, shape, int(n) - len(rows), int(first))
        for (event, shape, n, first, *_), rows in zip(objects, too_deep, strict=True)
        if int(n) > len(rows)
    )
    deep = sorted(row for rows in too_deep for row in rows)
    skipped = set(deep)
    starts = [
        _Start(int(s["row"]), _json_value(s["attempt"]), _json_value(s["resume_step"]))
        for *_, found, _ in objects
        for s in found or ()
        if int(s["row"]) not in skipped
    ]
    first = min((first for _, _, _, first, *_ in objects), default=0)
    rows = tuple(row - base + 1 for row in deep)
    return _Scan(shapes, first, tuple(sorted(starts, key=lambda s: s.row)), rows)


def _too_deep(text: str) -> bool:
    """Return True for a record that load() skips because it nests deeper than orjson reads."""
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError as err:
        return "depth" in str(err)
    return False


def _json_value(text: str | None) -> Any:
    return None if text is None else orjson.loads(text)


# --- Parquet copies --------------------------------------------------------------------------
#
# A log with a copy that matches it is read from the copy (`read_parquet`), each field mapped
# from its storage columns and `__patch` (see reading/_copies.py), and from a file holding the
# log's bytes after the copy (the tail), read as any JSONL. The copy's shapes come from one
# grouping pass over its columns' validity, in place of the first pass over the JSONL, and
# give the same kinds: a field a line holds as null (`__nulls`) is null there, also where
# Python restored a non-finite float, which the line marks in `_nonfinite`.

_STORED: Final = {"int": "BIGINT", "float": "DOUBLE", "str": "VARCHAR", "bool": "BOOLEAN"}

# `valid`: bit i of word i // 63 is storage column i's validity; `strings` reads the strings
# (DuckDB checks they are UTF-8 as it reads them)
_COPY_SHAPES_SQL: Final = """
SELECT filename, {event} AS event, [{valid}] AS valid, json_structure({patch}) AS patch,
       {nulls} AS nulls, count(*) AS n, min({line}) + 1 AS first_row, [{strings}] AS strings
FROM read_parquet({path}, filename=true) GROUP BY ALL
"""
_BITS: Final = 63
# the value kind of each Parquet physical type a copy's storage columns have (strings: bytes)
_PARQUET_KINDS: Final = {"INT64": "int", "DOUBLE": "float", "BOOLEAN": "bool", "BYTE_ARRAY": "str"}
_COPY_STARTS_SQL: Final = """
SELECT filename, {line} + 1, CAST({attempt} AS VARCHAR), CAST({resume} AS VARCHAR)
FROM read_parquet({path}, filename=true) WHERE {event} = 'run_start' ORDER BY 1, 2
"""

# (copy's resolved path, size, mtime_ns) -> its scan and the fields some row's patch holds,
# or None for a copy DuckDB cannot read
_copy_scans: dict[tuple[str, int, int], tuple[_Scan, frozenset[str], dict[str, str]] | None] = {}


def _read_through_copy(
    con: duckdb.DuckDBPyConnection, copy: Copy, tails: Callable[[], Path], *, events: bool
) -> _CopyRead | None:
    """Return how to read *copy*'s log: the copy's scan, and its tail written to a file.

    None for a copy that DuckDB refuses: strings that are not UTF-8, which DuckDB's JSON
    reader skips in the log (and load() reads). The log is then read from its JSONL alone.
    """
    found = _copy_scans[_copy_key(copy)]
    if found is None:
        return None
    scan, patched, types = found
    tail = tail_scan = None
    if copy.has_tail:
        tail = write_tail(copy, tails())
        tail_scan = _discover(con, [tail], events=events, cache=False)[0]
    return _CopyRead(copy, scan, patched, types, tail, tail_scan)


def _copy_key(copy: Copy) -> tuple[str, int, int]:
    return _cache_key(copy.path, False)[:3]


def _scan_copies(con: duckdb.DuckDBPyConnection, copies: Sequence[Copy]) -> None:
    """Scan the *copies* not scanned yet: one pass over all copies of one layout (the same
    fields in the same storage columns and types, as a sweep's runs have), into `_copy_scans`.
    """
    todo = {key: copy for copy in copies if (key := _copy_key(copy)) not in _copy_scans}
    if not todo:
        return
    paths = _sql_list(str(copy.path) for copy in todo.values())
    types: dict[str, dict[str, str]] = {}
    for path, name, kind in con.execute(
        f"SELECT file_name, name, type FROM parquet_schema({paths})"
    ).fetchall():
        types.setdefault(path, {})[name] = _PARQUET_KINDS.get(kind, "str")
    layouts: dict[Any, list[tuple[tuple[str, int, int], Copy]]] = {}
    for key, copy in todo.items():
        held = types.get(str(copy.path), {})
        layout = (tuple((n, tuple(c)) for n, c in copy.storage.items()), tuple(held.items()))
        layouts.setdefault(layout, []).append((key, copy))
    error = _import_duckdb("query()").Error
    for members in layouts.values():
        group = [copy for _, copy in members]
        scanned: list[tuple[_Scan, frozenset[str], dict[str, str]] | None]
        try:
            scanned = [*_copy_scan(con, group, types.get(str(group[0].path), {}))]
        except error:  # one copy DuckDB refuses: find it, read the others through theirs
            scanned = [_copy_scan_or_none(con, [copy], types) for copy in group]
        for (key, _), result in zip(members, scanned, strict=True):
            _copy_scans[key] = result


def _copy_scan_or_none(
    con: duckdb.DuckDBPyConnection, copies: list[Copy], types: dict[str, dict[str, str]]
) -> tuple[_Scan, frozenset[str], dict[str, str]] | None:
    try:
        return _copy_scan(con, copies, types.get(str(copies[0].path), {}))[0]
    except _import_duckdb("query()").Error:
        return None


def _copy_scan(
    con: duckdb.DuckDBPyConnection, copies: list[Copy], types: dict[str, str]
) -> list[tuple[_Scan, frozenset[str], dict[str, str]]]:
    """Return the scan of each of *copies* (rows are log lines, from 1), its patched fields,
    and the kind of each storage column: copies of one layout, in one pass over them all.
    """
    copy = copies[0]
    columns = [(name, c, types.get(c, "str")) for name, held in copy.storage.items() for c in held]
    validity = [
        " + ".join(
            f"CASE WHEN {_ident(c)} IS NOT NULL THEN {1 << bit}::BIGINT ELSE 0 END"
            for bit, (_, c, _) in enumerate(columns[first : first + _BITS])
        )
        for first in range(0, len(columns), _BITS)
    ]
    strings = [f"max(strlen({_ident(c)}))" for _, c, kind in columns if kind == "str"]
    event_sql = _copy_value(copy, types, None, "event", "VARCHAR")
    paths = _sql_list(str(c.path) for c in copies)
    sql = _COPY_SHAPES_SQL.format(
        event=event_sql,
        valid=", ".join(validity),
        strings=", ".join(strings),
        patch=_ident(PATCH),
        nulls=_ident(NULLS),
        line=_ident(LINE),
        path=paths,
    )
    groups: dict[str, list[tuple[Any, ...]]] = {str(c.path): [] for c in copies}
    for path, event, words, *rest in con.execute(sql).fetchall():
        groups[path].append((event, _bits(words, len(columns)), *rest))
    starts: dict[str, list[_Start]] = {str(c.path): [] for c in copies}
    if any(group[0] == "run_start" for found in groups.values() for group in found):
        sql = _COPY_STARTS_SQL.format(
            line=_ident(LINE),
            attempt=_copy_value(copy, types, None, "attempt", "JSON"),
            resume=_copy_value(copy, types, None, "resume_step", "JSON"),
            event=event_sql,
            path=paths,
        )
        for path, row, attempt, resume in con.execute(sql).fetchall():
            starts[path].append(_Start(int(row), _loose_json(attempt), _loose_json(resume)))
    return [
        _copy_result(c, columns, groups[str(c.path)], starts[str(c.path)], types) for c in copies
    ]


def _copy_result(
    copy: Copy,
    columns: list[tuple[str, str, str]],
    groups: list[tuple[Any, ...]],
    starts: list[_Start],
    types: dict[str, str],
) -> tuple[_Scan, frozenset[str], dict[str, str]]:
    groups = sorted(groups, key=lambda group: int(group[5]))
    patched = frozenset(
        name for group in groups if group[2] for name in _object_keys(orjson.loads(group[2]))
    )
    order = _key_order(copy)
    shapes = tuple(
        (event, _copy_shape(order, columns, valid, patch, nulls), int(n), int(first))
        for event, valid, patch, nulls, n, first, _ in groups
    )
    first = min((shape[3] for shape in shapes), default=0)
    return _Scan(shapes, first, tuple(starts), copy.deep_lines), patched, types


def _bits(words: list[int], count: int) -> list[bool]:
    """Return the validity of *count* storage columns from their words of `_BITS` bits."""
    return [bool(words[i // _BITS] >> (i % _BITS) & 1) for i in range(count)]


def _key_order(copy: Copy) -> list[str]:
    """Return the copy's fields by where their first value is: the JSONL's order for `_schema`.

    In the shape of a group's first line, the fields whose first value is in that line then
    come in their places in it.
    """
    return sorted(copy.first_values, key=copy.first_values.__getitem__)


def _copy_shape(
    order: list[str],
    columns: list[tuple[str, str, str]],
    valid: list[bool],
    patch: str | None,
    nulls: list[str] | None,
) -> str:
    """Return the ``json_structure`` a group of the copy's rows had in the JSONL."""
    patched = orjson.loads(patch) if patch else {}
    if not isinstance(patched, dict):  # json_structure says "JSON" for an empty object
        patched = {}
    held = [(name, kind) for (name, _, kind), ok in zip(columns, valid, strict=True) if ok]
    stored = dict(reversed(held))  # a field's first storage column with a value
    null = set(nulls or ())
    names = dict.fromkeys([*order, *stored, *patched, *(nulls or ())])
    structure: dict[str, Any] = {}
    # a restored non-finite float: the line held null, and marked it (a number in the patch)
    marks = {"/" + _escaped(name): "VARCHAR" for name in null if patched.get(name) == "DOUBLE"}
    for name in names:
        if name in null:
            structure[name] = "NULL"  # the line's value: a non-finite float is marked instead
        elif name in patched:
            structure[name] = patched[name]
        elif name in stored:
            structure[name] = _STORED.get(stored[name], "JSON")
    if marks:
        structure[NONFINITE_KEY] = marks
    return orjson.dumps(structure).decode()


def _object_keys(structure: Any) -> list[str]:
    return list(structure) if isinstance(structure, dict) else []


def _loose_json(text: str | None) -> Any:
    """Return the value of JSON *text*, which may hold NaN and Infinity as Python writes them."""
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def _escaped(name: str) -> str:
    """Return *name* as a key in a JSON pointer."""
    return name.replace("~", "~0").replace("/", "~1")


def _scan_through_copy(read: _CopyRead) -> _Scan:
    """Return the scan of a log read through its copy: the copy's, then its tail's after it.

    The tail's rows follow the copy's lines: only their order matters.
    """
    scan, tail = read.scan, read.tail_scan
    if tail is None:
        return scan
    at = read.copy.covers_lines
    return _Scan(
        scan.shapes + tuple((e, shape, n, at + first) for e, shape, n, first in tail.shapes),
        scan.first_row if scan.shapes else at + tail.first_row,
        scan.starts + tuple(_Start(at + s.row, s.attempt, s.resume_step) for s in tail.starts),
        scan.deep + tuple(at + row for row in tail.deep),
    )


def _copy_parts(plan: _Plan, indexes: Iterable[int], *, ordered: bool) -> list[str]:
    """Return the SELECTs of the logs read through their copies: the copies' rows, their tails'.

    Their columns are those of `_read_sql` (and `_K` for logs whose attempts are counted).
    Copies of one layout whose attempts need no counting are read in one `read_parquet`.
    """
    together: dict[Any, list[int]] = {}
    alone = []
    for index in indexes:
        read = plan.copies[index]
        if plan.scans[index].is_simple:
            layout = (tuple((n, tuple(c)) for n, c in read.copy.storage.items()), read.types)
            together.setdefault(repr(layout), []).append(index)
        else:
            alone.append(index)
    parts = [_copies_sql(plan, group, ordered=ordered) for group in together.values()]
    parts += [_copies_sql(plan, [index], ordered=ordered) for index in alone]
    return parts + [_tail_sql(plan, i, ordered=ordered) for i in indexes if plan.copies[i].tail]


def _copies_sql(plan: _Plan, indexes: list[int], *, ordered: bool) -> str:
    """Return the SELECT of the rows of the copies of *indexes*: one log whose attempts are
    counted, or logs of one layout (their copies' storage columns and types) that need none.
    """
    reads = [plan.copies[index] for index in indexes]
    first, schema = reads[0], plan.schema
    patched = frozenset().union(*(read.patched for read in reads))
    line = f"({_ident(LINE)} + 1)"

    def value(name: str, kind: str) -> str:
        return _copy_value(first.copy, first.types, patched, name, kind)

    columns = [
        f"{value(name, schema.column_type(name))} AS {_ident(name)}"
        for name in schema.kinds
        if name != NONFINITE_KEY
    ]
    if NONFINITE_KEY in schema.kinds:  # null where the copy holds the values it restored
        columns.append(f"{value(NONFINITE_KEY, 'JSON')} AS {_ident(NONFINITE_KEY)}")
    # the log of each copy: `<name>.jsonl` beside `<name>.parquet` (see _layout.copy_path)
    columns.append(f"left(filename, length(filename) - {len(COPY_SUFFIX)}) || '.jsonl' AS {_FILE}")
    if ordered:
        columns.append(f"{line} AS {_ROW}")
    if not plan.scans[indexes[0]].is_simple:  # a row's k: the run_starts at or before its line
        whens = [f"WHEN {line} >= {row} THEN {k}" for k, row in enumerate(first.starts, 1)]
        k = f"CASE {' '.join(reversed(whens))} ELSE 0 END" if whens else "0"
        columns.append(f"CAST({k} AS BIGINT) AS {_K}")
    paths = _sql_list(str(read.copy.path) for read in reads)
    return f"SELECT {', '.join(columns)} FROM read_parquet({paths}, filename=true)"


def _tail_sql(plan: _Plan, index: int, *, ordered: bool) -> str:
    """Return the SELECT of the rows of the tail after a log's copy, as rows of that log."""
    read, log = plan.copies[index], plan.logs[index]
    assert read.tail is not None
    assert read.tail_scan is not None
    counted = not plan.scans[index].is_simple
    make = _counted_sql if counted else _read_sql
    inner = make(plan, [str(read.tail)], read.tail_scan.deep, ordered=ordered)
    replace = [f"{_literal(str(log.path))} AS {_FILE}"]
    if ordered:
        replace.append(f"{_ROW} + {read.copy.covers_lines} AS {_ROW}")
    if counted:
        replace.append(f"{_K} + {len(read.starts)} AS {_K}")
    return f"SELECT * REPLACE ({', '.join(replace)}) FROM ({inner})"


def _copy_value(
    copy: Copy, types: dict[str, str], patched: frozenset[str] | None, name: str, kind: str
) -> str:
    """Return the SQL of field *name* as DuckDB type *kind* in a row of *copy*.

    A row's patch holds its exact value when there is one (an int beyond 64 bits, a restored
    non-finite float: kept only where the view restores it, in DOUBLE columns), else the
    storage column of its type. *patched* None: the patch is looked into whatever it holds.
    """
    parts = []
    if patched is None or name in patched:
        pointer = _literal("/" + _escaped(name))
        value = f"json_extract({_ident(PATCH)}, {pointer})"
        if kind == "JSON":
            value = f"nullif({value}, 'null')"
        elif kind == "VARCHAR":
            value = f"json_extract_string({_ident(PATCH)}, {pointer})"
        else:
            value = f"TRY_CAST({value} AS {kind})"
        if kind != "DOUBLE":  # a line's null stands, as in the view of the JSONL
            nulls = f"list_contains({_ident(NULLS)}, {_literal(name)})"
            value = f"CASE WHEN {nulls} THEN NULL ELSE {value} END"
        parts.append(value)
    for column in copy.storage.get(name, ()):
        parts.append(_stored_value(_ident(column), types.get(column, "str"), kind))
    if not parts:
        return f"CAST(NULL AS {kind})"
    return parts[0] if len(parts) == 1 else f"coalesce({', '.join(parts)})"


def _stored_value(column: str, stored: str, kind: str) -> str:
    if kind == "JSON":
        return f"to_json({column})"
    if _STORED.get(stored) == kind:
        return column
    return f"TRY_CAST({column} AS {kind})"


# --- kinds and column types ------------------------------------------------------------------


def _kind(structure: Any, *, in_array: bool = False) -> Kind:
    """Return the kind of a value from DuckDB's ``json_structure`` of one record.

    ``json_structure`` says "JSON" for an empty object, and for items of mixed kinds in an
    array: outside arrays, "JSON" is an empty object.
    """
    if isinstance(structure, dict):
        fields = {name: _kind(value, in_array=in_array) for name, value in structure.items()}
        return ("object", fields)
    if isinstance(structure, list):
        return ("array", _kind(structure[0], in_array=True) if structure else "null")
    if structure == "JSON" and not in_array:
        return ("object", {})
    return _STRUCTURE_KINDS.get(structure, "json")


def _merge(a: Kind, b: Kind) -> Kind:
    """Return the kind that holds values of both *a* and *b* (JSON when nothing narrower does)."""
    if a == "null" or a == b:
        return b
    if b == "null":
        return a
    if isinstance(a, str) and isinstance(b, str):
        return "float" if {a, b} == {"int", "float"} else "json"
    if isinstance(a, tuple) and isinstance(b, tuple) and a[0] == b[0]:
        if a[0] == "array":
            return ("array", _merge(a[1], b[1]))
        fields = dict(a[1])
        for name, kind in b[1].items():
            fields[name] = _merge(fields.get(name, "null"), kind)
        return ("object", fields)
    return "json"


def _sql_type(kind: Kind) -> str:
    """Return the DuckDB type for values of *kind*."""
    if isinstance(kind, str):
        return _SQL_TYPES[kind]
    if kind[0] == "array":
        return f"{_sql_type(kind[1])}[]"
    fields: dict[str, Kind] = kind[1]
    if not _fits_struct(fields):
        return "JSON"
    inner = ", ".join(f"{_ident(name)} {_sql_type(value)}" for name, value in fields.items())
    return f"STRUCT({inner})"


def _fits_struct(fields: dict[str, Kind]) -> bool:
    names = [name.lower() for name in fields]
    return (
        0 < len(names) <= _MAX_STRUCT_FIELDS and "" not in names and len(set(names)) == len(names)
    )


@dataclass(frozen=True, slots=True)
class _Schema:
    """The fields of the records read: their kinds, in output order, and the non-finite ones."""

    kinds: dict[str, Kind]
    nonfinite: frozenset[str]  # top-level fields that some record lists in `_nonfinite`
    events: frozenset[str]
    nested_as_json: bool  # objects and arrays as JSON text (exact) rather than STRUCT and LIST
    present: tuple[str, ...]  # columns of which every record has at least one not null

    def column_type(self, name: str) -> str:
        """Return the DuckDB type that `read_json` reads field *name* as."""
        kind = self.kinds[name]
        if self.nested_as_json and isinstance(kind, tuple):
            return "JSON"
        if name == "ts" or (name in self.nonfinite and kind in _NUMBERS):
            return "DOUBLE"
        if name in _TEXT_FIELDS:
            return "VARCHAR"
        if name == "rank":
            return "BIGINT"
        return "JSON" if name == NONFINITE_KEY else _sql_type(kind)

    @property
    def fields(self) -> list[str]:
        """The record fields other than ts, event, run, rank and `_nonfinite`."""
        skip = {*_FIRST, "rank", "attempt", NONFINITE_KEY}
        return [name for name in self.kinds if name not in skip]


def _schema(
    scans: Sequence[_Scan], events: Sequence[str] | None, *, nested_as_json: bool
) -> _Schema:
    """Merge the shapes of *scans* (of *events* only, when given) into one schema.

    The fields come in `runlines.load`'s order: the commonest first (a non-finite float counts
    as a value), fields as common as each other in the order the logs first hold a value for
    them (by line, then place in the line), fields only ever null last, by name.
    """
    kinds: dict[str, Kind] = {}
    counts: dict[str, int] = {}
    first: dict[str, tuple[int, int, int]] = {}  # (scan, line, place) of a field's first value
    seen_events: set[str] = set()
    ordered = sorted(
        ((i, shape) for i, scan in enumerate(scans) for shape in scan.shapes),
        key=lambda item: (item[0], item[1][3]),
    )
    shapes: list[set[str]] = []  # the names with a value, per shape read
    for scan, (event, shape, count, row) in ordered:
        try:
            structure = orjson.loads(shape)
        except orjson.JSONDecodeError:  # nested too deep: the view skips these records
            continue
        if event is not None:
            seen_events.add(event)
        if events is not None and event not in events:
            continue
        shapes.append(set())
        marked = _marked(structure.get(NONFINITE_KEY))
        for place, (name, value) in enumerate(structure.items()):
            kind = _kind(value)
            kinds[name] = _merge(kinds.get(name, "null"), kind)
            counts.setdefault(name, 0)
            if kind != "null":
                shapes[-1].add(name)
            if kind != "null" or name in marked:
                counts[name] += count
                first[name] = min(first.get(name, (scan, row, place)), (scan, row, place))
    for name in _FIRST:
        kinds.setdefault(name, "null")
    nonfinite = kinds.get(NONFINITE_KEY)
    pointers = nonfinite[1] if isinstance(nonfinite, tuple) and nonfinite[0] == "object" else {}
    names = [name for name in _usable_names(kinds, counts) if name not in _FIRST]
    held = sorted((n for n in names if counts[n]), key=lambda n: (-counts[n], first[n]))
    rest = held + sorted(n for n in names if not counts[n])
    return _Schema(
        {name: kinds[name] for name in (*_FIRST, *rest)},
        frozenset(_top_level_field(p) for p in pointers if p.count("/") == 1),
        frozenset(seen_events),
        nested_as_json,
        _present(shapes, [*_FIRST, *rest]),
    )


def _marked(marks: Any) -> set[str]:
    """Return the top-level fields that a record's `_nonfinite` structure marks."""
    if not isinstance(marks, dict):
        return set()
    return {_top_level_field(pointer) for pointer in marks if pointer.count("/") == 1}


def _present(shapes: list[set[str]], names: list[str]) -> tuple[str, ...]:
    """Return few of *names* such that every shape has a value in one: usually just ``ts``.

    Filtering torn lines (rows of NULLs) on these columns alone lets DuckDB read only the
    columns a query uses.
    """
    chosen: list[str] = []
    left = shapes
    for name in names:
        if not left:
            break
        if any(name in shape for shape in left):
            chosen.append(name)
            left = [shape for shape in left if name not in shape]
    return tuple(chosen) or tuple(names[:1])


def _usable_names(kinds: dict[str, Kind], counts: dict[str, int]) -> list[str]:
    """Return the names DuckDB can hold as columns, warning about the others.

    DuckDB's column names ignore case: of names that differ only in case, the commonest stays.
    """
    by_lower: dict[str, list[str]] = {}
    for name in kinds:
        if not name.startswith(_INTERNAL) and name:
            by_lower.setdefault(name.lower(), []).append(name)
    kept = [max(group, key=lambda n: counts.get(n, 0)) for group in by_lower.values()]
    dropped = sorted(set(kinds) - set(kept))
    if dropped:
        msg = (
            f"fields {', '.join(map(repr, dropped))} are left out of the SQL view: DuckDB column "
            "names ignore case and cannot be empty; runlines.load() reads them"
        )
        warnings.warn(msg, RunlinesWarning, stacklevel=4)
    return kept


def _top_level_field(pointer: str) -> str:
    return pointer[1:].replace("~1", "/").replace("~0", "~")


# --- SQL text ---------------------------------------------------------------------------------


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _sql_list(items: Iterable[str]) -> str:
    return "[" + ", ".join(_literal(item) for item in items) + "]"


def _pointer_path(pointer: str) -> str:
    """Return the DuckDB JSON path of key *pointer* in the `_nonfinite` object."""
    return "/" + pointer.replace("~", "~0").replace("/", "~1")


@dataclass(frozen=True, slots=True)
class _CopyRead:
    """How the view reads one log through its Parquet copy: the copy, then the tail file."""

    copy: Copy
    scan: _Scan  # of the copy's records; rows are the log's lines, from 1
    patched: frozenset[str]  # the fields that some row's `__patch` holds
    types: dict[str, str]  # each storage column's kind: int, float, str or bool
    tail: Path | None  # the log's bytes after the copy, in a file of their own
    tail_scan: _Scan | None

    @property
    def starts(self) -> list[int]:
        """The lines of the copy's run_start records."""
        return [start.row for start in self.scan.starts]


@dataclass(frozen=True, slots=True)
class _Plan:
    """The files to read, split by whether their attempts need counting, and the schema.

    A log read through its copy has its scan merged from the copy's and its tail's, in lines
    of the whole log, and its entry in *copies* (by its index in *logs*).
    """

    logs: list[LogFile]
    scans: list[_Scan]
    schema: _Schema
    has_rank: bool
    copies: dict[int, _CopyRead]

    @property
    def counted(self) -> list[str]:
        return [
            str(log.path)
            for log, scan in zip(self.logs, self.scans, strict=True)
            if not scan.is_simple
        ]

    def reads(self, *, counted: bool) -> list[tuple[list[str], tuple[int, ...]]]:
        """Return the groups of files to read together, with the rows to skip in each.

        A file with records nested too deep is read alone: its rows are numbered to skip them.
        """
        pairs = [
            (str(log.path), scan)
            for index, (log, scan) in enumerate(zip(self.logs, self.scans, strict=True))
            if scan.is_simple != counted and index not in self.copies
        ]
        plain = [path for path, scan in pairs if not scan.deep]
        groups = [(plain, ())] if plain else []
        return groups + [([path], scan.deep) for path, scan in pairs if scan.deep]


def _read_sql(plan: _Plan, files: list[str], skip: tuple[int, ...], *, ordered: bool) -> str:
    schema = plan.schema
    columns = ", ".join(
        f"{_literal(name)}: {_literal(schema.column_type(name))}" for name in schema.kinds
    )
    read = (
        f"read_json({_sql_list(files)}, format='newline_delimited', records=true, "
        f"ignore_errors=true, filename='{_FILE}', columns={{{columns}}})"
    )
    row = f", row_number() OVER () AS {_ROW}" if ordered or skip else ""
    if not skip:
        return f"SELECT *{row} FROM {read}"
    # the rows of one file, numbered as the discovery pass numbered them (both skip blank lines)
    rows = ", ".join(map(str, skip))
    return f"SELECT * FROM (SELECT *{row} FROM {read}) WHERE {_ROW} NOT IN ({rows})"


def _counted_sql(plan: _Plan, files: list[str], skip: tuple[int, ...], *, ordered: bool) -> str:
    """Return the read of files whose records need their run_start counted: `_K` per row."""
    is_start = f"CAST(coalesce(event = 'run_start', false) AS INTEGER) AS {_IS_START}"
    read = _read_sql(plan, files, skip, ordered=ordered)
    marked = f"SELECT *, {is_start}, lag({_FILE}) OVER () AS {_PREV} FROM ({read})"
    seen = f"SELECT *, sum({_IS_START}) OVER (ROWS UNBOUNDED PRECEDING) AS {_SEEN} FROM ({marked})"
    base = f"CASE WHEN {_PREV} IS DISTINCT FROM {_FILE} THEN {_SEEN} - {_IS_START} END"
    k = f"CAST({_SEEN} - last_value({base} IGNORE NULLS) OVER (ROWS UNBOUNDED PRECEDING) AS BIGINT)"
    return f"SELECT * EXCLUDE ({_IS_START}, {_PREV}, {_SEEN}), {k} AS {_K} FROM ({seen})"


def _field_sql(schema: _Schema, name: str) -> str:
    column = f"r.{_ident(name)}"
    if name in schema.nonfinite and schema.column_type(name) == "DOUBLE":
        marks = f"r.{_ident(NONFINITE_KEY)}"
        path = _literal(_pointer_path("/" + name.replace("~", "~0").replace("/", "~1")))
        return f"coalesce(TRY_CAST(json_extract_string({marks}, {path}) AS DOUBLE), {column})"
    return column


def _base_sql(plan: _Plan, *, superseded: bool, ordered: bool) -> str:
    """Return the SELECT of every record with run, rank and attempt, and internal columns."""
    schema = plan.schema
    parts = [_read_sql(plan, *group, ordered=ordered) for group in plan.reads(counted=False)]
    parts += [_counted_sql(plan, *group, ordered=ordered) for group in plan.reads(counted=True)]
    parts += _copy_parts(plan, plan.copies, ordered=ordered)
    source = " UNION ALL BY NAME ".join(f"({part})" for part in parts)
    attempt = "coalesce(s.attempt, f.attempt)" if plan.counted else "f.attempt"
    columns = ["r.ts AS ts", "r.event AS event", "coalesce(f.label, r.run, f.run) AS run"]
    if plan.has_rank:
        rank = "coalesce(r.rank, f.rank)" if "rank" in schema.kinds else "f.rank"
        columns.append(f"{rank} AS rank")
    columns.append(f"{attempt} AS attempt")
    columns += [f"{_field_sql(schema, n)} AS {_ident(n)}" for n in schema.fields]
    if NONFINITE_KEY in schema.kinds:
        columns.append(f"r.{_ident(NONFINITE_KEY)} AS {_ident(NONFINITE_KEY)}")
    columns.append(f"f.fidx AS {_FIDX}")
    if ordered:
        columns.append(f"r.{_ROW} AS {_ROW}")
    joins = f"LEFT JOIN {_FILES} AS f ON r.{_FILE} = f.file"
    if plan.counted:
        joins += f" LEFT JOIN {_STARTS} AS s ON r.{_FILE} = s.file AND r.{_K} = s.k"
    # a torn line reads as a row of NULLs; every record has a value in one of these columns
    where = "(" + " OR ".join(f"r.{_ident(n)} IS NOT NULL" for n in schema.present) + ")"
    if not superseded and plan.counted and schema.kinds.get("step") in ("int", "float"):
        where += ' AND coalesce(NOT (CAST(r."step" AS DOUBLE) > s.cutoff), true)'
        joins += f" LEFT JOIN ({_latest_sql(plan)}) AS l ON r.{_FILE} = l.file"
        joins += ' AND r.event = l.event AND CAST(r."step" AS DOUBLE) = l.step'
        where += f" AND coalesce(r.{_K} >= l.k, true)"
    return f"SELECT {', '.join(columns)} FROM ({source}) AS r {joins} WHERE {where}"


def _latest_sql(plan: _Plan) -> str:
    """Return the last attempt (as k) that wrote each (file, event, step) of the counted files.

    A later attempt's record wins over an earlier one's at the same (event, step).
    """
    parts = [_counted_sql(plan, *group, ordered=False) for group in plan.reads(counted=True)]
    counted_copies = [index for index in plan.copies if not plan.scans[index].is_simple]
    parts += _copy_parts(plan, counted_copies, ordered=False)
    counted = " UNION ALL BY NAME ".join(f"({part})" for part in parts)
    return (
        f'SELECT {_FILE} AS file, event, CAST("step" AS DOUBLE) AS step, max({_K}) AS k '
        f'FROM ({counted}) WHERE "step" IS NOT NULL GROUP BY ALL'
    )


# --- attempts and files tables ----------------------------------------------------------------


def _file_rows(plan: _Plan) -> list[tuple[str, int, str, int | None, int | None, str | None]]:
    """Return (file, index, run, rank, attempt, label) per file.

    attempt is None where it is counted; label is the run's name where names collide.
    """
    ranked = {log.run for log in plan.logs if log.rank is not None}
    labels = run_labels(plan.logs)
    rows = []
    for index, (log, scan) in enumerate(zip(plan.logs, plan.scans, strict=True)):
        rank = log.rank if log.rank is not None else (0 if log.run in ranked else None)
        attempt = None
        if scan.is_simple:
            attempt = attempt_numbers([s.attempt for s in scan.starts])[0] if scan.starts else 1
        rows.append((str(log.path), index, log.run, rank, attempt, labels.get(log.path)))
    return rows


def _start_rows(plan: _Plan) -> list[tuple[str, int, int, float]]:
    """Return (file, k, attempt, cutoff) for each k run_starts seen, in files counted."""
    rows = []
    for log, scan in zip(plan.logs, plan.scans, strict=True):
        if scan.is_simple:
            continue
        numbers = [1, *attempt_numbers([s.attempt for s in scan.starts])]
        cutoffs = step_cutoffs([s.resume_step for s in scan.starts])
        rows += [(str(log.path), k, numbers[k], cutoffs[k]) for k in range(len(numbers))]
    return rows


def _register_tables(con: duckdb.DuckDBPyConnection, plan: _Plan) -> None:
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE {_FILES} "
        "(file VARCHAR, fidx INTEGER, run VARCHAR, rank BIGINT, attempt BIGINT, label VARCHAR)"
    )
    con.executemany(f"INSERT INTO {_FILES} VALUES (?, ?, ?, ?, ?, ?)", _file_rows(plan))
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE {_STARTS} "
        "(file VARCHAR, k BIGINT, attempt BIGINT, cutoff DOUBLE)"
    )
    starts = _start_rows(plan)
    if starts:
        con.executemany(f"INSERT INTO {_STARTS} VALUES (?, ?, ?, ?)", starts)


# --- connections ------------------------------------------------------------------------------


def _import_duckdb(caller: str) -> Any:
    try:
        import duckdb
    except ImportError as err:
        msg = f"{caller} needs DuckDB: {_INSTALL}"
        raise ImportError(msg) from err
    return duckdb


def _new_connection(caller: str) -> duckdb.DuckDBPyConnection:
    engine = _import_duckdb(caller)
    # spill files go to the system's temp folder, not a `.tmp` in the caller's working folder
    spill = Path(tempfile.gettempdir()) / f"runlines-duckdb-{os.getpid()}"
    config = {"preserve_insertion_order": True, "temp_directory": str(spill)}
    con: duckdb.DuckDBPyConnection = engine.connect(":memory:", config=config)
    con.execute("SET enable_progress_bar = false")  # it would print into the caller's stdout
    # each Parquet copy's footer read once per connection, not once per scan of it
    con.execute("SET parquet_metadata_cache = true")
    return con


def _plan(
    con: duckdb.DuckDBPyConnection,
    sources: Sequence[str | os.PathLike[str]],
    events: Sequence[str] | None = None,
    *,
    nested_as_json: bool = False,
) -> _Plan:
    logs = find_logs(*sources)
    level = _caller_level()
    found: dict[int, Copy] = {}
    for i, log in enumerate(logs):  # a loop, not a comprehension: its frame would shift level
        if (copy := usable_copy(log, stacklevel=level)) is not None:
            found[i] = copy
    folder: list[Path] = []

    def tails() -> Path:
        if not folder:  # removed with the connection: a view reads its tails while it lives
            folder.append(Path(tempfile.mkdtemp(prefix="runlines-tails-")))
            weakref.finalize(con, shutil.rmtree, folder[0], True)
        return folder[0]

    _scan_copies(con, list(found.values()))
    copies = {
        i: read
        for i, copy in found.items()
        if (read := _read_through_copy(con, copy, tails, events=events is not None))
    }
    jsonl = [log.path for i, log in enumerate(logs) if i not in copies]
    scanned = iter(_discover(con, jsonl, events=events is not None))
    scans = [
        _scan_through_copy(copies[i]) if i in copies else next(scanned) for i in range(len(logs))
    ]
    _warn_deep(logs, scans)
    schema = _schema(scans, events, nested_as_json=nested_as_json)
    has_rank = "rank" in schema.kinds or any(log.rank is not None for log in logs)
    return _Plan(logs, scans, schema, has_rank, copies)


def _warn_deep(logs: Sequence[LogFile], scans: Sequence[_Scan]) -> None:
    """Warn once per file of records skipped for nesting too deep, as `runlines.load` skips them."""
    for log, scan in zip(logs, scans, strict=True):
        if scan.deep:
            count = len(scan.deep)
            msg = (
                f"{log.path}: skipped {count} {'line' if count == 1 else 'lines'} nested deeper "
                f"than {_MAX_DEPTH:,} levels, as runlines.load() does; the other records are read"
            )
            warnings.warn(msg, RunlinesWarning, stacklevel=_caller_level())


def _caller_level() -> int:
    """Return the stacklevel of the first frame outside runlines (and contextlib): the user's."""
    package = str(Path(__file__).resolve().parent.parent)
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and (
        frame.f_code.co_filename.startswith(package)
        or frame.f_code.co_filename == contextlib.__file__
    ):
        frame, level = frame.f_back, level + 1
    return level


def _create_views(
    con: duckdb.DuckDBPyConnection, plan: _Plan, *, superseded: bool, ordered: bool = False
) -> None:
    _register_tables(con, plan)
    base = _base_sql(plan, superseded=superseded, ordered=ordered)
    con.execute(f"CREATE OR REPLACE TEMP VIEW {_BASE} AS {base}")
    public = ["ts", "event", "run", *(["rank"] if plan.has_rank else []), "attempt"]
    public += plan.schema.fields
    names = ", ".join(_ident(name) for name in public)
    con.execute(f"CREATE OR REPLACE TEMP VIEW {VIEW} AS SELECT {names} FROM {_BASE}")


def connect(
    *sources: str | os.PathLike[str], superseded: bool = False
) -> duckdb.DuckDBPyConnection:
    """Return a new in-memory DuckDB connection whose view ``records`` holds the sources' records.

    Args:
        sources: log files, or folders whose ``*.jsonl`` logs (rank files merged) are all read.
        superseded: keep records that a resumed attempt rewound past (dropped by default).

    Raises:
        ReadError: a source that does not exist, or a folder without logs.
        ImportError: DuckDB is not installed.
    """
    con = _new_connection("connect()")
    try:
        _create_views(con, _plan(con, sources), superseded=superseded)
    except BaseException:
        con.close()
        raise
    return con


@contextmanager
def _connected(
    sources: Sequence[str | os.PathLike[str]], *, superseded: bool
) -> Iterator[duckdb.DuckDBPyConnection]:
    con = connect(*sources, superseded=superseded)
    try:
        yield con
    finally:
        con.close()


def _run_sql(con: duckdb.DuckDBPyConnection, sql: str) -> Any:
    """Run the caller's *sql*, raising `QueryError` with DuckDB's message when it fails."""
    duckdb = _import_duckdb("query()")
    try:
        return con.sql(sql)
    except duckdb.Error as err:
        raise _query_error(err) from err


def _query_error(err: Exception) -> QueryError:
    lines = str(err).strip().splitlines() or [type(err).__name__]
    hints = [line.strip() for line in lines[1:] if line.startswith(("Candidate", "Did you mean"))]
    first = " ".join([lines[0], *hints[:1]])
    msg = (
        f"DuckDB refused the SQL: {first}; the records are in the view {VIEW!r} "
        f"(e.g. SELECT run, count(*) FROM {VIEW} GROUP BY run)"
    )
    return QueryError(msg)


def query(sql: str, *sources: str | os.PathLike[str], superseded: bool = False) -> pd.DataFrame:
    """Run *sql* over the records of *sources*, the view ``records``; return the result.

    Works on logs larger than memory: DuckDB streams the files (only the result must fit).

    Raises:
        QueryError: SQL that DuckDB refused (its message, and the view's name).
        ReadError: a source that does not exist, or a folder without logs.
        ImportError: DuckDB or pandas is not installed.
    """
    _import_pandas("query()")
    if not isinstance(sql, str):
        msg = f"query() takes the SQL first, then the sources; got {type(sql).__name__} {sql!r}"
        raise TypeError(msg)
    with _connected(sources, superseded=superseded) as con:
        relation = _run_sql(con, sql)
        if relation is None:  # a statement without a result, e.g. CREATE TABLE
            import pandas as pd

            return pd.DataFrame()
        try:
            return relation.df()
        except _import_duckdb("query()").Error as err:
            raise _query_error(err) from err


def _import_pandas(caller: str) -> Any:
    try:
        import pandas as pd
    except ImportError as err:
        msg = f"{caller} needs pandas: {_INSTALL}"
        raise ImportError(msg) from err
    return pd


def query_to_file(
    sql: str,
    *sources: str | os.PathLike[str],
    output: str | os.PathLike[str],
    superseded: bool = False,
) -> Path:
    """Write the result of *sql* over *sources* to *output*: CSV or Parquet by its suffix.

    DuckDB writes it as it goes, so the result need not fit in memory.

    Raises:
        ValueError: an output suffix other than .csv or .parquet.
        QueryError: SQL that DuckDB refused.
    """
    output = Path(output)
    options = {".csv": "FORMAT csv, HEADER true", ".parquet": "FORMAT parquet"}
    if output.suffix.lower() not in options:
        msg = f"cannot write {output}: the output must end in .csv or .parquet"
        raise ValueError(msg)
    body = sql.strip().rstrip(";")
    with _connected(sources, superseded=superseded) as con:
        _run_sql(
            con, f"COPY ({body}) TO {_literal(str(output))} ({options[output.suffix.lower()]})"
        )
    return output


def export(
    *sources: str | os.PathLike[str],
    output: str | os.PathLike[str],
    partition_by_run: bool = False,
    superseded: bool = False,
) -> Path:
    """Write every record of *sources*, decoded, to Parquet for BI tools and Spark; return *output*.

    Args:
        output: the Parquet file, or with *partition_by_run* a new folder of
            ``run=<name>/*.parquet`` files (Hive partitioning: readers get ``run`` back).
        superseded: keep records that a resumed attempt rewound past (dropped by default).

    Raises:
        FileExistsError: *partition_by_run* and *output* is a folder that is not empty.
        ReadError: a source that does not exist, or a folder without logs.
    """
    output = Path(output)
    options = "FORMAT parquet"
    if partition_by_run:
        if output.exists() and (not output.is_dir() or any(output.iterdir())):
            msg = f"{output} exists and is not an empty folder; remove it or pick another output"
            raise FileExistsError(msg)
        options += ", PARTITION_BY (run)"
    elif output.is_dir():
        msg = f"{output} is a folder; name a .parquet file, or pass partition_by_run=True"
        raise IsADirectoryError(msg)
    with _connected(sources, superseded=superseded) as con:
        con.execute(f"COPY (SELECT * FROM {VIEW}) TO {_literal(str(output))} ({options})")
    return output


# --- load_duckdb -----------------------------------------------------------------------------


def load_duckdb(
    *sources: str | os.PathLike[str],
    event: str | Iterable[str] | None = None,
    columns: Iterable[str] | None = None,
    superseded: bool = False,
) -> pd.DataFrame:
    """Return the records of *sources* as one DataFrame, read by DuckDB: `runlines.load`'s frame.

    Same arguments, columns, row order and dtypes as `runlines.load` (torn lines are skipped
    without a warning, lines nested too deep with one). It reads in parallel and out of core,
    but the frame must fit in memory.

    Raises:
        ReadError: a source that does not exist, or a folder without logs.
        FieldError: an event name or a column that no record has.
    """
    pd = _import_pandas("load_duckdb()")
    names = event_names(event)
    con = _new_connection("load_duckdb()")
    try:
        plan = _plan(con, sources, names, nested_as_json=True)
        _check_events(plan.schema, names)
        output = _output_columns(plan, columns)
        _create_views(con, plan, superseded=superseded, ordered=True)
        frame = con.sql(_load_sql(plan, output, names)).df()
    finally:
        con.close()
    return _finish_frame(pd, frame, plan.schema, output)


def _check_events(schema: _Schema, names: list[str] | None) -> None:
    if names is None or any(name in schema.events for name in names):
        return
    present = sorted(schema.events)
    close = difflib.get_close_matches(names[0], present, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    msg = f"no record has event {' or '.join(map(repr, names))}{hint}; events: {', '.join(present)}"
    raise FieldError(msg)


def _output_columns(plan: _Plan, columns: Iterable[str] | None) -> list[str]:
    derived = ["rank", "attempt"] if plan.has_rank else ["attempt"]
    if columns is None:
        return [*_FIRST, *derived, *plan.schema.fields]
    wanted = [columns] if isinstance(columns, str) else list(columns)
    known = {*plan.schema.kinds, *derived} - {NONFINITE_KEY}
    unknown = [c for c in wanted if c not in known]
    if unknown:
        close = difflib.get_close_matches(unknown[0], list(known), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        fields = ", ".join(sorted(known - set(_FIRST)))
        msg = f"no record has field {unknown[0]!r}{hint}; fields: {fields}"
        raise FieldError(msg)
    return [*_FIRST, *dict.fromkeys(c for c in wanted if c not in _FIRST)]


def _is_nested(schema: _Schema, name: str) -> bool:
    return name in schema.kinds and schema.column_type(name) not in (
        "DOUBLE",
        "BIGINT",
        "VARCHAR",
        "BOOLEAN",
    )


def _load_sql(plan: _Plan, output: list[str], names: list[str] | None) -> str:
    """Return the SELECT of *output* in log order; nested values as JSON text for Python."""
    schema = plan.schema
    picks = []
    for name in output:
        nested = _is_nested(schema, name)
        picks.append(
            f"CAST(to_json({_ident(name)}) AS VARCHAR) AS {_ident(name)}"
            if nested
            else _ident(name)
        )
    if NONFINITE_KEY in schema.kinds:
        picks.append(f"CAST({_ident(NONFINITE_KEY)} AS VARCHAR) AS {_ident(NONFINITE_KEY)}")
    where = f" WHERE event IN ({', '.join(map(_literal, names))})" if names is not None else ""
    return f"SELECT {', '.join(picks)} FROM {_BASE}{where} ORDER BY {_FIDX}, {_ROW}"


def _finish_frame(pd: Any, frame: pd.DataFrame, schema: _Schema, output: list[str]) -> pd.DataFrame:
    """Decode nested values and restore the non-finite floats inside them, as `load` does."""
    nested = [name for name in output if _is_nested(schema, name)]
    for name in nested:
        frame[name] = pd.Series(
            [None if v is None or v != v else _loose_json(v) for v in frame[name].tolist()],
            index=frame.index,
            dtype=object,
        )
    if NONFINITE_KEY in frame.columns:
        marks = frame.pop(NONFINITE_KEY)
        _restore_nested(frame, marks, nested)
    if pd.__version__ >= "3":  # pandas' str dtype, as load() gives, also for all-missing text
        for name in output:
            if name in schema.kinds and schema.column_type(name) == "VARCHAR":
                frame[name] = frame[name].astype("str")
    return frame


def _restore_nested(frame: pd.DataFrame, marks: pd.Series, nested: list[str]) -> None:
    if not nested:
        return
    for row, text in zip(marks.index[marks.notna()], marks[marks.notna()].tolist(), strict=True):
        record = {name: frame.at[row, name] for name in nested}
        record[NONFINITE_KEY] = _loose_json(text)
        for name, value in restore_nonfinite(record).items():
            frame.at[row, name] = value
