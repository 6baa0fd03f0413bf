"""The pretty console made for training: hot events on one status line, the rest as lines.

On a terminal, `Run(..., console="auto")` shows hot events (every event but lifecycle, eval,
alarms, warnings and logs, or those named by `console_events=`) on one status line that
rewrites itself, with steps per second; with `console_every=N`, as one line every N seconds
instead. Other records print as lines. Lines are written around tqdm bars (tqdm's own
`external_write_mode`) and through a replaced `sys.stdout` (rich's live display), so neither
is torn. The log file and JSON stdout keep every record. See docs/watching.md.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final

import orjson

from runlines import _layout
from runlines._encoding import format_console, restore_nonfinite
from runlines.sinks import StdoutSink

__all__ = ["LINE_EVENTS", "ConsoleOptions", "TrainingConsole"]

LINE_EVENTS: Final = frozenset(
    {
        _layout.RUN_START,
        _layout.RUN_END,
        _layout.SIGNAL,
        _layout.WARNING,
        _layout.LOG,
        _layout.ARTIFACT,
        _layout.NONFINITE,
        _layout.STALL,
        _layout.STALL_END,
    }
)
"""Events that always print as lines (with `console_events=None`), as do `eval*` events."""
_LINE_PREFIXES: Final = ("eval", "val", "test")
_REFRESH_S: Final = 0.1  # the status line redraws at most this often
_BARS_EVERY_S: Final = 10.0  # with a tqdm bar open, hot events print a line this often
_RATE_WINDOW_S: Final = 1.0  # steps per second are measured over at least this long
_CLEAR: Final = "\r\x1b[K"  # to column 0, erase to the end of the line
# Hot events runlines writes itself: on the status line after the user's own events.
_OWN_HOT: Final = frozenset({_layout.SPAN, _layout.SYSTEM})
_SHORT_HASH: Final = 12  # hex digits of an artifact's sha256 on its console line
# Said by the `nonfinite` line just before: its captured warning would say it twice.
_SAID_BEFORE: Final = frozenset({"NonfiniteWarning"})


class ConsoleOptions:
    """`console_every` (seconds, None: a status line) and `console_events` (None: automatic)."""

    def __init__(self, every_s: float | None, events: frozenset[str] | None) -> None:
        self.every_s = every_s
        self.events = events

    @classmethod
    def of(cls, every: object, events: object) -> ConsoleOptions:
        """Check `Run(console_every=..., console_events=...)`; raise with the fix."""
        if every is not None and (
            not isinstance(every, (int, float)) or isinstance(every, bool) or every <= 0
        ):
            msg = f"console_every must be seconds above 0, or None (a status line); got {every!r}"
            raise ValueError(msg)
        chosen: frozenset[str] | None = None
        if events is not None:
            if isinstance(events, str) or not isinstance(events, Iterable):
                msg = (
                    "console_events must be a list of event names, e.g. ['train_step'], "
                    f"or None; got {events!r}"
                )
                raise TypeError(msg)
            chosen = frozenset(str(event) for event in events)
        return cls(None if every is None else float(every), chosen)

    def make(self, sink: StdoutSink) -> TrainingConsole:
        """Return the console that writes to *sink*'s terminal."""
        return TrainingConsole(sink, self)


class _Hot:
    """What the console keeps of a hot event: its last record and its rate."""

    def __init__(self, now: float) -> None:
        self.record: dict[str, Any] = {}
        self.count = 0
        self.mark = (now, 0.0)  # (time, steps or records) at the start of the rate window
        self.rate: float | None = None
        self.unshown = False
        self.seq = 0  # when its last record came, in the console's order of records

    def update(self, record: dict[str, Any], now: float, seq: int) -> None:
        self.record = record
        self.seq = seq
        self.count += 1
        self.unshown = True
        step = record.get("step")
        done = float(step) if isinstance(step, (int, float)) else float(self.count)
        since, then = self.mark
        if now - since >= _RATE_WINDOW_S:
            if done > then and self.count > 1:
                self.rate = (done - then) / (now - since)
            self.mark = (now, done)


