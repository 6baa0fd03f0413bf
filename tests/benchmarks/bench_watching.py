"""Watching a live run: what system sampling, the stall watch and NaN alarms cost a log call.

Run: python tests/benchmarks/bench_watching.py [--events N] [--reps R]

Run.log writes the same train_step record to stdout (redirected to a temporary file) and the
file, with the watching options off ("before"), at their defaults, and with the background
thread as busy as it gets (a system sample every 0.1 s, a stall check every 0.1 s). The
contenders run interleaved, R repetitions; the tables give median us/event and the median of
the per-repetition ratios to "before". A second table does the same for a record with a NaN
(the careful path, where the alarm's check lives): on_nonfinite="ignore" against "warn".
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import stdout_to_temp_file

import runlines._writer
from runlines import Run

Loop = Callable[[int], None]


def contender(
    directory: Path, nan: bool = False, **options: Any
) -> tuple[Loop, Callable[[], None]]:
    run = Run("bench", directory, console="json", **options)
    log = run.log
    loss = math.nan if nan else 0.412

    def loop(n: int) -> None:
        for step in range(n):
            log("train_step", epoch=3, step=step, loss=loss, lr=3e-4)

    return loop, run.close


def measure(makers: dict[str, Callable[[], tuple[Loop, Callable[[], None]]]], events: int,
            reps: int) -> dict[str, list[float]]:  # fmt: skip
    results: dict[str, list[float]] = {name: [] for name in makers}
    for _ in range(reps):
        for name, make in makers.items():
            loop, close = make()
            loop(1000)  # warm up: plans, caches, the first alarm
            start = time.perf_counter()
            loop(events)
            results[name].append((time.perf_counter() - start) / events * 1e6)
            close()
    return results


def table(title: str, results: dict[str, list[float]]) -> None:
    base = next(iter(results.values()))
    print(f"### {title}")
    print()
    print("| contender | us/event (median) | contender / first (median ratio) |")
    print("|---|---:|---:|")
    for name, times in results.items():
        ratio = statistics.median(t / b for t, b in zip(times, base, strict=True))
        print(f"| {name} | {statistics.median(times):.2f} | {ratio:.3f} |")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="runlines-bench-watch-"))
    hot = {
        "before: system=False, no stall watch": lambda: contender(tmp / "a", system=False),
        "defaults: system=10.0 s": lambda: contender(tmp / "b"),
        "busy: system=0.1 s, stall_after=1.0 s": lambda: contender(
            tmp / "c", system=0.1, stall_after=1.0
        ),
    }
    nan = {
        'NaN record, on_nonfinite="ignore"': lambda: contender(
            tmp / "d", nan=True, system=False, on_nonfinite="ignore"
        ),
        'NaN record, on_nonfinite="warn" (alarmed once)': lambda: contender(
            tmp / "e", nan=True, system=False
        ),
    }
    with stdout_to_temp_file(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hot_results = measure(hot, args.events, args.reps)
        nan_results = measure(nan, args.events // 5, args.reps)
    fast = "on" if runlines._writer._CWriter is not None else "off"
    print(f"C fast path of Run.log: {fast}; {args.events} events x {args.reps} repetitions")
    print()
    table("Run.log with the watching options (numbers only: the C fast path)", hot_results)
    table("Run.log of a record with a NaN (the careful path)", nan_results)


if __name__ == "__main__":
    main()
