"""Console capture, `Run(..., console_capture=True)`: descriptors 1 and 2 kept in a side file.

While a run captures, descriptors 1 and 2 of the process are a pipe each (a pseudo-terminal
when the original was a terminal) read by a small separate process, the tee. The tee writes
what it reads to the original descriptors unchanged, and to `<name>.console.log` as lines
stamped with their time (see docs/console.md for the format). Being a process of its own, it
outlives a SIGKILL of the job and drains what the pipes still hold; children that inherit the
descriptors write into the same pipes. Closing the run puts the original descriptors back.

The tee runs this module as a script (`python -I -S _tee.py ...`), without runlines on its
path: what it needs is the standard library's cheapest modules (`_thread`, not `threading`);
what only the job's side needs is imported when the module is not that script.
"""

from __future__ import annotations

import _thread
import errno
import os
import select
import signal
import sys
import time
from typing import TYPE_CHECKING, Any, Final

if __name__ != "__main__":  # the job's side; the tee, a script, starts without them (and faster)
    import ctypes
    import subprocess

    from runlines._warnings import warn_user
    from runlines.errors import RunlinesWarning

    if os.name == "posix":  # elsewhere the run warns that capture needs POSIX
        import fcntl
        import termios

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["ConsoleCapture", "Lines", "start_capture"]

STREAMS: Final = ((1, "out"), (2, "err"))  # descriptor and the tag its lines carry
_READ_BYTES: Final = 1 << 16
_MAX_LINE_BYTES: Final = 1 << 20  # a longer line without a newline is written in pieces
_HELD_BYTES: Final = 1 << 20  # a stream's bytes held for its terminal before it is read no more
_START_S: Final = 10.0  # the tee says it is ready within this (a Python start, a slow disk)
_DRAIN_S: Final = 2.0  # closing waits this long for the tee to write what it holds
_IGNORED_SIGNALS: Final = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")

_active: list[ConsoleCapture] = []  # one capture at a time in a process


# -- the job's side ---------------------------------------------------------------------------


class ConsoleCapture:
    """The descriptors a run redirected, what they were, and the tee that copies them."""

    def __init__(
        self,
        path: Path,
        saved: dict[int, int],
        tee: subprocess.Popen[bytes],
        terminals: list[tuple[int, int]],
    ) -> None:
        self.path = path
        self._saved = saved  # descriptor -> a duplicate of what it was before
        self._tee = tee
        self._pid = os.getpid()
        self._terminals = terminals  # (the original terminal, the pseudo-terminal shown to it)
        self._resized: Any = None  # SIGWINCH's handler before ours
        self._following = False  # whether ours is installed
        if terminals:
            self._follow_resizes()

    def _follow_resizes(self) -> None:
        """On SIGWINCH (the original terminal resized), give each pseudo-terminal its size."""
        try:
            self._resized = signal.signal(signal.SIGWINCH, self._on_resize)
        except (ValueError, OSError):  # not the main thread: the size stays the first one
            return
        self._following = True

    def _on_resize(self, signum: int, frame: Any) -> None:
        for original, shown in self._terminals:
            try:
                _copy_size(original, shown)
            except OSError:
                pass  # a terminal gone: nothing to follow
        if callable(self._resized):
            self._resized(signum, frame)  # the program's own handler still runs

    def _restore_resizes(self) -> None:
        if self._following:
            # a handler set from C (None) cannot be put back: the default (ignore) is
            previous = signal.SIG_DFL if self._resized is None else self._resized
            try:
                signal.signal(signal.SIGWINCH, previous)
            except (ValueError, OSError):
                pass
            self._following = False
        for _original, shown in self._terminals:
            try:
                os.close(shown)
            except OSError:
                pass
        self._terminals = []

    def stop(self, *, wait: bool = True) -> None:
        """Put the original descriptors back; with *wait*, flush first and let the tee drain.

        Without *wait* (a signal is ending the process, stdout may be a full pipe) nothing is
        flushed and nothing waited for: the tee writes what it holds once the process is gone.
        """
        if os.getpid() != self._pid or not self._saved:
            return  # a forked child leaves the descriptors to the parent
        if wait:
            flush_streams()
        self._restore_resizes()
        for fd, saved in self._saved.items():
            try:
                os.dup2(saved, fd)
                os.close(saved)
            except OSError:
                pass
        self._saved = {}
        if self in _active:
            _active.remove(self)
        if wait:
            try:  # past EOF on its pipes; a child still holding them keeps it running
                self._tee.wait(_DRAIN_S)
            except subprocess.TimeoutExpired:
                pass


