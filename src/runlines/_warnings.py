"""Warnings that point at the user's call, however deep inside runlines they are raised, and
shown once: by a run's pretty console, or by Python's warnings, never both; and the lines a run
says on stderr."""

from __future__ import annotations

import os
import sys
import warnings

__all__ = ["console_shows", "say", "shown_on_console", "warn_user"]

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_OWN_CATEGORIES = frozenset({"FieldDriftWarning", "NonfiniteWarning"})
_consoles = [0]  # open runs whose pretty console shows their captured warnings


def shown_on_console(delta: int) -> None:
    """Count a run whose pretty console shows its captured warnings (+1 at open, -1 at close)."""
    _consoles[0] = max(0, _consoles[0] + delta)


def console_shows(category: type[Warning]) -> bool:
    """Whether a warning of *category* is runlines' own and a pretty console shows it as a
    line: then Python's warnings do not show it too (it would also tear the status line)."""
    return _consoles[0] > 0 and getattr(category, "__name__", "") in _OWN_CATEGORIES


def warn_user(message: str, category: type[Warning]) -> None:
    """Warn with the stack level of the first frame outside runlines (the user's call)."""
    level = 2  # warn_user's caller
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    warnings.warn(message, category, stacklevel=level)


def say(message: str) -> None:
    """Print one line for the user on stderr."""
    try:
        print(f"runlines: {message}", file=sys.stderr, flush=True)
    except (OSError, ValueError, AttributeError):
        pass  # no stderr: the attempt number is in run_start anyway
