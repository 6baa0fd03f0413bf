"""The watcher thread: one daemon thread per process runs the periodic work of open runs, so
that a run costs a heap entry, not a thread of its own; `Watching` is one run's work on it.

A run's `system` samples and its stall watch write through the run's own path and stop at
close, before `run_end`. See docs/watching.md.
"""

from __future__ import annotations

import heapq
import itertools
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from runlines import _layout
from runlines import fields as _f
from runlines._watching import system
from runlines._watching.stall import StallWatch, dump_stacks
from runlines.sinks import warn_stderr

__all__ = ["Job", "Watcher", "Watching", "watcher"]

# Hidden in a tuple: freezegun replaces module attributes that are time.monotonic, and the
# thread's schedule must follow the real clock even while a test freezes time.
_REAL_CLOCK: Final = (time.monotonic,)

Task = Callable[[float], "float | None"]
"""Called with the monotonic time; returns when to call it next, or None to stop."""


class Job:
    """A task scheduled on a `Watcher`; once cancelled it is not called again.

    A call already in flight finishes: the task guards its own writes (see `Watching`).
    """

    def __init__(self, task: Task) -> None:
        self.task = task
        self.cancelled = False

    def cancel(self) -> None:
        """Stop calling the task."""
        self.cancelled = True


class Watcher:
    """Run scheduled jobs when they fall due: on a daemon thread, or by `run_due()` in tests."""

    def __init__(self, clock: Callable[[], float] | None = None, *, thread: bool = True) -> None:
        self.clock = _REAL_CLOCK[0] if clock is None else clock
        self._thread_wanted = thread
        self._heap: list[tuple[float, int, Job]] = []
        self._order = itertools.count()
        self._wake = threading.Condition(threading.Lock())
        self._thread: threading.Thread | None = None

    def add(self, task: Task, first_s: float) -> Job:
        """Schedule *task* to run *first_s* seconds from now; return its job."""
        job = Job(task)
        with self._wake:
            heapq.heappush(self._heap, (self.clock() + first_s, next(self._order), job))
            if self._thread_wanted and self._thread is None:
                self._start_thread()
            self._wake.notify()
        return job

    def run_due(self) -> float | None:
        """Run every job due now; return when the next one falls due (None: none left)."""
        while True:
            with self._wake:
                while self._heap and self._heap[0][2].cancelled:
                    heapq.heappop(self._heap)
                if not self._heap:
                    return None
                due, _, job = self._heap[0]
                now = self.clock()
                if due > now:
                    return due
                heapq.heappop(self._heap)
            later = _call(job, now)
            if later is not None:
                with self._wake:
                    heapq.heappush(self._heap, (later, next(self._order), job))

    def _start_thread(self) -> None:
        thread = threading.Thread(target=self._loop, name="runlines-watch", daemon=True)
        self._thread = thread
        thread.start()

    def _loop(self) -> None:
        while True:
            self.run_due()
            with self._wake:  # looked at and waited on under one lock: add() cannot slip by
                if not self._heap:
                    self._wake.wait()
                else:
                    timeout = self._heap[0][0] - self.clock()
                    if timeout > 0:
                        self._wake.wait(timeout)

    def _after_fork(self) -> None:
        """In a forked child: no thread, no jobs (the parent's runs watch themselves)."""
        self._heap = []
        self._wake = threading.Condition(threading.Lock())
        self._thread = None


def _call(job: Job, now: float) -> float | None:
    if job.cancelled:
        return None
    try:
        return job.task(now)
    except Exception as err:  # the thread must live on for other runs
        warn_stderr(f"a background job stopped ({type(err).__name__}: {err})")
        return None


watcher: Watcher = Watcher()
"""The process's watcher: its thread starts with the first job."""

os.register_at_fork(after_in_child=watcher._after_fork)


# -- a run's work on the thread -------------------------------------------------------------

_STOP_WAIT_S: Final = 0.1  # how long stop() waits for a record being written

Write = Callable[[str, dict[str, Any], Callable[[int], None]], None]
"""Writes a record of the background's, telling the callback its size before it lands."""


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
        scheduler: Watcher | None = None,
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
        self._jobs: list[Job] = []
        self._watcher = watcher if scheduler is None else scheduler
        now = self._watcher.clock()
        if system_s is not None:
            if sampler is None:
                sampler = system.SystemSampler()  # looked up here: a test replaces it
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
