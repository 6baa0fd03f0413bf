"""Records to JSON lines and back: strict JSON, safe values, non-finite floats, the console line.

`encode_line` is the fast path: one `orjson.dumps` call, with `encode_default` for the types
orjson does not know (`_writer.Writer.log` makes the same call). Records that need more (non-finite
floats, big ints, lone surrogates, cycles, unknown types) take `encode_line_safe`, which walks
the record once. See docs/format.md.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import date, datetime
from typing import Any, Final

import orjson

from runlines._warnings import warn_user
from runlines.errors import FieldError, RunlinesWarning

__all__ = [
    "ENCODE_ERROR",
    "MAX_INLINE_CHARS",
    "MAX_INLINE_ITEMS",
    "NONFINITE_KEY",
    "ORJSON_OPTIONS",
    "Redact",
    "check_inline",
    "console_line",
    "dumps",
    "encode_default",
    "encode_line",
    "encode_line_safe",
    "format_console",
    "read_config",
    "read_mapping",
    "restore_nonfinite",
]

#: Lists, tuples, sets, arrays and tensors with more items than this are refused in log():
#: they belong in run.artifact().
MAX_INLINE_ITEMS: Final = 1000
#: Strings longer than this are refused in log(), for the same reason.
MAX_INLINE_CHARS: Final = 100_000
#: The key that lists the record's non-finite floats by JSON Pointer.
NONFINITE_KEY: Final = "_nonfinite"
_NONFINITE_NAMES: Final = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
_NONFINITE_VALUES: Final = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_MAX_DEPTH: Final = 120  # well inside orjson's and Python's recursion limits; deeper is repr
# An int beyond the largest double is written as its decimal string: strict parsers that read
# numbers as doubles (orjson, pyarrow, JavaScript) refuse such a number, and the whole line with it.
_MAX_NUMBER: Final = int(sys.float_info.max)
#: orjson options of every line: the newline is appended in the same call.
ORJSON_OPTIONS: Final = orjson.OPT_APPEND_NEWLINE
#: The encoder of every line, and what it raises: the writer binds them at a run's open.
dumps: Final = orjson.dumps
ENCODE_ERROR: Final = orjson.JSONEncodeError
_warned_types: set[type] = set()


def encode_line(record: Mapping[str, Any]) -> bytes:
    """Return *record* as one strict JSON line, ending in a newline.

    Raises:
        FieldError: an array or tensor too large to inline.
    """
    try:
        line = orjson.dumps(record, default=encode_default, option=ORJSON_OPTIONS)
    except orjson.JSONEncodeError as err:
        if isinstance(err.__cause__, FieldError):
            raise err.__cause__ from None
        return encode_line_safe(record)
    # A null is a None or a non-finite float that orjson wrote as null: the values say which,
    # so a name holding "null" (a span "nullify") costs one look at them, not the careful walk.
    if b"null" in line and _may_hold_nonfinite(record.values(), 0):
        return encode_line_safe(record)
    return line


def _may_hold_nonfinite(values: Iterable[Any], depth: int) -> bool:
    """Return True unless *values* are plain JSON data without NaN or infinity, at any depth.

    A value of another type (a numpy array, a dataclass) counts as one: the careful walk of
    `encode_line_safe` decides.
    """
    for value in values:
        kind = type(value)
        if kind is float:
            if value - value != 0.0:
                return True
        elif kind is dict:
            if depth >= _MAX_DEPTH or _may_hold_nonfinite(value.values(), depth + 1):
                return True
        elif kind is list or kind is tuple:
            if depth >= _MAX_DEPTH or _may_hold_nonfinite(value, depth + 1):
                return True
        elif kind is not str and kind is not int and kind is not bool and value is not None:
            return True
    return False


#: A redaction pass over a record of JSON data (runlines.redaction.Redactor.redact_fields).
Redact = Callable[[dict[str, Any]], dict[str, Any]]


def encode_line_safe(record: Mapping[str, Any], redact: Redact | None = None) -> bytes:
    """Return *record* as one strict JSON line, whatever its values (the slow path).

    *redact*, when given, sees the record after every value became JSON data (so the repr of
    an unknown object is redacted too), before it is written.
    """
    nonfinite: dict[str, str] = {}
    clean = _sanitize(record, "", nonfinite, set(), 0)
    if redact is not None:
        clean = redact(clean)
    if nonfinite:
        clean[NONFINITE_KEY] = nonfinite
    try:
        return orjson.dumps(clean, option=ORJSON_OPTIONS)
    except orjson.JSONEncodeError:  # an int beyond 64 bits: the stdlib writes any int
        text = json.dumps(clean, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        return text.encode("utf-8") + b"\n"


def restore_nonfinite(record: dict[str, Any]) -> dict[str, Any]:
    """Put back the NaN and infinities that `_nonfinite` lists, and drop that key."""
    marks = record.pop(NONFINITE_KEY, None)
    if not isinstance(marks, dict):
        return record
    for pointer, name in marks.items():
        value = _NONFINITE_VALUES.get(name) if isinstance(name, str) else None
        if value is not None and isinstance(pointer, str):
            _set_pointer(record, pointer, value)
    return record


def _set_pointer(doc: Any, pointer: str, value: float) -> None:
    parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]
    target = doc
    try:
        for part in parts[:-1]:
            target = target[int(part)] if isinstance(target, list) else target[part]
        last = parts[-1]
        if isinstance(target, list):
            target[int(last)] = value
        elif isinstance(target, dict) and last in target:
            target[last] = value
    except (KeyError, IndexError, ValueError, TypeError):
        return  # a pointer that does not resolve: leave the record as written


def encode_default(obj: Any) -> Any:
    """Convert what orjson cannot encode natively; raise TypeError for the careful path."""
    if isinstance(obj, (set, frozenset)):
        return _sorted_items(obj)
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    module = type(obj).__module__
    if module == "numpy" or module.startswith("torch"):
        return _array_value(obj, module)
    raise TypeError


def check_inline(fields: Mapping[str, Any]) -> None:
    """Refuse a log() field that holds a string or a sequence too large to inline, at any depth.

    Raises:
        FieldError: a str over MAX_INLINE_CHARS characters, or a list, tuple or set over
            MAX_INLINE_ITEMS items; the message names the field and points to run.artifact().
    """
    for name, value in fields.items():
        _check_inline(value, name, set(), 0)


def _check_inline(value: Any, where: str, seen: set[int], depth: int) -> None:
    kind = type(value)
    if kind is int or kind is float or kind is bool or value is None or depth >= _MAX_DEPTH:
        return
    try:
        if isinstance(value, str):
            if len(value) > MAX_INLINE_CHARS:
                _refuse(where, f"a string of {len(value):,} characters", MAX_INLINE_CHARS)
            return
        if isinstance(value, (list, tuple, set, frozenset)):
            if len(value) > MAX_INLINE_ITEMS:
                _refuse(where, f"a {kind.__name__} of {len(value):,} items", MAX_INLINE_ITEMS)
            items: Any = enumerate(value)
        elif isinstance(value, Mapping):
            items = value.items()
        else:
            return  # arrays are counted where they are converted (_array_value)
        if id(value) in seen:
            return
        seen.add(id(value))
        for key, item in items:
            _check_inline(item, f"{where}/{key}", seen, depth + 1)
    except FieldError:
        raise
    except Exception:  # a value that breaks on a look: the careful path writes its repr
        return


def _refuse(where: str, what: str, limit: int) -> None:
    msg = (
        f"field {where!r} holds {what}, more than a record inlines (the limit is {limit:,}); "
        "save it with run.artifact(name, value) and log the returned path instead"
    )
    raise FieldError(msg)


def _array_value(obj: Any, module: str) -> Any:
    """Return a numpy or torch value as Python numbers and lists, refusing large ones."""
    if module == "numpy":
        size = getattr(obj, "size", 1)
        shape = getattr(obj, "shape", ())
    else:
        numel = getattr(obj, "numel", None)
        if numel is None:
            raise TypeError
        size = numel()
        shape = tuple(obj.shape)
        obj = obj.detach().cpu()
    if size > MAX_INLINE_ITEMS:
        msg = (
            f"a value of shape {shape} ({size:,} items) is too large to log inline "
            f"(the limit is {MAX_INLINE_ITEMS:,} items); save it with "
            "run.artifact(name, value) and log the returned path instead"
        )
        raise FieldError(msg)
    return obj.tolist() if hasattr(obj, "tolist") else obj.item()


def _sorted_items(items: set[Any] | frozenset[Any]) -> list[Any]:
    try:
        return sorted(items)
    except Exception:  # unorderable items, or a __lt__ that raises: keep the set's own order
        return list(items)


def _sanitize(
    value: Any, pointer: str, nonfinite: dict[str, str], seen: set[int], depth: int
) -> Any:
    """Return *value* as JSON-native data, noting non-finite floats under their pointers.

    A value whose conversion raises (a dead weakref.proxy, a Mapping whose __getitem__
    raises) is written as its repr: logging never raises over a value.
    """
    kind = type(value)
    if kind is str:
        return _clean_str(value)
    if kind is int:
        return value if -_MAX_NUMBER <= value <= _MAX_NUMBER else str(value)
    if kind is bool or value is None:
        return value
    if kind is float:
        return _clean_float(value, pointer, nonfinite)
    if depth >= _MAX_DEPTH:
        return _repr_limited(value)
    try:
        if isinstance(value, Mapping):
            return _sanitize_mapping(value, pointer, nonfinite, seen, depth)
        if isinstance(value, (list, tuple, set, frozenset)):
            items = _sorted_items(value) if isinstance(value, (set, frozenset)) else value
            return _sanitize_items(value, items, pointer, nonfinite, seen, depth)
        return _sanitize_other(value, pointer, nonfinite, seen, depth)
    except (FieldError, Warning):
        raise  # an array too large to inline, or our warning under an "error" filter
    except RecursionError:
        return _repr_limited(value)
    except Exception:  # a value whose conversion broke: its repr, never an error
        seen.discard(id(value))
        return _repr_with_warning(value)


def _sanitize_mapping(
    value: Mapping[Any, Any], pointer: str, nonfinite: dict[str, str], seen: set[int], depth: int
) -> Any:
    if id(value) in seen:
        return "<cycle>"
    seen.add(id(value))
    out: dict[str, Any] = {}
    for key, item in _entries(value):  # iteration that raises: the mapping becomes its repr
        name = _clean_str(key if isinstance(key, str) else _key_text(key))
        escaped = name.replace("~", "~0").replace("/", "~1")
        out[name] = _sanitize(item, f"{pointer}/{escaped}", nonfinite, seen, depth + 1)
    seen.discard(id(value))
    return out


def read_mapping(mapping: Mapping[Any, Any]) -> dict[Any, Any]:
    """Return *mapping*'s entries as a dict; an entry that cannot be read (an unresolvable
    ``${...}`` of an OmegaConf config) becomes a string naming the error."""
    try:
        return dict(_entries(mapping))
    except Exception:  # its iteration raises: one entry that says so
        return {"<unreadable>": _repr_with_warning(mapping)}


def read_config(config: Any) -> dict[str, Any] | None:
    """Return a run's `config=` as a dict: a mapping, a dataclass, or an argparse.Namespace."""
    if config is None:
        return None
    if isinstance(config, Mapping):
        return read_mapping(config)  # an unresolvable ${...} entry is written, not raised
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return dataclasses.asdict(config)
    if hasattr(config, "__dict__") and type(config).__name__ == "Namespace":
        return dict(vars(config))
    msg = (
        f"config must be a mapping, a dataclass or an argparse.Namespace, got "
        f"{type(config).__name__}; pass config=dict(...)"
    )
    raise TypeError(msg)


