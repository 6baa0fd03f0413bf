"""Timing spans: a block's duration from an injected clock, emitted through a callback.

Knows a clock and a callback, not ``Run`` or sinks; ``SpanStats`` keeps per-name totals.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast

from runlines import _native
from runlines.errors import FieldError

__all__ = ["Clock", "Emit", "Span", "SpanStats", "Tracer", "span_record"]

Clock = Callable[[], float]
"""Monotonic seconds; the default is ``time.perf_counter``."""

Emit = Callable[[str, float, "str | None", str, "str | None", dict[str, object]], None]
"""Receives each finished span: name, duration_s, parent, status, exc_type, fields."""

_F = TypeVar("_F", bound=Callable[..., Any])
_S = TypeVar("_S", bound="_PySpanBase")

# The keys a span record sets itself; a field of the same name would overwrite one.
_RESERVED: Final = frozenset({"name", "duration_s", "parent", "status", "exc_type"})
_DIGITS: Final = 6  # microseconds: finer is clock noise
_thread_id = threading.get_ident


def span_record(
    name: str,
    duration_s: float,
    parent: str | None,
    status: str,
    exc_type: str | None,
    fields: dict[str, object],
) -> dict[str, object]:
    """Return the record of a finished span: its own keys first, then *fields*."""
    record: dict[str, object] = {"name": name, "duration_s": duration_s}
    if parent is not None:
        record["parent"] = parent
    record["status"] = status
    if exc_type is not None:
        record["exc_type"] = exc_type
    record.update(fields)
    return record


class SpanStats:
    """Count, total and maximum duration per span name; thread-safe."""

    __slots__ = ("_lock", "_shards")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # thread id -> that thread's totals: name -> [count, total_s, max_s]. Each thread
        # updates only its own, so the hot path takes no lock. A thread id reused after its
        # thread ended adds to the same totals, which summary() merges anyway.
        self._shards: dict[int, dict[str, list[float]]] = {}

    def after_fork(self) -> None:
        """Start a forked child with a free lock: the parent's may be held by another thread."""
        self._lock = threading.Lock()

    def totals(self) -> dict[str, list[float]]:
        """Return the calling thread's totals, name -> [count, total_s, max_s]."""
        shard = self._shards.get(_thread_id())
        if shard is None:
            with self._lock:
                shard = self._shards.setdefault(_thread_id(), {})
        return shard

    def add(self, name: str, duration_s: float) -> None:
        """Count one span of *name* that lasted *duration_s* seconds."""
        _count(self.totals(), name, duration_s)

    def summary(self) -> dict[str, dict[str, float | int]]:
        """Return ``{name: {"count", "total_s", "mean_s", "max_s"}}`` in first-seen order."""
        merged: dict[str, list[float]] = {}
        # No lock: list() and copy() are single steps under the GIL, and run_end is written
        # from signal handlers, which must not wait for a lock the interrupted code holds.
        shards = [shard.copy() for shard in list(self._shards.values())]
        for shard in shards:
            for name, (count, total, peak) in shard.items():
                acc = merged.setdefault(name, [0, 0.0, peak])
                acc[0] += count
                acc[1] += total
                acc[2] = max(acc[2], peak)
        return {
            name: {
                "count": int(count),
                "total_s": round(total, _DIGITS),
                "mean_s": round(total / count, _DIGITS),
                "max_s": round(peak, _DIGITS),
            }
            for name, (count, total, peak) in merged.items()
        }


def _count(totals: dict[str, list[float]], name: str, duration_s: float) -> None:
    """Add one span to a thread's *totals*: name -> [count, total_s, max_s]."""
    acc = totals.get(name)
    if acc is None:
        totals[name] = [1, duration_s, duration_s]
        return
    acc[0] += 1
    acc[1] += duration_s
    if duration_s > acc[2]:
        acc[2] = duration_s


def _perf_counter() -> float:
    """time.perf_counter(), looked up per call: freezegun replaces it while a test runs."""
    return time.perf_counter()


# One thread's open spans (innermost last) and its span totals; a tuple, which C reads fastest.
_ThreadSpans = tuple[list["_PySpanBase"], dict[str, list[float]]]
# What a span needs of its tracer, by position (the C spans get the same list, never a name):
# [thread id -> its spans, make the calling thread's spans, the clock, the emit callback].
_Core = list[Any]
_THREADS, _NEW_THREAD, _CLOCK, _EMIT = range(4)


