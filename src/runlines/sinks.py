"""Where lines go: the log file, stdout, and any `Sink` a user adds. Sinks see encoded lines.

A sink writes each line with one `os.write` where it can, so a line that `write` returned from is
in the operating system's hands (it survives SIGKILL), and concurrent writers never interleave
within a line. A sink that fails warns once on stderr, counts what it dropped and keeps trying:
logging never kills the training job.
"""

from __future__ import annotations

import errno
import io
import os
import re
import stat
import sys
import threading
from typing import TYPE_CHECKING, Final, Protocol, TextIO, cast, runtime_checkable

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["FileSink", "Sink", "StdoutSink", "warn_stderr"]


@runtime_checkable
class Sink(Protocol):
    """Something that takes encoded lines: `Run(..., sinks=[...])` adds one to a run.

    A sink may also have `kind` (its name in run_end's `dropped_by_sink`, the class name by
    default) and `dropped` (records it lost). A sink that raises is counted and warned about
    once; the run goes on.
    """

    def write(self, line: bytes, /) -> object:
        """Write one encoded line (UTF-8 JSON ending in a newline); what it returns is ignored."""

    def flush(self) -> None:
        """Hand what `write` buffered on; called before `close`."""

    def close(self) -> None:
        """Release what the sink holds; the run writes nothing to it afterwards."""


def warn_stderr(message: str) -> None:
    """Print a runlines warning straight to stderr, past any capture of warnings into the log."""
    text = f"runlines: warning: {message}\n"
    try:
        stream = sys.stderr
        if stream is None:
            raise OSError
        stream.write(text)
        stream.flush()
    except (OSError, ValueError, AttributeError):
        try:
            os.write(2, text.encode("utf-8", "replace"))
        except OSError:
            pass  # nowhere left to say it; the drop count still records the loss


class _FdWriter:
    """Shared failure handling for sinks that write lines to a file descriptor.

    `fd` and `recover()` are these sinks' own fast method: the writer may write a line to `fd`
    itself (one write per line, the same as `write`) and hand a failed write to `recover()`.
    """

    name = "sink"
    kind = "sink"

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._dropped = 0
        self._failed = False  # warned already; the next success says it recovered
        self._torn = False  # a partial write left a fragment: end it before the next line

    @property
    def dropped(self) -> int:
        """Records this sink lost."""
        return self._dropped

    @dropped.setter
    def dropped(self, value: int) -> None:
        self._dropped = value

    def write(self, line: bytes) -> None:
        """Write *line* with one os.write; on failure count a drop and warn once."""
        try:
            if self._torn:
                line = b"\n" + line
            written = os.write(self.fd, line)
            if written != len(line):
                self._write_rest(line, written)  # leaves _torn set when the newline is missing
            else:
                self._torn = False
        except OSError as err:  # os.write raises only when it wrote nothing: _torn stays right
            self._fail(err)

    def recover(self, line: bytes, written: int, err: OSError | None) -> None:
        """Finish or count a direct write to `fd` that wrote *written* bytes or raised *err*."""
        if err is not None:
            self._fail(err)
            return
        try:
            self._write_rest(line, written)
        except OSError as rest_err:
            self._fail(rest_err)

    def _write_rest(self, line: bytes, written: int) -> None:
        self._torn = True
        view = memoryview(line)
        try:
            while written < len(line):
                written += os.write(self.fd, view[written:])
        except OSError:
            if written == len(line) - 1:
                return  # only the newline is missing: the record is whole, the next line ends it
            raise
        self._torn = False

    def _fail(self, err: OSError) -> None:
        self._dropped += 1
        if not self._failed:
            self._failed = True
            warn_stderr(
                f"the {self.name} failed ({err}); training continues, and records are dropped "
                f"{self._where()} (run_end.dropped_by_sink counts them)"
            )

    def _where(self) -> str:
        """Say where the records this sink drops go missing."""
        return f"from the {self.name}"

    def flush(self) -> None:
        """Nothing to flush: each line went to the operating system with its write."""

    def close(self) -> None:
        """Nothing to release by default."""


