"""The discovery pass: each log file's record shapes and run_starts, cached per file.

A first pass over the files (DuckDB's ``read_json_objects`` and ``json_structure``) learns
every record's shape and where each ``run_start`` is; the view then reads the files with
``read_json`` and explicit column types, so no record's field is lost to type sampling. The
pass is cached per file (path, size, mtime) for the life of the process. A line nested deeper
than `runlines.load` reads is found here; its file is read alone, rows numbered, and that row
skipped: the other files' read is unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import duckdb
import orjson

from runlines.errors import ReadError
from runlines.reading._duckdb.text import sql_list

MAX_DEPTH: Final = 1024  # orjson's limit: load() skips a line nested deeper


@dataclass(frozen=True, slots=True)
class Start:
    """One ``run_start`` record: its row in the discovery pass, `attempt` and `resume_step`."""

    row: int
    attempt: Any
    resume_step: Any


@dataclass(frozen=True, slots=True)
class Scan:
    """What the discovery pass learned about one log file."""

    shapes: tuple[tuple[str | None, str, int, int], ...]  # event, json_structure, count, first row
    first_row: int
    starts: tuple[Start, ...]
    deep: tuple[int, ...] = ()  # the rows in the file (from 1) of records nested too deep

    @property
    def is_simple(self) -> bool:
        """True when every record has one attempt: no run_start, or one as the first record."""
        return not self.starts or (len(self.starts) == 1 and self.starts[0].row == self.first_row)


# (resolved path, size, mtime_ns, with event names) -> its scan
cached_scans: dict[tuple[str, int, int, bool], Scan] = {}

# Lines that are not JSON objects have a NULL or non-object shape: `scan_of` leaves them out.
# The event of each shape costs one more parse per line: only load_duckdb(event=...) needs it.
# A line with more brackets than MAX_DEPTH (counted in strings too) may nest deeper than load()
# reads: its text comes back, and `is_too_deep` decides as load() does. json_structure cannot: it
# folds a mixed array into "JSON", however deep its items.
DISCOVER_SQL: Final = """
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


def cache_key(path: Path, events: bool) -> tuple[str, int, int, bool]:
    try:
        stat = path.stat()
    except OSError as err:
        msg = f"cannot read log {path}: {err.strerror or err}; check the path"
        raise ReadError(msg, str(path)) from err
    return (str(path.resolve()), stat.st_size, stat.st_mtime_ns, events)


def discover(
    con: duckdb.DuckDBPyConnection, paths: Sequence[Path], *, events: bool, cache: bool = True
) -> list[Scan]:
    """Return the scan of each file, reading only those not cached (or changed since).

    Without *cache*, the scans are not kept: for files read once, such as a log's tail.
    """
    keys = [cache_key(path, events) for path in paths]
    todo = {
        str(path): key for path, key in zip(paths, keys, strict=True) if key not in cached_scans
    }
    found: dict[str, list[tuple[Any, ...]]] = {path: [] for path in todo}
    if todo:
        event = "json_extract_string(json, '$.event')" if events else "NULL::VARCHAR"
        sql = DISCOVER_SQL.format(files=sql_list(list(todo)), event=event, depth=MAX_DEPTH)
        for row in con.execute(sql).fetchall():
            found[row[0]].append(row[1:])
    scans = {key: scan_of(found[path]) for path, key in todo.items()}
    if cache:
        cached_scans.update(scans)
    return [scans[key] if key in scans else cached_scans[key] for key in keys]


def scan_of(groups: list[tuple[Any, ...]]) -> Scan:
    objects = [group for group in groups if group[1] is not None and group[1].startswith("{")]
    base = min((int(group[3]) for group in groups), default=1)  # the file's first row
    too_deep = [
        [int(found["row"]) for found in candidates or () if is_too_deep(found["text"])]
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
        Start(int(s["row"]), json_value(s["attempt"]), json_value(s["resume_step"]))
        for *_, found, _ in objects
        for s in found or ()
        if int(s["row"]) not in skipped
    ]
    first = min((first for _, _, _, first, *_ in objects), default=0)
    rows = tuple(row - base + 1 for row in deep)
    return Scan(shapes, first, tuple(sorted(starts, key=lambda s: s.row)), rows)


def is_too_deep(text: str) -> bool:
    """Return True for a record that load() skips because it nests deeper than orjson reads."""
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError as err:
        return "depth" in str(err)
    return False


def json_value(text: str | None) -> Any:
    return None if text is None else orjson.loads(text)


def loose_json(text: str | None) -> Any:
    """Return the value of JSON *text*, which may hold NaN and Infinity as Python writes them."""
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)
