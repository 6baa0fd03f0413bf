"""The `Run`: identity, options, lifecycle and the public methods; `_writer` writes its records."""

from __future__ import annotations

import _thread
import enum
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MethodType, TracebackType
from typing import TYPE_CHECKING, Any, Final, Literal, SupportsIndex

from runlines import _compact, _warnings, _writer
from runlines import sinks as _sinks
from runlines._warnings import say, warn_user
from runlines.errors import FieldError, RunStateError
from runlines.redaction import DEFAULT_REDACTOR, Redactor
from runlines.sampling import make_sampler
from runlines.sinks import FileSink, Sink, StdoutSink
from runlines.spans import Span, SpanStats, Tracer

if TYPE_CHECKING:
    from pathlib import Path

    from runlines import (
        _capture,
        _console,
        _context,
        _encoding,
        _layout,
        _lifecycle,
        _logfile,
        _notes,
        _watching,
        artifacts,
    )
    from runlines import fields as _fields
    from runlines._capture import CaptureSettings
    from runlines.fields import Vocabulary

__all__ = ["Run"]

_END_WAIT_S: Final = 0.1  # a lock held longer at close may be the interrupted code's own
_DYING_WAIT_S: Final = 5.0  # a write refused while a signal ends the process waits for it
# A write in flight this long while a signal ends the process is stuck (stdout a full pipe):
# the end goes on without it.
_STUCK_S: Final = 1.0
_monotonic = time.monotonic


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
        resume: Literal["auto", "allow", "never", "must"] = "auto",
        system: float | bool = 10.0,
        stall_after: float | None = None,
        on_nonfinite: Literal["warn", "raise", "ignore"] = "warn",
        console_every: float | None = None,
        console_events: Iterable[str] | None = None,
        console_capture: bool = False,
        compact: bool | None = None,
        sinks: Iterable[Sink] = (),
    ) -> None:
        _load()
        self.name = _context.check_run_name(_without_log_suffix(name))
        self.id = _context.new_run_id()
        self._dist = _context.distributed_from_env()
        self.directory = _context.run_folder(directory)
        self.path = _context.log_path(self.directory, self.name, self._dist)
        self._rank = None if self._dist is None else self._dist.rank
        self._pid = os.getpid()
        self._started = _monotonic()
        self._state = _State.OPEN
        self._close_lock = threading.Lock()  # held only to leave OPEN, never while writing
        self._ended = threading.Event()  # set once run_end is written and the log released
        self._dying = False  # a signal that ends the process is ending the run
        self._closing: dict[str, Any] = {}  # samplers whose owed records the end still writes
        self._end_written = False
        self._ending: tuple[str, dict[str, Any]] = ("ok", {})  # the end under way: its status
        self._past_stuck = _thread.allocate_lock()  # held by the one end past a stuck write
        self._terminated_by: str | None = None  # SIGTERM seen, left to the job's own handler
        self._stall_end: dict[str, Any] | None = None  # owed by a stall that ended at close
        self._console_warns = False  # counted in _warnings: see _warnings.console_shows
        self._strict = strict_fields  # refused media input raises too
        self._media_refused: dict[str, int] = {}  # media name -> calls refused, for run_end
        # -- check the options: every one is checked before anything is written
        vocab = _fields.load_vocabulary(_vocabulary_of(vocabulary, fields))
        self._compact = _compact.check_compact(compact)  # a Parquet copy at close, see _compact
        self._redactor = _redactor(redact)
        self._span_stats = SpanStats()
        config_dict = _encoding.read_config(config)
        _check_resume_step(resume_step)
        _check_console(console)
        system_s = _watching.check_system(system)  # watching a live run: docs/watching.md
        stall_after_s = _watching.check_stall_after(stall_after)
        alarm_mode = _watching.check_on_nonfinite(on_nonfinite)
        console_options = _console.ConsoleOptions.of(console_every, console_events)
        _check_console_capture(console_capture)
        added = tuple(map(_sinks._guard, (*sinks, *_sinks._added_sinks())))
        self._watching: _watching.Watching | None = None
        settings = _capture.parse_capture(capture, level=capture_level)
        self._capture = _capture.Capture(settings, self._write_captured)
        # -- open the log file, under its lock: resume="auto" may choose another name
        asked = self.name
        self._log = _logfile.open_log(
            self.directory, self.name, self._dist, resume=resume, fsync=fsync
        )
        self.name, self.path, self._file = self._log.name, self._log.path, self._log.sink
        # -- build the writer, and start: run_start
        try:
            alarm = None if alarm_mode is None else _watching.NonfiniteAlarm(alarm_mode, self.path)
            pretty = self._build_writer(
                stdout,
                console,
                console_options,
                added,
                alarm,
                fsync=fsync,
                vocabulary=vocab,
                strict_fields=strict_fields,
            )
            previous = _layout.last_attempt(self.path)[0]
            self.attempt = _attempt_of(previous) + 1
            self._file.end_torn_tail()
            config_dict = _kept_config(config_dict, previous)
            self._write_start(config_dict, resume_step)
        except BaseException:
            self._release(failed_start=True)
            raise
        # -- started: say so, then capture and watch
        self._say_attempt(asked, resume, previous, config, config_dict)
        _lifecycle.register(self)
        self._capture.install()
        self._tee = None  # descriptors 1 and 2 copied to <name>.console.log (docs/console.md)
        if console_capture:
            from runlines import _tee  # with ctypes and termios: only a run that asks for it

            self._tee = _tee.start_capture(_layout.console_path(self.path))
        # its pretty console shows runlines' own warnings as lines: Python's warnings do not
        self._console_warns = pretty and self._capture.settings.warnings
        if self._console_warns:
            _warnings.shown_on_console(+1)
        if system_s is not None or stall_after_s is not None:
            self._watching = _watching.Watching(
                self._writer.write_background,
                system_s=system_s,
                stall_after_s=stall_after_s,
                log_fd=self._file.fd,
                stacks_dir=self.artifacts_dir,
                redact=None if self._redactor is None else self._redactor.redact_text,
            )

    def _build_writer(
        self,
        stdout: bool,
        console: str,
        console_options: _console.ConsoleOptions,
        added: tuple[_sinks._Guarded, ...],
        alarm: _watching.NonfiniteAlarm | None,
        *,
        fsync: bool,
        vocabulary: Vocabulary,
        strict_fields: bool,
    ) -> bool:
        """Make the run's writer on its log file and sinks, and put it in front of log();
        return whether the console shows pretty lines."""
        self._stdout, pretty = _stdout_sinks(stdout, console, self._dist)
        shown = None if pretty is None else console_options.make(pretty)
        self._added = added
        self._writer = _writer.Writer(
            self.name,
            self._rank,
            file=self._file,
            sinks=(self._file,)
            + ((self._stdout,) if self._stdout is not None and shown is None else ())
            + added,
            console=shown,
            fsync=fsync,
            redactor=self._redactor,
            vocabulary=vocabulary,
            strict_fields=strict_fields,
            alarm=alarm,
            refused=self._refused,
        )
        self._tracer = Tracer(self._writer.log_span, stats=self._span_stats)
        self._install_writer()
        return shown is not None

    def _say_attempt(
        self,
        asked: str,
        resume: str,
        previous: dict[str, Any] | None,
        config: object,
        config_dict: dict[str, Any] | None,
    ) -> None:
        """Say on stderr that this launch is a new run, or which attempt of a run it continues."""
        if self._rank:
            pass  # rank 0 speaks for the launch
        elif self.attempt == 1 and self.name != asked:
            hint = (
                "; Run(..., resume='allow') would continue a finished run instead"
                if self._log.new_because.endswith(" ended ok")
                else ""
            )
            say(
                f"run {self._log.new_because} in {str(self.directory)!r}: this launch is "
                f"a new run, {self.name!r} ({self.path}){hint}"
            )
        elif self.attempt > 1 and resume in ("auto", "allow"):
            newest = "" if self.name == asked else f", the newest run launched as {asked!r},"
            change = _logfile.config_change(previous, config, config_dict, self._redactor)
            say(
                f"continuing run {self.name!r}{newest} in {str(self.directory)!r} as attempt "
                f"{self.attempt}{change} "
                "(Run(..., resume='never') refuses an existing log)"
            )

    # -- public API ---------------------------------------------------------------------------

    def log(self, event: str, /, **fields: Any) -> None:
        """Write one record: `ts`, `event`, `run`, then *fields* as given."""
        # Reached from a subclass's own log() only: an open run puts its writer's log() (or
        # its C twin) in front of this method, one call level less (see _install_writer).
        self._writer.log(event, **fields)

    def close(self, *, status: Literal["ok", "pruned"] = "ok") -> None:
        """Write `run_end` with *status* and release the log; closing twice does nothing.

        `pruned`: a sweep stopped the run early, as it should (Optuna's pruners, Ray Tune's
        schedulers); every view shows it as its own status.
        """
        statuses = ("ok", _layout.PRUNED)
        if status not in statuses:
            msg = f"close(status={status!r}) is not a status; pass one of {statuses}"
            raise ValueError(msg)
        self._end(status, {})

    def span(self, name: str, /, **fields: Any) -> Span:
        """Time a block or a function: `with run.span("eval"):` or `@run.span("step")`.

        On exit a `span` record carries `name`, `duration_s` (monotonic clock), `status`, the
        enclosing span as `parent`, and *fields*.
        """
        for key in fields:
            _writer.check_field_name(key)
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
        _writer.check_event(event)
        sampler = make_sampler(every=every, per_second=per_second, aggregate=aggregate)
        previous = self._samplers.get(event)
        self._writer.set_samplers({**self._samplers, event: sampler})
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
            _writer.check_field_name(key)
        target, record = artifacts.save_artifact(
            self.directory, self.artifacts_dir, name, obj, path=path, step=step
        )
        clash = sorted(set(fields) & set(record))
        if clash:
            msg = f"artifact fields {clash} are set by runlines; rename them"
            raise FieldError(msg)
        # Written where it was called: the samplers' open windows keep their N calls (an early
        # write would cut them short and unalign every window after).
        self._write("artifact", {**record, **fields})
        return target

    def tag(self, *tags: str) -> None:
        """Tag this run, in `<name>.notes.jsonl` next to its log (`runlines tag`), not the log."""
        _notes.tag(self.path, *tags)

    def note(self, text: str) -> None:
        """Add a note to this run, in `<name>.notes.jsonl` next to its log (`runlines note`)."""
        _notes.note(self.path, text)

    # -- media (docs/media.md): each call encodes in this thread, writes its side file under
    # artifacts_dir/media/<name>/ atomically, then the record that points at it. Input it
    # refuses raises with strict_fields, else warns once per name and is counted in run_end.

    def image(
        self,
        name: str,
        image: Any,
        *,
        step: SupportsIndex,
        caption: str | None = None,
        format: Literal["png", "jpeg"] | None = None,
    ) -> Path | None:
        """Save *image* as PNG (or JPEG) and log an `image` record; return the file's path.

        Takes a numpy array HxW or HxWx1|3|4 (uint8, or float in [0, 1]), a torch tensor CxHxW,
        a PIL image, a matplotlib figure, or the path of a PNG or JPEG file (kept as it is).
        None: the image was refused (see docs/media.md).
        """
        saved = self._media(
            name,
            lambda media: media.save_image(
                self.directory,
                self.artifacts_dir,
                name,
                image,
                step=step,
                caption=caption,
                format=format,
            ),
        )
        return None if saved is None else self._written(_layout.IMAGE, saved)

    def images(
        self,
        name: str,
        images: Iterable[Any],
        *,
        step: SupportsIndex,
        captions: Sequence[str | None] | None = None,
        format: Literal["png", "jpeg"] | None = None,
    ) -> list[Path]:
        """Save several images under one name and step: one `image` record each, with `index`."""
        saved = self._media(
            name,
            lambda media: media.save_images(
                self.directory,
                self.artifacts_dir,
                name,
                images,
                step=step,
                captions=captions,
                format=format,
            ),
        )
        return [self._written(_layout.IMAGE, one) for one in saved or ()]

    def histogram(
        self, name: str, values: Any, *, step: SupportsIndex, bins: int | Sequence[float] = 64
    ) -> None:
        """Log a `histogram` record of *values* (numpy, torch, a list) or of (counts, edges).

        The bins (a count, or the edges) are inline (at most 512), as `numpy.histogram` makes
        them; NaN and infinities are counted apart. The record also holds count, min, max,
        mean and std.
        """
        record = self._media(
            name, lambda media: media.histogram_record(name, values, step=step, bins=bins)
        )
        if record is not None:
            self._write(_layout.HISTOGRAM, record)

    def table(self, name: str, data: Any, *, step: SupportsIndex) -> Path | None:
        """Save *data* (a DataFrame, a list of dicts) as Parquet and log a `table` record."""
        saved = self._media(
            name,
            lambda media: media.save_table(
                self.directory, self.artifacts_dir, name, data, step=step
            ),
        )
        return None if saved is None else self._written(_layout.TABLE, saved)

    def text(self, name: str, text: str, *, step: SupportsIndex) -> Path | None:
        """Log a `text` record: *text* inline, or in a side file (its path returned) when longer
        than log() inlines (100,000 characters)."""
        saved = self._media(
            name,
            lambda media: media.text_record(
                self.directory, self.artifacts_dir, name, text, step=step
            ),
        )
        return None if saved is None else self._written(_layout.TEXT, saved)

    def audio(
        self, name: str, samples: Any, sample_rate: int, *, step: SupportsIndex
    ) -> Path | None:
        """Save *samples* as a WAV file and log an `audio` record; return the file's path."""
        saved = self._media(
            name,
            lambda media: media.save_audio(
                self.directory, self.artifacts_dir, name, samples, sample_rate, step=step
            ),
        )
        return None if saved is None else self._written(_layout.AUDIO, saved)

    def _media(self, name: str, call: Callable[[Any], Any]) -> Any:
        """Return *call* of the media module, or None for input it refused and warned of.

        Refused once the run began to close, before any encoding; the media module (numpy)
        is imported on the first media call.
        """
        if self._state is not _State.OPEN:
            raise self._refused()
        from runlines import _media as media  # the door to numpy, Pillow and pyarrow

        return media.refusing(self._media_refused, name, lambda: call(media), self._strict)

    def _written(self, event: str, saved: tuple[Any, dict[str, Any]]) -> Any:
        """Write the record of media saved as (target, record); return the target."""
        target, record = saved
        self._write(event, record)
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
        self._end(*_lifecycle.end_status(exc))

    def __repr__(self) -> str:
        return f"Run({self.name!r}, path={str(self.path)!r}, state={self._state.value})"

    # -- the writer ---------------------------------------------------------------------------

    def _install_writer(self) -> None:
        """Put the writer's log() in front of log() (the C twin's, and its span(), when built)."""
        if type(self).log is not Run.log:
            return  # a subclass's own log() must run: it reaches the writer through Run.log
        own_span = type(self).span is Run.span
        log, span = self._writer.install(
            self._tracer, MethodType(Run.span, self) if own_span else None
        )
        self.__dict__["log"] = log  # shadows the method: run.log(...) calls the writer
        if span is not None:
            self.__dict__["span"] = span

    @property
    def _io_lock(self) -> threading.Lock:
        """The writer's lock: held around every write to the sinks, and to close."""
        return self._writer.lock

    @property
    def _samplers(self) -> dict[str, Any]:
        """The samplers of sample(), event -> sampler; the writer consults them."""
        return self._writer.samplers

    def _write(self, event: str, fields: Mapping[str, Any]) -> None:
        """Write a record of runlines' own (artifacts, captures): redacted, the careful path.

        Raises:
            RunStateError: the run has begun to close.
        """
        self._writer.write(event, fields)

    def _write_captured(self, event: str, fields: Mapping[str, Any]) -> None:
        """Write a captured warning or log record, unless the run has begun to close."""
        if self._state is _State.OPEN:
            try:
                self._write(event, fields)
            except RunStateError:
                pass  # it closed since the check: nothing is captured into a closing run

    def _write_owed(self, event: str, sampler: Any) -> None:
        """Write what *sampler* still owes (a pending window, the trailing drops) as *event*."""
        for fields in sampler.flush() or ():
            self._writer.write_owed(event, fields, sampler)

    # -- lifecycle ----------------------------------------------------------------------------

    def _write_start(self, config: dict[str, Any] | None, resume_step: int | None) -> None:
        fields: dict[str, Any] = {"id": self.id, "attempt": self.attempt}
        if resume_step is not None:
            fields["resume_step"] = resume_step
        fields.update(_context.describe_process(self.artifacts_dir))
        # the C twin writes to the descriptors only: not with fsync or a sink of the user's
        fields[_fields.WRITER] = self._writer.kind
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
            self._ending = status, details
            self._closing = dict(self._samplers)  # flushed one by one, in the order of sample()
            self._writer.shut()
        finally:
            self._close_lock.release()
        self._capture.restore()  # before run_end: nothing is captured into a closing run
        if self._console_warns:
            self._console_warns = False
            _warnings.shown_on_console(-1)
        if self._watching is not None:
            # a record it writes from now on is refused: none after run_end; the stall_end of
            # a stall that ended since its last check is written before run_end
            self._stall_end = self._watching.stop()
        return self._finish_end(status, details, patient)

    def _finish_end(self, status: str, details: dict[str, Any], patient: bool) -> bool:
        """The rest of _end(), from where an earlier try stopped: resumable at every step.

        While a signal ends the process, a patient end waits at most _STUCK_S for a write in
        flight, then ends the run past it (see _end_past_stuck_write).
        """
        dying = patient and self._dying  # a helper's end, while a signal ends the process
        timeout = _STUCK_S if dying else -1 if patient else _END_WAIT_S
        try:
            if not self._drained(timeout) or not self._writer.lock.acquire(timeout=timeout):
                if dying:
                    return self._end_past_stuck_write(status, details)
                _start_thread(self._finish_end, status, details, True)
                return False
            try:
                if not self._write_closing(status, details, timeout, self._writer.emit):
                    _start_thread(self._finish_end, status, details, True)
                    return False
                self._release()
                self._state = _State.CLOSED
            finally:
                self._writer.lock.release()
        except BaseException:
            # A signal handler raised into the end (the job's own, a second SIGTERM): the
            # helper still writes run_end, and the job gets its exception.
            if self._state is not _State.CLOSED:
                _start_thread(self._finish_end, status, details, True)
            raise
        self._closed(compact=not patient and status in ("ok", "failed", _layout.PRUNED))
        return True

    def _closed(self, *, compact: bool) -> None:
        _lifecycle.unregister(self)  # may end the process: a signal waited for this run_end
        self._ended.set()
        if compact and os.getpid() == self._pid:
            _compact.compact_at_close(self.path, self._compact)  # never after a signal's end

    def _end_past_stuck_write(self, status: str, details: dict[str, Any]) -> bool:
        """Write run_end to the log file past a write that does not return, as the process ends.

        A thread blocked in a write (to stdout that nobody reads) holds the run's writes; O_APPEND
        keeps each line whole in the file. The descriptors and the lock stay as they are: the
        stuck thread still uses them, and the process ends right after.
        """
        if not self._past_stuck.acquire(blocking=False) or self._state is _State.CLOSED:
            return True  # another caller does it, or the end finished meanwhile
        if not self._log.ends_with_run_end(self.id):  # the stuck write may be run_end's own
            self._write_closing(status, details, 0, self._file.write, skip_busy=True)
        self._state = _State.CLOSED
        self._closed(compact=False)
        return True

    def _write_closing(
        self,
        status: str,
        details: dict[str, Any],
        timeout: float,
        emit: Callable[[bytes], None],
        *,
        skip_busy: bool = False,
    ) -> bool:
        """Write the samplers' owed records, then run_end, with *emit* (the writer's, under its
        lock, or the log file's past a stuck write).

        Returns False, having written what it could, when a sampler's lock stayed busy (with
        *skip_busy*, its owed records are left out instead).
        """
        if os.getpid() != self._pid:
            return True  # a forked child: run_end is the parent's
        while self._closing:
            event, sampler = next(iter(self._closing.items()))
            records = sampler.flush(timeout=timeout)
            if records is None and not skip_busy:
                return False
            for fields in records or ():
                if skip_busy:  # past a stuck write: the line alone, no alarm through the sinks
                    emit(self._writer.line(event, fields))
                else:
                    self._writer.emit_owed(event, fields, sampler)
            del self._closing[event]
        if self._stall_end is not None:
            emit(self._writer.line(_layout.STALL_END, self._stall_end))
            self._stall_end = None
        if not self._end_written:
            emit(self._writer.line("run_end", self._end_fields(status, details)))
            self._end_written = True
        return True

    def _drained(self, timeout: float) -> bool:
        """Wait until no thread is inside a write of the C twin; False after *timeout*."""
        # a forked child closes no descriptor; the count may be the parent's
        return os.getpid() != self._pid or self._writer.drained(timeout)

    def _end_fields(self, status: str, details: dict[str, Any]) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "id": self.id,
            "attempt": self.attempt,
            "status": status,
            "duration_s": round(_monotonic() - self._started, 6),
            "dropped": self.dropped,
            "dropped_by_sink": self.dropped_by_sink,
        }
        if self._media_refused:
            fields["media_refused"] = dict(self._media_refused)
        fields.update(details)
        spans = self._span_stats.summary()
        if spans:  # keyed by span names, which redaction of values would not see
            fields["spans"] = {self._writer.span_name(name): stats for name, stats in spans.items()}
        return fields

    def _release(self, *, failed_start: bool = False) -> None:
        """Close the sinks, then release the lock; after a failed start, remove an empty log."""
        writer = getattr(self, "_writer", None)  # None when the start failed before it
        if writer is not None:
            writer.detach()
        if os.getpid() != self._pid:
            return  # a forked child: the parent still owns the file and the lock
        for sink in self._all_sinks():
            sink.flush()
        for sink in self._all_sinks():
            sink.close()
        tee = getattr(self, "_tee", None)
        if tee is not None:  # after the stdout sink's last line, which goes through the tee
            tee.stop(wait=not self._dying)
        self._log.release(failed_start=failed_start)  # its sink closed first

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

    # -- process hooks (called by _lifecycle) -------------------------------------------------

    def _on_signal(self, signum: int, ends_process: bool) -> bool:
        """Record a signal, or end the run when it ends the process; see `_end` for the result.

        Runs in a signal handler: it waits for no lock that the interrupted code may hold.
        """
        if os.getpid() != self._pid or self._state is _State.CLOSED:
            return True
        if ends_process:
            self._stop_waiting()
        if self._state is _State.CLOSING:
            if ends_process:  # its end is under way, and may be stuck in a write to stdout
                _start_thread(self._end_if_stuck)
            return False  # the signal's action waits for the end
        name = _lifecycle.signal_name(signum)
        if ends_process:
            return self._end("terminated", {"signal": name})
        if name == "SIGTERM":
            # The job's own handler decides when it ends (checkpoint first, then exit): the run
            # stays open for that, and its run_end says it was terminated.
            self._terminated_by = name
        line = self._writer.line("signal", {"signal": name})
        if not self._writer.emit_soon(line, _END_WAIT_S):
            _start_thread(self._writer.emit_later, line)
        return True

    def _stop_waiting(self) -> None:
        """A signal ends the process: from now on, no write of the run's waits for stdout."""
        self._dying = True
        if self._stdout is not None:
            self._stdout.stop_waiting()  # a reader that stopped reading must not hold the end
        self._writer.detach()  # lines go through the sinks, the stdout sink's check included

    def _end_if_stuck(self) -> None:
        """Finish the end under way past its write, if it has not ended within _STUCK_S."""
        if not self._ended.wait(_STUCK_S):
            self._end_past_stuck_write(*self._ending)

    def _on_exit(self, uncaught: BaseException | None) -> None:
        if os.getpid() == self._pid and not self._end(*_lifecycle.end_status(uncaught)):
            # A thread still holds a lock, or is ending the run: give it a moment, but never
            # keep the interpreter from exiting (a daemon thread may be stuck in a write).
            self._ended.wait(_DYING_WAIT_S)

    def _on_fork_child(self) -> None:
        """Keep logging from a forked child, but leave run_end and the lock to the parent.

        A thread of the parent may have held any of the run's locks at the fork: the child,
        which has only the forking thread, starts with free ones.
        """
        self._writer.after_fork()
        self._close_lock = threading.Lock()
        self._span_stats.after_fork()


