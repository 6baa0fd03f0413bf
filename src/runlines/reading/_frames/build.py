"""load()'s frame from the pyarrow engine's columns: numpy and pyarrow at the top.

The door (`reading/_frames/__init__`) reads the logs and checks that pandas is there before it
imports this module; pandas itself is imported on a thread meanwhile, and handed in as `pd`.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json  # before the door starts pandas' import: no two threads wait on one module

from runlines.errors import FieldError, ReadError, RunlinesWarning
from runlines.reading import _columnar
from runlines.reading._files import LogFile, run_labels
from runlines.reading._rules import (
    FIRST_COLUMNS,
    as_attempt,
    did_you_mean,
    foreign_log_message,
    import_pandas,
    is_runlines_record,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["check_foreign", "frame_of", "with_presence"]

_Ints = npt.NDArray[np.int64]
_Bools = npt.NDArray[np.bool_]


def frame_of(
    logs: list[_columnar.ParsedLog],
    names: list[str] | None,
    columns: Iterable[str] | None,
    superseded: bool,
    caller: str,
    present: dict[str, _Bools | None] | None = None,
) -> pd.DataFrame:
    """Return load()'s frame of the parsed *logs* (events *names*, or all); fill *present*'s
    keys, number columns, with where a record holds a value (NaN and infinities included), as
    `with_presence` does.
    """
    pd = import_pandas(caller)
    table = _columnar.Columns(logs)
    attempt, rewound = _columnar.attempts_of(table, logs)
    keep = np.ones(table.num_rows, dtype=bool) if superseded else ~rewound
    if names is not None:
        keep &= _columnar.event_rows(table, names, {e for log in logs for e in log.skipped})
    # with no event filter, or columns named, the table gives the frame and nothing more
    done = names is None or columns is not None
    output = _output_names(table, logs, columns)
    frame = _frame(pd, table, logs, keep, attempt, output, done, present)
    if names is None or columns is not None:
        return frame
    empty = [n for n in frame.columns if n not in FIRST_COLUMNS and frame[n].isna().all()]
    logged = _logged_fields(empty, table, table.matches("event", names))
    return frame.drop(columns=[n for n in empty if n not in logged])  # other events' fields


def with_presence(
    logs: list[_columnar.ParsedLog], caller: str
) -> tuple[pd.DataFrame, dict[str, _Bools]]:
    """Return load()'s frame of the parsed *logs* and, per number column, the rows whose
    record holds a value (see `load_with_presence`).
    """
    pd = import_pandas(caller)
    table = _columnar.Columns(logs)
    attempt, rewound = _columnar.attempts_of(table, logs)
    keep = ~rewound
    frame = _frame(pd, table, logs, keep, attempt, _output_names(table, logs, None))
    whole = bool(keep.all())
    layout = table.full if whole else _columnar.lay_out(logs, keep)
    present: dict[str, _Bools] = {}
    for name in frame.columns:
        if name in table.names and name not in FIRST_COLUMNS:
            column = table.get(name) if whole else table.build(name, layout)
            if isinstance(column, _columnar.Numbers):
                present[name] = column.valid
    return frame, present


def check_foreign(
    logs: Iterable[_columnar.ParsedLog],
    *,
    refuse: bool,
    sources: Iterable[str | os.PathLike[str]] | None = None,
) -> list[_columnar.ParsedLog]:
    """Return *logs*, having warned about each that is no runlines log (it has records, none
    with a text `event` and a numeric `ts`); with *refuse* (`diff`, `compare`), raise
    ReadError for one named in *sources* itself, and leave out one found in a folder.
    """
    named = None if sources is None else {os.path.abspath(s) for s in sources}
    kept = []
    for parsed in logs:
        if parsed.pieces and not _shaped(parsed):
            message = foreign_log_message(parsed.log.path)
            if refuse and (named is None or os.path.abspath(parsed.log.path) in named):
                raise ReadError(message, str(parsed.log.path))
            warnings.warn(message, RunlinesWarning, stacklevel=4)
            if refuse:
                continue  # a folder's other JSONL, left out as ls and runs() leave it
        kept.append(parsed)
    return kept


def _shaped(parsed: _columnar.ParsedLog) -> bool:
    """Return whether a record of *parsed* has a text event and a numeric ts."""
    for piece in parsed.pieces:
        if any(is_runlines_record(record) for record in piece.records):
            return True
        event, ts = piece.column("event"), piece.column("ts")
        if ts is None or not (pa.types.is_integer(ts.type) or pa.types.is_floating(ts.type)):
            continue
        if piece.event is not None and piece.event:  # one event's bucket: a text event
            texts = pc.is_valid(ts)
        elif event is not None and (pa.types.is_string(event.type) or _is_text(event.type)):
            texts = pc.and_(pc.is_valid(event), pc.is_valid(ts))
        else:
            continue
        if pc.any(texts).as_py():
            return True
    return any(map(_shaped_rows, parsed.pieces))  # the values Python read (patches) too


def _shaped_rows(piece: Any) -> bool:
    """Return whether a row of *piece*, its patched values taken, has a text event and a
    numeric ts (slow: for a log the columns alone do not show one in).
    """
    events, stamps = _row_values(piece, "event"), _row_values(piece, "ts")
    return any(
        is_runlines_record({"event": event, "ts": ts})
        for event, ts in zip(events, stamps, strict=True)
    )


def _row_values(piece: Any, name: str) -> list[Any]:
    column = piece.column(name)
    values = column.to_pylist() if column is not None else [None] * piece.table.num_rows
    if name == "event" and piece.event is not None and column is None:
        values = [piece.event] * piece.table.num_rows
    for row, value in zip(*piece.patches.get(name, ((), ())), strict=True):
        values[row] = value
    return values


def _is_text(kind: Any) -> bool:
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))


def _logged_fields(names: list[str], table: _columnar.Columns, wanted: _Bools) -> set[str]:
    """Return which of *names* a record of the wanted events has, as None, NaN or anything.

    *wanted* is, per output row, whether its event is wanted.
    """
    found: set[str] = set()
    for piece, positions in zip(table.pieces, table.full.positions, strict=True):
        mine = wanted[positions]
        for name in names:
            rows = piece.patches.get(name, ([], []))[0]
            if mine[rows].any() or mine[piece.nulls.get(name, [])].any():
                found.add(name)
            column = piece.column(name)  # a NaN pyarrow read is a value in the table
            held = column is not None and column.null_count < len(column)
            if held and mine[column.is_valid().to_numpy(zero_copy_only=False)].any():
                found.add(name)
    return found


def _has_rank(table: _columnar.Columns, logs: list[_columnar.ParsedLog]) -> bool:
    return "rank" in table.names or any(p.log.rank is not None for p in logs)


def _output_names(
    table: _columnar.Columns, logs: list[_columnar.ParsedLog], columns: Iterable[str] | None
) -> list[str]:
    derived = ["rank", "attempt"] if _has_rank(table, logs) else ["attempt"]
    if columns is None:
        rest = [n for n in table.names if n not in FIRST_COLUMNS and n not in derived]
        return [*FIRST_COLUMNS, *derived, *rest]
    wanted = [columns] if isinstance(columns, str) else list(columns)
    known = set(table.names) | set(derived)
    unknown = [c for c in wanted if c not in known]
    if unknown:
        fields = ", ".join(sorted(known - set(FIRST_COLUMNS)))
        hint = did_you_mean(unknown[0], known)
        msg = f"no record has field {unknown[0]!r}{hint}; fields: {fields}"
        raise FieldError(msg)
    return [*FIRST_COLUMNS, *dict.fromkeys(c for c in wanted if c not in FIRST_COLUMNS)]


def _frame(
    pd: Any,
    table: _columnar.Columns,
    logs: list[_columnar.ParsedLog],
    keep: _Bools,
    attempt: _Ints,
    names: list[str],
    release: bool = False,
    present: dict[str, _Bools | None] | None = None,
) -> pd.DataFrame:
    """Return the frame of columns *names*; with *release*, each column's Arrow values are
    dropped from *table* once the frame's column is built. Each key of *present* that is a
    number column gets the rows that hold a value.
    """
    whole = bool(keep.all())  # the table's own layout (made only when asked for)
    layout = table.full if whole else _columnar.lay_out(logs, keep)

    def built(name: str) -> Any:
        return table.get(name) if whole else table.build(name, layout)

    def which_log() -> _Ints:
        """Return each output row's log (made only for the columns that need it)."""
        return np.repeat(np.arange(len(logs)), [log.num_rows for log in logs])[keep]

    def column(name: str) -> Any:
        built = made(name)
        if release and name in table.names:
            table.release(name)
        return built

    def made(name: str) -> Any:
        if name == "attempt":
            derived = attempt[keep]
            return _own_attempts(built(name), derived) if name in table.names else derived
        if name == "run":
            return _run_column(pd, built(name), logs, which_log)
        if name == "rank":
            return _rank_column(pd, table, layout, logs, which_log)
        values = built(name)
        if present is not None and name in present and isinstance(values, _columnar.Numbers):
            present[name] = values.valid
        return _series(pd, values, as_float=name == "ts")

    return pd.DataFrame(
        dict(zip(names, _columnar.in_threads(column, names), strict=True)), copy=False
    )


