"""The `Run`: identity, lifecycle and the hot path that stamps records and hands lines to sinks."""

from __future__ import annotations

import enum
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from types import MethodType, TracebackType
from typing import TYPE_CHECKING, Any, Final, Literal

from runlines import _context, _lifecycle, _native
from runlines.errors import FieldDriftWarning, FieldError, RunLockedError, RunStateError
from runlines.redaction import DEFAULT_REDACTOR, Redactor
from runlines.sampling import make_sampler
from runlines.sinks import FileSink, Sink, StdoutSink
from runlines.spans import Span, SpanStats, Tracer, span_record

if TYPE_CHECKING:
    from pathlib import Path

    from runlines import fields as _fields
    from runlines.capture import CaptureSettings
    from runlines.encoding import Redact
    from runlines.fields import Vocabulary

# The C fast path of log(), when it was built at install time (see _speedups.c).
_Writer = None if _native.speedups is None else _native.speedups.Writer

__all__ = ["Run"]

_MAX_PLANS: Final = 10_000  # dynamic field names must not grow memory without bound
_CHECK_EVERY_S: Final = 1.0  # a deleted log file is noticed within a second of logging
_LOCK_WAIT_S: Final = 0.5  # rides over a reader's momentary probe of the lock
# Module-level aliases: one global lookup on the hot path, and freezegun still patches _now.
_now = time.time
_monotonic = time.monotonic
_write = os.write
# Bound by _load() when the first Run opens: the encoder imports orjson (~20 ms) and the field
# vocabulary dataclasses (~8 ms), which `import runlines` must not pay. Module globals, as
# names imported at the top would be: log() looks each up once.
_dumps: Callable[..., bytes]
_OPTIONS: int
JSONEncodeError: type[TypeError]
console_line: Callable[[bytes], str]
encode_default: Callable[[Any], Any]
encode_line: Callable[[Mapping[str, Any]], bytes]
encode_line_safe: Callable[[Mapping[str, Any], Redact | None], bytes]
_NO_FIELDS: Final[dict[str, object]] = {}  # a span without fields of its own; never mutated
# Types that can hold no secret and need no walk before encoding.
_PLAIN: Final = frozenset({int, float, bool, type(None)})


# (quotes in a line without string values, whether to redact, value types last checked)
_Plan = tuple[int, bool, tuple[type, ...]]


class _State(enum.Enum):
    OPEN = "open"  # writing; every constructor call ends here or raises
    CLOSED = "closed"  # run_end written: log() refuses


