"""What the SQL engines (DuckDB, Spark) take from a log's Parquet copy, while it matches the log.

A copy (see `runlines.reading._parquet`) stores each field in one column per value type, named
``c<i>``; the values Python read (nested ones, non-finite floats, ints beyond 64 bits, whole
lines pyarrow could not take) as a JSON object per row in ``__patch``; the fields a line holds
as null in ``__nulls``; each row's 0-based line in ``__line``. The engines read those columns
with their own Parquet readers, and the JSONL after the copy (the tail) from a file of its own.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from runlines._layout import open_regular
from runlines.reading._files import LogFile
from runlines.reading._parquet import _LINE as LINE
from runlines.reading._parquet import _NULLS as NULLS
from runlines.reading._parquet import _PATCH as PATCH
from runlines.reading._parquet import _usable_copy

__all__ = ["LINE", "NULLS", "PATCH", "Copy", "usable_copy", "write_tail"]

_DEPTH: Final = "depth"  # in orjson's message for a line nested deeper than it reads


@dataclass(frozen=True, slots=True)
class Copy:
    """A log's usable copy: where it is, what it covers, and the field of each storage column."""

    log: LogFile
    path: Path
    covers_bytes: int
    covers_lines: int
    log_size: int  # when the copy was checked: bytes past covers_bytes are the tail
    # field: its storage columns (one per value type), in the copy's order
    storage: dict[str, list[str]]
    # per field holding a value: the line (from 0) and place in it of its first one
    first_values: dict[str, tuple[int, int]]
    deep_lines: tuple[int, ...]  # lines the copy skipped for nesting too deep (from 1)

    @property
    def has_tail(self) -> bool:
        """True when the log holds bytes after those the copy covers."""
        return self.log_size > self.covers_bytes


def usable_copy(log: LogFile, *, stacklevel: int) -> Copy | None:
    """Return *log*'s copy when it matches the log's bytes; warn (at *stacklevel*) when it does
    not, or when the file at the copy's path is no copy. None without a copy or without pyarrow.
    """
    found = _usable_copy(log, stacklevel=stacklevel + 3)  # from _checked_copy, via us
    if found is None:
        return None
    meta, path = found
    storage: dict[str, list[str]] = {}
    for piece in meta.pieces:
        for name, index in piece["columns"]:
            held = storage.setdefault(name, [])
            if f"c{index}" not in held:
                held.append(f"c{index}")
    return Copy(
        log,
        path,
        meta.covers_bytes,
        meta.covers_lines,
        log.path.stat().st_size,
        storage,
        _first_values(meta.pieces),
        tuple(int(line) for line, reason in meta.bad if _DEPTH in str(reason)),
    )


def _first_values(pieces: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """Return where the first value of each field of *pieces* is: its line and place in it."""
    first: dict[str, tuple[int, int]] = {}
    for piece in pieces:
        for name, (count, line, place) in piece["fields"].items():
            if count and (name not in first or (line, place) < first[name]):
                first[name] = (line, place)
    return first


def write_tail(copy: Copy, folder: Path) -> Path:
    """Write the log's bytes after those *copy* covers to a new file in *folder*; return it."""
    folder.mkdir(parents=True, exist_ok=True)
    tail = folder / f"{len(list(folder.iterdir()))}-{copy.log.path.name}"
    with open_regular(copy.log.path) as source, tail.open("xb") as target:
        source.seek(copy.covers_bytes)
        shutil.copyfileobj(source, target, length=1 << 20)
    return tail