def _entries(mapping: Mapping[Any, Any]) -> list[tuple[Any, Any]]:
    entries = []
    for key in list(mapping):
        try:
            item = mapping[key]
        except Exception as err:  # an unresolvable entry: say which error
            item = _clean_str(f"<unreadable: {type(err).__name__}: {_error_text(err)}>")
        entries.append((key, item))
    return entries


def _key_text(key: Any) -> str:
    """Return a mapping key as text: its str(), else its repr(), else a placeholder."""
    for convert in (str, repr):
        try:
            text = convert(key)
        except Exception:  # a key whose __str__ raises
            continue
        if type(text) is str:
            return text
    return f"<unrepresentable {type(key).__qualname__} key>"


def _error_text(err: BaseException) -> str:
    try:
        return str(err)[:200]
    except Exception:  # an exception whose __str__ raises
        return "?"


def _sanitize_items(
    value: Any, items: Any, pointer: str, nonfinite: dict[str, str], seen: set[int], depth: int
) -> Any:
    if id(value) in seen:
        return "<cycle>"
    seen.add(id(value))
    out = [
        _sanitize(item, f"{pointer}/{index}", nonfinite, seen, depth + 1)
        for index, item in enumerate(items)
    ]
    seen.discard(id(value))
    return out


def _sanitize_other(
    value: Any, pointer: str, nonfinite: dict[str, str], seen: set[int], depth: int
) -> Any:
    if isinstance(value, float):  # a float subclass, e.g. numpy.float64
        return _clean_float(float(value), pointer, nonfinite)
    if isinstance(value, int):  # an int subclass other than bool
        return _sanitize(int(value), pointer, nonfinite, seen, depth)
    if isinstance(value, enum.Enum):
        return _sanitize(value.value, pointer, nonfinite, seen, depth)
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if _is_text_type(value):
        return _clean_str(str(value))
    try:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            converted: Any = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        else:
            converted = encode_default(value)
    except FieldError:
        raise  # an array too large to inline: the caller's mistake, said at the call
    except Exception:  # TypeError: not ours to convert; anything else: a value that broke
        return _repr_with_warning(value)
    return _sanitize(converted, pointer, nonfinite, seen, depth)