def start_capture(path: Path) -> ConsoleCapture | None:
    """Send descriptors 1 and 2 through a tee that also writes them to *path*.

    Returns None, having warned, when the process cannot capture (another run captures
    already, no POSIX descriptors, no Python to run the tee with): the run goes on without.
    """
    reason = _cannot_capture()
    if reason is None:
        try:
            capture = _start(path)
        except (OSError, ValueError) as err:
            reason = f"the tee could not start ({err})"
        else:
            _active.append(capture)
            return capture
    warn_user(f"console_capture is off for this run: {reason}", RunlinesWarning)
    return None


def _cannot_capture() -> str | None:
    if _active:
        return f"another run captures the console already (into {_active[0].path})"
    if os.name != "posix":
        return "it needs POSIX descriptors and pseudo-terminals"
    if not sys.executable:
        return "sys.executable is empty: no Python to run the tee with"
    return None


def _start(path: Path) -> ConsoleCapture:
    flush_streams()  # what was printed before goes to the original descriptors
    streams: list[tuple[int, str, int, int, int]] = []  # fd, tag, saved, read end, write end
    try:
        for fd, tag in STREAMS:
            try:
                saved = os.dup(fd)
            except OSError:
                continue  # a closed descriptor stays closed
            streams.append((fd, tag, saved, *_channel(saved)))
        if not streams:
            msg = "descriptors 1 and 2 are both closed"
            raise OSError(msg)
        ready, started = os.pipe()
        try:
            tee = subprocess.Popen(
                [sys.executable, "-I", "-S", os.path.abspath(__file__), os.fspath(path)]
                + [str(started)]
                + [f"{tag}:{read}:{fd}" for fd, tag, _saved, read, _write in streams],
                stdin=subprocess.DEVNULL,
                stdout=_saved_of(streams, 1),
                stderr=_saved_of(streams, 2),
                pass_fds=[started, *(read for *_, read, _write in streams)],
            )
            os.close(started)
            _wait_ready(ready, tee)
        finally:
            os.close(ready)
        for fd, _tag, _saved, _read, write in streams:
            os.dup2(write, fd)  # inheritable: children write into the tee too
    except BaseException:
        for *_, saved, read, write in streams:
            for end in (saved, read, write):
                os.close(end)
        raise
    terminals = []  # a pseudo-terminal's slave is kept (not inherited) to pass resizes on
    for *_, saved, read, write in streams:
        os.close(read)
        if os.isatty(write):
            terminals.append((saved, write))
        else:
            os.close(write)
    saved_of = {fd: saved for fd, _tag, saved, *_ in streams}
    return ConsoleCapture(path, saved_of, tee, terminals)


def _wait_ready(ready: int, tee: subprocess.Popen[bytes]) -> None:
    """Wait until the tee reads its pipes, so that lines are stamped when they are printed."""
    if not select.select([ready], [], [], _START_S)[0] or os.read(ready, 1) != b"1":
        tee.kill()
        tee.wait()
        msg = f"it did not start within {_START_S:g} s, or could not open its side file"
        raise OSError(msg)


def _saved_of(streams: list[tuple[int, str, int, int, int]], fd: int) -> int | None:
    return next((saved for number, _tag, saved, *_ in streams if number == fd), None)


def _channel(original: int) -> tuple[int, int]:
    """Return (read end, write end) for a descriptor: a pseudo-terminal for a terminal."""
    if not os.isatty(original):
        return os.pipe()
    master, slave = os.openpty()
    try:
        _like_terminal(original, slave)
    except OSError:
        pass  # the size or output mode stays the default: the capture still works
    return master, slave


def _like_terminal(original: int, slave: int) -> None:
    """Give the pseudo-terminal the original's size, and pass the program's bytes unchanged."""
    _copy_size(original, slave)
    attributes = termios.tcgetattr(slave)
    attributes[1] &= ~termios.OPOST  # no "\n" -> "\r\n": the real terminal does its own
    termios.tcsetattr(slave, termios.TCSANOW, attributes)


def _copy_size(original: int, shown: int) -> None:
    """Set terminal *shown*'s window size (rows, columns, pixels) to terminal *original*'s."""
    fcntl.ioctl(shown, termios.TIOCSWINSZ, fcntl.ioctl(original, termios.TIOCGWINSZ, b"\0" * 8))