class FileSink(_FdWriter):
    """Append lines to a log file, each flushed to the operating system (and to disk with fsync).

    `created` says whether opening it created the file.

    A log file deleted while the run writes it (a cleanup job, ``rm -r`` of its folder) still
    takes writes through the open descriptor, but nobody could ever read them. `check_path()`
    looks for that (the run calls it once a second while it logs), as does reading `dropped`
    (so before run_end) and closing: it re-creates the file with everything written so far and
    carries on in it, or, when the file cannot be re-created, counts its records as dropped.
    """

    name = "file sink"
    kind = "file"

    def __init__(self, path: Path, *, fsync: bool = False) -> None:
        fd, self.created = _open_append(path)
        super().__init__(fd)
        self.path = path
        self._fsync = fsync
        self._lost_to = 0  # bytes of a deleted, unrecoverable file already counted as dropped
        self._lost_lines = 0  # the records in those bytes: a later re-creation restores them
        self._gone_warned = False
        self._pid = os.getpid()  # a forked child leaves the file to the parent
        self._checking = threading.Lock()  # one thread checks at a time; the others go on
        # A second descriptor that reads the log: it can copy a deleted file's bytes. Only for
        # regular files: opening a FIFO or a device for reading could block or consume data.
        self._reader = -1
        if stat.S_ISREG(os.fstat(self.fd).st_mode):
            try:
                self._reader = os.open(path, os.O_RDONLY | _CLOEXEC)
            except OSError:
                pass  # a file we may write but not read: no check for deletion

    @property
    def dropped(self) -> int:
        """Records this sink lost; reading it first checks that the log file was not deleted."""
        self.check_path()
        return self._dropped

    @dropped.setter
    def dropped(self, value: int) -> None:
        self._dropped = value

    def write(self, line: bytes) -> None:
        """Write *line* with one os.write (and sync it with fsync=True); never raise."""
        _FdWriter.write(self, line)
        if self._fsync:
            try:
                _sync(self.fd)
            except OSError as err:
                self._fail(err)

    def _where(self) -> str:
        return f"from the log file {self.path}"

    def check_path(self) -> None:
        """Re-create the log file if it was deleted while open, or count its records as lost.

        Costs one fstat when the file is in place. Re-creating copies the deleted file's bytes
        into a new file at `path` and swaps the descriptor in place (dup2), so writers that hold
        `fd`, log()'s direct path included, go on in the new file.
        """
        if self._reader < 0 or os.getpid() != self._pid:
            return
        if not self._checking.acquire(blocking=False):
            return
        try:
            self._check_path()
        finally:
            self._checking.release()

    def _check_path(self) -> None:
        try:
            if os.fstat(self._reader).st_nlink > 0:
                return
        except OSError:
            return
        try:
            copied = self._recreate()
        except OSError as err:
            self._count_lost(err)
            return
        warn_stderr(
            f"the log file {self.path} was deleted while the run was writing it; re-created it "
            f"with the {copied:,} bytes written so far, and the run goes on in it"
        )

    def _recreate(self) -> int:
        """Copy the deleted file into a new one at `path` and write there from now on.

        Never appends to a file that someone else put at `path` meanwhile (O_EXCL), and removes
        its own half-made copy when the copy fails, so a later check can start over.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fresh = os.open(self.path, _APPEND_FLAGS | os.O_EXCL, 0o666)
        try:
            reader = os.open(self.path, os.O_RDONLY | _CLOEXEC)
            try:
                size = _copy(self._reader, fresh, 0)
                os.dup2(fresh, self.fd, inheritable=False)  # writes land in the new file now
            except OSError:
                os.close(reader)
                raise
        except OSError:
            os.close(fresh)
            self.path.unlink(missing_ok=True)
            raise
        try:
            size = _copy(self._reader, fresh, size)  # lines that arrived during the copy
        except OSError as err:
            self._fail(err)  # the new file is in place; only these lines are missing
        finally:
            os.close(fresh)
        os.close(self._reader)
        self._reader, self._lost_to = reader, 0
        self._dropped -= self._lost_lines  # counted while the file could not be re-created
        self._lost_lines = 0
        return size

    def _count_lost(self, err: OSError) -> None:
        """Count the records of the deleted file that were not counted yet; warn once."""
        try:
            end = os.fstat(self._reader).st_size
            lines = 0
            while self._lost_to < end:
                chunk = os.pread(self._reader, min(_COPY_BYTES, end - self._lost_to), self._lost_to)
                if not chunk:
                    break
                lines += chunk.count(b"\n")
                self._lost_to += len(chunk)
        except OSError:
            return
        self._dropped += lines
        self._lost_lines += lines
        if not self._gone_warned:
            self._gone_warned = True
            warn_stderr(
                f"the log file {self.path} was deleted while the run was writing it and cannot "
                f"be re-created ({err}); training continues, its records are counted as dropped"
            )

    def end_torn_tail(self) -> None:
        """Write a newline if the file ends in a fragment, so the next line stands alone."""
        with open(self.path, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            torn = size > 0 and os.pread(file.fileno(), 1, size - 1) != b"\n"
        if torn:
            os.write(self.fd, b"\n")

    def close(self) -> None:
        """Save the file if it was deleted, then close it; later checks do nothing."""
        # Not while a check in another thread may still dup2() onto `fd`: the number, once
        # closed, may belong to the job's next file. A check that does not finish in time
        # (the code a signal handler interrupted) keeps the descriptors open instead.
        if not self._checking.acquire(timeout=_CLOSE_WAIT_S):
            return
        try:
            if self._reader >= 0 and os.getpid() == self._pid:
                self._check_path()
            for fd in (self.fd, self._reader):
                if fd >= 0:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
            self._reader = -1  # check_path() does nothing from now on
        finally:
            self._checking.release()


class StdoutSink(_FdWriter):
    """Write lines to standard output: straight to its descriptor, or through a replaced stream."""

    name = "stdout sink"
    kind = "stdout"

    def _where(self) -> str:
        return "from stdout only: the log file still gets them"

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream: TextIO | None = sys.stdout if stream is None else stream
        fd = _real_fd(self.stream)
        super().__init__(-1 if fd is None else fd)
        self._at_once = False  # see stop_waiting()
        if fd is None:
            self.write = self._write_text  # type: ignore[method-assign]
        else:
            import select  # loaded now: stop_waiting() runs in a signal handler

            self._select = select

    def stop_waiting(self) -> None:
        """Write from now on only what stdout takes at once: a signal is ending the process.

        A reader that stopped reading (a full pipe) would block a write, and the process with
        it: a line that stdout cannot take at once is dropped (and counted), and the program's
        own buffered prints are no longer flushed. A replaced stream (pytest, Jupyter) is
        written as before.
        """
        self._at_once = self.fd >= 0

    def isatty(self) -> bool:
        """Return True when standard output is a terminal."""
        try:
            return bool(self.stream is not None and self.stream.isatty())
        except (OSError, ValueError, AttributeError):
            return False

    def write(self, line: bytes) -> None:
        """Flush what the program printed, then write *line* with one os.write."""
        if self._at_once:
            self._write_at_once(line)
            return
        self.flush()  # keep the program's own prints in order with our lines
        _FdWriter.write(self, line)

    def flush(self) -> None:
        """Flush the text stream: what the program printed reaches stdout."""
        stream = self.stream
        if stream is not None and not self._at_once:
            try:
                stream.flush()
            except (OSError, ValueError):
                pass  # a closed or broken stdout: the next write counts the drop

    def write_text(self, text: str) -> None:
        """Write a console line (already formatted) through the text stream.

        What the stream's encoding cannot write (PYTHONIOENCODING=ascii, a latin-1 locale) is
        written as backslash escapes: the line comes out, and is not counted as dropped.
        """
        if self._at_once:
            self._write_at_once(text.encode("utf-8", "replace"))
            return
        self._write_stream(text, json_line=False)

    def _write_text(self, line: bytes) -> None:
        self._write_stream(line.decode("utf-8"), json_line=True)

    def _write_stream(self, text: str, *, json_line: bool) -> None:
        try:
            if self.stream is None:
                msg = "sys.stdout is None"
                raise OSError(msg)
            try:
                self.stream.write(text)
            except UnicodeEncodeError as err:  # raised before anything is written
                # A JSON line in JSON's own ASCII form (\u00e9), so that it still parses.
                escaped = _json_ascii(text) if json_line else _backslashed(text, err.encoding)
                self.stream.write(escaped)
            self.stream.flush()
        except (OSError, ValueError) as err:
            self._fail(err if isinstance(err, OSError) else OSError(str(err)))

    def _write_at_once(self, line: bytes) -> None:
        """Write *line* in pieces that stdout takes without blocking; drop the rest."""
        if self._torn:
            line = b"\n" + line
        view = memoryview(line)
        try:
            while view:
                poller = self._select.poll()
                poller.register(self.fd, self._select.POLLOUT)
                if not poller.poll(0):
                    raise BlockingIOError(errno.EAGAIN, "stdout takes nothing more now")
                # A pipe with room takes up to PIPE_BUF bytes without blocking.
                view = view[os.write(self.fd, view[: self._select.PIPE_BUF]) :]
        except OSError as err:
            self._torn = self._torn or len(view) < len(line)  # a piece went out: end it first
            self._fail(err)
            return
        self._torn = False


def _backslashed(text: str, encoding: str) -> str:
    """Return *text* with what *encoding* lacks as backslash escapes (\\xe9, \\u2192)."""
    return text.encode(encoding, "backslashreplace").decode(encoding)


def _json_ascii(line: str) -> str:
    """Return a JSON line with every non-ASCII character as \\uXXXX (a pair above U+FFFF)."""
    return re.sub(r"[^\x00-\x7f]", _json_escape, line)


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


_sync = getattr(os, "fdatasync", os.fsync)  # fdatasync skips the metadata a reader does not need
_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)
_APPEND_FLAGS: Final = os.O_WRONLY | os.O_APPEND | os.O_CREAT | _CLOEXEC
_COPY_BYTES: Final = 1 << 20
_CLOSE_WAIT_S: Final = 1.0


def _open_append(path: Path) -> tuple[int, bool]:
    """Open *path* to append; return the descriptor and whether this call created the file."""
    # the umask decides the final mode
    try:
        return os.open(path, _APPEND_FLAGS | os.O_EXCL, 0o666), True
    except FileExistsError:
        return os.open(path, _APPEND_FLAGS, 0o666), False


def _copy(source: int, target: int, offset: int) -> int:
    """Append the bytes of *source* from *offset* to its end to *target*; return the new end."""
    while chunk := os.pread(source, _COPY_BYTES, offset):
        view = memoryview(chunk)
        while view:
            view = view[os.write(target, view) :]
        offset += len(chunk)
    return offset


def _real_fd(stream: TextIO | None) -> int | None:
    """Return the descriptor behind *stream* when writing to it directly is safe, else None."""
    if type(stream) is not io.TextIOWrapper:  # pytest capture, Jupyter, StringIO: use the stream
        return None
    try:
        return stream.fileno()
    except (OSError, ValueError, io.UnsupportedOperation):
        return None


class _Guarded:
    """A user's sink, kept from killing the run: what it raises is counted, warned once."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.kind: str = getattr(sink, "kind", None) or type(sink).__name__
        self._dropped = 0
        self._warned = False

    @property
    def dropped(self) -> int:
        """Records the sink lost: those it raised on, and those it counts itself."""
        own = getattr(self.sink, "dropped", 0)
        return self._dropped + (own if type(own) is int else 0)

    def write(self, line: bytes) -> None:
        try:
            self.sink.write(line)
        except Exception as err:  # a sink's failure must not kill the training job
            self._failed("write", err)

    def flush(self) -> None:
        try:
            self.sink.flush()
        except Exception as err:
            self._failed("flush", err, count=False)

    def close(self) -> None:
        try:
            self.sink.close()
        except Exception as err:
            self._failed("close", err, count=False)

    def _failed(self, what: str, err: Exception, *, count: bool = True) -> None:
        self._dropped += count
        if not self._warned:
            self._warned = True
            warn_stderr(
                f"the sink {self.kind} raised {type(err).__name__} in {what}() ({err}); "
                "training continues, and its records are counted in run_end.dropped_by_sink"
            )


def _guard(sink: object) -> _Guarded:
    """Return a user's *sink* wrapped for a run; refuse an object that is not a Sink."""
    missing = [m for m in ("write", "flush", "close") if not callable(getattr(sink, m, None))]
    if missing:
        msg = (
            f"sinks= takes objects with write(line), flush() and close(); {sink!r:.80} has no "
            f"{', '.join(missing)} (see runlines.sinks.Sink)"
        )
        raise TypeError(msg)
    return _Guarded(cast(Sink, sink))


# Sinks that every Run opened from now on adds to its own (runlines.testing.capture_records).
_ADDED: list[Sink] = []


def _added_sinks() -> tuple[Sink, ...]:
    """Return the sinks a Run opened now adds besides its own and its `sinks=`."""
    return tuple(_ADDED)
