"""The numpy twin of the attempt rules (see `runlines.reading._rules`): each row's attempt,
whether a later attempt supersedes it, and the event filter.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from runlines.errors import FieldError
from runlines.reading._buffers import compute as pc
from runlines.reading._buffers import numpy_of, strings, valid_of
from runlines.reading._columnar.blocks import Bools, Ints, ParsedLog
from runlines.reading._columnar.columns import Columns, Numbers, as_floats, number_or_nan, values_at
from runlines.reading._rules import (
    attempt_numbers,
    did_you_mean,
    step_cutoffs,
)


def rows_per_log(logs: list[ParsedLog]) -> list[tuple[int, int]]:
    bounds: list[tuple[int, int]] = []
    start = 0
    for log in logs:
        bounds.append((start, start + log.num_rows))
        start += log.num_rows
    return bounds


def start_fields(table: Columns, starts: Ints, name: str) -> list[Any]:
    """Return field *name* of the run_start records at output rows *starts*."""
    if name not in table.names:
        return [None] * len(starts)
    return values_at(table.get(name), starts)


def attempts_of(table: Columns, logs: list[ParsedLog]) -> tuple[Ints, Bools]:
    """Return each row's attempt and whether a later attempt supersedes it (see `_rules`)."""
    known = [log.attempts for log in logs]
    if logs and all(pair is not None for pair in known):  # every log read from its copy alone
        firsts = [pair[0] for pair in known if pair is not None]
        seconds = [pair[1] for pair in known if pair is not None]
        if len(logs) == 1:
            return firsts[0], seconds[0]
        return np.concatenate(firsts), np.concatenate(seconds)

    attempt = np.ones(table.num_rows, dtype=np.int64)
    superseded = np.zeros(table.num_rows, dtype=bool)
    segment = np.zeros(table.num_rows, dtype=np.int64)  # run_starts before the row, per log
    starts = np.flatnonzero(table.matches("event", ["run_start"]))
    numbers = start_fields(table, starts, "attempt")
    resumes = np.array([number_or_nan(r) for r in start_fields(table, starts, "resume_step")])
    steps = as_floats(table.get("step")) if "step" in table.names else None
    for first, stop in rows_per_log(logs):
        mine = (starts >= first) & (starts < stop)
        # the rows before the first run_start, then those from each run_start to the next
        lengths = np.diff(np.concatenate(([0], starts[mine] - first, [stop - first])))
        nums = attempt_numbers([n for n, m in zip(numbers, mine, strict=True) if m])
        attempt[first:stop] = np.repeat([1, *nums], lengths)
        segment[first:stop] = np.repeat(np.arange(len(nums) + 1), lengths)
        if steps is not None and not np.isnan(resumes[mine]).all():
            cutoff = np.repeat(step_cutoffs(resumes[mine].tolist()), lengths)
            superseded[first:stop] = steps[first:stop] > cutoff
    if steps is not None and len(segment) and segment.max() > 0:
        superseded |= rewritten(table, logs, segment, steps, superseded)
    return attempt, superseded


def rewritten(
    table: Columns, logs: list[ParsedLog], segment: Ints, steps: Any, known: Bools
) -> Bools:
    """Return where a later attempt of the same log wrote a record of the same (event, step).

    Rows *known* to be superseded, and those of each log's last attempt, are no candidates;
    only the rows that may be a candidate's twin are sorted (none, as a rule: a resumed
    attempt starts after its resume_step, past which the earlier records are *known*).
    """
    sizes = [log.num_rows for log in logs]
    which = np.repeat(np.arange(len(logs)), sizes)
    starts = np.cumsum([0, *sizes])[:-1]
    firsts = np.repeat(segment[np.minimum(starts, max(len(segment) - 1, 0))], sizes)
    ends = [segment[a : a + n].max() if n else 0 for a, n in zip(starts, sizes, strict=True)]
    lasts = np.repeat(ends, sizes)
    with np.errstate(invalid="ignore"):
        stepped = ~np.isnan(steps)
    candidates = stepped & ~known & (segment < lasts)
    out = np.zeros(table.num_rows, dtype=bool)
    if not candidates.any():
        return out
    low, high = steps[candidates].min(), steps[candidates].max()
    twins = stepped & (segment > firsts) & (steps >= low) & (steps <= high)
    if not twins.any():
        return out
    low, high = steps[twins].min(), steps[twins].max()
    candidates &= (steps >= low) & (steps <= high)
    codes = text_codes(table.get("event"))
    rows = np.flatnonzero((candidates | twins) & (codes >= 0))
    order = rows[np.lexsort((steps[rows], codes[rows], which[rows]))]
    keys = np.stack((which[order], codes[order], steps[order]))
    cuts = np.flatnonzero((keys[:, 1:] != keys[:, :-1]).any(axis=0)) + 1
    bounds = np.concatenate(([0], cuts)).astype(np.int64)
    latest = np.zeros(0, np.int64)
    if len(order):
        latest = np.repeat(
            np.maximum.reduceat(segment[order], bounds), np.diff([*bounds, len(order)])
        )
    out = np.zeros(table.num_rows, dtype=bool)
    out[order] = segment[order] < latest
    return out


def text_codes(column: Any) -> Ints:
    """Return a code per row that tells its text value apart; -1 where it is no text."""
    if isinstance(column, Numbers):
        return np.full(len(column), -1, dtype=np.int64)
    if isinstance(column, np.ndarray):
        texts = [v if isinstance(v, str) else None for v in column.tolist()]
        column = strings(texts)
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    indices = pc.dictionary_encode(column).indices
    codes = numpy_of(indices).astype(np.int64)
    codes[~valid_of(indices)] = -1
    return codes


def event_rows(table: Columns, names: list[str], skipped: set[str]) -> Bools:
    """Return where the event is one of *names*; raise when none of them occurs at all.

    *skipped* are the events of the buckets that were not read.
    """
    found = table.matches("event", names)
    if found.any() or (table.num_rows == 0 and not skipped):
        return found
    read = {v for v in distinct_texts(table.get("event")) if isinstance(v, str)}
    present = sorted(read | skipped)
    hint = did_you_mean(names[0], present)
    msg = f"no record has event {' or '.join(map(repr, names))}{hint}; events: {', '.join(present)}"
    raise FieldError(msg)


def distinct_texts(column: Any) -> list[Any]:
    if isinstance(column, Numbers):
        return []
    if isinstance(column, np.ndarray):
        return list({v for v in column.tolist() if isinstance(v, str)})
    return pc.unique(column).to_pylist()  # type: ignore[no-any-return]
