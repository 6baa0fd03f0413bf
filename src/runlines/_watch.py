"""One daemon thread per process that runs the periodic work of open runs (system samples,
stall checks), so that a run costs a heap entry, not a thread of its own."""

from __future__ import annotations

import heapq
import itertools
import os
import threading
import time
from collections.abc import Callable
from typing import Final

__all__ = ["Job", "Watcher", "watcher"]

# Hidden in a tuple: freezegun replaces module attributes that are time.monotonic, and the
# thread's schedule must follow the real clock even while a test freezes time.
_REAL_CLOCK: Final = (time.monotonic,)

Task = Callable[[float], "float | None"]
"""Called with the monotonic time; returns when to call it next, or None to stop."""


class Job:
    """A task scheduled on a `Watcher`; once cancelled it is not called again.

    A call already in flight finishes: the task guards its own writes (see _watching).
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
        from runlines.sinks import warn_stderr

        warn_stderr(f"a background job stopped ({type(err).__name__}: {err})")
        return None


watcher: Watcher = Watcher()
"""The process's watcher: its thread starts with the first job."""

os.register_at_fork(after_in_child=watcher._after_fork)
