"""`runlines.report` of many runs against `runs()` plus `compare()` over the same logs.

Writes RUNS logs of RECORDS train_step records each (step, loss with a spike and a NaN, lr),
then times, in one process, interleaved, each side REPS times:

- `runs()` plus `compare(metric="loss")`: what a user would call to see the same table and chart;
- `report(metric="loss")`: the same table and chart, downsampled, written to one HTML file;
- `report()`: every chart (loss and lr: one `compare()` each).

Prints the seconds of each (the median), the ratios to runs() + compare, and the file sizes.
The target (issue #28): the report of 100 x 100k records in at most 2x runs() + compare, in at
most 10 MB.

`python tests/benchmarks/bench_report.py [--runs 100] [--records 100000] [--reps 1] [--quick]`
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import orjson

import runlines
from runlines._encoding import encode_line

T0 = 1_767_225_600.0


def _write(folder: Path, runs: int, records: int) -> None:
    for i in range(runs):
        run = f"r{i:03d}"
        config = {"lr": (0.1, 0.01, 0.001)[i % 3], "seed": i}
        lines = [orjson.dumps({"ts": T0, "event": "run_start", "run": run, "attempt": 1,
                               "config": config})]  # fmt: skip
        spike, nan = (i * 7919) % records, (i * 104729 + 13) % records
        for step in range(records):
            loss = 40.0 if step == spike else 2.0 / (1 + step * config["lr"]) + (step % 17) * 1e-3
            record = {"ts": T0 + step * 0.01, "event": "train_step", "run": run, "step": step,
                      "loss": math.nan if step == nan else loss, "lr": config["lr"]}  # fmt: skip
            # NaN as runlines writes it (orjson would write null)
            lines.append(encode_line(record)[:-1] if step == nan else orjson.dumps(record))
        lines.append(orjson.dumps({"ts": T0 + records * 0.01, "event": "run_end", "run": run,
                                   "status": "ok"}))  # fmt: skip
        (folder / f"{run}.jsonl").write_bytes(b"\n".join(lines) + b"\n")


def _seconds(work: Callable[[], object]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="--runs 20 --records 20000 --reps 3")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.records, args.reps = 20, 20_000, 3
    with tempfile.TemporaryDirectory() as name:
        folder, out = Path(name, "runs"), Path(name, "out")
        folder.mkdir()
        out.mkdir()
        _write(folder, args.runs, args.records)
        for log in folder.iterdir():  # every side reads the logs from the page cache
            log.read_bytes()
        runlines.report(folder / "r000.jsonl", path=out / "warm.html")  # the first imports
        sides: dict[str, Callable[[], object]] = {
            "runs() + compare(loss)": lambda: (
                runlines.runs(folder),
                runlines.compare(folder, metric="loss"),
            ),
            "report(metric=loss)": lambda: runlines.report(
                folder, path=out / "loss.html", metric="loss"
            ),
            "report() (loss, lr)": lambda: runlines.report(folder, path=out / "all.html"),
        }
        times: dict[str, list[float]] = {side: [] for side in sides}
        for _ in range(args.reps):  # interleaved: a slow moment of the machine hits every side
            for side, work in sides.items():
                times[side].append(_seconds(work))
        _print(args, times, {"report(metric=loss)": out / "loss.html",
                             "report() (loss, lr)": out / "all.html"})  # fmt: skip
    return 0


def _print(args: argparse.Namespace, times: dict[str, list[float]], files: dict[str, Path]) -> None:
    base = statistics.median(times["runs() + compare(loss)"])
    print(f"### report of {args.runs} runs x {args.records:,} records ({args.reps} reps)\n")
    print("| side | s (median) | ratio to runs() + compare | file |")
    print("|---|---|---|---|")
    for side, seconds in times.items():
        median = statistics.median(seconds)
        size = f"{files[side].stat().st_size / 1e6:.2f} MB" if side in files else ""
        print(f"| {side} | {median:.2f} | {median / base:.2f}x | {size} |")
    print("\ntarget: report(metric=loss) at most 2x runs() + compare, its file at most 10 MB")


if __name__ == "__main__":
    sys.exit(main())
