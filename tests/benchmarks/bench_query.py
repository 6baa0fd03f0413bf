"""Benchmark runlines.query (DuckDB) against pd.concat of pd.read_json over many runs.

Run: python tests/benchmarks/bench_query.py [--runs 1000] [--records 10000000] [--repeat 1]
     [--keep DIR] [--skip-pandas] [--load-sizes 100000,1000000]

It writes --runs logs totalling --records records (records as Run writes them: a run_start,
train_step records with epoch/step/loss/lr, an eval every 100 steps, a run_end), then times one
group-by over all of them, the mean loss per run and epoch, with:

- runlines.query: SQL over the view `records` (DuckDB reads the files, out of core);
- pandas: pd.concat of pd.read_json(lines=True) of every file, then groupby().mean();
- runlines.load: runlines' own pandas reader, then groupby().mean(), for scale.

Each contender runs in a subprocess of its own, started by a small wrapper process, so that the
wrapper's resource.getrusage(RUSAGE_CHILDREN).ru_maxrss is that contender's peak RSS alone.
With --load-sizes it also times runlines.load against runlines.sql.load_duckdb on one folder of
10 runs per size: where DuckDB starts to pay off for load().

With --copy-records N (e.g. 1000000) it also writes one finished run of N records, and the same
log with its Parquet copy (`runlines compact`), and times two queries on each, side by side:
an aggregation (max loss per run) and a full SELECT * into pandas. The ratios are copy / JSONL.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from runlines._encoding import encode_line

START_TS = 1_767_225_600.0
SQL = (
    "SELECT run, epoch, avg(loss) AS loss FROM records WHERE event = 'train_step' "
    "GROUP BY run, epoch"
)
CONTENDERS = {
    "runlines.query (DuckDB)": (
        f"import sys; from runlines.sql import query; print(len(query({SQL!r}, sys.argv[1])))"
    ),
    "pd.concat(pd.read_json)": (
        "import sys, pathlib, pandas as pd;"
        " df = pd.concat([pd.read_json(p, lines=True)"
        " for p in sorted(pathlib.Path(sys.argv[1]).glob('*.jsonl'))], ignore_index=True);"
        " steps = df[df.event == 'train_step'];"
        " print(len(steps.groupby(['run', 'epoch']).loss.mean()))"
    ),
    "runlines.load + groupby": (
        "import sys; from runlines.reading import load;"
        " df = load(sys.argv[1], event='train_step');"
        " print(len(df.groupby(['run', 'epoch']).loss.mean()))"
    ),
}
COPY_QUERIES = {
    "max(loss) GROUP BY run": "SELECT run, max(loss) AS loss FROM records GROUP BY run",
    "SELECT *": "SELECT * FROM records",
}
LOADERS = {
    "runlines.load": "import sys; from runlines.reading import load; print(len(load(sys.argv[1])))",
    "runlines.sql.load_duckdb": (
        "import sys; from runlines.sql import load_duckdb; print(len(load_duckdb(sys.argv[1])))"
    ),
}
WRAPPER = """
import resource, subprocess, sys, time
start = time.perf_counter()
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
wall = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
tail = (done.stderr.strip().splitlines() or [""])[-1]
print(wall, peak, done.returncode, done.stdout.strip() or "-", tail, sep="\\t")
"""


@dataclass(frozen=True)
class Measure:
    wall_s: float
    peak_mb: float
    output: str


def write_runs(directory: Path, runs: int, records: int) -> int:
    """Write *runs* logs of about records/runs records each; return the bytes written."""
    directory.mkdir(parents=True, exist_ok=True)
    per_run = max(records // runs, 3)
    total = 0
    for index in range(runs):
        name = f"run-{index:04d}"
        lines = [
            encode_line(
                {
                    "ts": START_TS,
                    "event": "run_start",
                    "run": name,
                    "id": f"{name}-1",
                    "attempt": 1,
                    "host": "node-1",
                    "config": {"lr": 3e-4, "seed": index},
                }
            )
        ]
        ts = START_TS + index
        for step in range(per_run - 2):
            ts += 0.05
            if step % 100 == 99:
                record = {"ts": ts, "event": "eval", "run": name, "step": step, "accuracy": 0.5}
            else:
                record = {
                    "ts": ts,
                    "event": "train_step",
                    "run": name,
                    "epoch": step * 10 // per_run,
                    "step": step,
                    "loss": 1.0 / (step + 1),
                    "lr": 3e-4,
                }
            lines.append(encode_line(record))
        lines.append(
            encode_line(
                {
                    "ts": ts,
                    "event": "run_end",
                    "run": name,
                    "id": f"{name}-1",
                    "attempt": 1,
                    "status": "ok",
                    "duration_s": ts - START_TS,
                }
            )
        )
        data = b"".join(lines)
        (directory / f"{name}.jsonl").write_bytes(data)
        total += len(data)
    return total


def measure(code: str, folder: Path) -> Measure:
    """Run *code* on *folder* in a fresh interpreter; return its wall time and peak RSS."""
    done = subprocess.run(
        [sys.executable, "-c", WRAPPER, sys.executable, "-c", code, str(folder)],
        capture_output=True,
        text=True,
        check=True,
    )
    wall, peak_kb, status, output, tail = done.stdout.rstrip("\n").split("\t")
    if status != "0":
        return Measure(float("nan"), float("nan"), f"failed: {tail}")
    return Measure(float(wall), int(peak_kb) / 1024, output)


def table(title: str, results: dict[str, list[Measure]], baseline: str) -> str:
    """Return a markdown table of median wall time and peak RSS, with ratios to *baseline*."""
    base = results[baseline]
    base_wall = statistics.median(m.wall_s for m in base)
    base_peak = statistics.median(m.peak_mb for m in base)
    lines = [
        f"### {title}",
        "",
        "| contender | wall (s) | peak RSS (MB) | time vs "
        + baseline
        + " | memory vs "
        + baseline
        + " | result rows |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, measures in results.items():
        wall = statistics.median(m.wall_s for m in measures)
        peak = statistics.median(m.peak_mb for m in measures)
        lines.append(
            f"| {name} | {wall:.1f} | {peak:,.0f} | {wall / base_wall:.2f}x | "
            f"{peak / base_peak:.2f}x | {measures[-1].output} |"
        )
    return "\n".join(lines)


def copy_table(root: Path, records: int, repeat: int) -> str:
    """Return the table of each query of COPY_QUERIES on one run, JSONL only and with its copy."""
    from runlines.reading._copies import compact

    plain, copied = root / f"jsonl-{records}", root / f"copy-{records}"
    if not plain.exists():
        write_runs(plain, 1, records)
    if not copied.exists():
        copied.mkdir()
        shutil.copy2(plain / "run-0000.jsonl", copied / "run-0000.jsonl")
        compact(copied)
    sizes = [sum(p.stat().st_size for p in folder.iterdir()) for folder in (plain, copied)]
    lines = [
        f"### One finished run of {records:,} records: query through its copy vs JSONL only",
        "",
        f"JSONL {sizes[0] / 1e6:,.0f} MB; with the copy beside it {sizes[1] / 1e6:,.0f} MB",
        "",
        "| query | JSONL (s) | copy (s) | time copy / JSONL | JSONL peak (MB) | copy peak (MB) "
        "| memory copy / JSONL | rows |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, sql in COPY_QUERIES.items():
        code = (
            f"import sys; from runlines.sql import query; print(len(query({sql!r}, sys.argv[1])))"
        )
        pairs = [(measure(code, plain), measure(code, copied)) for _ in range(repeat)]
        jsonl = statistics.median(a.wall_s for a, _ in pairs)
        copy = statistics.median(b.wall_s for _, b in pairs)
        jsonl_mb = statistics.median(a.peak_mb for a, _ in pairs)
        copy_mb = statistics.median(b.peak_mb for _, b in pairs)
        lines.append(
            f"| {name} | {jsonl:.2f} | {copy:.2f} | {copy / jsonl:.2f}x | {jsonl_mb:,.0f} | "
            f"{copy_mb:,.0f} | {copy_mb / jsonl_mb:.2f}x | {pairs[-1][1].output} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--keep", type=Path, help="write (or reuse) the logs in this folder")
    parser.add_argument("--skip-pandas", action="store_true", help="leave out pd.read_json")
    parser.add_argument("--load-sizes", default="", help="e.g. 100000,1000000,3000000")
    parser.add_argument("--copy-records", type=int, default=0, help="e.g. 1000000")
    parser.add_argument("--copies-only", action="store_true", help="only the copy table")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = args.keep or Path(scratch)
        if args.copy_records:
            print(copy_table(root, args.copy_records, args.repeat))
            print()
        if args.copies_only:
            return
        folder = root / f"runs-{args.runs}-{args.records}"
        if not folder.exists():
            size = write_runs(folder, args.runs, args.records)
            print(f"wrote {args.runs:,} runs, {args.records:,} records, {size / 1e9:.2f} GB")
        results: dict[str, list[Measure]] = {}
        for name, code in CONTENDERS.items():
            if args.skip_pandas and name.startswith("pd."):
                continue
            results[name] = [measure(code, folder) for _ in range(args.repeat)]
        baseline = "runlines.query (DuckDB)"
        title = f"Mean loss per run and epoch: {args.runs:,} runs, {args.records:,} records"
        print(table(title, results, baseline))
        for size in filter(None, args.load_sizes.split(",")):
            sized = root / f"load-{size}"
            if not sized.exists():
                write_runs(sized, 10, int(size))
            timed = {
                name: [measure(c, sized) for _ in range(args.repeat)] for name, c in LOADERS.items()
            }
            print()
            print(table(f"load() of 10 runs, {int(size):,} records", timed, "runlines.load"))


if __name__ == "__main__":
    main()
