"""`diff(a, b)`: what differs between two runs: config, environment, and where metrics part."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from runlines._layout import RUN_START, flatten
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
from runlines.reading._summary import RunSummary, lifecycle

__all__ = ["MetricDiff", "RunDiff", "check_tolerance", "diff"]

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
    # the string fields that tell the differing record from the others of its step (split)
    where: dict[str, str | None] = dataclasses.field(default_factory=dict)

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
    # the command lines (run_start's `argv`) when they differ: (a, b); None when the same
    argv: tuple[Any, Any] | None = None
    # per run ("a", "b"): each attempt's attempt, status and config_changes ({key: [before,
    # after]}), by the rules of `runs()` and `show`
    attempts: dict[str, list[dict[str, Any]]] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Return the diff as JSON-ready values: `runlines diff --json` and `/api/diff` print it.

        ``{a, b, added: {key: b}, removed: {key: a}, changed: {key: [a, b]}, environment:
        {key: [a, b]}, metrics: [{event, field, step, a, b, last_shared_step, where, agrees}],
        argv: [a, b] or null, attempts: {a: [{attempt, status, config_changes}], b: [...]}}``;
        non-finite floats are the strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"``.
        ``where`` names the differing record by its string fields: ``{"split": "val"}``.
        """
        out = dataclasses.asdict(self)
        out["changed"] = {k: list(v) for k, v in self.changed.items()}
        out["environment"] = {k: list(v) for k, v in self.environment.items()}
        out["argv"] = None if self.argv is None else list(self.argv)
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

    Config keys (nested keys dotted) added, removed and changed; the command lines (`argv`)
    when they differ; the environment both runs
    recorded in their run_start (git, python, host, packages, gpu...); and for every
    (event, field) both logged, the first step where |a - b| > atol + rtol * |b|, with both
    values, or the last shared step when they agree. Every record of a step is compared:
    records of one (event, step) are matched by the string fields that tell them apart
    (``split="val"``, ``split="test"``), then by their order.

    Raises:
        ReadError: *a* or *b* is not one log file, or is no runlines log.
        ValueError: *rtol* or *atol* is not a finite number >= 0.
    """
    check_tolerance("rtol", rtol)
    check_tolerance("atol", atol)
    pd = import_pandas("diff()")
    marks_a, marks_b = _lifecycle(a), _lifecycle(b)
    start_a, start_b = _last_start(marks_a), _last_start(marks_b)
    run_a, run_b = _summary(*marks_a), _summary(*marks_b)
    config_a, config_b = run_a.config, run_b.config  # the last attempt that gave one
    env_a, env_b = _environment(start_a), _environment(start_b)
    return RunDiff(
        a=os.fspath(a),
        b=os.fspath(b),
        added={k: config_b[k] for k in sorted(config_b.keys() - config_a.keys())},
        removed={k: config_a[k] for k in sorted(config_a.keys() - config_b.keys())},
        changed=_changed(config_a, config_b),
        environment=_changed(env_a, env_b),
        metrics=_metrics(pd, _read(a), _read(b), rtol, atol),
        argv=_argv(start_a, start_b),
        attempts={"a": _attempts(run_a), "b": _attempts(run_b)},
    )


def check_tolerance(name: str, value: object) -> None:
    """Raise ValueError unless *value* is a finite number >= 0 (a NaN, negative or infinite
    tolerance would make a run differ from itself, or agree with anything).
    """
    if not (is_number(value) and math.isfinite(value) and value >= 0):
        msg = f"{name} must be a finite number >= 0 (0: exact), got {value!r}"
        raise ValueError(msg)


def _read(source: str | os.PathLike[str]) -> _Read:
    return load_with_presence(source, "diff()")


def _changed(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Return the keys both *a* and *b* hold with different values, and those values."""
    shared = sorted(a.keys() & b.keys())
    return {key: (a[key], b[key]) for key in shared if not _same(a[key], b[key])}


def _same(a: Any, b: Any) -> bool:
    """Return whether two decoded JSON values are equal, NaN equal to NaN at any depth."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def _lifecycle(source: str | os.PathLike[str]) -> tuple[Path, list[dict[str, Any]]]:
    """Return the one log of *source* and its run_start and run_end records."""
    logs = [log for log in find_logs(source) if log.rank is None]
    if len(logs) != 1:
        msg = f"diff compares two runs: {source} holds {len(logs)} runs; pass one log file"
        raise ReadError(msg, os.fspath(source))
    return logs[0].path, [record for _, record in lifecycle(logs[0].path)]


def _argv(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[Any, Any] | None:
    """Return the two runs' command lines when they differ (the last attempts'), else None."""
    argv_a, argv_b = a.get("argv"), b.get("argv")
    return None if _same(argv_a, argv_b) else (argv_a, argv_b)


def _summary(path: Path, marks: list[dict[str, Any]]) -> RunSummary:
    """Return the summary of a run's lifecycle records: its config and attempts."""
    summary = RunSummary(path)
    for record in marks:
        summary.add(record)
    return summary


