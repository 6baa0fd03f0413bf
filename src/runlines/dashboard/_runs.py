"""The runs the dashboard shows: found under its sources, each followed file by file."""

from __future__ import annotations

import contextlib
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from runlines._layout import MEDIA_EVENTS, flatten, is_log_name
from runlines.dashboard._history import read_history
from runlines.dashboard._series import NUMERIC, Series, as_float
from runlines.errors import ReadError
from runlines.reading import LOG_SUFFIX, is_locked, last_records, log_file
from runlines.reading._follow import LogFollower
from runlines.reading._rules import (
    BOOKKEEPING,
    config_changes,
    foreign_log_message,
    is_metric_event,
)
from runlines.reading._summary import RunSummary

if TYPE_CHECKING:
    from runlines.dashboard._copy_columns import History

NOT_SERIES: Final = BOOKKEEPING  # the one list of what is no metric, as runs() and top use
_ENV_FIELDS: Final = (
    "host", "pid", "python", "runlines", "argv", "cwd", "git_commit", "git_dirty", "world_size",
    "id", "resume_step",
)  # fmt: skip
SPAN_EVENT: Final = "span"
_TAIL_BYTES: Final = 64 << 10  # what a run's status is read from while its history is not


@dataclass
class _File:
    """One log file of a run (rank 0 or another rank) and what was read of it."""

    rank: int
    tail: LogFollower
    series: dict[tuple[str, str], Series] = field(default_factory=dict)
    last_step: float = 0  # the step of the last record that had one
    spans: dict[str, list[float]] = field(default_factory=dict)  # name: [count, total, max]
    copy_looked: bool = False  # whether its Parquet copy was looked for: once, before reading

    def forget(self) -> None:
        """Drop what was taken of the file: it is read again from its start."""
        self.series, self.spans, self.last_step = {}, {}, 0

    def take(self, record: Mapping[str, Any]) -> None:
        event = record.get("event")
        # runlines' own records are no curves (as in runs()), but for spans: a line per name
        if type(event) is not str or (not is_metric_event(event) and event != SPAN_EVENT):
            if event == "run_start":
                self._resume(record.get("resume_step"))
            return
        ts = as_float(record.get("ts"))
        step: Any = record.get("step")
        if type(step) in NUMERIC:
            self.last_step = step
        if event == SPAN_EVENT:
            self._take_span(record, ts)
            return
        series = self.series
        for name, value in record.items():
            if type(value) in NUMERIC and name not in NOT_SERIES:
                line = series.get((event, name))
                if line is None:
                    line = series[(event, name)] = Series()
                line.add(self.last_step, ts, value)

    def _resume(self, step: Any) -> None:
        """Drop what an attempt resumed at *step* supersedes: earlier records past that step."""
        if type(step) in NUMERIC:
            for line in self.series.values():
                line.drop_after(step)
            self.last_step = step

    def _take_span(self, record: Mapping[str, Any], ts: float) -> None:
        name: Any = record.get("name")
        value: Any = record.get("duration_s")
        if type(name) is not str or type(value) not in NUMERIC:
            return
        line = self.series.get((SPAN_EVENT, name))
        if line is None:
            line = self.series[(SPAN_EVENT, name)] = Series()
        line.add(self.last_step, ts, value)
        stats = self.spans.setdefault(name, [0, 0.0, 0.0])
        stats[0] += 1
        stats[1] += value
        stats[2] = max(stats[2], value)

    @property
    def last(self) -> dict[str, Any]:
        """The last value of each series, finite or not, as ``<event>.<field>``."""
        return {f"{event}.{name}": line.last for (event, name), line in self.series.items()}