def _start_thread(function: Callable[..., object], *args: Any, **kwargs: Any) -> None:
    """Run *function* in a new thread, taking none of threading's locks (signal-handler safe)."""
    _thread.start_new_thread(function, args, kwargs)


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


def _check_console_capture(console_capture: Any) -> None:
    if not isinstance(console_capture, bool):
        msg = f"console_capture must be True or False, got {console_capture!r}"
        raise TypeError(msg)


def _check_resume_step(resume_step: Any) -> None:
    if resume_step is not None and (
        not isinstance(resume_step, int) or isinstance(resume_step, bool) or resume_step < 0
    ):
        msg = (
            "resume_step must be a non-negative int (the step the checkpoint holds), "
            f"got {resume_step!r}"
        )
        raise FieldError(msg)


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


def _attempt_of(record: dict[str, Any] | None) -> int:
    attempt = record.get("attempt") if record else 0
    return attempt if isinstance(attempt, int) and not isinstance(attempt, bool) else 0


def _kept_config(config: dict[str, Any] | None, previous: dict[str, Any] | None) -> Any:
    """Return the config run_start records: *config*, or the previous attempt's when none is
    given (an attempt without config= keeps the run's config)."""
    if config is not None or previous is None:
        return config
    kept = _encoding.restore_nonfinite(dict(previous)).get("config")
    return kept if isinstance(kept, dict) and kept else None


def _load() -> None:
    """Bind the modules that only an open run uses, when a Run opens (see _writer.load).

    The one door of the write side: opening, writing and closing a run need what these modules
    import at their top (orjson, filelock, signal, subprocess, ...), which `import runlines`
    must not pay for (tests/test_import.py).
    """
    global _capture, _console, _context, _encoding, _fields, _layout, _lifecycle, _logfile
    global _notes, _watching, artifacts
    from runlines import (
        _capture,
        _console,
        _context,
        _encoding,
        _layout,
        _lifecycle,
        _logfile,
        _notes,
        _watching,
        artifacts,
        fields,
    )

    _fields = fields  # in this module, `fields` names a record's fields
    _writer.load(_encoding, fields)