class Run:
    """A training run that writes one JSON object per line to stdout and to a log file.

    Use it as a context manager, or call `close()` yourself; a run left open is closed at
    interpreter exit.
    """

    def __init__(
        self,
        name: str,
        directory: str | os.PathLike[str] = ".",
        *,
        config: Mapping[str, Any] | Any | None = None,
        stdout: bool = True,
        console: Literal["auto", "json", "pretty"] = "auto",
        fsync: bool = False,
        resume_step: int | None = None,
        strict_fields: bool = False,
        fields: Vocabulary | str | os.PathLike[str] | None = None,
        redact: bool | Redactor = True,
        capture: bool | str | Iterable[str] | CaptureSettings | None = True,
        capture_level: int | str = "WARNING",
        system: float | bool = 10.0,
        stall_after: float | None = None,
        on_nonfinite: Literal["warn", "raise", "ignore"] = "warn",
        console_every: float | None = None,
        console_events: Iterable[str] | None = None,
    ) -> None:
        from pathlib import Path  # ~4 ms to import (urllib.parse, fnmatch): when a run opens

        _load()
        self.name = _context.check_run_name(name)
        self.id = _context.new_run_id()
        self._dist = _context.distributed_from_env()
        self.directory = Path(directory)
        self.path = _context.log_path(self.directory, self.name, self._dist)
        self._rank = None if self._dist is None else self._dist.rank
        self._pid = os.getpid()
        # (event, *names) -> (types of the values last seen, whether they need redaction)
        self._plans: dict[tuple[Any, ...], _Plan] = {}
        self._samplers: dict[str, Any] = {}
        self._writer: Any = None  # the C fast path of log(), once the run has opened
        self._started = _monotonic()
        self._state = _State.OPEN
        self._close_lock = threading.RLock()
        self._next_check = 0.0  # when log() next checks that the log file still exists
        self._terminated_by: str | None = None  # SIGTERM seen, left to the job's own handler
        self._vocabulary = _fields.load_vocabulary(fields)
        self._strict_fields = strict_fields
        self._redactor = _redactor(redact)
        self._redact = None if self._redactor is None else self._redactor.redact_fields
        self._kinds: dict[str, str] = {}  # field name -> the JSON kind it was first logged as
        self._warned: set[str] = set()  # field names already warned about, once per run
        self._span_stats = SpanStats()
        self._span_names: dict[str, str] = {}  # span name -> its redacted form
        self._tracer = Tracer(self._log_span, stats=self._span_stats)
        config_dict = _config_dict(config)
        _check_resume_step(resume_step)
        # Watching a live run (docs/watching.md): options checked before anything is written.
        from runlines import _watching, nonfinite, stall
        from runlines.console import ConsoleOptions

        system_s = _watching.check_system(system)
        stall_after_s = stall.check_stall_after(stall_after)
        alarm_mode = nonfinite.check_on_nonfinite(on_nonfinite)
        self._alarm = (
            None if alarm_mode is None else nonfinite.NonfiniteAlarm(alarm_mode, self.path)
        )
        console_options = ConsoleOptions.of(console_every, console_events)
        self._watching: _watching.Watching | None = None
        from runlines.capture import Capture, parse_capture  # with logging: when a run opens

        self._capture = Capture(parse_capture(capture, level=capture_level), self._write_captured)
        self._file = self._open_file(fsync)
        try:
            self._stdout, pretty = _stdout_sinks(stdout, console, self._dist)
            self._console = None if pretty is None else console_options.make(pretty)
            self._sinks: tuple[Sink, ...] = (self._file,) + (
                (self._stdout,) if self._stdout is not None and self._console is None else ()
            )
            self._fds, self._flush_stdout = _fast_path(self._sinks, fsync)
            self.attempt = _last_attempt(self.path) + 1
            self._file.end_torn_tail()
            self._write_start(config_dict, resume_step)
            self._install_writer()
        except BaseException:
            self._release()
            raise
        _lifecycle.register(self)
        self._capture.install()
        if system_s is not None or stall_after_s is not None:
            self._watching = _watching.Watching(
                self._write_background,
                system_s=system_s,
                stall_after_s=stall_after_s,
                log_fd=self._file.fd,
                stacks_dir=self.artifacts_dir,
            )

    # -- public API ---------------------------------------------------------------------------

    def log(self, event: str, /, **fields: Any) -> None:
        """Write one record: `ts`, `event`, `run`, then *fields* as given."""
        if self._samplers:
            try:
                sampler = self._samplers.get(event)
            except TypeError:
                raise _event_error(event) from None
            if sampler is not None:
                fields = sampler.offer(fields)  # before any conversion: a drop costs nothing
                if fields is None:
                    return
        # Decided once per event and key set: the quote count of a line without strings, whether
        # values need redaction, and the value types last checked for drift.
        key = (event, *fields)
        try:
            quotes, careful, types = self._plans[key]
        except KeyError:
            quotes, careful, types = self._plan(event, fields, key)
        except TypeError:
            raise _event_error(event) from None
        if careful:
            fields = self._prepare(key, fields, types)
        ts = _now()
        if ts >= self._next_check:
            self._check_file(ts)
        if self._rank is None:
            record = {"ts": ts, "event": event, "run": self.name, **fields}
        else:
            record = {"ts": ts, "event": event, "run": self.name, "rank": self._rank, **fields}
        try:
            line = _dumps(record, default=encode_default, option=_OPTIONS)
        except JSONEncodeError as err:
            line = _encode_failed(record, err, self._redact)
        else:
            if not careful and line.count(b'"') != quotes:  # a string where none was before
                line = self._first_strings(key, fields, record)
        if line.find(b"null") >= 0:  # a None, or a non-finite float that orjson wrote as null
            line = encode_line_safe(record, self._redact)
            if self._alarm is not None and self._alarm.is_new(event, line):
                self._nonfinite(event, line, record)
                return
        # _emit() inlined: a call frame here is paid once per training step.
        fds = self._fds
        if fds is None:
            self._emit(line, record)
            return
        flush = self._flush_stdout
        if flush is not None:
            try:
                flush()  # the program's own prints first, so our line never lands inside one
            except (OSError, ValueError):
                pass  # a closed or broken stdout: the write below counts the drop
        size = len(line)
        for fd in fds:
            try:
                written = _write(fd, line)
            except OSError as err:
                self._write_failed(fd, line, 0, err)
                continue
            if written != size:
                self._write_failed(fd, line, written, None)
        if self._console is not None:
            self._console.show(line)

    def close(self) -> None:
        """Write `run_end` with status "ok" and release the log; closing twice does nothing."""
        self._end("ok", {})

    def span(self, name: str, /, **fields: Any) -> Span:
        """Time a block or a function: `with run.span("eval"):` or `@run.span("step")`.

        On exit a `span` record carries `name`, `duration_s` (monotonic clock), `status`, the
        enclosing span as `parent`, and *fields*.
        """
        if fields:
            for key in fields:
                _check_field_name(key)
            return self._tracer.span(name, **fields)
        if type(name) is not str or not name:
            return self._tracer.span(name)  # raises the FieldError that explains it
        return Span(self._tracer, name, _NO_FIELDS)  # Tracer.span() without its call frame

    def sample(
        self,
        event: str,
        *,
        every: int | None = None,
        per_second: float | None = None,
        aggregate: bool = False,
    ) -> None:
        """Keep 1 in *every* records of *event*, or at most *per_second*; see docs/sampling.md.

        Kept records carry `n`, the number of log() calls they stand for. With
        `aggregate=True` each window becomes one record of means, minimums, maximums and last
        values. What a window still holds is written at close.
        """
        _check_event(event)
        sampler = make_sampler(every=every, per_second=per_second, aggregate=aggregate)
        previous = self._samplers.get(event)
        samplers = dict(self._samplers)
        samplers[event] = sampler
        self._samplers = samplers  # replaced whole: log() in other threads sees old or new
        self._sync_writer()
        if previous is not None:
            self._write_owed(event, previous)

    def artifact(
        self,
        name: str,
        obj: Any = None,
        *,
        path: str | os.PathLike[str] | None = None,
        step: int | None = None,
        **fields: Any,
    ) -> Path:
        """Save *obj* to a side file (or register an existing file with *path*) and log it.

        The `artifact` record holds the file's path relative to the log's folder, its size and
        sha256, never its content. Returns the artifact's path.
        """
        if self._state is _State.CLOSED:
            raise self._closed_error()
        for key in fields:
            _check_field_name(key)
        from runlines.artifacts import save_artifact  # hashlib and friends: on first use

        target, record = save_artifact(
            self.directory, self.artifacts_dir, name, obj, path=path, step=step
        )
        clash = sorted(set(fields) & set(record))
        if clash:
            msg = f"artifact fields {clash} are set by runlines; rename them"
            raise FieldError(msg)
        self._write("artifact", {**record, **fields})
        return target

    @property
    def artifacts_dir(self) -> Path:
        """The folder of this run's side files: `<directory>/<name>.artifacts`."""
        return self.path.with_suffix(".artifacts")

    @property
    def dropped(self) -> int:
        """Records that a failing sink lost."""
        return sum(sink.dropped for sink in self._all_sinks())

    @property
    def closed(self) -> bool:
        """True once the run has ended."""
        return self._state is _State.CLOSED

    @property
    def rank(self) -> int | None:
        """The process rank in a distributed run (WORLD_SIZE > 1), else None."""
        return None if self._dist is None else self._dist.rank

    def __enter__(self) -> Run:
        if self._state is _State.CLOSED:
            msg = f"run {self.name!r} has closed and cannot be reopened; start a new Run(...)"
            raise RunStateError(msg)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._end(*_status_of(exc))

    def __repr__(self) -> str:
        return f"Run({self.name!r}, path={str(self.path)!r}, state={self._state.value})"

    # -- the careful path ---------------------------------------------------------------------

    def _plan(self, event: Any, fields: dict[str, Any], key: tuple[Any, ...]) -> _Plan:
        """Check a new event name and key set once, and decide how to write its records."""
        if self._state is _State.CLOSED:
            raise self._closed_error()
        _check_event(event)
        for name in fields:
            _check_field_name(name)
            self._check_drift(name)
        self._check_kinds(fields)
        if len(self._plans) >= _MAX_PLANS:
            self._plans.clear()
            self._forget_plans()
        head: dict[str, Any] = {"ts": 0, "event": event, "run": self.name}
        if self._rank is not None:
            head["rank"] = 0
        try:
            quotes = _dumps({**head, **dict.fromkeys(fields, 0)}).count(b'"')
        except JSONEncodeError:  # a name orjson cannot write (a lone surrogate): the careful path
            quotes = -1
        redactor = self._redactor
        careful = any(type(value) not in _PLAIN for value in fields.values()) or (
            redactor is not None and any(map(redactor.is_secret_key, fields))
        )
        plan = (quotes, careful, tuple(map(type, fields.values())))
        self._plans[key] = plan  # tuples replaced whole: other threads see old or new
        return plan

    def _first_strings(
        self, key: tuple[Any, ...], fields: dict[str, Any], record: dict[str, Any]
    ) -> bytes:
        """Encode the first record of a key set whose values hold strings, redacted; from now
        on that key set takes the careful path."""
        self._check_kinds(fields)
        quotes = self._plans[key][0] if key in self._plans else 0
        self._plans[key] = (quotes, True, tuple(map(type, fields.values())))
        self._forget_plans()
        return encode_line_safe(record, self._redact)

    def _prepare(
        self, key: tuple[Any, ...], fields: dict[str, Any], types: tuple[type, ...]
    ) -> dict[str, Any]:
        """Check drift when the value types changed, then return the fields redacted."""
        now = tuple(map(type, fields.values()))
        if now != types:
            self._check_kinds(fields)
            quotes = self._plans[key][0] if key in self._plans else 0
            self._plans[key] = (quotes, True, now)
            self._forget_plans()
        return fields if self._redact is None else self._redact(fields)

    def _check_drift(self, name: str) -> None:
        """Warn once per run (or raise, with strict_fields) when *name* is a drifting alias."""
        agreed = self._vocabulary.agreed_name(name)
        if agreed is None:
            return
        message = _fields.drift_message(name, agreed)
        if self._strict_fields:
            raise FieldError(message)
        if name not in self._warned:
            self._warned.add(name)
            warnings.warn(message, FieldDriftWarning, stacklevel=4)

    def _check_kinds(self, fields: dict[str, Any]) -> None:
        """Warn once per field whose JSON kind differs from the kind it was first logged as."""
        kinds = self._kinds
        for name, value in fields.items():
            kind = _fields.json_kind(value)
            if kind == "null":
                continue  # a missing value is not a change of type
            was = kinds.setdefault(name, kind)
            if was != kind and f"type:{name}" not in self._warned:
                self._warned.add(f"type:{name}")
                message = _fields.type_drift_message(name, was, kind)
                warnings.warn(message, FieldDriftWarning, stacklevel=4)

    def _emit(self, line: bytes, record: Mapping[str, Any]) -> None:
        """Hand *line* to every sink, and the console line (log() inlines the same steps)."""
        fds = self._fds
        if fds is None:
            for sink in self._sinks:
                sink.write(line)
        else:
            flush = self._flush_stdout
            if flush is not None:
                try:
                    flush()
                except (OSError, ValueError):
                    pass  # a closed or broken stdout: the write below counts the drop
            for fd in fds:
                try:
                    written = _write(fd, line)
                except OSError as err:
                    self._write_failed(fd, line, 0, err)
                    continue
                if written != len(line):
                    self._write_failed(fd, line, written, None)
        if self._console is not None:
            self._console.show(line)

    def _write_failed(self, fd: int, line: bytes, written: int, err: OSError | None) -> None:
        """Let the sink behind *fd* finish or count a failed write; leave the fast path."""
        self._fds = None  # from now on every line goes through the sinks' own handling
        self._sync_writer()
        for sink in self._sinks:
            if sink.fd == fd:
                sink.recover(line, written, err)

    def _write(self, event: str, fields: Mapping[str, Any]) -> None:
        """Write a record of runlines' own (lifecycle, artifacts): redacted, the careful path."""
        record: dict[str, Any] = {"ts": _now(), "event": event, "run": self.name}
        if self._rank is not None:
            record["rank"] = self._rank
        record.update(fields)
        self._emit(encode_line_safe(record, self._redact), record)

    def _install_writer(self) -> None:
        """Put the C fast path in front of log() when it is built and log() is ours."""
        if _Writer is None or type(self).log is not Run.log:
            return  # pure Python, or a subclass's own log() that must always run
        writer = _Writer(
            slow=MethodType(Run.log, self),
            failed=self._write_failed,
            span_slow=self._log_span,
            span_names=self._span_names,
            plans=self._plans,
            globals=globals(),
            dumps=_dumps,
            default=encode_default,
            option=_OPTIONS,
            name=self.name,
            rank=self._rank,
        )
        self._writer = writer
        self._sync_writer()
        self.__dict__["log"] = writer  # shadows the method: run.log(...) calls the writer
        self._tracer._emit = writer.write_span
        if type(self).span is Run.span:
            writer.set_spans(span_type=Span, tracer=self._tracer, slow=MethodType(Run.span, self))
            self.__dict__["span"] = writer.span

    def _sync_writer(self) -> None:
        """Tell the fast path what log() would check: state, descriptors, samplers, clock."""
        writer = self._writer
        if writer is not None:
            writer.configure(
                enabled=self._state is _State.OPEN and self._console is None,
                fds=self._fds,
                flush=self._flush_stdout,
                next_check=self._next_check,
                samplers=self._samplers,
            )

    def _forget_plans(self) -> None:
        """Make the fast path learn plans again after one changed."""
        if self._writer is not None:
            self._writer.forget()

    def _check_file(self, now: float) -> None:
        """Once a second: re-create the log file if a cleanup deleted it while we write it."""
        self._next_check = now + _CHECK_EVERY_S
        self._sync_writer()
        self._file.check_path()

    def _write_captured(self, event: str, fields: Mapping[str, Any]) -> None:
        """Write a captured warning or log record, unless the run has ended meanwhile."""
        if self._state is _State.OPEN:
            self._write(event, fields)

    def _log_span(
        self,
        name: str,
        duration_s: float,
        parent: str | None,
        status: str,
        exc_type: str | None,
        fields: dict[str, object],
    ) -> None:
        """Write a finished span's record; without user fields only its names need redaction."""
        if fields or "span" in self._samplers or self._state is _State.CLOSED:
            # user fields, a sampled span event or a closed run: the full path of log()
            self.log("span", **span_record(name, duration_s, parent, status, exc_type, fields))
            return
        names = self._span_names
        record: dict[str, Any] = {"ts": _now(), "event": "span", "run": self.name}
        if self._rank is not None:
            record["rank"] = self._rank
        record["name"] = names.get(name) or self._span_name(name)
        record["duration_s"] = duration_s
        if parent is not None:
            record["parent"] = names.get(parent) or self._span_name(parent)
        record["status"] = status
        if exc_type is not None:
            record["exc_type"] = exc_type
        writer = self._writer
        if writer is not None and writer.enabled:
            writer.write_record(record)
        else:
            self._emit(encode_line(record), record)

    def _span_name(self, name: str) -> str:
        """Return a span name redacted, checked once per name (span names are few)."""
        safe = self._span_names.get(name)
        if safe is None:
            safe = name if self._redactor is None else self._redactor.redact_text(name)
            if len(self._span_names) < _MAX_PLANS:
                self._span_names[name] = safe
        return safe

    def _write_owed(self, event: str, sampler: Any) -> None:
        """Write what *sampler* still owes (a pending window, the trailing drops) as *event*."""
        for fields in sampler.flush():
            self._write(event, fields)

    # -- lifecycle ----------------------------------------------------------------------------

    def _open_file(self, fsync: bool) -> FileSink:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            msg = (
                f"cannot create the run directory {str(self.directory)!r} ({err}); "
                "pass a writable directory"
            )
            raise OSError(err.errno, msg) from err
        self._lock = self._acquire_lock()
        try:
            return FileSink(self.path, fsync=fsync)
        except OSError as err:
            self._lock.release()
            msg = (
                f"cannot open the log file {str(self.path)!r} for writing ({err}); "
                "pass a writable directory"
            )
            raise OSError(err.errno, msg) from err

    def _acquire_lock(self) -> Any:
        from filelock import FileLock, Timeout

        lock = FileLock(f"{self.path}.lock", timeout=_LOCK_WAIT_S)
        try:
            lock.acquire()
        except Timeout:
            holder = _last_run_start(self.path) or {}
            who = f"pid {holder.get('pid', '?')} on host {holder.get('host', '?')}"
            msg = (
                f"run {self.name!r} in {str(self.directory)!r} is already being written by {who}; "
                "wait for that process to end, or give this run another name"
            )
            raise RunLockedError(msg) from None
        except OSError as err:
            msg = f"cannot lock {str(self.path)!r} ({err}); pass a writable directory"
            raise OSError(err.errno, msg) from err
        return lock

    def _write_start(self, config: dict[str, Any] | None, resume_step: int | None) -> None:
        fields: dict[str, Any] = {"id": self.id, "attempt": self.attempt}
        if resume_step is not None:
            fields["resume_step"] = resume_step
        fields.update(_context.describe_process(self.artifacts_dir))
        if self._redactor is not None:
            fields["argv"] = self._redactor.redact_argv(fields["argv"])
        if self._dist is not None:
            fields["world_size"] = self._dist.world_size
        fields["config"] = config if config is not None else {}
        self._write("run_start", fields)

    def _end(self, status: str, details: dict[str, Any]) -> None:
        ended_by_exit = status == "ok" or details.get("exc_type") == "SystemExit"
        if self._terminated_by is not None and ended_by_exit:
            status, details = "terminated", {**details, "signal": self._terminated_by}
        with self._close_lock:
            if self._state is _State.CLOSED:
                return
            self._state = _State.CLOSED
            self._plans.clear()
            self._sync_writer()
        self._capture.restore()  # before run_end: nothing is captured into a closed run
        if self._watching is not None:
            self._watching.stop()  # its last record lands before run_end
        try:
            if os.getpid() == self._pid:
                samplers, self._samplers = self._samplers, {}
                for event, sampler in samplers.items():
                    self._write_owed(event, sampler)
                self._write("run_end", self._end_fields(status, details))
        finally:
            self._release()
            _lifecycle.unregister(self)

    def _end_fields(self, status: str, details: dict[str, Any]) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "id": self.id,
            "attempt": self.attempt,
            "status": status,
            "duration_s": round(_monotonic() - self._started, 6),
            "dropped": self.dropped,
        }
        fields.update(details)
        spans = self._span_stats.summary()
        if spans:  # keyed by span names, which redaction of values would not see
            fields["spans"] = {self._span_name(name): stats for name, stats in spans.items()}
        return fields

    def _release(self) -> None:
        self._fds = None
        self._sync_writer()
        if os.getpid() != self._pid:
            return  # a forked child: the parent still owns the file and the lock
        for sink in self._all_sinks():
            sink.close()
        lock = getattr(self, "_lock", None)
        if lock is not None:
            lock.release()

    def _all_sinks(self) -> tuple[Sink, ...]:
        sinks: list[Sink] = []
        for sink in (getattr(self, "_file", None), getattr(self, "_stdout", None)):
            if sink is not None:
                sinks.append(sink)
        return tuple(sinks)

    def _closed_error(self) -> RunStateError:
        msg = (
            f"cannot log to run {self.name!r} after it closed; log inside the 'with Run(...)' "
            "block or start a new Run"
        )
        return RunStateError(msg)

    # -- watching a live run (docs/watching.md) -----------------------------------------------

    def _nonfinite(self, event: str, line: bytes, record: dict[str, Any]) -> None:
        """Write *line*, then the alarm's `nonfinite` records; warn or raise as asked."""
        self._emit(line, record)
        assert self._alarm is not None  # log() checked it
        self._alarm.fire(event, line, record, self._write)

    def _write_background(
        self, event: str, fields: Mapping[str, Any], count: Callable[[int], None]
    ) -> None:
        """Write a record of the watcher thread's, telling *count* its size first."""
        record: dict[str, Any] = {"ts": _now(), "event": event, "run": self.name}
        if self._rank is not None:
            record["rank"] = self._rank
        record.update(fields)
        line = encode_line_safe(record, self._redact)
        count(len(line))
        self._emit(line, record)

    # -- process hooks (called by _lifecycle) -------------------------------------------------

    def _on_signal(self, signum: int, ends_process: bool) -> None:
        if os.getpid() != self._pid or self._state is _State.CLOSED:
            return
        import signal  # loaded by _lifecycle, which calls this hook

        name = signal.Signals(signum).name
        if ends_process:
            self._end("terminated", {"signal": name})
            return
        if signum == signal.SIGTERM:
            # The job's own handler decides when it ends (checkpoint first, then exit): the run
            # stays open for that, and its run_end says it was terminated.
            self._terminated_by = name
        self._write("signal", {"signal": name})

    def _on_exit(self, uncaught: BaseException | None) -> None:
        if os.getpid() == self._pid:
            self._end(*_status_of(uncaught))

    def _on_fork_child(self) -> None:
        """Keep logging from a forked child, but leave run_end and the lock to the parent."""


