"""Console capture: what `Run(..., console_capture=True)` costs per printed line.

Run: python tests/benchmarks/bench_console.py [--lines N] [--reps R]

A job prints N lines inside an open run, stdout redirected to a temporary file as a scheduler's
log would take it, without capture ("off") and with it ("capture"), interleaved, R repetitions.
Three ways to print: print() (block-buffered, as Python buffers a file), print(flush=True) (one
write per line, the worst case for the tee, woken per line), and os.write(1, ...). Two times per
contender: the job's own loop (what training pays: a write into the tee's pipe), and the loop
plus close() (close waits for the tee to write everything to the terminal and the side file).
The tables give median us/line and the median of the per-repetition ratios to "off".
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _common import stdout_to_temp_file

from runlines import Run

LINE = "epoch 3 step 1200 loss 0.412 lr 0.0003 grad_norm 1.25 tokens/s 51234"


def _print(n: int) -> None:
    for step in range(n):
        print(LINE, step)


def _print_flush(n: int) -> None:
    for step in range(n):
        print(LINE, step, flush=True)


def _os_write(n: int) -> None:
    data = (LINE + "\n").encode()
    for _ in range(n):
        os.write(1, data)


WAYS: dict[str, Callable[[int], None]] = {
    "print()": _print,
    "print(flush=True)": _print_flush,
    "os.write(1, ...)": _os_write,
}


Times = tuple[float, float, float]


def once(directory: Path, way: Callable[[int], None], lines: int, capture: bool) -> Times:
    """Return (loop, loop + close) in us per line, and the run's opening in ms."""
    opening = time.perf_counter()
    run = Run("bench", directory, stdout=False, system=False, console_capture=capture)
    way(100)  # warm up
    start = time.perf_counter()
    way(lines)
    looped = time.perf_counter()
    run.close()
    done = time.perf_counter()
    per_line = (looped - start) / lines * 1e6, (done - start) / lines * 1e6
    return (*per_line, (start - opening) * 1e3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=50_000)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as folder, stdout_to_temp_file():
        for number, (name, way) in enumerate(WAYS.items()):
            times: dict[bool, list[Times]] = {False: [], True: []}
            for rep in range(args.reps):
                for capture in (False, True):
                    directory = Path(folder, f"{number}-{rep}-{capture}")
                    times[capture].append(once(directory, way, args.lines, capture))
            rows.append((name, times))
    python = sys.version.split()[0]
    print(f"{args.lines:,} lines per repetition, {args.reps} repetitions, Python {python}\n")
    print(
        "| print with | off us/line | capture us/line | ratio (loop) "
        "| off, with close | capture, with close | ratio (with close) |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, times in rows:
        cells = [name]
        ratios = []
        for part in (0, 1):
            off = [t[part] for t in times[False]]
            on = [t[part] for t in times[True]]
            ratio = statistics.median(b / a for a, b in zip(off, on, strict=True))
            cells += [f"{statistics.median(off):.2f}", f"{statistics.median(on):.2f}"]
            ratios.append(f"{ratio:.2f}x")
        print(f"| {' | '.join(cells[:3])} | {ratios[0]} | {' | '.join(cells[3:])} | {ratios[1]} |")
    print("\n| Run(...) opens in | off | capture |\n|---|---|---|")
    off_ms = statistics.median(t[2] for _n, times in rows for t in times[False])
    on_ms = statistics.median(t[2] for _n, times in rows for t in times[True])
    print(f"| ms (median) | {off_ms:.1f} | {on_ms:.1f} |")


if __name__ == "__main__":
    main()
