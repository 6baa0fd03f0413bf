"""A log's copy, column by column, as the history the dashboard would have read from its JSONL.

It gives the series, spans and steps the dashboard keeps, and the run's summary. The few
records the page shows whole (run_start, run_end, artifact, signal) are read from the JSONL
itself, by line number. A copy whose columns do not map exactly onto what the JSONL gives
raises `Inexact`: the JSONL is read instead, which is never wrong, only slower. numpy and
pyarrow are imported at the top: `_history.read_history` imports this module once a log has a
copy to read.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from runlines._layout import (
    ARTIFACT,
    MEDIA_EVENTS,
    RUN_END,
    RUN_START,
    SIGNAL,
    SPAN,
    open_regular,
)
from runlines.dashboard._series import NUMERIC, Series, as_float
from runlines.reading import LogFile, _columnar, _copies, decode_line
from runlines.reading._rules import BOOKKEEPING as NOT_SERIES
from runlines.reading._rules import is_metric_event
from runlines.reading._summary import RunSummary

if TYPE_CHECKING:
    import numpy.typing as npt

    _Ints = npt.NDArray[np.int64]
    _Floats = npt.NDArray[np.float64]
    _Bools = npt.NDArray[np.bool_]

__all__ = ["History", "Inexact", "history_of"]

# the run page's records, and the media records /api/media lists
SHOWN_WHOLE: Final = frozenset({RUN_START, RUN_END, ARTIFACT, SIGNAL, *MEDIA_EVENTS})
_EXACT_INT: Final = 2**53  # beyond it, a float comparison of ints may tie where Python's does not
_BLOCK_BYTES: Final = 1 << 20  # of the JSONL, read to find a line


class Inexact(ValueError):
    """The copy's columns cannot give exactly what the JSONL gives: read the JSONL.

    A ValueError, as odd columns are: `read_history` reads the JSONL for either.
    """


@dataclass
class History:
    """What one file's copy gives: the state the dashboard would hold after its covered bytes."""

    identity: tuple[int, int]  # the JSONL's (st_dev, st_ino), as checked against the copy
    covers_bytes: int
    records: int
    torn_lines: int
    series: dict[tuple[str, str], Series] = field(default_factory=dict)
    spans: dict[str, list[float]] = field(default_factory=dict)  # name: [count, total, max]
    last_step: float = 0
    whole: list[dict[str, Any]] = field(default_factory=list)  # SHOWN_WHOLE records, in order
    first_ts: float | None = None
    last_ts: float | None = None
    # per run_start, in order: the first and last finite ts of that attempt's records
    attempt_ts: list[tuple[float | None, float | None]] = field(default_factory=list)
    summary: RunSummary | None = None  # rank 0's, ready to take the records after the copy


def history_of(
    path: Path, log: LogFile, copy: _copies.Copy, before: os.stat_result, label: str | None
) -> History | None:
    """Return the history *copy* (usable, of *log* at *path*, stat *before*) holds.

    None when the log was replaced meanwhile; `Inexact` when the copy's columns cannot give
    what the JSONL gives.
    """
    meta = copy.meta
    parsed = _copies.read_copy(copy)
    after = os.stat(path)
    identity = (before.st_dev, before.st_ino)
    if parsed is None or identity != (after.st_dev, after.st_ino):
        return None
    if {line for line, _ in meta.bad} - set(meta.summary_bad):
        raise Inexact  # a line load() skips and the JSONL reader takes
    columns = _FileColumns(parsed, meta.summary_bad)
    if columns.records != meta.summary["records"]:
        raise Inexact
    history = History(
        identity, meta.covers_bytes, columns.records, torn_lines=len(meta.summary_bad)
    )
    rank = log.rank or 0
    wanted = SHOWN_WHOLE if rank == 0 else frozenset({RUN_START})
    whole = dict(_whole_records(path, columns, wanted, meta.covers_bytes, meta.covers_lines))
    columns.fill(history, whole)
    history.whole = [whole[row] for row in sorted(whole)]
    if rank == 0:
        history.summary = RunSummary.restored(path, meta.summary, label=label)
    del parsed, columns
    pa.default_memory_pool().release_unused()  # mimalloc keeps the copy's freed pages otherwise
    return history


