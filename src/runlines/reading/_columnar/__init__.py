"""The pyarrow engine: a log's lines into columns, and columns over several logs.

`blocks` reads one log's lines in blocks, `columns` lays out the columns of several logs, and
`attempts` is the numpy twin of the attempt rules. Those modules import numpy and pyarrow at
their top; this door imports each on the first use of one of its names, as `reading` does.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runlines.reading._columnar.attempts import attempts_of, event_rows
    from runlines.reading._columnar.blocks import (
        FileReader,
        ParsedLog,
        Piece,
        arrow_kind,
        checked,
        in_threads,
        read_bytes,
        read_log,
    )
    from runlines.reading._columnar.columns import (
        Columns,
        Layout,
        Numbers,
        as_floats,
        lay_out,
        values_at,
    )

__all__ = [
    "Columns",
    "FileReader",
    "Layout",
    "Numbers",
    "ParsedLog",
    "Piece",
    "arrow_kind",
    "as_floats",
    "attempts_of",
    "checked",
    "event_rows",
    "in_threads",
    "lay_out",
    "read_bytes",
    "read_log",
    "values_at",
]

_HOMES = {
    **dict.fromkeys(("attempts_of", "event_rows"), "attempts"),
    **dict.fromkeys(
        ("FileReader", "ParsedLog", "Piece", "arrow_kind", "checked", "in_threads",
         "read_bytes", "read_log"),
        "blocks",
    ),
    **dict.fromkeys(
        ("Columns", "Layout", "Numbers", "as_floats", "lay_out", "values_at"), "columns"
    ),
}  # fmt: skip


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
