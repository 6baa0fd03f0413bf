"""NaN alarms: the first NaN or infinity of each (event, field) writes a `nonfinite` record.

`Run(..., on_nonfinite="warn")` (the default) also warns once per (event, field); "raise"
raises `FloatingPointError` from the log call after the records are written; "ignore" does
neither. The check runs only on lines that already hold a non-finite float (the fast path
declines those), and the last finite value is read back from the log, so that no log call
keeps a value per field. See docs/watching.md.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final, Literal

import orjson

from runlines import _layout
from runlines import fields as _f
from runlines._encoding import NONFINITE_KEY
from runlines.errors import NonfiniteWarning
from runlines.sinks import warn_stderr

__all__ = [
    "ON_NONFINITE_CHOICES",
    "NonfiniteAlarm",
    "OnNonfinite",
    "check_on_nonfinite",
    "last_finite",
]

OnNonfinite = Literal["warn", "raise", "ignore"]
"""What `Run(on_nonfinite=...)` takes."""
ON_NONFINITE_CHOICES: Final = ("warn", "raise", "ignore")
_TAIL_BYTES: Final = 1 << 20  # how far back the last finite value is looked for
_MAX_SEEN: Final = 10_000  # distinct `_nonfinite` maps remembered: memory stays bounded
_MARK: Final = b',"_nonfinite":'  # encoding writes the map as the line's last key


def check_on_nonfinite(value: object) -> OnNonfinite | None:
    """Return *value* if it is a valid choice (None for "ignore"), else raise with the choices."""
    if value == "ignore":
        return None
    if value == "warn":
        return "warn"
    if value == "raise":
        return "raise"
    msg = f"on_nonfinite must be 'warn', 'raise' or 'ignore', got {value!r}"
    raise ValueError(msg)


class NonfiniteAlarm:
    """Decide which non-finite values of a line are new, and raise the alarm for them.

    *log_path* is the run's log, where the last finite values are read back from.
    """

    def __init__(self, mode: OnNonfinite, log_path: Path) -> None:
        self.mode = mode
        self._path = log_path
        self._alarmed: set[tuple[str, str]] = set()  # (event, JSON pointer)
        self._seen: set[tuple[str, bytes]] = set()  # (event, the line's `_nonfinite` map)

    def is_new(self, event: str, line: bytes) -> bool:
        """Return True when *line* needs `fire()`: a new non-finite field, or mode "raise"."""
        at = line.rfind(_MARK)
        if at < 0:
            return False  # a None: null without a non-finite float
        if self.mode == "raise":
            return True
        key = (event, line[at:])
        if key in self._seen:
            return False  # the same fields were non-finite before: one set lookup
        if len(self._seen) < _MAX_SEEN:
            self._seen.add(key)
        return any((event, pointer) not in self._alarmed for pointer in _pointers(line, at))

    def fire(
        self,
        event: str,
        line: bytes,
        record: Mapping[str, Any],
        write: Callable[[str, dict[str, Any]], None],
        tail: bytes | None = None,
        *,
        in_log_call: bool = True,
    ) -> None:
        """Write a `nonfinite` record per new field of *line*, then warn or raise.

        *line* is already written; *tail* is the log before it (read from the file when None).
        Outside a log call (*in_log_call* False: a sampler's owed record, at close or when
        sample() replaces the sampler) it warns even under "raise", and never raises.
        """
        kinds = _nonfinite_map(line, line.rfind(_MARK))
        said = self._write_alarms(event, kinds, record.get("step"), write, tail, len(line))
        self._complain(event, kinds, said, record, 5, in_log_call=in_log_call)

    def hear(
        self,
        event: str,
        values: list[tuple[str, float]],
        fields: Mapping[str, Any],
        write: Callable[[str, dict[str, Any]], None],
    ) -> None:
        """Alarm for the non-finite *values* of one aggregated call, from its log() call.

        The aggregator saw them in *fields* (the call's own fields); the window's record has
        only their count. `last_finite` is then the last finite `<field>_last` of the event.
        """
        kinds = {"/" + _escape(name): _kind(value) for name, value in values}
        if self.mode != "raise" and all((event, p) in self._alarmed for p in kinds):
            return  # said before: a set lookup per value
        looked_up = {p: f"{p}_last" for p in kinds}
        said = self._write_alarms(event, kinds, fields.get("step"), write, None, 0, looked_up)
        self._complain(event, kinds, said, fields, 6, in_log_call=True)

    def _write_alarms(
        self,
        event: str,
        kinds: dict[str, str],
        step: object,
        write: Callable[[str, dict[str, Any]], None],
        tail: bytes | None,
        written: int,
        looked_up: dict[str, str] | None = None,
    ) -> list[str]:
        """Write a `nonfinite` record per new pointer of *kinds*; return what to say of them."""
        new = [pointer for pointer in kinds if (event, pointer) not in self._alarmed]
        if new and tail is None:
            tail = _read_tail(self._path, written)
        said = []
        for pointer in new:
            self._alarmed.add((event, pointer))
            fields: dict[str, Any] = {_f.OF_EVENT: event, _f.FIELD: _field_name(pointer)}
            if step is not None:
                fields["step"] = step
            fields[_f.VALUE] = kinds[pointer]
            where = pointer if looked_up is None else looked_up[pointer]
            fields[_f.LAST_FINITE] = last_finite(tail or b"", event, where)
            write(_layout.NONFINITE, fields)
            said.append(f"{_field_name(pointer)}={kinds[pointer]}")
        return said

    def _complain(
        self,
        event: str,
        kinds: dict[str, str],
        said: list[str],
        record: Mapping[str, Any],
        stacklevel: int,
        *,
        in_log_call: bool,
    ) -> None:
        step = f" at step {record['step']!r}" if "step" in record else ""
        if self.mode == "raise" and in_log_call:
            shown = ", ".join(f"{_field_name(p)}={v}" for p, v in kinds.items())
            msg = (
                f"{event!r} logged a non-finite value{step}: {shown}; "
                "pass on_nonfinite='warn' to keep training"
            )
            raise FloatingPointError(msg)
        if self.mode == "raise":
            said = [f"{_field_name(p)}={v}" for p, v in kinds.items()]
        if not said:
            return
        msg = (
            f"{event!r} logged a non-finite value{step}: {', '.join(said)} (written as "
            "null; a `nonfinite` record holds the last finite value; said once per field)"
        )
        if in_log_call:
            warnings.warn(msg, NonfiniteWarning, stacklevel=stacklevel)
            return
        msg += "; it was written outside a log() call (an owed record), so it is not raised"
        try:  # a close must finish: a filter that turns warnings into errors is no reason
            warnings.warn(msg, NonfiniteWarning, stacklevel=stacklevel)
        except Exception:
            warn_stderr(msg)


def _kind(value: float) -> str:
    """The `_nonfinite` name of a NaN or an infinity."""
    if value != value:
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def _escape(name: str) -> str:
    """A field name as a JSON pointer's part (~ and / escaped)."""
    return name.replace("~", "~0").replace("/", "~1")


def _nonfinite_map(line: bytes, at: int) -> dict[str, str]:
    value = orjson.loads(b"{" + line[at + 1 :])[NONFINITE_KEY]
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _field_name(pointer: str) -> str:
    """A top-level field by its name; a value inside one by its JSON pointer."""
    parts = pointer.split("/")
    if len(parts) == 2:
        return parts[1].replace("~1", "/").replace("~0", "~")
    return pointer


def _pointers(line: bytes, at: int) -> Iterator[str]:
    return iter(_nonfinite_map(line, at))


def _read_tail(path: Path, written: int) -> bytes:
    """The last bytes of the log before its last *written* bytes (the line just written)."""
    try:
        with open(path, "rb") as file:
            end = max(0, os.fstat(file.fileno()).st_size - written)
            start = max(0, end - _TAIL_BYTES)
            file.seek(start)
            data = file.read(end - start)
    except OSError:
        return b""
    if start > 0:
        data = data[data.find(b"\n") + 1 :]  # a line cut by the window is not read
    return data


def last_finite(tail: bytes, event: str, pointer: str) -> float | int | None:
    """Return the last finite number at JSON *pointer* in *event*'s records of *tail*."""
    needle = b'"event":' + orjson.dumps(event) + b","
    for line in reversed(tail.splitlines()):
        if needle not in line:
            continue
        try:
            value: Any = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        for part in pointer.split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(value, dict):
                value = value.get(part)
            elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
                value = value[int(part)]
            else:
                value = None
                break
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
    return None
