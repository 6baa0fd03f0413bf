"""Line plots of one metric per run, drawn with matplotlib's Agg canvas (imported only here)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["draw_metric", "plot_metric"]

_INSTALL = "plotting needs matplotlib: pip install 'runlines[plot]'"


def _figure() -> Any:
    """Return a new Figure on an Agg canvas; pyplot and the global backend stay untouched."""
    try:
        import matplotlib  # noqa: F401 - fail here, with the install hint, when it is missing
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as err:
        raise ImportError(_INSTALL) from err
    figure = Figure(figsize=(9, 5), dpi=110, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def draw_metric(
    table: pd.DataFrame, *, metric: str, by: str = "step", title: str | None = None
) -> Any:
    """Return a matplotlib Figure with one line per run of *table* (a `compare` result).

    Raises:
        ImportError: matplotlib is not installed.
    """
    figure = _figure()
    axes = figure.add_subplot()
    for run in table.columns:
        values = table[run].dropna()
        xs, ys = values.index.to_numpy(dtype=float), values.to_numpy(dtype=float)
        axes.plot(xs, ys, label=str(run), linewidth=1.6, marker="o" if len(xs) <= 30 else None)
    if table.index.dtype.kind in "iu" or str(table.index.dtype) == "Int64":
        from matplotlib.ticker import MaxNLocator

        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_xlabel(by)
    axes.set_ylabel(metric)
    axes.set_title(title or f"{metric} by {by}")
    axes.grid(visible=True, alpha=0.3)
    if len(table.columns):
        axes.legend(title="run")
    return figure


def plot_metric(
    table: pd.DataFrame,
    path: str | os.PathLike[str],
    *,
    metric: str,
    by: str = "step",
    title: str | None = None,
) -> Path:
    """Draw one line per run of *table* (a `compare` result) and save it to *path* (PNG, SVG...).

    Raises:
        ImportError: matplotlib is not installed.
    """
    target = Path(path)
    draw_metric(table, metric=metric, by=by, title=title).savefig(target)
    return target
