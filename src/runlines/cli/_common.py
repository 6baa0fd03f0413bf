"""What the commands share: finding a run by its name, the cells of a table, JSON on stdout."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Final

from runlines import reading
from runlines._layout import is_log_name
from runlines.cli._terminal import printable
from runlines.errors import ReadError
from runlines.reading._files import check_source
from runlines.reading._lines import decode_line, open_log
from runlines.reading._rules import json_ready

__all__ = [
    "AmbiguousRunError",
    "cell",
    "duration",
    "logs_below",
    "plain",
    "print_json",
    "resolve_run",
    "resolve_source",
    "run_candidates",
    "table",
    "when",
]

_RUNS_DIR: Final = "runs"  # a bare run name not found here is looked up in runs/ too
_CANDIDATES: Final = 10  # an ambiguous run name's error lists this many of its logs
_HEAD_BYTES: Final = 1 << 16  # a run's name is read from its first line, up to this long


# --- finding runs ----------------------------------------------------------------------------


def resolve_run(text: str) -> Path:
    """Return the log of RUN *text*: a file, ``<text>.jsonl`` in the current folder or in
    runs/, or the log under the current folder that `ls -r` lists as *text*.

    Raises:
        ReadError: no such run, a name several logs have, a folder, or a FIFO, socket or
            device named like a log.
    """
    candidates = run_candidates(text)
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    path, named = candidates[:2]
    if path.is_dir():
        msg = f"{text} is a folder; pass one log file or run name (list them: runlines ls {text})"
        raise ReadError(msg, text)
    for candidate in candidates:
        if candidate.exists():
            check_source(candidate)  # the readers' rule: a FIFO would block, refuse it
    listed = _listed_as(text)
    if len(listed) == 1:
        return listed[0]
    if listed:
        shown = ", ".join(str(p) for p in listed[:_CANDIDATES])
        more = f" and {len(listed) - _CANDIDATES} more" if len(listed) > _CANDIDATES else ""
        msg = (
            f"run {text!r} is ambiguous: {len(listed)} logs under {Path.cwd()} are named so "
            f"({shown}{more}); pass the log file of the one you mean"
        )
        raise AmbiguousRunError(msg, text)
    msg = (
        f"no run {text!r}: there is no file {text}, and no {named} in {Path.cwd()}, in "
        f"{_RUNS_DIR}/ or in a subfolder; pass a log "
        "file, or a run name from the folder that holds its log (list them: runlines ls)"
    )
    raise ReadError(msg, text)


class AmbiguousRunError(ReadError):
    """A run name that several logs have: `tail -f` waits for no run then."""


def _listed_as(text: str) -> list[Path]:
    """Return the logs under the current folder that `ls -r` names *text*, by path.

    A log is named by its label where two folders hold runs of one name (`exp1/baseline`), by
    the run name its first record holds, and by its file name without `.jsonl` (a rank file's
    too: `ddp.rank1`). A label names one log, so it wins over the other names.
    """
    if not text or Path(text).is_absolute():
        return []
    logs = [reading.log_file(path) for path in logs_below(Path("."))]
    mains = [log for log in logs if log.rank is None]
    labels = reading.run_labels(mains)
    labelled = [log.path for log in mains if labels.get(log.path) == text]
    if labelled:
        return labelled
    named = {log.path for log in logs if log.path.name == f"{text}{reading.LOG_SUFFIX}"}
    named |= {log.path for log in mains if log.path not in labels and _run_name(log.path) == text}
    return sorted(named)


def _run_name(path: Path) -> str | None:
    """Return the run name the first record of *path* holds; None when it holds none."""
    try:
        with open_log(path) as stream:
            record = decode_line(stream.readline(_HEAD_BYTES))
    except (OSError, ReadError, ValueError):  # unreadable, or no record on the first line
        return None
    name = record.get("run")
    return name if isinstance(name, str) else None


def run_candidates(text: str) -> list[Path]:
    """Return where RUN *text* may be: the path, NAME.jsonl here, then in runs/."""
    path = Path(text)
    named = Path(f"{text}{reading.LOG_SUFFIX}")
    under_runs = [] if path.is_absolute() else [Path(_RUNS_DIR, named)]  # the Quick start's
    return [path, named, *under_runs]


def resolve_source(text: str) -> Path:
    """Return the folder *text* names, else the log of RUN *text* (`resolve_run`)."""
    return Path(text) if Path(text).is_dir() else resolve_run(text)


def logs_below(folder: Path) -> list[Path]:
    """Return every log file in *folder* and its subfolders, by path (what `ls -r` lists)."""
    found = folder.rglob(f"*{reading.LOG_SUFFIX}")
    return sorted(p for p in found if is_log_name(p.name) and p.is_file())


# --- formatting ------------------------------------------------------------------------------


def when(ts: float | None) -> str:
    """Return the local time of *ts* as ``YYYY-MM-DD HH:MM:SS``; ``-`` for none."""
    if ts is None:
        return "-"
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))
    except (OverflowError, OSError, ValueError):  # a ts no clock can show (1e20, NaN)
        return "-"


def duration(seconds: float | None) -> str:
    """Return *seconds* for people: ``12.3s``, ``4m05s``, ``2h07m``, ``3d04h``; ``-`` for none."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


def cell(value: Any) -> str:
    """Return a cell of a table: ``-`` for no value, ``nan``, ``inf`` and ``-inf`` as logged."""
    value = plain(value)
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (int, str)):
        return str(value)
    return json.dumps(value, default=str)


def plain(value: Any) -> Any:
    """Return a numpy or pandas scalar as a Python value: pd.NA and NaT (no record) as None,
    a NaN or an infinity as the float it is.
    """
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return None
    if hasattr(value, "item"):
        return value.item()
    return value


def table(header: Sequence[str], rows: Iterable[Sequence[str]], indent: str = "") -> str:
    """Return *rows* under *header* in aligned columns, numbers right-aligned, each cell
    `printable`.
    """
    rows = [[printable(text) for text in row] for row in (header, *rows)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    numeric = [all(_is_numeric(row[i]) for row in rows[1:]) for i in range(len(header))]
    lines = []
    for row in rows:
        cells = [
            c.rjust(w) if num else c.ljust(w)
            for c, w, num in zip(row, widths, numeric, strict=True)
        ]
        lines.append(indent + "  ".join(cells).rstrip())
    return "\n".join(lines)


def _is_numeric(text: str) -> bool:
    try:
        float(text.replace(",", ""))
    except ValueError:
        return text == "-"
    return True


def print_json(value: Any) -> None:
    """Print *value* as one line of strict JSON, non-finite floats named (`json_ready`)."""
    print(json.dumps(json_ready(value), default=str, allow_nan=False))
