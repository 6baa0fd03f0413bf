"""The run summary a copy stores: computed from the parsed columns at write time, read back
from the footer by runs().

`summary_state` gives what ``RunSummary.add`` over every record (as `iter_events` yields them)
leaves in `RunSummary.state()`, computed with numpy over the columns the pyarrow engine made:
which rows hold a number per (event, field), the bests by attempt, the clock. Python decodes
only the few lines whose values the state keeps as they are: lifecycle records, the last value
of each metric, the first record of each. It declines (returns None, and the caller takes the
Python pass) where the engine and `iter_events` may read a line differently.
"""

from __future__ import annotations

import io
import math
import os
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from runlines import _layout
from runlines._layout import RUN_END, RUN_START, flatten, open_regular
from runlines.errors import RunlinesWarning
from runlines.reading._buffers import compute as pc
from runlines.reading._buffers import numpy_of, strings, text_codes, valid_of
from runlines.reading._columnar import Columns, Numbers, ParsedLog, arrow_kind
from runlines.reading._copies.format import KEY, SUMMARY_KEY, checked_copy
from runlines.reading._files import LogFile, is_locked
from runlines.reading._lines import decode_line, skipped_lines_message
from runlines.reading._rules import (
    BOOKKEEPING,
    as_attempt,
    direction,
    is_metric_event,
    is_number,
    step_cutoffs,
    to_float,
)
from runlines.reading._summary import RECENT_GAPS, RunSummary

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]

BOM: Final = b"\xef\xbb\xbf"


def declines(data: Any) -> bool:
    """Return whether the log bytes *data* (before parsing) need the Python pass.

    They do when the engine and `iter_events` read a line apart: a byte-order mark (load()
    reads its line, iter_events skips it) or invalid UTF-8 (pyarrow reads it, orjson does not).
    Number tokens only pyarrow reads (`Inf`, `-NaN`) are found after parsing (`summary_state`).
    """
    if bytes(data[:3]) == BOM:
        return True
    offsets = pa.py_buffer(np.array([0, len(data)], dtype=np.int64))
    try:
        pa.LargeStringArray.from_buffers(1, offsets, pa.py_buffer(data)).validate(full=True)
    except pa.ArrowInvalid:
        return True
    return False


@dataclass(slots=True)
class Rows:
    """The log's rows in line order: the columns, each row's line and event."""

    table: Columns
    lines: Ints  # each row's 0-based line
    events: list[Any]  # the distinct text events
    codes: Ints  # each row's index in events, -1 where its event is no text
    read_line: Callable[[int], bytes]
    decoded: dict[int, dict[str, Any]]

    def record(self, row: int) -> dict[str, Any]:
        """Return the record of *row* as iter_events yields it."""
        record = self.decoded.get(row)
        if record is None:
            record = self.decoded[row] = decode_line(self.read_line(int(self.lines[row])))
        return record

    def numbers(self, name: str, into: tuple[Bools, Floats] | None = None) -> tuple[Bools, Floats]:
        """Return, per row, whether field *name* holds a number (no bool) and it as a float;
        in the arrays *into*, when given (a row's worth each: fresh ones cost page faults)."""
        size = len(self.lines)
        if into is None:
            held, values = np.zeros(size, dtype=bool), np.full(size, np.nan)
        else:
            held, values = into
            held.fill(False)
            values.fill(np.nan)
        for piece, where in zip(self.table.pieces, self.table.full.positions, strict=True):
            column = piece.column(name)
            if column is not None and arrow_kind(column.type) in ("int", "float"):
                held[where] = valid_of(column) if column.null_count else True
                # ints to floats as float() rounds them: to the nearest
                values[where] = numpy_of(column).astype(np.float64)
            rows, patched = piece.patches.get(name, ((), ()))
            for row, value in zip(rows, patched, strict=True):
                held[where[row]] = is_number(value)
                values[where[row]] = to_float(value)
        return held, values

    def rows_of(self, event: str) -> Ints:
        if event not in self.events:
            return np.zeros(0, np.int64)
        return np.flatnonzero(self.codes == self.events.index(event))


def event_codes(column: Any) -> tuple[list[Any], Any]:
    """Return the distinct text values of *column* and each row's index among them (-1)."""
    if isinstance(column, Numbers):
        return [], np.full(len(column), -1, dtype=np.int64)
    if isinstance(column, np.ndarray):
        texts = [v if isinstance(v, str) else None for v in column.tolist()]
        column = strings(texts)
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    found = text_codes(column)  # numpy's: pyarrow.compute is not imported at close
    if found is not None:
        return found[0], found[1]
    encoded = pc.dictionary_encode(column)
    codes = numpy_of(encoded.indices).astype(np.int64)
    codes[~valid_of(encoded.indices)] = -1
    return encoded.dictionary.to_pylist(), codes


