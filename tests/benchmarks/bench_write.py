"""Write path: Run.log against the seed's helper and the os.write floor, side by side.

Run: python tests/benchmarks/bench_write.py [--events N] [--reps R]

Every contender writes the same train_step record to stdout and to a file, flushed per line.
Stdout is redirected to a temporary file for the measurement (all contenders share it), and the
table is printed to the real stdout at the end. Contenders run interleaved, R repetitions; the
table gives the median us/event and the median of the per-repetition ratios. Run.log is
measured on its C fast path (when built) and on its pure-Python path, in the same run.

Two more records, each against its own reference in the same repetitions: the same record with
one short string field (split="train") against the numbers-only record (target: at most 1.3x),
and a record whose loss is a 0-d torch tensor against the seed helper calling loss.item()
(target: at most 0.6x). Redaction stays on in every Run. A run named 'nullspace' on the pure
path checks that a name holding "null" costs nothing more (its nulls are counted per plan), and
so does a span named 'nullify' against one named 'step' (a span's nulls are decided by its
duration, not by the text of its line).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import orjson

import runlines._writer
from runlines import Run

FIELDS = {"epoch": 3, "step": 1200, "loss": 0.412, "lr": 3e-4}


def runlines_pure(
    directory: Path, name: str = "bench"
) -> tuple[Callable[[int], None], Callable[[], None]]:
    """Run.log on its pure-Python path, as runlines runs when installed without a C compiler."""
    saved = runlines._writer._CWriter
    runlines._writer._CWriter = None
    try:
        return runlines_log(directory, name)
    finally:
        runlines._writer._CWriter = saved


def _seed_log(out_path: Path) -> tuple[Callable[..., None], Callable[[], None]]:
    """The seed document's helper, writing to stdout and to a file, flushed per line."""
    file = open(out_path, "a")  # noqa: SIM115 - closed by the returned closer

    def log(event: str, **fields: object) -> None:
        record = {"ts": time.time(), "event": event, "run": "baseline", **fields}
        line = json.dumps(record) + "\n"
        sys.stdout.write(line)
        sys.stdout.flush()
        file.write(line)
        file.flush()

    return log, file.close


def seed_helper(out_path: Path) -> tuple[Callable[[int], None], Callable[[], None]]:
    """The seed document's helper, as its users call it with numbers."""
    log, close = _seed_log(out_path)

    def loop(n: int) -> None:
        for step in range(n):
            log("train_step", epoch=3, step=step, loss=0.412, lr=3e-4)

    return loop, close


def seed_item(out_path: Path) -> tuple[Callable[[int], None], Callable[[], None]]:
    """The seed helper, as its users call it with a tensor loss: loss.item() first."""
    import torch

    log, close = _seed_log(out_path)
    loss = torch.tensor(0.412)

    def loop(n: int) -> None:
        for step in range(n):
            log("train_step", epoch=3, step=step, loss=loss.item(), lr=3e-4)

    return loop, close


def runlines_string(directory: Path) -> tuple[Callable[[int], None], Callable[[], None]]:
    """Run.log of the numbers-only record plus one short string field."""
    run = Run("bench", directory, console="json")
    log = run.log

    def loop(n: int) -> None:
        for step in range(n):
            log("train_step", epoch=3, step=step, loss=0.412, lr=3e-4, split="train")

    return loop, run.close


def runlines_tensor(directory: Path) -> tuple[Callable[[int], None], Callable[[], None]]:
    """Run.log with a 0-d torch tensor as the loss, as a training loop passes it."""
    import torch

    run = Run("bench", directory, console="json")
    log = run.log
    loss = torch.tensor(0.412)

    def loop(n: int) -> None:
        for step in range(n):
            log("train_step", epoch=3, step=step, loss=loss, lr=3e-4)

    return loop, run.close


def runlines_log(
    directory: Path, name: str = "bench"
) -> tuple[Callable[[int], None], Callable[[], None]]:
    """Run.log with the default sinks: stdout (JSON, not a terminal) and the file."""
    run = Run(name, directory, console="json")
    log = run.log

    def loop(n: int) -> None:
        for step in range(n):
            log("train_step", epoch=3, step=step, loss=0.412, lr=3e-4)

    return loop, run.close


def runlines_span_pure(
    directory: Path, span_name: str
) -> tuple[Callable[[int], None], Callable[[], None]]:
    """`with run.span(span_name): pass` on the pure-Python path, with the default sinks."""
    saved = runlines._writer._CWriter
    runlines._writer._CWriter = None
    try:
        run = Run("bench", directory, console="json")
    finally:
        runlines._writer._CWriter = saved
    span = run.span

    def loop(n: int) -> None:
        for _ in range(n):
            with span(span_name):
                pass

    return loop, run.close


