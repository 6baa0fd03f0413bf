"""What `ls`, `show` and `which` print of a run, gathered from its lines (stdlib and orjson)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from runlines._layout import LIFECYCLE_EVENTS
from runlines.errors import ReadError, RunlinesWarning
from runlines.reading._files import LogFile, is_locked
from runlines.reading._lines import (
    event_of,
    head_record,
    iter_events,
    last_records,
    lines_containing,
    records_of,
)
from runlines.reading._rules import BOOKKEEPING, as_attempt, is_number
from runlines.reading._summary import attempt_count, lifecycle, run_status

_TAIL_BYTES: Final = 1 << 20  # `ls` looks for the last step and metric this far from the end


def unreadable_reason(err: Exception) -> str | None:
    """Return why a log cannot be read when *err* says so (an OSError, or the ReadError of
    one), else None: the error is about the log's content, not about reading it.
    """
    cause = err.__cause__ if isinstance(err, ReadError) else err
    if not isinstance(cause, OSError):
        return None
    return cause.strerror or str(cause)


def warn_unreadable(path: str | os.PathLike[str], reason: str) -> None:
    """Warn that log *path* is left out because it cannot be read, for *reason*."""
    msg = f"left out {path}: it cannot be read ({reason}); the other logs are shown"
    warnings.warn(msg, RunlinesWarning, stacklevel=3)


def main_metric(records: Sequence[Mapping[str, Any]]) -> str | None:
    """Return the main metric of *records*, the one `runlines ls` shows.

    That is ``loss``, else the first field named like ``*loss*``, else the first numeric field of
    the last record that has a step; bookkeeping fields (step, epoch, pid, ...) never count.
    """
    names = [k for r in records for k, v in r.items() if is_number(v) and k not in BOOKKEEPING]
    if "loss" in names:
        return "loss"
    lossy = [name for name in names if "loss" in name]
    if lossy:
        return lossy[0]
    for record in reversed(records):
        if "step" in record and event_of(record) not in LIFECYCLE_EVENTS:
            numeric: list[str] = [
                k for k, v in record.items() if is_number(v) and k not in BOOKKEEPING
            ]
            if numeric:
                return numeric[0]
    return None


def last_value(records: Sequence[Mapping[str, Any]], name: str) -> Any:
    """Return the last numeric value of field *name* in *records*, or None."""
    for record in reversed(records):
        if is_number(record.get(name)):
            return record[name]
    return None


@dataclass(frozen=True, slots=True)
class LsSummary:
    """What `runlines ls` shows of one run: from its lifecycle records and its last records."""

    log: LogFile
    status: str  # ok, failed, interrupted, terminated, running or died
    attempts: int
    started: float | None  # ts of the first record
    last: float | None  # ts of the last record
    step: Any
    metric: str | None
    value: Any

    @property
    def duration_s(self) -> float | None:
        """Seconds from the first record to the last."""
        if self.started is None or self.last is None:
            return None
        return self.last - self.started


def summarize(log: LogFile) -> LsSummary:
    """Return the `ls` line of *log*: it reads the lifecycle lines and the last MiB only."""
    marks = lifecycle(log.path)
    tail = last_records(log.path, max_bytes=_TAIL_BYTES)
    first = head_record(log.path)
    metric = main_metric(tail)
    steps = [r["step"] for r in tail if is_number(r.get("step"))]
    return LsSummary(
        log=log,
        status=run_status(log.path, marks),
        attempts=attempt_count(marks) if tail or marks else 0,
        started=_ts(first),
        last=_ts(tail[-1]) if tail else None,
        step=steps[-1] if steps else None,
        metric=metric,
        value=last_value(tail, metric) if metric else None,
    )


def _ts(record: Mapping[str, Any] | None) -> float | None:
    value = None if record is None else record.get("ts")
    try:
        return float(value) if is_number(value) else None
    except OverflowError:  # an int beyond any float, from a foreign writer
        return None


@dataclass(slots=True)
class RunDetails:
    """What `runlines show` prints of one log file, gathered in one pass."""

    log: LogFile
    starts: list[dict[str, Any]] = field(default_factory=list)
    ends: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    spans: dict[str, dict[str, float]] = field(default_factory=dict)
    # (event, field) -> (value, step): a metric is a field of one event
    last: dict[tuple[str, str], tuple[Any, Any]] = field(default_factory=dict)
    attempts: list[dict[str, Any]] = field(default_factory=list)  # attempt, started, status...
    # per event: records a later attempt superseded, which load() leaves out (see _rules)
    superseded: dict[str, int] = field(default_factory=dict)
    _kept: dict[tuple[str, Any], list[int]] = field(default_factory=dict)  # [attempt, count]
    first_ts: float | None = None
    last_ts: float | None = None
    status: str = "died"

    def add(self, record: dict[str, Any]) -> None:
        """Count *record* in."""
        event = record.get("event")
        name = event if isinstance(event, str) else "(no event)"
        self.counts[name] = self.counts.get(name, 0) + 1
        ts = _ts(record)
        self.first_ts = ts if self.first_ts is None else self.first_ts
        self.last_ts = ts if ts is not None else self.last_ts
        self._supersede(name, record)
        if name == "run_start":
            self.starts.append(record)
            number = as_attempt(record.get("attempt"))
            previous = self.attempts[-1]["attempt"] if self.attempts else 0
            self.attempts.append(
                {"attempt": number or previous + 1, "started": ts, "status": None, "ended": None}
            )
        elif name == "run_end":
            self.ends.append(record)
            self._end(record, ts)
        elif name == "artifact":
            self.artifacts.append(record)
        elif name == "span":
            _add_span(self.spans, record)
        elif name not in LIFECYCLE_EVENTS:
            self._add_values(record)

    def _supersede(self, name: str, record: Mapping[str, Any]) -> None:
        """Count the records of earlier attempts that *record* supersedes, as load() drops them."""
        segment = len(self.starts) + (name == "run_start")
        step = record.get("step")
        if name == "run_start" and is_number(record.get("resume_step")):
            for (event, at), kept in self._kept.items():
                if at > record["resume_step"] and kept[1]:
                    self.superseded[event] = self.superseded.get(event, 0) + kept[1]
                    kept[1] = 0
        if not is_number(step):
            return
        kept = self._kept.setdefault((name, step), [segment, 0])  # 3 and 3.0: one key
        if kept[0] < segment:
            self.superseded[name] = self.superseded.get(name, 0) + kept[1]
            kept[:] = [segment, 0]
        kept[1] += 1

    def _end(self, record: Mapping[str, Any], ts: float | None) -> None:
        if not self.attempts:
            self.attempts.append({"attempt": 1, "started": None, "status": None, "ended": None})
        status = record.get("status")
        attempt = self.attempts[-1]
        attempt.update(status=status if isinstance(status, str) and status else "ok", ended=ts)
        for key in ("dropped", "dropped_by_sink", "exc_type", "signal"):
            if record.get(key):
                attempt[key] = record[key]

    def _add_values(self, record: dict[str, Any]) -> None:
        step = record.get("step")
        event = str(record.get("event"))
        for key, value in record.items():
            if is_number(value) and key not in BOOKKEEPING:
                self.last[(event, key)] = (value, step)


def _add_span(spans: dict[str, dict[str, float]], record: Mapping[str, Any]) -> None:
    name, duration = record.get("name"), record.get("duration_s")
    if not isinstance(name, str) or not is_number(duration):
        return
    stats = spans.setdefault(name, {"count": 0, "total_s": 0.0, "mean_s": 0.0, "max_s": 0.0})
    stats["count"] += 1
    stats["total_s"] += duration
    stats["mean_s"] = stats["total_s"] / stats["count"]
    stats["max_s"] = max(stats["max_s"], duration)


def describe(log: LogFile) -> RunDetails:
    """Return what `runlines show` prints of *log*, reading every record once.

    Raises:
        ReadError: the log has no records (empty, or not JSON Lines).
    """
    details = RunDetails(log)
    seen_end_after_start = False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for record in iter_events(log.path):
            details.add(record)
            if record.get("event") in ("run_start", "run_end"):
                seen_end_after_start = record.get("event") == "run_end"
    if not details.counts:
        what = "none of its lines is a JSON object" if caught else "it is empty"
        msg = f"{log.path} has no records: {what}; pass a .jsonl log written by runlines.Run"
        raise ReadError(msg, str(log.path))
    for warning in caught:
        warnings.warn(warning.message, warning.category, stacklevel=2)
    if "(no event)" in details.counts and len(details.counts) == 1:
        msg = f"{log.path} is not a runlines log: no record has an 'event' field"
        raise ReadError(msg, str(log.path))
    _finish(details, ended=seen_end_after_start)
    return details


def _finish(details: RunDetails, *, ended: bool) -> None:
    """Set the status (from the last run_end, or the lock) and the run_end's span summary."""
    if details.ends and ended:
        status = details.ends[-1].get("status")
        details.status = status if isinstance(status, str) and status else "ok"
    else:
        details.status = "running" if is_locked(details.log.path) else "died"
    for attempt in details.attempts[:-1]:
        attempt["status"] = attempt["status"] or "died"
    if details.attempts and not ended:
        details.attempts[-1]["status"] = details.status
    spans = details.ends[-1].get("spans") if details.ends else None
    if isinstance(spans, dict) and all(isinstance(stats, dict) for stats in spans.values()):
        details.spans = spans


