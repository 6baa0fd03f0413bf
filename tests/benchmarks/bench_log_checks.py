"""Run.log with the vocabulary and redaction checks on, against a run with both off.

Run: python tests/benchmarks/bench_log_checks.py [--events N] [--reps R]

Both runs write to a file only (stdout=False), interleaved, R repetitions; the table gives the
median us/event and the median of per-repetition ratios, for a numeric record (the steady
training loop: the checks are cached per event and key set) and for a record with a string
value (redaction scans every string).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from runlines import Run
from runlines.fields import Vocabulary

Loop = Callable[[Run, int], None]


def numeric(run: Run, n: int) -> None:
    log = run.log
    for step in range(n):
        log("train_step", epoch=3, step=step, loss=0.412, lr=3e-4)


def with_string(run: Run, n: int) -> None:
    log = run.log
    for step in range(n):
        log("eval", epoch=3, step=step, accuracy=0.91, split="validation")


def measure(loop: Loop, events: int, reps: int, tmp: Path) -> tuple[list[float], list[float]]:
    """Return us/event with checks on and off, interleaved."""
    bare_vocabulary = Vocabulary(fields={}, aliases={})
    on: list[float] = []
    off: list[float] = []
    for rep in range(reps):
        for label, options in (("on", {}), ("off", {"redact": False, "fields": bare_vocabulary})):
            run = Run(f"{label}{rep}", tmp, stdout=False, **options)  # type: ignore[arg-type]
            loop(run, 500)  # first plan and caches
            start = time.perf_counter()
            loop(run, events)
            (on if label == "on" else off).append((time.perf_counter() - start) / events * 1e6)
            run.close()
    return on, off


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=30_000)
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="runlines-bench-checks-"))
    print("| record | checks on us/event | checks off us/event | on / off (median ratio) |")
    print("|---|---:|---:|---:|")
    for name, loop in (("numbers only", numeric), ("with a string value", with_string)):
        on, off = measure(loop, args.events, args.reps, tmp)
        ratio = statistics.median(a / b for a, b in zip(on, off, strict=True))
        print(
            f"| {name} | {statistics.median(on):.2f} | {statistics.median(off):.2f} | {ratio:.2f} |"
        )


if __name__ == "__main__":
    main()