def floor(out_path: Path) -> tuple[Callable[[int], None], Callable[[], None]]:
    """One pre-encoded line written with os.write to each of the two descriptors."""
    fd = os.open(out_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    line = orjson.dumps({"ts": time.time(), "event": "train_step", "run": "b", **FIELDS}) + b"\n"
    write = os.write

    def loop(n: int) -> None:
        for _ in range(n):
            write(fd, line)
            write(1, line)

    return loop, lambda: os.close(fd)


def orjson_write(out_path: Path) -> tuple[Callable[[int], None], Callable[[], None]]:
    """orjson.dumps of the record and one os.write per descriptor: no checks at all."""
    fd = os.open(out_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    dumps, write, now = orjson.dumps, os.write, time.time

    def loop(n: int) -> None:
        for step in range(n):
            record = {"ts": now(), "event": "train_step", "run": "b", "epoch": 3, "step": step}
            record.update(loss=0.412, lr=3e-4)
            line = dumps(record, option=orjson.OPT_APPEND_NEWLINE)
            write(fd, line)
            write(1, line)

    return loop, lambda: os.close(fd)


STRING = "runlines Run.log, + split='train'"
TENSOR = "runlines Run.log, loss a 0-d torch tensor"
SEED_ITEM = "seed helper, loss.item() of a 0-d torch tensor"
PURE = "runlines Run.log, pure Python (no C extension)"
NULLSPACE = "runlines Run.log, pure Python, a run named 'nullspace'"
SPAN = "runlines span 'step', pure Python"
NULLIFY = "runlines span 'nullify', pure Python"


def measure(events: int, reps: int) -> dict[str, list[float]]:
    """Return us/event per contender and repetition, interleaving contenders."""
    tmp = Path(tempfile.mkdtemp(prefix="runlines-bench-"))
    makers: dict[str, Callable[[], tuple[Callable[[int], None], Callable[[], None]]]] = {
        "runlines Run.log": lambda: runlines_log(tmp / "runs"),
        PURE: lambda: runlines_pure(tmp / "pure"),
        NULLSPACE: lambda: runlines_pure(tmp / "nullspace", "nullspace"),
        "seed helper (json.dumps + 2 writes + 2 flushes)": lambda: seed_helper(tmp / "seed.jsonl"),
        "orjson.dumps + os.write x2": lambda: orjson_write(tmp / "orjson.jsonl"),
        "floor: pre-encoded os.write x2": lambda: floor(tmp / "floor.jsonl"),
        STRING: lambda: runlines_string(tmp / "string"),
        TENSOR: lambda: runlines_tensor(tmp / "tensor"),
        SEED_ITEM: lambda: seed_item(tmp / "seed-item.jsonl"),
        SPAN: lambda: runlines_span_pure(tmp / "span", "step"),
        NULLIFY: lambda: runlines_span_pure(tmp / "nullify", "nullify"),
    }
    results: dict[str, list[float]] = {name: [] for name in makers}
    for _ in range(reps):
        for name, make in makers.items():
            loop, close = make()
            loop(1000)  # warm up: first plan, caches
            start = time.perf_counter()
            loop(events)
            results[name].append((time.perf_counter() - start) / events * 1e6)
            close()
    return results


def main() -> None:
    """Measure with stdout sent to a temporary file, then print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    real_stdout = os.dup(1)
    sink = tempfile.NamedTemporaryFile(prefix="runlines-bench-stdout-")  # noqa: SIM115
    sys.stdout.flush()
    os.dup2(sink.fileno(), 1)
    try:
        results = measure(args.events, args.reps)
    finally:
        sys.stdout.flush()
        os.dup2(real_stdout, 1)
    print_table(results)


def print_table(results: dict[str, list[float]]) -> None:
    """Print median us/event and median per-repetition ratios as a markdown table."""
    ours = results["runlines Run.log"]
    seed = results["seed helper (json.dumps + 2 writes + 2 flushes)"]
    floor_ = results["floor: pre-encoded os.write x2"]
    fast = (
        "on" if runlines._writer._CWriter is not None else "off (RUNLINES_NO_SPEEDUPS or not built)"
    )
    print(f"C fast path of Run.log: {fast}")
    print()
    print("| contender | us/event (median) | runlines / contender (median ratio) |")
    print("|---|---:|---:|")
    for name, times in results.items():
        ratio = statistics.median(o / t for o, t in zip(ours, times, strict=True))
        print(f"| {name} | {statistics.median(times):.2f} | {ratio:.2f} |")
    print()
    to_seed = statistics.median(o / s for o, s in zip(ours, seed, strict=True))
    to_floor = statistics.median(o / f for o, f in zip(ours, floor_, strict=True))
    print(f"runlines / seed helper: {to_seed:.2f}")
    print(f"runlines / floor: {to_floor:.2f}")
    pure = results[PURE]
    pure_to_seed = statistics.median(p / s for p, s in zip(pure, seed, strict=True))
    print(f"runlines pure Python / seed helper: {pure_to_seed:.2f}")
    string = statistics.median(s / o for s, o in zip(results[STRING], ours, strict=True))
    tensor = statistics.median(
        t / s for t, s in zip(results[TENSOR], results[SEED_ITEM], strict=True)
    )
    print(f"string record / numbers-only record: {string:.2f} (target <= 1.3)")
    print(f"0-d tensor record / seed helper with .item(): {tensor:.2f} (target <= 0.6)")
    nullspace = statistics.median(n / p for n, p in zip(results[NULLSPACE], pure, strict=True))
    print(f"pure Python, run 'nullspace' / run 'bench': {nullspace:.2f} (was 2.8 before plans)")
    nullify = statistics.median(n / s for n, s in zip(results[NULLIFY], results[SPAN], strict=True))
    print(f"pure Python, span 'nullify' / span 'step': {nullify:.2f} (was 1.7 with the line scan)")


if __name__ == "__main__":
    main()