def _own_attempts(own: Any, derived: _Ints) -> Any:
    """Return the attempt of each row: the record's own `attempt` field where it has one.

    Run writes `attempt` on run_start and run_end only, where it is the attempt; a record that
    logs a field of that name keeps its value, so nothing is lost, unless it is an int that
    int64 cannot hold. Where every such value is an
    integer the column stays int64; otherwise it holds Python objects.
    """
    if isinstance(own, _columnar.Numbers) and own.values.dtype == np.int64:
        return np.where(own.valid, own.values, derived)
    if isinstance(own, _columnar.Numbers):
        rows = np.flatnonzero(own.valid & ~np.isnan(own.values.astype(np.float64)))
    elif isinstance(own, np.ndarray):
        rows = np.flatnonzero(np.array([v is not None for v in own], dtype=bool))
    else:
        rows = np.flatnonzero(own.is_valid().to_numpy(zero_copy_only=False))
    merged = derived.astype(object)
    for row, value in zip(rows.tolist(), _columnar.values_at(own, rows), strict=True):
        if isinstance(value, int) and as_attempt(value) is None:
            continue  # an int no int64 holds (a foreign log): the derived attempt stands
        merged[row] = value
    if all(type(v) is int for v in merged):
        return merged.astype(np.int64)
    return merged


