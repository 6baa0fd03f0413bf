"""Capture of Python warnings and `logging` records into a run, restored exactly at the end.

`Capture` knows a callback, not `Run`: each shown warning becomes ``emit("warning", fields)``
and each captured log record ``emit("log", fields)``. See docs/integrations.md.
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TextIO, cast

from runlines import _warnings
from runlines.sinks import warn_stderr

__all__ = ["CAPTURE_CHOICES", "Capture", "CaptureSettings", "Emit", "parse_capture"]

Emit = Callable[[str, dict[str, object]], None]
"""Writes one record: the event name (`warning` or `log`) and its fields."""

CAPTURE_CHOICES: Final = ("warnings", "logging", "all")
"""The names `parse_capture` accepts, alone or in an iterable."""

_OWN_LOGGER: Final = "runlines"
_OWN_PREFIX: Final = "runlines."
_WARNINGS_LOGGER: Final = "py.warnings"  # where logging.captureWarnings(True) sends warnings
_ShowWarning = Callable[..., object]


@dataclass(frozen=True, slots=True)
class CaptureSettings:
    """What a run captures: shown warnings, and log records at or above a level (None: none)."""

    warnings: bool = True
    logging_level: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.warnings, bool):
            msg = f"CaptureSettings.warnings must be True or False, got {self.warnings!r}"
            raise TypeError(msg)
        if self.logging_level is not None:  # a level name ("INFO") becomes its number
            object.__setattr__(self, "logging_level", _check_level(self.logging_level))


def parse_capture(value: object, *, level: int | str = logging.WARNING) -> CaptureSettings:
    """Return the settings that `Run(..., capture=value)` asks for.

    *value* is True (warnings and log records, the default: "all"), False or None (nothing),
    "warnings", "logging", "all", an iterable of those names, or a `CaptureSettings`. *level* is
    the lowest level of the log records captured: a `logging` level number or name ("INFO").

    Raises:
        ValueError: *value* or *level* is none of those.
    """
    if isinstance(value, CaptureSettings):
        return value
    logging_level = _check_level(level)
    if value is True:
        return CaptureSettings(warnings=True, logging_level=logging_level)
    if value is False or value is None:
        return CaptureSettings(warnings=False)
    names = _capture_names(value)
    return CaptureSettings(
        warnings=bool(names & {"warnings", "all"}),
        logging_level=logging_level if names & {"logging", "all"} else None,
    )


def _capture_names(value: object) -> set[str]:
    if isinstance(value, str):
        items: list[object] = [value]
    elif isinstance(value, Iterable) and not isinstance(value, (bytes, Mapping)):
        items = list(value)
    else:
        items = [value]
    if any(item not in CAPTURE_CHOICES for item in items):
        msg = (
            "capture must be True, False, None, 'warnings', 'logging', 'all' or a list of "
            f"those names; got {value!r}"
        )
        raise ValueError(msg)
    return {str(item) for item in items}


def _check_level(level: object) -> int:
    if isinstance(level, str):
        number = logging.getLevelName(level.upper())
        if isinstance(number, int):
            return number
    elif isinstance(level, int) and not isinstance(level, bool) and level >= 0:
        return level
    msg = (
        f"the capture level must be a logging level number or name (DEBUG, INFO, WARNING, "
        f"ERROR, CRITICAL), got {level!r}"
    )
    raise ValueError(msg)


class _Emitting(threading.local):
    """Whether this thread is inside a capture's emit: what it raises is not captured again."""

    active = False


_emitting = _Emitting()
_lock = threading.Lock()  # guards the swaps of warnings.showwarning and Logger.callHandlers
_log_captures: tuple[_LogCapture, ...] = ()  # replaced whole: a logging thread sees old or new
_call_handlers: Callable[[logging.Logger, logging.LogRecord], None] | None = None  # logging's own


class Capture:
    """Record shown warnings and log records through *emit* between `install` and `restore`.

    Warnings still reach the previous `warnings.showwarning` (stderr, by default) and log
    records the logging handlers that were there before; the once-per-location rule of the
    warnings filters holds, since only warnings the filters let through are shown. Log records
    are seen where a logger hands them to its handlers (`Logger.callHandlers`), so no handler
    is added to any logger: `logging.basicConfig()`, `hasHandlers()` and logging's last resort
    behave as without runlines, and nothing prints twice.
    """

    def __init__(self, settings: CaptureSettings, emit: Emit) -> None:
        self.settings = settings
        self._emit = emit
        self._hook: _WarningHook | None = None
        self._handler: _LogCapture | None = None

    def install(self) -> None:
        """Start capturing; a second call before `restore` does nothing."""
        with _lock:
            if self.settings.warnings and self._hook is None:
                self._hook = _WarningHook(self._emit, _live_link(warnings.showwarning))
                warnings.showwarning = self._hook
            level = self.settings.logging_level
            if level is not None and self._handler is None:
                self._handler = _LogCapture(self._emit, level, skip_warnings=self.settings.warnings)
                _add_log_capture(self._handler)

    def restore(self) -> None:
        """Stop capturing and put back what `install` replaced; restoring twice does nothing.

        `warnings.showwarning` gets back the function it had, unless something installed
        after this capture replaced it since: then that is left in place, and this capture's
        link in the chain only passes warnings on.
        """
        with _lock:
            handler, self._handler = self._handler, None
            if handler is not None:
                _remove_log_capture(handler)
            hook, self._hook = self._hook, None
            if hook is None:
                return
            hook.live = False
            if warnings.showwarning is hook:
                warnings.showwarning = cast(Any, _live_link(hook.previous))


