"""Groups of runs by config: `runs(group_by=...)` and `compare(group_by=...)`.

A group is the runs whose config holds the same value of every `group_by` key (a run
without a key holds null). Its label is ``key=value,key2=value2`` in the `group_by` order, a
value written as JSON (a text as itself). ``"auto"`` groups by every config key whose value
varies across the runs, except those that look like a seed (`seed`, `*_seed`, `rng*`).

Statistics follow one rule everywhere: `n` counts the runs that have a value (NaN
included); a NaN among them makes the group's mean, std, min and max NaN (a logged NaN is
never shown as missing); std is the sample std (ddof 1), missing (pd.NA) for one value;
with no value at all every statistic is missing.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from runlines._layout import RUN_START
from runlines.errors import FieldError
from runlines.reading._files import find_logs, run_labels
from runlines.reading._lines import head_record, lines_containing, records_of
from runlines.reading._rules import SEPARATOR, did_you_mean, is_number
from runlines.reading._summary import RunSummary

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "GROUP_STATS",
    "GroupBy",
    "auto_keys",
    "compare_groups",
    "group_label",
    "group_rows",
    "is_seed_key",
    "resolve_keys",
    "run_configs",
    "runs_frame",
]

GroupBy = str | Sequence[str] | None
GROUP_STATS: Final = ("n", "mean", "std", "min", "max")
AUTO: Final = "auto"
_CONFIG: Final = "config."
# the runs() columns that are no metric: they are never averaged
_NOT_METRICS: Final = frozenset(
    ("run", "path", "status", "attempts", "started", "duration_s", "step", "tags", "notes")
)


def is_seed_key(key: str) -> bool:
    """Return whether config *key* looks like a seed: `seed`, `*_seed`, `rng*` (its last part)."""
    last = key.rsplit(".", 1)[-1].lower()
    return last == "seed" or last.endswith("_seed") or last.startswith("rng")


def _hashable(value: Any) -> Any:
    """Return *value* as a dict key: a list or dict as its JSON text."""
    if isinstance(value, (list, dict)):
        return json.dumps(value, sort_keys=True)
    if isinstance(value, float) and math.isnan(value):
        return "NaN"  # NaN != NaN: every NaN is one value
    return value


def auto_keys(configs: Iterable[Mapping[str, Any]]) -> list[str]:
    """Return the config keys whose value varies across *configs*, seeds left out."""
    found = list(configs)
    keys = dict.fromkeys(key for config in found for key in config)
    return [
        key
        for key in keys
        if not is_seed_key(key) and len({_hashable(c.get(key)) for c in found}) > 1
    ]


def resolve_keys(group_by: GroupBy, configs: Sequence[Mapping[str, Any]]) -> list[str]:
    """Return the config keys *group_by* names (``"auto"``: `auto_keys`), ``config.`` dropped.

    Raises:
        FieldError: a key that no run's config holds.
        ValueError: *group_by* names no key.
    """
    if group_by == AUTO:
        return auto_keys(configs)
    named = [group_by] if isinstance(group_by, str) else list(group_by or ())
    keys = list(dict.fromkeys(k.removeprefix(_CONFIG) for k in named))
    if not keys:
        msg = "group_by names no config key; pass keys (['lr']) or 'auto'"
        raise ValueError(msg)
    known = {key for config in configs for key in config}
    for key in keys:
        if key not in known:
            listed = ", ".join(sorted(known)) or "(none)"
            msg = (
                f"no run's config has key {key!r}{did_you_mean(key, known)}; config keys: {listed}"
            )
            raise FieldError(msg)
    return keys


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, sort_keys=True)
    except (TypeError, ValueError):
        return str(value)


def group_label(keys: Sequence[str], values: Sequence[Any]) -> str:
    """Return ``key=value,key2=value2`` (``all`` for no key): a value as JSON, a text as itself."""
    if not keys:
        return "all"
    return ",".join(f"{key}={_text(value)}" for key, value in zip(keys, values, strict=True))


def _order(value: Any) -> tuple[int, Any]:
    """Sort numbers first (by value), then texts, then anything else, null last."""
    if value is None:
        return (3, 0)
    if is_number(value):
        return (0, -math.inf if math.isnan(value) else value)
    if isinstance(value, str):
        return (1, value)
    return (2, _text(value))


def _grouped(
    configs: Mapping[str, Mapping[str, Any]], keys: Sequence[str]
) -> dict[str, tuple[tuple[Any, ...], list[str]]]:
    """Return, per group label (in the order of the key values), its values and its runs."""
    found: dict[tuple[Any, ...], tuple[tuple[Any, ...], list[str]]] = {}
    for run, config in configs.items():
        values = tuple(config.get(key) for key in keys)
        found.setdefault(tuple(map(_hashable, values)), (values, []))[1].append(run)
    ordered = sorted(found.values(), key=lambda item: tuple(map(_order, item[0])))
    return {group_label(keys, values): (values, runs) for values, runs in ordered}


# --- runs(group_by=...) ----------------------------------------------------------------------


def _stats(values: list[float]) -> dict[str, float | None]:
    """Return mean, std, min and max of *values* by the module's rule (None: missing)."""
    if not values:
        return dict.fromkeys(("mean", "std", "min", "max"))
    if any(math.isnan(v) for v in values):
        return dict.fromkeys(("mean", "std", "min", "max"), math.nan)
    mean = math.fsum(values) / len(values)
    std = None
    if len(values) > 1:
        with_inf = any(math.isinf(v) for v in values)
        spread = math.fsum((v - mean) ** 2 for v in values) if not with_inf else math.nan
        std = math.sqrt(spread / (len(values) - 1)) if not math.isnan(spread) else math.nan
    return {"mean": mean, "std": std, "min": min(values), "max": max(values)}


