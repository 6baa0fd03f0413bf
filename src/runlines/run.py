"""The `Run`: identity, lifecycle and the hot path that stamps records and hands lines to sinks."""

from __future__ import annotations

import _thread
import enum
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from types import MethodType, TracebackType
from typing import TYPE_CHECKING, Any, Final, Literal, SupportsIndex

from runlines import _compact, _context, _layout, _lifecycle, _native
from runlines import sinks as _sinks
from runlines._warnings import warn_user
from runlines.errors import FieldDriftWarning, FieldError, RunLockedError, RunStateError
from runlines.redaction import DEFAULT_REDACTOR, Redactor
from runlines.sampling import make_sampler
from runlines.sinks import FileSink, Sink, StdoutSink
from runlines.spans import Span, SpanStats, Tracer, span_record

if TYPE_CHECKING:
    from pathlib import Path

    from runlines import fields as _fields
    from runlines._capture import CaptureSettings
    from runlines._encoding import Redact
    from runlines.fields import Vocabulary

# The C fast path of log(), when it was built at install time (see _speedups/speedups.c).
_Writer = None if _native.speedups is None else _native.speedups.Writer

__all__ = ["Run"]

_MAX_PLANS: Final = 10_000  # dynamic field names must not grow memory without bound
_CHECK_EVERY_S: Final = 1.0  # a deleted log file is noticed within a second of logging
_LOCK_WAIT_S: Final = 0.5  # rides over a reader's momentary probe of the lock
_END_WAIT_S: Final = 0.1  # a lock held longer at close may be the interrupted code's own
_DRAIN_STEP_S: Final = 0.0001
_DYING_WAIT_S: Final = 5.0  # a write refused while a signal ends the process waits for it
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
encode_default: Callable[[Any], Any]
encode_line: Callable[[Mapping[str, Any]], bytes]
encode_line_safe: Callable[[Mapping[str, Any], Redact | None], bytes]
check_inline: Callable[[Mapping[str, Any]], None]
# Types that can hold no secret and need no walk before encoding.
_PLAIN: Final = frozenset({int, float, bool, type(None)})
# How a plan writes its records (the C fast path reads the same numbers, see _speedups/speedups.c):
_AS_IS: Final = 0  # plain values only: encoded without a look
_LIGHT: Final = 1  # plain values, str (redacted once per distinct text) and 0-d numpy/torch
_CAREFUL: Final = 2  # anything else, or a secret key: converted, redacted, then encoded
_MAX_TEXTS: Final = 4096  # distinct short strings whose redacted form is remembered
_MAX_TEXT_LEN: Final = 256  # longer strings are redacted at every call

# (how to write the records, value types last checked, b"null" in the line's fixed text)
_Plan = tuple[int, tuple[type, ...], int]


