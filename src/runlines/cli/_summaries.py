"""What `show` and `which` print of a run, gathered from its lines (stdlib and orjson).

`show` reads a run through its `RunSummary`, as `runs()`, `ls`, `top` and the dashboard do.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from runlines._layout import MEDIA_EVENTS
from runlines.errors import ReadError, RunlinesWarning
from runlines.reading._files import LogFile, is_locked
from runlines.reading._lines import iter_events, lines_containing, records_of
from runlines.reading._rules import foreign_log_message, is_number
from runlines.reading._summary import RunSummary


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


@dataclass(slots=True)
class RunDetails:
    """What `runlines show` prints of one log file, gathered in one pass: a view of its
    `RunSummary` (status and duration per attempt, config, last and best values, by the
    rules every view shares) and the counts, spans and artifacts only `show` lists.
    """

    log: LogFile
    summary: RunSummary
    starts: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    media: dict[tuple[str, str], int] = field(default_factory=dict)  # (kind, name) -> records
    # span name -> count, total_s, mean_s, max_s over the span records of every attempt
    spans: dict[str, dict[str, float]] = field(default_factory=dict)
    attempts: list[dict[str, Any]] = field(default_factory=list)  # RunSummary.attempts_detail
    # per event: records a later attempt superseded, which load() leaves out (see _rules)
    superseded: dict[str, int] = field(default_factory=dict)
    _kept: dict[tuple[str, Any], list[int]] = field(default_factory=dict)  # [attempt, count]
    _steps: dict[tuple[str, str], Any] = field(default_factory=dict)  # a field's last step
    status: str = "died"

    def add(self, record: dict[str, Any]) -> None:
        """Count *record* in."""
        self.summary.add(record)
        event = record.get("event")
        name = event if isinstance(event, str) else "(no event)"
        self.counts[name] = self.counts.get(name, 0) + 1
        self._supersede(name, record)
        step = record.get("step")  # the step of each field's last record (None: it had none)
        for key in record:
            self._steps[(name, key)] = step
        if name == "run_start":
            self.starts.append(record)
        elif name == "artifact":
            self.artifacts.append(record)
        elif name in MEDIA_EVENTS:
            kind = (name, str(record.get("name")))
            self.media[kind] = self.media.get(kind, 0) + 1
        elif name == "span":
            _add_span(self.spans, record)

    @property
    def duration_s(self) -> float | None:
        """Seconds the attempts ran, the gaps between them left out (as `runs()` and `ls`)."""
        return self.summary.duration_s

    @property
    def first_ts(self) -> float | None:
        return self.summary.started

    @property
    def last_ts(self) -> float | None:
        return self.summary.last_ts

    @property
    def config(self) -> dict[str, Any]:
        """The run's config, flat: that of the last attempt that gave one."""
        return self.summary.config

    def last_values(self) -> list[dict[str, Any]]:
        """Return each metric's event, field, last value, its step and best (None: no best)."""
        bests = self.summary.bests()
        return [
            {
                "event": event,
                "field": name,
                "value": self.summary.last[key],
                "step": self._steps.get((event, name)),
                "best": bests.get(key),
            }
            for event, name, key in self.summary.metrics()
        ]

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
        ReadError: the log has no records (empty, or not JSON Lines), or is no runlines log.
    """
    details = RunDetails(log, RunSummary(log.path))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for record in iter_events(log.path):
            details.add(record)
    if not details.counts:
        what = "none of its lines is a JSON object" if caught else "it is empty"
        msg = f"{log.path} has no records: {what}; pass a .jsonl log written by runlines.Run"
        raise ReadError(msg, str(log.path))
    for warning in caught:
        warnings.warn(warning.message, warning.category, stacklevel=2)
    if not details.summary.is_runlines_log():
        raise ReadError(foreign_log_message(log.path), str(log.path))
    alive = None if details.summary.ended is not None else is_locked(log.path)
    details.status = details.summary.status(alive=alive)
    details.attempts = details.summary.attempts_detail(alive=alive)
    return details


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
