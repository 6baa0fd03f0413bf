"""Line plots of one metric per run, drawn with matplotlib's Agg canvas.

matplotlib and numpy are imported at the top: `runlines plot` imports this module when it
draws, and only then (without matplotlib, the import raises the line to install it).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from runlines.reading._frames import SEPARATOR

try:
    import matplotlib as mpl
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator
except ImportError as err:
    msg = "plotting needs matplotlib: pip install 'runlines[plot]'"
    raise ImportError(msg) from err

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "draw_groups",
    "draw_metric",
    "nonfinite_count",
    "plot_groups",
    "plot_metric",
    "runs_and_events",
]

_STYLES: Final = ("-", "--", ":", "-.")  # one per event, in the order the columns have them
_MARKED_POINTS: Final = 30  # a line of this many points or fewer marks each one
NONFINITE_GID: Final = "nonfinite"  # the gid of the marks of NaN and infinities


def _figure() -> Any:
    """Return a new Figure on an Agg canvas; pyplot and the global backend stay untouched."""
    figure = Figure(figsize=(9, 5), dpi=110, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def draw_metric(
    table: pd.DataFrame,
    *,
    metric: str,
    by: str = "step",
    title: str | None = None,
    logx: bool = False,
    logy: bool = False,
) -> Any:
    """Return a matplotlib Figure with one line per column of *table* (a `compare` result).

    Each run has one colour, each event (columns labelled ``run · event``) one line style.
    A NaN or an infinity the run logged is a mark at the edge of the axes at its x (``inf`` at
    the top, ``-inf`` at the bottom, NaN at the top, hollow), and the run's label in the
    legend counts them: ``baseline (3 non-finite)``. A step with no record is a gap.
    """
    figure = _figure()
    axes = figure.add_subplot()
    colours = _colours()
    runs, events = runs_and_events(table.columns)
    run_colour = {run: colours[i % len(colours)] for i, run in enumerate(dict.fromkeys(runs))}
    event_style = {e: _STYLES[i % len(_STYLES)] for i, e in enumerate(dict.fromkeys(events))}
    for column, run, event in zip(table.columns, runs, events, strict=True):
        xs, ys = _points(table[column], table.index)
        finite = np.isfinite(ys)
        count = int((~finite).sum())
        label = str(column) + (f" ({count:,} non-finite)" if count else "")
        colour, style = run_colour[run], event_style[event]
        few = len(xs) <= _MARKED_POINTS
        axes.plot(
            xs[finite],
            ys[finite],
            label=label,
            color=colour,
            linestyle=style,
            linewidth=1.6,
            marker="o" if few else None,
        )
        if count:
            _mark_nonfinite(axes, xs[~finite], ys[~finite], colour, str(column))
    if table.index.dtype.kind in "iu" or str(table.index.dtype) == "Int64":
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_xlabel(by)
    axes.set_ylabel(metric)
    axes.set_title(title or f"{metric} by {by}")
    axes.grid(visible=True, alpha=0.3)
    if len(table.columns):
        axes.legend(title="run")
    _scales(axes, logx=logx, logy=logy)
    return figure


def _scales(axes: Any, *, logx: bool, logy: bool) -> None:
    if logx:
        axes.set_xscale("log")
    if logy:
        axes.set_yscale("log")


def draw_groups(
    table: pd.DataFrame,
    *,
    metric: str,
    by: str = "step",
    title: str | None = None,
    logx: bool = False,
    logy: bool = False,
) -> Any:
    """Return a Figure with each group's mean line of *table* (`compare(group_by=...)`) and a
    band of mean ± std; the legend gives each group's most runs at a step (`n`).
    """
    figure = _figure()
    axes = figure.add_subplot()
    colours = _colours()
    xs = table.index.to_numpy(dtype="float64", na_value=np.nan)
    for i, label in enumerate(dict.fromkeys(table.columns.get_level_values(0))):
        group = table[label]
        mean = group["mean"].to_numpy(dtype="float64", na_value=np.nan)
        std = group["std"].to_numpy(dtype="float64", na_value=0.0)
        colour = colours[i % len(colours)]
        most = int(group["n"].max()) if len(group) else 0
        axes.plot(xs, mean, color=colour, linewidth=1.6, label=f"{label} (n={most})")
        axes.fill_between(xs, mean - std, mean + std, color=colour, alpha=0.2, linewidth=0)
    axes.set_xlabel(by)
    axes.set_ylabel(metric)
    axes.set_title(title or f"{metric} by {by}, mean ± std")
    axes.grid(visible=True, alpha=0.3)
    if len(table.columns):
        axes.legend(title="group")
    _scales(axes, logx=logx, logy=logy)
    return figure


def plot_groups(
    table: pd.DataFrame,
    path: str | os.PathLike[str],
    *,
    metric: str,
    by: str = "step",
    logx: bool = False,
    logy: bool = False,
) -> Path:
    """Draw each group of *table* (`compare(group_by=...)`) as `draw_groups` and save it."""
    target = Path(path)
    draw_groups(table, metric=metric, by=by, logx=logx, logy=logy).savefig(target)
    return target


def _colours() -> list[str]:
    """Return the colours of matplotlib's cycle (rcParams), one per run in turn."""
    cycle = mpl.rcParams["axes.prop_cycle"].by_key().get("color")
    return list(cycle) if cycle else ["C0"]