class _FileColumns:
    """The copy's rows the JSONL reader takes, in line order, as the columns the page needs."""

    def __init__(self, parsed: Any, torn: list[int]) -> None:
        self.table = _columnar.Columns([parsed])
        lines = np.zeros(self.table.num_rows, dtype=np.int64)
        for piece, at in zip(
            parsed.pieces, _columnar.lay_out([parsed], None).positions, strict=True
        ):
            lines[at] = piece.lines
        keep = ~np.isin(lines + 1, np.asarray(torn, dtype=np.int64))
        self.rows = np.flatnonzero(keep)  # the records, as rows of the table
        self.lines = lines[self.rows]
        self.records = len(self.rows)
        self.events, self.names = self._event_codes()
        self.ts = _floats(self._column("ts"))

    def _column(self, name: str, *, texts: bool = True) -> Any:
        """Return column *name* at the records' rows: numbers, texts or Python values.

        Without *texts*, a column that holds no number comes as None, and is not built. A
        column is built anew each time: the file's columns are not all held at once.
        """
        if name not in self.table.names or not (texts or self._may_hold_numbers(name)):
            return None
        column = self.table.build(name, self.table.full)
        if isinstance(column, _columnar.Numbers):
            return _columnar.Numbers(column.values[self.rows], column.valid[self.rows])
        if isinstance(column, np.ndarray):
            return column[self.rows]
        return column.take(self.rows)

    def _event_codes(self) -> tuple[_Ints, list[str]]:
        """Return each record's event as a code (-1: no text), and the events coded.

        Piece by piece: most pieces hold one event's bucket, whose rows need no look at all.
        """
        names: dict[str, int] = {}
        codes = np.full(self.table.num_rows, -1, dtype=np.int64)
        for piece, at in zip(self.table.pieces, self.table.full.positions, strict=True):
            if piece.event is not None:
                codes[at] = names.setdefault(piece.event, len(names))
                continue
            column = piece.column("event")
            if column is not None and _columnar.arrow_kind(column.type) == "str":
                found, texts = _texts(column)
                known = np.array([names.setdefault(t, len(names)) for t in texts] + [-1])
                codes[at] = known[found]  # a row without a text (-1) takes the -1 at the end
            rows, values = piece.patches.get("event", ([], []))
            for row, value in zip(rows, values, strict=True):
                codes[at[row]] = names.setdefault(value, len(names)) if type(value) is str else -1
        return codes[self.rows], list(names)

    def _may_hold_numbers(self, name: str) -> bool:
        """Return whether field *name* has a number in some row, by the pieces' types."""
        for piece in self.table.pieces:
            place = piece.places.get(name)
            kind = (
                None
                if place is None
                else _columnar.arrow_kind(piece.table.schema.field(place).type)
            )
            if kind in ("int", "float"):
                return True
            if any(type(v) in NUMERIC for v in piece.patches.get(name, ((), ()))[1]):
                return True
        return False

    def codes_of(self, wanted: frozenset[str]) -> _Bools:
        """Return, per record, whether its event is one of *wanted*."""
        chosen = [code for code, name in enumerate(self.names) if name in wanted]
        return np.isin(self.events, chosen)

    def fill(self, history: History, whole: dict[int, dict[str, Any]]) -> None:
        """Fill *history*'s series, spans and steps as taking the records one by one would."""
        finite = np.flatnonzero(np.isfinite(self.ts))
        if len(finite):
            history.first_ts = float(self.ts[finite[0]])
            history.last_ts = float(self.ts[finite[-1]])
        metric = np.isin(self.events, [c for c, n in enumerate(self.names) if is_metric_event(n)])
        span = self.codes_of(frozenset({SPAN}))
        steps = _Values(self._column("step"), self.records)
        resumes: dict[int, Any] = {
            row: record.get("resume_step")
            for row, record in whole.items()
            if record.get("event") == RUN_START and type(record.get("resume_step")) in NUMERIC
        }
        setting = (metric | span) & steps.numeric
        setting[list(resumes)] = True
        last = np.maximum.accumulate(np.where(setting, np.arange(self.records), -1))

        def step_at(row: int) -> Any:
            """Return the step a record at *row* is drawn at: the last one set up to it."""
            source = int(last[row])
            if source < 0:
                return 0
            return resumes[source] if source in resumes else steps.value(source)

        if len(last):
            history.last_step = step_at(len(last) - 1)

        history.attempt_ts = self._attempt_ts(whole)
        cuts = sorted(resumes)
        made: list[tuple[tuple[int, int], tuple[str, str], Series]] = []
        # one series at a time, so that only its own arrays are held; series are independent
        # but for the resumes, which each drop what they supersede of the series before them
        for first, key, floats, rows, at in itertools.chain(
            self._series(metric, step_at), self._spans(history, span, step_at)
        ):
            series = Series()
            for start, stop in zip([0, *cuts], [*cuts, self.records], strict=True):
                low, high = np.searchsorted(rows, [start, stop]).tolist()  # rows ascend
                if floats is None:
                    for row in rows[low:high].tolist():
                        series.add(*at(row))
                else:
                    series.extend(floats[low:high], rows[low:high], at)
                if stop in resumes:  # a no-op for a series yet to appear: it has no points
                    series.drop_after(resumes[stop])
            made.append((first, key, series))
        made.sort(key=lambda item: item[0])  # the order the series first appear in
        history.series = {key: series for _, key, series in made}

    def _attempt_ts(
        self, whole: dict[int, dict[str, Any]]
    ) -> list[tuple[float | None, float | None]]:
        """Return each attempt's first and last finite ts: from its run_start to the next."""
        starts = sorted(row for row, record in whole.items() if record.get("event") == RUN_START)
        spans: list[tuple[float | None, float | None]] = []
        for start, stop in zip(starts, [*starts[1:], self.records][: len(starts)], strict=True):
            ts = self.ts[start:stop]
            finite = ts[np.isfinite(ts)]
            spans.append((float(finite[0]), float(finite[-1])) if len(finite) else (None, None))
        return spans

    def _series(self, metric: _Bools, step_at: Any) -> Iterator[tuple[Any, ...]]:
        """Yield (first row, key, floats, rows, point of a row) of each (event, field) series."""
        for place, name in enumerate(self.table.names):
            if name in NOT_SERIES:
                continue
            values = _Values(self._column(name, texts=False), self.records)
            numeric = values.numeric & metric
            if not numeric.any():
                continue
            rows = np.flatnonzero(numeric)
            floats = values.floats(rows)
            events = self.events[rows]
            for code in np.unique(events).tolist():
                at = events == code
                yield (
                    (int(rows[at][0]), place),
                    (self.names[code], name),
                    None if floats is None else floats[at],
                    rows[at],
                    _point_of(values, self.ts, step_at),
                )

    def _spans(self, history: History, span: _Bools, step_at: Any) -> Iterator[tuple[Any, ...]]:
        """Yield the series of each span name, and note each name's count, total and max."""
        names = self._column("name")
        durations = _Values(self._column("duration_s"), self.records)
        if names is None:
            return
        codes, texts = _texts(names)
        taken = span & durations.numeric & (codes >= 0)
        for code in dict.fromkeys(codes[taken].tolist()):
            rows = np.flatnonzero(taken & (codes == code))
            floats = durations.floats(rows)
            history.spans[texts[code]] = _span_stats(durations, rows, floats)
            yield (
                (int(rows[0]), -1),
                (SPAN, texts[code]),
                floats,
                rows,
                _point_of(durations, self.ts, step_at),
            )


