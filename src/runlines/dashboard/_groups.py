"""Groups of runs for the charts: each group's mean and spread per x, from every record.

The statistics are `runlines.compare(group_by=...)`'s, read from the full-resolution logs;
only then is each line downsampled, with the charts' min/max buckets (`Series`), so a spike
of the mean survives.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from runlines.dashboard._series import MAX_BUCKETS, Series

STATS: Final = ("n", "mean", "std", "min", "max")


def _value(cell: Any) -> float | None:
    """Return a frame's cell as a float; None where it holds no value (pd.NA)."""
    try:
        value = float(cell)
    except (TypeError, ValueError):
        return None
    return value


def _kept_rows(xs: Sequence[float], ys: Sequence[float | None]) -> list[int]:
    """Return the rows the min/max buckets keep of the line (xs, ys), in x order."""
    series = Series(MAX_BUCKETS)
    for row, (x, y) in enumerate(zip(xs, ys, strict=True)):
        if y is not None and math.isfinite(y):
            series.add(x, float(row), y)
    return [int(row) for row in series.points()["ts"]]


def _line(frame: Any, column: Any) -> tuple[list[float], list[float | None]]:
    xs = [float(x) for x in frame.index]
    return xs, [_value(v) for v in frame[column].tolist()]


def grouped(
    paths: Mapping[str, Any],
    *,
    metric: str,
    event: str | None,
    x: str,
    group_by: str | list[str],
    with_runs: bool,
) -> dict[str, Any]:
    """Return each group's downsampled (x, n, mean, std, min, max), and each run's line.

    *paths* maps a run's dashboard label to its log; the answer names runs by those labels.
    """
    from runlines.reading import compare

    labels = {str(Path(path).resolve()): label for label, path in paths.items()}
    sources = list(paths.values())
    answer: dict[str, Any] = {"x": x, "metric": metric, "event": event, "groups": [], "runs": []}
    if group_by:
        table = compare(*sources, metric=metric, x=x, event=event, group_by=group_by)
        answer["group_by"] = list(table.attrs.get("group_by", []))
        for group in dict.fromkeys(table.columns.get_level_values(0)):
            xs, means = _line(table, (group, "mean"))
            rows = _kept_rows(xs, means)
            entry: dict[str, Any] = {"group": group, "x": [xs[r] for r in rows]}
            for stat in STATS:
                values = _line(table, (group, stat))[1]
                entry[stat] = [values[r] for r in rows]
            entry["count"] = len(xs)
            answer["groups"].append(entry)
    if with_runs:
        names = _run_names(sources)
        table = compare(*sources, metric=metric, x=x, event=event)
        for column in table.columns:
            xs, ys = _line(table, column)
            rows = _kept_rows(xs, ys)
            run, _, shown_event = str(column).partition(" · ")
            label = labels.get(names.get(run, ""), run)
            answer["runs"].append(
                {
                    "run": label + (f" · {shown_event}" if shown_event else ""),
                    "x": [xs[r] for r in rows],
                    "y": [ys[r] for r in rows],
                }
            )
    return answer


def _run_names(sources: Sequence[Any]) -> dict[str, str]:
    """Map the name `compare` gives each run to its log's path."""
    from runlines.reading import runs

    table = runs(*sources)
    if "path" not in table.columns:
        return {}
    pairs = zip(table["run"], table["path"], strict=True)
    return {str(name): str(Path(path).resolve()) for name, path in pairs}