class _State(enum.Enum):
    OPEN = "open"  # writing; every constructor call ends here or raises
    CLOSING = "closing"  # writing what the samplers owe and run_end: log() refuses
    CLOSED = "closed"  # run_end written, descriptors closed


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
        vocabulary: Vocabulary | str | os.PathLike[str] | None = None,
        fields: Vocabulary | str | os.PathLike[str] | None = None,
        redact: bool | Redactor = True,
        capture: bool | str | Iterable[str] | CaptureSettings | None = True,
        capture_level: int | str = "WARNING",
        resume: Literal["allow", "never", "must"] = "allow",
        system: float | bool = 10.0,
        stall_after: float | None = None,
        on_nonfinite: Literal["warn", "raise", "ignore"] = "warn",
        console_every: float | None = None,
        console_events: Iterable[str] | None = None,
        compact: bool | None = None,
        sinks: Iterable[Sink] = (),
    ) -> None:
        from pathlib import Path  # ~4 ms to import (urllib.parse, fnmatch): when a run opens

        _load()
        self.name = _context.check_run_name(_without_log_suffix(name))
        self.id = _context.new_run_id()
        self._dist = _context.distributed_from_env()
        self.directory = Path(directory)
        self.path = _context.log_path(self.directory, self.name, self._dist)
        self._rank = None if self._dist is None else self._dist.rank
        self._pid = os.getpid()
        # (event, *names) -> (types of the values last seen, whether they need redaction)
        self._plans: dict[tuple[Any, ...], _Plan] = {}
        self._texts: dict[str, str] = {}  # short str value -> its redacted form (often itself)
        self._samplers: dict[str, Any] = {}
        self._writer: Any = None  # the C fast path of log(), once the run has opened
        self._started = _monotonic()
        self._state = _State.OPEN
        self._close_lock = threading.Lock()  # held only to leave OPEN, never while writing
        self._io_lock = threading.Lock()  # held around every write to the sinks, and to close
        self._ended = threading.Event()  # set once run_end is written and the log released
        self._dying = False  # a signal that ends the process is ending the run
        self._closing: dict[str, Any] = {}  # samplers whose owed records the end still writes
        self._end_written = False
        self._next_check = 0.0  # when log() next checks that the log file still exists
        self._terminated_by: str | None = None  # SIGTERM seen, left to the job's own handler
        self._vocabulary = _fields.load_vocabulary(_vocabulary_of(vocabulary, fields))
        self._strict_fields = strict_fields
        self._compact = _compact.check_compact(compact)  # a Parquet copy at close, see _compact
        self._redactor = _redactor(redact)
        self._redact = None if self._redactor is None else self._redactor.redact_fields
        self._kinds: dict[str, str] = {}  # field name -> the JSON kind it was first logged as
        self._warned: set[str] = set()  # field names already warned about, once per run
        self._span_stats = SpanStats()
        self._span_names: dict[str, str] = {}  # span name -> its redacted form
        self._tracer = Tracer(self._log_span, stats=self._span_stats)
        config_dict = _config_dict(config)
        _check_resume_step(resume_step)
        _check_console(console)
        # Watching a live run (docs/watching.md): options checked before anything is written.
        from runlines import _nonfinite, _stall, _watching
        from runlines._console import ConsoleOptions

        system_s = _watching.check_system(system)
        stall_after_s = _stall.check_stall_after(stall_after)
        alarm_mode = _nonfinite.check_on_nonfinite(on_nonfinite)
        self._alarm = (
            None if alarm_mode is None else _nonfinite.NonfiniteAlarm(alarm_mode, self.path)
        )
        console_options = ConsoleOptions.of(console_every, console_events)
        added = tuple(map(_sinks._guard, (*sinks, *_sinks._added_sinks())))
        self._watching: _watching.Watching | None = None
        from runlines._capture import Capture, parse_capture  # with logging: when a run opens

        self._capture = Capture(parse_capture(capture, level=capture_level), self._write_captured)
        # Every argument is checked by now, and the checks below only read: a refused Run
        # leaves nothing on disk.
        self._check_not_open_here()
        _check_resume(resume, self.name, self.directory, self.path)
        created = not self.path.exists(), not self.path.with_name(f"{self.path.name}.lock").exists()
        try:
            self._file = self._open_file(fsync)
        except BaseException:
            self._remove_phantom(*created)
            raise
        try:
            self._stdout, pretty = _stdout_sinks(stdout, console, self._dist)
            self._console = None if pretty is None else console_options.make(pretty)
            self._added = added
            self._sinks: tuple[Sink, ...] = (
                (self._file,)
                + ((self._stdout,) if self._stdout is not None and self._console is None else ())
                + added
            )
            self._fds, self._flush_stdout = _fast_path(self._sinks, fsync)
            self.attempt = _last_attempt(self.path) + 1
            self._file.end_torn_tail()
            self._write_start(config_dict, resume_step)
            self._install_writer()
        except BaseException:
            self._release()
            self._remove_phantom(*created)
            raise
        if self.attempt > 1 and resume == "allow":
            _say(
                f"continuing run {self.name!r} in {str(self.directory)!r} as attempt "
                f"{self.attempt} (Run(..., resume='never') refuses an existing log)"
            )
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
        sampler = kept = None
        if self._samplers:
            try:
                sampler = self._samplers.get(event)
            except TypeError:
                raise _event_error(event) from None
            if sampler is not None:
                kept = sampler.offer(fields)  # before any conversion: a drop costs nothing
                if kept is None:
                    return
                fields = kept
        # Decided once per event and key set: how its values are written (_AS_IS, _LIGHT,
        # _CAREFUL), and the value types last checked.
        key = (event, *fields)
        try:
            mode, types, nulls = self._plans[key]
        except KeyError:
            mode, types, nulls = self._plan(event, fields, key)
        except TypeError:
            raise _event_error(event) from None
        prepared: dict[str, Any] | None = fields
        if mode or not _PLAIN.issuperset(map(type, fields.values())):
            prepared = self._prepare(key, fields, types, mode)
        ts = _now()
        if ts >= self._next_check:
            self._check_file(ts)
        if prepared is not None:
            fields = prepared
        if self._rank is None:
            record = {"ts": ts, "event": event, "run": self.name, **fields}
        else:
            record = {"ts": ts, "event": event, "run": self.name, "rank": self._rank, **fields}
        if prepared is None:  # values to convert before redaction sees them as text
            check_inline(fields)
            line = encode_line_safe(record, self._redact)
        else:
            try:
                line = _dumps(record, default=encode_default, option=_OPTIONS)
            except JSONEncodeError as err:
                line = _encode_failed(record, err, self._redact)
            else:
                # None, or NaN written as null: more nulls than the names hold (counted once per
                # plan, so a run named "nullspace" costs one scan, not the careful path)
                if not mode and line.count(b"null") > nulls:
                    line = encode_line_safe(record, self._redact)
                    prepared = None  # written by encode_line_safe: the alarm looks at it
        if prepared is None and self._alarm is not None and self._alarm.is_new(event, line):
            self._nonfinite(event, line, record, sampler, kept)
            return
        # Under _io_lock: the run cannot close its descriptors between the check of its state
        # and the writes.
        with self._io_lock:
            if self._state is _State.OPEN:
                self._emit(line)
                if sampler is not None:
                    sampler.written(kept)  # its count is in the log now: no longer owed
                return
        raise self._refused()

    def close(self) -> None:
        """Write `run_end` with status "ok" and release the log; closing twice does nothing."""
        self._end("ok", {})

    def span(self, name: str, /, **fields: Any) -> Span:
        """Time a block or a function: `with run.span("eval"):` or `@run.span("step")`.

        On exit a `span` record carries `name`, `duration_s` (monotonic clock), `status`, the
        enclosing span as `parent`, and *fields*.
        """
        for key in fields:
            _check_field_name(key)
        return self._tracer.span(name, **fields)

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
        step: SupportsIndex | None = None,
        **fields: Any,
    ) -> Path:
        """Save *obj* to a side file (or register an existing file with *path*) and log it.

        The `artifact` record holds the file's path relative to the log's folder, its size and
        sha256, never its content. Returns the artifact's path.
        """
        if self._state is not _State.OPEN:
            raise self._refused()
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
        # What the samplers hold came before this artifact: write it first, so that the log
        # reads in step order (no batch seems to run after the final save).
        for event, sampler in list(self._samplers.items()):
            self._write_owed(event, sampler)
        self._write("artifact", {**record, **fields})
        return target

    @property
    def artifacts_dir(self) -> Path:
        """The folder of this run's side files: `<directory>/<name>.artifacts`."""
        return _layout.artifacts_dir(self.path)

    @property
    def dropped(self) -> int:
        """Records that a failing sink lost, all sinks together."""
        return sum(sink.dropped for sink in self._all_sinks())

    @property
    def dropped_by_sink(self) -> dict[str, int]:
        """Records each sink lost: ``{"file": 0, "stdout": 3}`` (stdout only when it is on).

        A sink added with `sinks=` is named by its `kind`, else its class name.
        """
        counts: dict[str, int] = {}
        for sink in self._all_sinks():
            counts[sink.kind] = counts.get(sink.kind, 0) + sink.dropped
        return counts

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
        if self._state is not _State.OPEN:
            raise self._refused()
        _check_event(event)
        for name in fields:
            _check_field_name(name)
            self._check_drift(name)
        self._check_kinds(fields)
        if len(self._plans) >= _MAX_PLANS:
            self._plans.clear()
            self._forget_plans()
        plan = (self._mode_of(fields), tuple(map(type, fields.values())), self._nulls_of(key))
        self._plans[key] = plan  # tuples replaced whole: other threads see old or new
        return plan

    def _nulls_of(self, key: tuple[Any, ...]) -> int:
        """Return how often b"null" is in a line of *key*'s names whose values hold none."""
        event, *names = key
        record = {"event": event, "run": self.name, **dict.fromkeys(names, 0)}
        try:
            return _dumps(record, option=_OPTIONS).count(b"null")
        except JSONEncodeError:
            return 0  # a name orjson cannot write: every line of the plan goes the careful way

    def _mode_of(self, fields: dict[str, Any]) -> int:
        """Return how records of these keys and value types are written (_AS_IS...)."""
        redactor = self._redactor
        if redactor is not None and any(map(redactor.is_secret_key, fields)):
            return _CAREFUL
        mode = _AS_IS
        for value in fields.values():
            kind = type(value)
            if kind in _PLAIN:
                continue
            if kind is not str and not _is_scalar(value):
                return _CAREFUL
            mode = _LIGHT
        return mode

    def _prepare(
        self, key: tuple[Any, ...], fields: dict[str, Any], types: tuple[type, ...], mode: int
    ) -> dict[str, Any] | None:
        """Return the fields of a light plan as JSON values, redacted; None for the careful path.

        The C fast path (_speedups/speedups.c) writes the same values: a str as its remembered
        redacted form, a 0-d numpy or torch value as its item().
        """
        if mode == _LIGHT:
            out: dict[str, Any] | None = None
            for (name, value), kind in zip(fields.items(), types, strict=True):
                now = type(value)
                if now in _PLAIN and kind in _PLAIN:
                    if now is float and value - value != 0.0:  # NaN, infinity: _nonfinite
                        return None
                    continue
                if now is not kind:
                    break  # a value type the plan has not seen: look again
                if now is str:
                    text = self._texts.get(value) or self._text(name, value)
                    if text is not value:
                        out = dict(fields) if out is None else out
                        out[name] = text
                    continue
                number = _item(value)
                if number is None:
                    return None
                out = dict(fields) if out is None else out
                out[name] = number
            else:
                return fields if out is None else out
        now_types = tuple(map(type, fields.values()))
        if now_types != types:
            self._check_kinds(fields)
            mode = self._mode_of(fields)
            self._plans[key] = (mode, now_types, self._nulls_of(key))
            self._forget_plans()
            if mode == _LIGHT:
                return self._prepare(key, fields, now_types, mode)
        return None

    def _text(self, name: str, text: str) -> str:
        """Return field *name*'s *text* redacted, remembered when short (the C fast path reads
        _texts too); refuse it when too long to inline."""
        if len(text) > _MAX_TEXT_LEN:
            check_inline({name: text})
        safe = text if self._redactor is None else self._redactor.redact_text(text)
        if len(text) <= _MAX_TEXT_LEN and len(self._texts) < _MAX_TEXTS:
            self._texts[text] = safe
        return safe

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
            warn_user(message, FieldDriftWarning)

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
                warn_user(message, FieldDriftWarning)

    def _emit(self, line: bytes) -> None:
        """Hand *line* to every sink, and the console line; the caller holds `_io_lock`."""
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
            if isinstance(sink, (FileSink, StdoutSink)) and sink.fd == fd:
                sink.recover(line, written, err)

    def _write(self, event: str, fields: Mapping[str, Any]) -> None:
        """Write a record of runlines' own (artifacts, captures): redacted, the careful path.

        Raises:
            RunStateError: the run has begun to close.
        """
        self._emit_open(self._own_line(event, fields))

    def _emit_open(self, line: bytes) -> None:
        """Write *line* while the run is open; raise RunStateError once it began to close."""
        with self._io_lock:
            if self._state is _State.OPEN:
                self._emit(line)
                return
        raise self._refused()

    def _own_line(self, event: str, fields: Mapping[str, Any]) -> bytes:
        record: dict[str, Any] = {"ts": _now(), "event": event, "run": self.name}
        if self._rank is not None:
            record["rank"] = self._rank
        record.update(fields)
        return encode_line_safe(record, self._redact)

    def _uses_c(self) -> bool:
        """Return True when the C fast path writes this run: built, and log() is ours."""
        return _Writer is not None and type(self).log is Run.log  # a subclass's own must run

    def _install_writer(self) -> None:
        """Put the C fast path in front of log() when it is built and log() is ours."""
        if _Writer is None or not self._uses_c():
            return
        writer = _Writer(
            slow=MethodType(Run.log, self),
            failed=self._write_failed,
            span_slow=self._log_span,
            span_names=self._span_names,
            plans=self._plans,
            texts=self._texts,
            clock=_wall_clock,
            dumps=_dumps,
            default=encode_default,
            option=_OPTIONS,
            name=self.name,
            rank=self._rank,
        )
        self._writer = writer
        self._sync_writer()
        self.__dict__["log"] = writer  # shadows the method: run.log(...) calls the writer
        self._tracer.set_emit(writer.write_span)
        if type(self).span is Run.span:
            writer.set_spans(
                span_type=Span, core=self._tracer.core, slow=MethodType(Run.span, self)
            )
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
        """Write a captured warning or log record, unless the run has begun to close."""
        if self._state is _State.OPEN:
            try:
                self._write(event, fields)
            except RunStateError:
                pass  # it closed since the check: nothing is captured into a closing run

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
        if fields or "span" in self._samplers or self._state is not _State.OPEN:
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
        if writer is not None and writer.enabled and writer.write_record(record):
            return
        self._emit_open(encode_line(record))

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
        for fields in sampler.flush() or ():
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

    def _check_not_open_here(self) -> None:
        """Refuse a run that an open Run of this process writes (a notebook cell run twice)."""
        for earlier in _lifecycle.open_runs():
            path = getattr(earlier, "path", None)
            if path is not None and os.path.abspath(path) == os.path.abspath(self.path):
                msg = (
                    f"run {self.name!r} in {str(self.directory)!r} is already open in this "
                    f"process as {earlier!r}; call close() on that Run (or use 'with Run(...)') "
                    "before opening it again"
                )
                raise RunLockedError(msg)

    def _remove_phantom(self, log_created: bool, lock_created: bool) -> None:
        """After a failed start: remove the log and lock files this call created, if empty."""
        lock_path = _layout.lock_path(self.path)
        for path, created in ((self.path, log_created), (lock_path, lock_created)):
            try:
                if created and path.stat().st_size == 0:
                    path.unlink()
            except OSError:
                pass  # not there, or not ours to remove: nothing was written to it

    def _acquire_lock(self) -> Any:
        from filelock import FileLock, Timeout

        lock = FileLock(_layout.lock_path(self.path), timeout=_LOCK_WAIT_S)
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
        # the C fast path writes to the descriptors only: not with fsync or a sink of the user's
        fast = self._uses_c() and self._fds is not None
        fields[_fields.WRITER] = "c" if fast else "python"
        if self._redactor is not None:
            fields["argv"] = self._redactor.redact_argv(fields["argv"])
        if self._dist is not None:
            fields["world_size"] = self._dist.world_size
        fields["config"] = config if config is not None else {}
        self._write("run_start", fields)

    def _end(self, status: str, details: dict[str, Any], *, patient: bool = False) -> bool:
        """Write what the samplers owe and run_end, then release the log; once per run.

        Never waits long for a lock: when one is held, perhaps by the code that a signal
        handler calling this interrupted, a helper thread finishes the end as soon as the lock
        is free (patient=True: wait here instead). Returns True when the run has ended, False
        when the end is still under way (in a helper thread, or in another caller).
        """
        ended_by_exit = status == "ok" or details.get("exc_type") == "SystemExit"
        if self._terminated_by is not None and ended_by_exit:
            status, details = "terminated", {**details, "signal": self._terminated_by}
        if not self._close_lock.acquire(timeout=-1 if patient else _END_WAIT_S):
            _start_thread(self._end, status, details, patient=True)
            return False
        try:
            if self._state is not _State.OPEN:
                return self._state is _State.CLOSED
            self._state = _State.CLOSING
            self._closing = dict(self._samplers)  # flushed one by one, in the order of sample()
            self._plans.clear()
            self._sync_writer()
        finally:
            self._close_lock.release()
        self._capture.restore()  # before run_end: nothing is captured into a closing run
        if self._watching is not None:
            self._watching.stop()  # a record it writes from now on is refused: none after run_end
        return self._finish_end(status, details, patient)

    def _finish_end(self, status: str, details: dict[str, Any], patient: bool) -> bool:
        """The rest of _end(), from where an earlier try stopped: resumable at every step."""
        timeout = -1 if patient else _END_WAIT_S
        try:
            if not self._drained(timeout) or not self._io_lock.acquire(timeout=timeout):
                _start_thread(self._finish_end, status, details, True)
                return False
            try:
                if not self._write_closing(status, details, timeout):
                    _start_thread(self._finish_end, status, details, True)
                    return False
                self._release()
                self._state = _State.CLOSED
            finally:
                self._io_lock.release()
        except BaseException:
            # A signal handler raised into the end (the job's own, a second SIGTERM): the
            # helper still writes run_end, and the job gets its exception.
            if self._state is not _State.CLOSED:
                _start_thread(self._finish_end, status, details, True)
            raise
        _lifecycle.unregister(self)
        self._ended.set()
        if not patient and status in ("ok", "failed") and os.getpid() == self._pid:
            _compact.compact_at_close(self.path, self._compact)  # never after a signal's end
        return True

    def _write_closing(self, status: str, details: dict[str, Any], timeout: float) -> bool:
        """Write the samplers' owed records, then run_end; the caller holds `_io_lock`.

        Returns False, having written what it could, when a sampler's lock stayed busy.
        """
        if os.getpid() != self._pid:
            return True  # a forked child: run_end is the parent's
        while self._closing:
            event, sampler = next(iter(self._closing.items()))
            records = sampler.flush(timeout=timeout)
            if records is None:
                return False
            for fields in records:
                self._emit(self._own_line(event, fields))
            del self._closing[event]
        if not self._end_written:
            self._emit(self._own_line("run_end", self._end_fields(status, details)))
            self._end_written = True
        return True

    def _drained(self, timeout: float) -> bool:
        """Wait until no thread is inside a write of the C fast path; False after *timeout*."""
        writer = self._writer
        if writer is None or os.getpid() != self._pid:
            return True  # a forked child closes no descriptor; its count may be the parent's
        # Counted in steps, not read from a clock: a test may freeze the clock.
        steps = -1 if timeout < 0 else int(timeout / _DRAIN_STEP_S) + 1
        while writer.writing:
            if steps == 0:
                return False
            steps -= 1
            time.sleep(_DRAIN_STEP_S)  # releases the GIL: the writing thread finishes its write
        return True

    def _end_fields(self, status: str, details: dict[str, Any]) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "id": self.id,
            "attempt": self.attempt,
            "status": status,
            "duration_s": round(_monotonic() - self._started, 6),
            "dropped": self.dropped,
            "dropped_by_sink": self.dropped_by_sink,
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
            sink.flush()
        for sink in self._all_sinks():
            sink.close()
        lock = getattr(self, "_lock", None)
        if lock is not None:
            lock.release()

    def _all_sinks(self) -> tuple[FileSink | StdoutSink | _sinks._Guarded, ...]:
        sinks: list[FileSink | StdoutSink | _sinks._Guarded] = []
        for sink in (getattr(self, "_file", None), getattr(self, "_stdout", None)):
            if sink is not None:
                sinks.append(sink)
        return (*sinks, *getattr(self, "_added", ()))

    def _refused(self) -> RunStateError:
        """Return the error for a write after the run began to close; the caller holds no lock.

        When a signal is ending the process, the thread waits first for the end it asked for.
        """
        if self._dying:
            self._ended.wait(_DYING_WAIT_S)
        return self._closed_error()

    def _closed_error(self) -> RunStateError:
        msg = (
            f"cannot log to run {self.name!r} after it closed; log inside the 'with Run(...)' "
            "block or start a new Run"
        )
        return RunStateError(msg)

    # -- watching a live run (docs/watching.md) -----------------------------------------------

    def _nonfinite(
        self, event: str, line: bytes, record: dict[str, Any], sampler: Any, kept: Any
    ) -> None:
        """Write *line*, then the alarm's `nonfinite` records; warn or raise as asked."""
        self._emit_open(line)
        if sampler is not None:
            sampler.written(kept)  # its count is in the log now: no longer owed
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
        self._emit_open(line)

    # -- process hooks (called by _lifecycle) -------------------------------------------------

    def _on_signal(self, signum: int, ends_process: bool) -> bool:
        """Record a signal, or end the run when it ends the process; see `_end` for the result.

        Runs in a signal handler: it waits for no lock that the interrupted code may hold.
        """
        if os.getpid() != self._pid or self._state is _State.CLOSED:
            return True
        if self._state is _State.CLOSING:
            return False  # its end is under way: the signal's action waits for it
        import signal  # loaded by _lifecycle, which calls this hook

        name = signal.Signals(signum).name
        if ends_process:
            self._dying = True
            return self._end("terminated", {"signal": name})
        if signum == signal.SIGTERM:
            # The job's own handler decides when it ends (checkpoint first, then exit): the run
            # stays open for that, and its run_end says it was terminated.
            self._terminated_by = name
        line = self._own_line("signal", {"signal": name})
        if self._io_lock.acquire(timeout=_END_WAIT_S):
            try:
                if self._state is _State.OPEN:
                    self._emit(line)
            finally:
                self._io_lock.release()
        else:
            _start_thread(self._write_later, line)
        return True

    def _write_later(self, line: bytes) -> None:
        """Write *line* once `_io_lock` is free (a helper thread's job), unless the run closed."""
        with self._io_lock:
            if self._state is _State.OPEN:
                self._emit(line)

    def _on_exit(self, uncaught: BaseException | None) -> None:
        if os.getpid() == self._pid and not self._end(*_status_of(uncaught)):
            # A thread still holds a lock, or is ending the run: give it a moment, but never
            # keep the interpreter from exiting (a daemon thread may be stuck in a write).
            self._ended.wait(_DYING_WAIT_S)

    def _on_fork_child(self) -> None:
        """Keep logging from a forked child, but leave run_end and the lock to the parent.

        A thread of the parent may have held any of the run's locks at the fork: the child,
        which has only the forking thread, starts with free ones.
        """
        self._io_lock = threading.Lock()
        self._close_lock = threading.Lock()
        for sampler in self._samplers.values():
            sampler.after_fork()
        self._span_stats.after_fork()