@dataclass(frozen=True, slots=True)
class ArtifactMatch:
    """A run that registered a file: where, in which attempt and at which step."""

    log: LogFile
    attempt: int
    record: dict[str, Any]


def find_artifact(digest: str, logs: Iterable[LogFile]) -> list[ArtifactMatch]:
    """Return the artifact records with sha256 *digest* in *logs*.

    Only the lines that hold both ``"artifact"`` and the digest are parsed, and the run_start
    lines, for the attempt.
    """
    matches: list[ArtifactMatch] = []
    for log in logs:
        try:
            matches += _artifacts_in(log, digest.lower())
        except ReadError as err:  # another user's log, one deleted meanwhile: the others count
            reason = unreadable_reason(err)
            if reason is None:
                raise
            warn_unreadable(log.path, reason)
    return matches


def _artifacts_in(log: LogFile, digest: str) -> list[ArtifactMatch]:
    attempt = 1
    matches = []
    found = lines_containing(log.path, (digest.encode(), b'"run_start"'))
    lines = ((at, raw) for at, raw in found if b'"run_start"' in raw or b'"artifact"' in raw)
    for _, record in records_of(lines):
        if record.get("event") == "run_start":
            attempt = record["attempt"] if is_number(record.get("attempt")) else attempt + 1
        elif record.get("event") == "artifact" and record.get("sha256") == digest:
            matches.append(ArtifactMatch(log, attempt, record))
    return matches
