"""Lines of a log: decoding one, iter_events and quick scans (`_follow` follows a growing file)."""

from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import Any, Final

import orjson

from runlines._encoding import restore_nonfinite
from runlines._layout import open_regular
from runlines.errors import ReadError, RunlinesWarning
from runlines.reading._files import is_locked
from runlines.reading._rules import HINT, Errors, check_errors

__all__ = [
    "LONG_INT",
    "decode_line",
    "head_record",
    "iter_events",
    "last_records",
    "lines_containing",
    "skipped_lines_message",
]

RAISE_HINT: Final = ". Pass errors='raise' to stop at the first"
_SCAN_CHUNK: Final = 16 << 20


def decode_line(raw: bytes) -> dict[str, Any]:
    """Return the record on one line, non-finite floats restored.

    Integers stay exact at any size. A line that orjson refuses but Python's json module reads
    (the NaN and Infinity that `json.dumps` writes, a number beyond a double, which reads as
    an infinity) is read that way.

    Raises:
        ValueError: the line is not one complete JSON object.
    """
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as err:
        # only where orjson's refusal is about numbers: json would also take lone surrogates
        if "infinity" not in str(err) and b"NaN" not in raw and b"Infinity" not in raw:
            raise
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError):
            raise err from None
    else:
        if LONG_INT.search(raw) is not None:  # orjson reads an int beyond 64 bits as a float
            try:
                value = json.loads(raw)
            except (ValueError, RecursionError):  # nested deeper than json's recursion limit
                pass
    if not isinstance(value, dict):
        kind = "array" if isinstance(value, list) else type(value).__name__
        msg = f"a JSON {kind}, not an object"
        raise ValueError(msg)
    return restore_nonfinite(value)


# A JSON number that may not fit 64 bits: a minus sign and 19 digits, or 20 digits
LONG_INT: Final = re.compile(rb"[:\[,]\s*(?:-\d{19}|\d{20})")
# A JSON number that may not fit int64, which pyarrow reads as a float: 19 digits (2**63 has 19)
INT64_PAST: Final = re.compile(rb"[:\[,]\s*-?\d{19}")


def skipped_lines_message(path: str | os.PathLike[str], lines: Sequence[int]) -> str:
    """Return the warning text for *lines* (1-based) of *path* that were skipped."""
    shown = ", ".join(str(n) for n in lines[:5]) + (", ..." if len(lines) > 5 else "")
    noun = "line" if len(lines) == 1 else "lines"
    return (
        f"{path}: skipped {len(lines)} {noun} that {'is' if len(lines) == 1 else 'are'} not a "
        f"complete JSON object ({noun} {shown}); {HINT}{RAISE_HINT}"
    )


def bad_line_error(path: str | os.PathLike[str], line: int, reason: str) -> ReadError:
    msg = f"{path} line {line} is not a complete JSON object ({reason}); {HINT}"
    return ReadError(msg, str(path), line)


def iter_events(
    path: str | os.PathLike[str], *, errors: Errors = "warn"
) -> Iterator[dict[str, Any]]:
    """Yield the records of one log file in order, with NaN and infinities restored.

    Lines that are not complete JSON objects are skipped with one `RunlinesWarning` once the
    file is exhausted; blank lines are skipped silently. Needs no pandas.

    Raises:
        ReadError: the file cannot be opened, or ``errors="raise"`` and a line is bad.
    """
    check_errors(errors)
    skipped: list[int] = []
    with open_log(path) as lines:
        for number, raw in enumerate(lines, start=1):
            ends = raw.endswith(b"\n")
            record = None
            try:
                record = decode_line(raw) if raw.strip() else None
            except ValueError as err:
                if not ends and is_locked(path):
                    break  # the live writer's record still being written, not a torn line
                if errors == "raise":
                    raise bad_line_error(path, number, str(err)) from err
                skipped.append(number)
            if record is not None:
                yield record
            if not ends:
                # the end of what can be read now: the rest of a record still being written
                # may have arrived since, and would read as one more broken line
                break
    if skipped:
        warnings.warn(skipped_lines_message(path, skipped), RunlinesWarning, stacklevel=2)