def _wall_clock() -> float:
    """The clock of `ts`: `_now` looked up per call, so that freezegun's patch of it holds."""
    return _now()


def _start_thread(function: Callable[..., object], *args: Any, **kwargs: Any) -> None:
    """Run *function* in a new thread, taking none of threading's locks (signal-handler safe)."""
    _thread.start_new_thread(function, args, kwargs)


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
            "exc_message": _message_of(exc),
        }
    import traceback  # ~3 ms to import (linecache, tokenize): only a failed run needs it

    try:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    except Exception as err:  # the job's exception must reach the job unchanged
        text = f"(the traceback could not be formatted: {type(err).__name__})"
    return (
        "failed",
        {
            "exc_type": type(exc).__name__,
            "exc_message": _message_of(exc),
            "traceback": text[-20_000:],
        },
    )


def _is_scalar(value: Any) -> bool:
    """Return True for a 0-d numpy or torch value (np.float32(1), torch.tensor(0.5))."""
    kind = type(value)
    if kind.__module__.partition(".")[0] not in ("numpy", "torch"):
        return False
    try:
        return getattr(value, "ndim", None) == 0 and hasattr(value, "item")
    except Exception:  # a value that breaks on a look: the careful path writes its repr
        return False


def _item(value: Any) -> int | float | bool | None:
    """Return a 0-d numpy or torch value as a finite Python number, else None."""
    try:
        if value.ndim != 0:
            return None
        number = value.item()
    except Exception:  # a meta tensor, a dtype: the careful path writes its repr
        return None
    kind = type(number)
    if kind is float:
        return number if number - number == 0.0 else None
    return number if kind is int or kind is bool else None


