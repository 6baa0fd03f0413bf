"""Media: run.image() and run.histogram() per call, side by side with TensorBoard and W&B.

Run: python tests/benchmarks/bench_media.py [--calls N] [--reps R] [--quick]
with an interpreter that has numpy, torch, tensorboard and wandb (a venv made with
--system-site-packages over the test environment, plus `pip install tensorboard wandb`).

The peers are benchmark-only dependencies (tensorboard, wandb: see tests/benchmarks/README.md);
one that is not installed, or fails to start, is reported as "not available (reason)". Each
call takes one 256x256 RGB uint8 array (a photo-like one: smooth gradients with noise, and
pure noise), or 1M float32 values. runlines writes the PNG file and its record (the file is
fsynced before it gets its name); TensorBoard's `SummaryWriter.add_image`/`add_histogram`
encodes and queues an event (flushed at the end of each batch, in the time); W&B's offline
`wandb.Image(array)` writes its PNG file, and `wandb.Histogram(values)` bins the values (the
`run.log` that would record them is not timed: it only adds to W&B's side).

In each repetition the contenders run in a rotating order, each N calls; the ratio peer /
runlines of one repetition is one sample, and the table gives the median us/call and the median
and range of the ratios (above 1: runlines is faster).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from runlines import Run

OFFLINE_ENV = {"WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_CONSOLE": "off"}
Call = Callable[[int], object]  # one call at step i
Opened = tuple[Call, Callable[[], None]]  # (call, finish a batch)
_CLOSERS: list[Callable[[], object]] = []  # each contender's close, called once measured


def _inputs() -> dict[str, Any]:
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:256, 0:256]
    smooth = np.stack([x, y, (x + y) // 2], axis=-1) + rng.integers(0, 12, (256, 256, 3))
    return {
        "photo-like": np.clip(smooth, 0, 255).astype(np.uint8),
        "noise": rng.integers(0, 256, (256, 256, 3), dtype=np.uint8),
        "1M float32": rng.standard_normal(1_000_000).astype(np.float32),
    }


def _runlines(folder: Path, kind: str, value: Any) -> Opened:
    run = Run("bench", folder, stdout=False, system=False, capture=False)
    _CLOSERS.append(run.close)
    if kind == "image":
        return (lambda i: run.image("img", value, step=i)), lambda: None
    return (lambda i: run.histogram("h", value, step=i)), lambda: None


def _tensorboard(folder: Path, kind: str, value: Any) -> Opened:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(folder))
    _CLOSERS.append(writer.close)
    if kind == "image":
        return (lambda i: writer.add_image("img", value, i, dataformats="HWC")), writer.flush
    return (lambda i: writer.add_histogram("h", value, i)), writer.flush


def _wandb(folder: Path, kind: str, value: Any) -> Opened:
    os.environ.update(OFFLINE_ENV)
    import wandb

    folder.mkdir(parents=True, exist_ok=True)
    run = wandb.init(project="bench", dir=str(folder), mode="offline")
    _CLOSERS.append(run.finish)
    if kind == "image":
        return (lambda i: wandb.Image(value)), lambda: None
    return (lambda i: wandb.Histogram(value)), lambda: None


PEERS: dict[str, Callable[[Path, str, Any], Opened]] = {
    "TensorBoard": _tensorboard,
    "W&B offline": _wandb,
}


def _timed(opened: Opened, calls: int, start: int) -> float:
    call, finish = opened
    began = time.perf_counter()
    for i in range(start, start + calls):
        call(i)
    finish()
    return (time.perf_counter() - began) / calls


def _measure(kind: str, label: str, value: Any, calls: int, reps: int, root: Path) -> list[str]:
    opened: dict[str, Opened] = {}
    failed: dict[str, str] = {}
    for name, make in {"runlines": _runlines, **PEERS}.items():
        try:
            opened[name] = make(root / f"{kind}-{label}-{name}".replace(" ", "_"), kind, value)
            _timed(opened[name], 2, 0)  # warm-up: imports, first files
        except Exception as err:  # a peer that is missing or fails to start: said, not dropped
            failed[name] = f"{type(err).__name__}: {err}"[:80]
    times: dict[str, list[float]] = {name: [] for name in opened}
    names = list(opened)
    for rep in range(reps):
        order = names[rep % len(names) :] + names[: rep % len(names)]
        for name in order:
            times[name].append(_timed(opened[name], calls, 10 + rep * calls))
    while _CLOSERS:
        _CLOSERS.pop()()
    rows = []
    ours = times.get("runlines", [])
    for name in [*PEERS, "runlines"]:
        title = f"`run.{kind}`" if name == "runlines" else name
        if name in failed or name not in times:
            rows.append(f"| {kind} {label} | {title} | not available ({failed.get(name)}) | | |")
            continue
        us = statistics.median(times[name]) * 1e6
        if name == "runlines" or not ours:
            rows.append(f"| {kind} {label} | {title} | {us:,.0f} | 1.00 | |")
            continue
        ratios = [peer / mine for peer, mine in zip(times[name], ours, strict=True)]
        low, high = min(ratios), max(ratios)
        rows.append(
            f"| {kind} {label} | {title} | {us:,.0f} | {statistics.median(ratios):.2f} "
            f"| {low:.2f}-{high:.2f} |"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=40, help="calls per contender and rep")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="10 calls, 3 reps")
    args = parser.parse_args()
    calls, reps = (10, 3) if args.quick else (args.calls, args.reps)
    root = Path(tempfile.mkdtemp(prefix="runlines-bench-media-"))
    inputs = _inputs()
    rows = []
    try:
        for label in ("photo-like", "noise"):
            rows += _measure("image", label, inputs[label], calls, reps, root)
        rows += _measure("histogram", "1M float32", inputs["1M float32"], calls, reps, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"## Media per call ({calls} calls x {reps} reps, Python {sys.version.split()[0]})\n")
    print("| input | contender | us/call | peer / runlines (median) | range |")
    print("|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
