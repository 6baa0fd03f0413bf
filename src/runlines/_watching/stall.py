"""Stalls seen from inside a run: nothing logged for `stall_after` seconds.

`StallWatch` compares how far the log file has grown, which the write path keeps anyway (the
file's size), so `log()` pays nothing for it. See docs/watching.md.
"""

from __future__ import annotations

import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Final

__all__ = ["StallWatch", "check_stall_after", "dump_stacks"]

_MIN_CHECK_S: Final = 0.05
_MAX_CHECK_S: Final = 5.0


def check_stall_after(value: object) -> float | None:
    """Return *value* as seconds, None for off; raise on anything else."""
    if value is None or value is False:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value)
    msg = f"stall_after must be a number of seconds above 0, or None (off); got {value!r}"
    raise ValueError(msg)


class StallWatch:
    """Call *on_stall* once when *progress* stays put for *stall_after_s*, *on_resume* after.

    *progress* is a number that grows whenever the run logs (the log's size less the bytes the
    background wrote). `check(now)` is called on the watcher thread, about ten times per
    `stall_after_s` (between 0.05 s and 5 s apart), and returns when it wants to be called next.
    """

    def __init__(
        self,
        stall_after_s: float,
        progress: Callable[[], int],
        on_stall: Callable[[float], None],
        on_resume: Callable[[float], None],
        now: float,
    ) -> None:
        self.stall_after_s = stall_after_s
        self.every_s = min(_MAX_CHECK_S, max(_MIN_CHECK_S, stall_after_s / 10))
        self._progress = progress
        self._on_stall = on_stall
        self._on_resume = on_resume
        self._seen = progress()
        self._since = now  # when progress last moved
        self.stalled = False

    def check(self, now: float) -> float:
        """Look at the progress once; return when to look again."""
        seen = self._progress()
        if seen > self._seen:  # never less: the background's bytes are counted before they land
            self._seen = seen
            if self.stalled:
                self.stalled = False
                self._on_resume(now - self._since)
            self._since = now
        elif not self.stalled and now - self._since >= self.stall_after_s:
            self.stalled = True
            self._on_stall(now - self._since)
        return now + self.every_s

    def ended(self, now: float) -> float | None:
        """Return the seconds the stall under way lasted, when progress has moved since it was
        seen (its stall_end is owed: the run logged again after the last check); else None."""
        if self.stalled and self._progress() > self._seen:
            self.stalled = False
            return now - self._since
        return None


def dump_stacks(path: Path, redact: Callable[[str], str] | None = None) -> int:
    """Write every Python thread's stack to *path*; return the number of threads.

    *redact* (the run's `Redactor.redact_text`) hides secrets in the text first: source lines
    and thread names may hold a token, as `run_end`'s traceback may.
    """
    frames = sys._current_frames()
    names = {thread.ident: thread for thread in threading.enumerate()}
    parts = []
    for ident, frame in frames.items():
        thread = names.get(ident)
        label = "unknown" if thread is None else thread.name
        daemon = "" if thread is None or not thread.daemon else ", daemon"
        parts.append(f'Thread {ident} "{label}"{daemon}:\n')
        parts.append("".join(traceback.format_stack(frame)))
        parts.append("\n")
    text = "".join(parts)
    if redact is not None:
        text = redact(text)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return len(frames)
