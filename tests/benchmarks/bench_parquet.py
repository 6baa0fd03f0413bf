"""Benchmark reading through Parquet copies: load() of a finished run, of a live one, and runs().

Run: python tests/benchmarks/bench_parquet.py [--records N] [--runs N] [--repeat 3]

One run, side by side, each reader in a subprocess of its own (see bench_load.py for how time
and peak RSS are taken; 'call' is the read itself with pandas imported, the imports the read
needs counted in):
- a finished 1M-record run (its log and the Parquet copy written at close) read by load(),
  against pandas.read_json(lines=True) of the same records and against the floor,
  pyarrow.parquet.read_table(copy).to_pandas();
- a live run (the JSONL only, no copy) read by load();
- runs() over N finished runs of 1,000 records, through their copies and over the JSONL alone;
- the copy's size against the JSONL's, and what writing it costs at close.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_load import Measure, measure, median, write_logs

from runlines.reading._copies import write_copy

_TIMED = (
    "import sys, time, warnings; import pandas as pd; warnings.simplefilter('ignore');"
    " start = time.perf_counter(); {call}; print(len(df), time.perf_counter() - start)"
)
READERS = {
    "pandas.read_json": ("clean", "df = pd.read_json(sys.argv[1], lines=True)"),
    "load, finished (copy)": ("finished", "import runlines; df = runlines.load(sys.argv[1])"),
    "pyarrow.parquet + to_pandas": (
        "copy",
        "import pyarrow.parquet as pq; df = pq.read_table(sys.argv[1]).to_pandas()",
    ),
    "load, live (JSONL only)": ("live", "import runlines; df = runlines.load(sys.argv[1])"),
    "runs(), copies": ("runs_copied", "import runlines; df = runlines.runs(sys.argv[1])"),
    "runs(), JSONL only": ("runs_plain", "import runlines; df = runlines.runs(sys.argv[1])"),
}


def _sweep(folder: Path, count: int) -> tuple[Path, Path, float]:
    """Write *count* finished runs of 1,000 records twice: with copies, and their JSONL alone."""
    copied, plain = folder / "sweep_copied", folder / "sweep_plain"
    copied.mkdir()
    plain.mkdir()
    (folder / "template").mkdir()
    torn, _ = write_logs(folder / "template", 1000)
    data = torn.read_bytes().replace(b'"run":"bench"', b'"run":"r{i:04d}"')
    for i in range(count):
        (plain / f"r{i:04d}.jsonl").write_bytes(data.replace(b"{i:04d}", f"{i:04d}".encode()))
        shutil.copy2(plain / f"r{i:04d}.jsonl", copied / f"r{i:04d}.jsonl")
    start = time.perf_counter()
    for log in sorted(copied.glob("*.jsonl")):
        write_copy(log)
    return copied, plain, (time.perf_counter() - start) / count


def _ratio_lines(results: Mapping[str, Measure], sizes: Mapping[str, float]) -> list[str]:
    base = results["pandas.read_json"]
    finished, floor = results["load, finished (copy)"], results["pyarrow.parquet + to_pandas"]
    live = results["load, live (JSONL only)"]
    copies, plain = results["runs(), copies"], results["runs(), JSONL only"]
    checks = [
        ("finished load vs read_json, call", base.call_s / finished.call_s, ">= 15x", 15, 1),
        ("finished load, peak RSS vs read_json", finished.peak_mb / base.peak_mb, "<= 0.3x",
         0.3, -1),
        ("finished load vs the parquet floor, call", finished.call_s / floor.call_s,
         "<= 1.5x", 1.5, -1),
        ("live load vs read_json, call", base.call_s / live.call_s, ">= 5x", 5, 1),
        ("runs() copies vs JSONL only, call", plain.call_s / copies.call_s, ">= 10x", 10, 1),
        ("copy size vs JSONL size", sizes["copy"] / sizes["jsonl"], "<= 0.2x", 0.2, -1),
    ]  # fmt: skip
    lines = []
    for name, value, target, bound, way in checks:
        ok = value >= bound if way > 0 else value <= bound
        lines.append(f"{name}: {value:.2f}x (target {target}): {'PASS' if ok else 'FAIL'}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(folder / "pycache")
        (folder / "live").mkdir()
        torn, clean = write_logs(folder, args.records)
        live = folder / "live" / "bench.jsonl"
        shutil.copy2(torn, live)
        start = time.perf_counter()
        copy = write_copy(torn)
        write_s = time.perf_counter() - start
        assert copy is not None
        copied, plain, sweep_write_s = _sweep(folder, args.runs)
        inputs = {"clean": clean, "finished": torn, "copy": copy, "live": live,
                  "runs_copied": copied, "runs_plain": plain}  # fmt: skip
        codes = {name: _TIMED.format(call=call) for name, (_, call) in READERS.items()}
        for name, (which, _) in READERS.items():  # untimed: fills the bytecode cache
            measure(codes[name], inputs[which], env)
        runs: dict[str, list[Measure]] = {name: [] for name in READERS}
        for _ in range(args.repeat):  # interleaved: a noisy moment hits every reader
            for name, (which, _) in READERS.items():
                runs[name].append(measure(codes[name], inputs[which], env))
        results = {name: median(r) for name, r in runs.items()}
        loads = " / ".join(f"{x:.1f}" for x in os.getloadavg())
        sizes = {"jsonl": torn.stat().st_size, "copy": copy.stat().st_size}
        print(f"Log: {args.records} records, {sizes['jsonl'] / 1e6:.0f} MB; copy "
              f"{sizes['copy'] / 1e6:.1f} MB, written in {write_s:.2f} s "
              f"({sizes['jsonl'] / 1e6 / write_s:.0f} MB/s of JSONL); sweep: {args.runs} runs "
              f"of 1,000 records, {sweep_write_s * 1e3:.0f} ms per copy. Median of "
              f"{args.repeat}; load average at the end {loads} on {os.cpu_count()} "
              "cores (others' work slows threaded readers most).")  # fmt: skip
        print()
        print("| reader | rows | call s | process s | peak RSS MB |")
        print("|---|---:|---:|---:|---:|")
        for name, m in results.items():
            rows = m.error or m.rows
            print(f"| {name} | {rows} | {m.call_s:.3f} | {m.wall_s:.2f} | {m.peak_mb:.0f} |")
        print()
        print("\n".join(_ratio_lines(results, sizes)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
