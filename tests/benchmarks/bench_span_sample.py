"""A dropped sampled event against a bare call, and a span against one log() call, side by side.

Run: python tests/benchmarks/bench_span_sample.py [--fast-calls N] [--calls M] [--reps R] [--quick]

(a) The whole `run.log("batch", ...)` call under `run.sample("batch", every=1000)` (999 calls
in 1000 dropped; the kept one is written, and its cost is spread over the 1000) against a bare
Python call with the same arguments, `bare("batch", epoch=3, step=step, loss=0.412, lr=3e-4)`
to `def bare(event, **fields): pass`. Target: at most 3x.

(b) `with run.span("step"): pass` (enter, exit and the span record it writes) against one
`run.log("train_step", epoch=3, step=step, loss=0.412, lr=3e-4)`. Target: at most 1.5x. For
scale, the span is also set against `run.log()` of a record like the span's own.

Each comparison runs with `stdout=False` (the file only) and with the default stdout sink, fd 1
redirected to a temporary file (JSON, as under a scheduler); the table is printed to the real
stdout at the end. In each repetition the two sides alternate in chunks in one run; the table
gives the median us/call and the median and range of the per-repetition ratios.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import stdout_to_temp_file

from runlines import Run, _native

Loop = Callable[[int], None]


def bare(event: str, **fields: Any) -> None:
    """The floor of a dropped call: a Python call with the same arguments, doing nothing."""


def bare_loop() -> Loop:
    def loop(n: int) -> None:
        for step in range(n):
            bare("batch", epoch=3, step=step, loss=0.412, lr=3e-4)

    return loop


def dropped_loop(run: Run) -> Loop:
    log = run.log

    def loop(n: int) -> None:
        for step in range(n):
            log("batch", epoch=3, step=step, loss=0.412, lr=3e-4)

    return loop


def log_loop(run: Run) -> Loop:
    log = run.log

    def loop(n: int) -> None:
        for step in range(n):
            log("train_step", epoch=3, step=step, loss=0.412, lr=3e-4)

    return loop


def span_record_loop(run: Run) -> Loop:
    """run.log() of the record a span writes: name, duration_s, status."""
    log = run.log

    def loop(n: int) -> None:
        for _ in range(n):
            log("span", name="step", duration_s=0.000123, status="ok")

    return loop


def span_loop(run: Run) -> Loop:
    span = run.span

    def loop(n: int) -> None:
        for _ in range(n):
            with span("step"):
                pass

    return loop


@dataclass(frozen=True)
class Comparison:
    """One row: a measured loop, its baseline, how many calls each, and the target ratio."""

    measured: str
    baseline: str
    loops: Callable[[Run], tuple[Loop, Loop]]
    fast: bool  # calls of well under a microsecond: time more of them
    target: float | None


COMPARISONS = [
    Comparison(
        '`run.log("batch", ...)` dropped (`every=1000`)',
        "bare call, same arguments",
        lambda run: (dropped_loop(run), bare_loop()),
        True,
        3.0,
    ),
    Comparison(
        '`with run.span("step")`',
        '`run.log("train_step", ...)`',
        lambda run: (span_loop(run), log_loop(run)),
        False,
        1.5,
    ),
    Comparison(
        '`with run.span("step")`',
        "`run.log()` of a span-like record",
        lambda run: (span_loop(run), span_record_loop(run)),
        False,
        None,
    ),
]

SINKS = {"file only (`stdout=False`)": False, "file + stdout (redirected)": True}


@dataclass
class Samples:
    """us/call of both sides and their ratio, one entry per repetition."""

    measured: list[float] = field(default_factory=list)
    baseline: list[float] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)


Key = tuple[str, int]  # (sinks, index in COMPARISONS)


def measure(fast_calls: int, calls: int, reps: int, chunks: int, tmp: Path) -> dict[Key, Samples]:
    """Return the samples per (sinks, comparison), the comparisons interleaved per repetition."""
    samples = {(sinks, i): Samples() for sinks in SINKS for i in range(len(COMPARISONS))}
    runs = {sinks: Run(f"bench-{i}", tmp, stdout=on) for i, (sinks, on) in enumerate(SINKS.items())}
    try:
        for run in runs.values():
            run.sample("batch", every=1000)
        for _ in range(reps):
            for sinks, run in runs.items():
                for i, comparison in enumerate(COMPARISONS):
                    n = fast_calls if comparison.fast else calls
                    one = samples[(sinks, i)]
                    measured, baseline = time_pair(*comparison.loops(run), n, chunks)
                    one.measured.append(measured)
                    one.baseline.append(baseline)
                    one.ratios.append(measured / baseline)
    finally:
        for run in runs.values():
            run.close()
    return samples


def time_pair(measured: Loop, baseline: Loop, n: int, chunks: int) -> tuple[float, float]:
    """Return us/call of both loops, warmed up, then alternating in *chunks* chunks of n calls."""
    measured(max(n // 20, 10))
    baseline(max(n // 20, 10))
    per_chunk = max(n // chunks, 1)
    total_measured = total_baseline = 0.0
    for _ in range(chunks):
        total_measured += _timed(measured, per_chunk)
        total_baseline += _timed(baseline, per_chunk)
    done = per_chunk * chunks
    return total_measured / done * 1e6, total_baseline / done * 1e6


def _timed(loop: Loop, n: int) -> float:
    start = time.perf_counter()
    loop(n)
    return time.perf_counter() - start


def print_table(samples: dict[Key, Samples], reps: int) -> None:
    """Print one row per (sinks, comparison): us/call, ratio, its range and the target."""
    fast = "on" if _native.speedups is not None else "off (RUNLINES_NO_SPEEDUPS=1 or not built)"
    print(
        f"Python {sys.version.split()[0]}; C fast paths: {fast}; {reps} repetitions, both sides "
        "alternating in one run; ratio = measured / baseline per repetition, median and range."
    )
    print()
    print("| sinks | measured | us/call | baseline | us/call | ratio | range | target |")
    print("|---|---|---:|---|---:|---:|---:|---|")
    for sinks in SINKS:
        for i, comparison in enumerate(COMPARISONS):
            one = samples[(sinks, i)]
            ratio = statistics.median(one.ratios)
            target = "(for scale)"
            if comparison.target is not None:
                verdict = "met" if ratio <= comparison.target else "NOT met"
                target = f"<= {comparison.target:g}x: {verdict}"
            print(
                f"| {sinks} | {comparison.measured} | {statistics.median(one.measured):.3f} | "
                f"{comparison.baseline} | {statistics.median(one.baseline):.3f} | "
                f"{ratio:.2f} | {min(one.ratios):.2f}-{max(one.ratios):.2f} | {target} |"
            )


def main() -> None:
    """Measure with stdout sent to a temporary file, then print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fast-calls", type=int, help="calls per side for (a) (500,000)")
    parser.add_argument("--calls", type=int, help="calls per side for (b) (50,000)")
    parser.add_argument("--reps", type=int, help="repetitions (9)")
    parser.add_argument("--chunks", type=int, default=5, help="alternations per repetition")
    parser.add_argument("--quick", action="store_true", help="defaults 100,000, 10,000, 5 reps")
    args = parser.parse_args()
    fast_calls = args.fast_calls or (100_000 if args.quick else 500_000)
    calls = args.calls or (10_000 if args.quick else 50_000)
    reps = args.reps or (5 if args.quick else 9)
    with tempfile.TemporaryDirectory(prefix="runlines-bench-") as tmp, stdout_to_temp_file():
        samples = measure(fast_calls, calls, reps, args.chunks, Path(tmp))
    print_table(samples, reps)


if __name__ == "__main__":
    main()
