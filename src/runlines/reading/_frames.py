"""Frames: the records of several logs as one DataFrame (`load`), and `compare`."""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal

from runlines.errors import FieldError, ReadError, RunlinesWarning
from runlines.reading import _columnar, _copies
from runlines.reading._files import LogFile, find_logs, run_labels
from runlines.reading._rules import (
    AGGREGATIONS,
    FIRST_COLUMNS,
    NOT_METRIC_EVENTS,
    SEPARATOR,
    Errors,
    as_attempt,
    check_errors,
    did_you_mean,
    event_names,
    foreign_log_message,
    import_duckdb,
    import_pandas,
    is_metric_event,
    is_runlines_record,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pandas as pd

    _Ints = npt.NDArray[np.int64]
    _Bools = npt.NDArray[np.bool_]

__all__ = ["ELAPSED", "SEPARATOR", "compare", "load", "load_with_presence", "numeric_fields"]

ELAPSED: Final = "elapsed_s"  # compare(by=...): seconds since each run's first record
_TIME_AXES: Final = ("ts", ELAPSED)


def _load_duckdb(
    sources: tuple[str | os.PathLike[str], ...],
    event: str | Iterable[str] | None,
    columns: Iterable[str] | None,
    superseded: bool,
    errors: str,
    engine: str,
) -> pd.DataFrame:
    """Return load()'s frame read through DuckDB."""
    if engine != "duckdb":
        msg = f"engine must be 'pandas' or 'duckdb', got {engine!r}"
        raise ValueError(msg)
    if errors == "raise":
        msg = "engine='duckdb' skips bad lines and cannot raise on them; use engine='pandas'"
        raise ValueError(msg)
    import_duckdb("load_duckdb()")
    from runlines.reading import _duckdb

    return _duckdb.load_duckdb(*sources, event=event, columns=columns, superseded=superseded)


def _prefetch_pandas(caller: str) -> None:
    """Start importing pandas on a thread while the logs are parsed; fail early when absent.

    A first import of pandas takes a third of a second, mostly in Python, while the parse
    mostly runs in pyarrow's threads without the GIL. numpy and pyarrow, which pandas imports
    too, are imported here first, so the two threads never wait on the same module.
    """
    import importlib.util
    import threading

    if "pandas" in sys.modules:
        import_pandas(caller)  # the install hint when numpy or pyarrow is missing
        return
    try:
        needed = ("numpy", "pandas", "pyarrow")
        missing = not all(importlib.util.find_spec(name) for name in needed)
    except (ImportError, ValueError):
        missing = True
    if missing:
        import_pandas(caller)  # raises the install hint
    import numpy  # noqa: F401
    import pyarrow.compute
    import pyarrow.json  # noqa: F401

    threading.Thread(target=importlib.import_module, args=("pandas",), daemon=True).start()


def load(
    *sources: str | os.PathLike[str],
    event: str | Iterable[str] | None = None,
    columns: Iterable[str] | None = None,
    superseded: bool = False,
    errors: Errors = "warn",
    engine: Literal["pandas", "duckdb"] = "pandas",
) -> pd.DataFrame:
    """Return the records of *sources* (log files or folders of logs) as one DataFrame.

    Args:
        sources: log files, or folders whose ``*.jsonl`` logs (rank files merged) are all read.
        event: keep only records of this event name (or names), before the frame is built.
        columns: the fields to keep; ``ts``, ``event`` and ``run`` are always kept.
        superseded: keep records that a resumed attempt rewound past (dropped by default).
        errors: ``"warn"`` skips bad lines with one warning per file; ``"raise"`` raises.
        engine: ``"duckdb"`` reads through DuckDB (``runlines[duckdb]``), out of core; the
            default pandas reader is faster at every size measured (docs/scale.md).

    Raises:
        ReadError: a missing or unreadable log, or a bad line with ``errors="raise"``.
        FieldError: an event name or a column that no record has.

    A JSONL that is no runlines log (no record has a text `event` and a numeric `ts`) is read
    with a warning that says so.
    """
    check_errors(errors)
    if engine != "pandas":
        return _load_duckdb(sources, event, columns, superseded, errors, engine)
    return _load_frame(sources, event, columns, superseded, errors, "load()")


def _load_frame(
    sources: tuple[str | os.PathLike[str], ...],
    event: str | Iterable[str] | None,
    columns: Iterable[str] | None,
    superseded: bool,
    errors: Errors,
    caller: str,
    present: dict[str, _Bools] | None = None,
    *,
    refuse_foreign: bool = False,
) -> pd.DataFrame:
    """Return load()'s frame; fill *present*'s keys, number columns, with where a record
    holds a value (NaN and infinities included), as `load_with_presence` does. A foreign
    JSONL among the logs raises (*refuse_foreign*) or warns.
    """
    names = event_names(event)
    found = find_logs(*sources)
    _prefetch_pandas(caller)
    import numpy as np

    logs = [_copies.read_log(log, errors, names) for log in found]
    logs = check_foreign(logs, refuse=refuse_foreign, sources=sources)
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


def load_with_presence(
    source: str | os.PathLike[str], caller: str
) -> tuple[pd.DataFrame, dict[str, _Bools]]:
    """Return `load(source)` and, per number column, the rows whose record holds a value.

    A float column is NaN both where a record logged NaN and where it lacks the field: the
    masks tell the two apart (True: logged, NaN and infinities included).
    """
    found = find_logs(source)
    _prefetch_pandas(caller)
    logs = [_copies.read_log(log, "warn", None) for log in found]
    check_foreign(logs, refuse=True)
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
    import pyarrow as pa
    import pyarrow.compute as pc

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
    import pyarrow as pa

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
    present: dict[str, _Bools] | None = None,
) -> pd.DataFrame:
    """Return the frame of columns *names*; with *release*, each column's Arrow values are
    dropped from *table* once the frame's column is built. Each key of *present* that is a
    number column gets the rows that hold a value.
    """
    import numpy as np

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
    import numpy as np

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
    import numpy as np
    import pyarrow as pa

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
    import numpy as np

    if column.values.dtype == np.float64 or column.valid.all():
        return column.values
    if column.values.dtype == np.bool_:
        return pd.arrays.BooleanArray(column.values, ~column.valid)
    return pd.arrays.IntegerArray(column.values, ~column.valid)