def _message_of(exc: BaseException) -> str:
    """Return str(exc), or say why there is none: an exception's __str__ may raise too."""
    try:
        return str(exc)
    except Exception as err:  # an error here is the job's, not ours to raise
        try:
            args = repr(exc.args)
        except Exception:
            args = "?"
        return (
            f"<str() of the {type(exc).__name__} raised {type(err).__name__}; args: {args:.1000}>"
        )


def _without_log_suffix(name: Any) -> Any:
    """Return a run name given as its log's file name ("baseline.jsonl") without ".jsonl"."""
    if (
        isinstance(name, str)
        and name.endswith(_layout.LOG_SUFFIX)
        and len(name) > len(_layout.LOG_SUFFIX)
    ):
        return name[: -len(_layout.LOG_SUFFIX)]
    return name


def _vocabulary_of(vocabulary: Any, fields: Any) -> Any:
    """Return the vocabulary option, taking the deprecated `fields=` with a warning."""
    if fields is None:
        return vocabulary
    if vocabulary is not None:
        msg = "pass the vocabulary once, as Run(..., vocabulary=...); fields= is its old name"
        raise TypeError(msg)
    warn_user(
        "Run(..., fields=...) is deprecated and will be removed in the next release; "
        "pass Run(..., vocabulary=...) instead",
        DeprecationWarning,
    )
    return fields


