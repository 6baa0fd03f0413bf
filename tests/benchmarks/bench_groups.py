"""compare(group_by=...) against compare() without grouping, over the same runs, side by side.

Target: grouped at most 1.5x ungrouped (issue #28). Both read every record of every run;
the grouped call also reads each log's run_start lines for its config.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson

import runlines


def _write(folder: Path, runs: int, steps: int) -> None:
    for i in range(runs):
        name = f"r{i}"
        config = {"lr": 10.0 ** -(i % 5), "batch_size": 16 << (i % 2), "seed": i}
        head = {"ts": 1.0, "event": "run_start", "run": name, "attempt": 1, "config": config}
        lines = [orjson.dumps(head)]
        lines += [
            orjson.dumps(
                {
                    "ts": 2.0 + s,
                    "event": "train_step",
                    "run": name,
                    "step": s,
                    "loss": 1.0 / (s + 1) + i / 1000,
                }
            )
            for s in range(steps)
        ]
        end = {"ts": 3.0 + steps, "event": "run_end", "run": name, "status": "ok"}
        lines.append(orjson.dumps(end))
        Path(folder, f"{name}.jsonl").write_bytes(b"\n".join(lines) + b"\n")


def _timed(work: object) -> float:
    start = time.perf_counter()
    work()  # type: ignore[operator]
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="20 runs x 20,000 records")
    args = parser.parse_args()
    runs, steps = (20, 20_000) if args.quick else (args.runs, args.steps)
    with tempfile.TemporaryDirectory() as folder:
        _write(Path(folder), runs, steps)
        grouped = runlines.compare(folder, metric="loss", group_by=["lr", "batch_size"])
        assert grouped.attrs["group_by"] == ["lr", "batch_size"]
        ratios, plain_s, group_s = [], [], []
        for rep in range(args.reps):
            pair = [
                lambda: runlines.compare(folder, metric="loss"),
                lambda: runlines.compare(folder, metric="loss", group_by=["lr", "batch_size"]),
            ]
            order = pair if rep % 2 == 0 else pair[::-1]
            first, second = (_timed(work) for work in order)
            plain, group = (first, second) if rep % 2 == 0 else (second, first)
            plain_s.append(plain)
            group_s.append(group)
            ratios.append(group / plain)
    print(f"### compare(group_by=...) over {runs} runs x {steps:,} records\n")
    print("| call | median s | ratio to ungrouped (median, range) |")
    print("|---|---|---|")
    print(f"| compare(metric=...) | {statistics.median(plain_s):.2f} | 1.00 |")
    low, high = min(ratios), max(ratios)
    print(
        f"| compare(metric=..., group_by=[lr, batch_size]) | {statistics.median(group_s):.2f} "
        f"| {statistics.median(ratios):.2f} ({low:.2f}-{high:.2f}) |"
    )
    print("\ntarget: at most 1.5x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
