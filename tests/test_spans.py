"""Spans: one record per timed block, parents per thread, totals per name."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest
from freezegun import freeze_time

from runlines.errors import FieldError
from runlines.spans import Span, SpanStats, Tracer, span_record


class FakeClock:
    """A clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def tick(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(name="clock")
def _clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(name="records")
def _records() -> list[dict[str, object]]:
    return []


@pytest.fixture(name="tracer")
def _tracer(records: list[dict[str, object]], clock: FakeClock) -> Tracer:
    return Tracer(lambda *span: records.append(span_record(*span)), clock=clock)


def test_span_emits_one_record_with_its_duration(
    tracer: Tracer, records: list[dict[str, object]], clock: FakeClock
) -> None:
    with tracer.span("eval"):
        clock.tick(1.5)

    assert records == [{"name": "eval", "duration_s": 1.5, "status": "ok"}]


def test_span_record_carries_fields_after_its_own_keys(
    tracer: Tracer, records: list[dict[str, object]], clock: FakeClock
) -> None:
    with tracer.span("eval", split="val", step=3):
        clock.tick(0.25)

    assert list(records[0]) == ["name", "duration_s", "status", "split", "step"]
    assert records[0]["split"] == "val"
    assert records[0]["step"] == 3


def test_nested_span_names_its_parent(
    tracer: Tracer, records: list[dict[str, object]], clock: FakeClock
) -> None:
    with tracer.span("epoch"):
        with tracer.span("eval"):
            clock.tick(2.0)
        clock.tick(1.0)

    inner, outer = records
    assert inner == {"name": "eval", "duration_s": 2.0, "parent": "epoch", "status": "ok"}
    assert outer == {"name": "epoch", "duration_s": 3.0, "status": "ok"}


def test_sibling_spans_share_the_parent(tracer: Tracer, records: list[dict[str, object]]) -> None:
    with tracer.span("epoch"):
        with tracer.span("train"):
            pass
        with tracer.span("eval"):
            pass

    assert [(r["name"], r.get("parent")) for r in records] == [
        ("train", "epoch"),
        ("eval", "epoch"),
        ("epoch", None),
    ]


def test_parent_is_per_thread(tracer: Tracer, records: list[dict[str, object]]) -> None:
    """A span open in one thread is not the parent of a span in another."""
    opened, done = threading.Event(), threading.Event()

    def worker() -> None:
        with tracer.span("loader"):
            opened.set()
            done.wait()

    thread = threading.Thread(target=worker)
    thread.start()
    opened.wait()
    with tracer.span("step"):
        pass
    done.set()
    thread.join()

    assert records == [
        {"name": "step", "duration_s": 0.0, "status": "ok"},
        {"name": "loader", "duration_s": 0.0, "status": "ok"},
    ]


def test_exception_propagates_and_marks_the_span_failed(
    tracer: Tracer, records: list[dict[str, object]]
) -> None:
    error = ValueError("bad batch")

    with pytest.raises(ValueError, match="bad batch") as caught, tracer.span("step"):
        raise error

    assert caught.value is error

    assert records == [
        {"name": "step", "duration_s": 0.0, "status": "failed", "exc_type": "ValueError"}
    ]


def test_keyboard_interrupt_marks_the_span_interrupted(
    tracer: Tracer, records: list[dict[str, object]]
) -> None:
    with pytest.raises(KeyboardInterrupt), tracer.span("step"):
        raise KeyboardInterrupt

    assert records[0]["status"] == "interrupted"
    assert records[0]["exc_type"] == "KeyboardInterrupt"


def test_failed_inner_span_leaves_the_outer_span_its_parent_stack(
    tracer: Tracer, records: list[dict[str, object]]
) -> None:
    with tracer.span("epoch"):
        with pytest.raises(RuntimeError), tracer.span("eval"):
            raise RuntimeError
        with tracer.span("save"):
            pass

    assert [(r["name"], r.get("parent"), r["status"]) for r in records] == [
        ("eval", "epoch", "failed"),
        ("save", "epoch", "ok"),
        ("epoch", None, "ok"),
    ]


def test_decorator_makes_each_call_one_span(
    tracer: Tracer, records: list[dict[str, object]], clock: FakeClock
) -> None:
    @tracer.span("train_step", phase="train")
    def train_step(seconds: float) -> float:
        clock.tick(seconds)
        return seconds * 2

    results = [train_step(0.5), train_step(1.0), train_step(0.25)]

    assert results == [1.0, 2.0, 0.5]
    assert [r["duration_s"] for r in records] == [0.5, 1.0, 0.25]
    assert all(r["phase"] == "train" for r in records)
    assert train_step.__name__ == "train_step"


def test_decorated_recursive_function_nests_its_own_spans(
    tracer: Tracer, records: list[dict[str, object]]
) -> None:
    @tracer.span("fact")
    def fact(n: int) -> int:
        return 1 if n <= 1 else n * fact(n - 1)

    assert fact(3) == 6

    assert [r.get("parent") for r in records] == ["fact", "fact", None]
    assert tracer.stats.summary()["fact"]["count"] == 3


def test_decorated_function_that_raises_marks_failed_and_raises(
    tracer: Tracer, records: list[dict[str, object]]
) -> None:
    @tracer.span("load")
    def load() -> None:
        msg = "disk gone"
        raise OSError(msg)

    with pytest.raises(OSError, match="disk gone"):
        load()
    with pytest.raises(OSError, match="disk gone"):
        load()

    assert [r["status"] for r in records] == ["failed", "failed"]


def test_decorated_function_is_safe_across_threads(tracer: Tracer) -> None:
    @tracer.span("work")
    def work() -> None:
        with tracer.span("inner"):
            pass

    threads = [threading.Thread(target=lambda: [work() for _ in range(200)]) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    summary = tracer.stats.summary()
    assert summary["work"]["count"] == 800
    assert summary["inner"]["count"] == 800


def test_decorator_times_async_functions(
    tracer: Tracer, records: list[dict[str, object]], clock: FakeClock
) -> None:
    @tracer.span("fetch")
    async def fetch() -> str:
        clock.tick(0.5)
        return "ok"

    assert asyncio.run(fetch()) == "ok"

    assert records == [{"name": "fetch", "duration_s": 0.5, "status": "ok"}]


def test_decorating_a_generator_function_is_refused(tracer: Tracer) -> None:
    def batches() -> Iterator[int]:
        yield 1

    with pytest.raises(TypeError, match="generator function"):
        tracer.span("batches")(batches)


def test_span_object_can_time_blocks_one_after_another(
    tracer: Tracer, records: list[dict[str, object]], clock: FakeClock
) -> None:
    span = tracer.span("eval")

    with span:
        clock.tick(1.0)
    with span:
        clock.tick(2.0)

    assert [r["duration_s"] for r in records] == [1.0, 2.0]


def test_reentering_an_open_span_object_is_refused(tracer: Tracer) -> None:
    span = tracer.span("eval")

    with span, pytest.raises(RuntimeError, match="already open"):
        span.__enter__()


def test_spans_closed_out_of_order_keep_parents_true(
    tracer: Tracer, records: list[dict[str, object]]
) -> None:
    outer, inner = tracer.span("outer"), tracer.span("inner")
    outer.__enter__()
    inner.__enter__()
    outer.__exit__(None, None, None)
    inner.__exit__(None, None, None)
    with tracer.span("after"):
        pass

    assert [(r["name"], r.get("parent")) for r in records] == [
        ("outer", None),
        ("inner", "outer"),
        ("after", None),
    ]


@pytest.mark.parametrize("name", ["", None, 3, b"eval"])
def test_span_name_must_be_a_non_empty_str(tracer: Tracer, name: object) -> None:
    with pytest.raises(FieldError, match="span name must be a non-empty str"):
        tracer.span(name)  # type: ignore[arg-type]


@pytest.mark.parametrize("key", ["duration_s", "parent", "status", "exc_type", "name"])
def test_span_field_cannot_overwrite_a_record_key(tracer: Tracer, key: str) -> None:
    with pytest.raises(FieldError, match=f"field '{key}' is set by the span record"):
        tracer.span("eval", **{key: 1})


def test_default_clock_follows_freezegun(records: list[dict[str, object]]) -> None:
    tracer = Tracer(lambda *span: records.append(span_record(*span)))

    with freeze_time("2026-05-01 12:00:00") as frozen, tracer.span("eval"):
        frozen.tick(2.5)

    assert records[0]["duration_s"] == pytest.approx(2.5)


def test_tracer_adds_each_span_to_the_stats_it_is_given(clock: FakeClock) -> None:
    stats = SpanStats()
    tracer = Tracer(lambda *span: None, stats=stats, clock=clock)

    with tracer.span("eval"):
        clock.tick(1.0)

    assert tracer.stats is stats
    assert stats.summary() == {"eval": {"count": 1, "total_s": 1.0, "mean_s": 1.0, "max_s": 1.0}}


def test_span_is_a_span_instance(tracer: Tracer) -> None:
    assert isinstance(tracer.span("eval"), Span)


class TestSpanStats:
    def test_summary_gives_count_total_mean_max_per_name(self) -> None:
        stats = SpanStats()

        for duration in (1.0, 2.0, 4.5):
            stats.add("eval", duration)
        stats.add("save", 0.1234567891)

        assert stats.summary() == {
            "eval": {"count": 3, "total_s": 7.5, "mean_s": 2.5, "max_s": 4.5},
            "save": {"count": 1, "total_s": 0.123457, "mean_s": 0.123457, "max_s": 0.123457},
        }

    def test_summary_is_empty_before_any_span(self) -> None:
        assert SpanStats().summary() == {}

    def test_adds_from_many_threads_are_all_counted(self) -> None:
        stats = SpanStats()

        def add_many() -> None:
            for _ in range(5_000):
                stats.add("step", 0.5)

        threads = [threading.Thread(target=add_many) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

        assert stats.summary() == {
            "step": {"count": 40_000, "total_s": 20_000.0, "mean_s": 0.5, "max_s": 0.5}
        }

    def test_max_is_the_largest_across_threads(self) -> None:
        stats = SpanStats()
        stats.add("step", 1.0)
        thread = threading.Thread(target=stats.add, args=("step", 3.0))
        thread.start()
        thread.join()
        stats.add("step", 2.0)

        assert stats.summary()["step"] == {
            "count": 3,
            "total_s": 6.0,
            "mean_s": 2.0,
            "max_s": 3.0,
        }
