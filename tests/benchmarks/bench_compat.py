"""`wandb.log` through the runlines drop-in against `Run.log` of the same record, and against
the real `wandb.log` in offline mode, side by side.

Run: python tests/benchmarks/bench_compat.py [--calls N] [--reps R] [--quick]

Each call is `wandb.log({"train/loss": x, "train/lr": y})`, the module's function, as
training code calls it (one commit: one `train` record with `step`);
`Run.log("train", step=i, loss=x, lr=y)` writes the same record. Target: the drop-in at most
2x `Run.log`, and faster than the real wandb offline (measured when wandb is installed: its
service process runs, as in a real job). Both runlines sides write the file only
(`stdout=False`, as the drop-in does). In each repetition the sides alternate in one process;
the table gives the median us/call and the median and range of the per-repetition ratios.
The drop-in is timed against `Run.log` before the real wandb starts (its service and its
threads in this process would slow whichever side runs while they do), then against it.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import runlines.compat.wandb as dropin
from runlines import Run
from runlines.fields import Vocabulary

Loop = Callable[[int, int], None]


def run_log_loop(directory: Path) -> tuple[Loop, Callable[[], None]]:
    run = Run("plain", directory, stdout=False, vocabulary=Vocabulary(aliases={}))

    def loop(start: int, n: int) -> None:
        for step in range(start, start + n):
            run.log("train", step=step, loss=0.412, lr=3e-4)

    return loop, run.close


def wandb_loop(module: Any, directory: Path, **init: Any) -> tuple[Loop, Callable[[], None]]:
    run = module.init(project="bench", dir=str(directory), **init)

    def loop(start: int, n: int) -> None:
        log = module.log
        for _ in range(n):
            log({"train/loss": 0.412, "train/lr": 3e-4})

    return loop, run.finish


def timed(loop: Loop, start: int, n: int) -> float:
    began = time.perf_counter()
    loop(start, n)
    return (time.perf_counter() - began) / n * 1e6


def compare(sides: dict[str, Loop], calls: int, reps: int) -> dict[str, list[float]]:
    """Return us/call of each side per repetition, the sides alternating in chunks."""
    times: dict[str, list[float]] = {name: [] for name in sides}
    chunk = max(1, calls // 10)
    for rep in range(reps):
        spent = dict.fromkeys(sides, 0.0)
        for part in range(10):
            for name, loop in sides.items():
                spent[name] += timed(loop, (rep * 10 + part) * chunk, chunk) / 10
        for name in sides:
            times[name].append(spent[name])
    return times


def ratio_row(label: str, over: list[float], under: list[float], target: str) -> str:
    ratios = [a / b for a, b in zip(over, under, strict=True)]
    return (
        f"| {label} | {statistics.median(over):.2f} | {statistics.median(under):.2f} | "
        f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) | {target} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    calls, reps = (2_000, 3) if args.quick else (args.calls, args.reps)
    with tempfile.TemporaryDirectory() as folder:
        directory = Path(folder)
        plain, close_plain = run_log_loop(directory)
        ours, close_ours = wandb_loop(dropin, directory / "dropin")
        times = compare({"run": plain, "dropin": ours}, calls, reps)
        close_plain()
        if importlib.util.find_spec("wandb") is not None:
            os.environ.setdefault("WANDB_SILENT", "true")
            import wandb

            real, close_real = wandb_loop(wandb, directory / "real", mode="offline")
            against = compare({"dropin": ours, "real": real}, calls, reps)
            close_real()
        close_ours()
    print(f"wandb.log of one 2-value record, {calls} calls x {reps} reps (us/call)\n")
    print("| comparison | side A us | side B us | A / B (range) | target |")
    print("|---|---|---|---|---|")
    print(ratio_row("drop-in wandb.log / Run.log", times["dropin"], times["run"], "<= 2x"))
    if importlib.util.find_spec("wandb") is not None:
        print(
            ratio_row(
                "drop-in / real wandb.log offline", against["dropin"], against["real"], "< 1x"
            )
        )
    else:
        print("| drop-in / real wandb.log offline | - | - | wandb not installed | < 1x |")


if __name__ == "__main__":
    main()
