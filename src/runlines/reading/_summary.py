"""A run's table row (`runs()`, `ls`, the dashboard), built incrementally from its records.

A metric is a field of one event: a row holds `<event>.<field>` (its last value) and, where
the field's name says which way is better, `<event>.<field>.best`. Bookkeeping fields (step,
the sampler's `n`, `_nonfinite`) are not metrics, nor are the numbers of runlines' own records
(`_rules.NOT_METRIC_EVENTS`: lifecycle, `warning`, `log`, `nonfinite`, `stall`, `stall_end`).
`system` fields are columns without a best.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import statistics
import time
from array import array
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from runlines import _layout
from runlines._layout import RUN_END, RUN_START
from runlines.reading._files import is_locked
from runlines.reading._lines import lines_containing, records_of
from runlines.reading._rules import (
    BOOKKEEPING,
    as_attempt,
    direction,
    is_metric_event,
    is_number,
    to_float,
)

__all__ = [
    "RECENT_GAPS",
    "RunSummary",
    "attempt_count",
    "is_stalled",
    "lifecycle",
    "run_status",
]

STALL_MIN_S: Final = 60.0
STALL_GAPS: Final = 10.0
_NUMBER_TYPES: Final = (int, float)  # exact types: a bool is no metric
RECENT_GAPS: Final = 32  # the gaps between this many last records set a run's pace
# Records a run's background thread writes (docs/watching.md): no sign that training moves.


def is_stalled(last_ts: float | None, gaps: list[float], now: float) -> bool:
    """Return whether a live run is stalled: nothing written for longer than its pace allows.

    The limit is max(60 s, 10 x the median gap between its recent records): a run that logs
    every second stalls after a minute of silence, one that logs every ten minutes after 100.
    *last_ts* and *gaps* leave out the background's records (`system`, `stall`, `stall_end`).
    """
    if last_ts is None:
        return False
    pace = statistics.median(gaps) if gaps else 0.0
    return now - last_ts > max(STALL_MIN_S, STALL_GAPS * pace)


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Return nested *config* as one level with dotted keys: ``{"optim.lr": 0.1}``."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, Mapping) and value:
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


class _Best:
    """The best value of one metric so far, by step, undone past a rewinding attempt's step.

    Holds the steps where a new best was reached and those bests: a later attempt that starts
    writing the metric at step s drops the entries from s on (its records replace them).
    """

    __slots__ = ("bests", "lower", "steps")

    def __init__(self, lower: bool) -> None:
        self.lower = lower
        self.steps = array("d")
        self.bests = array("d")

    def add(self, step: float, value: float) -> None:
        if math.isnan(value):
            return
        if self.bests:
            best = self.bests[-1]
            if (value >= best) if self.lower else (value <= best):
                return
        self.steps.append(step)
        self.bests.append(value)

    def rewind(self, step: float) -> None:
        while self.steps and self.steps[-1] >= step:
            self.steps.pop()
            self.bests.pop()

    @property
    def value(self) -> float | None:
        return self.bests[-1] if self.bests else None


class RunSummary:
    """One run's table row, built incrementally from its records in file order."""

    def __init__(self, path: str | os.PathLike[str], *, label: str | None = None) -> None:
        self.path = Path(path)
        self.label = label
        self.run: str | None = None
        self.attempts = 0
        self.ended: Any = None  # the run_end status of the last attempt, None while none
        self.started: float | None = None
        self.last_ts: float | None = None
        self.step: Any = None
        self.config: dict[str, Any] = {}
        self.last: dict[str, Any] = {}
        self.records = 0
        self._active_s = 0.0  # the durations of the attempts before the current one
        self._attempt_ts: float | None = None  # the first ts of the current attempt
        self._best: dict[str, _Best] = {}
        self._metrics: dict[tuple[str, str], tuple[str, _Best | None]] = {}
        self._fresh: set[str] = set()  # metrics the current attempt has written
        self._gaps: deque[float] = deque(maxlen=RECENT_GAPS)
        self._active_ts: float | None = None  # the last record that was no background record
        self._stall_seen = False  # a `stall` record, and no record of the run's since

    def add(self, record: Mapping[str, Any]) -> None:
        """Count *record* (one decoded record, as iter_events yields it) in."""
        self.records += 1
        ts = record.get("ts")
        event = record.get("event")
        if event == RUN_START:
            self._start(record)
        at = ts if type(ts) is float else to_float(ts)  # the common case first: a float
        # a foreign log may hold any JSON value as its event
        background = isinstance(event, str) and event in _layout.BACKGROUND_EVENTS
        if math.isfinite(at):
            self._tick(at, active=not background)
        if event == _layout.STALL:
            self._stall_seen = True
        elif not background:
            self._stall_seen = False
        if self.run is None and isinstance(record.get("run"), str):
            self.run = record["run"]
        if event == RUN_END:
            status = record.get("status")
            self.ended = status if isinstance(status, str) and status else "ok"
        elif is_metric_event(event):
            self._values(event, record)

    def _tick(self, ts: float, *, active: bool) -> None:
        if self.started is None:
            self.started = ts
        if self._attempt_ts is None:
            self._attempt_ts = ts
        self.last_ts = ts
        if not active:
            return
        # an attempt's first record has no gap to the one before
        if self._active_ts is not None and ts >= self._active_ts:
            self._gaps.append(ts - self._active_ts)
        self._active_ts = ts

    def _start(self, record: Mapping[str, Any]) -> None:
        if self._attempt_ts is not None and self.last_ts is not None:
            self._active_s += max(0.0, self.last_ts - self._attempt_ts)
        self._attempt_ts = None
        self._active_ts = None
        own = as_attempt(record.get("attempt"))
        self.attempts = max(self.attempts + 1, own or 0)
        self.ended = None
        self._fresh = set()
        self._gaps.clear()
        config = record.get("config")
        if isinstance(config, Mapping):  # an attempt without a config keeps the one before
            self.config = flatten(config)
        resume = record.get("resume_step")
        if is_number(resume):
            for best in self._best.values():
                best.rewind(to_float(resume) + 0.5)

    def _values(self, event: str, record: Mapping[str, Any]) -> None:
        step = record.get("step")
        at = math.inf
        if type(step) in _NUMBER_TYPES:
            self.step = step
            at = to_float(step)
        metrics, last, fresh = self._metrics, self.last, self._fresh
        for field, value in record.items():
            if type(value) not in _NUMBER_TYPES:
                continue
            metric = metrics.get((event, field))
            if metric is None:
                metric = metrics[(event, field)] = self._metric(event, field)
            key, best = metric
            if not key:
                continue
            last[key] = value
            if best is None:
                continue
            if key not in fresh:
                fresh.add(key)
                if self.attempts > 1 and math.isfinite(at):
                    best.rewind(at)  # this attempt's records replace the earlier ones from here
            best.add(at, to_float(value))

    def _metric(self, event: str, field: str) -> tuple[str, _Best | None]:
        """Return the column of (event, field) and its best tracker; '' for no metric."""
        if field in BOOKKEEPING or field in ("event", "run"):
            return "", None
        key = f"{event}.{field}"
        way = None if event == _layout.SYSTEM else direction(field)  # a measurement, no score
        best = None if way is None else self._best.setdefault(key, _Best(lower=way == "min"))
        return key, best

    def status(self, *, alive: bool | None = None, now: float | None = None) -> str:
        """Return running, stalled, died, or how the last attempt ended (ok, failed, ...).

        A live run is stalled when it wrote a `stall` record and nothing of its own since, or
        when `is_stalled` says so; *alive* (default: its lock is held) and *now* (default: the
        clock) are for a caller that knows them already.
        """
        if self.ended is not None:
            return str(self.ended)
        if alive is None:
            alive = is_locked(self.path)
        if not alive:
            return "died"
        now = time.time() if now is None else now
        if self._stall_seen or is_stalled(self._active_ts, list(self._gaps), now):
            return "stalled"
        return "running"

    @property
    def duration_s(self) -> float | None:
        """Seconds the attempts ran, the gaps between attempts left out."""
        if self._attempt_ts is None or self.last_ts is None:
            return None
        return self._active_s + max(0.0, self.last_ts - self._attempt_ts)

    def row(self, *, alive: bool | None = None, now: float | None = None) -> dict[str, Any]:
        """Return the run's `runs()` row: run, path, status, attempts, started, ... metrics."""
        started = None
        if self.started is not None:
            try:
                started = _dt.datetime.fromtimestamp(self.started, _dt.UTC)
            except (OverflowError, OSError, ValueError):  # a ts no calendar holds
                started = None
        row: dict[str, Any] = {
            "run": self.label or self.run or _stem(self.path),
            "path": str(self.path),
            "status": self.status(alive=alive, now=now),
            "attempts": self.attempts,
            "started": started,
            "duration_s": self.duration_s,
            "step": self.step,
        }
        row.update((f"config.{key}", value) for key, value in self.config.items())
        for key, value in self.last.items():
            row[key] = value
            if key in self._best:
                row[f"{key}.best"] = self._best[key].value
        return row

    def state(self) -> dict[str, Any]:
        """Return this summary's state as JSON values: `restored` goes on from it."""
        return {
            "run": self.run,
            "attempts": self.attempts,
            "ended": self.ended,
            "started": self.started,
            "last_ts": self.last_ts,
            "step": self.step,
            "config": self.config,
            "last": self.last,
            "records": self.records,
            "active_s": self._active_s,
            "attempt_ts": self._attempt_ts,
            "best": {k: [b.lower, list(b.steps), list(b.bests)] for k, b in self._best.items()},
            "fresh": sorted(self._fresh),
            "gaps": list(self._gaps),
            "active_ts": self._active_ts,
            "stall_seen": self._stall_seen,
        }

    @classmethod
    def restored(
        cls, path: str | os.PathLike[str], state: Mapping[str, Any], *, label: str | None = None
    ) -> RunSummary:
        """Return the summary whose `state()` was *state*, ready to add the records after it."""
        summary = cls(path, label=label)
        for name in ("run", "attempts", "ended", "started", "last_ts", "step", "records"):
            setattr(summary, name, state[name])
        summary.config = dict(state["config"])
        summary.last = dict(state["last"])
        summary._active_s = state["active_s"]
        summary._attempt_ts = state["attempt_ts"]
        for key, (lower, steps, bests) in state["best"].items():
            best = summary._best[key] = _Best(lower=lower)
            best.steps.extend(steps)
            best.bests.extend(bests)
        summary._fresh = set(state["fresh"])
        summary._gaps.extend(state["gaps"])
        summary._active_ts = state["active_ts"]
        summary._stall_seen = state["stall_seen"]
        return summary