class RunState:
    """One run: its log, its rank files, its table row, and what its page shows."""

    def __init__(self, label: str, path: Path) -> None:
        self.label = label
        self.path = path
        self.files: dict[int, _File] = {0: self._file(0, path)}
        self.version = 0  # records taken, over all files, and restarts: a client's "since"
        self.restarts = 0  # of the main log: a page's media list starts over (/api/media)
        self.problems: list[str] = []  # what the page should say: a copy not used, and why
        self._forget_main()

    def _forget_main(self) -> None:
        """Start the run's own state over: nothing of its main log is taken yet."""
        self.summary = RunSummary(self.path, label=self.label)
        self.attempts: list[dict[str, Any]] = []
        self.artifacts: list[dict[str, Any]] = []
        self.media: list[dict[str, Any]] = []  # media records (docs/media.md), in log order
        self.signals: list[dict[str, Any]] = []
        self.config: Any = None
        self.environment: dict[str, Any] = {}
        self.started_ts: float | None = None
        self.last_ts: float | None = None
        self._tail_summary: tuple[int, RunSummary] | None = None  # (size, of the last records)

    def _file(self, rank: int, path: Path) -> _File:
        return _File(rank, LogFollower(path, on_restart=lambda: self._restarted(rank)))

    def _restarted(self, rank: int) -> None:
        """Drop what file *rank* gave before it was replaced, truncated or rewritten."""
        self.files[rank].forget()
        if rank == 0:
            self._forget_main()
            self.restarts += 1
        self.version += 1  # a page that asks "since" the old version gets the new series

    def relabel(self, label: str) -> None:
        """Name the run *label* from now on: another log of its name was found."""
        if label != self.label:
            self.label = self.summary.label = label
            self._tail_summary = None

    def add_rank(self, rank: int, path: Path) -> None:
        if rank not in self.files:
            self.files[rank] = self._file(rank, path)

    @property
    def bytes_read(self) -> int:
        return sum(f.tail.bytes_read for f in self.files.values())

    def behind(self) -> int:
        """Return the bytes of the run's files not read yet, by a fresh stat of each."""
        return sum(log.tail.behind() for log in self.files.values())

    def copies_to_look_for(self) -> list[tuple[int, Path]]:
        """Return the (rank, path) of the files whose copy was not looked for yet."""
        return [(rank, f.tail.path) for rank, f in sorted(self.files.items()) if not f.copy_looked]

    def take_history(self, rank: int, history: History | None, problems: list[str]) -> None:
        """Start file *rank* from its copy's *history*, unless it was looked for already.

        *problems* (a stale or foreign copy, ignored) are shown on the page and printed.
        """
        log = self.files[rank]
        if log.copy_looked:
            return  # a request or the reader thread was first
        log.copy_looked = True
        for message in problems:
            if message not in self.problems:
                self.problems.append(message)
                print(f"runlines: warning: {message}", file=sys.stderr)
        if history is None or log.tail.bytes_read:
            return
        log.tail.start_at(history.covers_bytes, history.identity)
        log.tail.records, log.tail.torn_lines = history.records, history.torn_lines
        log.series, log.spans, log.last_step = history.series, history.spans, history.last_step
        self.version += history.records
        if rank == 0 and history.summary is not None:
            self.summary = history.summary
            self.summary.label = self.label  # renamed while its copy was read
            self.started_ts, self.last_ts = history.first_ts, history.last_ts
            for record in history.whole:
                self._take_shown(record)
            for attempt, (first, last) in zip(self.attempts, history.attempt_ts, strict=False):
                attempt["first_ts"], attempt["last_ts"] = first, last

    def refresh(self, max_bytes: int | None = None) -> None:
        """Read what every file of the run gained, at most *max_bytes* of each.

        A file read for the first time starts from its Parquet copy when it has a usable one.
        """
        for rank, path in self.copies_to_look_for():
            self.take_history(rank, *read_history(path, label=self.label))
        for rank, log in sorted(self.files.items()):
            for record in log.tail.stream(max_bytes):
                self._take(rank, log, record)
            if log.tail.pending_bytes and not log.tail.behind() and not is_locked(log.tail.path):
                last = log.tail.finished_fragment()
                if last is not None:
                    self._take(rank, log, last)

    def _take(self, rank: int, log: _File, record: dict[str, Any]) -> None:
        self.version += 1
        log.take(record)
        if rank == 0:
            self._take_main(record)

    def _take_main(self, record: dict[str, Any]) -> None:
        self.summary.add(record)
        self._take_shown(record)
        ts = as_float(record.get("ts"))
        if math.isfinite(ts):
            self.started_ts = ts if self.started_ts is None else self.started_ts
            self.last_ts = ts
            if self.attempts:
                attempt = self.attempts[-1]
                if attempt["first_ts"] is None:
                    attempt["first_ts"] = ts
                attempt["last_ts"] = ts

    def _take_shown(self, record: dict[str, Any]) -> None:
        """Keep what the run page shows of a record: config, environment, attempts, artifacts."""
        event = record.get("event")
        if event == "run_start":
            config, changed = record.get("config"), {}
            if isinstance(config, Mapping) and config:  # none given keeps the run's (runs())
                if self.attempts and isinstance(self.config, Mapping):
                    changed = config_changes(flatten(self.config), flatten(config))
                self.config = config
            self.environment = {k: record[k] for k in _ENV_FIELDS if k in record}
            self.attempts.append(
                {
                    "attempt": record.get("attempt"),
                    "start": record,
                    "end": None,
                    "first_ts": None,  # its records' first and last finite ts
                    "last_ts": None,
                    "config_changes": changed,
                }
            )
        elif event == "run_end" and self.attempts:
            self.attempts[-1]["end"] = record
        elif event == "artifact":
            self.artifacts.append(record)
        elif event in MEDIA_EVENTS:
            self.media.append(record)
        elif event == "signal":
            self.signals.append(record)

    def is_gone(self) -> bool:
        """Return whether the run's log was missing at the last look: deleted or moved away."""
        return self.files[0].tail.gone

    def forget_gone_ranks(self) -> None:
        """Drop the rank files that were missing at the last look."""
        for rank in [rank for rank, log in self.files.items() if rank and log.tail.gone]:
            del self.files[rank]

    def is_ended(self) -> bool:
        return bool(self.attempts) and self.attempts[-1]["end"] is not None

    def row(self, now: float) -> dict[str, Any]:
        """The run's `runlines.runs()` row, with the same keys and status values.

        While the history is still being read for the first time, how the run ended is
        further down the file: the status is then that of the log's last records.
        """
        alive = None if self.is_ended() else is_locked(self.path)
        row = self.summary.row(alive=alive, now=now)
        if not self.is_ended() and self._unread():
            row["status"] = self._tail_status(alive=bool(alive), now=now)
        return row

    def progress(self) -> dict[str, Any]:
        """How far the server has read the run's files, and what it could not read."""
        main = self.files[0].tail
        alive = not self.is_ended() and is_locked(self.path)
        return {
            "reading": self._unread() > 0,
            "bytes_behind": self._unread(),
            "bytes_read": self.bytes_read,
            "records": main.records,
            "torn_lines": main.torn_lines + (1 if main.pending_bytes and not alive else 0),
            "pending_bytes": main.pending_bytes if alive else 0,
            "ranks": sorted(self.files),
            "problems": self.problems,
        }

    def _unread(self) -> int:
        """Bytes of the run's files not read yet, by the last look at their sizes."""
        return sum(
            log.tail.size - log.tail.offset - log.tail.pending_bytes for log in self.files.values()
        )

    def _tail_status(self, *, alive: bool, now: float) -> str:
        """Return the status the log's last records give, read again only when the log grew."""
        size = self.files[0].tail.size
        if self._tail_summary is None or self._tail_summary[0] != size:
            summary = RunSummary(self.path, label=self.label)
            try:
                records = last_records(self.path, max_bytes=_TAIL_BYTES)
            except (OSError, ReadError):  # deleted since the last look: the store drops the run
                records = []
            for record in records:
                summary.add(record)
            self._tail_summary = (size, summary)
        return self._tail_summary[1].status(alive=alive, now=now)