def flush_streams() -> None:
    """Flush Python's sys.stdout and sys.stderr, and C's stdio buffers (printf)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError, ImportError):
        pass  # no C library to flush


# -- the tee's side ---------------------------------------------------------------------------


class Lines:
    """What one stream printed, cut into the side file's lines; a `\\r` redraw keeps its last.

    `feed` takes bytes as they come and returns the finished lines, stamped; a line still
    open waits for its newline (or `end`).
    """

    def __init__(self, tag: str) -> None:
        self._head = f" {tag} ".encode()
        self._open = bytearray()
        self._since = 0.0  # when the open line's last state began

    def feed(self, data: bytes, now: float) -> bytes:
        """Return the side file's bytes for the lines *data* finishes."""
        if not self._open:
            self._since = now
        *done, rest = data.split(b"\n")
        out = bytearray()
        for piece in done:
            self._open += piece
            out += self._finished()
            self._since = now
        self._open += rest
        self._keep_last_state(now)
        if len(self._open) > _MAX_LINE_BYTES:
            out += self._finished()
        return bytes(out)

    def end(self) -> bytes:
        """Return the line still open, when the stream has ended."""
        return self._finished() if self._open else b""

    def _keep_last_state(self, now: float) -> None:
        """Drop the states of the open line that a later `\\r` redrew."""
        line = self._open
        last = line.rfind(b"\r", 0, len(line) - 1)  # a trailing \r may end a state: keep it
        if last > 0:
            del line[:last]
            self._since = now

    def _finished(self) -> bytes:
        line = bytes(self._open).rstrip(b"\r")
        self._open.clear()
        line = line[line.rfind(b"\r") + 1 :]
        return b"%.3f" % self._since + self._head + line + b"\n"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _serve(path: str, ready: int, specs: list[str]) -> None:
    """Copy each `tag:read_fd:out_fd` of *specs* to out_fd and, as lines, to *path*, till EOF.

    One thread reads every stream and writes the side file, in the order it reads; each
    terminal is written by a thread of its own (`Shown`). A terminal that blocks (a full
    stdout pipe nobody reads) holds its own stream only: once `_HELD_BYTES` wait for it, that
    stream is read no more until it drains, and the job blocks on it as it would without
    capture. The other stream goes on. Writes "1" to descriptor *ready* once it reads them.
    """
    for name in _IGNORED_SIGNALS:  # the job's Ctrl-C or SIGTERM ends the job; its EOF ends us
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    side = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    drained, woken = os.pipe()  # a terminal's thread says it took what was held
    streams: dict[int, tuple[Lines, Shown]] = {}
    for spec in specs:
        tag, read, terminal = spec.split(":")
        streams[int(read)] = (Lines(tag), Shown(int(terminal), woken))
    os.write(ready, b"1")
    os.close(ready)
    every = [shown for _lines, shown in streams.values()]
    while streams:
        readable = [fd for fd, (_lines, shown) in streams.items() if not shown.full()]
        for fd in select.select([*readable, drained], [], [])[0]:
            if fd == drained:
                os.read(drained, _READ_BYTES)
                continue
            lines, shown = streams[fd]
            try:
                data = os.read(fd, _READ_BYTES)
            except OSError as err:  # EIO: a pseudo-terminal whose last writer closed it
                if err.errno not in (errno.EIO, errno.EBADF):
                    raise
                data = b""
            text = lines.feed(data, time.time()) if data else lines.end()
            if text:
                _write_all(side, text)  # first: the file is whole even if the terminal blocks
            if data:
                shown.put(data)
            else:
                del streams[fd]
                os.close(fd)
    for shown in every:
        shown.close()  # once it wrote what it holds: a blocked terminal keeps us till it ends


class Shown:
    """One stream's terminal (the original descriptor), written by a thread of its own."""

    def __init__(self, fd: int, woken: int) -> None:
        self._fd = fd
        self._woken = woken  # a byte here wakes the reader, once this held too much
        self._held = bytearray()
        self._guard = _thread.allocate_lock()
        self._wake = _thread.allocate_lock()  # released: there is something to write
        self._wake.acquire()
        self._ending = False
        self._ended = _thread.allocate_lock()  # released when the thread is done
        self._ended.acquire()
        _thread.start_new_thread(self._write, ())

    def full(self) -> bool:
        """Return whether the stream is to be read no more until the terminal takes some."""
        return len(self._held) >= _HELD_BYTES

    def put(self, data: bytes) -> None:
        """Hand *data* to the thread; it writes it to the terminal as the terminal takes it."""
        with self._guard:
            self._held += data
            if self._wake.locked():
                self._wake.release()

    def close(self) -> None:
        """Wait until everything put is written (or the terminal went away)."""
        with self._guard:
            self._ending = True
            if self._wake.locked():
                self._wake.release()
        self._ended.acquire()

    def _write(self) -> None:
        try:
            while True:
                self._wake.acquire()
                with self._guard:
                    data, full = bytes(self._held), self.full()
                    self._held.clear()
                    ending = self._ending
                if full:
                    os.write(self._woken, b"1")  # the reader may read this stream again
                if data and self._fd >= 0:
                    try:
                        _write_all(self._fd, data)
                    except OSError:
                        self._fd = -1  # the terminal went away (EPIPE, EIO): the file goes on
                if ending:
                    return  # close() comes after the last put(): this was everything
        finally:
            self._ended.release()


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]), sys.argv[3:])
