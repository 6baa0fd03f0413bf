"""Where lines go: the log file and stdout. Sinks see encoded lines, never records.

A sink writes each line with one `os.write` where it can, so a line that `write` returned from is
in the operating system's hands (it survives SIGKILL), and concurrent writers never interleave
within a line. A sink that fails warns once on stderr, counts what it dropped and keeps trying:
logging never kills the training job.
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path
from typing import Protocol, TextIO

__all__ = ["FileSink", "Sink", "StdoutSink", "warn_stderr"]


class Sink(Protocol):
    """Something that takes encoded lines."""

    name: str
    dropped: int
    fd: int  # the descriptor log() may write to directly, or -1

    def write(self, line: bytes) -> None:
        """Write one encoded line, ending in a newline; never raise."""

    def recover(self, line: bytes, written: int, err: OSError | None) -> None:
        """Finish or count a direct write to `fd` that wrote *written* bytes or raised *err*."""

    def close(self) -> None:
        """Release what the sink holds."""


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
    """Shared failure handling for sinks that write lines to a file descriptor."""

    name = "sink"

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.dropped = 0
        self._failed = False  # warned already; the next success says it recovered
        self._torn = False  # a partial write left a fragment: end it before the next line

    def write(self, line: bytes) -> None:
        """Write *line* with one os.write; on failure count a drop and warn once."""
        try:
            if self._torn:
                line = b"\n" + line
            written = os.write(self.fd, line)
            if written != len(line):
                self._write_rest(line, written)
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
        while written < len(line):
            written += os.write(self.fd, view[written:])
        self._torn = False

    def _fail(self, err: OSError) -> None:
        self.dropped += 1
        if not self._failed:
            self._failed = True
            warn_stderr(f"the {self.name} failed ({err}); training continues, records are dropped")

    def close(self) -> None:
        """Nothing to release by default."""


class FileSink(_FdWriter):
    """Append lines to a log file, each flushed to the operating system (and to disk with fsync)."""

    name = "file sink"

    def __init__(self, path: Path, *, fsync: bool = False) -> None:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
        super().__init__(os.open(path, flags, 0o666))  # the umask decides the final mode
        self.path = path
        if fsync:
            self.write = self._write_synced  # type: ignore[method-assign]

    def end_torn_tail(self) -> None:
        """Write a newline if the file ends in a fragment, so the next line stands alone."""
        with open(self.path, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            torn = size > 0 and os.pread(file.fileno(), 1, size - 1) != b"\n"
        if torn:
            os.write(self.fd, b"\n")

    def _write_synced(self, line: bytes) -> None:
        _FdWriter.write(self, line)
        try:
            _sync(self.fd)
        except OSError as err:
            self._fail(err)

    def close(self) -> None:
        """Close the file."""
        try:
            os.close(self.fd)
        except OSError:
            pass


class StdoutSink(_FdWriter):
    """Write lines to standard output: straight to its descriptor, or through a replaced stream."""

    name = "stdout sink"

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream: TextIO | None = sys.stdout if stream is None else stream
        fd = _real_fd(self.stream)
        super().__init__(-1 if fd is None else fd)
        if fd is None:
            self.write = self._write_text  # type: ignore[method-assign]

    def isatty(self) -> bool:
        """Return True when standard output is a terminal."""
        try:
            return bool(self.stream is not None and self.stream.isatty())
        except (OSError, ValueError, AttributeError):
            return False

    def write(self, line: bytes) -> None:
        """Flush what the program printed, then write *line* with one os.write."""
        stream = self.stream
        if stream is not None:
            try:
                stream.flush()  # keep the program's own prints in order with our lines
            except (OSError, ValueError):
                pass
        _FdWriter.write(self, line)

    def write_text(self, text: str) -> None:
        """Write a console line (already formatted) through the text stream."""
        try:
            if self.stream is None:
                msg = "sys.stdout is None"
                raise OSError(msg)
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError) as err:
            self._fail(err if isinstance(err, OSError) else OSError(str(err)))

    def _write_text(self, line: bytes) -> None:
        self.write_text(line.decode("utf-8"))


_sync = getattr(os, "fdatasync", os.fsync)  # fdatasync skips the metadata a reader does not need


def _real_fd(stream: TextIO | None) -> int | None:
    """Return the descriptor behind *stream* when writing to it directly is safe, else None."""
    if type(stream) is not io.TextIOWrapper:  # pytest capture, Jupyter, StringIO: use the stream
        return None
    try:
        return stream.fileno()
    except (OSError, ValueError, io.UnsupportedOperation):
        return None
