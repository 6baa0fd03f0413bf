"""`diff(a, b)`: what differs between two runs: config, environment, and where metrics part."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from typing import Any, Final

from runlines._layout import RUN_START
from runlines.errors import ReadError
from runlines.reading._files import find_logs
from runlines.reading._frames import load_with_presence
from runlines.reading._rules import (
    BOOKKEEPING,
    import_pandas,
    is_metric_event,
    is_number,
    json_ready,
    to_float,
)
from runlines.reading._summary import flatten, lifecycle

__all__ = ["MetricDiff", "RunDiff", "diff"]

_Read = tuple[Any, dict[str, Any]]  # a run's records and where each number field was logged

# run_start fields that identify the process or the attempt, not the environment it ran in
_NOT_ENVIRONMENT: Final = frozenset(
    {"ts", "event", "run", "rank", "attempt", "id", "pid", "config", "resume_step", "argv",
     "world_size", "_nonfinite"}
)  # fmt: skip


@dataclasses.dataclass(frozen=True, slots=True)
class MetricDiff:
    """Where one (event, field) both runs logged first differs, or the last step it agrees."""

    event: str
    field: str
    step: Any  # the first step where the values differ; None when they agree
    a: Any  # the two values at that step
    b: Any
    last_shared_step: Any  # the last step both logged

    @property
    def agrees(self) -> bool:
        """Whether the two runs agree on every step both logged."""
        return self.step is None


@dataclasses.dataclass(frozen=True, slots=True)
class RunDiff:
    """What differs between runs *a* and *b*."""

    a: str
    b: str
    added: dict[str, Any]  # config keys only b has
    removed: dict[str, Any]  # config keys only a has
    changed: dict[str, tuple[Any, Any]]  # config keys whose value differs: (a, b)
    environment: dict[str, tuple[Any, Any]]  # recorded by both, different: (a, b)
    metrics: list[MetricDiff]

    def to_dict(self) -> dict[str, Any]:
        """Return the diff as JSON-ready values: `runlines diff --json` and `/api/diff` print it.

        ``{a, b, added: {key: b}, removed: {key: a}, changed: {key: [a, b]}, environment:
        {key: [a, b]}, metrics: [{event, field, step, a, b, last_shared_step, agrees}]}``;
        non-finite floats are the strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"``.
        """
        out = dataclasses.asdict(self)
        out["changed"] = {k: list(v) for k, v in self.changed.items()}
        out["environment"] = {k: list(v) for k, v in self.environment.items()}
        for metric, item in zip(self.metrics, out["metrics"], strict=True):
            item["agrees"] = metric.agrees
        return {key: json_ready(value) for key, value in out.items()}


def diff(
    a: str | os.PathLike[str],
    b: str | os.PathLike[str],
    *,
    rtol: float = 1e-5,
    atol: float = 1e-8,
) -> RunDiff:
    """Return what differs between the runs logged in *a* and *b* (two log files).

    Config keys (nested keys dotted) added, removed and changed; the environment both runs
    recorded in their run_start (git, python, host, packages, gpu...); and for every
    (event, field) both logged, the first step where |a - b| > atol + rtol * |b|, with both
    values, or the last shared step when they agree.

    Raises:
        ReadError: *a* or *b* is not one log file.
    """
    import_pandas("diff()")
    start_a, start_b = _last_start(a), _last_start(b)
    config_a, config_b = _config(start_a), _config(start_b)
    env_a, env_b = _environment(start_a), _environment(start_b)
    return RunDiff(
        a=os.fspath(a),
        b=os.fspath(b),
        added={k: config_b[k] for k in sorted(config_b.keys() - config_a.keys())},
        removed={k: config_a[k] for k in sorted(config_a.keys() - config_b.keys())},
        changed=_changed(config_a, config_b),
        environment=_changed(env_a, env_b),
        metrics=_metrics(_read(a), _read(b), rtol, atol),
    )


def _read(source: str | os.PathLike[str]) -> _Read:
    return load_with_presence(source, "diff()")


def _changed(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Return the keys both *a* and *b* hold with different values, and those values."""
    return {key: (a[key], b[key]) for key in sorted(a.keys() & b.keys()) if a[key] != b[key]}


