"""`runlines report`: the run table, the charts and each run's config in one HTML file.

The file holds its data, scripts (the dashboard's shared run table code, static/table.js,
too) and styles inline (the dashboard's styles and its vendored uPlot), so it opens from disk
with no server and makes no network request. The table is the rows `runs()` gives, with each
run's tags and notes; with groups, a table of one row per group as `runs(group_by=...)` gives
it (n, and the mean and std of each last and best metric). A chart is `compare()` of one
(event, field) by the x axis, each run's column downsampled to its buckets' minima and maxima
by the dashboard's own `Series`, so that spikes survive (`_charts`, which imports numpy: it
is imported once there are charts to draw). The file names the size and sha256 of every log it
was written from.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Final

import orjson

from runlines import reading
from runlines._layout import hash_path
from runlines._version import __version__
from runlines.dashboard._series import MAX_BUCKETS, unit_of
from runlines.errors import FieldError
from runlines.reading._groups import group_rows
from runlines.reading._rules import import_pandas, json_ready
from runlines.reading._summary import RunSummary
from runlines.reading._table import KEY_COLUMNS, summaries

__all__ = ["MAX_POINTS", "report"]

# The points of all the charts' lines together: about 25 bytes each as JSON, so that a report
# of 100 runs x 100k records stays under 10 MB however many fields they log
MAX_POINTS: Final = 300_000
MIN_BUCKETS: Final = 50  # a min and a max each: a line of 100 points at the least
_STATIC: Final = ("vendor/uPlot.min.css", "app.css", "report.css")
_SCRIPTS: Final = ("vendor/uPlot.iife.min.js", "table.js", "report.js")


@dataclass(frozen=True, slots=True)
class _Chart:
    """One chart: a field of one event, as `compare(metric=field, event=event)` gives it."""

    event: str
    field: str


def report(
    *sources: str | os.PathLike[str],
    path: str | os.PathLike[str],
    event: str | None = None,
    metric: str | None = None,
    x: str = "step",
    group_by: Sequence[str] | None = None,
) -> Path:
    """Write one HTML file at *path* that shows the runs of *sources*; return its path.

    See `runlines.dashboard.report`.
    """
    # hashed first: of a log still being written, the report shows at least the bytes hashed
    inputs = [_fingerprint(log.path) for log in reading.find_logs(*sources)]
    found = summaries(*sources)
    charts = _charts_of(found, event, metric, x)
    if metric is not None and not charts:  # compare names the numeric fields there are
        reading.compare(*sources, metric=metric, by=x, event=event)
    rows = [summary.row() for summary in found]
    keys = _group_keys(group_by)
    groups = _groups(rows, keys) if keys else None
    buckets = _buckets(len(charts) * max(1, len(found)))
    drawn, skipped = _draw(sources, charts, x, keys, buckets) if charts else ([], [])
    data = {
        "version": __version__,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "sources": [str(source) for source in sources],
        "x": x,
        "event": event,
        "metric": metric,
        "group_by": groups["keys"] if groups else None,  # those "auto" chose
        **_table(rows),
        "groups": groups,
        "runs": [_run_details(summary, row) for summary, row in zip(found, rows, strict=True)],
        "charts": drawn,
        "skipped": skipped,
        "inputs": inputs,
    }
    return _write(Path(path), _page(data, inputs))


def _fingerprint(log: Path) -> dict[str, Any]:
    """Return a log's path, size and sha256, of the same bytes (one pass)."""
    size, sha256, _ = hash_path(log)
    return {"path": str(log), "size_bytes": size, "sha256": sha256}


def _charts_of(
    found: list[RunSummary], event: str | None, metric: str | None, x: str
) -> list[_Chart]:
    """Return each (event, field) metric of the runs, in the order first seen, as filtered."""
    charts = dict.fromkeys(
        _Chart(name, field) for summary in found for name, field, _ in summary.metrics()
    )
    return [
        chart
        for chart in charts
        if (event is None or chart.event == event)
        and (metric is None or chart.field == metric)
        and chart.field != x
    ]


