"""A stand-in for `runlines.reading._summary.RunSummary`, the run table's row.

STAND-IN: replace with `runlines.reading._summary.RunSummary` at merge (same interface); it is
imported in one place only, `runlines.serve._runs`.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, TypeGuard

_LIFECYCLE: Final = frozenset({"run_start", "run_end", "span", "artifact", "signal"})
_NOT_METRICS: Final = frozenset(
    {"ts", "step", "epoch", "attempt", "rank", "pid", "world_size", "resume_step", "dropped",
     "n", "exit_code", "count"}
)  # fmt: skip
_LOWER_IS_BETTER: Final = frozenset({"loss", "perplexity", "error", "wer", "cer"})
_HIGHER_IS_BETTER: Final = frozenset({"accuracy", "precision", "recall", "f1", "auc", "bleu"})
_STALLED_AFTER_S: Final = 300.0
_NUMERIC: Final = frozenset({int, float})  # decoded JSON numbers; bool is left out
_DIRECTIONS: dict[str, int] = {}  # field name: _direction(), filled as names are met


def _direction(field: str) -> int:
    """Return -1 when lower is better, 1 when higher is, 0 when unknown."""
    if field in _LOWER_IS_BETTER or field.endswith("_loss"):
        return -1
    return 1 if field in _HIGHER_IS_BETTER else 0


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            _flatten(f"{prefix}.{key}", item, out)
    else:
        out[prefix] = value


class RunSummary:
    """One run's table row, built incrementally from its records in file order."""

    def __init__(self, path: str | os.PathLike[str], *, label: str | None = None) -> None:
        self._path = Path(path)
        self._label = label or self._path.name.removesuffix(".jsonl")
        self._attempts = 0
        self._ended: str | None = None  # the last attempt's status, None while it has no run_end
        self._first_ts: float | None = None
        self._last_ts: float | None = None
        self._step: Any = None
        self._config: dict[str, Any] = {}
        self._last: dict[tuple[str, str], Any] = {}
        self._best: dict[tuple[str, str], float] = {}

    def add(self, record: Mapping[str, Any]) -> None:
        """Take one decoded record, as `iter_events` yields it."""
        ts: Any = record.get("ts")
        if (type(ts) is float and ts - ts == 0) or (type(ts) is int and abs(ts) < 2**53):
            if self._first_ts is None:
                self._first_ts = ts
            self._last_ts = ts
        event = record.get("event")
        if type(event) is not str:
            return
        if event in _LIFECYCLE:
            self._add_lifecycle(event, record)
            return
        step = record.get("step")
        if type(step) in _NUMERIC:
            self._step = step
        last, best = self._last, self._best
        for field, value in record.items():
            if type(value) in _NUMERIC and field not in _NOT_METRICS:
                key = (event, field)
                last[key] = value
                direction = _DIRECTIONS.get(field)
                if direction is None:
                    direction = _DIRECTIONS[field] = _direction(field)
                if direction and value - value == 0:  # finite
                    old = best.get(key)
                    if old is None or (value - old) * direction > 0:
                        best[key] = value

    def _add_lifecycle(self, event: str, record: Mapping[str, Any]) -> None:
        if event == "run_start":
            attempt = record.get("attempt")
            self._attempts = int(attempt) if _is_number(attempt) else self._attempts + 1
            self._ended = None
            config = record.get("config")
            if isinstance(config, Mapping):
                self._config = {}
                _flatten("config", config, self._config)
        elif event == "run_end":
            status = record.get("status")
            self._ended = status if isinstance(status, str) and status else "ok"

    def row(self, *, alive: bool | None = None, now: float | None = None) -> dict[str, Any]:
        """Return the table row; *alive* says whether a writer holds the log's lock."""
        row: dict[str, Any] = {
            "run": self._label,
            "path": str(self._path),
            "status": self._status(alive, now),
            "attempts": self._attempts,
            "started": _utc(self._first_ts),
            "duration_s": _duration(self._first_ts, self._last_ts),
            "step": self._step,
        }
        row.update(self._config)
        row.update({f"{event}.{field}": value for (event, field), value in self._last.items()})
        row.update({f"{e}.{f}.best": value for (e, f), value in self._best.items()})
        return row

    def _status(self, alive: bool | None, now: float | None) -> str:
        if self._ended is not None:
            return self._ended
        if not alive:
            return "died"
        quiet = None if now is None or self._last_ts is None else now - self._last_ts
        return "stalled" if quiet is not None and quiet > _STALLED_AFTER_S else "running"


def _utc(ts: float | None) -> datetime.datetime | None:
    try:
        return None if ts is None else datetime.datetime.fromtimestamp(ts, datetime.timezone.utc)
    except (OverflowError, ValueError, OSError):  # a ts no calendar holds, from a foreign writer
        return None


def _duration(first: float | None, last: float | None) -> float | None:
    return None if first is None or last is None else last - first
