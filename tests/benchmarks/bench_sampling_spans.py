"""Cost of a dropped sampled call and of a span, next to a bare function call.

Run: python tests/benchmarks/bench_sampling_spans.py  (prints a markdown table)
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import tempfile
import timeit
from collections.abc import Callable

from runlines.sampling import make_sampler
from runlines.spans import Tracer

CALLS = 100_000  # per timing
REPEATS = 15  # timings per case, interleaved across cases; the median is reported


def bare_call() -> Callable[[], None]:
    def f(**kw: object) -> None:
        pass

    def case() -> None:
        f(epoch=3, step=1200, loss=0.412, lr=3e-4)

    return case


def dropped_offer() -> Callable[[], None]:
    """A dict get then offer(), as Run.log() does; every=100 drops 99 calls in 100."""
    samplers = {"batch": make_sampler(every=100)}

    def log(event: str, **fields: object) -> None:
        sampler = samplers.get(event)
        if sampler is not None:
            sampler.offer(fields)

    def case() -> None:
        log("batch", epoch=3, step=1200, loss=0.412, lr=3e-4)

    return case


def span_noop_emit() -> Callable[[], None]:
    tracer = Tracer(lambda *span: None)

    def case() -> None:
        with tracer.span("eval"):
            pass

    return case


def noop_with() -> Callable[[], None]:
    class Nothing:
        __slots__ = ()

        def __enter__(self) -> None:
            pass

        def __exit__(self, *exc: object) -> None:
            pass

    def case() -> None:
        with Nothing():
            pass

    return case


def run_cases(tmp: str, stack: contextlib.ExitStack) -> dict[str, Callable[[], None]]:
    """The full Run cases, when Run has sample() and span() (after integration)."""
    import runlines

    run_cls = getattr(runlines, "Run", None)
    if run_cls is None or not (hasattr(run_cls, "sample") and hasattr(run_cls, "span")):
        return {}
    run = stack.enter_context(run_cls("bench", tmp, stdout=False))
    run.sample("batch", every=100)

    def log_dropped() -> None:
        run.log("batch", epoch=3, step=1200, loss=0.412, lr=3e-4)

    def log_one() -> None:
        run.log("train_step", epoch=3, step=1200, loss=0.412, lr=3e-4)

    def log_span_record() -> None:
        run.log("span", name="eval", duration_s=0.000123456789, status="ok")

    def run_span() -> None:
        with run.span("eval"):
            pass

    return {
        "`run.log()` of a dropped sampled event": log_dropped,
        "`run.log()` written (L)": log_one,
        "`run.log()` of a span's record": log_span_record,
        "`with run.span()` (written)": run_span,
    }


def measure(cases: dict[str, Callable[[], None]]) -> dict[str, float]:
    """Median microseconds per call, the cases interleaved so drift hits all alike."""
    times: dict[str, list[float]] = {label: [] for label in cases}
    for _ in range(REPEATS):
        for label, case in cases.items():
            seconds = timeit.timeit(case, number=CALLS)
            times[label].append(seconds / CALLS * 1e6)
    return {label: statistics.median(samples) for label, samples in times.items()}


def main() -> int:
    bare = "bare `f(**kw)` call, 4 kwargs"
    cases = {
        bare: bare_call(),
        "dict get + `offer()` dropped (every=100)": dropped_offer(),
        "`with` a no-op context manager": noop_with(),
        "`with tracer.span()`, no-op emit": span_noop_emit(),
    }
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        cases.update(run_cases(tmp, stack))
        medians = measure(cases)
    print(f"Python {sys.version.split()[0]}, median of {REPEATS} x {CALLS:,} calls\n")
    print("| case | us/call | x bare |")
    print("|---|---:|---:|")
    for label, us in medians.items():
        print(f"| {label} | {us:.3f} | {us / medians[bare]:.2f} |")
    written = medians.get("`run.log()` written (L)")
    if written:
        span = medians["`with run.span()` (written)"]
        machinery = medians["`with tracer.span()`, no-op emit"]
        print(f"\n`with run.span()` / `run.log()` = {span / written:.2f} (target <= 1.5)")
        print(f"span machinery (a span with a no-op emit) / L = {machinery / written:.2f}")
        print(
            "(a span writes its own record on a fast path, so logging a span-like record through "
            "run.log(), which checks its strings, costs more than the span)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
