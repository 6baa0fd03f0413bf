"""The Parquet copy a run writes as it closes: its size, its footer, and what writing it costs.

Run: python tests/benchmarks/bench_copy.py [--records N] [--wide-records N] [--repeat R] [--quick]

Logs written by `Run` itself (stdout off), then, side by side:
- the copy's size against the JSONL's for a numeric training log (epoch, step, loss, lr,
  grad_norm; N records, default 50,000) and for a log with string fields (phase, tag, split);
- the footer's key-value metadata (what every open reads) for a run of 20 fields (default
  1,000,000 records): it must not grow with the records;
- the time writing the copy takes (`write_copy`, what close adds, its imports included), in a
  fresh process that has imported runlines as a training job has, against the floor of making
  a columnar copy: `pyarrow.json.read_json` plus `pq.write_table` of the same file, imports
  included, bytecode cached as an installed package has it. After a warm-up pair, A and B
  run in turn, R times; the table gives the median of the pair ratios;
- whether writing the copy imported pandas (it must not: it is about half a second of a job).

Targets (issue 24): copy <= 0.2x the JSONL for both logs; footer metadata <= 64 KiB at 1M
records and 20 fields; write_copy <= 1.5x the floor.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow.parquet as pq

from runlines import Run

WRITE = (  # a job has imported runlines; its close imports the copy's writer
    "import sys, time, runlines\n"
    "start = time.perf_counter()\n"
    "from runlines.reading._copies import write_copy\n"
    "write_copy(sys.argv[1])\n"
    "print(time.perf_counter() - start, 'pandas' in sys.modules)\n"
)
FLOOR = (
    "import sys, time\n"
    "start = time.perf_counter()\n"
    "import pyarrow.json as pj, pyarrow.parquet as pq\n"
    "pq.write_table(pj.read_json(sys.argv[1]), sys.argv[2])\n"
    "print(time.perf_counter() - start, False)\n"
)


def write_logs(folder: Path, records: int, wide_records: int) -> dict[str, Path]:
    """Write the three benchmark runs through `Run` (no copy at close); return their logs."""
    rng = random.Random(0)
    # a config, as a job has: pyarrow cannot write the empty struct of `config={}` (the floor)
    config = {"lr": 3e-4, "batch_size": 256, "model": {"layers": 12, "width": 768}}

    def run(name: str) -> Run:
        return Run(name, folder, config=config, stdout=False, compact=False, system=False)

    with run("numeric") as log:
        for step in range(records):
            loss = 2.0 / (1 + step / 1000) + rng.gauss(0, 0.01)
            lr = 3e-4 * min(1.0, step / 1000) * (1 - step / records)
            log.log("train_step", epoch=step // 1000, step=step, loss=loss, lr=lr,
                    grad_norm=abs(rng.gauss(1, 0.2)))  # fmt: skip
    phases = ("warmup", "train", "cooldown")
    with run("strings") as log:
        for step in range(records):
            log.log("train_step", step=step, loss=rng.random(), phase=phases[step * 3 // records],
                    tag=f"shard-{step % 64:02d}", split="train")  # fmt: skip
    with run("wide") as log:
        for step in range(wide_records):
            fields = {
                f"m{k:02d}": rng.random() if k % 2 else 1.0 / (step + k + 1) for k in range(18)
            }
            log.log("train_step", step=step, epoch=step // 10_000, **fields)
    return {name: folder / f"{name}.jsonl" for name in ("numeric", "strings", "wide")}


def timed(code: str, *args: str, env: dict[str, str]) -> tuple[float, bool]:
    """Run *code* in a fresh interpreter; return the seconds it printed and its pandas flag."""
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code, *args], capture_output=True, text=True, env=env
    )
    if done.returncode:
        raise SystemExit(f"{code.splitlines()[-2]} failed:\n{done.stderr[-2000:]}")
    out = done.stdout.split()
    return float(out[0]), out[1] == "True"


def footer_bytes(copy: Path) -> dict[str, int]:
    """Return the size of each key-value pair of the copy's footer metadata."""
    metadata = pq.read_metadata(copy).metadata or {}
    return {key.decode(): len(key) + len(value) for key, value in metadata.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--wide-records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="100,000 wide records, 3 repeats")
    args = parser.parse_args()
    if args.quick:
        args.wide_records, args.repeat = 100_000, 3
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        logs = write_logs(folder, args.records, args.wide_records)
        print(f"Logs written by Run: {args.records:,} records (numeric, strings), "
              f"{args.wide_records:,} records of 20 fields (wide).\n")  # fmt: skip
        print("| log | JSONL MB | copy MB | copy / JSONL | target | footer metadata KiB |")
        print("|---|---|---|---|---|---|")
        pandas_seen = False
        # bytecode cached, as an installed package has it (PYTHONDONTWRITEBYTECODE would make
        # each child compile runlines' modules, and not pyarrow's), after one warm-up pair
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(folder / "pycache")
        pairs: dict[str, list[tuple[float, float]]] = {name: [] for name in logs}
        for name, log in logs.items():
            floor_out = str(folder / f"{name}.floor.parquet")
            for repeat in range(args.repeat + 1):
                ours, imported = timed(WRITE, str(log), env=env)
                floor, _ = timed(FLOOR, str(log), floor_out, env=env)
                pandas_seen |= imported
                if repeat:  # the first pair warms the caches
                    pairs[name].append((ours, floor))
            copy = log.with_suffix(".parquet")
            size, copy_size = log.stat().st_size, copy.stat().st_size
            footer = sum(footer_bytes(copy).values()) / 1024
            target = "<= 64 KiB footer" if name == "wide" else "<= 0.2x"
            cells = [name, f"{size / 1e6:.1f}", f"{copy_size / 1e6:.2f}"]
            cells += [f"{copy_size / size:.3f}x", target, f"{footer:.1f}"]
            print("| " + " | ".join(cells) + " |")
        wide = footer_bytes(logs["wide"].with_suffix(".parquet"))
        print("\nFooter of the wide run, by key (bytes):",
              ", ".join(f"{key} {size:,}" for key, size in wide.items()))  # fmt: skip
        print("\n| log | write_copy s | floor s | ratio (median of pairs) | range | target |")
        print("|---|---|---|---|---|---|")
        for name, measured in pairs.items():
            ratios = [ours / floor for ours, floor in measured]
            cells = [name, f"{statistics.median(a for a, _ in measured):.2f}"]
            cells += [f"{statistics.median(b for _, b in measured):.2f}"]
            cells += [f"{statistics.median(ratios):.2f}x", f"{min(ratios):.2f}-{max(ratios):.2f}"]
            print("| " + " | ".join([*cells, "<= 1.5x"]) + " |")
        print(f"\npandas imported by write_copy: {'yes' if pandas_seen else 'no'} (target: no)")


if __name__ == "__main__":
    main()