def summary_state(
    parsed: ParsedLog, table: Columns, read_line: Callable[[int], bytes]
) -> dict[str, Any] | None:
    """Return the `RunSummary.state()` of the records of *parsed*, or None to decline.

    *table* holds *parsed*'s columns, and *read_line* returns the bytes of a 0-based line of
    the log. Declines where two (event, field) pairs share a column name (`a.b`/`c` and
    `a`/`b.c`), a line the engine read is one that orjson refuses, or the log holds
    declarations (`summary`, `define_metric` records).
    """
    if parsed.refused or odd_numbers(table, read_line):
        return None
    lines = np.zeros(table.num_rows, dtype=np.int64)
    for piece, where in zip(table.pieces, table.full.positions, strict=True):
        lines[where] = piece.lines
    events, codes = event_codes(table.get("event")) if "event" in table.names else ([], None)
    if codes is None:
        codes = np.full(table.num_rows, -1, dtype=np.int64)
    if _layout.SUMMARY in events or _layout.DEFINE_METRIC in events:
        return None  # declarations (docs/compat.md): the Python pass reads them
    rows = Rows(table, lines, events, codes, read_line, {})
    state: dict[str, Any] = {"records": table.num_rows, "declared": {}, "goals": {}}
    starts = rows.rows_of(RUN_START)
    segment = np.searchsorted(starts, np.arange(table.num_rows), side="right")
    attempts, resumes = lifecycle_of(rows, starts, state)
    clock_state(rows, segment, len(starts), state)
    metrics = metrics_state(rows, segment, attempts, resumes, state)
    return None if metrics is None else state


def odd_numbers(table: Columns, read_line: Callable[[int], bytes]) -> bool:
    """Return whether a non-finite float pyarrow read comes from a line orjson refuses.

    pyarrow reads `Inf` and `-NaN`, which Python's readers refuse (they take NaN, Infinity and
    -Infinity); Run writes none of them (it writes null and `_nonfinite`), so this is rare.
    """
    for piece in table.pieces:
        for name, column in zip(piece.table.column_names, piece.table.columns, strict=True):
            if arrow_kind(column.type) != "float":
                continue
            values = numpy_of(column)
            odd = ~np.isfinite(values) & valid_of(column)
            odd[list(piece.patches.get(name, ((), ()))[0])] = False  # Python read those
            for row in np.flatnonzero(odd).tolist():
                try:
                    decode_line(read_line(int(piece.lines[row])))
                except ValueError:
                    return True
    return False


def lifecycle_of(rows: Rows, starts: Ints, state: dict[str, Any]) -> tuple[list[int], list[Any]]:
    """Fill run, attempts, ended, config and step; return each segment's attempt count and
    the resume_step of each run_start (segment k starts at the k-th run_start; 0: before it).
    """
    attempts, config, resumes = [0], {}, []
    for row in starts.tolist():
        record = rows.record(row)
        own = as_attempt(record.get("attempt"))
        attempts.append(max(attempts[-1] + 1, own or 0))
        if isinstance(record.get("config"), dict) and record["config"]:  # {}: keeps the one before
            config = flatten(record["config"])
        resumes.append(record.get("resume_step"))
    state["attempts"], state["config"] = attempts[-1], config
    ends = rows.rows_of(RUN_END)
    state["ended"] = None
    if len(ends) and (not len(starts) or ends[-1] > starts[-1]):
        status = rows.record(int(ends[-1])).get("status")
        state["ended"] = status if isinstance(status, str) and status else "ok"
    state["run"] = None
    if "run" in rows.table.names:
        texts = texts_at(rows, "run")
        if len(texts):
            state["run"] = rows.record(int(texts[0]))["run"]
    state["step"] = None
    if "step" in rows.table.names:
        held, _ = rows.numbers("step")
        metric = metric_rows(rows)
        found = np.flatnonzero(held & metric)
        if len(found):
            state["step"] = rows.record(int(found[-1]))["step"]
    return attempts, resumes


def texts_at(rows: Rows, name: str) -> Ints:
    """Return the rows where field *name* holds a text value, in line order."""
    held = np.zeros(len(rows.lines), dtype=bool)
    for piece, where in zip(rows.table.pieces, rows.table.full.positions, strict=True):
        column = piece.column(name)
        if column is not None and arrow_kind(column.type) == "str":
            held[where] = valid_of(column)
        patched_rows, patched = piece.patches.get(name, ((), ()))
        for row, value in zip(patched_rows, patched, strict=True):
            held[where[row]] = isinstance(value, str)
    return np.flatnonzero(held)


