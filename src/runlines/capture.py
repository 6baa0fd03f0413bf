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

    *value* is True (warnings, the default), False or None (nothing), "warnings", "logging",
    "all", an iterable of those names, or a `CaptureSettings`. *level* is the lowest level of
    the log records captured: a `logging` level number or name ("INFO").

    Raises:
        ValueError: *value* or *level* is none of those.
    """
    if isinstance(value, CaptureSettings):
        return value
    logging_level = _check_level(level)
    if value is True:
        return CaptureSettings(warnings=True)
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
_lock = threading.Lock()  # guards the swaps of warnings.showwarning


class Capture:
    """Record shown warnings and log records through *emit* between `install` and `restore`.

    Warnings still reach the previous `warnings.showwarning` (stderr, by default) and log
    records the logging handlers that were there before; the once-per-location rule of the
    warnings filters holds, since only warnings the filters let through are shown.
    """

    def __init__(self, settings: CaptureSettings, emit: Emit) -> None:
        self.settings = settings
        self._emit = emit
        self._hook: _WarningHook | None = None
        self._handler: _LogHandler | None = None

    def install(self) -> None:
        """Start capturing; a second call before `restore` does nothing."""
        with _lock:
            if self.settings.warnings and self._hook is None:
                self._hook = _WarningHook(self._emit, _live_link(warnings.showwarning))
                warnings.showwarning = self._hook
        level = self.settings.logging_level
        if level is not None and self._handler is None:
            self._handler = _LogHandler(self._emit, level, skip_warnings=self.settings.warnings)
            logging.getLogger().addHandler(self._handler)

    def restore(self) -> None:
        """Stop capturing and put back what `install` replaced; restoring twice does nothing.

        `warnings.showwarning` gets back the function it had, unless something installed
        after this capture replaced it since: then that is left in place, and this capture's
        link in the chain only passes warnings on.
        """
        handler, self._handler = self._handler, None
        if handler is not None:
            logging.getLogger().removeHandler(handler)
        with _lock:
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
    from runlines.sinks import warn_stderr  # not at import: sinks is on the run's side

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
        self.previous(message, category, filename, lineno, file, line)


class _LogHandler(logging.Handler):
    """A root-logger handler that emits `log` records; the other handlers work as before."""

    def __init__(self, emit: Emit, level: int, *, skip_warnings: bool) -> None:
        # Level NOTSET: the handler sees every record, to stand in for logging's last resort
        # (below); it captures only those at or above *level*.
        super().__init__(logging.NOTSET)
        self._emit = emit
        self._capture_level = level
        # With logging.captureWarnings(True), a warning is already a `warning` record.
        self._skip = (_WARNINGS_LOGGER,) if skip_warnings else ()
        self._formatter = logging.Formatter()

    def emit(self, record: logging.LogRecord) -> None:
        if self._should_capture(record):
            try:
                fields = self._fields(record)
            except Exception:
                self.handleError(record)
            else:
                _emit_guarded(self._emit, "log", fields)
        self._stand_in_for_last_resort(record)

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

    def _stand_in_for_last_resort(self, record: logging.LogRecord) -> None:
        """Hand *record* to `logging.lastResort` when logging would have without this handler.

        Logging prints to stderr through its last resort only when no handler at all is on a
        record's way up; this handler must not silence what users saw before.
        """
        last_resort = logging.lastResort
        if (
            last_resort is not None
            and record.levelno >= last_resort.level
            and _is_only_capture_on_path(record.name, self)
        ):
            last_resort.handle(record)


def _is_only_capture_on_path(name: str, ours: _LogHandler) -> bool:
    """Return True when only capture handlers, *ours* first, are on logger *name*'s way up."""
    logger: Any = logging.Logger.manager.loggerDict.get(name)
    if not isinstance(logger, logging.Logger):
        logger = logging.getLogger()  # a record of the root logger, or made by hand
    first = None
    while logger is not None:
        for handler in logger.handlers:
            if not isinstance(handler, _LogHandler):
                return False
            if first is None:
                first = handler
        logger = logger.parent if logger.propagate else None
    return first is ours