def _check_console(console: Any) -> None:
    if console not in ("auto", "json", "pretty"):
        msg = f"console must be 'auto', 'json' or 'pretty', got {console!r}"
        raise ValueError(msg)


def _check_resume(resume: Any, name: str, directory: Path, path: Path) -> None:
    """Refuse an existing log with resume="never", a missing one with resume="must"."""
    if resume not in ("allow", "never", "must"):
        msg = f"resume must be 'allow', 'never' or 'must', got {resume!r}"
        raise ValueError(msg)
    try:
        exists = path.stat().st_size > 0
    except OSError:
        exists = False
    where = f"run {name!r} in {str(directory)!r}"
    if resume == "never" and exists:
        msg = (
            f"{where} exists already ({path}) and resume='never'; give this run another name, "
            "or pass resume='allow' to continue it as a new attempt"
        )
        raise FileExistsError(msg)
    if resume == "must" and not exists:
        msg = (
            f"{where} has no log to continue ({path} is missing) and resume='must'; check the "
            "name and directory, or pass resume='allow' to start it"
        )
        raise FileNotFoundError(msg)


def _say(message: str) -> None:
    """Print one line for the user on stderr."""
    try:
        print(f"runlines: {message}", file=sys.stderr, flush=True)
    except (OSError, ValueError, AttributeError):
        pass  # no stderr: the attempt number is in run_start anyway


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
        from runlines._encoding import read_mapping

        return read_mapping(config)  # an unresolvable ${...} entry is written, not raised
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
    if not stdout or (dist is not None and dist.rank != 0):
        return None, None
    sink = StdoutSink()
    pretty = console == "pretty" or (console == "auto" and sink.isatty())
    return sink, (sink if pretty else None)