class TrainingConsole:
    """Show encoded lines on a terminal: hot events summarised, the others as lines."""

    def __init__(
        self,
        sink: StdoutSink,
        options: ConsoleOptions,
        *,
        clock: Callable[[], float] = time.monotonic,
        width: Callable[[], int] | None = None,
    ) -> None:
        self._sink = sink
        self._options = options
        self._clock = clock
        self._width = width or _terminal_width
        self._hot: dict[str, _Hot] = {}
        self._status = ""  # the status line on screen, "" when none
        self._drawn = float("-inf")  # when the status line or the last summary was drawn
        self._lock = threading.Lock()  # the watcher thread shows its records too
        self._pid = os.getpid()
        self._seq = 0  # records shown so far

    def show(self, line: bytes) -> None:
        """Show one encoded record."""
        if os.getpid() != self._pid:  # a forked child: the lock may have been held at the fork
            self._lock, self._pid = threading.Lock(), os.getpid()
        with self._lock:
            self._show(line)

    def _show(self, line: bytes) -> None:
        record = restore_nonfinite(orjson.loads(line))
        event = str(record.get("event", ""))
        self._seq += 1
        if not self._is_hot(event):
            if event == "run_end":
                self._summarise(final=True)
            elif event == _layout.WARNING and record.get("category") in _SAID_BEFORE:
                return
            if event == _layout.ARTIFACT:  # a short hash, and cut to the width: never wraps
                text = format_console(_short_hash(record)).rstrip("\n")
                self._print(text[: max(20, self._width() - 1)] + "\n")
            else:
                self._print(format_console(record))
            return
        now = self._clock()
        hot = self._hot.get(event)
        if hot is None:
            hot = self._hot[event] = _Hot(now)
            if event not in _OWN_HOT:  # the user's hot events lead the status line
                own = [name for name in self._hot if name in _OWN_HOT]
                for name in own:
                    self._hot[name] = self._hot.pop(name)
        hot.update(record, now, self._seq)
        every = self._every_s()
        if every is None:
            if now - self._drawn >= _REFRESH_S:
                self._draw_status(now)
        else:
            if self._status:  # a bar opened, or rich took stdout: no status line from now
                self._write(_CLEAR)
                self._status = ""
            if now - self._drawn >= every:
                self._summarise(final=False)

    def _is_hot(self, event: str) -> bool:
        if self._options.events is not None:
            return event in self._options.events
        return event not in LINE_EVENTS and not event.startswith(_LINE_PREFIXES)

    def _every_s(self) -> float | None:
        """Seconds between summary lines, or None for the status line."""
        if self._options.every_s is not None:
            return self._options.every_s
        if _open_bars() or not _plain_terminal():
            return _BARS_EVERY_S  # a bar owns the last line, or rich buffers up to a newline
        return None

    def _segments(self) -> str:
        parts = []
        for hot in self._hot.values():
            text = format_console(hot.record).rstrip("\n")
            if hot.rate is not None:
                unit = "steps/s" if "step" in hot.record else "records/s"
                text += f" | {hot.rate:.3g} {unit}"
            parts.append(text)
        return "  ||  ".join(parts)

    def _draw_status(self, now: float) -> None:
        self._drawn = now
        width = max(20, self._width() - 1)  # never wrap: a wrapped line cannot be rewritten
        text = self._segments()[:width]
        self._write(_CLEAR + text)
        self._status = text
        for hot in self._hot.values():
            hot.unshown = False

    def _summarise(self, *, final: bool) -> None:
        """Leave the hot events' last values as lines (every N seconds, and at run_end)."""
        self._drawn = self._clock()
        if final and self._status:
            width = max(20, self._width() - 1)
            self._write(_CLEAR + self._segments()[:width] + "\n")  # the last values stay
            self._status = ""
            return
        for hot in sorted(self._hot.values(), key=lambda hot: hot.seq):  # in time order
            if hot.unshown:
                hot.unshown = False
                text = format_console(hot.record).rstrip("\n")
                if hot.rate is not None:
                    unit = "steps/s" if "step" in hot.record else "records/s"
                    text += f" | {hot.rate:.3g} {unit}"
                self._print(text + "\n")

    def _print(self, text: str) -> None:
        """Print a whole line: under the status line's place, around any tqdm bar."""
        with _bars_aside():
            if self._status:
                self._write(_CLEAR + text + self._status)
            else:
                self._write(text)

    def _write(self, text: str) -> None:
        stdout = sys.stdout
        if stdout is not None and stdout is not self._sink.stream:
            self._sink.stream = stdout  # print()'s stream: rich's live display replaces it
        self._sink.write_text(text)


def _short_hash(record: dict[str, Any]) -> dict[str, Any]:
    """Return an artifact record as its line shows it, short enough not to wrap: the sha256
    cut short, the path without the run's `<name>.artifacts/` folder."""
    shown = dict(record)
    sha256 = shown.get("sha256")
    if isinstance(sha256, str) and len(sha256) > _SHORT_HASH:
        shown["sha256"] = sha256[:_SHORT_HASH]
    path = shown.get("path")
    if isinstance(path, str):
        folder, slash, rest = path.partition("/")
        if slash and folder.endswith(_layout.ARTIFACTS_SUFFIX) and rest:
            shown["path"] = rest
    return shown


def _terminal_width() -> int:
    import shutil  # on the first status line, not when a run opens

    return shutil.get_terminal_size().columns


def _open_bars() -> bool:
    """Whether a tqdm bar is open in this process (tqdm is looked at, never imported)."""
    tqdm_module = sys.modules.get("tqdm")
    bars = getattr(getattr(tqdm_module, "tqdm", None), "_instances", None)
    try:
        return bool(bars)
    except Exception:  # an odd tqdm: behave as if a bar were open
        return True


def _plain_terminal() -> bool:
    """Whether sys.stdout writes straight to the terminal (not rich's line-buffering proxy)."""
    return type(sys.stdout).__module__.split(".")[0] != "rich"


@contextlib.contextmanager
def _bars_aside() -> Iterator[None]:
    """Clear open tqdm bars while a line prints, and draw them again after it."""
    tqdm_module = sys.modules.get("tqdm")
    tqdm_class = getattr(tqdm_module, "tqdm", None)
    if tqdm_class is None or not _open_bars():
        yield
        return
    with tqdm_class.external_write_mode():
        yield
