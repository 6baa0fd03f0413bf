"""A log read through its Parquet copy: the copy's scan in place of the JSONL's, and its SQL.

A log with a copy that matches it is read from the copy (`read_parquet`), each field mapped
from its storage columns and `__patch` (see reading/_copies), and from a file holding the
log's bytes after the copy (the tail), read as any JSONL. The copy's shapes come from one
grouping pass over its columns' validity, in place of the first pass over the JSONL, and
give the same kinds: a field a line holds as null (`__nulls`) is null there, also where
Python restored a non-finite float, which the line marks in `_nonfinite`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeAlias

import duckdb
import orjson

from runlines._encoding import NONFINITE_KEY
from runlines._layout import COPY_SUFFIX
from runlines.reading._copies import LINE, NULLS, PATCH, Copy, write_tail
from runlines.reading._duckdb.scan import Scan, Start, cache_key, discover, loose_json
from runlines.reading._duckdb.schema import Schema
from runlines.reading._duckdb.text import FILE, ROW, K, escaped, ident, literal, sql_list

STORED: Final = {"int": "BIGINT", "float": "DOUBLE", "str": "VARCHAR", "bool": "BOOLEAN"}

# `valid`: bit i of word i // 63 is storage column i's validity; `strings` reads the strings
# (DuckDB checks they are UTF-8 as it reads them)
COPY_SHAPES_SQL: Final = """
SELECT filename, {event} AS event, [{valid}] AS valid, json_structure({patch}) AS patch,
       {nulls} AS nulls, count(*) AS n, min({line}) + 1 AS first_row, [{strings}] AS strings
FROM read_parquet({path}, filename=true) GROUP BY ALL
"""
BITS: Final = 63
# the value kind of each Parquet physical type a copy's storage columns have (strings: bytes)
PARQUET_KINDS: Final = {"INT64": "int", "DOUBLE": "float", "BOOLEAN": "bool", "BYTE_ARRAY": "str"}
COPY_STARTS_SQL: Final = """
SELECT filename, {line} + 1, CAST({attempt} AS VARCHAR), CAST({resume} AS VARCHAR)
FROM read_parquet({path}, filename=true) WHERE {event} = 'run_start' ORDER BY 1, 2
"""

# a copy's scan, the fields some row's patch holds, and the kind of each storage column
CopyScan: TypeAlias = tuple[Scan, frozenset[str], dict[str, str]]
# (copy's resolved path, size, mtime_ns) -> its CopyScan, or None for a copy DuckDB cannot read
cached_copy_scans: dict[tuple[str, int, int], CopyScan | None] = {}


@dataclass(frozen=True, slots=True)
class CopyRead:
    """How the view reads one log through its Parquet copy: the copy, then the tail file."""

    copy: Copy
    scan: Scan  # of the copy's records; rows are the log's lines, from 1
    patched: frozenset[str]  # the fields that some row's `__patch` holds
    types: dict[str, str]  # each storage column's kind: int, float, str or bool
    tail: Path | None  # the log's bytes after the copy, in a file of their own
    tail_scan: Scan | None

    @property
    def starts(self) -> list[int]:
        """The lines of the copy's run_start records."""
        return [start.row for start in self.scan.starts]


def read_through_copy(
    con: duckdb.DuckDBPyConnection, copy: Copy, tails: Callable[[], Path], *, events: bool
) -> CopyRead | None:
    """Return how to read *copy*'s log: the copy's scan, and its tail written to a file.

    None for a copy that DuckDB refuses: strings that are not UTF-8, which DuckDB's JSON
    reader skips in the log (and load() reads). The log is then read from its JSONL alone.
    """
    found = cached_copy_scans[copy_key(copy)]
    if found is None:
        return None
    scan, patched, types = found
    tail = tail_scan = None
    if copy.has_tail:
        tail = write_tail(copy, tails())
        tail_scan = discover(con, [tail], events=events, cache=False)[0]
    return CopyRead(copy, scan, patched, types, tail, tail_scan)


def copy_key(copy: Copy) -> tuple[str, int, int]:
    return cache_key(copy.path, False)[:3]


def scan_copies(con: duckdb.DuckDBPyConnection, copies: Sequence[Copy]) -> None:
    """Scan the *copies* not scanned yet: one pass over all copies of one layout (the same
    fields in the same storage columns and types, as a sweep's runs have), into `cached_copy_scans`.
    """
    todo = {key: copy for copy in copies if (key := copy_key(copy)) not in cached_copy_scans}
    if not todo:
        return
    paths = sql_list(str(copy.path) for copy in todo.values())
    types: dict[str, dict[str, str]] = {}
    for path, name, kind in con.execute(
        f"SELECT file_name, name, type FROM parquet_schema({paths})"
    ).fetchall():
        types.setdefault(path, {})[name] = PARQUET_KINDS.get(kind, "str")
    layouts: dict[Any, list[tuple[tuple[str, int, int], Copy]]] = {}
    for key, copy in todo.items():
        held = types.get(str(copy.path), {})
        layout = (tuple((n, tuple(c)) for n, c in copy.storage.items()), tuple(held.items()))
        layouts.setdefault(layout, []).append((key, copy))
    for members in layouts.values():
        group = [copy for _, copy in members]
        scanned: list[CopyScan | None]
        try:
            scanned = [*copy_scan(con, group, types.get(str(group[0].path), {}))]
        except duckdb.Error:  # one copy DuckDB refuses: find it, read the others through theirs
            scanned = [copy_scan_or_none(con, [copy], types) for copy in group]
        for (key, _), result in zip(members, scanned, strict=True):
            cached_copy_scans[key] = result


