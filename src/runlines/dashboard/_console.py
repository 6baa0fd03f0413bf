"""A run's captured console for the run page, `/api/console` (docs/console.md, docs/dashboard.md).

Reads only `<name>.console.log` next to a run's own log (never a path the request names): the
last lines before a byte offset (the page asks for earlier ones with the first line's offset),
or the lines whose text holds a search, case-insensitive, as plain text or a regular
expression. A line still being written (no newline yet) is left for the next request.
"""

from __future__ import annotations

import math
import os
import re
import stat
from collections import deque
from collections.abc import Iterator, Mapping
from http import HTTPStatus
from pathlib import Path
from typing import Any, BinaryIO, Final

from runlines import _layout
from runlines.reading._console import parse_line

__all__ = ["ConsoleRequestError", "console_answer"]

PAGE_LINES: Final = 200  # lines in one answer unless ?limit=
MAX_PAGE_LINES: Final = 2000
MAX_QUERY_CHARS: Final = 1000
_BLOCK: Final = 64 << 10  # the tail is read backwards in blocks of this
# escape sequences: CSI (colours, cursor moves), OSC (titles, links), and the two-byte ones
ESCAPES: Final = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b.?")


class ConsoleRequestError(Exception):
    """A console request the API refuses: its HTTP status and what to fix."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


def console_answer(label: str, rank: int, log: Path, query: Mapping[str, str]) -> dict[str, Any]:
    """Answer `/api/console` for run *label*'s rank *rank*, whose log is *log*.

    ?limit= lines (default 200) before byte ?before= (default: the end); with ?q=, the last
    matches before it (?regex=1: q is a regular expression; ?stream=out|err: one stream only).
    """
    limit = _whole(query, "limit", PAGE_LINES, 1, MAX_PAGE_LINES)
    side = _layout.console_path(log)
    answer: dict[str, Any] = {"run": label, "rank": rank, "path": str(side)}
    match = _matcher(query)
    stream = query.get("stream")
    if stream not in (None, "out", "err"):
        msg = f"?stream= must be out or err, got {stream!r}"
        raise ConsoleRequestError(HTTPStatus.BAD_REQUEST, msg)
    try:
        fd = os.open(side, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return {**answer, "captured": False, "size": 0, "start": 0, "more": False, "lines": []}
    except OSError as err:  # a link (not followed), no access
        msg = f"the console {side.name} cannot be read ({err.strerror}); it must be a plain file"
        raise ConsoleRequestError(HTTPStatus.FORBIDDEN, msg) from None
    with open(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            msg = f"the console {side.name} is not a plain file; nothing is read from it"
            raise ConsoleRequestError(HTTPStatus.FORBIDDEN, msg)
        size = os.fstat(fd).st_size
        end = _whole(query, "before", size, 0, None)
        end = _line_end(file, min(end, size))
        if match is None and stream is None:
            found, more = _tail(file, end, limit)
            total = None
        else:
            found, total = _search(file, end, limit, match, stream)
            more = total > len(found)
    lines = [_entry(offset, raw) for offset, raw in found]
    start = found[0][0] if found else end
    answer.update(captured=True, size=size, start=start, more=more, lines=lines)
    if total is not None:
        answer["matches"] = total
    return answer


def _whole(query: Mapping[str, str], name: str, default: int, low: int, high: int | None) -> int:
    text = query.get(name)
    if text is None:
        return default
    if not text.isdigit() or int(text) < low or (high is not None and int(text) > high):
        most = f" and at most {high}" if high is not None else ""
        msg = f"?{name}= must be a whole number, {low} or more{most}; got {text!r}"
        raise ConsoleRequestError(HTTPStatus.BAD_REQUEST, msg)
    return int(text)


def _matcher(query: Mapping[str, str]) -> re.Pattern[str] | str | None:
    """Return the search: a compiled pattern (?regex=1), lowered text, or None for the tail."""
    if query.get("regex") not in (None, "", "0", "1"):
        msg = f"?regex= must be 1 or 0, got {query['regex']!r}"
        raise ConsoleRequestError(HTTPStatus.BAD_REQUEST, msg)
    text = query.get("q")
    if not text:
        return None
    if len(text) > MAX_QUERY_CHARS:
        msg = f"?q= is {len(text)} characters; search with at most {MAX_QUERY_CHARS}"
        raise ConsoleRequestError(HTTPStatus.BAD_REQUEST, msg)
    if query.get("regex") != "1":
        return text.lower()
    try:
        return re.compile(text, re.IGNORECASE)
    except re.error as err:
        msg = (
            f"?q= is not a valid regular expression ({err}): fix it, or leave out ?regex=1 "
            "to search for the text as it is"
        )
        raise ConsoleRequestError(HTTPStatus.BAD_REQUEST, msg) from None


def _line_end(file: BinaryIO, end: int) -> int:
    """Return *end* moved back to just after the last newline before it (0 without one)."""
    position = end
    while position > 0:
        step = min(_BLOCK, position)
        file.seek(position - step)
        block = file.read(step)
        cut = block.rfind(b"\n")
        if cut >= 0:
            return position - step + cut + 1
        position -= step
    return 0


def _tail(file: BinaryIO, end: int, limit: int) -> tuple[list[tuple[int, bytes]], bool]:
    """Return the last *limit* lines before *end* (each with its offset), and whether more are."""
    data, position = b"", end
    while position > 0 and data.count(b"\n") <= limit:
        step = min(_BLOCK, position)
        position -= step
        file.seek(position)
        data = file.read(step) + data
    lines = [part + b"\n" for part in data.split(b"\n")[:-1]]  # data ends with a newline
    more = position > 0 or len(lines) > limit
    kept = lines[-limit:]
    offset = end - sum(len(line) for line in kept)
    found = []
    for line in kept:
        found.append((offset, line))
        offset += len(line)
    return found, more


def _search(
    file: BinaryIO, end: int, limit: int, match: re.Pattern[str] | str | None, stream: str | None
) -> tuple[list[tuple[int, bytes]], int]:
    """Return the last *limit* matching lines before *end*, and how many match in all."""
    found: deque[tuple[int, bytes]] = deque(maxlen=limit)
    total = 0
    for offset, raw in _lines_before(file, end):
        line = parse_line(raw)
        if stream is not None and line.stream != stream:
            continue
        if match is not None:
            text = ESCAPES.sub("", line.text) if "\x1b" in line.text else line.text
            if isinstance(match, str):
                if match not in text.lower():
                    continue
            elif match.search(text) is None:
                continue
        found.append((offset, raw))
        total += 1
    return list(found), total


def _lines_before(file: BinaryIO, end: int) -> Iterator[tuple[int, bytes]]:
    file.seek(0)
    offset = 0
    for raw in file:
        if offset + len(raw) > end:
            return
        yield offset, raw
        offset += len(raw)


def _entry(offset: int, raw: bytes) -> dict[str, Any]:
    line = parse_line(raw)
    ts = None if math.isnan(line.ts) else line.ts
    return {"offset": offset, "ts": ts, "stream": line.stream, "text": line.text}