def _run_column(
    pd: Any, column: Any, logs: list[_columnar.ParsedLog], which_log: Callable[[], _Ints]
) -> Any:
    """Return the `run` column: the record's, else the file name; a label where names collide."""
    import numpy as np

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
    import numpy as np

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


# --- compare ---------------------------------------------------------------------------------


def numeric_fields(frame: pd.DataFrame) -> list[str]:
    """Return the names of the numeric fields of *frame*, bookkeeping columns left out."""
    import pandas as pd

    skip = {"ts", "attempt", "rank", "pid", "dropped", "resume_step", "world_size", "exit_code"}
    return [
        name
        for name in frame.columns
        if name not in skip
        and pd.api.types.is_numeric_dtype(frame[name].dtype)
        and not pd.api.types.is_bool_dtype(frame[name].dtype)
    ]


def _check_numeric(frame: pd.DataFrame, name: str, role: str, logged: Any = None) -> None:
    """Raise FieldError unless *name* is a numeric field that a record holds (*logged*: the
    rows that hold it, NaN included; default: the rows where it is not NaN)."""
    fields = numeric_fields(frame)
    if name in fields and (frame[name].notna() if logged is None else logged).any():
        return
    what = "is not numeric" if name in frame.columns else "is in no record"
    hint = did_you_mean(name, fields)
    listed = ", ".join(sorted(fields)) or "(none)"
    msg = f"{role} {name!r} {what}{hint}; numeric fields: {listed}"
    raise FieldError(msg)


def _with_elapsed(frame: pd.DataFrame, names: list[str] | None) -> pd.DataFrame:
    """Add `elapsed_s` (seconds since each run's first record), then keep events *names*."""
    frame[ELAPSED] = frame["ts"] - frame.groupby("run", sort=False)["ts"].transform("min")
    return frame if names is None else frame[frame["event"].isin(names)]


def _logged(sources: tuple[str | os.PathLike[str], ...], event: Any, metric: str, by: str) -> Any:
    """Return load()'s frame for compare, with `__logged`: whether a record holds *metric*.

    An x field that a record of the metric lacks is joined by step (`_joined_by_step`).
    """
    import numpy as np

    names = event_names(event)

    def read(events: Any) -> tuple[pd.DataFrame, dict[str, _Bools]]:
        present: dict[str, _Bools] = {metric: np.zeros(0, dtype=bool)}
        found = _load_frame(
            sources, events, None, False, "warn", "compare()", present, refuse_foreign=True
        )
        if metric in found.columns:
            logged = present[metric]
            found["__logged"] = logged if len(logged) == len(found) else found[metric].notna()
        return found, present

    frame, _ = read(event)
    derive = by == ELAPSED and by not in frame.columns
    join = not derive and _lacks_x(frame, by)
    if (derive or join) and names is not None:  # the other events' records count too
        frame, _ = read(None)
    if derive:  # each run's first record counts, whatever its event
        return _with_elapsed(frame, names)
    if join:
        frame = _joined_by_step(frame, by)
        return frame if names is None else frame[frame["event"].isin(names)]
    return frame


