"""The live-at-source marker: a synced log's word that its run was alive where it runs.

A copy holds no lock that a writer holds, so a run with no `run_end` would read `died` there
while it still runs. Each pass of `sync` that finds a log's lock held at the source writes,
beside the log's copy, `<log>.live` (JSON: `format`, the source's `host`, the `pid` of the
sync that looked, the `source` log, the time of the pass `ts` and `expires`, both seconds
since the epoch on the source's clock), and removes it once the run's last lines are there.
The readers take a fresh marker for a held lock (`reading._files.is_locked`); an expired one
(its watcher stopped looking) counts for nothing, and the run reads `died`.

Clocks: `expires` is the source's; the reader compares it with its own clock, with
`CLOCK_SKEW_S` of slack either way (docs/sync.md).
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any, Final

from runlines._layout import open_regular

__all__ = [
    "CLOCK_SKEW_S",
    "LIVE_FOR_S",
    "LIVE_SUFFIX",
    "fresh_marker",
    "is_fresh",
    "live_at_source",
    "live_path",
    "marker",
    "read_marker",
]

LIVE_SUFFIX: Final = ".live"
LIVE_FOR_S: Final = 15.0  # a marker's life: three passes of `sync --watch` at its default 5 s
# How far apart the source's clock and a reader's may be: a marker is fresh from `ts` minus
# this up to `expires` plus this, on the reader's clock.
CLOCK_SKEW_S: Final = 60.0
_FORMAT: Final = 1
_MAX_BYTES: Final = 4096  # a marker is one short line; more is no marker


def live_path(log: str | os.PathLike[str]) -> Path:
    """Return the live-at-source marker beside the copy of *log*: `<log>.live`."""
    path = Path(log)
    return path.with_name(path.name + LIVE_SUFFIX)


def marker(source: str, live_for_s: float, now: float | None = None) -> bytes:
    """Return the marker that says log *source* is live here now, for *live_for_s* seconds."""
    now = time.time() if now is None else now
    fields = {
        "format": _FORMAT,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "source": source,
        "ts": now,
        "expires": now + live_for_s,
    }
    return json.dumps(fields, sort_keys=True).encode() + b"\n"


def _fields(data: bytes) -> dict[str, Any] | None:
    """Return marker *data*'s fields, or None when it is no marker `marker` wrote."""
    try:
        fields: Any = json.loads(data)
    except ValueError:  # no marker `marker` wrote: a write is whole (temp + rename)
        return None
    if not isinstance(fields, dict):
        return None
    ts, expires = fields.get("ts"), fields.get("expires")
    if not isinstance(ts, (int, float)) or not isinstance(expires, (int, float)):
        return None
    if isinstance(ts, bool) or isinstance(expires, bool):
        return None
    return fields


def _holds(fields: dict[str, Any], now: float | None) -> bool:
    now = time.time() if now is None else now
    return bool(fields["ts"] - CLOCK_SKEW_S <= now <= fields["expires"] + CLOCK_SKEW_S)


def is_fresh(data: bytes, now: float | None = None) -> bool:
    """Return whether marker *data* holds at *now* (default: this clock), skew allowed for."""
    fields = _fields(data)
    return fields is not None and _holds(fields, now)


def read_marker(log: str | os.PathLike[str]) -> bytes | None:
    """Return the bytes of the marker beside *log*, or None when there is none."""
    try:
        with open_regular(live_path(log)) as file:
            data: bytes = file.read(_MAX_BYTES + 1)
    except OSError:  # none (the common case), or no regular file
        return None
    return data if len(data) <= _MAX_BYTES else None


def fresh_marker(log: str | os.PathLike[str], now: float | None = None) -> dict[str, Any] | None:
    """Return the fields of the fresh marker beside *log* (host, pid, ts, ...), or None."""
    data = read_marker(log)
    fields = None if data is None else _fields(data)
    return fields if fields is not None and _holds(fields, now) else None


def live_at_source(log: str | os.PathLike[str], now: float | None = None) -> bool:
    """Return whether *log* is a copy whose run a fresh marker says is live at its source."""
    return fresh_marker(log, now) is not None
