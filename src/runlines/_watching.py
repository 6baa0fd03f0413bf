"""What watches a run from the background: its `system` samples and its stall watch.

Both run on the process's one watcher thread (`_watch`), write through the run's own path,
and stop at close, before `run_end`. See docs/watching.md.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from runlines import _layout, _watch
from runlines import fields as _f
from runlines._stall import StallWatch, dump_stacks

__all__ = ["DEFAULT_SYSTEM_S", "Watching", "check_system"]

_STOP_WAIT_S: Final = 0.1  # how long stop() waits for a record being written

DEFAULT_SYSTEM_S: Final = 10.0
_MIN_SYSTEM_S: Final = 0.1

Write = Callable[[str, dict[str, Any], Callable[[int], None]], None]
"""Writes a record of the background's, telling the callback its size before it lands."""


def check_system(value: object) -> float | None:
    """Return the seconds between `system` samples (None: off); raise on a bad value."""
    if value is False or value is None:
        return None
    if value is True:
        return DEFAULT_SYSTEM_S
    if isinstance(value, (int, float)) and value >= _MIN_SYSTEM_S:
        return float(value)
    msg = (
        f"system must be the seconds between samples (at least {_MIN_SYSTEM_S}), True "
        f"({DEFAULT_SYSTEM_S}) or False (off); got {value!r}"
    )
    raise ValueError(msg)


class Watching:
    """A run's background jobs: `system` records every *system_s*, a stall watch.

    *write* writes a record (see `Write`), *log_fd* is the log file's descriptor
    (its size is the stall watch's measure of progress), *stacks_dir* where stacks go, and
    *redact* hides secrets in the stacks' text (None: redaction is off).
    """

    def __init__(
        self,
        write: Write,
        *,
        system_s: float | None,
        stall_after_s: float | None,
        log_fd: int,
        stacks_dir: Path,
        redact: Callable[[str], str] | None,
        sampler: Any = None,
        watcher: _watch.Watcher | None = None,
    ) -> None:
        self._write = write
        self._lock = threading.Lock()  # held while writing: stop() waits for a write in flight
        self._stopped = False
        self._pid = os.getpid()
        self._own_bytes = 0  # bytes the background wrote, which are no sign of progress
        self._log_fd = log_fd
        self._stacks_dir = stacks_dir
        self._redact = redact
        self._stalls = 0
        self._jobs: list[_watch.Job] = []
        self._watcher = _watch.watcher if watcher is None else watcher
        now = self._watcher.clock()
        if system_s is not None:
            if sampler is None:
                from runlines._system import SystemSampler

                sampler = SystemSampler()
            self._sampler = sampler
            self._system_s = system_s
            sampler.start(now)
            # The first sample after one interval, not at open: a short run (a test, a
            # notebook cell) writes none, and NVML starts on this thread, never in Run().
            self._jobs.append(self._watcher.add(self._sample, system_s))
        if stall_after_s is not None:
            self.stall = StallWatch(
                stall_after_s, self._progress, self._on_stall, self._on_resume, now
            )
            self._jobs.append(self._watcher.add(self._check_stall, self.stall.every_s))

    def stop(self) -> dict[str, Any] | None:
        """Stop the jobs; once this returns, nothing more is written.

        Returns the fields of a `stall_end` still owed, which the run writes before `run_end`:
        a stall that ended after the watch's last check (the run logged, then closed at once).
        """
        for job in self._jobs:
            job.cancel()
        if os.getpid() != self._pid:
            return None  # a forked child runs no jobs; the lock may have been held at the fork
        self._stopped = True  # first, without the lock: a signal handler may be the caller
        # Wait, boundedly, for a record being written now: the thread may itself wait for the
        # write lock that the code this call interrupted holds.
        if not self._lock.acquire(timeout=_STOP_WAIT_S):
            return None  # a check still runs: the stall's state is its own
        try:
            stall = getattr(self, "stall", None)
            stalled_s = None if stall is None else stall.ended(self._watcher.clock())
        finally:
            self._lock.release()
        return None if stalled_s is None else {_f.STALLED_S: round(stalled_s, 3)}

    def _check_stall(self, now: float) -> float | None:
        """The stall watch's check, under the lock: stop() never sees it half done."""
        with self._lock:
            if self._stopped:
                return None
            return self.stall.check(now)

    def _emit(self, event: str, fields: dict[str, Any]) -> None:
        with self._lock:
            if not self._stopped:
                self._write(event, fields, self._count)

    def _emit_held(self, event: str, fields: dict[str, Any]) -> None:
        """Write a record of the stall watch's, whose check holds the lock."""
        if not self._stopped:
            self._write(event, fields, self._count)

    def _count(self, size: int) -> None:
        # Counted before the line lands, so the stall watch never mistakes it for progress.
        self._own_bytes += size

    def _sample(self, now: float) -> float | None:
        fields = self._sampler.sample(now)
        if fields:
            self._emit(_layout.SYSTEM, fields)
        return now + self._system_s

    def _progress(self) -> int:
        return os.fstat(self._log_fd).st_size - self._own_bytes

    def _on_stall(self, idle_s: float) -> None:
        self._stalls += 1
        path = self._stacks_dir / f"stall-{os.getpid()}-{self._stalls}.txt"
        fields: dict[str, Any] = {_f.IDLE_S: round(idle_s, 3)}
        try:
            fields[_f.THREADS] = dump_stacks(path, self._redact)
            fields[_f.STACKS] = f"{self._stacks_dir.name}/{path.name}"
        except OSError:
            pass  # the record still says the run stalled
        self._emit_held(_layout.STALL, fields)

    def _on_resume(self, stalled_s: float) -> None:
        self._emit_held(_layout.STALL_END, {_f.STALLED_S: round(stalled_s, 3)})