def _lacks_x(frame: pd.DataFrame, by: str) -> bool:
    """Return whether a record that holds the metric lacks the x field *by*."""
    if by in (*_TIME_AXES, "step") or "__logged" not in frame.columns or "step" not in frame:
        return False
    if by not in frame.columns:
        return True
    logged = frame["__logged"].to_numpy(dtype=bool)
    return bool(frame[by].isna().to_numpy()[logged].any())


def _joined_by_step(frame: pd.DataFrame, by: str) -> pd.DataFrame:
    """Give each record that lacks *by* the value its run logged in another record at the same
    step (the last such record, of any event; a distributed run's rank 0).
    """
    import numpy as np

    pd = import_pandas("compare()")
    if by not in frame.columns:
        return frame  # in no record: _check_numeric says so
    values = frame[by]
    holds = values.notna() & frame["step"].notna()
    if "rank" in frame.columns:
        holds &= frame["rank"].isna() | (frame["rank"] == 0)
    source = frame.loc[holds.to_numpy(dtype=bool), ["run", "step", by]]
    source = source.drop_duplicates(["run", "step"], keep="last").set_index(["run", "step"])[by]
    lacking = (values.isna() & frame["__logged"]).to_numpy(dtype=bool)
    wanted = frame.loc[lacking, ["run", "step"]]
    keys = pd.MultiIndex.from_frame(wanted)
    joined = source.reindex(keys).to_numpy()
    if values.dtype.kind not in "f" and pd.isna(joined).any():
        values = values.astype("Float64")  # a step with no x: missing, not 0
    frame = frame.copy(deep=False)
    filled = values.copy()
    filled.iloc[np.flatnonzero(lacking)] = joined
    frame[by] = filled
    return frame


def compare(
    *sources: str | os.PathLike[str],
    metric: str,
    by: str = "step",
    x: str | None = None,
    event: str | Iterable[str] | None = None,
    agg: str = "mean",
    group_by: str | Sequence[str] | None = None,
) -> pd.DataFrame:
    """Return one row per value of *x* and one column per run: *metric* aggregated by *agg*.

    A metric is a field of one event: where the records hold *metric* in several events
    (train and eval ``loss``), each run has a column per event, labelled ``run · event``;
    values of different events are never combined. *x* (or its older name *by*) may be any
    numeric field, ``ts``, or ``elapsed_s``: seconds since the run's first record. A record
    of the metric that lacks the x field takes the value its run logged at the same step in
    another record (of any event; the last one at that step); one with neither is left out.
    A distributed run is compared by its rank 0's records, the values `runs()` states for it
    (`load()` or `query()` give every rank's). Without *event*, the records runlines writes
    about a run (lifecycle, spans, captures, media) are left out: an image's width or a
    histogram's mean is no metric.

    The columns are nullable ``Float64``: a value the run logged as NaN or an infinity stays
    ``nan``, ``inf`` or ``-inf``, and a step the run has no record of is ``pd.NA``
    (``table.isna()`` is True only there; pandas' arithmetic on Float64 turns a NaN into
    pd.NA, so tell them apart first). A NaN among a step's records makes its ``mean``,
    ``median``, ``min``, ``max``, ``sum`` and ``std`` NaN; ``first`` and ``last`` are that
    record's value, and ``count`` counts every record that holds the metric.

    With *group_by* (config keys, or ``"auto"``), the columns are (group label, stat)
    instead: per step, over each group's runs' values, ``n`` (the runs that logged the
    step), ``mean``, ``std``, ``min`` and ``max`` (docs/groups.md); ``table.attrs["group_by"]``
    names the keys.

    Raises:
        FieldError: *metric* or *x* is not a numeric field of any record, or a *group_by*
            key is in no run's config.
        ReadError: a source holds a JSONL that is no runlines log.
        ValueError: an unknown *agg*, or *by* and *x* that disagree.
    """
    by = _x_axis(by, x)
    if agg not in AGGREGATIONS:
        msg = f"agg must be one of {', '.join(AGGREGATIONS)}, got {agg!r}"
        raise ValueError(msg)
    if metric == by:
        msg = f"metric and by are both {by!r}; compare a metric by another field, e.g. step"
        raise FieldError(msg)
    pd = import_pandas("compare()")
    frame = _logged(sources, event, metric, by)
    _check_numeric(frame, metric, "metric", frame.get("__logged"))
    if by not in _TIME_AXES:
        _check_numeric(frame, by, "by")
    rows = frame[frame["__logged"].to_numpy(dtype=bool) & frame[by].notna().to_numpy()]
    if "rank" in rows.columns:  # a distributed run is its rank 0, as runs() and ls state it
        rank = rows["rank"]
        rows = rows[(rank.isna() | (rank == 0)).to_numpy(dtype=bool)]
    # an event that is no string (a hand-written `"event": []`) is no metric's event, nor,
    # unless event= names it, one of runlines' own (an image's width, a histogram's mean); a
    # mask, not a list, which pandas would take for column names when no row is left
    named = rows["event"]
    metric_event = is_metric_event if event is None else (lambda e: isinstance(e, str))
    if named.dtype == object:  # a text column needs no look at each value
        named = named.map(metric_event).astype(bool)
    else:
        named = named.notna() & (~named.isin(NOT_METRIC_EVENTS) if event is None else True)
    if len(rows) and not named.any() and event is None:
        own = ", ".join(sorted(map(str, pd.unique(rows["event"]))))
        msg = f"metric {metric!r} is only in runlines' own records ({own}), which hold no metrics"
        raise FieldError(msg)
    rows = rows[named.to_numpy(dtype=bool)]
    events = list(pd.unique(rows["event"]))
    key = rows["run"]
    if len(events) > 1:  # the same field in several events: a column per run and event
        key = rows["run"].astype(str) + SEPARATOR + rows["event"].astype(str)
    rows = pd.DataFrame({by: rows[by], "__column": key, "__value": rows[metric].astype("float64")})
    columns = list(pd.unique(rows["__column"]))
    found, seen = _per_step(rows, by, agg)
    if group_by is None:
        return _wide(pd, found, seen, rows[by].dtype, by, columns)
    from runlines.reading._groups import compare_groups

    column_events = None
    if len(events) > 1:
        column_events = {c: str(c).rsplit(SEPARATOR, 1)[1] for c in columns}
    return compare_groups(pd, found, by, columns, column_events, sources, group_by)


