"""runs() over 1,000 finished runs against load() of all their records, side by side.

Prints the seconds of each (best of three, in one process) and their ratio. runs() builds one
row per run from its records (RunSummary); load() builds a frame of every record.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import orjson

import runlines

RUNS = 1_000
STEPS = 200


def _write(folder: Path) -> None:
    for i in range(RUNS):
        lines = [{"ts": 1.0, "event": "run_start", "run": f"r{i}", "attempt": 1,
                  "config": {"lr": 10.0**-(i % 5), "seed": i}}]  # fmt: skip
        for step in range(STEPS):
            lines.append({"ts": 2.0 + step, "event": "train_step", "run": f"r{i}", "step": step,
                          "loss": 1.0 / (step + 1), "lr": 0.1})  # fmt: skip
            if step % 50 == 49:
                lines.append({"ts": 2.5 + step, "event": "eval", "run": f"r{i}", "step": step,
                              "loss": 1.5 / (step + 1), "accuracy": step / STEPS})  # fmt: skip
        lines.append({"ts": 3.0 + STEPS, "event": "run_end", "run": f"r{i}", "status": "ok"})
        Path(folder, f"r{i}.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in lines))


def _best_of(work: Callable[[], object], repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        _write(Path(folder))
        table = runlines.runs(folder)
        assert len(table) == RUNS, len(table)
        ours = _best_of(lambda: runlines.runs(folder))
        frame = _best_of(lambda: runlines.load(folder))
        records = RUNS * (STEPS + STEPS // 50 + 2)
        print(f"{RUNS:,} runs, {records:,} records: runs() {ours:.3f} s, load() {frame:.3f} s,")
        print(f"ratio runs()/load() {ours / frame:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
