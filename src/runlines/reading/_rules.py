"""The rules every reader shares: attempts, superseded records, event filters, first columns.

Attempts: each `run_start` begins an attempt, numbered by its `attempt` field (else one more
than the one before). Superseded records: within one log, a record of an earlier attempt is
superseded when a later attempt rewrote its (event, step): by default every reader keeps the
later attempt's record only. A later attempt's `resume_step` also supersedes every earlier
record past that step. A record without a numeric step is never superseded. `superseded=True`
keeps them all; runs()' bests (`_summary`) count exactly the records kept.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Literal, TypeGuard

from runlines import _layout

Errors = Literal["warn", "raise"]
FIRST_COLUMNS: Final = ("ts", "event", "run")
AGGREGATIONS: Final = ("mean", "median", "min", "max", "first", "last", "sum", "count", "std")
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
HINT: Final = "the run may have crashed mid-write"
# Numeric fields that say how a run went, not what it learned: never metrics, in any view
# (runs(), ls, show, top, diff, the dashboard's charts): the one list.
BOOKKEEPING: Final = frozenset(
    {"ts", "step", "epoch", "attempt", "rank", "pid", "world_size", "resume_step", "dropped",
     "duration_s", "bytes", "exit_code", "count", "n", "_nonfinite", "size_bytes"}
)  # fmt: skip
# Events runlines writes about a run rather than what it learned (lifecycle, captured warnings
# and logging, NaN alarms, stalls, media): their numbers (a warning's line number, the last
# finite value before a NaN, an image's width, a histogram's mean) are no metrics. `system`
# records are: users sort runs by GPU memory.
NOT_METRIC_EVENTS: Final = _layout.LIFECYCLE_EVENTS | {
    _layout.WARNING, _layout.LOG, _layout.NONFINITE, _layout.STALL, _layout.STALL_END,
    *_layout.MEDIA_EVENTS,
    _layout.SUMMARY, _layout.DEFINE_METRIC,
}  # fmt: skip
SEPARATOR: Final = " · "  # between a run and an event in a column label: `baseline · eval`
ELAPSED: Final = "elapsed_s"  # compare(x=...): seconds since each run's first record
# Where a field's name says which way is better (the field vocabulary's metrics).
_LOWER: Final = ("loss", "error", "err", "perplexity", "ppl", "wer", "cer", "mse", "mae", "rmse")
_HIGHER: Final = ("accuracy", "acc", "precision", "recall", "f1", "auc", "bleu", "rouge", "map")


def is_metric_event(event: object) -> TypeGuard[str]:
    """Return whether the numbers of records of *event* are metrics (a name runlines keeps for
    its own records is not, nor a foreign log's event that is no string).
    """
    return isinstance(event, str) and event not in NOT_METRIC_EVENTS


def check_errors(errors: str) -> None:
    """Raise for an *errors* option other than 'warn' and 'raise'."""
    if errors not in ("warn", "raise"):
        msg = f"errors must be 'warn' or 'raise', got {errors!r}"
        raise ValueError(msg)


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """Return ` (did you mean 'x'?)` for the choice closest to *name*, or ''."""
    import difflib  # only an error message needs it: a load does without (tests/test_import)

    close = difflib.get_close_matches(name, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def is_number(value: Any) -> TypeGuard[int | float]:
    """Return whether *value* is an int or a float, not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def to_float(value: Any) -> float:
    """Return a number as a float (an int beyond any float as an infinity), else NaN."""
    if not is_number(value):
        return math.nan
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def as_attempt(value: Any) -> int | None:
    """Return *value* as an attempt number when it is an int that int64 holds, else None."""
    ok = isinstance(value, int) and not isinstance(value, bool) and INT64_MIN <= value <= INT64_MAX
    return value if ok else None


def attempt_numbers(values: Sequence[Any]) -> list[int]:
    """Return each run_start's attempt: its `attempt` field, else one more than the one before.

    An `attempt` that is not an int64 (a foreign or corrupted log) counts as missing.
    """
    numbers: list[int] = []
    for value in values:
        own = as_attempt(value)
        numbers.append(own if own is not None else (numbers[-1] + 1 if numbers else 1))
    return numbers


def step_cutoffs(resumes: Sequence[Any]) -> list[float]:
    """Return the step limit of the records after the k-th run_start (k = 0: before the first).

    A record is superseded when its step exceeds the smallest resume_step of a later attempt;
    a missing (None or NaN) resume_step limits nothing.
    """
    limits = [float("inf")]
    for value in reversed(resumes):
        number = is_number(value) and not (isinstance(value, float) and math.isnan(value))
        limits.append(min(limits[-1], float(value)) if number else limits[-1])
    return limits[::-1]


def event_names(event: str | Iterable[str] | None) -> list[str] | None:
    """Return the event filter as a list of names, or None for every event."""
    if event is None:
        return None
    names = [event] if isinstance(event, str) else list(event)
    if not names or not all(isinstance(n, str) for n in names):
        msg = f"event must be an event name or a list of names, got {event!r}"
        raise TypeError(msg)
    return names


def direction(field: str) -> Literal["min", "max"] | None:
    """Return 'min' when lower values of *field* are better, 'max' when higher, else None.

    The last part of a W&B-style name says it: `train/loss` is a loss, `loss/scale` is not.
    """
    last = field.rsplit("/", 1)[-1]
    words = last.lower().replace("-", "_").replace(".", "_").split("_")
    if any(w in _LOWER for w in words):
        return "min"
    if any(w in _HIGHER for w in words):
        return "max"
    return None


def is_runlines_record(record: Mapping[str, Any]) -> bool:
    """Return whether *record* is shaped as runlines writes every record: a text `event`
    and a numeric `ts`. A log with records but none of these is a foreign JSONL.
    """
    event = record.get("event")
    return isinstance(event, str) and bool(event) and is_number(record.get("ts"))


def foreign_log_message(path: object, *, left_out: bool = False) -> str:
    """Return why *path* is no run: the one wording of every view that refuses it, or
    (*left_out*) of every view that lists runs without it.
    """
    why = "none of its records has a text 'event' and a numeric 'ts'"
    if left_out:
        return f"left out {path}: it is not a runlines log ({why}); the other logs are shown"
    return f"{path} is not a runlines log: {why}; pass a .jsonl log written by runlines.Run"


def config_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, list[Any]]:
    """Return ``{key: [before, after]}`` for each flat config key whose value differs
    (None for a key one side lacks), in *after*'s order, then the keys it dropped.
    """
    changed = {k: [before.get(k), v] for k, v in after.items() if k not in before or before[k] != v}
    changed.update((k, [v, None]) for k, v in before.items() if k not in after)
    return changed


