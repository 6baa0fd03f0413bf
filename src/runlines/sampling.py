"""Samplers for hot events: every-N and per-second limits, and aggregation windows.

Pure keep/drop decisions: no I/O; time comes from an injected monotonic clock.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections.abc import Callable
from typing import Final, Protocol

from runlines.errors import FieldError

__all__ = [
    "Clock",
    "EveryNthAggregator",
    "EveryNthSampler",
    "Heard",
    "PerSecondAggregator",
    "PerSecondSampler",
    "Sampler",
    "make_sampler",
]

Clock = Callable[[], float]
"""Monotonic seconds; the default is ``time.monotonic``."""

_N: Final = "n"  # how many calls a written record stands for
_SUFFIXES: Final = ("_min", "_max", "_last", "_nan")  # what aggregation adds to a field name

_Fields = dict[str, object]
Heard = Callable[[_Fields, list[tuple[str, float]]], None]
"""Told of one call's fields and its non-finite numbers, (name, value) in call order."""


class Sampler(Protocol):
    """Decide, call by call, what a sampled event writes."""

    def offer(self, fields: _Fields) -> _Fields | None:
        """Return the fields to write for this call (may be *fields* itself), or None."""

    def written(self, fields: _Fields) -> tuple[_Fields, list[tuple[str, float]]] | None:
        """Note that a record offer() returned is in the log: flush() no longer owes it.

        Returns what an aggregator's `heard` hook is still to be told of the call that closed
        the record's window (told once the record is in the log), else None.
        """

    def flush(self, *, timeout: float = -1) -> list[_Fields] | None:
        """Return the records still owed (trailing drops, windows) and start over.

        Meant for the end, after the last offer(): a call racing it may be counted twice.
        Waits at most *timeout* seconds for a thread inside offer() (-1: as long as it takes)
        and returns None when that was not enough.
        """

    def after_fork(self) -> None:
        """Start a forked child with free locks: the parent's may be held by another thread."""


def make_sampler(
    *,
    every: int | None = None,
    per_second: float | None = None,
    aggregate: bool = False,
    clock: Clock | None = None,
) -> Sampler:
    """Return the sampler for ``run.sample(event, every=..., per_second=..., aggregate=...)``.

    Raises:
        FieldError: not exactly one of *every* and *per_second*, or a value out of range.
    """
    if not isinstance(aggregate, bool):
        msg = f"run.sample(): aggregate must be True or False, got {aggregate!r}"
        raise FieldError(msg)
    if every is not None and per_second is None:
        _check_every(every)
        return EveryNthAggregator(every) if aggregate else EveryNthSampler(every)
    if per_second is not None and every is None:
        _check_per_second(per_second)
        if aggregate:
            return PerSecondAggregator(per_second, clock=clock)
        return PerSecondSampler(per_second, clock=clock)
    got = "neither" if every is None else f"both (every={every!r}, per_second={per_second!r})"
    msg = f"run.sample() needs exactly one of every=N or per_second=R; got {got}"
    raise FieldError(msg)


def _check_every(every: object) -> None:
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        msg = (
            f"run.sample(): every must be a positive int, got {every!r}; "
            "every=10 keeps one call in 10"
        )
        raise FieldError(msg)


def _check_per_second(per_second: object) -> None:
    if (
        isinstance(per_second, bool)
        or not isinstance(per_second, (int, float))
        or not 0 < per_second < math.inf
    ):
        msg = (
            f"run.sample(): per_second must be a positive finite number, got {per_second!r}; "
            "per_second=2 writes at most 2 records a second, per_second=0.1 one in 10 s"
        )
        raise FieldError(msg)


def _check_free(fields: _Fields) -> None:
    if _N in fields:
        msg = (
            f"field {_N!r} is reserved in a sampled event: runlines writes there how many "
            "calls the record stands for; rename the field"
        )
        raise FieldError(msg)


