"""`runlines top` over 100 live runs: what one refresh reads and costs, against reading all again.

Writes RUNS logs of RECORDS records each, holds every log's lock (so each is `running` and its
lock is probed on every refresh, the costly case), then times, in one process:

- the first refresh (every log read whole once);
- a refresh after 10 of the runs appended one record each (also with every lock probed, as
  every LOCK_EVERY_S), and one after nothing was appended: the bytes read, and the CPU time
  of the refresh plus the rows and the frame;
- side by side with each, the same frame built by reading every log again (`summaries()`),
  which is what a view without byte offsets would do.

`python tests/benchmarks/bench_top.py [--runs 100] [--records 5000] [--reps 20] [--quick]`
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import orjson
from filelock import FileLock

from runlines.cli._top import LOCK_EVERY_S, Top, TopRow, render_frame
from runlines.reading import lock_path
from runlines.reading._table import summaries

APPENDING = 10  # runs that append a record between two refreshes


def _record(run: str, step: int, t0: float) -> bytes:
    fields = {"ts": t0 + step * 0.1, "event": "train_step", "run": run, "step": step,
              "loss": 1.0 / (step + 1), "lr": 0.1, "grad_norm": 0.5}  # fmt: skip
    return orjson.dumps(fields) + b"\n"


def _write(folder: Path, runs: int, records: int, t0: float) -> list[Path]:
    paths = []
    for i in range(runs):
        run = f"r{i:03d}"
        start = orjson.dumps({"ts": t0, "event": "run_start", "run": run, "attempt": 1}) + b"\n"
        body = b"".join(_record(run, step, t0) for step in range(records))
        path = folder / f"{run}.jsonl"
        path.write_bytes(start + body)
        paths.append(path)
    return paths


def _cpu(work: Callable[[], object]) -> tuple[float, object]:
    start = time.process_time()
    result = work()
    return time.process_time() - start, result


def _frame(rows: list[TopRow]) -> list[str]:
    return render_frame(rows, width=200, height=60, title="bench")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="--records 1000 --reps 5")
    args = parser.parse_args(argv)
    if args.quick:
        args.records, args.reps = 1000, 5
    with tempfile.TemporaryDirectory() as name, ExitStack() as locks:
        folder = Path(name)
        t0 = time.time() - args.records * 0.1
        paths = _write(folder, args.runs, args.records, t0)
        for path in paths:
            locks.enter_context(FileLock(lock_path(path)))
        total = sum(path.stat().st_size for path in paths)
        top = Top([folder])
        first_s, first_bytes = _cpu(top.refresh)
        assert first_bytes == total, (first_bytes, total)
        assert all(row.status == "running" for row in top.rows())
        ticks = itertools.count(step=LOCK_EVERY_S)  # every refresh is a probing one
        probing = Top([folder], monotonic=lambda: float(next(ticks)))
        probing.refresh()
        step = args.records
        appended, idle, probed = [], [], []
        for rep in range(args.reps):
            size = 0
            for path in paths[rep % 10 :: 10][:APPENDING]:
                line = _record(path.stem, step, t0)
                size += len(line)
                with path.open("ab") as out:
                    out.write(line)
            step += 1
            again = _reread(folder)
            appended.append((*_refresh(top), size, again))
            probed.append((*_refresh(probing), size, again))
            idle.append((*_refresh(top), 0, _reread(folder)))
    _report(args, total, first_s, {"10 runs appended a record": appended,
            "the same, every lock probed": probed, "nothing appended": idle})  # fmt: skip
    return 0


def _refresh(top: Top) -> tuple[float, int]:
    def work() -> int:
        read = top.refresh()
        _frame(top.rows())
        return read

    seconds, read = _cpu(work)
    return seconds, int(read)  # type: ignore[call-overload]


def _reread(folder: Path) -> float:
    return _cpu(lambda: _frame([_row(s.row()) for s in summaries(folder)]))[0]


def _row(row: dict[str, object]) -> TopRow:
    return TopRow(run=str(row["run"]), status=str(row["status"]), step=row["step"])


def _report(
    args: argparse.Namespace,
    total: int,
    first_s: float,
    cases: dict[str, list[tuple[float, int, int, float]]],
) -> None:
    print(f"## runlines top: {args.runs} live runs, {args.records:,} records each")
    print(f"\n{total / 2**20:.1f} MiB of logs; the first refresh read {total:,} bytes in "
          f"{first_s:.2f} s CPU.\n")  # fmt: skip
    print("| refresh | bytes appended | bytes read | CPU ms (top) | CPU ms (read all again) "
          "| ratio (median, range) |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for name, figures in cases.items():
        ratios = [again / max(own, 1e-9) for own, _, _, again in figures]
        print(
            f"| {name} | {statistics.median(f[2] for f in figures):,.0f} "
            f"| {statistics.median(f[1] for f in figures):,.0f} "
            f"| {statistics.median(f[0] for f in figures) * 1e3:.2f} "
            f"| {statistics.median(f[3] for f in figures) * 1e3:.1f} "
            f"| {statistics.median(ratios):.0f}x ({min(ratios):.0f}x-{max(ratios):.0f}x) |"
        )
    exact = all(read == size for figures in cases.values() for _, read, size, _ in figures)
    print(
        f"\nEvery refresh read exactly the bytes appended: {exact}. A live run's lock is "
        f"probed at most every {LOCK_EVERY_S:.0f} s; the second row probes all on each."
    )


if __name__ == "__main__":
    sys.exit(main())
