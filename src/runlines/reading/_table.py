"""The run table: `runs(*sources)`, one row per run, the table users compare a sweep with."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Final

from runlines.reading._files import LogFile, find_logs, run_labels
from runlines.reading._lines import iter_events
from runlines.reading._rules import import_pandas
from runlines.reading._summary import RunSummary

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["runs", "summaries", "summary_of"]

KEY_COLUMNS: Final = ("run", "path", "status", "attempts", "started", "duration_s", "step")


def summaries(*sources: str | os.PathLike[str]) -> list[RunSummary]:
    """Return a `RunSummary` of each run of *sources* (rank files belong to their main log)."""
    logs = [log for log in find_logs(*sources) if log.rank is None]
    labels = run_labels(logs)
    found = []
    for log in logs:
        found.append(summary_of(log, labels.get(log.path)))
    return found


def summary_of(log: LogFile, label: str | None = None) -> RunSummary:
    """Return the `RunSummary` of *log*, reading every record once."""
    summary = RunSummary(log.path, label=label)
    for record in iter_events(log.path):
        summary.add(record)
    return summary


def runs(*sources: str | os.PathLike[str]) -> pd.DataFrame:
    """Return one row per run of *sources* (log files or folders of logs).

    Columns: `run`, `path`, `status` (ok, failed, interrupted, terminated, running, stalled,
    died), `attempts`, `started` (UTC), `duration_s` (the attempts' time, gaps left out), the
    last `step`; each config key as `config.<key>` (nested keys dotted); for each numeric
    field of each event its last value as `<event>.<field>`, and where the field's name says
    which way is better (loss: lower; accuracy: higher) its best as `<event>.<field>.best`.

    Raises:
        ReadError: a source that does not exist, or a folder without logs.
    """
    pd = import_pandas("runs()")
    rows = [summary.row() for summary in summaries(*sources)]
    frame = pd.DataFrame(rows, columns=_columns(rows))
    frame["started"] = pd.to_datetime(frame["started"], utc=True)
    return frame


def _columns(rows: list[dict[str, Any]]) -> list[str]:
    """Return the key columns, then the config keys, then the metrics, in first-seen order."""
    seen = dict.fromkeys(name for row in rows for name in row)
    config = [name for name in seen if name.startswith("config.")]
    metrics = [name for name in seen if name not in KEY_COLUMNS and name not in config]
    return [*KEY_COLUMNS, *config, *metrics]
