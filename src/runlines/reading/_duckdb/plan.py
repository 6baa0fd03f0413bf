"""The plan of a read: the logs of the sources, each one's scan (through its copy), the schema."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import warnings
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb

from runlines.errors import RunlinesWarning
from runlines.reading._copies import Copy, usable_copy
from runlines.reading._duckdb.copies import (
    CopyRead,
    read_through_copy,
    scan_copies,
    scan_through_copy,
)
from runlines.reading._duckdb.scan import MAX_DEPTH, Scan, discover
from runlines.reading._duckdb.schema import Schema, schema_of
from runlines.reading._files import LogFile, find_logs


@dataclass(frozen=True, slots=True)
class Plan:
    """The files to read, split by whether their attempts need counting, and the schema.

    A log read through its copy has its scan merged from the copy's and its tail's, in lines
    of the whole log, and its entry in *copies* (by its index in *logs*).
    """

    logs: list[LogFile]
    scans: list[Scan]
    schema: Schema
    has_rank: bool
    copies: dict[int, CopyRead]

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


def plan_of(
    con: duckdb.DuckDBPyConnection,
    sources: Sequence[str | os.PathLike[str]],
    events: Sequence[str] | None = None,
    *,
    nested_as_json: bool = False,
) -> Plan:
    """Return the plan of reading *sources*: each log's scan (through its copy if usable)."""
    logs = find_logs(*sources)
    level = caller_level()
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

    scan_copies(con, list(found.values()))
    copies = {
        i: read
        for i, copy in found.items()
        if (read := read_through_copy(con, copy, tails, events=events is not None))
    }
    jsonl = [log.path for i, log in enumerate(logs) if i not in copies]
    scanned = iter(discover(con, jsonl, events=events is not None))
    scans = [
        scan_through_copy(copies[i]) if i in copies else next(scanned) for i in range(len(logs))
    ]
    warn_deep(logs, scans)
    schema = schema_of(scans, events, nested_as_json=nested_as_json)
    has_rank = "rank" in schema.kinds or any(log.rank is not None for log in logs)
    return Plan(logs, scans, schema, has_rank, copies)


def warn_deep(logs: Sequence[LogFile], scans: Sequence[Scan]) -> None:
    """Warn once per file of records skipped for nesting too deep, as `runlines.load` skips them."""
    for log, scan in zip(logs, scans, strict=True):
        if scan.deep:
            count = len(scan.deep)
            msg = (
                f"{log.path}: skipped {count} {'line' if count == 1 else 'lines'} nested deeper "
                f"than {MAX_DEPTH:,} levels, as runlines.load() does; the other records are read"
            )
            warnings.warn(msg, RunlinesWarning, stacklevel=caller_level())


def caller_level() -> int:
    """Return the stacklevel of the first frame outside runlines (and contextlib): the user's."""
    package = str(Path(__file__).resolve().parents[2])  # runlines/
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and (
        frame.f_code.co_filename.startswith(package)
        or frame.f_code.co_filename == contextlib.__file__
    ):
        frame, level = frame.f_back, level + 1
    return level
