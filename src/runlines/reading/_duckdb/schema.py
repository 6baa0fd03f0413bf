"""The view's schema: each field's kind, merged over the shapes of all logs, and its DuckDB type."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import orjson

from runlines._encoding import NONFINITE_KEY
from runlines.errors import RunlinesWarning
from runlines.reading._duckdb.scan import Scan
from runlines.reading._duckdb.text import INTERNAL, ident

FIRST: Final = ("ts", "event", "run")
TEXT_FIELDS: Final = ("event", "run")
MAX_STRUCT_FIELDS: Final = 200  # wider objects stay JSON, as DuckDB's own map inference does

# A field's kind: a JSON scalar kind, ("object", {name: kind}) or ("array", kind).
Kind: TypeAlias = str | tuple[str, Any]
STRUCTURE_KINDS: Final = {
    "NULL": "null",
    "BOOLEAN": "bool",
    "UBIGINT": "int",
    "BIGINT": "int",
    "DOUBLE": "float",
    "VARCHAR": "str",
}
SQL_TYPES: Final = {
    "null": "JSON",
    "json": "JSON",
    "bool": "BOOLEAN",
    "int": "BIGINT",
    "float": "DOUBLE",
    "str": "VARCHAR",
}
NUMBERS: Final = ("int", "float", "null")


def kind_of(structure: Any, *, in_array: bool = False) -> Kind:
    """Return the kind of a value from DuckDB's ``json_structure`` of one record.

    ``json_structure`` says "JSON" for an empty object, and for items of mixed kinds in an
    array: outside arrays, "JSON" is an empty object.
    """
    if isinstance(structure, dict):
        fields = {name: kind_of(value, in_array=in_array) for name, value in structure.items()}
        return ("object", fields)
    if isinstance(structure, list):
        return ("array", kind_of(structure[0], in_array=True) if structure else "null")
    if structure == "JSON" and not in_array:
        return ("object", {})
    return STRUCTURE_KINDS.get(structure, "json")


def merge_kinds(a: Kind, b: Kind) -> Kind:
    """Return the kind that holds values of both *a* and *b* (JSON when nothing narrower does)."""
    if a == "null" or a == b:
        return b
    if b == "null":
        return a
    if isinstance(a, str) and isinstance(b, str):
        return "float" if {a, b} == {"int", "float"} else "json"
    if isinstance(a, tuple) and isinstance(b, tuple) and a[0] == b[0]:
        if a[0] == "array":
            return ("array", merge_kinds(a[1], b[1]))
        fields = dict(a[1])
        for name, kind in b[1].items():
            fields[name] = merge_kinds(fields.get(name, "null"), kind)
        return ("object", fields)
    return "json"


def sql_type(kind: Kind) -> str:
    """Return the DuckDB type for values of *kind*."""
    if isinstance(kind, str):
        return SQL_TYPES[kind]
    if kind[0] == "array":
        return f"{sql_type(kind[1])}[]"
    fields: dict[str, Kind] = kind[1]
    if not fits_struct(fields):
        return "JSON"
    inner = ", ".join(f"{ident(name)} {sql_type(value)}" for name, value in fields.items())
    return f"STRUCT({inner})"


def fits_struct(fields: dict[str, Kind]) -> bool:
    names = [name.lower() for name in fields]
    return 0 < len(names) <= MAX_STRUCT_FIELDS and "" not in names and len(set(names)) == len(names)


@dataclass(frozen=True, slots=True)
class Schema:
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
        if name == "ts" or (name in self.nonfinite and kind in NUMBERS):
            return "DOUBLE"
        if name in TEXT_FIELDS:
            return "VARCHAR"
        if name == "rank":
            return "BIGINT"
        return "JSON" if name == NONFINITE_KEY else sql_type(kind)

    @property
    def fields(self) -> list[str]:
        """The record fields other than ts, event, run, rank and `_nonfinite`."""
        skip = {*FIRST, "rank", "attempt", NONFINITE_KEY}
        return [name for name in self.kinds if name not in skip]


def schema_of(
    scans: Sequence[Scan], events: Sequence[str] | None, *, nested_as_json: bool
) -> Schema:
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
        marked = marked_fields(structure.get(NONFINITE_KEY))
        for place, (name, value) in enumerate(structure.items()):
            kind = kind_of(value)
            kinds[name] = merge_kinds(kinds.get(name, "null"), kind)
            counts.setdefault(name, 0)
            if kind != "null":
                shapes[-1].add(name)
            if kind != "null" or name in marked:
                counts[name] += count
                first[name] = min(first.get(name, (scan, row, place)), (scan, row, place))
    for name in FIRST:
        kinds.setdefault(name, "null")
    nonfinite = kinds.get(NONFINITE_KEY)
    pointers = nonfinite[1] if isinstance(nonfinite, tuple) and nonfinite[0] == "object" else {}
    names = [name for name in usable_names(kinds, counts) if name not in FIRST]
    held = sorted((n for n in names if counts[n]), key=lambda n: (-counts[n], first[n]))
    rest = held + sorted(n for n in names if not counts[n])
    return Schema(
        {name: kinds[name] for name in (*FIRST, *rest)},
        frozenset(top_level_field(p) for p in pointers if p.count("/") == 1),
        frozenset(seen_events),
        nested_as_json,
        present_columns(shapes, [*FIRST, *rest]),
    )


def marked_fields(marks: Any) -> set[str]:
    """Return the top-level fields that a record's `_nonfinite` structure marks."""
    if not isinstance(marks, dict):
        return set()
    return {top_level_field(pointer) for pointer in marks if pointer.count("/") == 1}


def present_columns(shapes: list[set[str]], names: list[str]) -> tuple[str, ...]:
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


def usable_names(kinds: dict[str, Kind], counts: dict[str, int]) -> list[str]:
    """Return the names DuckDB can hold as columns, warning about the others.

    DuckDB's column names ignore case: of names that differ only in case, the commonest stays.
    """
    by_lower: dict[str, list[str]] = {}
    for name in kinds:
        if not name.startswith(INTERNAL) and name:
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


def top_level_field(pointer: str) -> str:
    return pointer[1:].replace("~1", "/").replace("~0", "~")
