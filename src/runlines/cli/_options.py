"""Argument types of the commands' number options: a port, seconds between refreshes.

Each is an argparse `type`: a value out of range is a usage error (`runlines X: error:
argument --port: ...`, exit status 2) that names the range, never a traceback.
"""

from __future__ import annotations

import argparse
import math
from typing import Final

__all__ = ["MAX_SECONDS", "MIN_SECONDS", "port", "seconds"]

MIN_SECONDS: Final = 0.05
MAX_SECONDS: Final = 3600.0
_MAX_PORT: Final = 65535


def port(text: str) -> int:
    """Return *text* as a TCP port, 0 to 65535 (0: the system picks a free one)."""
    try:
        value = int(text.strip())
    except ValueError:
        value = -1
    if not 0 <= value <= _MAX_PORT:
        msg = f"expected a port number from 0 to {_MAX_PORT} (0 picks a free one), got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


def seconds(text: str) -> float:
    """Return *text* as seconds between refreshes or polls, 0.05 to 3600."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not MIN_SECONDS <= value <= MAX_SECONDS:  # NaN is in no range
        msg = f"expected seconds between {MIN_SECONDS:g} and {MAX_SECONDS:g}, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value
