"""`runlines import tensorboard` of a scalar event file against TensorBoard's own
`EventAccumulator` loading it, side by side.

Run: python tests/benchmarks/bench_tb_import.py [--scalars N] [--reps R] [--quick]

One event file of N scalars (default 1,000,000; --quick 100,000), one tag each in four tags,
written once by tensorboard's own `EventFileWriter`. Each repetition times, in one process and
alternating which goes first, `EventAccumulator(path, size_guidance={"scalars": 0}).Reload()`
(every scalar kept) and `import_tensorboard(path, out)` into a fresh folder (the log written
and renamed into place). Target: the import at least as fast as the accumulator (ratio at
most 1.0x). The table gives the median seconds and the median and range of the ratios.
Needs `pip install 'runlines[import-tensorboard]'`.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from runlines.importers.tensorboard import import_tensorboard

TAGS = ("train/loss", "train/lr", "eval/acc", "grad_norm")


def write_events(folder: Path, scalars: int) -> None:
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(folder), max_queue_size=1000)
    for index in range(scalars):
        value = summary_pb2.Summary.Value(tag=TAGS[index % 4], simple_value=index * 1e-3)
        event = event_pb2.Event(
            wall_time=1.7e9 + index * 0.01,
            step=index // 4,
            summary=summary_pb2.Summary(value=[value]),
        )
        writer.add_event(event)
    writer.close()


def accumulate(folder: Path) -> float:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    began = time.perf_counter()
    accumulator = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    accumulator.Reload()
    spent = time.perf_counter() - began
    assert sum(len(accumulator.Scalars(tag)) for tag in TAGS) > 0
    return spent


def imported(folder: Path, out: Path) -> float:
    shutil.rmtree(out, ignore_errors=True)
    began = time.perf_counter()
    (result,) = import_tensorboard(folder, out)
    spent = time.perf_counter() - began
    assert result.written
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scalars", type=int, default=1_000_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="100,000 scalars")
    args = parser.parse_args()
    scalars = 100_000 if args.quick else args.scalars
    with tempfile.TemporaryDirectory() as tmp:
        folder, out = Path(tmp) / "tb", Path(tmp) / "runs"
        write_events(folder, scalars)
        ours: list[float] = []
        theirs: list[float] = []
        for rep in range(args.reps):
            if rep % 2:
                ours.append(imported(folder, out))
                theirs.append(accumulate(folder))
            else:
                theirs.append(accumulate(folder))
                ours.append(imported(folder, out))
        size = sum(p.stat().st_size for p in folder.iterdir())
    ratios = [a / b for a, b in zip(ours, theirs, strict=True)]
    print(f"## TensorBoard import: {scalars:,} scalars ({size / 1e6:.0f} MB), {args.reps} reps\n")
    print("| import (s) | EventAccumulator load (s) | import / load | target |")
    print("|---|---|---|---|")
    print(
        f"| {statistics.median(ours):.2f} | {statistics.median(theirs):.2f} | "
        f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) | <= 1.0x |"
    )


if __name__ == "__main__":
    main()