def runs_and_events(columns: Any) -> tuple[list[str], list[str]]:
    """Return each `compare` column's run and event: ``run · event`` split, else event ``""``."""
    labels = [str(column) for column in columns]
    if not all(SEPARATOR in label for label in labels) or not labels:
        return labels, [""] * len(labels)
    pairs = [label.rsplit(SEPARATOR, 1) for label in labels]
    return [run for run, _ in pairs], [event for _, event in pairs]


def nonfinite_count(table: pd.DataFrame) -> int:
    """Return how many values of *table* (a `compare` result) are NaN or infinite."""
    found = (_points(table[column], table.index)[1] for column in table.columns)
    return sum(int((~np.isfinite(ys)).sum()) for ys in found)


def _points(column: pd.Series, index: pd.Index) -> tuple[Any, Any]:
    """Return the x and y of the steps with a record, NaN and infinities kept.

    In a `compare` table (Float64) a step with no record is pd.NA; in a plain float column,
    where NaN is also what pandas writes for none, a NaN is taken for no record.
    """
    values = column.to_numpy(dtype="float64", na_value=np.nan)
    nullable = str(column.dtype) == "Float64"
    recorded = ~column.isna().to_numpy(dtype=bool) if nullable else ~np.isnan(values)
    xs = index.to_numpy(dtype="float64", na_value=np.nan)
    return xs[recorded], values[recorded]


def _mark_nonfinite(axes: Any, xs: Any, ys: Any, colour: str, column: str) -> None:
    """Mark NaN and inf at the top edge of *axes*, -inf at the bottom, at their x."""
    for kind, chosen, edge, marker, face in (
        ("inf", ys == np.inf, 1.0, "^", colour),
        ("-inf", ys == -np.inf, 0.0, "v", colour),
        ("NaN", np.isnan(ys), 1.0, "o", "none"),
    ):
        if not chosen.any():
            continue
        axes.plot(
            xs[chosen],
            np.full(int(chosen.sum()), edge),
            transform=axes.get_xaxis_transform(),  # x in data, y in axes: the edge
            linestyle="none",
            marker=marker,
            markersize=7,
            markerfacecolor=face,
            markeredgecolor=colour,
            clip_on=False,
            label=f"_{column} {kind}",  # a leading underscore keeps it out of the legend
            gid=NONFINITE_GID,
        )


def plot_metric(
    table: pd.DataFrame,
    path: str | os.PathLike[str],
    *,
    metric: str,
    by: str = "step",
    title: str | None = None,
    logx: bool = False,
    logy: bool = False,
) -> Path:
    """Draw one line per run of *table* (a `compare` result) and save it to *path* (PNG, SVG...)."""
    target = Path(path)
    scales = {"logx": logx, "logy": logy}
    draw_metric(table, metric=metric, by=by, title=title, **scales).savefig(target)
    return target
