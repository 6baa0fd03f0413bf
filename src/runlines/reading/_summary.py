"""A run's table row (`runs()`, `ls`, the dashboard), built incrementally from its records.

A metric is a field of one event: a row holds `<event>.<field>` (its last value) and, where
the field's name says which way is better, `<event>.<field>.best`: the best of the records
load() keeps (`_rules`' superseded records left out). Bookkeeping fields (step,
the sampler's `n`, `_nonfinite`) are not metrics, nor are the numbers of runlines' own records
(`_rules.NOT_METRIC_EVENTS`: lifecycle, `warning`, `log`, `nonfinite`, `stall`, `stall_end`).
`system` fields are columns without a best.

Attempts (`RunSummary.attempts_detail`): each `run_start` begins one. An attempt's status is
how its `run_end` says it ended; one with no `run_end` is `died` (whatever came later), but
for the last attempt, which is `running` or `stalled` while its writer holds the lock. An
attempt's duration runs from its first record to its last; a run's duration is the sum of
its attempts': the gaps between attempts never count. The run's config is that of the last
attempt that gave one (a `run_start` whose config is missing or empty keeps the one before),
and each attempt lists the config keys that changed from the config before it.

Declarations (docs/compat.md): a `summary` record's `values` are the run's declared final
values, by column, in the row in place of the last values; a `define_metric` record's `goal`
("min" or "max") sets which way its `column` is better, for the best of every value kept.

Only runlines logs are runs (`is_runlines_log`): a log whose records include none with a
text `event` and a numeric `ts` (what every runlines record has) is a foreign JSONL.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import math
import os
import statistics
import time
import warnings
from array import array
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from runlines import _layout, _notes
from runlines._layout import RUN_END, RUN_START, flatten
from runlines.errors import ReadError
from runlines.reading._files import is_locked
from runlines.reading._lines import head_record, iter_events, lines_containing, records_of
from runlines.reading._rules import (
    BOOKKEEPING,
    as_attempt,
    config_changes,
    direction,
    is_metric_event,
    is_number,
    is_runlines_record,
    step_cutoffs,
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

# what an attempt's run_end says, kept with the attempt (`show`, the run page)
_END_FIELDS: Final = ("dropped", "dropped_by_sink", "exc_type", "exc_message", "signal")

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


class _Best:
    """The best value of one metric over the records load() keeps (`_rules`' superseded rule).

    Holds every value of the metric with its step (inf: none) and segment (the run_starts
    before it): a later attempt may rewrite any step, and the best is then the best of the
    others. The best is kept up to date as values come, and counted again from the values
    only when a later attempt supersedes the record that holds it (`dirty`).
    """

    __slots__ = ("_at", "_value", "bounds", "dirty", "event", "lost", "lower", "steps", "values")

    def __init__(self, event: _Event, lower: bool) -> None:
        self.event = event
        self.lower = lower
        self.steps = array("d")
        self.values = array("d")
        self.bounds: list[list[int]] = []  # [segment, first index] where a segment starts
        self.dirty = False
        self.lost = False  # superseded, and the records to count it again from are gone
        self._value: float | None = None
        self._at = (math.inf, 0)  # the step and segment of the record that holds the best

    def add(self, step: float, value: float, segment: int) -> None:
        if math.isnan(value):
            return
        if not self.bounds or self.bounds[-1][0] != segment:
            self.bounds.append([segment, len(self.values)])
        self.steps.append(step)
        self.values.append(value)
        best = self._value
        if best is None or ((value < best) if self.lower else (value > best)):
            self._value, self._at = value, (step, segment)

    def rewritten(self, step: float, segment: int) -> None:
        """Note that *segment* wrote the metric's event at *step*."""
        at, written = self._at
        if at == step and written < segment:  # the best's own record is superseded
            self.dirty = True

    def resumed(self, step: float) -> None:
        """Note that a later attempt resumed at *step*: earlier records past it are superseded."""
        at = self._at[0]
        if at != math.inf and at > step:
            self.dirty = True

    def state(self, event: str, cutoffs: list[float]) -> list[Any]:
        """Return ``[event, lower, best, its step, its segment]`` as JSON values."""
        value = self.value(cutoffs)
        return [event, self.lower, value, *self._at]

    def restore(self, value: float | None, step: float, segment: int) -> None:
        """Start from the best *value* of earlier records, held by (*step*, *segment*)."""
        self._value, self._at = value, (step, segment)

    def prepend(self, steps: array[float], values: array[float], bounds: list[list[int]]) -> None:
        """Put the values of the records before these (a restored summary's) first."""
        self.bounds = _joined(bounds, len(steps), self.bounds)
        self.steps = steps + self.steps
        self.values = values + self.values

    def value(self, cutoffs: list[float]) -> float | None:
        """Return the best of the values no later attempt superseded (*cutoffs*: per segment,
        the step past which a later resume_step supersedes its records).
        """
        if self.dirty:
            self._count(cutoffs)
            self.dirty = False
        return None if self.lost else self._value

    def _count(self, cutoffs: list[float]) -> None:
        owners = self.event.owners()
        best: float | None = None
        at = (math.inf, 0)
        for segment, steps, values in _segments(self.bounds, self.steps, self.values):
            limit = cutoffs[segment]
            for step, value in zip(steps, values, strict=True):
                if step != math.inf and (step > limit or owners[step] != segment):
                    continue  # a later attempt rewrote this (event, step), or resumed before it
                if best is None or ((value < best) if self.lower else (value > best)):
                    best, at = value, (step, segment)
        self._value, self._at = best, at


class _Event:
    """The steps one event wrote, by segment, from its first record that holds a best on:
    which segment wrote an (event, step) last is what supersedes the others' records.
    """

    __slots__ = ("bests", "bounds", "steps")

    def __init__(self) -> None:
        self.steps = array("d")
        self.bounds: list[list[int]] = []
        self.bests: list[_Best] = []

    def prepend(self, steps: array[float], bounds: list[list[int]]) -> None:
        """Put the steps of the records before these (a restored summary's) first."""
        self.bounds = _joined(bounds, len(steps), self.bounds)
        self.steps = steps + self.steps

    def add(self, step: float, segment: int) -> None:
        if not self.bounds or self.bounds[-1][0] != segment:
            self.bounds.append([segment, len(self.steps)])
        if step != math.inf and segment:
            for best in self.bests:
                best.rewritten(step, segment)
        self.steps.append(step)

    def owners(self) -> dict[float, int]:
        """Return, per step, the last segment that wrote it."""
        owners: dict[float, int] = {}
        for segment, steps, _ in _segments(self.bounds, self.steps, self.steps):
            owners.update(dict.fromkeys(steps, segment))
        return owners


def _joined(first: list[list[int]], size: int, then: list[list[int]]) -> list[list[int]]:
    """Return the bounds of *size* entries cut by *first*, followed by those *then* cuts."""
    later = [[segment, start + size] for segment, start in then]
    if first and later and later[0][0] == first[-1][0]:
        later = later[1:]  # one segment across the two
    return [*first, *later]


def _segments(
    bounds: list[list[int]], steps: array[float], values: array[float]
) -> list[tuple[int, array[float], array[float]]]:
    """Return ``(segment, steps, values)`` for each segment that *bounds* cut."""
    ends = [start for _, start in bounds[1:]] + [len(steps)] if bounds else []
    return [
        (segment, steps[start:end], values[start:end])
        for (segment, start), end in zip(bounds, ends, strict=True)
    ]


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
        self._events: dict[str, _Event] = {}  # the events that hold a best
        self._metrics: dict[tuple[str, str], tuple[str, _Best | None]] = {}
        self._segment = 0  # the run_starts so far: the segment of the records that come
        self._resumes: list[Any] = []  # each run_start's resume_step
        self._history = 0  # the first records whose values the bests do not hold (restored)
        self._restored_records = 0  # the records a restored summary's state counted
        self._gaps: deque[float] = deque(maxlen=RECENT_GAPS)
        self._active_ts: float | None = None  # the last record that was no background record
        self._stall_seen = False  # a `stall` record, and no record of the run's since
        self.shaped = False  # whether a record has a text event and a numeric ts (runlines')
        self._declared: dict[str, Any] = {}  # the `summary` records' values, by column
        self._goals: dict[str, str] = {}  # the `define_metric` records' goals, by column
        # per attempt: its number, first and last ts (set when the next starts), its run_end's
        # status and ts, and the config keys it changed; None for an attempt of a restored
        # summary's history, read again from the log when asked (`attempts_detail`)
        self._attempt_list: list[dict[str, Any] | None] = []

    def add(self, record: Mapping[str, Any]) -> None:
        """Count *record* (one decoded record, as iter_events yields it) in."""
        self.records += 1
        ts = record.get("ts")
        event = record.get("event")
        if not self.shaped:
            self.shaped = is_runlines_record(record)
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
            self._end(record, at)
        elif event == _layout.SUMMARY or event == _layout.DEFINE_METRIC:
            self._declare(record)
        elif is_metric_event(event):
            self._values(event, record)

    def _declare(self, record: Mapping[str, Any]) -> None:
        """Take in a `summary` record's final values or a `define_metric` record's goal."""
        values, column, goal = record.get("values"), record.get("column"), record.get("goal")
        if record.get("event") == _layout.SUMMARY and isinstance(values, Mapping):
            self._declared.update(values)
        elif isinstance(column, str) and goal in ("min", "max"):
            self._goals[column] = goal
            best = self._best.get(column)
            if best is not None and best.lower != (goal == "min"):
                best.lower, best.dirty = goal == "min", True  # counted again from its values
            for pair, (key, found) in list(self._metrics.items()):
                if key == column and found is None:  # a best from its next value on
                    del self._metrics[pair]

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
        self._close_attempt()
        self._attempt_ts = None
        self._active_ts = None
        own = as_attempt(record.get("attempt"))
        self.attempts = max(self.attempts + 1, own or 0)
        self.ended = None
        self._gaps.clear()
        config = record.get("config")
        changed: dict[str, list[Any]] = {}
        if isinstance(config, Mapping) and config:  # one without a config keeps the one before
            flat = flatten(config)
            if self._attempt_list:
                changed = config_changes(self.config, flat)
            self.config = flat
        self._attempt_list.append(_new_attempt(self.attempts, changed))
        self._segment += 1
        resume = record.get("resume_step")
        self._resumes.append(resume)
        if is_number(resume):  # the records of earlier attempts past it are superseded
            for best in self._best.values():
                best.resumed(to_float(resume))

    def _close_attempt(self) -> None:
        """Keep the first and last ts of the attempt that a run_start ends."""
        if not self._attempt_list:
            return
        attempt = self._attempt_list[-1]
        if attempt is None:  # a restored history's: its times are known here
            attempt = self._attempt_list[-1] = _new_attempt(None, None)
        attempt["started"] = self._attempt_ts
        attempt["last_ts"] = self.last_ts if self._attempt_ts is not None else None

    def _end(self, record: Mapping[str, Any], ts: float) -> None:
        if not self._attempt_list:  # a run_end with no run_start: the run's one attempt
            self._attempt_list.append(_new_attempt(1, {}))
        attempt = self._attempt_list[-1]
        if attempt is None:
            attempt = self._attempt_list[-1] = _new_attempt(None, None)
        attempt["status"] = self.ended
        attempt["ended"] = ts if math.isfinite(ts) else None
        for key in _END_FIELDS:
            if record.get(key):
                attempt[key] = record[key]

    def _values(self, event: str, record: Mapping[str, Any]) -> None:
        step = record.get("step")
        at = math.inf  # no step: never superseded
        if type(step) in _NUMBER_TYPES:
            self.step = step
            at = to_float(step)
            if math.isnan(at):
                at = math.inf
        metrics, last, segment = self._metrics, self.last, self._segment
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
            if best is not None:
                best.add(at, to_float(value), segment)
        written = self._events.get(event)
        if written is not None:
            written.add(at, segment)

    def _metric(self, event: str, field: str) -> tuple[str, _Best | None]:
        """Return the column of (event, field) and its best tracker; '' for no metric."""
        if field in BOOKKEEPING or field in ("event", "run"):
            return "", None
        key = f"{event}.{field}"
        way = self._goals.get(key) or (None if event == _layout.SYSTEM else direction(field))
        if way is None:
            return key, None
        best = self._best.get(key)
        if best is None:
            written = self._events.setdefault(event, _Event())
            best = self._best[key] = _Best(written, lower=way == "min")
            written.bests.append(best)
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

    def is_runlines_log(self) -> bool:
        """Return whether the records read are a runlines log's (none read: an empty log is).

        A file whose lines are no JSON objects, or whose records include none with a text
        `event` and a numeric `ts`, is a foreign JSONL: no view lists it as a run.
        """
        if self.records == 0:
            return self._empty()
        return self.shaped

    def _empty(self) -> bool:
        try:
            return self.path.stat().st_size == 0
        except OSError:
            return True  # gone: the caller's read says so

    def metrics(self) -> list[tuple[str, str, str]]:
        """Return ``(event, field, column)`` of each metric, in the order first seen."""
        return [(e, f, key) for (e, f), (key, _) in self._metrics.items() if key in self.last]

    def bests(self) -> dict[str, float | None]:
        """Return the best value of each metric whose name says which way is better."""
        cutoffs = self._cutoffs()
        return {key: best.value(cutoffs) for key, best in self._best.items() if key in self.last}

    def attempts_detail(
        self, *, alive: bool | None = None, now: float | None = None
    ) -> list[dict[str, Any]]:
        """Return each attempt's attempt, started, last_ts, ended, status, duration_s and
        config_changes.

        The last attempt's status is the run's (`status`); an earlier one without a run_end
        `died`. `config_changes` maps each config key the attempt changed to ``[before,
        after]`` (None: the key was not there). Its run_end's dropped, dropped_by_sink,
        exc_type, exc_message and signal are kept where set.
        """
        if any(entry is None or entry["attempt"] is None for entry in self._attempt_list):
            self._attempt_list = list(self._with_history())  # read once
        entries = [entry for entry in self._attempt_list if entry is not None]
        found = []
        for number, entry in enumerate(entries):
            attempt = dict(entry)
            last = number == len(entries) - 1
            if last:
                attempt["started"], attempt["last_ts"] = self._attempt_ts, self.last_ts
            if attempt["status"] is None:
                attempt["status"] = self.status(alive=alive, now=now) if last else "died"
            first, end = attempt["started"], attempt["last_ts"]
            attempt["duration_s"] = None if first is None or end is None else max(0.0, end - first)
            found.append(attempt)
        return found

    def _with_history(self) -> list[dict[str, Any]]:
        """Return the attempts, those of a restored history read again from the log."""
        past = RunSummary(self.path)
        try:
            for record in itertools.islice(iter_events(self.path), self._restored_records):
                past.add(record)
        except (OSError, ReadError):
            pass
        if past._attempt_list:
            past._close_attempt()
        old = [entry for entry in past._attempt_list if entry is not None]
        merged = []
        for number, entry in enumerate(self._attempt_list):
            known = old[number] if number < len(old) else _new_attempt(number + 1, {})
            if entry is None:
                merged.append(known)
            else:  # what came after the history (its times, its run_end) holds
                merged.append({k: v if v is not None else known.get(k) for k, v in entry.items()})
        return merged

    def row(self, *, alive: bool | None = None, now: float | None = None) -> dict[str, Any]:
        """Return the run's `runs()` row: run, path, status, attempts, started, duration_s,
        step, tags, notes, the config keys, the metrics.
        """
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
        notes = _notes.read_notes(self.path)  # the side file `runlines tag` and `note` append to
        row["tags"], row["notes"] = notes.tags, [entry["text"] for entry in notes.notes]
        row.update((f"config.{key}", value) for key, value in self.config.items())
        cutoffs = self._cutoffs()
        for key, value in self.last.items():
            row[key] = value
            if key in self._best:
                row[f"{key}.best"] = self._best[key].value(cutoffs)
        row.update(self._declared)
        return row

    def _cutoffs(self) -> list[float]:
        """Return each segment's resume cutoff, the values of restored records read first
        when a best must be counted again from them.
        """
        if self._history and any(best.dirty for best in self._best.values()):
            self._read_history()
        return step_cutoffs(self._resumes)

    def _read_history(self) -> None:
        """Read the values of the first records again from the log (a restored summary holds
        only their bests): a later attempt superseded the record that holds a best.
        """
        past = RunSummary(self.path)
        try:
            for record in itertools.islice(iter_events(self.path), self._history):
                past.add(record)
        except (OSError, ReadError):  # the log went away: no best rather than a wrong one
            for best in self._best.values():
                best.lost = best.lost or best.dirty
            self._history = 0
            return
        for event, written in self._events.items():
            if event in past._events:
                old = past._events[event]
                written.prepend(old.steps, old.bounds)
        for key, best in self._best.items():
            if key in past._best:
                old_best = past._best[key]
                best.prepend(old_best.steps, old_best.values, old_best.bounds)
        self._history = 0

    def state(self) -> dict[str, Any]:
        """Return this summary's state as JSON values: `restored` goes on from it."""
        names = {id(written): event for event, written in self._events.items()}
        cutoffs = self._cutoffs()
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
            "events": list(self._events),
            "best": {k: b.state(names[id(b.event)], cutoffs) for k, b in self._best.items()},
            "segments": self._segment,
            "resumes": self._resumes,
            "gaps": list(self._gaps),
            "active_ts": self._active_ts,
            "stall_seen": self._stall_seen,
            "declared": self._declared,
            "goals": self._goals,
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
        for event in state["events"]:
            summary._events[event] = _Event()
        for key, (event, lower, value, step, segment) in state["best"].items():
            written = summary._events[event]
            best = summary._best[key] = _Best(written, lower=lower)
            best.restore(value, step, segment)
            written.bests.append(best)
        summary._history = state["records"]
        summary._segment = state["segments"]
        summary._resumes = list(state["resumes"])
        summary._gaps.extend(state["gaps"])
        summary._active_ts = state["active_ts"]
        summary._stall_seen = state["stall_seen"]
        summary._declared = dict(state.get("declared", {}))  # a copy from before declarations
        summary._goals = dict(state.get("goals", {}))
        # the state holds no attempts: asked for, they are read again from the log
        # (`attempts_detail`)
        summary.shaped = _any_runlines_record(summary.path, state["records"])
        summary._attempt_list = [None] * state["segments"]
        summary._restored_records = state["records"]
        return summary


def _any_runlines_record(path: Path, records: int) -> bool:
    """Return whether one of the first *records* of *path* is shaped as runlines writes them
    (the first, for a runlines log); a log that cannot be read counts as one (its read says).
    """
    try:
        head = head_record(path)
        if head is not None and is_runlines_record(head):
            return True
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the bad lines: the summary's own read warns
            return any(map(is_runlines_record, itertools.islice(iter_events(path), records)))
    except (OSError, ReadError):
        return True


def _new_attempt(number: int | None, changed: dict[str, list[Any]] | None) -> dict[str, Any]:
    return {
        "attempt": number,
        "started": None,
        "last_ts": None,
        "ended": None,
        "status": None,
        "config_changes": changed,
    }


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
