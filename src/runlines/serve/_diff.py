"""What differs between two runs: config, environment, and where their metrics part."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeGuard

from runlines.reading import iter_events
from runlines.serve._runs import RunState

_NOT_METRICS = frozenset({"run_start", "run_end", "artifact", "signal"})  # lifecycle records
# Environment keys worth comparing; host and pid differ between any two processes.
_ENV_KEYS = ("git_commit", "git_dirty", "python", "runlines", "host", "world_size")


def diff_runs(a: RunState, b: RunState, *, rtol: float = 1e-9, atol: float = 0.0) -> dict[str, Any]:
    """Return what differs from run *a* to run *b*.

    That is the config keys added, removed and changed, the environment that differs, and for
    each (event, field) both logged, the first step where their values part.
    """
    config_a, config_b = _flat(a.config), _flat(b.config)
    return {
        "a": a.label,
        "b": b.label,
        "config": {
            "added": {k: config_b[k] for k in sorted(config_b.keys() - config_a.keys())},
            "removed": {k: config_a[k] for k in sorted(config_a.keys() - config_b.keys())},
            "changed": [
                {"key": k, "a": config_a[k], "b": config_b[k]}
                for k in sorted(config_a.keys() & config_b.keys())
                if config_a[k] != config_b[k]
            ],
        },
        "environment": [
            {"key": k, "a": a.environment.get(k), "b": b.environment.get(k)}
            for k in _ENV_KEYS
            if k in a.environment and k in b.environment and a.environment[k] != b.environment[k]
        ],
        "metrics": _metrics(_by_step(a.path), _by_step(b.path), rtol, atol),
    }


def _flat(config: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(config, Mapping):
        return {}
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(_flat(value, name + "."))
        else:
            out[name] = value
    return out


def _by_step(path: Path) -> dict[tuple[str, str], dict[Any, float]]:
    """Per (event, field), the value at each step; a later record of a step wins (a resume)."""
    values: dict[tuple[str, str], dict[Any, float]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torn lines: the run table counts them
        for record in iter_events(path):
            step, event = record.get("step"), record.get("event")
            if not isinstance(event, str) or event in _NOT_METRICS or not _is_number(step):
                continue
            for name, value in record.items():
                if name not in ("ts", "step") and _is_number(value):
                    values.setdefault((event, name), {})[step] = float(value)
    return values


def _metrics(
    a: dict[tuple[str, str], dict[Any, float]],
    b: dict[tuple[str, str], dict[Any, float]],
    rtol: float,
    atol: float,
) -> list[dict[str, Any]]:
    found = []
    for event, name in sorted(a.keys() & b.keys()):
        left, right = a[(event, name)], b[(event, name)]
        shared = sorted(left.keys() & right.keys())
        if not shared:
            continue
        entry: dict[str, Any] = {"event": event, "field": name, "last_shared_step": shared[-1]}
        for step in shared:
            if not _close(left[step], right[step], rtol, atol):
                entry.update(step=step, a=left[step], b=right[step])
                break
        else:
            entry["step"] = None
        found.append(entry)
    return found


def _close(x: float, y: float, rtol: float, atol: float) -> bool:
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    return math.isclose(x, y, rel_tol=rtol, abs_tol=atol)


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
