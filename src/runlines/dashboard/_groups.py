"""Groups of runs for the charts: each group's mean and spread per x, from every record.

The statistics are `runlines.compare(group_by=...)`'s, read from the full-resolution logs;
only then is each line downsampled, with the charts' min/max buckets (`Series`), so a spike
of the mean survives. It is imported by the request that asks for groups: numpy and pandas
are imported then.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np

from runlines.dashboard._series import MAX_BUCKETS, Series
from runlines.reading import compare, runs

STATS: Final = ("n", "mean", "std", "min", "max")


def _column(frame: Any, column: Any) -> Any:
    """Return a frame's column as floats, NaN where it holds no value (pd.NA)."""
    return frame[column].to_numpy(dtype=np.float64, na_value=np.nan)


def _kept_rows(xs: Any, ys: Any, logged: Any) -> tuple[Any, list[list[Any]], int]:
    """Return the rows the min/max buckets keep of the line (xs, ys), in x order, the marks of
    its non-finite values ([x, "NaN"], the first MAX_MARKS) and how many it has.

    *logged* says which rows hold a value: a NaN there is a logged NaN, a mark, never a gap.
    """
    series = Series(MAX_BUCKETS)
    rows = np.flatnonzero(logged & np.isfinite(xs))
    series.extend(ys[rows], rows, lambda row: (float(xs[row]), float(row), float(ys[row])))
    points = series.points()
    marks = [[mark["step"], mark["value"]] for mark in points["marks"]]
    return np.asarray(points["ts"], dtype=np.int64), marks, points["nonfinite"]


def _listed(values: Any) -> list[float | None]:
    """Return floats as JSON values: None for NaN (no value, or a logged NaN)."""
    return [None if v != v else v for v in values.tolist()]


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

    Each line has the marks of its non-finite values, ``[x, "NaN"]``: of a group, the x where
    its mean is not finite (a run logged NaN or an infinity there), as the charts mark them.

    *paths* maps a run's dashboard label to its log; the answer names runs by those labels.
    """
    labels = {str(Path(path).resolve()): label for label, path in paths.items()}
    sources = list(paths.values())
    answer: dict[str, Any] = {"x": x, "metric": metric, "event": event, "groups": [], "runs": []}
    if group_by:
        table = compare(*sources, metric=metric, x=x, event=event, group_by=group_by)
        answer["group_by"] = list(table.attrs.get("group_by", []))
        xs = table.index.to_numpy(dtype=np.float64)
        for group in dict.fromkeys(table.columns.get_level_values(0)):
            logged = table[(group, "n")].to_numpy(dtype=np.float64, na_value=0.0)
            found = _kept_rows(xs, _column(table, (group, "mean")), logged > 0)
            rows, marks, nonfinite = found
            entry: dict[str, Any] = {"group": group, "x": xs[rows].tolist()}
            for stat in STATS:
                entry[stat] = _listed(_column(table, (group, stat))[rows])
            entry["count"] = int(np.count_nonzero(logged))  # the x values the group has
            entry.update(marks=marks, nonfinite=nonfinite)
            answer["groups"].append(entry)
    if with_runs:
        names = _run_names(sources)
        table = compare(*sources, metric=metric, x=x, event=event)
        xs = table.index.to_numpy(dtype=np.float64)
        for column in table.columns:
            ys = _column(table, column)
            rows, marks, nonfinite = _kept_rows(xs, ys, ~table[column].isna().to_numpy(dtype=bool))
            run, _, shown_event = str(column).partition(" · ")
            label = labels.get(names.get(run, ""), run)
            answer["runs"].append(
                {
                    "run": label + (f" · {shown_event}" if shown_event else ""),
                    "x": xs[rows].tolist(),
                    "y": _listed(ys[rows]),
                    "marks": marks,
                    "nonfinite": nonfinite,
                }
            )
    return answer


def _run_names(sources: Sequence[Any]) -> dict[str, str]:
    """Map the name `compare` gives each run to its log's path."""
    table = runs(*sources)
    if "path" not in table.columns:
        return {}
    pairs = zip(table["run"], table["path"], strict=True)
    return {str(name): str(Path(path).resolve()) for name, path in pairs}
