"""Follow one log file by byte offset: each poll reads only the bytes appended since the last."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, Final

from runlines.reading import decode_line

_CHUNK_BYTES: Final = 1 << 20
_MARK_BYTES: Final = 64  # the first and the last bytes read: a file rewritten in place differs


class LogTail:
    """The read position in one log file, and what was skipped on the way.

    A last line without its newline is held back as not yet written: a live writer is in the
    middle of it. A complete line that is not a JSON object (torn by a kill) is skipped and
    counted. A file replaced, truncated or rewritten in place is read again from its start,
    after *on_restart* is called: what was taken from the old file is the caller's to drop.
    """

    def __init__(self, path: Path, *, on_restart: Callable[[], None] | None = None) -> None:
        self.path = path
        self.offset = 0  # bytes consumed: the start of the held-back fragment
        self.bytes_read = 0  # all bytes read from the file, over every poll
        self.torn_lines = 0
        self.records = 0
        self.size = 0  # the file's size at the last look
        self.gone = False  # whether the file was missing at the last look
        self._on_restart = on_restart
        self._fragment = b""
        self._identity: tuple[int, int] | None = None
        # The first and the last bytes read: still there while the file only grows
        self._head = b""
        self._last = b""

    def start_at(self, offset: int, identity: tuple[int, int]) -> None:
        """Go on from *offset* of the file *identity* names: what is before it was read.

        For a history taken from the log's copy; its bytes count as read.
        """
        self.offset = self.bytes_read = self.size = offset
        self._identity = identity
        try:
            with open(self.path, "rb") as stream:
                self._head = stream.read(min(offset, _MARK_BYTES))
                stream.seek(max(0, offset - _MARK_BYTES))
                self._last = stream.read(min(offset, _MARK_BYTES))
        except OSError:  # gone: the next look says so
            self._head = self._last = b""

    @property
    def pending_bytes(self) -> int:
        """Bytes of a last line that has no newline yet."""
        return len(self._fragment)

    def behind(self) -> int:
        """Return the bytes not read yet, by a fresh stat; a replaced file starts over.

        A missing file (deleted, or rotated away) is `gone`: nothing is behind.
        """
        try:
            stat = os.stat(self.path)
        except OSError:
            self.gone = True
            self.size = self._end
            return 0
        self.gone = False
        identity = (stat.st_dev, stat.st_ino)
        if identity != self._identity or stat.st_size < self._end:  # replaced or truncated
            self._restart(identity)
        self.size = stat.st_size
        return self.size - self._end

    @property
    def _end(self) -> int:
        return self.offset + len(self._fragment)

    def poll(self, max_bytes: int | None = None) -> Iterator[dict[str, Any]]:
        """Yield the records completed since the last poll, in file order.

        Reads at most *max_bytes* (all that was appended when None), in blocks.
        """
        left = self.behind()
        if left <= 0:
            return
        stream = self._open()
        if stream is None:
            return
        with stream:
            if not self._still_read(stream):  # rewritten in place, with more bytes than read
                self._restart(self._identity)
                left = self.size
            left = left if max_bytes is None else min(left, max_bytes)
            stream.seek(self._end)
            while left > 0 and (block := stream.read(min(left, _CHUNK_BYTES))):
                left -= len(block)
                self.bytes_read += len(block)
                self._mark(block)
                yield from self._lines(block)

    def _open(self) -> IO[bytes] | None:
        try:
            return open(self.path, "rb")
        except OSError:  # deleted since the stat
            self.gone = True
            self.size = self._end
            return None

    def _still_read(self, stream: IO[bytes]) -> bool:
        """Return whether the file still holds the first and last bytes read of it."""
        if not self._last:
            return True
        head = stream.read(len(self._head))
        stream.seek(self._end - len(self._last))
        return head == self._head and stream.read(len(self._last)) == self._last

    def _mark(self, block: bytes) -> None:
        if len(self._head) < _MARK_BYTES:
            self._head += block[: _MARK_BYTES - len(self._head)]
        self._last = (self._last + block[-_MARK_BYTES:])[-_MARK_BYTES:]

    def finished_fragment(self) -> dict[str, Any] | None:
        """Take the held-back last line as a record when it is one complete JSON object.

        For a log no live writer holds: its last line will get no newline (a foreign
        writer's file may end without one), as `iter_events` reads it.
        """
        if not self._fragment.strip():
            return None
        try:
            record = decode_line(self._fragment)
        except ValueError:
            return None
        self.offset += len(self._fragment)
        self._fragment = b""
        self.records += 1
        return record

    def _restart(self, identity: tuple[int, int] | None) -> None:
        """Read the file from its start; a file read before has its records forgotten."""
        read_before = self._identity is not None
        self._identity = identity
        self.offset = self.records = self.torn_lines = 0
        self._fragment = self._head = self._last = b""
        if read_before and self._on_restart is not None:
            self._on_restart()

    def _lines(self, block: bytes) -> Iterator[dict[str, Any]]:
        data = self._fragment + block if self._fragment else block
        cut = data.rfind(b"\n") + 1
        self._fragment = data[cut:]
        self.offset += cut
        for raw in data[:cut].split(b"\n")[:-1]:
            if not raw.strip():
                continue
            try:
                record = decode_line(raw)
            except ValueError:
                self.torn_lines += 1
                continue
            self.records += 1
            yield record
