"""A run's captured console read back: `console()` (docs/console.md), and the side file's lines.

`Run(..., console_capture=True)` writes `<name>.console.log` next to the log, one line
`<ts> <out|err> <text>` per printed line. `read_console` reads it; `console` answers "what was
printed at step N": the lines stamped from that step's record to the next step's record.
"""

from __future__ import annotations

import math
import os
from collections import deque
from pathlib import Path
from typing import Any, NamedTuple

from runlines import _layout
from runlines.errors import ReadError
from runlines.reading._files import LOG_SUFFIX, find_logs
from runlines.reading._lines import iter_events
from runlines.reading._rules import as_attempt, event_names, is_number

__all__ = ["ConsoleLine", "console", "parse_line", "read_console"]


class ConsoleLine(NamedTuple):
    """One line of a console side file: when it was printed, on which stream, and its text."""

    ts: float
    stream: str  # "out" (descriptor 1) or "err" (descriptor 2); "" for a line that did not parse
    text: str


def read_console(path: str | os.PathLike[str], last: int | None = None) -> list[ConsoleLine]:
    """Return the lines of console side file *path* (the *last* ones only when given).

    A line that does not parse (the file's torn end, a foreign file) is kept whole as text.
    """
    with open(path, "rb") as file:
        lines = deque(file, maxlen=last) if last is not None else list(file)
    return [parse_line(raw) for raw in lines]


def parse_line(raw: bytes) -> ConsoleLine:
    """Return a side file's line `<ts> <out|err> <text>` as a ConsoleLine."""
    text = raw.rstrip(b"\n").decode("utf-8", "replace")
    ts, _, rest = text.partition(" ")
    stream, _, printed = rest.partition(" ")
    try:
        stamp = float(ts)
    except ValueError:
        stamp = math.nan
    if stream not in ("out", "err") or stamp != stamp:
        return ConsoleLine(math.nan, "", text)
    return ConsoleLine(stamp, stream, printed)


def console(
    source: str | os.PathLike[str],
    *,
    step: int | None = None,
    event: str | None = None,
    attempt: int | None = None,
) -> list[ConsoleLine]:
    """Return what a run printed (*source*: its log, or a folder of one run): all, or a step's.

    A rank's own log gives that rank's console.

    With *step*, the lines stamped from the first record of that step (of *event* when given)
    to the next record of another step (of *event*), or to the attempt's end: "what was
    printed at step N". Stamps are compared to the millisecond the side file keeps. The step
    is looked up in *attempt* (a number, as `run_start` records it), by default in the last
    attempt that logged it (the one `load()` keeps after a resume). With *attempt* alone,
    that attempt's lines; with neither, the whole file.

    Raises:
        ReadError: no log, a folder of several runs, a run without a console side file, or
            no record of *step* (*event*, *attempt*).
    """
    log = _one_log(source)
    side = _layout.console_path(log)
    if not side.exists():
        msg = f"run {log.name!r} has no captured console ({side} is missing); "
        msg += "open the run with Run(..., console_capture=True)"
        raise ReadError(msg, str(side))
    lines = read_console(side)
    if step is None and attempt is None:
        return lines
    start, end = _window(log, step, event, attempt)
    low, high = round(start, 3), round(end, 3) if math.isfinite(end) else math.inf
    return [line for line in lines if low <= line.ts < high]


def _one_log(source: str | os.PathLike[str]) -> Path:
    logs = find_logs(source)
    if len(logs) > 1:  # a folder: its runs' main logs (a rank's own log is passed as a file)
        logs = [log for log in logs if not log.rank]
    if len(logs) != 1:
        names = ", ".join(sorted(log.path.name for log in logs)) or "none"
        msg = f"console() reads one run; {source} holds {len(logs)} ({names}): pass one log file"
        raise ReadError(msg, str(source))
    path = logs[0].path
    if not path.name.endswith(LOG_SUFFIX):
        msg = f"{path} is not a runlines log ({LOG_SUFFIX}); pass the run's log file"
        raise ReadError(msg, str(path))
    return path


def _window(
    log: Path, step: int | None, event: str | None, attempt: int | None
) -> tuple[float, float]:
    """Return (from, to) in Unix seconds: the step's records' span, or the attempt's."""
    wanted = event_names(event)
    number = 0
    attempts: list[int] = []  # each attempt's number, in order
    bounds: dict[int, list[float]] = {}  # attempt -> [first ts, next attempt's first ts]
    found: dict[int, list[float]] = {}  # attempt -> [step's first ts, next step's first ts]
    for record in iter_events(log):
        ts = record.get("ts")
        if not is_number(ts):
            continue
        if record.get("event") == "run_start":
            own = as_attempt(record.get("attempt"))
            number = own if own is not None else number + 1
            if attempts:
                bounds[attempts[-1]][1] = min(bounds[attempts[-1]][1], float(ts))
                _close(found, attempts[-1], float(ts))
            attempts.append(number)
            bounds.setdefault(number, [float(ts), math.inf])
            continue
        if step is None or (wanted is not None and record.get("event") not in wanted):
            continue
        own_step = record.get("step")
        if not is_number(own_step):
            continue
        if own_step == step and number not in found:
            found[number] = [float(ts), math.inf]
        elif own_step != step and number in found:
            _close(found, number, float(ts))
    if step is None:
        if attempt not in bounds:
            msg = f"{log} has no attempt {attempt}; it has {attempts or 'none'}"
            raise ReadError(msg, str(log))
        first, last = bounds[attempt]
        return first, last
    chosen = attempt if attempt is not None else (max(found, key=attempts.index) if found else None)
    if chosen not in found:
        of = f" of event {event!r}" if event is not None else ""
        within = f" in attempt {attempt}" if attempt is not None else ""
        msg = f"{log} has no record of step {step}{of}{within}; runlines.load() lists its steps"
        raise ReadError(msg, str(log))
    first, last = found[chosen]
    return first, last


def _close(found: dict[int, list[float]], number: int, ts: float) -> None:
    """End the step's window of attempt *number* at *ts*, unless an earlier record ended it."""
    window: Any = found.get(number)
    if window is not None and math.isinf(window[1]):
        window[1] = ts