def _status_of(exc: BaseException | None) -> tuple[str, dict[str, Any]]:
    """Return the run_end status and details for how the with-block (or process) ended."""
    if exc is None:
        return "ok", {}
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted", {}
    if isinstance(exc, SystemExit):
        code = exc.code
        if code is None or code == 0:
            return "ok", {"exit_code": 0}
        exit_code = code if isinstance(code, int) else 1  # sys.exit("message") exits with 1
        return "failed", {
            "exit_code": exit_code,
            "exc_type": "SystemExit",
            "exc_message": str(code),
        }
    import traceback  # ~3 ms to import (linecache, tokenize): only a failed run needs it

    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return (
        "failed",
        {"exc_type": type(exc).__name__, "exc_message": str(exc), "traceback": text[-20_000:]},
    )


def _check_event(event: Any) -> None:
    if not isinstance(event, str):
        raise _event_error(event)
    if not event:
        msg = "the event name is empty; name what happened, e.g. run.log('train_step', loss=...)"
        raise FieldError(msg)


def _event_error(event: Any) -> TypeError:
    msg = (
        f"the event name must be a str, got {type(event).__name__} {event!r:.80}; "
        "pass it first, e.g. run.log('train_step', loss=...)"
    )
    return TypeError(msg)


def _check_field_name(key: str) -> None:
    reserved = _fields.RESERVED_FIELDS
    if key in reserved:
        msg = (
            f"field {key!r} is reserved by runlines; rename it "
            f"(reserved: {', '.join(sorted(reserved))})"
        )
        raise FieldError(msg)
    if not key:
        msg = "a field name is empty; give every field a name"
        raise FieldError(msg)


