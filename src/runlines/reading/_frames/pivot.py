"""compare()'s table: the frame of the metric's records pivoted to a column per run.

Imported by the door (`reading/_frames/__init__`) once pandas is known to be there: pandas and
numpy are imported at the top.
"""

from __future__ import annotations

import os
from typing import Any, Final

import numpy as np
import pandas as pd

from runlines.errors import FieldError
from runlines.reading._frames.groups import compare_groups
from runlines.reading._rules import (
    ELAPSED,
    NOT_METRIC_EVENTS,
    SEPARATOR,
    did_you_mean,
    is_metric_event,
)

__all__ = ["joined_by_step", "lacks_x", "numeric_fields", "table", "with_elapsed"]

_TIME_AXES: Final = ("ts", ELAPSED)


def numeric_fields(frame: pd.DataFrame) -> list[str]:
    """Return the names of the numeric fields of *frame*, bookkeeping columns left out."""
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


def with_elapsed(frame: pd.DataFrame, names: list[str] | None) -> pd.DataFrame:
    """Add `elapsed_s` (seconds since each run's first record), then keep events *names*."""
    frame[ELAPSED] = frame["ts"] - frame.groupby("run", sort=False)["ts"].transform("min")
    return frame if names is None else frame[frame["event"].isin(names)]


def lacks_x(frame: pd.DataFrame, by: str) -> bool:
    """Return whether a record that holds the metric lacks the x field *by*."""
    if by in (*_TIME_AXES, "step") or "__logged" not in frame.columns or "step" not in frame:
        return False
    if by not in frame.columns:
        return True
    logged = frame["__logged"].to_numpy(dtype=bool)
    return bool(frame[by].isna().to_numpy()[logged].any())


def joined_by_step(frame: pd.DataFrame, by: str) -> pd.DataFrame:
    """Give each record that lacks *by* the value its run logged in another record at the same
    step (the last such record, of any event; a distributed run's rank 0).
    """
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


def table(
    frame: pd.DataFrame,
    sources: tuple[str | os.PathLike[str], ...],
    metric: str,
    by: str,
    event: Any,
    agg: str,
    group_by: Any,
) -> pd.DataFrame:
    """Return compare()'s table of *frame*: load()'s frame of *sources*, with `__logged`
    (whether a record holds *metric*), read by the door.
    """
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
        return _wide(found, seen, rows[by].dtype, by, columns)
    column_events = None
    if len(events) > 1:
        column_events = {c: str(c).rsplit(SEPARATOR, 1)[1] for c in columns}
    return compare_groups(found, by, columns, column_events, sources, group_by)


def _per_step(rows: pd.DataFrame, by: str, agg: str) -> tuple[pd.Series, pd.Series]:
    """Return *rows* (`by`, `__column`, `__value`) aggregated per (by, column) by *agg*, and
    how many records each has (both indexed by (by, column), sorted).
    """
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


def _wide(found: pd.Series, seen: pd.Series, dtype: Any, by: str, columns: list[Any]) -> Any:
    """Return the table of *found*: a Float64 column per run, pd.NA where none."""
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
