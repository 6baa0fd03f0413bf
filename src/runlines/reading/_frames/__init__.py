"""Frames: the records of several logs as one DataFrame (`load`), and `compare`.

This door reads the logs and names the extra to install; the work that needs numpy, pyarrow
and pandas is in `build` (load's frame from the engine's columns) and `pivot` (compare's
table), each imported here once pandas is known to be there.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
from collections.abc import Iterable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal

from runlines.errors import FieldError
from runlines.reading import _copies
from runlines.reading._files import find_logs
from runlines.reading._rules import (
    AGGREGATIONS,
    ELAPSED,
    SEPARATOR,
    Errors,
    check_errors,
    event_names,
    import_duckdb,
    import_pandas,
    need_pandas,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pandas as pd

    from runlines.reading._groups import GroupBy

    _Bools = npt.NDArray[np.bool_]

__all__ = ["ELAPSED", "SEPARATOR", "compare", "load", "load_with_presence", "numeric_fields"]


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


def _prefetch_pandas(caller: str) -> ModuleType:
    """Return load()'s engine (`build`), having started pandas' import on a thread while the
    logs are parsed; fail early, naming the extra, when one of them is absent.

    A first import of pandas takes a third of a second, mostly in Python, while the parse
    mostly runs in pyarrow's threads without the GIL. numpy and pyarrow, which pandas imports
    too, are imported by `build` first, so the two threads never wait on the same module.
    """
    need_pandas(caller)  # the install line, before the parse: found without importing
    build = _part("build")
    if "pandas" not in sys.modules:
        threading.Thread(target=importlib.import_module, args=("pandas",), daemon=True).start()
    return build


def _part(name: str) -> ModuleType:
    """Return the door's part *name* (`build`, `pivot`, `groups`: numpy and pandas at their
    tops), imported on first use, once pandas is known to be there."""
    return importlib.import_module(f"{__name__}.{name}")


def grouped_runs(rows: Sequence[dict[str, Any]], group_by: GroupBy) -> pd.DataFrame:
    """Return `runs(group_by=...)`'s frame of the run table's *rows* (docs/groups.md)."""
    return _part("groups").runs_frame(rows, group_by)


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
    present: dict[str, _Bools | None] | None = None,
    *,
    refuse_foreign: bool = False,
) -> pd.DataFrame:
    """Return load()'s frame; fill *present*'s keys, number columns, with where a record
    holds a value (NaN and infinities included), as `load_with_presence` does. A foreign
    JSONL among the logs raises (*refuse_foreign*) or warns.
    """
    names = event_names(event)
    found = find_logs(*sources)
    build = _prefetch_pandas(caller)
    logs = [_copies.read_log(log, errors, names) for log in found]
    logs = build.check_foreign(logs, refuse=refuse_foreign, sources=sources)
    return build.frame_of(logs, names, columns, superseded, caller, present)


def load_with_presence(
    source: str | os.PathLike[str], caller: str
) -> tuple[pd.DataFrame, dict[str, _Bools]]:
    """Return `load(source)` and, per number column, the rows whose record holds a value.

    A float column is NaN both where a record logged NaN and where it lacks the field: the
    masks tell the two apart (True: logged, NaN and infinities included).
    """
    found = find_logs(source)
    build = _prefetch_pandas(caller)
    logs = [_copies.read_log(log, "warn", None) for log in found]
    logs = build.check_foreign(logs, refuse=True)
    return build.with_presence(logs, caller)  # type: ignore[no-any-return]


# --- compare ---------------------------------------------------------------------------------


def numeric_fields(frame: pd.DataFrame) -> list[str]:
    """Return the names of the numeric fields of *frame*, bookkeeping columns left out."""
    return _part("pivot").numeric_fields(frame)  # type: ignore[no-any-return]


def _logged(sources: tuple[str | os.PathLike[str], ...], event: Any, metric: str, by: str) -> Any:
    """Return load()'s frame for compare, with `__logged`: whether a record holds *metric*.

    An x field that a record of the metric lacks is joined by step (`pivot.joined_by_step`).
    """
    pivot = _part("pivot")
    names = event_names(event)

    def read(events: Any) -> tuple[pd.DataFrame, dict[str, _Bools | None]]:
        present: dict[str, _Bools | None] = {metric: None}  # None: not a number column
        found = _load_frame(
            sources, events, None, False, "warn", "compare()", present, refuse_foreign=True
        )
        if metric in found.columns:
            logged = present[metric]
            held = logged is not None and len(logged) == len(found)
            found["__logged"] = logged if held else found[metric].notna()
        return found, present

    frame, _ = read(event)
    derive = by == ELAPSED and by not in frame.columns
    join = not derive and pivot.lacks_x(frame, by)
    if (derive or join) and names is not None:  # the other events' records count too
        frame, _ = read(None)
    if derive:  # each run's first record counts, whatever its event
        return pivot.with_elapsed(frame, names)
    if join:
        frame = pivot.joined_by_step(frame, by)
        return frame if names is None else frame[frame["event"].isin(names)]
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
    import_pandas("compare()")  # the install hint before a log is read
    frame = _logged(sources, event, metric, by)
    return _part("pivot").table(frame, sources, metric, by, event, agg, group_by)


def _x_axis(by: str, x: str | None) -> str:
    """Return the x field: *x*, else *by* (its older name); both given must agree."""
    if x is None:
        return by
    if by not in ("step", x):
        msg = f"by={by!r} and x={x!r} name two x axes; pass x= alone (by is its older name)"
        raise ValueError(msg)
    return x