def copy_scan_or_none(
    con: duckdb.DuckDBPyConnection, copies: list[Copy], types: dict[str, dict[str, str]]
) -> CopyScan | None:
    try:
        return copy_scan(con, copies, types.get(str(copies[0].path), {}))[0]
    except duckdb.Error:
        return None


def copy_scan(
    con: duckdb.DuckDBPyConnection, copies: list[Copy], types: dict[str, str]
) -> list[CopyScan]:
    """Return the scan of each of *copies* (rows are log lines, from 1), its patched fields,
    and the kind of each storage column: copies of one layout, in one pass over them all.
    """
    copy = copies[0]
    columns = [(name, c, types.get(c, "str")) for name, held in copy.storage.items() for c in held]
    validity = [
        " + ".join(
            f"CASE WHEN {ident(c)} IS NOT NULL THEN {1 << bit}::BIGINT ELSE 0 END"
            for bit, (_, c, _) in enumerate(columns[first : first + BITS])
        )
        for first in range(0, len(columns), BITS)
    ]
    strings = [f"max(strlen({ident(c)}))" for _, c, kind in columns if kind == "str"]
    event_sql = copy_value(copy, types, None, "event", "VARCHAR")
    paths = sql_list(str(c.path) for c in copies)
    sql = COPY_SHAPES_SQL.format(
        event=event_sql,
        valid=", ".join(validity),
        strings=", ".join(strings),
        patch=ident(PATCH),
        nulls=ident(NULLS),
        line=ident(LINE),
        path=paths,
    )
    groups: dict[str, list[tuple[Any, ...]]] = {str(c.path): [] for c in copies}
    for path, event, words, *rest in con.execute(sql).fetchall():
        groups[path].append((event, validity_bits(words, len(columns)), *rest))
    starts: dict[str, list[Start]] = {str(c.path): [] for c in copies}
    if any(group[0] == "run_start" for found in groups.values() for group in found):
        sql = COPY_STARTS_SQL.format(
            line=ident(LINE),
            attempt=copy_value(copy, types, None, "attempt", "JSON"),
            resume=copy_value(copy, types, None, "resume_step", "JSON"),
            event=event_sql,
            path=paths,
        )
        for path, row, attempt, resume in con.execute(sql).fetchall():
            starts[path].append(Start(int(row), loose_json(attempt), loose_json(resume)))
    return [
        copy_result(c, columns, groups[str(c.path)], starts[str(c.path)], types) for c in copies
    ]


def copy_result(
    copy: Copy,
    columns: list[tuple[str, str, str]],
    groups: list[tuple[Any, ...]],
    starts: list[Start],
    types: dict[str, str],
) -> CopyScan:
    groups = sorted(groups, key=lambda group: int(group[5]))
    patched = frozenset(
        name for group in groups if group[2] for name in object_keys(orjson.loads(group[2]))
    )
    order = key_order(copy)
    shapes = tuple(
        (event, copy_shape(order, columns, valid, patch, nulls), int(n), int(first))
        for event, valid, patch, nulls, n, first, _ in groups
    )
    first = min((shape[3] for shape in shapes), default=0)
    return Scan(shapes, first, tuple(starts), copy.deep_lines), patched, types