class Tracer:
    """Make spans that time a block and emit one record each when it ends."""

    __slots__ = ("core", "stats")

    def __init__(
        self, emit: Emit, *, stats: SpanStats | None = None, clock: Clock | None = None
    ) -> None:
        self.stats = SpanStats() if stats is None else stats
        # thread id -> its open spans; a dict on the thread id costs a fifth of threading.local
        threads: dict[int, _ThreadSpans] = {}
        self.core: _Core = [threads, self._thread, clock or _perf_counter, emit]

    def set_emit(self, emit: Emit) -> None:
        """Send the records of spans that end from now on to *emit*."""
        self.core[_EMIT] = emit

    def _thread(self) -> _ThreadSpans:
        """Return the calling thread's spans, made on its first span."""
        spans: _ThreadSpans = ([], self.stats.totals())
        self.core[_THREADS][_thread_id()] = spans
        return spans

    def span(self, name: str, /, **fields: object) -> Span:
        """Return a span named *name*; its record carries *fields* too.

        Raises:
            FieldError: *name* is not a non-empty str, or a field reuses a key the record sets.
        """
        if not isinstance(name, str) or not name:
            msg = f"span name must be a non-empty str, got {name!r}; name the block, e.g. 'eval'"
            raise FieldError(msg)
        if fields and not _RESERVED.isdisjoint(fields):
            clash = sorted(_RESERVED.intersection(fields))
            msg = (
                f"span {name!r}: field {clash[0]!r} is set by the span record itself; "
                f"rename it (reserved: {', '.join(sorted(_RESERVED))})"
            )
            raise FieldError(msg)
        return Span(self.core, name, fields)


class _PySpanBase:
    """A span's ``with`` protocol in Python; `_speedups.speedups.SpanBase` is the same in C."""

    __slots__ = ("_core", "_fields", "_name", "_parent", "_start", "_thread")
    _thread: _ThreadSpans  # the spans of the thread that entered this one

    def __init__(self, core: _Core, name: str, fields: dict[str, object]) -> None:
        self._core = core
        self._name = name
        self._fields = fields
        self._parent: str | None = None
        self._start: float | None = None  # None while closed

    def __enter__(self: _S) -> _S:
        if self._start is not None:
            msg = (
                f"span {self._name!r} is already open; a Span times one block at a time, "
                f"call span({self._name!r}) again for a nested or concurrent block"
            )
            raise RuntimeError(msg)
        core = self._core
        self._thread = thread = core[_THREADS].get(_thread_id()) or core[_NEW_THREAD]()
        stack = thread[0]
        self._parent = stack[-1]._name if stack else None
        stack.append(self)
        self._start = core[_CLOCK]()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        core = self._core
        end = core[_CLOCK]()
        # Not rounded: rounding would cost a sixth of the span (summary() rounds).
        duration = end - self._start
        self._start = None
        thread = self._thread
        stack = thread[0]
        if stack[-1] is self:
            stack.pop()
        else:
            _remove(stack, self)
        name = self._name
        _count(thread[1], name, duration)
        if exc_type is None:
            core[_EMIT](name, duration, self._parent, "ok", None, self._fields)
        else:
            status = "interrupted" if exc_type is KeyboardInterrupt else "failed"
            core[_EMIT](name, duration, self._parent, status, exc_type.__name__, self._fields)


if TYPE_CHECKING:
    _SpanBase = _PySpanBase
else:
    _SpanBase = _PySpanBase if _native.speedups is None else _native.speedups.SpanBase


class Span(_SpanBase):
    """Time a ``with`` block, or every call of a decorated function, as one record each.

    A Span object times one ``with`` block at a time; as a decorator it makes a fresh
    Span per call, so recursion and threads are safe.
    """

    __slots__ = ()

    def __call__(self, func: _F) -> _F:
        """Decorate *func* so that each call is one span (async functions too)."""
        import inspect  # ~8 ms to import (ast, dis): only decorating a function needs it

        core, name, fields = self._core, self._name, self._fields
        if inspect.isgeneratorfunction(func) or inspect.isasyncgenfunction(func):
            msg = (
                f"span({name!r}) cannot decorate the generator function {func.__qualname__!r}: "
                f"the span would end before the first item; use 'with tracer.span({name!r}):' "
                "inside it instead"
            )
            raise TypeError(msg)
        if inspect.iscoroutinefunction(func):
            return cast(_F, _wrap_async(func, core, name, fields))

        @functools.wraps(func)
        def timed(*args: Any, **kwargs: Any) -> Any:
            with Span(core, name, fields):
                return func(*args, **kwargs)

        return cast(_F, timed)


def _wrap_async(
    func: Callable[..., Awaitable[Any]], core: _Core, name: str, fields: dict[str, object]
) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(func)
    async def timed(*args: Any, **kwargs: Any) -> Any:
        with Span(core, name, fields):
            return await func(*args, **kwargs)

    return timed


def _remove(stack: list[_PySpanBase], span: _PySpanBase) -> None:
    # Spans normally close innermost first; one closed out of order (interleaved
    # generators or tasks) is removed where it is, so the stack stays true.
    for i in range(len(stack) - 2, -1, -1):
        if stack[i] is span:
            del stack[i]
            return
