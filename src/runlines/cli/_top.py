"""The `runlines top` command: a live view of the runs in folders, refreshed from appended bytes.

`Top` follows every log of its sources (new ones are picked up) and feeds each run's
`RunSummary` the records appended since the last refresh; `render_frame` turns its rows into
the lines of one frame; the command draws them on the alternate screen (`_screen`).
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import shutil
import statistics
import sys
import time
import warnings
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from runlines import _layout
from runlines._layout import RUN_START, is_log_name
from runlines.cli._options import seconds
from runlines.cli._summaries import unreadable_reason, warn_unreadable
from runlines.cli._terminal import printable
from runlines.errors import ReadError, RunlinesWarning
from runlines.reading._files import LogFile, check_source, is_locked, log_file, run_labels
from runlines.reading._follow import LogFollower
from runlines.reading._lines import decode_line, lines_containing, open_log
from runlines.reading._rules import BOOKKEEPING, NOT_METRIC_EVENTS, foreign_log_message
from runlines.reading._summary import RunSummary

__all__ = ["Top", "TopRow", "Trend", "add_commands", "render_frame", "sparkline"]

REFRESH_S: Final = 1.0
LOCK_EVERY_S: Final = 5.0  # a killed run shows as died within this
QUICK_BYTES: Final = 8 << 20  # a bigger log starts from its lifecycle lines and last MiB
TAIL_BYTES: Final = 1 << 20
SPARKS: Final = "▁▂▃▄▅▆▇█"
ASCII_SPARKS: Final = "_.-=+*#@"
_TREND_POINTS: Final = 128  # a trend keeps 128 to 256 numbers, however long the run
_PACE_RECORDS: Final = 32  # steps per second over this many last records of the hot event
# Events that say nothing about training's progress: never the hot event, nor its metric.
_QUIET_EVENTS: Final = NOT_METRIC_EVENTS | {_layout.SYSTEM}
_RUNS_DIR: Final = "runs"


@dataclass(frozen=True, slots=True)
class TopRow:
    """What `top` shows of one log file: a run, or one rank of a distributed run."""

    run: str
    status: str
    rank: int | None = None
    step: Any = None
    steps_per_s: float | None = None
    metric: str | None = None  # `<event>.<field>`
    value: Any = None
    trend: tuple[float, ...] = ()
    last: tuple[tuple[str, Any], ...] = ()  # the other metrics, the hot event's first
    cpu_percent: float | None = None
    rss_bytes: float | None = None
    gpu_util_percent: float | None = None
    gpu_mem_used_bytes: float | None = None
    gpu_mem_total_bytes: float | None = None
    nonfinite: int = 0  # the NaN and infinite values the run's metrics logged
    last_nonfinite: tuple[str, float] | None = None  # the last of them: (`<event>.<field>`, value)


# --- following the runs ------------------------------------------------------------------------


class Trend:
    """A metric's values over a whole run, in *points* to 2 x *points* numbers.

    Each number is the mean of `stride` values in a row; when the numbers reach 2 x *points*,
    neighbours are averaged in pairs and the stride doubles, so a long run costs no more.
    """

    __slots__ = ("_count", "_means", "_sum", "points", "stride")

    def __init__(self, points: int) -> None:
        self.points = points
        self.stride = 1
        self._means: list[float] = []
        self._sum = 0.0
        self._count = 0

    def add(self, value: float) -> None:
        self._sum += value
        self._count += 1
        if self._count < self.stride:
            return
        self._means.append(self._sum / self._count)
        self._sum, self._count = 0.0, 0
        if len(self._means) >= 2 * self.points:
            pairs = zip(self._means[::2], self._means[1::2], strict=True)
            self._means = [(a + b) / 2 for a, b in pairs]
            self.stride *= 2

    def values(self) -> tuple[float, ...]:
        """Return the means, oldest first, the one still filling last."""
        partial = (self._sum / self._count,) if self._count else ()
        return (*self._means, *partial)


class RunWatch:
    """One log file followed: its `RunSummary`, the hot event's pace, the main metric's trend."""

    def __init__(self, log: LogFile, *, label: str | None, metric: str | None) -> None:
        self.log = log
        self.label = label
        self.metric = metric  # `--metric`; None: chosen from the records
        self.follower = LogFollower(log.path)
        self.bytes_read = 0
        self._restarts = 0
        self._primed = False
        self._reset()

    def _reset(self) -> None:
        self.summary = RunSummary(self.log.path, label=self.label)
        self.counts: Counter[str] = Counter()
        self.candidates: dict[str, str] = {}  # event -> the field its trend follows
        self.trends: dict[str, Trend] = {}  # `<event>.<field>` -> its values over the run
        self.paces: dict[str, deque[tuple[float, float]]] = {}  # event -> (ts, step or count)
        self.nonfinite = 0
        self.last_nonfinite: tuple[str, float] | None = None

    def refresh(self) -> int:
        """Read the records appended since the last refresh; return the bytes read."""
        if not self._primed:
            try:
                size = self.log.path.stat().st_size
            except FileNotFoundError:  # not written yet: the follower waits for it
                size = 0
            read = self._prime(size) if size > QUICK_BYTES else 0
            self._primed = True  # after the reads: a log that could not be read is primed later
            if read:
                return read
        before = self.follower.bytes_read
        records = self.follower.poll()
        if self.follower.restarts != self._restarts:  # replaced or truncated: start over
            self._restarts = self.follower.restarts
            self._reset()
        read = self.follower.bytes_read - before
        self.bytes_read += read
        for record in records:
            self.add(record)
        return read

    def _prime(self, size: int) -> int:
        """Start a big log from its lifecycle lines and its last MiB, as `ls` reads it.

        Status, attempts and step are exact; the trend and the pace start from the tail.
        Returns the bytes read (the lifecycle scan reads every byte but decodes few).
        """
        path = self.log.path
        found = dict(lines_containing(path, (b'"run_start"', b'"run_end"')))
        with open_log(path) as stream:
            start = stream.seek(max(0, size - TAIL_BYTES))
            block = stream.read(size - start)
        first = block.find(b"\n") + 1 if start else 0  # the first line may start before it
        end = start + block.rfind(b"\n") + 1  # a torn last line waits for its newline
        offset = start + first
        for raw in block[first : end - start].split(b"\n"):
            found.setdefault(offset, raw)
            offset += len(raw) + 1
        for at, raw in sorted(found.items()):
            if at >= end or not raw.strip():
                continue
            try:
                self.add(decode_line(raw))
            except ValueError:
                continue  # a torn line; the full readers warn about it
        self.follower = LogFollower(path, end)
        self.bytes_read += size
        return size

    def add(self, record: Mapping[str, Any]) -> None:
        """Count *record* in: the summary, and the trend and pace of its event."""
        self.summary.add(record)
        event = record.get("event")
        if not isinstance(event, str) or event in _QUIET_EVENTS:
            if event == RUN_START:
                self.paces.clear()  # a new attempt: its pace is its own
            return
        self.counts[event] += 1
        self._pace(event, record)
        self._count_nonfinite(event, record)
        field = self.candidates.get(event)
        if field is None:  # until a record of the event has a metric to follow
            field = _trend_field(event, record, self.metric)
            if field:
                self.candidates[event] = field
        value: Any = record.get(field) if field else None
        if type(value) in (int, float) and math.isfinite(value):
            key = f"{event}.{field}"
            trend = self.trends.get(key)
            if trend is None:
                trend = self.trends[key] = Trend(_TREND_POINTS)
            trend.add(float(value))

    def _count_nonfinite(self, event: str, record: Mapping[str, Any]) -> None:
        """Count the NaN and infinite metric values of *record* (decoded: floats again)."""
        for name, value in record.items():
            if type(value) is float and not math.isfinite(value) and name not in BOOKKEEPING:
                self.nonfinite += 1
                self.last_nonfinite = (f"{event}.{name}", value)

    def _pace(self, event: str, record: Mapping[str, Any]) -> None:
        ts: Any = record.get("ts")
        step: Any = record.get("step")
        if type(ts) not in (int, float):
            return
        pace = self.paces.get(event)
        if pace is None:
            pace = self.paces[event] = deque(maxlen=_PACE_RECORDS)
        count = pace[-1][1] + 1 if pace else 0.0
        pace.append((float(ts), float(step) if type(step) in (int, float) else count))

    def hot_event(self) -> str | None:
        """Return the event with the most records, lifecycle and background records left out."""
        if self.metric is not None:
            return self.metric.split(".", 1)[0]
        return self.counts.most_common(1)[0][0] if self.counts else None

    def main_metric(self, hot: str | None) -> str | None:
        """Return `--metric`, else the trend field of the *hot* event; None for no metric."""
        if self.metric is not None:
            return self.metric
        field = self.candidates.get(hot) if hot is not None else None
        return f"{hot}.{field}" if field else None

    def row(self, *, rank: int | None, alive: bool | None, now: float) -> TopRow:
        """Return what the frame shows of this log at *now*."""
        summary = self.summary
        status = summary.status(alive=alive, now=now)
        hot = self.hot_event()
        metric = self.metric or (
            f"{hot}.{self.candidates[hot]}" if hot in self.candidates else None
        )
        if metric is not None and metric.endswith("."):
            metric = None  # the hot event has no metric field
        values = summary.last
        return TopRow(
            run=summary.label or summary.run or self.log.run,
            status=status,
            rank=rank,
            step=summary.step,
            steps_per_s=_steps_per_s(self.paces.get(hot or "")) if status == "running" else None,
            metric=metric,
            value=values.get(metric) if metric else None,
            trend=self.trends[metric].values() if metric in self.trends else (),
            last=_other_metrics(values, hot, metric),
            cpu_percent=_number(values.get(f"{_layout.SYSTEM}.cpu_percent")),
            rss_bytes=_number(values.get(f"{_layout.SYSTEM}.rss_bytes")),
            gpu_util_percent=_gpu(values, "util_percent", statistics.fmean),
            gpu_mem_used_bytes=_gpu(values, "mem_used_bytes", math.fsum),
            gpu_mem_total_bytes=_gpu(values, "mem_total_bytes", math.fsum),
            nonfinite=self.nonfinite,
            last_nonfinite=self.last_nonfinite,
        )


def _trend_field(event: str, record: Mapping[str, Any], metric: str | None) -> str:
    """Return the field of *event* whose values the trend follows: '' for none."""
    if metric is not None:
        wanted_event, _, field = metric.partition(".")
        return field if event == wanted_event else ""
    fields = [
        name
        for name, value in record.items()
        if type(value) in (int, float) and name not in BOOKKEEPING and name not in ("run",)
    ]
    lossy = [name for name in fields if "loss" in name.lower()]
    return (lossy or fields or [""])[0]


def _steps_per_s(pace: deque[tuple[float, float]] | None) -> float | None:
    if not pace or len(pace) < 2:
        return None
    (t0, s0), (t1, s1) = pace[0], pace[-1]
    if t1 <= t0 or s1 < s0:
        return None
    return (s1 - s0) / (t1 - t0)


def _other_metrics(
    values: Mapping[str, Any], hot: str | None, metric: str | None
) -> tuple[tuple[str, Any], ...]:
    """Return the last values to show after the main metric: the hot event's, then the rest."""
    others = [
        (key, value)
        for key, value in values.items()
        if key != metric and not key.startswith(f"{_layout.SYSTEM}.")
    ]
    own = f"{hot}."
    others.sort(key=lambda item: not item[0].startswith(own))  # stable: first-seen order kept
    return tuple((key.removeprefix(own), value) for key, value in others)