def json_ready(value: Any) -> Any:
    """Return *value* with each non-finite float as the log's `_nonfinite` names it.

    The one convention of every JSON output (`--json`, the dashboard's API): ``"NaN"``,
    ``"Infinity"`` and ``"-Infinity"``; ``null`` is a missing value. Mappings (keys as text),
    lists and tuples are converted all the way down.
    """
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, Mapping):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    return value


def _require(caller: str, names: tuple[str, ...], what: str, extra: str) -> str:
    """Return the install line's message; raise it as an ImportError when any of the packages
    *names* is not installed (found without importing it: a check costs no import)."""
    msg = f"{caller} needs {what}: pip install '{extra}'"
    try:
        missing = any(importlib.util.find_spec(name) is None for name in names)
    except (ImportError, ValueError):  # a module in sys.modules without a spec
        missing = True
    if missing:
        raise ImportError(msg)
    return msg


def import_pandas(caller: str) -> Any:
    """Return pandas, or raise ImportError with the install line when pandas or pyarrow lack."""
    msg = _require(caller, ("numpy", "pandas", "pyarrow"), "pandas and pyarrow", "runlines[pandas]")
    try:
        import pandas as pd  # the door to pandas: every reader that builds a frame passes here
    except ImportError as err:  # installed, but broken: the same install line
        raise ImportError(msg) from err
    return pd


def need_pandas(caller: str) -> None:
    """Raise import_pandas' ImportError when pandas, numpy or pyarrow lack, importing none."""
    _require(caller, ("numpy", "pandas", "pyarrow"), "pandas and pyarrow", "runlines[pandas]")


def import_arrow(caller: str) -> None:
    """Raise ImportError with the install line when numpy or pyarrow lack (a copy's writer)."""
    _require(caller, ("numpy", "pyarrow"), "numpy and pyarrow", "runlines[pandas]")


def import_duckdb(caller: str) -> None:
    """Raise ImportError with the install line when DuckDB lacks (before reading/_duckdb)."""
    _require(caller, ("duckdb",), "DuckDB", "runlines[duckdb]")
