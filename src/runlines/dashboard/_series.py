"""One (event, field) series, downsampled as it grows: each bucket keeps its min and its max."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from runlines.fields import Vocabulary

MAX_BUCKETS: Final = 1000  # a min and a max per bucket: about one pair per pixel of a wide chart
MAX_MARKS: Final = 1000
# The unit of a field, by the ending of its agreed name (docs/fields.md): `rss_bytes`,
# `duration_s`, `cpu_percent`; a rate (`tokens_per_s`) is no duration
_UNIT_ENDINGS: Final = (("_bytes", "bytes"), ("_s", "s"), ("_percent", "%"))
_RATE_ENDING: Final = "_per_s"

# A point: (order, step, ts, y), order being its place among the series' values.
_Point = tuple[int, float, float, float]
# Where values taken in bulk were logged: a row's (step, ts, value) as Python values.
PointOf = Callable[[int], tuple[float, float, float]]


# The exact types decoded JSON numbers have: no bool, which is an int to isinstance
NUMERIC: Final = frozenset({int, float})


def as_float(value: Any) -> float:
    """Return a JSON number as a float; NaN for anything else, or an int beyond any float."""
    if type(value) is float:
        return value
    try:
        return float(value) if type(value) is int else math.nan
    except OverflowError:  # a foreign writer's int of 400 digits
        return math.nan


def nonfinite_name(value: float) -> str:
    """Return how the log format names a non-finite float: NaN, Infinity or -Infinity."""
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def unit_of(key: str, vocabulary: Vocabulary | None = None) -> str | None:
    """Return the unit of a field or a run table column: "bytes", "s", "%", or None.

    *key* is a field (`rss_bytes`) or a column (`system.rss_bytes`, `train_step.step_s.best`,
    `duration_s`); an alias the vocabulary knows (`elapsed_sec` for `duration_s`,
    `tokens_per_sec`) has its agreed name's unit.
    """
    parts = key.split(".")
    if len(parts) > 1 and parts[-1] in ("best", "last"):
        parts.pop()
    name = parts[-1]
    if vocabulary is not None:
        name = vocabulary.agreed_name(name) or name
    if name.endswith(_RATE_ENDING):
        return None
    for ending, unit in _UNIT_ENDINGS:
        if name.endswith(ending) and len(name) > len(ending):
            return unit
    return None


class Series:
    """The values of one (event, field), in at most `MAX_BUCKETS` buckets however many there are.

    A bucket holds `level` consecutive values and keeps two points, its minimum and its
    maximum, so that a spike survives any zoom level. When the buckets pass *max_buckets*,
    pairs merge and `level` doubles: memory stays bounded, and no series is ever dropped.
    Non-finite values are kept apart as marks at their x.
    """

    def __init__(self, max_buckets: int = MAX_BUCKETS) -> None:
        self.max_buckets = max_buckets  # fewer in a report that holds many series in one file
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
            if len(self._buckets) > self.max_buckets:
                self._merge()

    def extend(
        self, floats: npt.NDArray[np.float64], rows: npt.NDArray[np.int64], at: PointOf
    ) -> None:
        """Take many values at once, as that many `add` calls would, in the same order.

        *floats* are the values as floats, for comparing; *at* gives row *rows[i]*'s (step,
        ts, value) as Python values, and is asked only for the points and marks kept.
        """
        if not len(rows):
            return
        self.last = at(int(rows[-1]))[2]
        # np.isfinite, by the arrays' own operators: the dashboard starts without numpy, and
        # the caller of a bulk add has it (a comparison with NaN is False, and warns of nothing)
        finite = abs(floats) < math.inf
        for row in rows[~finite][: max(0, MAX_MARKS - len(self.marks))].tolist():
            step, ts, value = at(row)
            self.marks.append((step, ts, nonfinite_name(value)))
        self.nonfinite += int(len(rows) - finite.sum())
        values, rows = floats[finite], rows[finite]
        done = 0
        while done < len(values):
            if self._open is not None or len(values) - done < self.level:
                done += self._fill_open(values[done:], rows[done:], at)
                continue
            room = self.max_buckets + 1 - len(self._buckets)  # closed buckets before the next merge
            groups = min((len(values) - done) // self.level, room)
            stop = done + groups * self.level
            self._close_groups(values[done:stop], rows[done:stop], groups, at)
            done = stop
            if len(self._buckets) > self.max_buckets:
                self._merge()

    def _fill_open(
        self, values: npt.NDArray[np.float64], rows: npt.NDArray[np.int64], at: PointOf
    ) -> int:
        """Add values to the open bucket (opened if none) until it closes; return how many."""
        taken = min(len(values), self.level - self._open_count)
        low, high = self._points(values[:taken], rows[:taken], at)
        opened = self._open
        if opened is not None:
            low = low if low[3] < opened[0][3] else opened[0]
            high = high if high[3] > opened[1][3] else opened[1]
        self._open = (low, high)
        self.count += taken
        self._open_count += taken
        if self._open_count >= self.level:
            self._buckets.append(self._open)
            self._open, self._open_count = None, 0
            if len(self._buckets) > self.max_buckets:
                self._merge()
        return taken

    def _close_groups(
        self, values: npt.NDArray[np.float64], rows: npt.NDArray[np.int64], groups: int, at: PointOf
    ) -> None:
        """Close *groups* buckets of `level` values each: the first minimum and maximum of each."""
        shaped = values.reshape(groups, self.level)
        starts = range(0, groups * self.level, self.level)
        lows, highs = shaped.argmin(axis=1).tolist(), shaped.argmax(axis=1).tolist()
        for start, low, high in zip(starts, lows, highs, strict=True):
            self._buckets.append(
                (self._point(start + low, rows, at), self._point(start + high, rows, at))
            )
        self.count += groups * self.level

    def _points(
        self, values: npt.NDArray[np.float64], rows: npt.NDArray[np.int64], at: PointOf
    ) -> tuple[_Point, _Point]:
        low, high = int(values.argmin()), int(values.argmax())
        return self._point(low, rows, at), self._point(high, rows, at)

    def _point(self, index: int, rows: npt.NDArray[np.int64], at: PointOf) -> _Point:
        """Return the point of *rows[index]*, the index-th value from `count` on."""
        step, ts, value = at(int(rows[index]))
        return self.count + index, step, ts, value

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
