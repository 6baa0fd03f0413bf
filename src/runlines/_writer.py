"""The one hot path of a run: plans, stamping, encoding and fan-out to the sinks.

`Run` owns the run's identity, options and lifecycle; it hands every record to its `Writer`,
whose `log()` stands in front of `Run.log` (as its C twin, `_speedups/speedups.c`, does when
built). The writer holds the lock around every write and the flag that says whether the run
is still open: `Run` flips it with `shut()` when it begins to close.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final

from runlines import _native
from runlines._warnings import warn_user
from runlines.errors import FieldDriftWarning, FieldError
from runlines.sinks import FileSink, Sink, StdoutSink
from runlines.spans import Span, Tracer, span_record

if TYPE_CHECKING:
    from runlines import fields as _fields
    from runlines._console import TrainingConsole
    from runlines._encoding import Redact
    from runlines._watching import NonfiniteAlarm
    from runlines.fields import Vocabulary
    from runlines.redaction import Redactor

__all__ = ["Writer", "check_event", "check_field_name", "event_error", "load"]

# The C twin of Writer.log, when it was built at install time (see _speedups/speedups.c).
_CWriter = None if _native.speedups is None else _native.speedups.Writer

_MAX_PLANS: Final = 10_000  # dynamic field names must not grow memory without bound
_CHECK_EVERY_S: Final = 1.0  # a deleted log file is noticed within a second of logging
_DRAIN_STEP_S: Final = 0.0001
# Module-level aliases: one global lookup on the hot path, and freezegun still patches _now.
_now = time.time
_write = os.write
# Bound by load() when the first Run opens: the encoder imports orjson (~20 ms) and the field
# vocabulary dataclasses (~8 ms), which `import runlines` must not pay. Module globals, as
# names imported at the top would be: log() looks each up once.
_dumps: Callable[..., bytes]
_OPTIONS: int
_JSONEncodeError: type[TypeError]
_encode_default: Callable[[Any], Any]
_encode_line_safe: Callable[[Mapping[str, Any], Redact | None], bytes]
_check_inline: Callable[[Mapping[str, Any]], None]
# Types that can hold no secret and need no walk before encoding.
_PLAIN: Final = frozenset({int, float, bool, type(None)})
# How a plan writes its records (the C twin reads the same numbers, see _speedups/speedups.c):
_AS_IS: Final = 0  # plain values only: encoded without a look
_LIGHT: Final = 1  # plain values, str (redacted once per distinct text) and 0-d numpy/torch
_CAREFUL: Final = 2  # anything else, or a secret key: converted, redacted, then encoded
_MAX_TEXTS: Final = 4096  # distinct short strings whose redacted form is remembered
_MAX_TEXT_LEN: Final = 256  # longer strings are redacted at every call

# (how to write the records, value types last checked, b"null" in the line's fixed text)
_Plan = tuple[int, tuple[type, ...], int]


class Writer:
    """Stamp, check, encode and write the records of one run to its sinks.

    *refused* returns the error for a write after the run began to close (the run decides
    how: a signal ending the process waits for the end first).
    """

    def __init__(
        self,
        name: str,
        rank: int | None,
        *,
        file: FileSink,
        sinks: tuple[Sink, ...],
        console: TrainingConsole | None,
        fsync: bool,
        redactor: Redactor | None,
        vocabulary: Vocabulary,
        strict_fields: bool,
        alarm: NonfiniteAlarm | None,
        refused: Callable[[], Exception],
    ) -> None:
        self.name = name
        self.rank = rank
        self.lock = threading.Lock()  # held around every write to the sinks, and to close
        self.open = True  # False once the run began to close: writes are refused
        self.samplers: dict[str, Any] = {}  # event -> sampler, replaced whole by set_samplers
        # (event, *names) -> (how to write, the value types last seen, nulls of the names)
        self.plans: dict[tuple[Any, ...], _Plan] = {}
        self.texts: dict[str, str] = {}  # short str value -> its redacted form (often itself)
        self.span_names: dict[str, str] = {}  # span name -> its redacted form
        self.twin: Any = None  # the C twin of log(), once install() built it
        self._file = file
        self._sinks = sinks
        self._console = console
        self._fds, self._flush_stdout = _fast_path(sinks, fsync)
        self._next_check = 0.0  # when log() next checks that the log file still exists
        self._redactor = redactor
        self._redact = None if redactor is None else redactor.redact_fields
        self._vocabulary = vocabulary
        self._strict_fields = strict_fields
        self._kinds: dict[str, str] = {}  # field name -> the JSON kind it was first logged as
        self._warned: set[str] = set()  # field names already warned about, once per run
        self._alarm = alarm
        self._refused = refused
        self._front: Callable[..., None] = self.log  # the log() that runs first: C or this

    # -- the hot path -------------------------------------------------------------------------

    def log(self, event: str, /, **fields: Any) -> None:
        """Write one record: `ts`, `event`, `run`, then *fields* as given."""
        sampler = kept = None
        if self.samplers:
            try:
                sampler = self.samplers.get(event)
            except TypeError:
                raise event_error(event) from None
            if sampler is not None:
                kept = sampler.offer(fields)  # before any conversion: a drop costs nothing
                if kept is None:
                    return
                fields = kept
        # Decided once per event and key set: how its values are written (_AS_IS, _LIGHT,
        # _CAREFUL), and the value types last checked.
        key = (event, *fields)
        try:
            mode, types, nulls = self.plans[key]
        except KeyError:
            mode, types, nulls = self._plan(event, fields, key)
        except TypeError:
            raise event_error(event) from None
        prepared: dict[str, Any] | None = fields
        if mode or not _PLAIN.issuperset(map(type, fields.values())):
            prepared = self._prepare(key, fields, types, mode)
        ts = _now()
        if ts >= self._next_check:
            self._check_file(ts)
        if prepared is not None:
            fields = prepared
        if self.rank is None:
            record = {"ts": ts, "event": event, "run": self.name, **fields}
        else:
            record = {"ts": ts, "event": event, "run": self.name, "rank": self.rank, **fields}
        if prepared is None:  # values to convert before redaction sees them as text
            _check_inline(fields)
            line = _encode_line_safe(record, self._redact)
        else:
            try:
                line = _dumps(record, default=_encode_default, option=_OPTIONS)
            except _JSONEncodeError as err:
                line = _encode_failed(record, err, self._redact)
            else:
                # None, or NaN written as null: more nulls than the names hold (counted once per
                # plan, so a run named "nullspace" costs one scan, not the careful path)
                if not mode and line.count(b"null") > nulls:
                    line = _encode_line_safe(record, self._redact)
                    prepared = None  # written by encode_line_safe: the alarm looks at it
        # A window's mean, min and max derive from values its aggregator told the alarm of
        # (see sampling._Owing): its line is not looked at, or a NaN would alarm twice.
        if (
            prepared is None
            and self._alarm is not None
            and (sampler is None or not sampler.aggregates)
            and self._alarm.is_new(event, line)
        ):
            self._nonfinite(event, line, record, sampler, kept)
            return
        if sampler is not None:
            self._write_sampled(event, line, sampler, kept)
            return
        # Under the lock: the run cannot close its descriptors between the check of its state
        # and the writes.
        with self.lock:
            if self.open:
                self.emit(line)
                return
        raise self._refused()

    def _write_sampled(self, event: str, line: bytes, sampler: Any, kept: Any) -> None:
        """Write a sampler's kept record, then tell the alarm what the window's last call held."""
        with self.lock:
            if not self.open:
                raise self._refused()
            self.emit(line)
            heard = sampler.written(kept)  # its count is in the log now: no longer owed
        if heard is not None:
            self._heard(event, *heard)

    def log_span(
        self,
        name: str,
        duration_s: float,
        parent: str | None,
        status: str,
        exc_type: str | None,
        fields: dict[str, object],
    ) -> None:
        """Write a finished span's record; without user fields only its names need redaction."""
        if fields or "span" in self.samplers or not self.open:
            # user fields, a sampled span event or a closed run: the full path of log()
            self._front("span", **span_record(name, duration_s, parent, status, exc_type, fields))
            return
        names = self.span_names
        record: dict[str, Any] = {"ts": _now(), "event": "span", "run": self.name}
        if self.rank is not None:
            record["rank"] = self.rank
        record["name"] = names.get(name) or self.span_name(name)
        record["duration_s"] = duration_s
        if parent is not None:
            record["parent"] = names.get(parent) or self.span_name(parent)
        record["status"] = status
        if exc_type is not None:
            record["exc_type"] = exc_type
        # The names are redacted str and duration_s a float: only a non-finite duration writes
        # a null, so that is looked at, not the line (a span named "nullify" stays plain).
        if duration_s - duration_s != 0.0:
            self.emit_open(_encode_line_safe(record, None))
            return
        twin = self.twin
        if twin is not None and twin.enabled and twin.write_record(record):
            return
        try:
            line = _dumps(record, option=_OPTIONS)
        except _JSONEncodeError:  # a lone surrogate in a name
            line = _encode_line_safe(record, None)
        self.emit_open(line)

    def span_name(self, name: str) -> str:
        """Return a span name redacted, checked once per name (span names are few)."""
        safe = self.span_names.get(name)
        if safe is None:
            safe = name if self._redactor is None else self._redactor.redact_text(name)
            if len(self.span_names) < _MAX_PLANS:
                self.span_names[name] = safe
        return safe

    def emit(self, line: bytes) -> None:
        """Hand *line* to every sink, and the console line; the caller holds `lock`."""
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

    # -- records of runlines' own -------------------------------------------------------------

    def line(self, event: str, fields: Mapping[str, Any]) -> bytes:
        """Return a record of runlines' own (run_start, a capture) as a line, the careful way."""
        record: dict[str, Any] = {"ts": _now(), "event": event, "run": self.name}
        if self.rank is not None:
            record["rank"] = self.rank
        record.update(fields)
        return _encode_line_safe(record, self._redact)

    def write(self, event: str, fields: Mapping[str, Any]) -> None:
        """Write a record of runlines' own while the run is open.

        Raises:
            RunStateError: the run has begun to close.
        """
        self.emit_open(self.line(event, fields))

    def emit_open(self, line: bytes) -> None:
        """Write *line* while the run is open; raise the run's refusal once it began to close."""
        with self.lock:
            if self.open:
                self.emit(line)
                return
        raise self._refused()

    def emit_soon(self, line: bytes, timeout: float) -> bool:
        """Write *line* if the run is open and the lock frees within *timeout*; False if not."""
        if not self.lock.acquire(timeout=timeout):
            return False
        try:
            if self.open:
                self.emit(line)
        finally:
            self.lock.release()
        return True

    def emit_later(self, line: bytes) -> None:
        """Write *line* once the lock is free (a helper thread's job), unless the run closed."""
        with self.lock:
            if self.open:
                self.emit(line)

    def write_owed(self, event: str, fields: Mapping[str, Any], sampler: Any) -> None:
        """Write a record a sampler owes while the run is open (sample() replaced it).

        Raises:
            RunStateError: the run has begun to close.
        """
        line = self.line(event, fields)
        self.emit_open(line)
        if self._owes_alarm(event, line, sampler):
            assert self._alarm is not None  # _owes_alarm checked it
            self._alarm.fire(event, line, fields, self.write, in_log_call=False)

    def emit_owed(self, event: str, fields: Mapping[str, Any], sampler: Any) -> None:
        """Write a record a sampler owes at close; the caller holds `lock`.

        A keep-mode sampler's last dropped call was never looked at: its NaN alarms here, as
        a warning even under "raise" (the record is in the log; the close must finish).
        """
        line = self.line(event, fields)
        self.emit(line)
        if self._owes_alarm(event, line, sampler):
            assert self._alarm is not None  # _owes_alarm checked it
            self._alarm.fire(event, line, fields, self._emit_record, in_log_call=False)

    def _owes_alarm(self, event: str, line: bytes, sampler: Any) -> bool:
        # an aggregator's windows hold values it told the alarm of already
        alarm = self._alarm
        return alarm is not None and not sampler.aggregates and alarm.is_new(event, line)

    def _emit_record(self, event: str, fields: Mapping[str, Any]) -> None:
        self.emit(self.line(event, fields))

    def write_background(
        self, event: str, fields: Mapping[str, Any], count: Callable[[int], None]
    ) -> None:
        """Write a record of the watcher thread's, telling *count* its size first."""
        line = self.line(event, fields)
        count(len(line))
        self.emit_open(line)

    # -- the run's side -----------------------------------------------------------------------

    @property
    def kind(self) -> str:
        """Which path writes the records: "c" (the C twin) or "python"."""
        return "c" if self.twin is not None and self._fds is not None else "python"

    def install(self, tracer: Tracer, span: Callable[..., Any] | None) -> tuple[Any, Any]:
        """Return the log() to put in front of Run.log, and the span() when *span* is given.

        Builds the C twin when it was built at install time: it gets every object it uses
        here, and hands what it declines to this writer (and *span*, the run's own span()).
        """
        if _CWriter is None:
            return self.log, None
        twin = _CWriter(
            slow=self.log,
            failed=self._write_failed,
            span_slow=self.log_span,
            span_names=self.span_names,
            plans=self.plans,
            texts=self.texts,
            clock=_wall_clock,
            dumps=_dumps,
            default=_encode_default,
            option=_OPTIONS,
            name=self.name,
            rank=self.rank,
        )
        self.twin = self._front = twin
        self._sync()
        tracer.set_emit(twin.write_span)
        if span is None:
            return twin, None
        twin.set_spans(span_type=Span, core=tracer.core, slow=span)
        return twin, twin.span

    def set_samplers(self, samplers: dict[str, Any]) -> None:
        """Sample with *samplers* from now on (replaced whole: other threads see old or new)."""
        if self._alarm is not None:
            for event, sampler in samplers.items():
                if sampler.aggregates and sampler.heard is None:
                    sampler.heard = functools.partial(self._heard, event)
        self.samplers = samplers
        self._sync()

    def shut(self) -> None:
        """Refuse every write from now on; the closing run writes its own with `emit`."""
        self.open = False
        self.plans.clear()
        self._sync()

    def detach(self) -> None:
        """Leave the descriptors: the run is about to close them (lines go through the sinks)."""
        self._fds = None
        self._sync()

    def drained(self, timeout: float) -> bool:
        """Wait until no thread is inside a write of the C twin; False after *timeout*."""
        twin = self.twin
        if twin is None:
            return True
        # Counted in steps, not read from a clock: a test may freeze the clock.
        steps = -1 if timeout < 0 else int(timeout / _DRAIN_STEP_S) + 1
        while twin.writing:
            if steps == 0:
                return False
            steps -= 1
            time.sleep(_DRAIN_STEP_S)  # releases the GIL: the writing thread finishes its write
        return True

    def after_fork(self) -> None:
        """Start a forked child with a free lock: a thread of the parent may have held it."""
        self.lock = threading.Lock()
        for sampler in self.samplers.values():
            sampler.after_fork()

    # -- plans ---------------------------------------------------------------------------------

    def _plan(self, event: Any, fields: dict[str, Any], key: tuple[Any, ...]) -> _Plan:
        """Check a new event name and key set once, and decide how to write its records."""
        if not self.open:
            raise self._refused()
        check_event(event)
        for name in fields:
            check_field_name(name)
            self._check_drift(name)
        self._check_kinds(fields)
        if len(self.plans) >= _MAX_PLANS:
            self.plans.clear()
            self._forget_plans()
        plan = (self._mode_of(fields), tuple(map(type, fields.values())), self._nulls_of(key))
        self.plans[key] = plan  # tuples replaced whole: other threads see old or new
        return plan

    def _nulls_of(self, key: tuple[Any, ...]) -> int:
        """Return how often b"null" is in a line of *key*'s names whose values hold none."""
        event, *names = key
        record = {"event": event, "run": self.name, **dict.fromkeys(names, 0)}
        try:
            return _dumps(record, option=_OPTIONS).count(b"null")
        except _JSONEncodeError:
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

        The C twin (_speedups/speedups.c) writes the same values: a str as its remembered
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
                    text = self.texts.get(value) or self._text(name, value)
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
            self.plans[key] = (mode, now_types, self._nulls_of(key))
            self._forget_plans()
            if mode == _LIGHT:
                return self._prepare(key, fields, now_types, mode)
        return None

    def _text(self, name: str, text: str) -> str:
        """Return field *name*'s *text* redacted, remembered when short (the C twin reads
        `texts` too); refuse it when too long to inline."""
        if len(text) > _MAX_TEXT_LEN:
            _check_inline({name: text})
        safe = text if self._redactor is None else self._redactor.redact_text(text)
        if len(text) <= _MAX_TEXT_LEN and len(self.texts) < _MAX_TEXTS:
            self.texts[text] = safe
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

    def _forget_plans(self) -> None:
        """Make the C twin learn plans again after one changed."""
        if self.twin is not None:
            self.twin.forget()

    # -- the sinks' side ----------------------------------------------------------------------

    def _write_failed(self, fd: int, line: bytes, written: int, err: OSError | None) -> None:
        """Let the sink behind *fd* finish or count a failed write; leave the descriptors."""
        self._fds = None  # from now on every line goes through the sinks' own handling
        self._sync()
        for sink in self._sinks:
            if isinstance(sink, (FileSink, StdoutSink)) and sink.fd == fd:
                sink.recover(line, written, err)

    def _check_file(self, now: float) -> None:
        """Once a second: re-create the log file if a cleanup deleted it while we write it."""
        self._next_check = now + _CHECK_EVERY_S
        self._sync()
        self._file.check_path()

    def _sync(self) -> None:
        """Tell the C twin what log() would check: state, descriptors, samplers, clock."""
        twin = self.twin
        if twin is not None:
            twin.configure(
                enabled=self.open and self._console is None,
                fds=self._fds,
                flush=self._flush_stdout,
                next_check=self._next_check,
                samplers=self.samplers,
            )

    def _nonfinite(
        self, event: str, line: bytes, record: dict[str, Any], sampler: Any, kept: Any
    ) -> None:
        """Write *line*, then the alarm's `nonfinite` records; warn or raise as asked."""
        self.emit_open(line)
        if sampler is not None:
            sampler.written(kept)  # its count is in the log now: no longer owed
        assert self._alarm is not None  # log() checked it
        self._alarm.fire(event, line, record, self.write)

    def _heard(self, event: str, fields: dict[str, Any], values: list[tuple[str, float]]) -> None:
        """An aggregator's call brought NaN or infinity: write its alarm; warn or raise."""
        assert self._alarm is not None  # set_samplers gave the hook only then
        self._alarm.hear(event, values, fields, self.write)


