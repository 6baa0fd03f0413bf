"""`load_duckdb`: the records as `runlines.load`'s frame, read through the view's base."""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from runlines._encoding import NONFINITE_KEY, restore_nonfinite
from runlines.errors import FieldError
from runlines.reading._duckdb.plan import Plan, plan_of
from runlines.reading._duckdb.scan import loose_json
from runlines.reading._duckdb.schema import FIRST, Schema
from runlines.reading._duckdb.text import BASE, FIDX, ROW, ident, literal
from runlines.reading._duckdb.views import create_views, needs_pandas, new_connection
from runlines.reading._rules import event_names

if TYPE_CHECKING:
    import pandas as pd


def load_duckdb(
    *sources: str | os.PathLike[str],
    event: str | Iterable[str] | None = None,
    columns: Iterable[str] | None = None,
    superseded: bool = False,
) -> pd.DataFrame:
    """Return the records of *sources* as `runlines.load`'s frame: `runlines.sql.load_duckdb`."""
    pd = needs_pandas("load_duckdb()")
    names = event_names(event)
    con = new_connection()
    try:
        plan = plan_of(con, sources, names, nested_as_json=True)
        check_events(plan.schema, names)
        output = output_columns(plan, columns)
        create_views(con, plan, superseded=superseded, ordered=True)
        frame = con.sql(load_sql(plan, output, names)).df()
    finally:
        con.close()
    return finish_frame(pd, frame, plan.schema, output)


def check_events(schema: Schema, names: list[str] | None) -> None:
    if names is None or any(name in schema.events for name in names):
        return
    present = sorted(schema.events)
    close = difflib.get_close_matches(names[0], present, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    msg = f"no record has event {' or '.join(map(repr, names))}{hint}; events: {', '.join(present)}"
    raise FieldError(msg)


def output_columns(plan: Plan, columns: Iterable[str] | None) -> list[str]:
    derived = ["rank", "attempt"] if plan.has_rank else ["attempt"]
    if columns is None:
        return [*FIRST, *derived, *plan.schema.fields]
    wanted = [columns] if isinstance(columns, str) else list(columns)
    known = {*plan.schema.kinds, *derived} - {NONFINITE_KEY}
    unknown = [c for c in wanted if c not in known]
    if unknown:
        close = difflib.get_close_matches(unknown[0], list(known), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        fields = ", ".join(sorted(known - set(FIRST)))
        msg = f"no record has field {unknown[0]!r}{hint}; fields: {fields}"
        raise FieldError(msg)
    return [*FIRST, *dict.fromkeys(c for c in wanted if c not in FIRST)]


def is_nested(schema: Schema, name: str) -> bool:
    return name in schema.kinds and schema.column_type(name) not in (
        "DOUBLE",
        "BIGINT",
        "VARCHAR",
        "BOOLEAN",
    )


def load_sql(plan: Plan, output: list[str], names: list[str] | None) -> str:
    """Return the SELECT of *output* in log order; nested values as JSON text for Python."""
    schema = plan.schema
    picks = []
    for name in output:
        nested = is_nested(schema, name)
        picks.append(
            f"CAST(to_json({ident(name)}) AS VARCHAR) AS {ident(name)}" if nested else ident(name)
        )
    if NONFINITE_KEY in schema.kinds:
        picks.append(f"CAST({ident(NONFINITE_KEY)} AS VARCHAR) AS {ident(NONFINITE_KEY)}")
    where = f" WHERE event IN ({', '.join(map(literal, names))})" if names is not None else ""
    return f"SELECT {', '.join(picks)} FROM {BASE}{where} ORDER BY {FIDX}, {ROW}"


def finish_frame(pd: Any, frame: pd.DataFrame, schema: Schema, output: list[str]) -> pd.DataFrame:
    """Decode nested values and restore the non-finite floats inside them, as `load` does."""
    nested = [name for name in output if is_nested(schema, name)]
    for name in nested:
        frame[name] = pd.Series(
            [None if v is None or v != v else loose_json(v) for v in frame[name].tolist()],
            index=frame.index,
            dtype=object,
        )
    if NONFINITE_KEY in frame.columns:
        marks = frame.pop(NONFINITE_KEY)
        restore_nested(frame, marks, nested)
    if pd.__version__ >= "3":  # pandas' str dtype, as load() gives, also for all-missing text
        for name in output:
            if name in schema.kinds and schema.column_type(name) == "VARCHAR":
                frame[name] = frame[name].astype("str")
    return frame


def restore_nested(frame: pd.DataFrame, marks: pd.Series, nested: list[str]) -> None:
    if not nested:
        return
    for row, text in zip(marks.index[marks.notna()], marks[marks.notna()].tolist(), strict=True):
        record = {name: frame.at[row, name] for name in nested}
        record[NONFINITE_KEY] = loose_json(text)
        for name, value in restore_nonfinite(record).items():
            frame.at[row, name] = value
