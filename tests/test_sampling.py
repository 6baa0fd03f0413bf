"""Samplers: which calls of a hot event are written, and what ``n`` each record carries."""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Callable

import numpy as np
import pytest
from freezegun import freeze_time

from runlines.errors import FieldError
from runlines.sampling import (
    EveryNthAggregator,
    EveryNthSampler,
    PerSecondAggregator,
    PerSecondSampler,
    Sampler,
    make_sampler,
)

Fields = dict[str, object]


class FakeClock:
    """A clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now

    def tick(self, seconds: float) -> None:
        self.now += seconds


class Untouchable:
    """A value that fails if anything converts, compares or prints it (a CUDA tensor, say)."""

    def _fail(self, *args: object) -> None:
        msg = "a dropped value was touched"
        raise AssertionError(msg)

    __float__ = __int__ = __index__ = __bool__ = __repr__ = __str__ = __eq__ = _fail  # type: ignore[assignment]
    __hash__ = None  # type: ignore[assignment]
    item = tolist = _fail


def offer_all(sampler: Sampler, calls: list[Fields]) -> list[Fields]:
    """Offer each call, as Run.log() does; return what was written, flush included."""
    written = [out for fields in calls if (out := write(sampler, fields)) is not None]
    return written + flush(sampler)


def write(sampler: Sampler, fields: Fields) -> Fields | None:
    """Offer one call and, as Run.log() does once the record is in the log, say it was written."""
    out = sampler.offer(fields)
    if out is not None:
        sampler.written(out)
    return out


def flush(sampler: Sampler) -> list[Fields]:
    records = sampler.flush()
    assert records is not None
    return records


def steps(count: int) -> list[Fields]:
    return [{"step": i} for i in range(count)]


def total_n(records: list[Fields]) -> int:
    return sum(int(record["n"]) for record in records)  # type: ignore[call-overload]


class TestEveryNthSampler:
    def test_keeps_first_then_every_nth_with_n(self) -> None:
        sampler = make_sampler(every=10)

        written = [sampler.offer(fields) for fields in steps(21)]

        kept = [out for out in written if out is not None]
        assert kept == [{"step": 0, "n": 1}, {"step": 10, "n": 10}, {"step": 20, "n": 10}]

    def test_flush_writes_the_last_dropped_call_with_the_trailing_count(self) -> None:
        sampler = make_sampler(every=10)

        written = offer_all(sampler, steps(25))

        assert [r["step"] for r in written] == [0, 10, 20, 24]
        assert [r["n"] for r in written] == [1, 10, 10, 4]
        assert total_n(written) == 25

    def test_flush_is_empty_when_the_last_call_was_kept(self) -> None:
        sampler = make_sampler(every=10)
        for fields in steps(11):
            sampler.offer(fields)

        assert sampler.flush() == []

    def test_flush_is_empty_before_any_call(self) -> None:
        assert make_sampler(every=3).flush() == []

    def test_flush_starts_over(self) -> None:
        sampler = make_sampler(every=3)
        offer_all(sampler, steps(5))

        again = offer_all(sampler, steps(4))

        assert [(r["step"], r["n"]) for r in again] == [(0, 1), (3, 3)]

    def test_kept_record_is_the_offered_dict(self) -> None:
        sampler = make_sampler(every=2)
        fields: Fields = {"loss": 0.5}

        assert sampler.offer(fields) is fields

    def test_every_one_keeps_every_call(self) -> None:
        written = offer_all(make_sampler(every=1), steps(4))

        assert [r["n"] for r in written] == [1, 1, 1, 1]

    def test_dropped_values_are_never_touched(self) -> None:
        sampler = make_sampler(every=5)

        written = offer_all(sampler, [{"grad": Untouchable()} for _ in range(12)])

        assert [r["n"] for r in written] == [1, 5, 5, 1]

    def test_field_n_is_refused(self) -> None:
        with pytest.raises(FieldError, match="field 'n' is reserved"):
            make_sampler(every=5).offer({"n": 3})

    def test_counts_are_exact_across_threads(self) -> None:
        assert_exact_across_threads(make_sampler(every=7))


class TestPerSecondSampler:
    def test_keeps_a_call_once_the_interval_has_passed(self) -> None:
        clock = FakeClock()
        sampler = make_sampler(per_second=2, clock=clock)
        written = []

        for i in range(10):  # a call every 0.2 s; the interval is 0.5 s
            written.append(sampler.offer({"step": i}))
            clock.tick(0.2)

        kept = [(out["step"], out["n"]) for out in written if out is not None]
        assert kept == [(0, 1), (3, 3), (6, 3), (9, 3)]

    def test_flush_writes_the_trailing_drops(self) -> None:
        clock = FakeClock()
        sampler = make_sampler(per_second=1, clock=clock)
        for i in range(4):
            sampler.offer({"step": i})
            clock.tick(0.1)

        assert sampler.flush() == [{"step": 3, "n": 3}]
        assert sampler.flush() == []

    def test_default_clock_follows_freezegun(self) -> None:
        with freeze_time("2026-05-01 12:00:00") as frozen:
            sampler = make_sampler(per_second=0.5)
            first = sampler.offer({"step": 0})
            frozen.tick(1.0)
            second = sampler.offer({"step": 1})
            frozen.tick(1.5)
            third = sampler.offer({"step": 2})

        assert first == {"step": 0, "n": 1}
        assert second is None
        assert third == {"step": 2, "n": 2}

    def test_dropped_values_are_never_touched(self) -> None:
        clock = FakeClock()
        sampler = make_sampler(per_second=1, clock=clock)

        written = offer_all(sampler, [{"grad": Untouchable()} for _ in range(6)])

        assert [r["n"] for r in written] == [1, 5]

    def test_counts_are_exact_across_threads(self) -> None:
        ticks = itertools.count()
        assert_exact_across_threads(make_sampler(per_second=50, clock=lambda: next(ticks) * 1e-3))


class TestEveryNthAggregator:
    def test_writes_one_record_per_window_of_n_calls(self) -> None:
        sampler = make_sampler(every=10, aggregate=True)

        written = offer_all(sampler, [{"loss": float(i)} for i in range(25)])

        assert [r["n"] for r in written] == [10, 10, 5]
        assert written[0] == {
            "loss": 4.5,
            "loss_min": 0.0,
            "loss_max": 9.0,
            "loss_last": 9.0,
            "n": 10,
        }
        assert written[2]["loss"] == 22.0
        assert written[2]["loss_last"] == 24.0

    def test_non_numeric_fields_keep_their_last_value(self) -> None:
        sampler = make_sampler(every=3, aggregate=True)

        written = offer_all(
            sampler, [{"phase": p, "ok": b} for p, b in zip("abc", [1, 0, 1], strict=True)]
        )

        assert written == [
            {
                "phase": "c",
                "ok": 2 / 3,
                "ok_min": 0,
                "ok_max": 1,
                "ok_last": 1,
                "n": 3,
            }
        ]

    def test_bools_are_not_averaged(self) -> None:
        sampler = make_sampler(every=2, aggregate=True)

        written = offer_all(sampler, [{"done": False}, {"done": True}])

        assert written == [{"done": True, "n": 2}]

    def test_ints_keep_their_type_in_min_max_last(self) -> None:
        written = offer_all(make_sampler(every=3, aggregate=True), steps(3))

        assert written == [{"step": 1.0, "step_min": 0, "step_max": 2, "step_last": 2, "n": 3}]
        assert all(type(written[0][k]) is int for k in ("step_min", "step_max", "step_last"))

    def test_nan_is_left_out_of_mean_min_max_and_counted(self) -> None:
        sampler = make_sampler(every=3, aggregate=True)

        written = offer_all(sampler, [{"loss": 1.0}, {"loss": math.nan}, {"loss": 3.0}])

        assert written == [
            {
                "loss": 2.0,
                "loss_min": 1.0,
                "loss_max": 3.0,
                "loss_last": 3.0,
                "loss_nan": 1,
                "n": 3,
            }
        ]

    def test_a_window_of_only_nan_gives_nan(self) -> None:
        written = offer_all(make_sampler(every=2, aggregate=True), [{"x": math.nan}] * 2)

        record = written[0]
        assert all(math.isnan(record[k]) for k in ("x", "x_min", "x_max", "x_last"))  # type: ignore[arg-type]
        assert record["x_nan"] == 2

    def test_a_field_missing_from_some_calls_aggregates_over_the_others(self) -> None:
        calls: list[Fields] = [{"loss": 1.0}, {"loss": 2.0, "acc": 0.5}, {"loss": 3.0}]

        written = offer_all(make_sampler(every=3, aggregate=True), calls)

        assert written[0]["acc"] == 0.5
        assert written[0]["acc_last"] == 0.5
        assert written[0]["loss"] == 2.0

    def test_none_in_a_numeric_field_is_a_gap(self) -> None:
        calls: list[Fields] = [{"loss": 1.0}, {"loss": None}, {"loss": 3.0}]

        written = offer_all(make_sampler(every=3, aggregate=True), calls)

        assert written[0]["loss"] == 2.0
        assert written[0]["n"] == 3

    def test_numpy_scalars_are_converted(self) -> None:
        calls: list[Fields] = [
            {"loss": np.float32(1.5)},
            {"loss": np.int64(2)},
            {"loss": np.array(4.0)},
        ]

        written = offer_all(make_sampler(every=3, aggregate=True), calls)

        assert written[0] == {
            "loss": 2.5,
            "loss_min": 1.5,
            "loss_max": 4.0,
            "loss_last": 4.0,
            "n": 3,
        }
        assert type(written[0]["loss_last"]) is float

    def test_numpy_arrays_keep_their_last_value(self) -> None:
        last = np.zeros(3)

        written = offer_all(make_sampler(every=2, aggregate=True), [{"v": np.ones(3)}, {"v": last}])

        assert written[0]["v"] is last

    def test_torch_scalar_tensors_are_converted(self) -> None:
        torch = pytest.importorskip("torch")
        calls: list[Fields] = [{"loss": torch.tensor(1.0)}, {"loss": torch.tensor(3)}]

        written = offer_all(make_sampler(every=2, aggregate=True), calls)

        assert written[0] == {"loss": 2.0, "loss_min": 1.0, "loss_max": 3, "loss_last": 3, "n": 2}

    def test_a_field_and_its_aggregate_name_clash(self) -> None:
        sampler = make_sampler(every=5, aggregate=True)

        with pytest.raises(FieldError, match="'loss' and 'loss_min' clash"):
            sampler.offer({"loss": 1.0, "loss_min": 0.5})

    def test_field_n_is_refused(self) -> None:
        with pytest.raises(FieldError, match="field 'n' is reserved"):
            make_sampler(every=5, aggregate=True).offer({"n": 3})

    def test_flush_is_empty_when_the_window_is(self) -> None:
        sampler = make_sampler(every=5, aggregate=True)
        offer_all(sampler, steps(5))

        assert sampler.flush() == []

    def test_counts_are_exact_across_threads(self) -> None:
        assert_exact_across_threads(make_sampler(every=64, aggregate=True))

    def test_heard_is_told_of_each_nonfinite_value_once_the_closing_call_after_written(
        self,
    ) -> None:
        sampler = make_sampler(every=3, aggregate=True)
        told: list[tuple[object, list[tuple[str, float]]]] = []
        sampler.heard = lambda fields, bad: told.append((fields["step"], bad))  # type: ignore[attr-defined]

        for step, loss in enumerate([1.0, math.nan, 2.0, 3, -math.inf]):
            record = sampler.offer({"step": step, "loss": loss, "ok": math.nan > 0})
            assert record is None or sampler.written(record) is None
        closed = sampler.offer({"step": 5, "loss": math.inf})

        assert [(step, [(name, str(value)) for name, value in bad]) for step, bad in told] == [
            (1, [("loss", "nan")]),
            (4, [("loss", "-inf")]),
        ]
        assert closed is not None
        assert closed["loss_max"] == math.inf  # an infinity is a value of the window still
        assert sampler.written(closed) == ({"step": 5, "loss": math.inf}, [("loss", math.inf)])
        assert len(told) == 2


class TestPerSecondAggregator:
    def test_windows_close_on_the_first_call_at_or_after_their_end(self) -> None:
        clock = FakeClock()
        sampler = make_sampler(per_second=1, aggregate=True, clock=clock)
        written = []

        for i, tick in enumerate([0.25, 0.25, 0.5, 0.5, 0.75, 0.25]):
            written.append(write(sampler, {"step": i}))
            clock.tick(tick)
        flushed = flush(sampler)

        # calls at t=0, .25, .5 | 1.0 (closes the first window), 1.5 | 2.25 (closes the second)
        closed = [(r["step_min"], r["step_max"], r["n"]) for r in written if r is not None]
        assert closed == [(0, 2, 3), (3, 4, 2)]
        assert [(r["step_min"], r["n"]) for r in flushed] == [(5, 1)]

    def test_a_call_exactly_at_the_end_closes_the_window(self) -> None:
        clock = FakeClock()
        sampler = make_sampler(per_second=2, aggregate=True, clock=clock)

        sampler.offer({"loss": 1.0})
        clock.tick(0.5)
        closed = write(sampler, {"loss": 2.0})

        assert closed == {"loss": 1.0, "loss_min": 1.0, "loss_max": 1.0, "loss_last": 1.0, "n": 1}
        assert flush(sampler)[0]["loss"] == 2.0

    def test_flush_is_empty_before_any_call(self) -> None:
        assert make_sampler(per_second=1, aggregate=True, clock=FakeClock()).flush() == []

    def test_counts_are_exact_across_threads(self) -> None:
        ticks = itertools.count()
        sampler = make_sampler(per_second=20, aggregate=True, clock=lambda: next(ticks) * 1e-3)

        assert_exact_across_threads(sampler)


def assert_exact_across_threads(sampler: Sampler) -> None:
    """8 threads x 5,000 calls: the written records' n add up to exactly 40,000."""
    written: list[Fields] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def offer_many(thread: int) -> None:
        start.wait()
        mine = [out for i in range(5_000) if (out := write(sampler, {"x": i})) is not None]
        with lock:
            written.extend(mine)

    threads = [threading.Thread(target=offer_many, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert total_n(written + flush(sampler)) == 40_000


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "exactly one of every=N or per_second=R; got neither"),
        ({"every": 5, "per_second": 1.0}, "exactly one of every=N or per_second=R; got both"),
        ({"every": 0}, "every must be a positive int, got 0"),
        ({"every": -3}, "every must be a positive int, got -3"),
        ({"every": True}, "every must be a positive int, got True"),
        ({"every": 2.5}, "every must be a positive int, got 2.5"),
        ({"every": "10"}, "every must be a positive int, got '10'"),
        ({"per_second": 0}, "per_second must be a positive finite number, got 0"),
        ({"per_second": -1.0}, "per_second must be a positive finite number, got -1.0"),
        ({"per_second": math.inf}, "per_second must be a positive finite number, got inf"),
        ({"per_second": math.nan}, "per_second must be a positive finite number, got nan"),
        ({"per_second": True}, "per_second must be a positive finite number, got True"),
        ({"per_second": "2"}, "per_second must be a positive finite number, got '2'"),
        ({"every": 2, "aggregate": "yes"}, "aggregate must be True or False"),
    ],
)
def test_bad_arguments_are_refused_with_the_fix(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(FieldError, match=message):
        make_sampler(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "kind"),
    [
        ({"every": 3}, EveryNthSampler),
        ({"per_second": 3}, PerSecondSampler),
        ({"every": 3, "aggregate": True}, EveryNthAggregator),
        ({"per_second": 0.5, "aggregate": True}, PerSecondAggregator),
    ],
)
def test_make_sampler_picks_the_mode(
    kwargs: dict[str, object], kind: Callable[..., object]
) -> None:
    assert type(make_sampler(**kwargs)) is kind  # type: ignore[arg-type]