def _wall_clock() -> float:
    """The clock of `ts`: `_now` looked up per call, so that freezegun's patch of it holds."""
    return _now()


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


def _encode_failed(record: dict[str, Any], err: TypeError, redact: Redact | None) -> bytes:
    """Raise the FieldError behind *err*, or encode *record* on the careful path."""
    if isinstance(err.__cause__, FieldError):
        raise err.__cause__ from None
    return _encode_line_safe(record, redact)


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


def check_event(event: Any) -> None:
    """Refuse an event name that is not a non-empty str."""
    if not isinstance(event, str):
        raise event_error(event)
    if not event:
        msg = "the event name is empty; name what happened, e.g. run.log('train_step', loss=...)"
        raise FieldError(msg)


def event_error(event: Any) -> TypeError:
    """Return the error for an event name that is not a str."""
    msg = (
        f"the event name must be a str, got {type(event).__name__} {event!r:.80}; "
        "pass it first, e.g. run.log('train_step', loss=...)"
    )
    return TypeError(msg)


def check_field_name(key: str) -> None:
    """Refuse a field name that runlines sets itself, or an empty one."""
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


def load(encoding: ModuleType, fields: ModuleType) -> None:
    """Bind, once, the names that only an open run uses (see _dumps), from the modules
    `_encoding` and `fields` that run.py's door (`run._load`) imported."""
    global _fields, _dumps, _OPTIONS, _JSONEncodeError
    global _check_inline, _encode_default, _encode_line_safe
    if "_dumps" in globals():
        return  # an earlier run bound them
    _fields = fields
    _JSONEncodeError, _OPTIONS = encoding.ENCODE_ERROR, encoding.ORJSON_OPTIONS
    _encode_default, _encode_line_safe = encoding.encode_default, encoding.encode_line_safe
    _check_inline = encoding.check_inline
    _dumps = encoding.dumps  # last: a run opening in another thread now finds all of them