class _Values:
    """One column at the records' rows: which hold a JSON number, and each as Python has it."""

    def __init__(self, column: Any, size: int) -> None:
        self.python: Any = None  # Python's values, for a column of mixed or nested values
        self.numbers: Any = None  # numpy's, for a column of ints or of floats
        if isinstance(column, _columnar.Numbers) and column.values.dtype != np.bool_:
            self.numbers = column.values
            self.numeric: _Bools = column.valid.copy()
        elif isinstance(column, np.ndarray):
            self.python = column
            self.numeric = np.zeros(len(column), dtype=bool)
            # a nested field (config) is None in most rows: look at the others only
            present = np.flatnonzero(np.not_equal(column, None))  # type: ignore[call-overload]
            self.numeric[present] = [type(v) in NUMERIC for v in column[present].tolist()]
        else:  # texts, booleans, or no such field: no numbers
            self.numeric = np.zeros(size, dtype=bool)

    def value(self, row: int) -> Any:
        """Return the value at *row* (which holds a number) as Python has it."""
        if self.python is not None:
            return self.python[row]
        return self.numbers[row].item()

    def floats(self, rows: _Ints) -> _Floats | None:
        """Return the values at *rows* (which hold numbers) as floats, for comparing.

        None when floats would not compare them as Python does (ints beyond 2**53).
        """
        if self.python is None:
            return self.numbers[rows].astype(np.float64)  # type: ignore[no-any-return]
        values = self.python[rows].tolist()
        if any(type(v) is int and abs(v) >= _EXACT_INT for v in values):
            return None  # taken one by one: Python compares such ints with floats exactly
        return np.array(values, dtype=np.float64)


def _point_of(values: _Values, ts: _Floats, step_at: Any) -> Any:
    def at(row: int) -> tuple[Any, float, Any]:
        return step_at(row), float(ts[row]), values.value(row)

    return at