def validity_bits(words: list[int], count: int) -> list[bool]:
    """Return the validity of *count* storage columns from their words of `BITS` bits."""
    return [bool(words[i // BITS] >> (i % BITS) & 1) for i in range(count)]


def key_order(copy: Copy) -> list[str]:
    """Return the copy's fields by where their first value is: the JSONL's order for `schema_of`.

    In the shape of a group's first line, the fields whose first value is in that line then
    come in their places in it.
    """
    return sorted(copy.first_values, key=copy.first_values.__getitem__)


def copy_shape(
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
    marks = {"/" + escaped(name): "VARCHAR" for name in null if patched.get(name) == "DOUBLE"}
    for name in names:
        if name in null:
            structure[name] = "NULL"  # the line's value: a non-finite float is marked instead
        elif name in patched:
            structure[name] = patched[name]
        elif name in stored:
            structure[name] = STORED.get(stored[name], "JSON")
    if marks:
        structure[NONFINITE_KEY] = marks
    return orjson.dumps(structure).decode()


def object_keys(structure: Any) -> list[str]:
    return list(structure) if isinstance(structure, dict) else []


def scan_through_copy(read: CopyRead) -> Scan:
    """Return the scan of a log read through its copy: the copy's, then its tail's after it.

    The tail's rows follow the copy's lines: only their order matters.
    """
    scan, tail = read.scan, read.tail_scan
    if tail is None:
        return scan
    at = read.copy.covers_lines
    return Scan(
        scan.shapes + tuple((e, shape, n, at + first) for e, shape, n, first in tail.shapes),
        scan.first_row if scan.shapes else at + tail.first_row,
        scan.starts + tuple(Start(at + s.row, s.attempt, s.resume_step) for s in tail.starts),
        scan.deep + tuple(at + row for row in tail.deep),
    )


def copies_sql(reads: list[CopyRead], schema: Schema, *, counted: bool, ordered: bool) -> str:
    """Return the SELECT of the rows of the copies of *reads*: one log whose attempts are
    *counted*, or logs of one layout (their copies' storage columns and types) that need none.

    Its columns are those of the JSONL's read in *schema* (and `K` for a counted log).
    """
    first = reads[0]
    patched = frozenset().union(*(read.patched for read in reads))
    line = f"({ident(LINE)} + 1)"

    def value(name: str, kind: str) -> str:
        return copy_value(first.copy, first.types, patched, name, kind)

    columns = [
        f"{value(name, schema.column_type(name))} AS {ident(name)}"
        for name in schema.kinds
        if name != NONFINITE_KEY
    ]
    if NONFINITE_KEY in schema.kinds:  # null where the copy holds the values it restored
        columns.append(f"{value(NONFINITE_KEY, 'JSON')} AS {ident(NONFINITE_KEY)}")
    # the log of each copy: `<name>.jsonl` beside `<name>.parquet` (see _layout.copy_path)
    columns.append(f"left(filename, length(filename) - {len(COPY_SUFFIX)}) || '.jsonl' AS {FILE}")
    if ordered:
        columns.append(f"{line} AS {ROW}")
    if counted:  # a row's k: the run_starts at or before its line
        whens = [f"WHEN {line} >= {row} THEN {k}" for k, row in enumerate(first.starts, 1)]
        k = f"CASE {' '.join(reversed(whens))} ELSE 0 END" if whens else "0"
        columns.append(f"CAST({k} AS BIGINT) AS {K}")
    paths = sql_list(str(read.copy.path) for read in reads)
    return f"SELECT {', '.join(columns)} FROM read_parquet({paths}, filename=true)"


def tail_sql(read: CopyRead, log: Path, inner: str, *, counted: bool, ordered: bool) -> str:
    """Return the SELECT of the rows of the tail after *log*'s copy, as rows of *log*.

    *inner* reads the tail's file as any JSONL (with `K`, counted in the tail, when *counted*).
    """
    replace = [f"{literal(str(log))} AS {FILE}"]
    if ordered:
        replace.append(f"{ROW} + {read.copy.covers_lines} AS {ROW}")
    if counted:
        replace.append(f"{K} + {len(read.starts)} AS {K}")
    return f"SELECT * REPLACE ({', '.join(replace)}) FROM ({inner})"


def copy_value(
    copy: Copy, types: dict[str, str], patched: frozenset[str] | None, name: str, kind: str
) -> str:
    """Return the SQL of field *name* as DuckDB type *kind* in a row of *copy*.

    A row's patch holds its exact value when there is one (an int beyond 64 bits, a restored
    non-finite float: kept only where the view restores it, in DOUBLE columns), else the
    storage column of its type. *patched* None: the patch is looked into whatever it holds.
    """
    parts = []
    if patched is None or name in patched:
        pointer = literal("/" + escaped(name))
        value = f"json_extract({ident(PATCH)}, {pointer})"
        if kind == "JSON":
            value = f"nullif({value}, 'null')"
        elif kind == "VARCHAR":
            value = f"json_extract_string({ident(PATCH)}, {pointer})"
        else:
            value = f"TRY_CAST({value} AS {kind})"
        if kind != "DOUBLE":  # a line's null stands, as in the view of the JSONL
            nulls = f"list_contains({ident(NULLS)}, {literal(name)})"
            value = f"CASE WHEN {nulls} THEN NULL ELSE {value} END"
        parts.append(value)
    for column in copy.storage.get(name, ()):
        parts.append(stored_value(ident(column), types.get(column, "str"), kind))
    if not parts:
        return f"CAST(NULL AS {kind})"
    return parts[0] if len(parts) == 1 else f"coalesce({', '.join(parts)})"


def stored_value(column: str, stored: str, kind: str) -> str:
    if kind == "JSON":
        return f"to_json({column})"
    if STORED.get(stored) == kind:
        return column
    return f"TRY_CAST({column} AS {kind})"
