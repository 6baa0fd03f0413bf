"""The run table: `runs(*sources)`, one row per run, the table users compare a sweep with."""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from runlines._layout import copy_path
from runlines.errors import RunlinesWarning
from runlines.reading import _copies
from runlines.reading._files import LogFile, find_logs, run_labels
from runlines.reading._frames import grouped_runs
from runlines.reading._lines import decode_line, iter_events, lines_containing, open_log
from runlines.reading._rules import foreign_log_message, import_pandas
from runlines.reading._summary import RunSummary

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["quick_summary_of", "runs", "summaries", "summary_of"]

KEY_COLUMNS: Final = (
    "run",
    "path",
    "status",
    "attempts",
    "started",
    "duration_s",
    "step",
    "tags",
    "notes",
)
QUICK_BYTES: Final = 8 << 20  # `ls` reads a bigger log's lifecycle lines and last MiB only
_TAIL_BYTES: Final = 1 << 20


def summaries(*sources: str | os.PathLike[str]) -> list[RunSummary]:
    """Return a `RunSummary` of each run of *sources* (rank files belong to their main log).

    A JSONL that is no runlines log is left out, with a warning that names it.
    """
    logs = [log for log in find_logs(*sources) if log.rank is None]
    labels = run_labels(logs)
    found = []
    for log in logs:
        summary = summary_of(log, labels.get(log.path))
        if summary.is_runlines_log():
            found.append(summary)
        else:  # a foreign JSONL among the logs: no run, and one note that names it
            message = foreign_log_message(log.path, left_out=True)
            warnings.warn(message, RunlinesWarning, stacklevel=3)
    return found


def summary_of(log: LogFile, label: str | None = None) -> RunSummary:
    """Return the `RunSummary` of *log*: from its Parquet copy when it has a usable one, and
    the records after it, else reading every record once.
    """
    if copy_path(log.path).exists():  # the copy's reader imports pyarrow: only for a copy
        try:
            summary = _copies.copy_summary(log, label)
        except ImportError:  # no pyarrow: the JSONL is read
            summary = None
        if summary is not None:
            return summary
    summary = RunSummary(log.path, label=label)
    for record in iter_events(log.path):
        summary.add(record)
    return summary


def quick_summary_of(log: LogFile, label: str | None = None) -> RunSummary:
    """Return the `RunSummary` of *log*, from its lifecycle lines and last MiB when it is big.

    Status, attempts, start and step are exact; the metrics are those of the last MiB (their
    bests over it only), and an attempt that died without run_end counts no duration. Logs up
    to 8 MiB are read whole (`summary_of`).
    """
    try:
        size = log.path.stat().st_size
    except OSError:
        size = 0
    if size <= QUICK_BYTES or copy_path(log.path).is_file():
        return summary_of(log, label)
    found = dict(lines_containing(log.path, (b'"run_start"', b'"run_end"')))
    with open_log(log.path) as stream:
        start = stream.seek(max(0, size - _TAIL_BYTES))
        block = stream.read()
    first = block.find(b"\n") + 1 if start else 0  # the first line may start before the block
    offset = start + first
    for raw in block[first:].split(b"\n"):
        found.setdefault(offset, raw)
        offset += len(raw) + 1
    summary = RunSummary(log.path, label=label)
    for _, raw in sorted(found.items()):
        try:
            record = decode_line(raw)
        except ValueError:
            continue  # a torn line; the full readers warn about it
        summary.add(record)
    return summary


def runs(
    *sources: str | os.PathLike[str], group_by: str | Sequence[str] | None = None
) -> pd.DataFrame:
    """Return one row per run of *sources* (log files or folders of logs).

    Columns: `run`, `path`, `status` (ok, failed, interrupted, terminated, pruned, running,
    stalled, died), `attempts`, `started` (UTC), `duration_s` (the attempts' time, gaps left
    out), the last `step`; each config key as `config.<key>` (nested keys dotted); for each numeric
    field of each event its last value as `<event>.<field>`, and where the field's name says
    which way is better (loss: lower; accuracy: higher) its best as `<event>.<field>.best`.
    `tags` (a list, in the order added) and `notes` (a list of texts) are those `runlines tag`
    and `runlines note` gave the run (docs/cli.md).

    With *group_by* (config keys, or ``"auto"``): one row per group instead, with the keys,
    `group` (its label), `n`, `runs` (the run names) and ``<metric>.<stat>`` (mean, std,
    min, max) per metric (docs/groups.md); ``frame.attrs["group_by"]`` names the keys.

    Raises:
        ReadError: a source that does not exist, or a folder without logs.
        FieldError: a *group_by* key that no run's config holds.
    """
    pd = import_pandas("runs()")
    rows = [summary.row() for summary in summaries(*sources)]
    if group_by is not None:
        return grouped_runs(rows, group_by)
    frame = pd.DataFrame(rows, columns=_columns(rows))
    frame["started"] = pd.to_datetime(frame["started"], utc=True)
    return frame


def _columns(rows: list[dict[str, Any]]) -> list[str]:
    """Return the key columns, then the config keys, then the metrics, in first-seen order."""
    seen = dict.fromkeys(name for row in rows for name in row)
    config = [name for name in seen if name.startswith("config.")]
    metrics = [name for name in seen if name not in KEY_COLUMNS and name not in config]
    return [*KEY_COLUMNS, *config, *metrics]