def _last_start(source: str | os.PathLike[str]) -> Mapping[str, Any]:
    logs = [log for log in find_logs(source) if log.rank is None]
    if len(logs) != 1:
        msg = f"diff compares two runs: {source} holds {len(logs)} runs; pass one log file"
        raise ReadError(msg, os.fspath(source))
    starts = [r for _, r in lifecycle(logs[0].path) if r.get("event") == RUN_START]
    if not starts:
        return {}
    # an attempt without a config keeps the one before, as in runs()
    configs = [r["config"] for r in starts if isinstance(r.get("config"), Mapping)]
    return {**starts[-1], "config": configs[-1] if configs else None}


def _config(start: Mapping[str, Any]) -> dict[str, Any]:
    config = start.get("config")
    return flatten(config) if isinstance(config, Mapping) else {}


def _environment(start: Mapping[str, Any]) -> dict[str, Any]:
    plain = {k: v for k, v in start.items() if k not in _NOT_ENVIRONMENT}
    return flatten(plain)


def _metrics(read_a: _Read, read_b: _Read, rtol: float, atol: float) -> list[MetricDiff]:
    (frame_a, present_a), (frame_b, present_b) = read_a, read_b
    if "step" not in frame_a.columns or "step" not in frame_b.columns:
        return []
    found = []
    events = set(frame_a["event"].dropna()) & set(frame_b["event"].dropna())
    for event in sorted(e for e in events if is_metric_event(e)):
        rows_a = (frame_a["event"] == event) & frame_a["step"].notna()
        rows_b = (frame_b["event"] == event) & frame_b["step"].notna()
        fields = _numeric(frame_a, rows_a, present_a) & _numeric(frame_b, rows_b, present_b)
        for field in sorted(fields):
            series_a = _by_step(frame_a, rows_a & present_a[field], field)
            series_b = _by_step(frame_b, rows_b & present_b[field], field)
            steps = sorted(set(series_a.index) & set(series_b.index))
            if steps:
                found.append(_first_difference(event, field, steps, series_a, series_b, rtol, atol))
    return found


def _numeric(frame: Any, rows: Any, present: Mapping[str, Any]) -> set[str]:
    """Return the number fields that some of *rows* logged, NaN included; bookkeeping left out."""
    import pandas as pd

    return {
        name
        for name in present
        if name not in BOOKKEEPING
        and not pd.api.types.is_bool_dtype(frame[name].dtype)
        and (rows & present[name]).any()
    }


def _by_step(frame: Any, rows: Any, field: str) -> Any:
    """Return *field* per step over *rows*: the last logged value of each step, NaN kept."""
    picked = frame.loc[rows, ["step", field]].drop_duplicates("step", keep="last")
    return picked.set_index("step")[field]


def _first_difference(
    event: str, field: str, steps: list[Any], a: Any, b: Any, rtol: float, atol: float
) -> MetricDiff:
    for step in steps:
        value_a, value_b = _plain(a[step]), _plain(b[step])
        if not _close(value_a, value_b, rtol, atol):
            return MetricDiff(event, field, _plain(step), value_a, value_b, _plain(steps[-1]))
    return MetricDiff(event, field, None, None, None, _plain(steps[-1]))


def _close(a: Any, b: Any, rtol: float, atol: float) -> bool:
    if not (is_number(a) and is_number(b)):
        return bool(a == b)
    x, y = to_float(a), to_float(b)
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    if math.isinf(x) or math.isinf(y):  # an infinity, or an int beyond any float
        return bool(a == b)
    return abs(x - y) <= atol + rtol * abs(y)


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value