class EveryNthSampler:
    """Keep the first call and every n-th after it; flush() writes the trailing drops."""

    __slots__ = ("_every", "_index", "_last_dropped", "_lock")

    def __init__(self, every: int) -> None:
        _check_every(every)
        self._every = every
        # next() on itertools.count is atomic under the GIL: no lock on the hot path
        self._index = itertools.count()
        self._last_dropped: _Fields | None = None
        self._lock = threading.Lock()  # flush() against flush()

    def offer(self, fields: _Fields) -> _Fields | None:
        """Return *fields* with ``n`` on every n-th call, else None (values untouched)."""
        i = next(self._index)
        if i % self._every:
            self._last_dropped = fields  # a reference only: no copy, no conversion
            return None
        _check_free(fields)
        fields[_N] = self._every if i else 1
        return fields

    aggregates = False  # its records hold the calls' own values: the run's alarm reads them

    def written(self, fields: _Fields) -> None:
        """Nothing to note: a kept call's count is its own record's."""

    def flush(self, *, timeout: float = -1) -> list[_Fields] | None:
        """Return the last dropped call's fields with ``n`` = the drops since the last kept."""
        if not self._lock.acquire(timeout=timeout):
            return None
        try:
            offers = next(self._index)  # reads the count; the counter is replaced below
            last, self._last_dropped = self._last_dropped, None
            self._index = itertools.count()
        finally:
            self._lock.release()
        trailing = (offers - 1) % self._every if offers else 0
        # With threads, *last* is one of the last drops, not always the very last: the
        # count is exact either way.
        if not trailing or last is None:
            return []
        last[_N] = trailing
        return [last]

    def after_fork(self) -> None:
        """Start a forked child with a free lock: the parent's may be held by another thread."""
        self._lock = threading.Lock()


class PerSecondSampler:
    """Keep a call when 1/R seconds passed since the last kept one; flush() as every-N."""

    __slots__ = (
        "_clock",
        "_index",
        "_interval_s",
        "_last_dropped",
        "_last_kept",
        "_lock",
        "_next_s",
    )

    def __init__(self, per_second: float, *, clock: Clock | None = None) -> None:
        _check_per_second(per_second)
        self._interval_s = 1.0 / per_second
        self._clock = clock  # None: time.monotonic, looked up per call so tests can freeze it
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self._index = itertools.count()
        self._last_kept = -1  # index of the last kept call
        self._next_s = -math.inf  # clock time from which the next call is kept
        self._last_dropped: _Fields | None = None

    def offer(self, fields: _Fields) -> _Fields | None:
        """Return *fields* with ``n`` when the interval has passed, else None."""
        i = next(self._index)
        clock = self._clock
        now = time.monotonic() if clock is None else clock()
        if now < self._next_s:
            self._last_dropped = fields
            return None
        return self._keep(i, now, fields)

    def _keep(self, i: int, now: float, fields: _Fields) -> _Fields | None:
        with self._lock:
            # Another thread may have kept a call since this one read the clock.
            if now < self._next_s or i <= self._last_kept:
                self._last_dropped = fields
                return None
            _check_free(fields)
            n = i - self._last_kept
            self._last_kept = i
            self._next_s = now + self._interval_s
        fields[_N] = n
        return fields

    aggregates = False  # its records hold the calls' own values: the run's alarm reads them

    def written(self, fields: _Fields) -> None:
        """Nothing to note: a kept call's count is its own record's."""

    def flush(self, *, timeout: float = -1) -> list[_Fields] | None:
        """Return the last dropped call's fields with ``n`` = the drops since the last kept."""
        if not self._lock.acquire(timeout=timeout):
            return None
        try:
            offers = next(self._index)
            trailing = offers - 1 - self._last_kept
            last = self._last_dropped
            self._reset()
        finally:
            self._lock.release()
        if not trailing or last is None:
            return []
        last[_N] = trailing
        return [last]

    def after_fork(self) -> None:
        """Start a forked child with a free lock: the parent's may be held by another thread."""
        self._lock = threading.Lock()


