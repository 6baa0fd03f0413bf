"""The one owner of the copy of a finished log: `<name>.parquet` beside it, read instead of
the bytes it covers while it matches them.

`format` holds the copy's documented schema and footer keys and the check that a copy matches
its log (`usable_copy`, the one way to a copy for every reader), `read` reads it back as the
engine's parsed log and the JSONL after it (`read_copy`, `read_log`; `sample_lines` for an
engine that infers a schema from lines), `write` writes it
(`write_copy`, `compact`), and `summary` is the run summary it stores (`copy_summary`, what
runs() reads). Each module is imported on the first use of one of its names: `read` and
`write` import numpy and pyarrow, `format` reads a footer with pyarrow where it reads one.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runlines.reading._copies.format import (
        COPY_FORMAT,
        LINE,
        NULLS,
        PATCH,
        Copy,
        usable_copy,
        write_tail,
    )
    from runlines.reading._copies.read import read_copy, read_log, sample_lines
    from runlines.reading._copies.summary import copy_summary
    from runlines.reading._copies.write import compact, write_copy

__all__ = [
    "COPY_FORMAT",
    "LINE",
    "NULLS",
    "PATCH",
    "Copy",
    "compact",
    "copy_summary",
    "read_copy",
    "read_log",
    "sample_lines",
    "usable_copy",
    "write_copy",
    "write_tail",
]

_HOMES = {
    **dict.fromkeys(
        ("COPY_FORMAT", "LINE", "NULLS", "PATCH", "Copy", "usable_copy", "write_tail"), "format"
    ),
    **dict.fromkeys(("read_copy", "read_log", "sample_lines"), "read"),
    "copy_summary": "summary",
    **dict.fromkeys(("compact", "write_copy"), "write"),
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