def _fast_path(sinks: tuple[Sink, ...], fsync: bool) -> tuple[tuple[int, ...] | None, Any]:
    """Return the descriptors log() may write to directly, and the stream flush to call first."""
    direct = [sink for sink in sinks if isinstance(sink, (FileSink, StdoutSink)) and sink.fd >= 0]
    if fsync or len(direct) != len(sinks):
        # syncing, a replaced sys.stdout (pytest, Jupyter), or a sink of the user's: every line
        # goes through the sinks' write()
        return None, None
    flush = None
    for sink in direct:
        if isinstance(sink, StdoutSink) and sink.stream is not None:
            flush = sink.stream.flush
    return tuple(sink.fd for sink in direct), flush


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
    global check_inline, encode_default, encode_line, encode_line_safe
    if "_dumps" in globals():
        return  # an earlier run bound them
    import orjson

    from runlines import _encoding
    from runlines import fields as _fields

    JSONEncodeError, _OPTIONS = orjson.JSONEncodeError, _encoding.ORJSON_OPTIONS
    encode_default = _encoding.encode_default
    encode_line, encode_line_safe = _encoding.encode_line, _encoding.encode_line_safe
    check_inline = _encoding.check_inline
    _dumps = orjson.dumps  # last: a run opening in another thread now finds all of them
