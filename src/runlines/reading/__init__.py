"""Read logs back: `iter_events` (stdlib), `load`, `compare` and `runs` (pandas), and the engines.

One module per concept: `_files` (which files make up a run), `_lines` (decoding lines),
`_follow` (following a growing file), `_rules` (attempts, superseded records, event filters,
bookkeeping: what every engine and view shares), `_columnar` (the pyarrow engine), `_copies`
(the Parquet copy of a finished log), `_frames` (load, compare), `_summary` (a run's model:
its table row and attempts), `_table` (runs), `_diff` (diff), `_media` (media, histograms),
`_duckdb` (SQL), `_spark` and `_console` (a run's captured console).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runlines.reading._console import ConsoleLine, console, read_console
    from runlines.reading._diff import MetricDiff, RunDiff, diff
    from runlines.reading._files import (
        LOG_SUFFIX,
        LogFile,
        find_logs,
        is_locked,
        lock_path,
        log_file,
        run_labels,
        sha256_of,
    )
    from runlines.reading._follow import LogFollower
    from runlines.reading._frames import compare, load, numeric_fields
    from runlines.reading._lines import (
        decode_line,
        head_record,
        iter_events,
        last_records,
        lines_containing,
        skipped_lines_message,
    )
    from runlines.reading._media import histograms, media
    from runlines.reading._rules import AGGREGATIONS
    from runlines.reading._summary import RunSummary, attempt_count, lifecycle, run_status
    from runlines.reading._table import runs

__all__ = [
    "AGGREGATIONS",
    "LOG_SUFFIX",
    "ConsoleLine",
    "LogFile",
    "LogFollower",
    "MetricDiff",
    "RunDiff",
    "RunSummary",
    "attempt_count",
    "compare",
    "console",
    "decode_line",
    "diff",
    "find_logs",
    "head_record",
    "histograms",
    "is_locked",
    "iter_events",
    "last_records",
    "lifecycle",
    "lines_containing",
    "load",
    "lock_path",
    "log_file",
    "media",
    "numeric_fields",
    "read_console",
    "run_labels",
    "run_status",
    "runs",
    "sha256_of",
    "skipped_lines_message",
]

# Each name is imported from its module on first use: `load` of a finished run then pays for
# the modules it runs, not for `diff`'s or `runs`' (a fresh process's import is part of a read).
_HOMES = {
    **dict.fromkeys(("ConsoleLine", "console", "read_console"), "_console"),
    **dict.fromkeys(("MetricDiff", "RunDiff", "diff"), "_diff"),
    **dict.fromkeys(
        ("LOG_SUFFIX", "LogFile", "find_logs", "is_locked", "lock_path", "log_file",
         "run_labels", "sha256_of"),
        "_files",
    ),
    **dict.fromkeys(("compare", "load", "numeric_fields"), "_frames"),
    **dict.fromkeys(
        ("decode_line", "head_record", "iter_events", "last_records", "lines_containing",
         "skipped_lines_message"),
        "_lines",
    ),
    "LogFollower": "_follow",
    **dict.fromkeys(("histograms", "media"), "_media"),
    "AGGREGATIONS": "_rules",
    **dict.fromkeys(("RunSummary", "attempt_count", "lifecycle", "run_status"), "_summary"),
    "runs": "_table",
}  # fmt: skip


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        msg = f"module 'runlines.reading' has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(f"runlines.reading.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