class RunStore:
    """The runs under *sources* (default: the current folder), log folders walked recursively."""

    def __init__(
        self,
        sources: Sequence[str | os.PathLike[str]],
        *,
        min_interval_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not sources:
            sources = ["."]
        self.roots = [_checked_source(Path(s)) for s in sources]
        self._min_interval_s = min_interval_s
        self._clock = clock
        self._last_refresh: float | None = None
        self._lock = threading.Lock()
        # Requests go first: the reader thread takes the lock only while none is waiting for it
        # (a Lock is not fair, and the reader would take it back slice after slice).
        self._waiting = 0
        self._counting = threading.Lock()
        self._no_requests = threading.Event()
        self._no_requests.set()
        self.runs: dict[str, RunState] = {}
        self.foreign: set[Path] = set()  # JSONL files that are no runlines logs: no runs

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        """Hold the store for one request, ahead of the reader thread."""
        with self._counting:
            self._waiting += 1
            self._no_requests.clear()
        try:
            with self._lock:
                yield
        finally:
            with self._counting:
                self._waiting -= 1
                if not self._waiting:
                    self._no_requests.set()

    def refresh(
        self,
        run: str | None = None,
        *,
        force: bool = False,
        max_bytes: int | None = None,
        skip_behind: bool = False,
    ) -> None:
        """Read what the logs gained: every run's, or only *run*'s.

        New logs are looked for at most once per interval (walking folders costs more than a
        stat); *force*, or a *run* not known yet, looks now. *max_bytes* bounds what each file
        is read; with *skip_behind*, a run further behind than that is left to `catch_up`.
        """
        self._discover_if_due(force=force or (run is not None and run not in self.runs))
        chosen = self.runs.values() if run is None else [self.runs[run]] if run in self.runs else []
        for state in list(chosen):
            if not skip_behind or max_bytes is None or state.behind() <= max_bytes:
                state.refresh(max_bytes)
        self._forget_gone()

    def _forget_gone(self) -> None:
        """Drop the runs whose log was missing at the last look, and their missing ranks.

        A log that comes back (a run started again under its name) is a new run.
        """
        for label, state in list(self.runs.items()):
            if state.summary.records and not state.summary.shaped:  # a foreign JSONL
                self.foreign.add(state.path)
                message = foreign_log_message(state.path, left_out=True)
                print(f"runlines: warning: {message}", file=sys.stderr)
            if state.is_gone() or state.path in self.foreign:
                del self.runs[label]
            else:
                state.forget_gone_ranks()

    def catch_up(self, max_bytes: int) -> int:
        """Read up to *max_bytes* of each file, a run at a time; return the bytes read.

        The lock is taken per run, and only while no request waits for it, so that a first
        look at a long history never holds requests up for long.
        """
        read = 0
        with self._lock:
            self._discover_if_due()
            labels = list(self.runs)
        for label in labels:
            self._no_requests.wait()
            with self._lock:
                run = self.runs.get(label)
                if run is None:  # its log was deleted: a request dropped it meanwhile
                    continue
                looking = run.copies_to_look_for()
            # a copy is read outside the lock: requests go on meanwhile
            found = [(rank, *read_history(path, label=label)) for rank, path in looking]
            self._no_requests.wait()
            with self._lock:
                for rank, history, problems in found:
                    run.take_history(rank, history, problems)
                before = run.bytes_read
                run.refresh(max_bytes)
                read += run.bytes_read - before
                self._forget_gone()
        return read

    def _discover_if_due(self, *, force: bool = False) -> None:
        now = self._clock()
        last = self._last_refresh
        if force or last is None or now - last >= self._min_interval_s:
            self._last_refresh = now
            self._discover()

    def _discover(self) -> None:
        found = sorted(set(self._logs()))
        labels = _labels([path for path, rank in found if rank is None], self._common_root())
        present = {path for path, _ in found}
        for label, run in list(self.runs.items()):
            if run.path not in present:  # deleted, or moved out of the sources
                del self.runs[label]
        by_path = {run.path: run for run in self.runs.values()}
        # a name two logs now share labels both by their paths, as runs() does: the run
        # found first is renamed rather than kept under a name that no longer says which
        self.runs = {}
        for path, label in labels.items():
            if path in by_path:
                by_path[path].relabel(label)
            elif path not in self.foreign:
                by_path[path] = RunState(label, path)
            if path in by_path:
                self.runs[label] = by_path[path]
        for path, rank in found:
            if rank is not None:
                main = by_path.get(path.with_name(log_file(path).run + LOG_SUFFIX))
                if main is not None:
                    main.add_rank(rank, path)

    def _common_root(self) -> Path:
        folders = [r if r.is_dir() else r.parent for r in self.roots]
        return Path(os.path.commonpath(folders)) if folders else Path()

    def _logs(self) -> Iterator[tuple[Path, int | None]]:
        for root in self.roots:
            if root.is_file():
                yield root, log_file(root).rank
                continue
            for folder, dirs, files in os.walk(root):
                dirs[:] = sorted(d for d in dirs if not d.endswith(".artifacts"))
                for name in files:
                    path = Path(folder, name)
                    if is_log_name(name) and is_inside(path, root):
                        yield path, log_file(path).rank

    def allowed(self, path: Path) -> bool:
        """Return whether *path* lies, symlinks resolved, inside one of the sources."""
        return any(is_inside(path, r if r.is_dir() else r.parent) for r in self.roots)


def is_inside(path: Path, root: Path) -> bool:
    """Return whether *path*, symlinks resolved, is *root* or lies under it."""
    try:
        resolved = path.resolve(strict=True)
    except (OSError, RuntimeError, ValueError):  # missing, a loop, a NUL byte
        return False
    return resolved == root.resolve() or resolved.is_relative_to(root.resolve())


def _checked_source(source: Path) -> Path:
    if source.is_dir() or (source.is_file() and source.name.endswith(LOG_SUFFIX)):
        return source.absolute()
    if not source.exists():
        msg = f"no such log or folder: {source}; pass .jsonl log files or folders of logs"
    else:
        msg = f"{source} is not a .jsonl log; pass .jsonl log files or folders of logs"
    raise ReadError(msg, str(source))


def _labels(paths: Sequence[Path], root: Path) -> dict[Path, str]:
    """Name each run by its run name, or by its path under *root* where names collide."""
    names: dict[str, int] = {}
    for path in paths:
        names[log_file(path).run] = names.get(log_file(path).run, 0) + 1
    labels = {}
    for path in paths:
        run = log_file(path).run
        labels[path] = _relative(path, root) if names[run] > 1 else run
    return labels


def _relative(path: Path, root: Path) -> str:
    try:
        relative = path.relative_to(root)
    except ValueError:
        relative = path
    return relative.with_name(log_file(path).run).as_posix()
