"""Groups as frames: `runs(group_by=...)`'s rows and `compare(group_by=...)`'s statistics.

Imported by the door (`reading/_frames/__init__`) once pandas is known to be there: numpy and
pandas are imported at the top. Which runs form a group is `reading/_groups`' rule (no numpy).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from runlines.reading._groups import GroupBy, group_rows, groups_of, resolve_keys, run_configs
from runlines.reading._rules import SEPARATOR

__all__ = ["compare_groups", "runs_frame"]


def runs_frame(rows: Sequence[Mapping[str, Any]], group_by: GroupBy) -> pd.DataFrame:
    """Return `runs(group_by=...)`'s frame: `group_rows` with nullable Float64 statistics."""
    keys, grouped = group_rows(rows, group_by)
    columns = list(dict.fromkeys(["group", *keys, "n", "runs"]))
    stats = list(dict.fromkeys(name for row in grouped for name in row if name not in columns))
    data: dict[str, Any] = {name: [row.get(name) for row in grouped] for name in columns}
    for name in stats:
        values = [row[name] for row in grouped]
        missing = np.array([v is None for v in values], dtype=bool)
        floats = np.array([0.0 if v is None else v for v in values], dtype=np.float64)
        data[name] = pd.arrays.FloatingArray(floats, missing)  # a NaN stays NaN
    frame = pd.DataFrame(data)
    frame.attrs["group_by"] = keys
    return frame


def compare_groups(
    found: pd.Series,
    by: str,
    columns: Sequence[str],
    events: Mapping[str, str] | None,
    sources: Sequence[str | os.PathLike[str]],
    group_by: GroupBy,
) -> pd.DataFrame:
    """Return `compare(group_by=...)`'s table from *found*: each run's value per step.

    *found* is indexed by (*by*, column); *events* maps a column ``run · event`` to its
    event (None: a column is a run). The table has one row per step any run has, and
    columns (group label, stat), stat in `GROUP_STATS`; a label is ``label · event`` where
    several events log the metric.
    """
    configs = run_configs(sources)

    def run_of(column: str) -> str:
        return column.rsplit(SEPARATOR, 1)[0] if events is not None else column

    shown = {run_of(c): configs.get(run_of(c), {}) for c in columns}
    keys = resolve_keys(group_by, list(shown.values()))
    label_of: dict[str, str] = {}
    for label, (_, runs) in groups_of(shown, keys).items():
        label_of.update(dict.fromkeys(runs, label))
    labels: dict[str, str] = {}  # column -> its group's label
    for column in columns:
        label = label_of[run_of(column)]
        labels[column] = label if events is None else f"{label}{SEPARATOR}{events[column]}"
    order = list(dict.fromkeys(sorted(labels.values(), key=_label_order(label_of, events))))
    table = _stat_table(found, by, labels, order)
    table.attrs["group_by"] = keys
    return table


def _label_order(label_of: Mapping[str, str], events: Mapping[str, str] | None) -> Any:
    """Return a sort key: the groups' order (`groups_of`), then the events' first-seen order."""
    groups = {label: i for i, label in enumerate(dict.fromkeys(label_of.values()))}
    seen = {event: i for i, event in enumerate(dict.fromkeys((events or {}).values()))}

    def key(label: str) -> tuple[int, int]:
        if events is None:
            return groups[label], 0
        group, event = label.rsplit(SEPARATOR, 1)
        return groups[group], seen[event]

    return key


def _stat_table(
    found: pd.Series, by: str, labels: Mapping[str, str], order: Sequence[str]
) -> pd.DataFrame:
    """Return n, mean, std, min and max per step and group of *found*: one pass of bincounts
    over every run's value (no value skipped, none sampled).
    """
    index = found.index
    xs, x_codes = np.unique(index.get_level_values(0).to_numpy(), return_inverse=True)
    group_of = {label: i for i, label in enumerate(order)}
    col_group = np.array([group_of[labels[c]] for c in index.levels[1]], dtype=np.int64)
    groups = len(order)
    key = x_codes.astype(np.int64) * groups + col_group[index.codes[1]]
    size = len(xs) * groups
    values = found.to_numpy(dtype="float64")
    nan = np.isnan(values)
    n = np.bincount(key, minlength=size)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.bincount(key, weights=np.where(nan, 0.0, values), minlength=size) / n
        spread = np.bincount(
            key, weights=np.where(nan, 0.0, (values - mean[key]) ** 2), minlength=size
        )
        std = np.sqrt(spread / (n - 1))
        low = np.full(size, np.inf)
        high = np.full(size, -np.inf)
        np.minimum.at(low, key, values)
        np.maximum.at(high, key, values)
    if nan.any():  # a NaN among a step's runs makes its statistics NaN
        poisoned = np.bincount(key, weights=nan, minlength=size) > 0
        for array in (mean, std, low, high):
            array[poisoned] = np.nan
    none = n == 0
    data: dict[tuple[str, str], Any] = {}
    for g, label in enumerate(order):
        at = slice(g, size, groups)
        data[(label, "n")] = n[at].astype(np.int64)
        for stat, array, missing in (
            ("mean", mean, none),
            ("std", std, n < 2),
            ("min", low, none),
            ("max", high, none),
        ):
            data[(label, stat)] = pd.arrays.FloatingArray(
                np.where(missing[at], 0.0, array[at]), missing[at].copy()
            )
    dtype = index.levels[0].dtype
    table = pd.DataFrame(data, index=pd.Index(xs, name=by, dtype=dtype))
    table.columns = pd.MultiIndex.from_tuples(list(data), names=["group", "stat"])
    return table