def _number(value: Any) -> float | None:
    return float(value) if type(value) in (int, float) and math.isfinite(value) else None


def _gpu(
    values: Mapping[str, Any], suffix: str, combine: Callable[[list[float]], float]
) -> float | None:
    """Return *combine* of `system.gpu<i>_<suffix>` over the run's GPUs; None without any."""
    found = []
    for i in range(64):
        value = _number(values.get(f"{_layout.SYSTEM}.gpu{i}_{suffix}"))
        if value is None:
            break
        found.append(value)
    return combine(found) if found else None


class Top:
    """The runs of *sources* (folders and log files), followed from the bytes appended to them.

    `refresh()` reads what was appended to each log since the last call, and picks up logs
    that appeared in a folder; `rows()` returns one `TopRow` per log, rank files after their
    run. *clock* gives the time the stall rule compares with; *alive* says whether a log's
    writer holds its lock, asked of a run without `run_end` at most every LOCK_EVERY_S of
    *monotonic* (a probe is the costly part of a refresh; a run that ends says so in its log).
    With *wait*, a source that does not exist yet is waited for (`waiting`), as `tail -f`
    waits for a log: its runs are picked up by the refresh after it appears.
    """

    def __init__(
        self,
        sources: Sequence[str | os.PathLike[str]],
        *,
        metric: str | None = None,
        clock: Callable[[], float] = time.time,
        alive: Callable[[Path], bool] = is_locked,
        monotonic: Callable[[], float] = time.monotonic,
        wait: bool = False,
    ) -> None:
        self.sources = [Path(source) for source in sources]
        # the sources not there yet, waited for; each leaves once it appears
        self.waiting = [s for s in self.sources if wait and not s.exists()]
        self.metric = metric
        self.clock = clock
        self.alive = alive
        self.monotonic = monotonic
        self.watches: dict[Path, RunWatch] = {}
        self._probed: dict[Path, tuple[float, bool]] = {}  # log -> (when, held)
        self.unreadable: dict[Path, str] = {}  # logs left out of the rows -> why
        self._named: set[Path] = set()  # the unreadable logs a warning has named
        self._check_sources()

    def _check_sources(self) -> None:
        for source in self.sources:
            # a folder may be empty: its runs can start later
            if not source.is_dir() and source not in self.waiting:
                check_source(source)

    def refresh(self) -> int:
        """Pick up new logs, read what each log gained; return the bytes read in all."""
        self._discover()
        read = 0
        for path, watch in self.watches.items():
            try:
                read += watch.refresh()
            except (OSError, ReadError) as err:  # another user's, one deleted meanwhile
                reason = unreadable_reason(err)
                if reason is None:
                    raise
                self._left_out(path, reason)
            else:  # a log deleted after it could not be read stays out
                if path in self.unreadable and path.exists():
                    del self.unreadable[path]
        return read

    def _left_out(self, path: Path, reason: str) -> None:
        """Leave log *path* out of the rows until it can be read; name it once."""
        if path not in self._named:
            self._named.add(path)
            warn_unreadable(path, reason)
        self.unreadable[path] = reason

    def _discover(self) -> None:
        found: list[LogFile] = []
        if self.waiting:
            self._appeared()
        for source in self.sources:
            if source in self.waiting:
                continue
            if source.is_dir():
                found.extend(self._logs_in(source))
            else:
                found.append(log_file(source))
        if all(log.path in self.watches for log in found):
            return
        labels = run_labels([log for log in found if log.rank is None])
        watches = {}
        for log in found:  # a new log can make an old one's name ambiguous: relabel
            label = labels.get(log.path)
            watch = self.watches.get(log.path) or RunWatch(log, label=label, metric=self.metric)
            watch.label = watch.summary.label = label
            watches[log.path] = watch
        self.watches = dict(
            sorted(watches.items(), key=lambda item: (item[1].log.run, item[1].log.rank or 0))
        )

    def _appeared(self) -> None:
        """Stop waiting for the sources that now exist; refuse one that is no folder or log."""
        for source in [s for s in self.waiting if s.exists()]:
            if not source.is_dir():
                check_source(source)  # a FIFO named like a log would block: refused
            self.waiting.remove(source)

    def _logs_in(self, folder: Path) -> list[LogFile]:
        """Return the logs of *folder*: a new name is checked to be a regular file once."""
        logs = []
        try:
            entries = list(os.scandir(folder))
        except OSError:  # the folder went away: its runs stay as they were last seen
            return [watch.log for watch in self.watches.values() if watch.log.path.parent == folder]
        for entry in entries:
            if not is_log_name(entry.name):
                continue
            path = folder / entry.name
            if path in self.watches or entry.is_file():  # a FIFO named like a log is no log
                logs.append(self.watches[path].log if path in self.watches else log_file(path))
        return logs

    def _is_alive(self, watch: RunWatch) -> bool:
        """Return whether *watch*'s writer holds its lock, probed at most every LOCK_EVERY_S."""
        now = self.monotonic()
        probed = self._probed.get(watch.log.path)
        if probed is None or now - probed[0] >= LOCK_EVERY_S:
            probed = self._probed[watch.log.path] = (now, self.alive(watch.log.path))
        return probed[1]

    def rows(self) -> list[TopRow]:
        """Return one row per log at the clock's time: a run, or one rank of a run."""
        now = self.clock()
        ranked = {watch.log.run for watch in self.watches.values() if watch.log.rank}
        rows = []
        for path, watch in self.watches.items():
            if path in self.unreadable:
                continue
            if watch.summary.records and not watch.summary.shaped:  # a foreign JSONL: no run
                if path not in self._named:
                    self._named.add(path)
                    warnings.warn(foreign_log_message(path, left_out=True), RunlinesWarning, 2)
                continue
            rank = watch.log.rank
            if rank is None and watch.log.run in ranked:
                rank = 0
            alive = None if watch.summary.ended is not None else self._is_alive(watch)
            rows.append(watch.row(rank=rank, alive=alive, now=now))
        return rows


