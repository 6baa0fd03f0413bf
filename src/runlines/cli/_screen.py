"""A full-screen terminal for `runlines top`: the alternate screen, keys, resizes, restored after.

Plain ANSI (no curses): each frame is one write that homes the cursor, rewrites every line
and clears what is left, so nothing flickers; a resize wakes the wait at once.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import termios
import tty
from collections.abc import Sequence
from types import FrameType, TracebackType
from typing import Any, Final, TextIO

__all__ = ["Screen"]

_ENTER: Final = "\x1b[?1049h\x1b[?25l\x1b[2J"  # alternate screen, cursor hidden, cleared
_LEAVE: Final = "\x1b[?25h\x1b[?1049l"
_HOME: Final = "\x1b[H"
_CLEAR_LINE: Final = "\x1b[K"
_CLEAR_BELOW: Final = "\x1b[J"
_CLEAR: Final = "\x1b[2J"


class Screen:
    """The terminal of *out* taken over while in a ``with`` block; keys read from *keys*.

    *keys* (default: stdin) is put in cbreak mode where it is a terminal, so a key arrives
    without Enter and Ctrl-C still raises KeyboardInterrupt; SIGTERM does too, so that the
    terminal is restored however the view ends.
    """

    def __init__(self, out: TextIO, keys: TextIO | None = None) -> None:
        self.out = out
        self._keys_fd: int | None = _fileno(sys.stdin if keys is None else keys)
        self._saved: list[Any] | None = None
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        self._handlers: dict[int, Any] = {}
        self._resized = False

    def __enter__(self) -> Screen:
        fd = self._keys_fd
        if fd is not None and os.isatty(fd):
            self._saved = termios.tcgetattr(fd)
            tty.setcbreak(fd)
        self._handlers[signal.SIGWINCH] = signal.signal(signal.SIGWINCH, self._on_resize)
        self._handlers[signal.SIGTERM] = signal.signal(signal.SIGTERM, _interrupt)
        self.out.write(_ENTER)
        self.out.flush()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        for number, handler in self._handlers.items():
            signal.signal(number, handler)
        with contextlib.suppress(OSError, ValueError):  # a terminal that went away
            self.out.write(_LEAVE)
            self.out.flush()
        if self._saved is not None and self._keys_fd is not None:
            with contextlib.suppress(termios.error):
                termios.tcsetattr(self._keys_fd, termios.TCSADRAIN, self._saved)
        os.close(self._wake_r)
        os.close(self._wake_w)

    def size(self) -> tuple[int, int]:
        """Return the terminal's (columns, lines); (80, 24) when it cannot say."""
        try:
            found = os.get_terminal_size(self.out.fileno())
        except (OSError, ValueError):
            return 80, 24
        return max(1, found.columns), max(1, found.lines)

    def draw(self, lines: Sequence[str]) -> None:
        """Show *lines* from the top left, each cut to the width by the caller, in one write."""
        start = _CLEAR if self._resized else ""
        self._resized = False
        body = "\r\n".join(line + _CLEAR_LINE for line in lines)
        self.out.write(f"{start}{_HOME}{body}{_CLEAR_BELOW}")
        self.out.flush()

    def wait_key(self, timeout_s: float) -> str:
        """Return the keys pressed within *timeout_s* seconds; '' on a timeout or a resize."""
        watched = [self._wake_r]
        if self._keys_fd is not None:
            watched.append(self._keys_fd)
        ready, _, _ = select.select(watched, [], [], timeout_s)
        if self._wake_r in ready:
            with contextlib.suppress(BlockingIOError):
                os.read(self._wake_r, 64)
        if self._keys_fd is not None and self._keys_fd in ready:
            data = os.read(self._keys_fd, 64)
            if not data:  # the keys' end closed: nothing more to read from it
                self._keys_fd = None
            return data.decode(errors="replace")
        return ""

    def _on_resize(self, number: int, frame: FrameType | None) -> None:
        self._resized = True
        with contextlib.suppress(BlockingIOError):
            os.write(self._wake_w, b"w")


def _interrupt(number: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _fileno(stream: TextIO) -> int | None:
    try:
        return stream.fileno()
    except (OSError, ValueError, AttributeError):  # a test's capture, a closed stdin
        return None