def open_log(path: str | os.PathLike[str]) -> Any:
    """Open log *path* for reading bytes; raise ReadError that says what is wrong."""
    try:
        return open_regular(path)
    except IsADirectoryError as err:
        msg = f"{path} is a folder; pass one .jsonl log file"
        raise ReadError(msg, str(path)) from err
    except OSError as err:
        msg = f"cannot read log {path}: {err.strerror or err}; check the path"
        raise ReadError(msg, str(path)) from err


def lines_containing(
    path: str | os.PathLike[str], needles: Sequence[bytes]
) -> Iterator[tuple[int, bytes]]:
    """Yield ``(offset, line)`` for each line of *path* that contains one of *needles*, in order.

    Reads in blocks and parses nothing, so it is fast on large logs.
    """
    with open_log(path) as stream:
        base, carry = 0, b""
        while block := stream.read(_SCAN_CHUNK):
            data = carry + block
            cut = data.rfind(b"\n") + 1
            yield from _found_lines(data[:cut], base, needles)
            base, carry = base + cut, data[cut:]
        yield from _found_lines(carry, base, needles)


def _found_lines(data: bytes, base: int, needles: Sequence[bytes]) -> list[tuple[int, bytes]]:
    found: dict[int, bytes] = {}
    for needle in needles:
        at = data.find(needle)
        while at >= 0:
            start = data.rfind(b"\n", 0, at) + 1
            end = data.find(b"\n", at)
            end = len(data) if end < 0 else end
            found.setdefault(base + start, data[start:end])
            at = data.find(needle, end)
    return sorted(found.items())


def records_of(lines: Iterable[tuple[int, bytes]]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(offset, record)`` for each line of *lines* that decodes; skip the others."""
    for offset, raw in lines:
        try:
            yield offset, decode_line(raw)
        except ValueError:
            continue  # a torn line: the full readers warn about it


def head_record(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """Return the first record of *path*, or None when its first 64 KiB hold none."""
    with open_log(path) as stream:
        for raw in stream.read(1 << 16).splitlines():
            try:
                return decode_line(raw)
            except ValueError:
                continue
    return None


def last_records(
    path: str | os.PathLike[str],
    count: int | None = None,
    *,
    events: Collection[str] | None = None,
    max_bytes: int | None = None,
) -> list[dict[str, Any]]:
    """Return up to *count* last records of *path* (all when None), oldest first.

    Reads backwards from the end, at most *max_bytes* when given; keeps only *events* when
    given; skips bad lines silently.
    """
    found: list[dict[str, Any]] = []
    for raw in _lines_backwards(path, max_bytes):
        try:
            record = decode_line(raw)
        except ValueError:
            continue
        if events is None or event_of(record) in events:
            found.append(record)
        if count is not None and len(found) >= count:
            break
    return found[::-1]


def event_of(record: Any) -> str | None:
    """Return the record's event name, or None when it has none or it is not a string."""
    event = record.get("event")
    return event if isinstance(event, str) else None


def _lines_backwards(path: str | os.PathLike[str], max_bytes: int | None) -> Iterator[bytes]:
    with open_log(path) as stream:
        end = stream.seek(0, 2)
        limit = 0 if max_bytes is None else max(0, end - max_bytes)
        # Pieces of the line that goes on past the block being read, nearest first: joined once
        # its start is found, so that a line of many blocks costs linear time, not quadratic.
        pending: list[bytes] = []
        while end > limit:
            start = max(limit, end - (1 << 16))
            stream.seek(start)
            block = stream.read(end - start)
            end = start
            if start > 0 and b"\n" not in block:
                pending.append(block)
                continue
            lines = (block + b"".join(reversed(pending))).split(b"\n")
            pending = [lines[0]] if start > 0 else []
            complete = lines[1:] if start > 0 else lines
            yield from (line for line in reversed(complete) if line.strip())