def _span_stats(durations: _Values, rows: _Ints, floats: _Floats | None) -> list[Any]:
    """Return [count, total, max] as adding the durations one by one from [0, 0.0, 0.0] gives."""
    if floats is None:
        stats: list[Any] = [0, 0.0, 0.0]
        for row in rows.tolist():
            value = durations.value(row)
            stats[0] += 1
            stats[1] += value
            stats[2] = max(stats[2], value)
        return stats
    total = float(np.cumsum(np.concatenate(([0.0], floats)))[-1])  # in order, as += adds
    ranked = np.where(np.isnan(floats), -math.inf, floats)
    best: Any = 0.0  # max() keeps the first of equal values, and never takes a NaN
    if ranked.max() > 0.0:
        best = durations.value(int(rows[int(ranked.argmax())]))
    return [len(rows), total, best]


def _texts(column: Any) -> tuple[_Ints, list[str]]:
    """Return a code per row for its text value (-1 for none), and the texts coded."""
    if column is None or isinstance(column, _columnar.Numbers):
        size = 0 if column is None else len(column)
        return np.full(size, -1, dtype=np.int64), []
    if isinstance(column, np.ndarray):
        column = pa.array([v if type(v) is str else None for v in column], type=pa.large_string())
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    encoded = pc.dictionary_encode(column)
    codes = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    return codes, encoded.dictionary.to_pylist()


def _floats(column: Any) -> _Floats:
    """Return a row's ts as the dashboard reads it: a JSON number as a float, else NaN."""
    if isinstance(column, _columnar.Numbers):
        if column.values.dtype == np.bool_:
            return np.full(len(column), np.nan)
        return np.where(column.valid, column.values.astype(np.float64), np.nan)
    if isinstance(column, np.ndarray):
        return np.array([as_float(v) for v in column], dtype=np.float64)
    return np.full(0 if column is None else len(column), np.nan)


def _whole_records(
    path: Path, columns: _FileColumns, wanted: frozenset[str], end: int, total: int
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (row, record) of the records of *wanted* events, decoded from their JSONL lines."""
    rows = np.flatnonzero(columns.codes_of(wanted))
    lines = _lines_at(path, columns.lines[rows].tolist(), end, total)
    for row, line in zip(rows.tolist(), columns.lines[rows].tolist(), strict=True):
        record = decode_line(lines[line])
        if record.get("event") != columns.names[columns.events[row]]:
            raise Inexact  # not the line the copy says: never guess
        yield row, record


def _lines_at(path: Path, numbers: list[int], end: int, total: int) -> dict[int, bytes]:
    """Return lines *numbers* (0-based) of the first *end* bytes of *path*, *total* whole lines.

    Those in the first half are looked for from the start, the others from the end: a run's
    first and last records cost a block each, however long the log.
    """
    with open_regular(path) as stream:
        found = _lines_forward(stream, sorted({n for n in numbers if n < total // 2}))
        found.update(_lines_backward(stream, {n for n in numbers if n >= total // 2}, end, total))
    if len(found) < len(set(numbers)):
        raise Inexact  # the log no longer holds those lines
    return found


def _lines_forward(stream: Any, wanted: list[int]) -> dict[int, bytes]:
    """Return lines *wanted* (ascending), read from the start of *stream* up to the last."""
    found: dict[int, bytes] = {}
    line = 0  # the line the block starts in
    carry = b""  # the start of that line, from the blocks before
    stream.seek(0)
    while len(found) < len(wanted) and (block := stream.read(_BLOCK_BYTES)):
        ends = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 10).tolist()
        for number in wanted[len(found) :]:
            if number >= line + len(ends):
                break
            k = number - line
            found[number] = block[ends[k - 1] + 1 : ends[k]] if k else carry + block[: ends[0]]
        carry = block[ends[-1] + 1 :] if ends else carry + block
        line += len(ends)
    return found


def _lines_backward(stream: Any, wanted: set[int], end: int, total: int) -> dict[int, bytes]:
    """Return lines *wanted* of the first *end* bytes (*total* whole lines), read backwards."""
    found: dict[int, bytes] = {}
    later = 0  # the newlines at and after `pos`
    straddling: int | None = None  # a wanted line that ends at or after `pos` but starts before
    carry = b""  # its bytes from `pos` on
    pos = end
    while len(found) < len(wanted) and pos > 0:
        start = max(0, pos - _BLOCK_BYTES)
        stream.seek(start)
        block = stream.read(pos - start)
        ends = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 10).tolist()
        if straddling is not None and (ends or not start):
            found[straddling] = block[ends[-1] + 1 if ends else 0 :] + carry
            straddling = None
        elif straddling is not None:
            carry = block + carry
        first = total - later - len(ends)  # the line the block's first newline ends
        for number in sorted(n for n in wanted if first <= n < first + len(ends)):
            k = number - first
            if k or not start:
                found[number] = block[ends[k - 1] + 1 if k else 0 : ends[k]]
            else:
                straddling, carry = number, block[: ends[0]]
        later += len(ends)
        pos = start
    return found