# Types written as their str(): what users read them as (cuda:0, torch.float32, float32).
_TEXT_TYPES: Final = frozenset({("torch", "device"), ("torch", "dtype")})


def _is_text_type(value: Any) -> bool:
    kind = type(value)
    module = kind.__module__.partition(".")[0]
    if module == "numpy":
        return kind.__name__.endswith("DType") or kind.__name__ == "dtype"
    return (module, kind.__name__) in _TEXT_TYPES


def _clean_float(value: float, pointer: str, nonfinite: dict[str, str]) -> float | None:
    if math.isfinite(value):
        return value
    nonfinite[pointer] = _NONFINITE_NAMES[repr(value)]
    return None


def _clean_str(text: str) -> str:
    """Replace lone surrogates, which UTF-8 cannot hold, with U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)
    return text


def _repr_limited(value: Any) -> str:
    """Return the start of *value*'s repr, for a value nested too deep to walk."""
    try:
        return _clean_str(repr(value)[:1000])
    except Exception:  # RecursionError from a repr deeper than Python's limit, a broken __repr__
        return f"<{type(value).__qualname__} nested deeper than {_MAX_DEPTH} levels>"


def _repr_with_warning(value: Any) -> str:
    kind = type(value)
    if kind not in _warned_types:
        _warned_types.add(kind)
        msg = (
            f"runlines cannot encode a value of type '{kind.__module__}.{kind.__qualname__}'; "
            "it is logged as its repr(). Convert it to a number, string, list or dict first "
            "to keep it structured"
        )
        warn_user(msg, RunlinesWarning)
    try:
        text = repr(value)
    except Exception as err:  # a broken __repr__ must not break logging
        text = f"<unrepresentable {kind.__qualname__}: {type(err).__name__}>"
    return _clean_str(text)


def console_line(line: bytes) -> str:
    """Return the console line for an encoded JSON *line*: it shows exactly what was written."""
    return format_console(restore_nonfinite(orjson.loads(line)))


def format_console(record: Mapping[str, Any], event_width: int = 12) -> str:
    """Return the compact human line for a terminal: time, event, then key=value pairs."""
    stamp = _console_time(record.get("ts", 0.0))
    event = str(record.get("event", ""))
    parts = [
        f"{key}={_console_value(value)}"
        for key, value in record.items()
        if key not in _CONSOLE_SKIP
    ]
    return f"{stamp} {event:<{event_width}} {' '.join(parts)}".rstrip() + "\n"


_CONSOLE_SKIP: Final = frozenset({"ts", "event", "run", NONFINITE_KEY})


def _console_time(ts: Any) -> str:
    try:
        return time.strftime("%H:%M:%S", time.localtime(ts))
    except (TypeError, ValueError, OverflowError, OSError):  # a ts of a foreign or broken log
        return "--:--:--"


def _console_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, str):
        return value if len(value) <= 60 else value[:57] + "..."
    try:
        text = orjson.dumps(value, default=str).decode()
    except (TypeError, orjson.JSONEncodeError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