def _draw(
    sources: Sequence[Any],
    charts: list[_Chart],
    x: str,
    group_by: str | list[str] | None,
    buckets: int,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Return the charts drawn, and why each chart left out was (its x is not in its records)."""
    import_pandas("compare()")  # the install line the first chart's compare() gives
    from runlines.dashboard import _charts  # numpy: imported once there are charts to draw

    drawn, skipped = [], []
    for chart in charts:
        try:
            if group_by:
                found = _charts.grouped_chart(
                    sources, chart.event, chart.field, x, group_by, buckets
                )
            else:
                found = _charts.chart(sources, chart.event, chart.field, x, buckets)
        except FieldError as err:  # the x field is not in this event's records
            skipped.append(f"{chart.event} · {chart.field}: {err}")
            continue
        drawn.append(found)
    return drawn, skipped


def _buckets(series: int) -> int:
    """Return the buckets each of *series* lines keeps, for `MAX_POINTS` in all."""
    return max(MIN_BUCKETS, min(MAX_BUCKETS, MAX_POINTS // (2 * max(1, series))))


# --- the run table ---------------------------------------------------------------------------


def _table(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Return the rows `runs()` gives, as JSON values, their columns in its order, and units."""
    seen = dict.fromkeys(name for row in rows for name in row)
    config = [name for name in seen if name.startswith("config.")]
    metrics = [name for name in seen if name not in KEY_COLUMNS and name not in config]
    columns = [*KEY_COLUMNS, *config, *metrics]
    units = {name: unit for name in columns if (unit := unit_of(name)) is not None}
    return {"columns": columns, "rows": [_json_row(row) for row in rows], "units": units}


def _group_keys(group_by: Sequence[str] | None) -> str | list[str] | None:
    """Return *group_by* as `compare` and `runs` take it: config keys, or "auto"."""
    if not group_by:
        return None
    return "auto" if group_by == "auto" or list(group_by) == ["auto"] else list(group_by)


def _groups(rows: list[dict[str, Any]], group_by: str | list[str]) -> dict[str, Any]:
    """Return the rows `runs(group_by=...)` gives: n and each metric's statistics per group."""
    keys, grouped = group_rows(rows, group_by)
    return {"keys": keys, "rows": [dict(json_ready(row)) for row in grouped]}


def _json_row(row: dict[str, Any]) -> dict[str, Any]:
    started = row.get("started")
    if isinstance(started, _dt.datetime):
        row = {**row, "started": started.isoformat()}
    return dict(json_ready(row))


def _run_details(summary: RunSummary, row: dict[str, Any]) -> dict[str, Any]:
    """Return what a run's panel shows: its config, tags, notes and attempts (with status)."""
    attempts = [
        {
            "attempt": attempt.get("attempt"),
            "started": _iso(attempt.get("started")),
            "status": attempt.get("status"),
            "duration_s": attempt.get("duration_s"),
            "error": _error(attempt),
        }
        for attempt in summary.attempts_detail()
    ]
    return {
        "run": row["run"],
        "path": str(summary.path),
        "config": summary.config,
        "tags": list(row.get("tags") or []),
        "notes": list(row.get("notes") or []),
        "attempts": attempts,
    }


def _iso(ts: Any) -> str | None:
    try:
        return _dt.datetime.fromtimestamp(ts, _dt.UTC).isoformat()
    except (TypeError, OverflowError, OSError, ValueError):
        return None


def _error(attempt: dict[str, Any]) -> str | None:
    if attempt.get("exc_type"):
        return f"{attempt['exc_type']}: {attempt.get('exc_message') or ''}".rstrip(": ")
    signal = attempt.get("signal")
    return None if signal is None else str(signal)


# --- the page --------------------------------------------------------------------------------


def _page(data: dict[str, Any], inputs: list[dict[str, Any]]) -> str:
    """Return the HTML of the report: the template with styles, scripts and data inline."""
    static = resources.files("runlines.dashboard") / "static"
    styles = "\n".join((static / name).read_text(encoding="utf-8") for name in _STATIC)
    uplot, table, script = ((static / name).read_text(encoding="utf-8") for name in _SCRIPTS)
    license_text = (static / "vendor" / "LICENSE").read_text(encoding="utf-8")
    parts = {
        "{{title}}": _escaped_html(_title(data["sources"])),
        "{{styles}}": _inline(styles, "style"),
        "{{uplot}}": _inline(f"/*! uPlot's license:\n{license_text}*/\n{uplot}", "script"),
        "{{table}}": _inline(table, "script"),
        "{{script}}": _inline(script, "script"),
        "{{data}}": _script_json(data),
        "{{inputs}}": _script_json(inputs),
    }
    template = (static / "report.html").read_text(encoding="utf-8")
    # one pass: a config value that reads "{{inputs}}" is no marker
    return re.sub(r"\{\{\w+\}\}", lambda found: parts[found.group(0)], template)


def _inline(text: str, element: str) -> str:
    """Return *text*, checked to hold no end tag of the *element* it goes in."""
    if f"</{element}" in text.lower():
        msg = f"a static file of the report holds '</{element}'; please report it"
        raise RuntimeError(msg)
    return text


def _title(sources: list[str]) -> str:
    shown = ", ".join(sources[:3]) + (f" and {len(sources) - 3} more" if len(sources) > 3 else "")
    return f"runlines report: {shown}"


def _escaped_html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _script_json(value: Any) -> str:
    """Return *value* as JSON that a <script> element holds whole: no `<` in it at all."""
    value = json_ready(value)  # NaN and the infinities as the log names them, never null
    try:
        raw = orjson.dumps(value)
    except TypeError:  # an int beyond 64 bits in a config: the stdlib encoder takes it
        raw = json.dumps(value, default=str, allow_nan=False).encode()
    return raw.decode().replace("<", "\\u003c")


def _write(path: Path, page: str) -> Path:
    """Write *page* to *path* whole: a reader never sees half a report."""
    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(page)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path