def metric_rows(rows: Rows) -> Bools:
    """Return, per row, whether its event's numbers are metrics."""
    metric = np.array([is_metric_event(e) for e in rows.events] + [False], dtype=bool)
    return metric[rows.codes]


def clock_state(rows: Rows, segment: Ints, starts: int, state: dict[str, Any]) -> None:
    """Fill started, last_ts, attempt_ts, active_s, gaps, active_ts and stall_seen."""
    size = len(rows.lines)
    held, ts = rows.numbers("ts") if "ts" in rows.table.names else (None, np.full(size, np.nan))
    if held is not None:
        ts = np.where(held, ts, np.nan)
    with np.errstate(invalid="ignore"):
        ticks = np.flatnonzero(np.isfinite(ts))
    background = np.array(
        [isinstance(e, str) and e in _layout.BACKGROUND_EVENTS for e in rows.events] + [False],
        dtype=bool,
    )[rows.codes]
    stall = np.array([e == _layout.STALL for e in rows.events] + [False], dtype=bool)[rows.codes]
    state["started"] = float(ts[ticks[0]]) if len(ticks) else None
    state["last_ts"] = float(ts[ticks[-1]]) if len(ticks) else None
    # per segment: its first and last tick; each run_start adds the segment before it
    firsts: list[float | None] = [None] * (starts + 1)
    lasts: list[float | None] = [None] * (starts + 1)
    if len(ticks):
        at = segment[ticks]
        cuts = np.flatnonzero(np.diff(at)) + 1
        heads, tails = np.concatenate(([0], cuts)), np.concatenate((cuts - 1, [len(ticks) - 1]))
        for head, tail in zip(heads.tolist(), tails.tolist(), strict=True):
            firsts[int(at[head])] = float(ts[ticks[head]])
            lasts[int(at[head])] = float(ts[ticks[tail]])
    active_s = 0.0
    for k in range(starts):
        first, last = firsts[k], lasts[k]
        if first is not None and last is not None:
            active_s += max(0.0, last - first)
    state["active_s"] = active_s
    state["attempt_ts"] = firsts[starts]
    mine = ticks[(segment[ticks] == starts) & ~background[ticks]]
    times = ts[mine]
    forward = times[1:] >= times[:-1]  # a clock that went back adds no gap
    state["gaps"] = (times[1:] - times[:-1])[forward][-RECENT_GAPS:].tolist()
    state["active_ts"] = float(times[-1]) if len(times) else None
    said = np.flatnonzero(stall | ~background)
    state["stall_seen"] = bool(len(said) and stall[said[-1]])


def field_names(table: Columns) -> Iterable[str]:
    names: dict[str, None] = {}
    for piece in table.pieces:
        names.update(dict.fromkeys(piece.table.column_names))
        names.update(dict.fromkeys(piece.patches))
    return [n for n in names if n not in BOOKKEEPING and n not in ("event", "run")]


def metrics_state(
    rows: Rows,
    segment: Ints,
    attempts: list[int],
    resumes: list[Any],
    state: dict[str, Any],
) -> bool | None:
    """Fill last, best and events; return None where two metrics share a column name."""
    metric = metric_rows(rows)
    steps = np.full(len(rows.lines), np.inf)
    if "step" in rows.table.names:
        held, values = rows.numbers("step")
        # a record without a numeric step (or with a NaN one): at infinity, never superseded
        steps = np.where(held & ~np.isnan(values), values, np.inf)
    found: dict[str, tuple[tuple[int, int], str, Ints, Floats]] = {}
    into = np.zeros(len(rows.lines), dtype=bool), np.empty(len(rows.lines))
    for name in field_names(rows.table):  # each field's numbers in the same two arrays
        held, values = rows.numbers(name, into)
        mine = np.flatnonzero(held & metric)
        if not len(mine):
            continue
        codes = rows.codes[mine]
        present = np.flatnonzero(np.bincount(codes, minlength=len(rows.events)))
        for code in present.tolist():  # the events holding it (a count: np.unique sorts)
            at = mine if len(present) == 1 else mine[codes == code]
            key = f"{rows.events[code]}.{name}"
            if key in found:
                return None  # `a.b`/`c` and `a`/`b.c`: their interleaving decides; Python does
            record = rows.record(int(at[0]))
            first = (int(at[0]), list(record).index(name))
            found[key] = (first, name, at, values[at])
    last: dict[str, Any] = {}
    best: dict[str, list[Any]] = {}
    owners: dict[str, tuple[Floats, Ints]] = {}  # per event with a best, in first-seen order
    cutoffs = np.array(step_cutoffs(resumes))
    for key, (_, name, at, values) in sorted(found.items(), key=lambda item: item[1][0]):
        last[key] = rows.record(int(at[-1]))[name]
        event = key[: -len(name) - 1]
        way = None if event == _layout.SYSTEM else direction(name)
        if way is None:
            continue
        if event not in owners:
            owners[event] = owners_of(rows.rows_of(event), steps, segment)
        best[key] = best_of(event, way == "min", owners[event], cutoffs, steps, segment, at, values)
    state["last"], state["best"], state["events"] = last, best, list(owners)
    state["segments"], state["resumes"] = len(attempts) - 1, resumes
    return True