class _Stat:
    """One field's running aggregate over a window."""

    __slots__ = ("count", "last", "max", "min", "nan", "numeric", "total")

    def __init__(self) -> None:
        self.count = 0  # numeric values, NaN excluded
        self.total = 0.0
        self.min: float = math.inf
        self.max: float = -math.inf
        self.nan = 0
        self.numeric = False
        self.last: object = None  # last value as given (numbers: as converted)

    def add(self, value: object) -> float | None:
        """Add one call's value; return it when it is a NaN or an infinity (the alarm's)."""
        number = _as_number(value)
        if number is None:
            if not self.numeric:
                self.last = value
            return None  # a non-number in a numeric field (None, say) is a gap
        self.numeric = True
        self.last = number
        finite = number - number == 0.0  # False for NaN and both infinities; ints are finite
        if not finite and number != number:
            self.nan += 1
            return number
        self.count += 1
        self.total += number
        if number < self.min:
            self.min = number
        if number > self.max:
            self.max = number
        return None if finite else number

    def write(self, name: str, out: _Fields) -> None:
        if not self.numeric:
            out[name] = self.last
            return
        empty = self.count == 0
        out[name] = math.nan if empty else self.total / self.count
        out[f"{name}_min"] = math.nan if empty else self.min
        out[f"{name}_max"] = math.nan if empty else self.max
        out[f"{name}_last"] = self.last
        if self.nan:
            out[f"{name}_nan"] = self.nan


def _as_number(value: object) -> int | float | None:
    kind = type(value)
    if kind is float or kind is int:
        return value  # type: ignore[return-value]
    if kind is bool or kind is str or value is None:
        return None
    try:
        if isinstance(value, (str, bytes)):
            return None
        if isinstance(value, int):  # subclasses: IntEnum
            return int(value)
        if isinstance(value, float):  # subclasses: numpy.float64
            return float(value)
    except Exception:  # a dead weakref.proxy, an int() that raises: not a number
        return None
    module = kind.__module__.partition(".")[0]
    if module in ("numpy", "torch"):
        return _item(value)
    return None


def _item(value: object) -> int | float | None:
    # numpy scalars, 0-d arrays and 0-d tensors of an int or float dtype; .item() on a
    # CUDA tensor syncs the device, which aggregating cannot avoid.
    try:
        if getattr(value, "ndim", None) != 0:
            return None
        item = value.item()  # type: ignore[attr-defined]
    except Exception:  # a numpy dtype (ndim 0, no item()), a meta tensor: not a number
        return None
    kind = type(item)
    return item if kind is float or kind is int else None


class _Window:
    """Offers since the window opened: a count and one _Stat per field."""

    __slots__ = ("offers", "stats")

    def __init__(self) -> None:
        self.offers = 0
        self.stats: dict[str, _Stat] = {}

    def add(self, fields: _Fields) -> list[tuple[str, float]] | None:
        """Add one call; return its NaN and infinite numbers by field, None when there are none."""
        _check_free(fields)
        self.offers += 1
        stats = self.stats
        bad = None
        for name, value in fields.items():
            stat = stats.get(name)
            if stat is None:
                _check_no_clash(name, stats)
                stat = stats[name] = _Stat()
            number = stat.add(value)
            if number is not None:  # rare: the list is made only then
                bad = [] if bad is None else bad
                bad.append((name, number))
        return bad

    def record(self) -> _Fields:
        out: _Fields = {}
        for name, stat in self.stats.items():
            stat.write(name, out)
        out[_N] = self.offers
        return out


def _check_no_clash(name: str, stats: dict[str, _Stat]) -> None:
    for suffix in _SUFFIXES:
        if name + suffix in stats:
            base = name
        elif name.endswith(suffix) and name[: -len(suffix)] in stats:
            base = name[: -len(suffix)]
        else:
            continue
        msg = (
            f"fields {base!r} and {base + suffix!r} clash in an aggregated event: "
            f"aggregating {base!r} writes {base + suffix!r}; rename one of them"
        )
        raise FieldError(msg)


