"""Benchmark runlines.load against pandas.read_json on a 1,000,000-record log of mixed events.

Run: python tests/benchmarks/bench_load.py [--records N] [--repeat 3] [--keep DIR]

Each reader runs in a subprocess of its own, started by a small wrapper process, so that the
wrapper's resource.getrusage(RUSAGE_CHILDREN).ru_maxrss is that reader's peak RSS alone. The
table shows the median of the runs. pandas.read_json and pyarrow cannot read a torn line, so
they read a copy of the log without it; runlines.load reads the log as a crash left it.

Two times per reader, both honest, for two questions:
- whole process: the wrapper's wall time around the reader's process (interpreter start,
  imports, the read, exit). What a one-off script pays.
- call: inside the process, with pandas already imported (every reader returns a pandas frame,
  so every one needs it), the time of the read itself. The runlines side counts
  `import runlines` and whatever load() imports (pyarrow.json, ...) inside the timed region.
  What a notebook or a longer script pays. The target is judged on this one.
load() parses with pyarrow's JSON reader (Python takes only the lines it cannot); the log has
no Parquet copy here (a live run): bench_parquet.py measures reading through one.
Bytecode is cached (PYTHONPYCACHEPREFIX in a temporary folder, filled by one untimed run of
each reader on a small log first), as an installed wheel has it: this environment's
PYTHONDONTWRITEBYTECODE=1 and editable install would otherwise compile runlines from source in
every process (see bench_import.py).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from runlines._encoding import encode_line

START_TS = 1_767_225_600.0
TORN = b'{"ts":1767230600.5,"event":"train_step","run":"bench","epoch":3,"st'

# Each reader prints its row count and the seconds of the timed region (see the docstring).
_TIMED = (
    "import sys, time, warnings; import pandas as pd; warnings.simplefilter('ignore');"
    " start = time.perf_counter(); {call}; print(len(df), time.perf_counter() - start)"
)
READERS = {
    "pandas.read_json": (
        "clean",
        _TIMED.format(call="df = pd.read_json(sys.argv[1], lines=True)"),
    ),
    "runlines.load": (
        "torn",
        _TIMED.format(call="import runlines; df = runlines.load(sys.argv[1])"),
    ),
    "runlines.load(event='eval')": (
        "torn",
        _TIMED.format(call="import runlines; df = runlines.load(sys.argv[1], event='eval')"),
    ),
    "pyarrow.json + to_pandas": (
        "clean",
        _TIMED.format(call="import pyarrow.json as pj; df = pj.read_json(sys.argv[1]).to_pandas()"),
    ),
}

WRAPPER = """
import resource, subprocess, sys, time
start = time.perf_counter()
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
wall = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
tail = (done.stderr.strip().splitlines() or [""])[-1]
cpu = usage.ru_utime + usage.ru_stime
print(wall, usage.ru_maxrss, cpu, done.returncode, done.stdout.strip() or "-", tail, sep="\\t")
"""


@dataclass(frozen=True)
class Measure:
    wall_s: float  # the whole process
    peak_mb: float
    cpu_s: float  # the whole process, user + system
    call_s: float  # the timed region inside the process
    rows: str
    error: str


def record(rng: random.Random, step: int, ts: float, index: int, records: int) -> dict[str, object]:
    """Return one record of the mix: mostly train_step, some eval, span, artifact, warning."""
    head: dict[str, object] = {"ts": round(ts, 6), "run": "bench"}
    draw = rng.random()
    if draw < 0.90:
        loss = float("nan") if index % (records // 5 + 3) == 7 else round(rng.random(), 6)
        fields: dict[str, object] = {
            "event": "train_step", "epoch": step // 10_000, "step": step, "loss": loss,
            "lr": round(3e-4 * rng.random(), 8), "grad_norm": round(5 * rng.random(), 5),
            "tokens_per_s": round(1e5 * rng.random(), 2),
        }  # fmt: skip
    elif draw < 0.95:
        split = rng.choice(["val", "test"])
        fields = {"event": "eval", "step": step, "split": split, "accuracy": rng.random()}
        fields["value"] = rng.randint(0, 9)  # int here, str in warnings: one object column
    elif draw < 0.985:
        fields = {"event": "span", "name": "data", "duration_s": rng.random(), "parent": "step"}
        fields["status"] = "ok"
    elif draw < 0.99:
        fields = {
            "event": "artifact", "name": "ckpt", "path": f"bench.artifacts/ckpt-{step}.pt",
            "bytes": 123_456, "sha256": f"{step:064x}", "format": "pt", "step": step,
        }  # fmt: skip
    else:
        fields = {"event": "warning", "message": f"loss spike at step {step}", "value": "high"}
        fields["context"] = {"step": step, "tags": ["spike", "lr"]}
    if index == records * 7 // 9:
        fields["rare_field"] = 42  # present in one record of them all
    return {"ts": head["ts"], "event": fields.pop("event"), "run": "bench", **fields}


def lifecycle(event: str, ts: float, attempt: int, **fields: object) -> dict[str, object]:
    base = {"ts": ts, "event": event, "run": "bench", "id": f"bench-{attempt}", "attempt": attempt}
    return {**base, **fields}


def write_logs(folder: Path, records: int) -> tuple[Path, Path]:
    """Write the benchmark log (a torn line mid-file, then a resumed attempt) and a clean copy."""
    rng = random.Random(0)
    torn, clean = folder / "bench.jsonl", folder / "clean.jsonl"
    config = {"lr": 3e-4, "layers": [512, 512], "optimizer": {"name": "adam", "betas": [0.9, 0.99]}}
    with torn.open("wb") as out:
        out.write(encode_line(lifecycle("run_start", START_TS, 1, host="node1", config=config)))
        step, ts = 0, START_TS
        for index in range(1, records - 1):
            ts += 0.01
            if index == records // 2:  # killed mid-write, restarted from the step-500 checkpoint
                out.write(TORN + b"\n")
                step -= 500
                start = lifecycle("run_start", ts, 2, resume_step=step, host="node2", config=config)
                out.write(encode_line(start))
                continue
            step += 1
            out.write(encode_line(record(rng, step, ts, index, records)))
        spans = {"data": {"count": 34_000, "total_s": 17_000.0, "mean_s": 0.5, "max_s": 1.0}}
        end = lifecycle("run_end", ts, 2, status="ok", duration_s=10_000.0, dropped=0, spans=spans)
        out.write(encode_line(end))
    clean.write_bytes(torn.read_bytes().replace(TORN + b"\n", b""))
    return torn, clean


def measure(code: str, path: Path, env: dict[str, str]) -> Measure:
    """Run one reader in a subprocess of a wrapper process; return its wall time and peak RSS."""
    command = [sys.executable, "-c", WRAPPER, sys.executable, "-c", code, str(path)]
    out = subprocess.run(command, capture_output=True, text=True, check=True, env=env).stdout
    wall, peak_kb, cpu, code_, printed, tail = out.rstrip("\n").split("\t")
    error = "" if code_ == "0" else tail[:60]
    rows, call = printed.split() if not error else ("-", "nan")
    return Measure(float(wall), int(peak_kb) / 1024, float(cpu), float(call), rows, error)


def median(runs: list[Measure]) -> Measure:
    ok = [m for m in runs if not m.error] or runs
    return Measure(
        statistics.median(m.wall_s for m in ok),
        statistics.median(m.peak_mb for m in ok),
        statistics.median(m.cpu_s for m in ok),
        statistics.median(m.call_s for m in ok),
        ok[0].rows,
        ok[0].error,
    )


def table(results: dict[str, Measure], size_mb: float, repeat: int) -> str:
    base = results["pandas.read_json"]
    lines = [
        f"Log: {size_mb:.0f} MB. Median of {repeat} runs, each reader in its own subprocess.",
        "Speed-ups and memory (peak RSS) are relative to pandas.read_json. 'call': the read",
        "itself with pandas imported (the target); 'process': the whole process, imports and",
        "interpreter start and exit included; 'CPU': the whole process's user + system time.",
        "",
        "| reader | rows | call s | call speed-up | process s | process speed-up | CPU s"
        " | CPU speed-up | peak RSS MB | memory |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, m in results.items():
        if m.error:
            lines.append(f"| {name} | fails: {m.error} | | | | | | | | |")
            continue
        call, speed = base.call_s / m.call_s, base.wall_s / m.wall_s
        cpu, memory = base.cpu_s / m.cpu_s, m.peak_mb / base.peak_mb
        figures = [
            f"{m.call_s:.2f}", f"{call:.1f}x", f"{m.wall_s:.2f}", f"{speed:.1f}x",
            f"{m.cpu_s:.2f}", f"{cpu:.1f}x", f"{m.peak_mb:.0f}", f"{memory:.2f}",
        ]  # fmt: skip
        lines.append(f"| {name} | {m.rows} | " + " | ".join(figures) + " |")
    return "\n".join(lines)


def verdict(results: dict[str, Measure]) -> str:
    base, ours = results["pandas.read_json"], results["runlines.load"]
    call, memory = base.call_s / ours.call_s, ours.peak_mb / base.peak_mb
    process = base.wall_s / ours.wall_s
    ok = call >= 5 and memory <= 0.5
    target = "target: call >= 5x faster, <= 0.5x peak memory"
    return (
        f"runlines.load: call {call:.1f}x faster (whole process {process:.1f}x), "
        f"{memory:.2f}x the memory ({target}): " + ("PASS" if ok else "FAIL")
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="write the logs here and keep them")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(Path(scratch) / "pycache")
        folder = args.keep or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        torn, clean = write_logs(folder, args.records)
        inputs = {"torn": torn, "clean": clean}
        small = Path(scratch) / "small.jsonl"
        small.write_bytes(b"".join(clean.open("rb").readlines()[:1000]))
        for _, code in READERS.values():  # untimed: fills the bytecode cache
            measure(code, small, env)
        runs: dict[str, list[Measure]] = {name: [] for name in READERS}
        for _ in range(args.repeat):  # interleaved, so that a noisy moment hits every reader
            for name, (which, code) in READERS.items():
                runs[name].append(measure(code, inputs[which], env))
        results = {name: median(r) for name, r in runs.items()}
        print(table(results, torn.stat().st_size / 1e6, args.repeat))
        print()
        print(verdict(results))
        if args.records < 1_000_000:
            print("(the target is for the default 1,000,000 records; imports dominate small logs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