def _metrics(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Return the metric columns of run-table *rows* (last and best), in first-seen order."""
    return [
        name
        for name in dict.fromkeys(name for row in rows for name in row)
        if name not in _NOT_METRICS
        and not name.startswith(_CONFIG)
        and not name.startswith("_")
        and any(is_number(row.get(name)) for row in rows)
    ]


def group_rows(
    rows: Sequence[Mapping[str, Any]], group_by: GroupBy
) -> tuple[list[str], list[dict[str, Any]]]:
    """Return the keys chosen and one row per group of run-table *rows* (`RunSummary.row()`).

    A row holds the keys' values, `group` (its label), `n`, `runs` (the run names) and, per
    metric, ``<metric>.mean``, ``.std``, ``.min`` and ``.max`` over the runs that have it.
    """
    configs = {
        str(row["run"]): {k[len(_CONFIG) :]: v for k, v in row.items() if k.startswith(_CONFIG)}
        for row in rows
    }
    keys = resolve_keys(group_by, list(configs.values())) if rows else []
    by_run = {str(row["run"]): row for row in rows}
    metrics = _metrics(rows)
    found = []
    for label, (values, names) in _grouped(configs, keys).items():
        members = [by_run[name] for name in names]
        out: dict[str, Any] = dict(zip(keys, values, strict=True))
        out.update(group=label, n=len(members), runs=names)
        for metric in metrics:
            held = [float(r[metric]) for r in members if is_number(r.get(metric))]
            out.update((f"{metric}.{stat}", v) for stat, v in _stats(held).items())
        found.append(out)
    return keys, found


def runs_frame(pd: Any, rows: Sequence[Mapping[str, Any]], group_by: GroupBy) -> pd.DataFrame:
    """Return `runs(group_by=...)`'s frame: `group_rows` with nullable Float64 statistics."""
    import numpy as np

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


# --- compare(group_by=...) -------------------------------------------------------------------


def run_configs(sources: Sequence[str | os.PathLike[str]]) -> dict[str, dict[str, Any]]:
    """Return, per run name (as `runs()` and `compare()` name it), its flat config.

    Reads each log's `run_start` lines only; the config rule is `RunSummary`'s (the last
    attempt that gave one).
    """
    logs = [log for log in find_logs(*sources) if log.rank is None]
    labels = run_labels(logs)
    found: dict[str, dict[str, Any]] = {}
    for log in logs:
        summary = RunSummary(log.path, label=labels.get(log.path))
        first = head_record(log.path)
        if first is not None and first.get("event") != RUN_START:
            summary.add(first)  # the run's name, when its first record is no run_start
        for _, record in records_of(lines_containing(log.path, (b'"run_start"',))):
            if record.get("event") == RUN_START:
                summary.add(record)
        found[summary.label or summary.run or log.run] = summary.config
    return found


def compare_groups(
    pd: Any,
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
    for label, (_, runs) in _grouped(shown, keys).items():
        label_of.update(dict.fromkeys(runs, label))
    labels: dict[str, str] = {}  # column -> its group's label
    for column in columns:
        label = label_of[run_of(column)]
        labels[column] = label if events is None else f"{label}{SEPARATOR}{events[column]}"
    order = list(dict.fromkeys(sorted(labels.values(), key=_label_order(label_of, events))))
    table = _stat_table(pd, found, by, labels, order)
    table.attrs["group_by"] = keys
    return table


def _label_order(label_of: Mapping[str, str], events: Mapping[str, str] | None) -> Any:
    """Return a sort key: the groups' order (`_grouped`), then the events' first-seen order."""
    groups = {label: i for i, label in enumerate(dict.fromkeys(label_of.values()))}
    seen = {event: i for i, event in enumerate(dict.fromkeys((events or {}).values()))}

    def key(label: str) -> tuple[int, int]:
        if events is None:
            return groups[label], 0
        group, event = label.rsplit(SEPARATOR, 1)
        return groups[group], seen[event]

    return key


def _stat_table(
    pd: Any, found: pd.Series, by: str, labels: Mapping[str, str], order: Sequence[str]
) -> pd.DataFrame:
    """Return n, mean, std, min and max per step and group of *found*: one pass of bincounts
    over every run's value (no value skipped, none sampled).
    """
    import numpy as np

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