def _stem(path: Path) -> str:
    return path.name.removesuffix(".jsonl")


def lifecycle(path: str | os.PathLike[str]) -> list[tuple[int, dict[str, Any]]]:
    """Return ``(offset, record)`` for the run_start and run_end records of *path*."""
    lines = lines_containing(path, (b'"run_start"', b'"run_end"'))
    return [(at, r) for at, r in records_of(lines) if r.get("event") in (RUN_START, RUN_END)]


def run_status(path: str | os.PathLike[str], marks: list[tuple[int, dict[str, Any]]]) -> str:
    """Return how the last attempt of *path* ended, or running/died when it has no run_end."""
    starts = [at for at, r in marks if r.get("event") == RUN_START]
    ends = [(at, r) for at, r in marks if r.get("event") == RUN_END]
    if ends and (not starts or ends[-1][0] > starts[-1]):
        status = ends[-1][1].get("status")
        return status if isinstance(status, str) and status else "ok"
    return "running" if is_locked(path) else "died"


def attempt_count(marks: list[tuple[int, dict[str, Any]]]) -> int:
    """Return the number of attempts: the highest run_start `attempt`, or their count."""
    numbers = [r.get("attempt") for _, r in marks if r.get("event") == RUN_START]
    ints = [n for n in map(as_attempt, numbers) if n is not None]
    return max([len(numbers), *ints]) if numbers else 1
