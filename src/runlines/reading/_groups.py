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
from typing import Any, Final

from runlines._layout import RUN_START
from runlines.errors import FieldError
from runlines.reading._files import find_logs, run_labels
from runlines.reading._lines import head_record, lines_containing, records_of
from runlines.reading._rules import did_you_mean, is_number
from runlines.reading._summary import RunSummary

__all__ = [
    "GROUP_STATS",
    "GroupBy",
    "auto_keys",
    "group_label",
    "group_rows",
    "groups_of",
    "is_seed_key",
    "resolve_keys",
    "run_configs",
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


def groups_of(
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
    for label, (values, names) in groups_of(configs, keys).items():
        members = [by_run[name] for name in names]
        out: dict[str, Any] = dict(zip(keys, values, strict=True))
        out.update(group=label, n=len(members), runs=names)
        for metric in metrics:
            held = [float(r[metric]) for r in members if is_number(r.get(metric))]
            out.update((f"{metric}.{stat}", v) for stat, v in _stats(held).items())
        found.append(out)
    return keys, found


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