# --- one frame ---------------------------------------------------------------------------------


def sparkline(values: Sequence[float], width: int, *, chars: str = SPARKS) -> str:
    """Return *values* as at most *width* bars, the lowest as the first of *chars*.

    More values than bars are averaged in *width* runs of neighbours, so the line spans them all.
    """
    finite = [v for v in values if math.isfinite(v)]
    if width <= 0 or not finite:
        return ""
    n = len(finite)
    shown = finite
    if n > width:
        cuts = [i * n // width for i in range(width + 1)]
        shown = [statistics.fmean(finite[a:b]) for a, b in itertools.pairwise(cuts)]
    low, high = min(shown), max(shown)
    if high == low:
        return chars[len(chars) // 2] * len(shown)
    top = len(chars) - 1
    return "".join(chars[round((v - low) / (high - low) * top)] for v in shown)


def _num(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return str(value)
    return f"{value:.4g}"


def _bytes(value: float | None) -> str:
    if value is None:
        return "-"
    for unit in ("B", "K", "M", "G", "T"):
        if value < 1024 or unit == "T":
            return f"{value:.0f}{unit}" if unit == "B" else f"{value:.1f}{unit}"
        value /= 1024
    return "-"  # pragma: no cover - the loop returns at "T"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}%"


def _rate(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3g}" if value < 1000 else f"{value:,.0f}"


def _gpu_mem(row: TopRow) -> str:
    if row.gpu_mem_used_bytes is None:
        return "-"
    if row.gpu_mem_total_bytes:
        return f"{_bytes(row.gpu_mem_used_bytes)}/{_bytes(row.gpu_mem_total_bytes)}"
    return _bytes(row.gpu_mem_used_bytes)


def _nonfinite(row: TopRow) -> str:
    """Return how many NaN and infinite values the run logged, and the last: `2 (loss=nan)`."""
    if not row.nonfinite or row.last_nonfinite is None:
        return "-"
    key, value = row.last_nonfinite
    return f"{row.nonfinite} ({key}={_num(value)})"


_TREND_WIDTH: Final = 20
_RUN_WIDTH: Final = 28
# (header, cell, right-aligned); the order they show in
_COLUMNS: Final[tuple[tuple[str, Callable[[TopRow], str], bool], ...]] = (
    ("RUN", lambda r: _cut(printable(r.run), _RUN_WIDTH), False),
    ("RANK", lambda r: _num(r.rank), True),
    ("STATUS", lambda r: r.status, False),
    ("STEP", lambda r: _num(r.step), True),
    ("STEP/S", lambda r: _rate(r.steps_per_s), True),
    ("METRIC", lambda r: f"{r.metric}={_num(r.value)}" if r.metric else "-", False),
    ("NAN/INF", _nonfinite, False),
    ("TREND", lambda r: "", False),  # drawn to the width left for it
    ("CPU", lambda r: _percent(r.cpu_percent), True),
    ("RSS", lambda r: _bytes(r.rss_bytes), True),
    ("GPU", lambda r: _percent(r.gpu_util_percent), True),
    ("GPU MEM", _gpu_mem, True),
    ("LAST", lambda r: " ".join(f"{k}={_num(v)}" for k, v in r.last) or "-", False),
)
# the columns a narrow terminal drops first (RUN, RANK and STATUS always stay)
_DROP_ORDER: Final = (
    "LAST", "GPU MEM", "RSS", "CPU", "GPU", "TREND", "STEP/S", "METRIC", "STEP", "NAN/INF"
)  # fmt: skip


def render_frame(
    rows: Sequence[TopRow],
    *,
    width: int,
    height: int | None,
    title: str,
    chars: str = SPARKS,
) -> list[str]:
    """Return the lines of one frame: *title*, a header, one line per row, each cut to *width*.

    Columns a narrow terminal has no room for are left out, least useful first (LAST, the
    memory figures, ...); RUN, RANK and STATUS stay. With *height*, rows that do not fit are
    counted on the last line. Columns no row has a value for (RANK, the system figures of a
    run without `system` records) are left out too. What the logs hold is shown `printable`.
    """
    cells = {name: [printable(cell(r)) for r in rows] for name, cell, _ in _COLUMNS}
    names = [
        name
        for name, _, _ in _COLUMNS
        if name in ("RUN", "STATUS", "TREND", "LAST") or any(c != "-" for c in cells[name])
    ]
    if not any(row.trend for row in rows):
        names.remove("TREND")
    widths = {name: max([len(name), *map(len, cells[name])]) for name in names}
    if "TREND" in widths:
        widths["TREND"] = _TREND_WIDTH
    for name in _DROP_ORDER:
        if _total(widths) <= width or name not in widths:
            continue
        if name == "LAST" and _total(widths) - widths[name] + len(name) + 2 <= width:
            break  # LAST is cut to the width rather than dropped
        del widths[name]
    right = {name for name, _, is_right in _COLUMNS if is_right}
    header = _line(widths, {n: n for n in widths}, right)
    lines = [_cut(printable(title), width), _cut(header, width)]
    shown = list(rows)
    if height is not None and len(shown) > max(0, height - 2):
        keep = max(0, height - 3)
        lines_left = len(shown) - keep
        shown = shown[:keep]
    else:
        lines_left = 0
    for i, row in enumerate(shown):
        values = {name: cells[name][i] for name in widths}
        if "TREND" in widths:
            values["TREND"] = sparkline(row.trend, widths["TREND"], chars=chars)
        lines.append(_cut(_line(widths, values, right), width))
    if lines_left:
        lines.append(_cut(f"... {lines_left} more runs (a taller terminal shows them)", width))
    return lines


def _total(widths: Mapping[str, int]) -> int:
    return sum(widths.values()) + 2 * (len(widths) - 1)


def _line(widths: Mapping[str, int], values: Mapping[str, str], right: set[str]) -> str:
    cells = [
        values[name].rjust(w) if name in right else values[name].ljust(w)
        for name, w in widths.items()
    ]
    return "  ".join(cells).rstrip()


def _cut(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    return text[: max(0, width - 1)] + "…" if width > 0 else ""


def title_of(top: Top, rows: Sequence[TopRow], now: float) -> str:
    """Return the frame's first line: the sources, the runs by status, the time, how to quit."""
    where = " ".join(
        f"{source} (waiting for it to appear)" if source in top.waiting else str(source)
        for source in top.sources
    )
    counts = Counter(row.status for row in rows)
    by_status = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    runs = f"{len(rows)} logs" + (f" ({by_status})" if by_status else "")
    if top.unreadable:
        runs += f", {len(top.unreadable)} unreadable"
    clock = time.strftime("%H:%M:%S", time.localtime(now))
    return f"runlines top  {where}  {runs}  {clock}  q: quit"


# --- the command -------------------------------------------------------------------------------


def add_commands(subparsers: Any) -> None:
    """Add `top` to *subparsers* (from ``parser.add_subparsers()``)."""
    top = subparsers.add_parser(
        "top",
        help="a live view of the runs in folders: status, step, pace, metrics, system; q quits",
        description=(
            "Show the runs of SOURCES live: status (running, stalled, died, ok, ...), step, "
            "steps per second, the main metric and its trend, CPU, memory and GPU from "
            "`system` records. Refreshes from the bytes appended to the logs; q or Ctrl-C quits."
        ),
    )
    top.add_argument(
        "sources",
        nargs="*",
        metavar="SOURCE",
        help="folders of logs or .jsonl logs (default: the current folder, and runs/ if any)",
    )
    top.add_argument(
        "--metric", metavar="EVENT.FIELD", help="the metric of every run (default: per run)"
    )
    top.add_argument(
        "--interval", type=seconds, default=REFRESH_S, metavar="S", help="seconds per refresh"
    )
    top.add_argument("--once", action="store_true", help="print one frame and exit")
    top.set_defaults(handler=_top)


def _top(args: argparse.Namespace) -> int:
    if args.metric is not None and "." not in args.metric.strip("."):
        msg = f"--metric takes EVENT.FIELD (e.g. train_step.loss), got {args.metric!r}"
        raise ReadError(msg)
    sources = args.sources or ["."] + ([_RUNS_DIR] if Path(_RUNS_DIR).is_dir() else [])
    once = args.once or not sys.stdout.isatty()
    top = Top(sources, metric=args.metric, wait=not once)  # one frame waits for nothing
    for source in top.waiting:
        print(f"runlines: waiting for {source} to appear (Ctrl-C to stop)", file=sys.stderr)
    chars = SPARKS if _can_encode(sys.stdout, SPARKS + "…") else ASCII_SPARKS
    if once:
        top.refresh()
        rows = top.rows()
        width = shutil.get_terminal_size((120, 24)).columns
        title = title_of(top, rows, time.time())
        frame = render_frame(rows, width=width, height=None, title=title, chars=chars)
        print("\n".join(_ascii_cut(line, chars) for line in frame))
        return 0
    try:
        from runlines.cli._screen import Screen
    except ImportError as err:  # no termios: Windows
        msg = f"the live view of `runlines top` needs a POSIX terminal ({err}); use --once"
        raise ReadError(msg) from err
    # a warning written during the view would be drawn over: each is shown once it ends
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with Screen(sys.stdout) as screen:
                _live(top, screen, args.interval, chars)
        except KeyboardInterrupt:
            pass
    for warning in caught:
        warnings.warn(warning.message, warning.category, stacklevel=1)
    return 0


def _live(top: Top, screen: Any, interval_s: float, chars: str) -> None:
    while True:
        top.refresh()
        rows = top.rows()
        columns, lines = screen.size()
        title = title_of(top, rows, time.time())
        frame = render_frame(rows, width=columns, height=lines, title=title, chars=chars)
        screen.draw([_ascii_cut(line, chars) for line in frame])
        if "q" in screen.wait_key(interval_s).lower():
            return


def _ascii_cut(line: str, chars: str) -> str:
    return line.replace("…", "~") if chars is ASCII_SPARKS else line


def _can_encode(stream: Any, text: str) -> bool:
    try:
        text.encode(getattr(stream, "encoding", None) or "ascii")
    except (UnicodeEncodeError, LookupError):
        return False
    return True