def _check_resume_step(resume_step: Any) -> None:
    if resume_step is not None and (
        not isinstance(resume_step, int) or isinstance(resume_step, bool) or resume_step < 0
    ):
        msg = (
            "resume_step must be a non-negative int (the step the checkpoint holds), "
            f"got {resume_step!r}"
        )
        raise FieldError(msg)


def _config_dict(config: Any) -> dict[str, Any] | None:
    """Return *config* as a dict: a mapping, a dataclass, or an argparse.Namespace."""
    if config is None:
        return None
    if isinstance(config, Mapping):
        return dict(config)
    import dataclasses

    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return dataclasses.asdict(config)
    if hasattr(config, "__dict__") and type(config).__name__ == "Namespace":
        return dict(vars(config))
    msg = (
        f"config must be a mapping, a dataclass or an argparse.Namespace, got "
        f"{type(config).__name__}; pass config=dict(...)"
    )
    raise TypeError(msg)


def _redactor(redact: bool | Redactor) -> Redactor | None:
    if redact is True:
        return DEFAULT_REDACTOR
    if redact is False:
        return None  # documented as a risk: secrets reach the log as given
    if isinstance(redact, Redactor):
        return redact
    msg = f"redact must be True, False or a runlines.redaction.Redactor, got {redact!r}"
    raise TypeError(msg)


