"""The study page's data: each run's config against one metric, and a rank correlation per key.

Read from `runlines.runs()`: a run's config keys (``config.*``) and its last or best value of
a metric (``<event>.<field>`` or its ``.best`` column). A key whose values are all numbers is
numeric, any other categorical (its values as JSON text, in the answer too). The importance
of a key is a correlation over the runs that have both the key and a finite value of the
metric:

- numeric: Spearman's rank correlation, the Pearson correlation of the average ranks, in
  [-1, 1] (as pandas' ``.corr(method="spearman")``);
- categorical: the correlation ratio (eta) of the metric's ranks by the key's value, in
  [0, 1]: sqrt(between-category sum of squares / total sum of squares).

Either is missing (None) where fewer than two runs have both, or the key or the metric does
not vary. A correlation, not causation: a key that varies with another looks important too.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from runlines import reading

__all__ = ["STATS", "correlation_ratio", "ranks", "spearman", "study"]

STATS: Final = ("last", "best")
_CONFIG: Final = "config."
_BEST: Final = ".best"
# the run table's columns that are no metric
_NOT_METRICS: Final = frozenset(
    ("run", "path", "status", "attempts", "started", "duration_s", "step", "tags", "notes")
)
_WIDE: Final = 20.0  # a positive axis whose max/min reaches this is drawn on a log scale


def ranks(values: Sequence[float]) -> list[float]:
    """Return the rank of each of *values* (1 the smallest), ties at their average rank."""
    order = sorted(range(len(values)), key=values.__getitem__)
    found = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for at in order[start : end + 1]:
            found[at] = (start + end) / 2 + 1
        start = end + 1
    return found


def _pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    mx, my = math.fsum(xs) / len(xs), math.fsum(ys) / len(ys)
    sxy = math.fsum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    sxx = math.fsum((x - mx) ** 2 for x in xs)
    syy = math.fsum((y - my) ** 2 for y in ys)
    if sxx == 0 or syy == 0:
        return None
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Return Spearman's rank correlation of *xs* and *ys* (None: under two pairs, or constant)."""
    if len(xs) < 2:
        return None
    return _pearson(ranks(xs), ranks(ys))


def correlation_ratio(categories: Sequence[str], ys: Sequence[float]) -> float | None:
    """Return the correlation ratio (eta) of the ranks of *ys* by *categories*, in [0, 1]."""
    if len(ys) < 2 or len(set(categories)) < 2:
        return None
    ranked = ranks(ys)
    mean = math.fsum(ranked) / len(ranked)
    total = math.fsum((r - mean) ** 2 for r in ranked)
    if total == 0:
        return None
    by: dict[str, list[float]] = {}
    for category, r in zip(categories, ranked, strict=True):
        by.setdefault(category, []).append(r)
    between = math.fsum(len(rs) * (math.fsum(rs) / len(rs) - mean) ** 2 for rs in by.values())
    return min(1.0, math.sqrt(between / total))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _present(value: Any) -> bool:
    """Return whether a cell of the run table holds a value (NaN and None are none)."""
    if value is None:
        return False
    return not (isinstance(value, float) and math.isnan(value))


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def _metrics(frame: Any) -> list[str]:
    """Return the metrics of the run table: its numeric columns, ``.best`` and config left out."""
    numeric = set(frame.select_dtypes("number").columns)
    return [
        str(name)
        for name in frame.columns
        if name in numeric
        and name not in _NOT_METRICS
        and not str(name).startswith((_CONFIG, "_"))
        and not str(name).endswith(_BEST)
    ]


def _axis(values: list[Any]) -> dict[str, Any]:
    """Return an axis of *values* (None: missing): numeric with its range, or categorical."""
    held = [v for v in values if v is not None]
    if held and all(_is_number(v) for v in held):
        low, high = float(min(held)), float(max(held))
        wide = low > 0 and high / low >= _WIDE
        return {"kind": "numeric", "scale": "log" if wide else "linear", "min": low, "max": high}
    categories = sorted({_text(v) for v in held})
    return {"kind": "categorical", "categories": categories}


def _importance(
    key: str, axis: Mapping[str, Any], pairs: list[tuple[Any, float]]
) -> dict[str, Any]:
    """Return the importance row of *key*: its measure, its value and the runs it is over."""
    if axis["kind"] == "numeric":
        value = spearman([float(x) for x, _ in pairs], [y for _, y in pairs])
        measure = "spearman"
    else:
        value = correlation_ratio([_text(x) for x, _ in pairs], [y for _, y in pairs])
        measure = "correlation ratio"
    return {"key": key, "kind": axis["kind"], "measure": measure, "value": value, "n": len(pairs)}


def study(paths: Mapping[str, Any], *, metric: str | None, stat: str) -> dict[str, Any]:
    """Return the study page's data over the runs of *paths* (dashboard label -> log).

    Raises:
        ValueError: an unknown *stat*, or a *metric* no run has.
    """
    if stat not in STATS:
        msg = f"stat={stat!r} is none of {', '.join(STATS)}; pass stat=last or stat=best"
        raise ValueError(msg)
    answer: dict[str, Any] = {"metric": metric, "stat": stat, "metrics": [], "keys": []}
    answer.update(runs=[], left_out=[], importance=[], column=None, axis=None)
    if not paths:
        return answer
    frame = reading.runs(*paths.values())
    metrics = _metrics(frame)
    answer["metrics"] = metrics
    if metric is None:  # the first metric with a best (a loss, an accuracy), else the first
        metric = next((m for m in metrics if m + _BEST in frame.columns), None)
        metric = metric or (metrics[0] if metrics else None)
    if metric is None:
        return answer
    if metric not in metrics:
        msg = f"no run has metric {metric!r}; the metrics: {', '.join(metrics) or '(none)'}"
        raise ValueError(msg)
    column = metric + _BEST if stat == "best" else metric
    if column not in frame.columns:
        msg = f"{metric} has no best (no known direction); pass stat=last"
        raise ValueError(msg)
    answer.update(metric=metric, column=column)
    labels = {str(Path(path).resolve()): label for label, path in paths.items()}
    config_columns = [str(c) for c in frame.columns if str(c).startswith(_CONFIG)]
    keys = [c[len(_CONFIG) :] for c in config_columns]
    drawn: list[tuple[dict[str, Any], float]] = []
    for row in frame.to_dict("records"):
        label = labels.get(str(Path(str(row["path"])).resolve()), str(row["run"]))
        config = {c[len(_CONFIG) :]: row[c] if _present(row[c]) else None for c in config_columns}
        value = row[column]
        if not _is_number(value) or not math.isfinite(value):
            answer["left_out"].append(label)
            continue
        entry = {"run": label, "status": row["status"], "config": config, "value": float(value)}
        drawn.append((entry, float(value)))
    answer["runs"] = [entry for entry, _ in drawn]
    answer["axis"] = _axis([value for _, value in drawn])
    for key in keys:
        axis = _axis([entry["config"][key] for entry, _ in drawn])
        answer["keys"].append({"key": key, **axis})
        pairs = [(e["config"][key], y) for e, y in drawn if e["config"][key] is not None]
        answer["importance"].append(_importance(key, axis, pairs))
        if axis["kind"] == "categorical":  # each value as the category it is on its axis
            for entry, _ in drawn:
                value = entry["config"][key]
                entry["config"][key] = None if value is None else _text(value)
    answer["importance"].sort(key=lambda row: -abs(row["value"]) if row["value"] is not None else 1)
    return answer
