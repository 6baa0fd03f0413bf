"""The rules every reader shares for attempts, resumed steps and event filters."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def attempt_numbers(values: Sequence[Any]) -> list[int]:
    """Return each run_start's attempt: its `attempt` field, else one more than the one before."""
    numbers: list[int] = []
    for value in values:
        ok = isinstance(value, int) and not isinstance(value, bool)
        numbers.append(value if ok else (numbers[-1] + 1 if numbers else 1))
    return numbers


def step_cutoffs(resumes: Sequence[Any]) -> list[float]:
    """Return the step limit of the records after the k-th run_start (k = 0: before the first).

    A record is superseded when its step exceeds the smallest resume_step of a later attempt;
    a missing (None or NaN) resume_step limits nothing.
    """
    limits = [float("inf")]
    for value in reversed(resumes):
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
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
