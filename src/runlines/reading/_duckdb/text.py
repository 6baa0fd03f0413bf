"""SQL text: quoted names and literals, JSON pointers, and the names the view's SQL uses."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

#: The name of the view that holds every record of the sources (`runlines.sql.VIEW`).
VIEW: Final = "records"
# the internal tables, views and columns of the view's SQL: the user sees none of them
BASE: Final = "__runlines_base"
FILES: Final = "__runlines_files"
STARTS: Final = "__runlines_starts"
FILE: Final = "__runlines_file"
ROW: Final = "__runlines_row"
FIDX: Final = "__runlines_fidx"
K: Final = "__runlines_k"
IS_START: Final = "__runlines_is_start"
PREV: Final = "__runlines_prev"
SEEN: Final = "__runlines_seen"
INTERNAL: Final = "__runlines_"  # the prefix of the names above: no field's column


def ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def sql_list(items: Iterable[str]) -> str:
    return "[" + ", ".join(literal(item) for item in items) + "]"


def pointer_path(pointer: str) -> str:
    """Return the DuckDB JSON path of key *pointer* in the `_nonfinite` object."""
    return "/" + pointer.replace("~", "~0").replace("/", "~1")


def escaped(name: str) -> str:
    """Return *name* as a key in a JSON pointer."""
    return name.replace("~", "~0").replace("/", "~1")