def _series(pd: Any, column: Any, *, as_float: bool = False) -> Any:
    """Return a column for pandas: int64 and bool, or nullable Int64 and boolean with gaps."""
    if as_float:
        return _columnar.as_floats(column)
    if isinstance(column, _columnar.Numbers):
        return _numbers_for_pandas(pd, column)
    if isinstance(column, np.ndarray):
        return pd.Series(column, dtype=object, copy=False)
    if column.null_count and _columnar.arrow_kind(column.type) in ("int", "bool"):
        nullable = {pa.int64(): pd.Int64Dtype(), pa.bool_(): pd.BooleanDtype()}
        return column.to_pandas(types_mapper=nullable.get)
    return column.to_pandas()


def _numbers_for_pandas(pd: Any, column: _columnar.Numbers) -> Any:
    """Return numbers as numpy, or as pandas' nullable Int64 and boolean when some are missing."""
    if column.values.dtype == np.float64 or column.valid.all():
        return column.values
    if column.values.dtype == np.bool_:
        return pd.arrays.BooleanArray(column.values, ~column.valid)
    return pd.arrays.IntegerArray(column.values, ~column.valid)


def _run_column(
    pd: Any, column: Any, logs: list[_columnar.ParsedLog], which_log: Callable[[], _Ints]
) -> Any:
    """Return the `run` column: the record's, else the file name; a label where names collide."""
    labels = run_labels([log.log for log in logs])
    if (
        not labels
        and not isinstance(column, (np.ndarray, _columnar.Numbers))
        and column.null_count == 0
    ):
        return column.to_pandas()
    values = np.asarray(_series(pd, column), dtype=object)
    names = [labels.get(log.log.path, log.log.run) for log in logs]
    which = which_log()
    fallback = np.array(names, dtype=object)[which]
    filled = np.where(pd.isna(values), fallback, values)
    if labels:
        labelled = np.array([log.log.path in labels for log in logs], dtype=bool)[which]
        filled = np.where(labelled, fallback, filled)
    return pd.Series(filled, dtype=object if pd.__version__ < "3" else "str")


def _rank_column(
    pd: Any,
    table: _columnar.Columns,
    layout: _columnar.Layout,
    logs: list[_columnar.ParsedLog],
    which_log: Callable[[], _Ints],
) -> Any:
    """Return the `rank` column, filled from rank file names (and 0 for their main file)."""
    ranked = {log.log.run for log in logs if log.log.rank is not None}
    ranks = np.array([_file_rank(log.log, ranked) for log in logs], dtype=np.float64)
    fallback = ranks[which_log()]
    values = _columnar.as_floats(table.build("rank", layout)) if "rank" in table.names else fallback
    values = np.where(np.isnan(values), fallback, values)
    with np.errstate(invalid="ignore"):  # a rank no int64 holds (1e300, 2.5) is no rank
        values[(np.abs(values) >= 2**62) | (values != np.floor(values))] = np.nan
    if np.isnan(values).any():
        return pd.array([None if np.isnan(v) else int(v) for v in values], dtype="Int64")
    return values.astype(np.int64)


def _file_rank(log: LogFile, ranked: set[str]) -> float:
    if log.rank is not None:
        return float(log.rank)
    return 0.0 if log.run in ranked else float("nan")
