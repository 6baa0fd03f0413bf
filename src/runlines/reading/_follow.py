"""The one follower of a growing log: `runlines tail -f`, `top` and the dashboard read with it.

Each poll reads only the bytes appended since the last, like ``tail -F``. A last line without
its newline is held back: a live writer is in the middle of it. A complete line that is not
a JSON object (torn by a kill) is skipped and counted. A file replaced (rotation, a copy back
from backup), truncated or rewritten in place (its first bytes, or the bytes just before the
read position, changed) is read again from its start; a file that does not exist yet is
waited for.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, Final

from runlines.errors import ReadError
from runlines.reading._lines import decode_line, open_log

__all__ = ["LogFollower"]

_CHUNK_BYTES: Final = 1 << 20
# The first bytes and those just before the read position: a line or so, whose ts differs in
# any other run, so a file rewritten in place differs there
_MARK_BYTES: Final = 128


class LogFollower:
    """The read position in one log file, and what was skipped on the way.

    `poll()` returns the records completed since the last poll; `stream(max_bytes)` yields
    them, reading at most *max_bytes*. After a start over, `restarts` counts one more and
    *on_restart* is called: what a consumer took from the old file is its to drop.
    *offset* starts after the bytes before it (`tail -f` starts at the end).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        offset: int = 0,
        *,
        on_restart: Callable[[], None] | None = None,
    ) -> None:
        self.path = Path(path)
        self.offset = 0  # bytes consumed: the start of the held-back fragment
        self.bytes_read = 0  # all bytes read from the file, over every poll and start over
        self.torn_lines = 0  # lines skipped since the file was last read from its start
        self.skipped = 0  # lines skipped over every start over
        self.records = 0  # records read since the file was last read from its start
        self.restarts = 0  # times the file was replaced, truncated or rewritten and read again
        self.size = 0  # the file's size at the last look
        self.gone = False  # whether the file was missing at the last look
        self._on_restart = on_restart
        self._fragment = b""
        self._identity: tuple[int, int] | None = None
        self._head = b""  # the first bytes read, and the last: still there while it only grows
        self._last = b""
        if offset:
            try:
                info = self.path.stat()
            except OSError:  # not there yet: read from its start when it comes
                return
            self.start_at(offset, (info.st_dev, info.st_ino))

    def start_at(self, offset: int, identity: tuple[int, int]) -> None:
        """Go on from *offset* of the file *identity* names: what is before it was read.

        For a history taken from the log's copy, or `tail -f` from the end; its bytes count
        as read.
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

        A missing file (deleted, or rotated away, or not written yet) is `gone`: nothing is
        behind.
        """
        info = self._stat()
        if info is None or not stat.S_ISREG(info.st_mode):
            return 0
        return self.size - self._end

    def _stat(self) -> os.stat_result | None:
        try:
            info = os.stat(self.path)
        except OSError:
            self.gone = True
            self.size = self._end
            return None
        self.gone = False
        identity = (info.st_dev, info.st_ino)
        if identity != self._identity or info.st_size < self._end:  # replaced or truncated
            self._restart(identity)
        self.size = info.st_size
        return info

    @property
    def _end(self) -> int:
        return self.offset + len(self._fragment)

    def poll(self) -> list[dict[str, Any]]:
        """Return the complete records written since the last poll, oldest first.

        Raises:
            ReadError: the log cannot be opened, or is no regular file (a FIFO named like
                a log).
        """
        info = self._stat()
        if info is not None and not stat.S_ISREG(info.st_mode):
            open_log(self.path).close()  # raises, saying what the file is
        return list(self._read(None, strict=True))

    def stream(self, max_bytes: int | None = None) -> Iterator[dict[str, Any]]:
        """Yield the records completed since the last poll, in file order.

        Reads at most *max_bytes* (all that was appended when None), in blocks.
        """
        if self.behind() > 0:
            yield from self._read(max_bytes, strict=False)

    def _read(self, max_bytes: int | None, *, strict: bool) -> Iterator[dict[str, Any]]:
        left = self.size - self._end
        if left <= 0:
            return
        stream = self._open(strict=strict)
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

    def _open(self, *, strict: bool) -> IO[bytes] | None:
        """Open the file; one that cannot be opened raises (*strict*: `poll`) or is gone."""
        try:
            stream: IO[bytes] = open_log(self.path)
        except ReadError:  # deleted since the stat, or another user's
            if strict:
                raise
            self.gone = True
            self.size = self._end
            return None
        return stream

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
        if read_before:
            self.restarts += 1
            if self._on_restart is not None:
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
                self.skipped += 1
                continue
            self.records += 1
            yield record