def owners_of(mine: Ints, steps: Floats, segment: Ints) -> tuple[Floats, Ints]:
    """Return the distinct steps of an event's rows *mine*, and the last segment of each."""
    mine = mine[steps[mine] != np.inf]
    order = mine[np.lexsort((segment[mine], steps[mine]))]
    distinct, starts = np.unique(steps[order], return_index=True)
    if not len(distinct):
        return distinct, np.zeros(0, dtype=np.int64)
    return distinct, np.maximum.reduceat(segment[order], starts)


def best_of(
    event: str,
    lower: bool,
    owners: tuple[Floats, Ints],
    cutoffs: Floats,
    steps: Floats,
    segment: Ints,
    at: Ints,
    values: Floats,
) -> list[Any]:
    """Return `_Best.state()` of one metric: its best over the records no later attempt
    superseded, and the step and segment of the first record that holds it.
    """
    numbers = ~np.isnan(values)  # a NaN is never a best
    rows, values = at[numbers], values[numbers]
    mine, where = steps[rows], segment[rows]
    distinct, last = owners
    stepped = mine != np.inf
    owner = where.copy()
    if len(distinct):
        owner[stepped] = last[np.searchsorted(distinct, mine[stepped])]
    kept = np.flatnonzero(~stepped | ((mine <= cutoffs[where]) & (owner == where)))
    if not len(kept):
        return [event, lower, None, math.inf, 0]
    pick = kept[(np.argmin if lower else np.argmax)(values[kept])]
    return [event, lower, float(values[pick]), float(mine[pick]), int(where[pick])]


def line_reader(path: os.PathLike[str] | str, starts: Ints, ends: Ints) -> Any:
    """Return an open reader of lines of *path* by number, from their bounds (close it)."""
    return LineReader(path, starts, ends)


class LineReader:
    def __init__(self, path: os.PathLike[str] | str, starts: Ints, ends: Ints) -> None:
        self.stream = open_regular(path)
        self.starts, self.ends = starts, ends

    def __call__(self, line: int) -> bytes:
        start, end = int(self.starts[line]), int(self.ends[line])
        return os.pread(self.stream.fileno(), end - start, start)

    def close(self) -> None:
        self.stream.close()


def python_summary(path: Path, size: int) -> tuple[dict[str, Any], list[int]]:
    """Return the `RunSummary` state of the log's first *size* bytes, read as `iter_events`
    reads them, and the lines it skips (the copy records them, and runs() warns about them).
    """
    summary = RunSummary(path)
    bad: list[int] = []
    with open_regular(path) as stream:
        for number, raw in enumerate(io.BytesIO(stream.read(size)), start=1):
            if not raw.strip():
                continue
            try:
                record = decode_line(raw)
            except ValueError:
                bad.append(number)
                continue
            summary.add(record)
    return summary.state(), bad


def copy_summary(log: LogFile, label: str | None = None) -> RunSummary | None:
    """Return the `RunSummary` of *log* from its copy and the JSONL after it, or None.

    Reads only the copy's footer: what it covers and the summary, not its columns.
    """
    found = checked_copy(log, (KEY, SUMMARY_KEY), whole=False)
    if found is None:
        return None
    parts, _, log_size = found
    covers, stored = parts[KEY], parts[SUMMARY_KEY]
    summary = RunSummary.restored(log.path, stored["summary"], label=label)
    skipped = list(stored["summary_bad"])
    if log_size > covers["covers_bytes"]:
        add_tail(summary, log.path, covers["covers_bytes"], covers["covers_lines"], skipped)
    if skipped:
        warnings.warn(skipped_lines_message(log.path, skipped), RunlinesWarning, stacklevel=4)
    return summary


def add_tail(summary: RunSummary, path: Path, start: int, lines: int, skipped: list[int]) -> None:
    """Add the records from byte *start* (line *lines* + 1) on to *summary*; add the bad
    lines' numbers to *skipped*.
    """
    with open_regular(path) as stream:
        stream.seek(start)
        for number, raw in enumerate(stream, start=lines + 1):
            if not raw.strip():
                continue
            try:
                record = decode_line(raw)
            except ValueError:
                if not raw.endswith(b"\n") and is_locked(path):
                    break  # the live writer's record still being written
                skipped.append(number)
                continue
            summary.add(record)