def _attempts(summary: RunSummary) -> list[dict[str, Any]]:
    """Return each attempt's number, status and config changes."""
    keys = ("attempt", "status", "config_changes")
    # only lifecycle records were read: no stall can be told, a live attempt is running
    found = summary.attempts_detail(now=summary.last_ts)
    return [{key: attempt[key] for key in keys} for attempt in found]


def _last_start(marks: tuple[Path, list[dict[str, Any]]]) -> Mapping[str, Any]:
    starts = [r for r in marks[1] if r.get("event") == RUN_START]
    return starts[-1] if starts else {}


def _environment(start: Mapping[str, Any]) -> dict[str, Any]:
    plain = {k: v for k, v in start.items() if k not in _NOT_ENVIRONMENT}
    return flatten(plain)


def _metrics(pd: Any, read_a: _Read, read_b: _Read, rtol: float, atol: float) -> list[MetricDiff]:
    (frame_a, present_a), (frame_b, present_b) = read_a, read_b
    if "step" not in frame_a.columns or "step" not in frame_b.columns:
        return []
    found = []
    events = set(frame_a["event"].dropna()) & set(frame_b["event"].dropna())
    for event in sorted(e for e in events if is_metric_event(e)):
        rows_a = (frame_a["event"] == event) & frame_a["step"].notna()
        rows_b = (frame_b["event"] == event) & frame_b["step"].notna()
        keys = sorted(_telling_apart(pd, frame_a, rows_a) | _telling_apart(pd, frame_b, rows_b))
        fields = _numeric(pd, frame_a, rows_a, present_a) & _numeric(pd, frame_b, rows_b, present_b)
        for field in sorted(fields):
            mine_a = _records(pd, frame_a, rows_a & present_a[field], field, keys)
            mine_b = dict(_records(pd, frame_b, rows_b & present_b[field], field, keys))
            shared = [(key, value, mine_b[key]) for key, value in mine_a if key in mine_b]
            if shared:
                found.append(_first_difference(event, field, keys, shared, rtol, atol))
    return found


def _numeric(pd: Any, frame: Any, rows: Any, present: Mapping[str, Any]) -> set[str]:
    """Return the number fields that some of *rows* logged, NaN included; bookkeeping left out."""
    return {
        name
        for name in present
        if name not in BOOKKEEPING
        and not pd.api.types.is_bool_dtype(frame[name].dtype)
        and (rows & present[name]).any()
    }


def _telling_apart(pd: Any, frame: Any, rows: Any) -> set[str]:
    """Return the string fields whose values tell two of *rows* of one step apart (split)."""
    found = set()
    for name in frame.columns:
        dtype = frame[name].dtype
        if name in ("ts", "event", "run", "step") or not (
            pd.api.types.is_object_dtype(dtype) or pd.api.types.is_string_dtype(dtype)
        ):
            continue
        texts = frame.loc[rows, name].map(_text)
        if texts.isna().all():
            continue
        per_step = pd.DataFrame({"step": frame.loc[rows, "step"], "text": texts})
        if per_step.groupby("step")["text"].nunique(dropna=False).gt(1).any():
            found.add(name)
    return found


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _records(pd: Any, frame: Any, rows: Any, field: str, keys: list[str]) -> list[tuple[Any, Any]]:
    """Return ``((step, *key values, n), value)`` of *field* over *rows*, in step order: the
    n-th record of its step with those key values (NaN kept).
    """
    picked = frame.loc[rows, ["step", field, *keys]].sort_values("step", kind="stable")
    ids = pd.DataFrame({"step": picked["step"]})
    for key in keys:
        ids[key] = picked[key].map(_text)
    order = ids.groupby(list(ids.columns), dropna=False, sort=False).cumcount()
    names = zip(*(ids[c].tolist() for c in ids.columns), order.tolist(), strict=True)
    values = picked[field].tolist()
    return [(tuple(map(_plain, name)), v) for name, v in zip(names, values, strict=True)]


def _first_difference(
    event: str,
    field: str,
    keys: list[str],
    shared: list[tuple[Any, Any, Any]],
    rtol: float,
    atol: float,
) -> MetricDiff:
    last_step = shared[-1][0][0]
    for name, value_a, value_b in shared:
        if not _close(value_a, value_b, rtol, atol):
            where = dict(zip(keys, name[1:-1], strict=True))
            return MetricDiff(event, field, name[0], value_a, value_b, last_step, where)
    return MetricDiff(event, field, None, None, None, last_step)


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