def _stdout_sinks(
    stdout: bool, console: str, dist: _context.Distributed | None
) -> tuple[StdoutSink | None, StdoutSink | None]:
    """Return (the stdout sink, the same sink when it shows console lines, else None)."""
    if console not in ("auto", "json", "pretty"):
        msg = f"console must be 'auto', 'json' or 'pretty', got {console!r}"
        raise ValueError(msg)
    if not stdout or (dist is not None and dist.rank != 0):
        return None, None
    sink = StdoutSink()
    pretty = console == "pretty" or (console == "auto" and sink.isatty())
    return sink, (sink if pretty else None)


def _fast_path(sinks: tuple[Sink, ...], fsync: bool) -> tuple[tuple[int, ...] | None, Any]:
    """Return the descriptors log() may write to directly, and the stream flush to call first."""
    if fsync or any(sink.fd < 0 for sink in sinks):
        return None, None  # syncing, or a replaced sys.stdout (pytest, Jupyter): use the sinks
    flush = None
    for sink in sinks:
        if isinstance(sink, StdoutSink) and sink.stream is not None:
            flush = sink.stream.flush
    return tuple(sink.fd for sink in sinks), flush


def _encode_failed(
    record: dict[str, Any],
    err: TypeError,
    redact: Redact | None,
) -> bytes:
    """Raise the FieldError behind *err*, or encode *record* on the careful path."""
    if isinstance(err.__cause__, FieldError):
        raise err.__cause__ from None
    return encode_line_safe(record, redact)