def _live_link(showwarning: _ShowWarning) -> _ShowWarning:
    """Return *showwarning*, past any restored capture hooks that only pass warnings on."""
    while isinstance(showwarning, _WarningHook) and not showwarning.live:
        showwarning = showwarning.previous
    return showwarning


def _emit_guarded(emit: Emit, event: str, fields: dict[str, object]) -> None:
    """Call *emit* with the thread's guard up; a failure is reported, never raised."""
    _emitting.active = True
    try:
        emit(event, fields)
    except Exception as err:  # a warnings.warn() or a log call must never fail over the log
        _report(f"could not record a {event} record in the run ({err!r})")
    finally:
        _emitting.active = False


def _report(message: str) -> None:
    warn_stderr(message)


class _WarningHook:
    """One capture's `warnings.showwarning`: emit a `warning` record, then pass it on."""

    __slots__ = ("_emit", "live", "previous")

    def __init__(self, emit: Emit, previous: _ShowWarning) -> None:
        self._emit = emit
        self.previous = previous
        self.live = True  # False after restore(): a link left in someone else's chain

    def __call__(
        self,
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        if self.live and not _emitting.active:
            fields: dict[str, object] = {
                "category": getattr(category, "__name__", str(category)),
                "message": str(message),
                "filename": filename,
                "lineno": lineno,
            }
            _emit_guarded(self._emit, "warning", fields)
            if _warnings.console_shows(category):
                return  # the run's pretty console showed it as a line: once, never twice
        self.previous(message, category, filename, lineno, file, line)


def _captured_call_handlers(logger: logging.Logger, record: logging.LogRecord) -> None:
    """Logger.callHandlers while a capture is on: logging's handlers, then each capture."""
    original = _call_handlers
    try:
        if original is not None:
            original(logger, record)
    finally:
        for capture in _log_captures:
            capture.handle(record)


def _add_log_capture(capture: _LogCapture) -> None:
    """Start passing log records to *capture* (the caller holds _lock)."""
    global _log_captures, _call_handlers
    _log_captures = (*_log_captures, capture)
    if logging.Logger.callHandlers is not _captured_call_handlers:
        _call_handlers = logging.Logger.callHandlers
        logging.Logger.callHandlers = _captured_call_handlers  # type: ignore[method-assign,assignment]


def _remove_log_capture(capture: _LogCapture) -> None:
    """Stop passing log records to *capture*; the last one puts logging's own method back,
    unless something replaced it since (then ours stays in that chain, passing records on)."""
    global _log_captures
    _log_captures = tuple(c for c in _log_captures if c is not capture)
    if not _log_captures and logging.Logger.callHandlers is _captured_call_handlers:
        logging.Logger.callHandlers = _call_handlers  # type: ignore[method-assign,assignment]


class _LogCapture:
    """Emit `log` records for the log records at or above a level, but not runlines' own."""

    def __init__(self, emit: Emit, level: int, *, skip_warnings: bool) -> None:
        self._emit = emit
        self._capture_level = level
        # With logging.captureWarnings(True), a warning is already a `warning` record.
        self._skip = (_WARNINGS_LOGGER,) if skip_warnings else ()
        self._formatter = logging.Formatter()

    def handle(self, record: logging.LogRecord) -> None:
        if not self._should_capture(record):
            return
        try:
            fields = self._fields(record)
        except Exception as err:  # a message whose % formatting fails: logging reports it too
            _report(f"could not record a log record in the run ({err!r})")
        else:
            _emit_guarded(self._emit, "log", fields)

    def _should_capture(self, record: logging.LogRecord) -> bool:
        name = record.name
        return (
            record.levelno >= self._capture_level
            and not _emitting.active
            and name not in self._skip
            and name != _OWN_LOGGER
            and not name.startswith(_OWN_PREFIX)
        )

    def _fields(self, record: logging.LogRecord) -> dict[str, object]:
        fields: dict[str, object] = {
            "logger": record.name,
            "level": record.levelname,
            "message": record.getMessage(),
        }
        if record.exc_info:
            fields["exc_text"] = self._formatter.formatException(record.exc_info)
        return fields
