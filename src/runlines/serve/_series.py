"""One (event, field) series, downsampled as it grows: each bucket keeps its min and its max."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final

MAX_BUCKETS: Final = 1000  # a min and a max per bucket: about one pair per pixel of a wide chart
MAX_MARKS: Final = 1000

# A point: (order, step, ts, y), order being its place among the series' values.
_Point = tuple[int, float, float, float]


def nonfinite_name(value: float) -> str:
    """Return how the log format names a non-finite float: NaN, Infinity or -Infinity."""
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


class Series:
    """The values of one (event, field), in at most `MAX_BUCKETS` buckets however many there are.

    A bucket holds `level` consecutive values and keeps two points, its minimum and its
    maximum, so that a spike survives any zoom level. When the buckets pass `MAX_BUCKETS`,
    pairs merge and `level` doubles: memory stays bounded, and no series is ever dropped.
    Non-finite values are kept apart as marks at their x.
    """

    def __init__(self) -> None:
        self.level = 1
        self.count = 0  # finite values
        self.nonfinite = 0
        self.last: float | None = None  # the last value, finite or not
        self.marks: list[tuple[float, float, str]] = []  # (step, ts, name), the first MAX_MARKS
        self._buckets: list[tuple[_Point, _Point]] = []  # closed buckets: (min, max)
        self._open: tuple[_Point, _Point] | None = None
        self._open_count = 0

    def add(self, step: float, ts: float, value: float) -> None:
        """Take one value, logged at *step* and wall time *ts*."""
        self.last = value
        if value - value != 0.0:  # NaN or an infinity; cheaper than math.isfinite per value
            self.nonfinite += 1
            if len(self.marks) < MAX_MARKS:
                self.marks.append((step, ts, nonfinite_name(value)))
            return
        point = (self.count, step, ts, value)
        self.count += 1
        opened = self._open
        if opened is None:
            self._open = (point, point)
        elif value < opened[0][3]:
            self._open = (point, opened[1])
        elif value > opened[1][3]:
            self._open = (opened[0], point)
        self._open_count += 1
        if self._open_count >= self.level:
            self._buckets.append(self._open)  # type: ignore[arg-type]
            self._open, self._open_count = None, 0
            if len(self._buckets) > MAX_BUCKETS:
                self._merge()

    def _merge(self) -> None:
        pairs = self._buckets
        merged = [_joined(pairs[i], pairs[i + 1]) for i in range(0, len(pairs) - 1, 2)]
        if len(pairs) % 2:  # the odd one out holds one old level: it reopens, to be filled
            self._open, self._open_count = pairs[-1], self.level
        self._buckets = merged
        self.level *= 2

    def drop_after(self, step: float) -> None:
        """Forget the points past *step*: a resumed attempt supersedes them."""
        self._buckets = [b for b in map(_at_most(step), self._buckets) if b is not None]
        if self._open is not None:
            self._open = _at_most(step)(self._open)
            if self._open is None:
                self._open_count = 0
        self.marks = [mark for mark in self.marks if mark[0] <= step]

    def points(self) -> dict[str, Any]:
        """Return the series as columns (step, ts, y), then its non-finite marks."""
        step: list[float] = []
        ts: list[float] = []
        y: list[float] = []
        buckets = self._buckets if self._open is None else [*self._buckets, self._open]
        for low, high in buckets:
            for point in _in_order(low, high):
                step.append(point[1])
                ts.append(point[2])
                y.append(point[3])
        return {
            "level": self.level,
            "count": self.count,
            "step": step,
            "ts": ts,
            "y": y,
            "nonfinite": self.nonfinite,
            "marks": [{"step": s, "ts": t, "value": name} for s, t, name in self.marks],
        }


def _joined(a: tuple[_Point, _Point], b: tuple[_Point, _Point]) -> tuple[_Point, _Point]:
    return (a[0] if a[0][3] <= b[0][3] else b[0], a[1] if a[1][3] >= b[1][3] else b[1])


def _at_most(step: float) -> Callable[[tuple[_Point, _Point]], tuple[_Point, _Point] | None]:
    def kept(bucket: tuple[_Point, _Point]) -> tuple[_Point, _Point] | None:
        points = [point for point in bucket if point[1] <= step]
        if not points:
            return None
        return (min(points, key=_value), max(points, key=_value))

    return kept


def _value(point: _Point) -> float:
    return point[3]


def _in_order(low: _Point, high: _Point) -> tuple[_Point, ...]:
    if low[0] == high[0]:
        return (low,)
    return (low, high) if low[0] < high[0] else (high, low)