def _last_run_start(path: Path) -> dict[str, Any] | None:
    """Return the last run_start record of the log at *path*, or None."""
    import mmap  # imported when a run opens, not with runlines

    import orjson  # loaded already by _load()

    try:
        with open(path, "rb") as file:
            if os.fstat(file.fileno()).st_size == 0:
                return None
            with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
                at = data.rfind(b'"event":"run_start"')
                if at < 0:
                    return None
                start = data.rfind(b"\n", 0, at) + 1
                end = data.find(b"\n", at)
                record = orjson.loads(data[start : end if end >= 0 else len(data)])
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _last_attempt(path: Path) -> int:
    record = _last_run_start(path)
    attempt = record.get("attempt") if record else 0
    return attempt if isinstance(attempt, int) else 0


def _load() -> None:
    """Bind, once, the modules and names that only an open run uses (see _dumps)."""
    global _fields, _dumps, _OPTIONS, JSONEncodeError
    global console_line, encode_default, encode_line, encode_line_safe
    if "_dumps" in globals():
        return  # an earlier run bound them
    import orjson

    from runlines import encoding
    from runlines import fields as _fields

    JSONEncodeError, _OPTIONS = orjson.JSONEncodeError, encoding.ORJSON_OPTIONS
    console_line, encode_default = encoding.console_line, encoding.encode_default
    encode_line, encode_line_safe = encoding.encode_line, encoding.encode_line_safe
    _dumps = orjson.dumps  # last: a run opening in another thread now finds all of them
