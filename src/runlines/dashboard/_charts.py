"""The report's charts: `compare()` of one (event, field) by x, each line downsampled.

Each run's column (or each group's mean and band) keeps its buckets' minima and maxima, by the
dashboard's own `Series`, so that spikes survive. numpy is imported at the top: the report
imports this module once it has charts to draw, after `compare()` has read their tables.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from runlines import reading
from runlines.dashboard._series import Series, unit_of

if TYPE_CHECKING:
    import numpy.typing as npt
    import pandas as pd

__all__ = ["BAND_STATS", "chart", "downsampled", "group_bands", "grouped_chart"]


def chart(sources: Sequence[Any], event: str, field: str, x: str, buckets: int) -> dict[str, Any]:
    """Return one chart: compare()'s column of each run, downsampled."""
    table = reading.compare(*sources, metric=field, by=x, event=event)
    xs = table.index.to_numpy(dtype="float64")
    lines = [{"run": str(run), **downsampled(xs, table[run], buckets)} for run in table.columns]
    return {"event": event, "field": field, "unit": unit_of(field), "lines": lines}


def downsampled(xs: npt.NDArray[np.float64], column: pd.Series, buckets: int) -> dict[str, Any]:
    """Return *column* (by *xs*) in at most *buckets* min/max buckets, as the dashboard keeps it.

    A missing value (pd.NA: no record at that x) is no point; a NaN or an infinity is a mark
    at its x. Each point's row in *column* is kept too (`rows`), for the values beside it.
    """
    series = _series_of(xs, column, buckets)
    points = series.points()
    return {
        "x": points["step"],
        "y": points["y"],
        "rows": [int(row) for row in points["ts"]],
        "marks": [[mark["step"], mark["value"]] for mark in points["marks"]],
        "count": points["count"],
        "nonfinite": points["nonfinite"],
    }


def _series_of(xs: npt.NDArray[np.float64], column: pd.Series, buckets: int) -> Series:
    """Return a `Series` of *column*'s values: the x as its step, the row as its ts."""
    values = column.to_numpy(dtype="float64", na_value=np.nan)
    rows = np.flatnonzero(~column.isna().to_numpy(dtype=bool) & np.isfinite(xs))
    series = Series(buckets)
    series.extend(values[rows], rows, _point_of(xs, values))
    return series


def _point_of(
    xs: npt.NDArray[np.float64], values: npt.NDArray[np.float64]
) -> Callable[[int], tuple[float, float, float]]:
    def at(row: int) -> tuple[float, float, float]:
        return float(xs[row]), float(row), float(values[row])

    return at


# --- groups: compare(group_by=...)'s mean with a band ----------------------------------------
# The table's contract: indexed by x, columns (group label "k=v,k2=v2", stat), the stats n,
# mean, std, min and max of the runs of each group at each x.

BAND_STATS: Final = ("n", "mean", "std", "min", "max")


def grouped_chart(
    sources: Sequence[Any],
    event: str,
    field: str,
    x: str,
    group_by: str | list[str],
    buckets: int,
) -> dict[str, Any]:
    """Return one chart of groups: each group's mean line and its band."""
    table = reading.compare(*sources, metric=field, x=x, event=event, group_by=group_by)
    return {
        "event": event,
        "field": field,
        "unit": unit_of(field),
        "groups": group_bands(table, buckets),
    }


def group_bands(table: pd.DataFrame, buckets: int) -> list[dict[str, Any]]:
    """Return each group of *table* (compare(group_by=...)'s) as its mean and band, downsampled.

    The mean, the min and the max are each downsampled to min/max buckets, and every stat is
    kept at the x of each point any of the three keeps: a spike of one run survives in the band.
    """
    xs = table.index.to_numpy(dtype="float64")
    found = []
    for label in dict.fromkeys(table.columns.get_level_values(0)):
        stats = table[label]
        mean = downsampled(xs, stats["mean"], buckets)
        kept = set(mean["rows"])
        for edge in ("min", "max"):
            kept.update(int(row) for row in _series_of(xs, stats[edge], buckets).points()["ts"])
        rows = np.array(sorted(kept), dtype=np.int64)
        band: dict[str, Any] = {"group": str(label), "x": xs[rows].tolist()}
        for stat in BAND_STATS:
            band[stat] = _nullable(stats[stat].to_numpy(dtype="float64", na_value=np.nan)[rows])
        band["marks"], band["nonfinite"] = mean["marks"], mean["nonfinite"]
        found.append(band)
    return found


def _nullable(values: npt.NDArray[np.float64]) -> list[float | None]:
    """Return *values* as a list, a NaN or an infinity as None (a gap in the band)."""
    return [value if math.isfinite(value) else None for value in values.tolist()]