def _x_axis(by: str, x: str | None) -> str:
    """Return the x field: *x*, else *by* (its older name); both given must agree."""
    if x is None:
        return by
    if by not in ("step", x):
        msg = f"by={by!r} and x={x!r} name two x axes; pass x= alone (by is its older name)"
        raise ValueError(msg)
    return x


def _per_step(rows: pd.DataFrame, by: str, agg: str) -> tuple[pd.Series, pd.Series]:
    """Return *rows* (`by`, `__column`, `__value`) aggregated per (by, column) by *agg*, and
    how many records each has (both indexed by (by, column), sorted).
    """
    import numpy as np

    keys = [by, "__column"]
    has_nan = bool(np.isnan(rows["__value"].to_numpy()).any())
    if has_nan:
        rows = rows.assign(__nan=np.isnan(rows["__value"].to_numpy()))
    grouped = rows.groupby(keys, sort=True)  # one grouping for every aggregate below
    seen = grouped.size()
    if agg == "count":
        found = seen.astype("float64")
    elif agg in ("first", "last") and has_nan:  # groupby's first and last skip NaN
        found = rows.drop_duplicates(keys, keep=agg).set_index(keys)["__value"]
        found = found.reindex(seen.index)
    else:
        found = grouped["__value"].agg(agg)
        if has_nan and agg not in ("first", "last"):  # a NaN among the records: NaN
            found = found.mask(grouped["__nan"].any(), np.nan)
    return found, seen


def _wide(
    pd: Any, found: pd.Series, seen: pd.Series, dtype: Any, by: str, columns: list[Any]
) -> Any:
    """Return the table of *found*: a Float64 column per run, pd.NA where none."""
    import numpy as np

    wide = found.unstack("__column")
    present = seen.unstack("__column")
    index = present.index if len(seen) else pd.Index([], name=by, dtype=dtype)
    table = pd.DataFrame(
        {
            column: pd.arrays.FloatingArray(
                wide[column].reindex(index).to_numpy(dtype="float64", na_value=np.nan),
                present[column].isna().to_numpy(),
            )
            for column in columns
        },
        index=index,
    )
    table.columns.name = "run"
    return table