class _Owing:
    """What aggregators share: the lock, and the records of closed windows not yet written.

    A closed window's record stays owed from the moment it leaves the open window until the
    run has written it, so that an exception raised in between (Ctrl-C) cannot lose its count:
    flush() returns it with the open window.

    `heard`, when set (the run's NaN alarm), is told of every NaN or infinity a call brings,
    from that call's offer(): the window's record has only their count (`<field>_nan`), and
    its mean, min and max derive from values already told. For the call that closes a window
    it is told by the run once the record is in the log (written() returns what to tell), so
    that a raise from it leaves no window unwritten.
    """

    __slots__ = ("_later", "_lock", "_owed", "_window", "heard")

    aggregates = True  # every value is seen here: the run's alarm hears of them from heard

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._window = _Window()
        self._owed: dict[int, _Fields] = {}
        self.heard: Heard | None = None
        self._later: dict[int, tuple[_Fields, list[tuple[str, float]]]] = {}

    def _close_window(self) -> _Fields:
        """Replace the open window; return its record, owed until written(). Holds _lock."""
        record = self._window.record()
        key = id(record)
        fresh = _Window()
        # Two stores and no call between: a signal handler cannot run between them, so the
        # window's count is either in the open window or owed, never in neither.
        self._window = fresh
        self._owed[key] = record
        return record

    def written(self, fields: _Fields) -> tuple[_Fields, list[tuple[str, float]]] | None:
        """Note that a closed window's record is in the log; return what `heard` is owed."""
        self._owed.pop(id(fields), None)
        return self._later.pop(id(fields), None) if self._later else None

    def _tell(
        self, fields: _Fields, bad: list[tuple[str, float]], closed: _Fields | None
    ) -> Heard | None:
        """Return `heard` when it is to be told of *bad* now; else keep it for written()."""
        heard = self.heard
        if heard is None:
            return None
        if closed is None:
            return heard
        self._later[id(closed)] = (fields, bad)
        return None

    def _take(self, timeout: float) -> list[_Fields] | None:
        if not self._lock.acquire(timeout=timeout):
            return None
        try:
            window, self._window = self._window, _Window()
            owed = list(self._owed.values())
            self._owed.clear()
            self._later.clear()  # an exception between offer() and the write: not told
        finally:
            self._lock.release()
        return [*owed, window.record()] if window.offers else owed

    def after_fork(self) -> None:
        """Start a forked child with a free lock: the parent's may be held by another thread."""
        self._lock = threading.Lock()


class EveryNthAggregator(_Owing):
    """Write one aggregate record per window of n consecutive calls."""

    __slots__ = ("_every",)

    def __init__(self, every: int) -> None:
        _check_every(every)
        super().__init__()
        self._every = every

    def offer(self, fields: _Fields) -> _Fields | None:
        """Add *fields* to the window; return the window's record when it is full."""
        with self._lock:
            window = self._window
            bad = window.add(fields)
            closed = None if window.offers < self._every else self._close_window()
        if bad is not None:
            heard = self._tell(fields, bad, closed)
            if heard is not None:
                heard(fields, bad)  # may raise: the call is in the window, counted
        return closed

    def flush(self, *, timeout: float = -1) -> list[_Fields] | None:
        """Return the records of closed windows not yet written, then the open window's."""
        return self._take(timeout)


class PerSecondAggregator(_Owing):
    """Write one aggregate record per window of 1/R seconds."""

    __slots__ = ("_clock", "_end_s", "_interval_s")

    def __init__(self, per_second: float, *, clock: Clock | None = None) -> None:
        _check_per_second(per_second)
        self._interval_s = 1.0 / per_second
        super().__init__()
        self._clock = clock  # None: time.monotonic, looked up per call so tests can freeze it
        self._end_s = math.inf  # the open window's end; set by its first call

    def offer(self, fields: _Fields) -> _Fields | None:
        """Add *fields* to the window; the first call at or after its end closes it."""
        clock = self._clock
        now = time.monotonic() if clock is None else clock()
        with self._lock:
            closed = None
            if now >= self._end_s:
                closed = self._close_window()
            if not self._window.offers:
                self._end_s = now + self._interval_s
            bad = self._window.add(fields)
        if bad is not None:
            heard = self._tell(fields, bad, closed)
            if heard is not None:
                heard(fields, bad)  # may raise: the call is in the window, counted
        return closed

    def flush(self, *, timeout: float = -1) -> list[_Fields] | None:
        """Return the records of closed windows not yet written, then the open window's."""
        records = self._take(timeout)
        if records is not None:
            self._end_s = math.inf
        return records
