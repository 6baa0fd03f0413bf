"""The dashboard at scale: time to the first chart, server memory, and bytes read per poll.

The server runs in its own process, as `runlines serve` does, so that its memory is its own.
"Time to the first chart" is what the page waits for before it can draw: `GET /api/runs`
answered, then `GET /api/series` of one run with points in it. "Fully read" is when the reader
thread has read every byte of history. A live run gets records appended between polls, and
the server's own byte counter (`bytes_read` in /api/progress) says what each poll read.

A finished run of 1M records is then served twice, side by side: with its Parquet copy
(`runlines compact`), and from its JSONL alone (the copy moved aside). "Charts complete" is when
the reader has taken in the whole history and its series are answered.

TensorBoard, when installed, loads the same scalars in its own process, side by side: the time
its EventAccumulator takes to load every run.

    python tests/benchmarks/bench_serve.py            # 100 runs x 100k records, 1 run x 10M
    python tests/benchmarks/bench_serve.py --scale 0.1
    python tests/benchmarks/bench_serve.py --only-copy  # the 1M-record run, copy vs JSONL
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

SRC = Path(__file__).resolve().parents[2] / "src"
T0 = 1_767_225_600.0
_PAGE_POLL_S = 1.0
_COPY_POLL_S = 0.05  # a finer look than the page's: a copy is taken in within about a second

_SERVER = """
import sys
from runlines.dashboard import Server
server = Server(sys.argv[1], port=0)
print(server.url, flush=True)
server.serve_forever()
"""

_STORE = """
import sys, time
from runlines.dashboard._runs import RunStore
start = time.perf_counter()
store = RunStore(sys.argv[1:])
store.refresh()
points = sum(s.count for run in store.runs.values() for s in run.files[0].series.values())
print(time.perf_counter() - start, points, flush=True)
"""

_TENSORBOARD = """
import sys, time
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
start = time.perf_counter()
points = 0
for folder in sorted(sys.argv[1:]):
    acc = EventAccumulator(folder, size_guidance={"scalars": 0})
    acc.Reload()
    points += sum(len(acc.Scalars(tag)) for tag in acc.Tags()["scalars"])
print(time.perf_counter() - start, points, flush=True)
"""


def write_run(path: Path, records: int, rng: random.Random) -> int:
    """Write a finished run like Run does: train_step every step, eval every 100; return bytes."""
    name = path.stem
    start = {"ts": T0, "event": "run_start", "run": name, "attempt": 1, "config": {"lr": 0.1}}
    with open(path, "wb") as stream:
        stream.write(orjson.dumps(start) + b"\n")
        for first in range(0, records - 2, 100_000):
            lines = []
            for step in range(first, min(first + 100_000, records - 2)):
                ts = T0 + step * 0.01
                record: dict[str, Any] = {"ts": ts, "event": "train_step", "run": name}
                if step % 100 == 99:
                    record.update(event="eval", step=step, loss=rng.random())
                else:
                    record.update(step=step, loss=rng.random(), lr=0.1)
                lines.append(orjson.dumps(record))
            stream.write(b"\n".join(lines) + b"\n")
        end = {"ts": T0 + records, "event": "run_end", "run": name, "status": "ok"}
        stream.write(orjson.dumps(end) + b"\n")
    return path.stat().st_size


class Client:
    def __init__(self, url: str) -> None:
        address = url.split("//", 1)[1].split("/", 1)[0]
        host, port = address.rsplit(":", 1)
        self.host, self.port = host, int(port)

    def get(self, path: str) -> Any:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=600)
        try:
            connection.request("GET", path)
            return json.loads(connection.getresponse().read())
        finally:
            connection.close()


def _rss_mib(pid: int) -> tuple[float, float]:
    """Return the process's resident and peak resident memory, MiB."""
    fields = {}
    for text in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = text.partition(":")
        fields[key] = value.strip()
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def measure_server(folder: Path, poll_s: float = _PAGE_POLL_S) -> dict[str, float]:
    """Start a server over *folder*; time the first chart and the full read; its memory.

    The read is checked every *poll_s* (the page's pace by default).
    """
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    start = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-c", _SERVER, str(folder)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert child.stdout is not None
        client = Client(child.stdout.readline().strip())
        rows = client.get("/api/runs")
        table_s = time.perf_counter() - start
        first = rows[0]["run"]
        while not any(s["y"] for s in client.get(f"/api/series?run={first}")["series"]):
            pass  # the reader thread has not reached a record with a number yet
        chart_s = time.perf_counter() - start
        slowest = 0.0
        while True:
            asked = time.perf_counter()
            client.get("/api/runs")
            slowest = max(slowest, time.perf_counter() - asked)
            behind = client.get("/api/progress")["bytes_behind"]
            if not behind:
                break
            time.sleep(poll_s)  # as the page polls; a tight loop would only starve the reader
        points = sum(len(s["y"]) for s in client.get(f"/api/series?run={first}")["series"])
        full_s = time.perf_counter() - start
        rss, peak = _rss_mib(child.pid)
    finally:
        child.terminate()
        child.wait()
    return {
        "table_s": table_s, "chart_s": chart_s, "full_s": full_s,
        "rss_mib": rss, "peak_mib": peak, "points": points, "slowest_s": slowest,
    }  # fmt: skip


def measure_live(folder: Path, polls: int, per_poll: int) -> list[tuple[int, int, int]]:
    """Append *per_poll* records between polls of a live run; return (appended, read, size)."""
    path = folder / "live.jsonl"
    rng = random.Random(1)
    write_run(path, 100_000, rng)
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    child = subprocess.Popen(
        [sys.executable, "-c", _SERVER, str(folder)], stdout=subprocess.PIPE, text=True, env=env
    )
    found = []
    try:
        assert child.stdout is not None
        client = Client(child.stdout.readline().strip())
        while client.get("/api/progress")["bytes_behind"]:
            pass
        step = 100_000
        for _ in range(polls):
            before = client.get("/api/progress")["runs"]["live"]["bytes_read"]
            chunk = b"".join(
                orjson.dumps({"ts": T0 + step + i, "event": "train_step", "run": "live",
                              "step": step + i, "loss": rng.random()}) + b"\n"
                for i in range(per_poll)
            )  # fmt: skip
            with open(path, "ab") as stream:
                stream.write(chunk)
            step += per_poll
            after = client.get("/api/progress")["runs"]["live"]["bytes_read"]
            found.append((len(chunk), after - before, path.stat().st_size))
    finally:
        child.terminate()
        child.wait()
    return found


def _timed(script: str, *args: str) -> tuple[float, int]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, check=True, env=env
    )
    seconds, points = out.stdout.split()
    return float(seconds), int(points)


def measure_tensorboard(folder: Path, runs: int, records: int) -> tuple[float, int] | None:
    """Write *runs* x *records* scalars as TensorBoard event files; time their loading."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        return None
    rng = random.Random(0)
    folders = []
    for number in range(runs):
        target = folder / f"tb{number}"
        writer = SummaryWriter(str(target))
        for step in range(records - 2):
            if step % 100 == 99:
                writer.add_scalar("eval/loss", rng.random(), step)
            else:
                writer.add_scalar("train_step/loss", rng.random(), step)
                writer.add_scalar("train_step/lr", 0.1, step)
        writer.close()
        folders.append(str(target))
    return _timed(_TENSORBOARD, *folders)


def measure_copy(
    base: Path, records: int, repeats: int
) -> tuple[dict[str, list[dict[str, float]]], dict[str, int]]:
    """Serve one finished run of *records* with its copy and without, in turn, *repeats* times.

    Return each side's measures, and the sizes of the JSONL and the copy.
    """
    folder = base / "copy"
    folder.mkdir()
    log = folder / "finished.jsonl"
    write_run(log, records, random.Random(0))
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    command = [sys.executable, "-m", "runlines", "compact", str(log)]
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
    copy, aside = log.with_suffix(".parquet"), base / "aside.parquet"
    found: dict[str, list[dict[str, float]]] = {"copy": [], "jsonl": []}
    for _ in range(repeats):
        copy.rename(aside)  # the log is untouched: the copy still matches it when put back
        found["jsonl"].append(measure_server(folder, poll_s=_COPY_POLL_S))
        aside.rename(copy)
        found["copy"].append(measure_server(folder, poll_s=_COPY_POLL_S))
    return found, {"jsonl": log.stat().st_size, "copy": copy.stat().st_size}


def print_copy(base: Path, records: int, repeats: int) -> None:
    found, sizes = measure_copy(base, records, repeats)
    print(f"\n## A finished run of {records:,} records: its Parquet copy vs its JSONL\n")
    print(
        f"JSONL {sizes['jsonl'] / 2**20:.0f} MiB, copy {sizes['copy'] / 2**20:.0f} MiB; "
        f"{repeats} servers each, in turn; the best of each.\n"
    )
    print("| read from | first chart | charts complete | slowest /api/runs while reading "
          "| RSS MiB | peak MiB |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|")
    best = {}
    for name, runs in found.items():
        best[name] = min(runs, key=lambda got: got["full_s"])
        got = best[name]
        print(
            f"| {name} | {got['chart_s']:.2f} s | {got['full_s']:.2f} s | {got['slowest_s']:.2f} s "
            f"| {got['rss_mib']:.0f} | {got['peak_mib']:.0f} |"
        )
    ratio = best["copy"]["full_s"] / best["jsonl"]["full_s"]
    print(f"\nCharts complete, copy / JSONL: {ratio:.3f} ({1 / ratio:.1f}x faster)")


def _fleet(base: Path, runs: int, records: int) -> tuple[Path, int]:
    folder = base / f"fleet-{runs}x{records}"
    folder.mkdir()
    rng = random.Random(0)
    size = sum(write_run(folder / f"run{n:03d}.jsonl", records, rng) for n in range(runs))
    return folder, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="records per run x this")
    parser.add_argument("--tb-runs", type=int, default=10, help="runs in the TensorBoard check")
    parser.add_argument("--only-big", action="store_true", help="only the run of 10M x scale")
    parser.add_argument("--skip-load", action="store_true", help="live run, TensorBoard only")
    parser.add_argument("--only-copy", action="store_true", help="only the copy vs JSONL run")
    parser.add_argument("--repeats", type=int, default=2, help="servers per side, copy vs JSONL")
    args = parser.parse_args()
    fleet_records = int(100_000 * args.scale)
    big_records = int(10_000_000 * args.scale)
    with tempfile.TemporaryDirectory(prefix="runlines-bench-serve-") as tmp:
        base = Path(tmp)
        if args.only_copy:
            print_copy(base, int(1_000_000 * args.scale), args.repeats)
            return
        print(f"## The dashboard (scale {args.scale:g})\n")
        print(
            "| logs | MiB on disk | table | first chart | fully read | slowest /api/runs "
            "while reading | points of a run | RSS MiB | peak MiB |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        sizes = [(1, big_records)] if args.only_big else [(100, fleet_records), (1, big_records)]
        if args.skip_load:
            sizes = []
        for runs, records in sizes:
            folder, size = _fleet(base, runs, records)
            got = measure_server(folder)
            print(
                f"| {runs} x {records:,} records | {size / 2**20:.0f} | {got['table_s']:.2f} s "
                f"| {got['chart_s']:.2f} s | {got['full_s']:.1f} s | {got['slowest_s']:.2f} s "
                f"| {got['points']:,} | {got['rss_mib']:.0f} | {got['peak_mib']:.0f} |"
            )
            for path in folder.iterdir():
                path.unlink()
        if args.only_big:
            return
        print_copy(base, int(1_000_000 * args.scale), args.repeats)
        print("\n## Bytes read per poll of a live run (100k records of history)\n")
        print("| poll | bytes appended | bytes read | log size |")
        print("|---:|---:|---:|---:|")
        live = base / "live"
        live.mkdir()
        for number, (appended, read, size) in enumerate(measure_live(live, 5, 100), 1):
            print(f"| {number} | {appended:,} | {read:,} | {size:,} |")
        print("\n## TensorBoard, same scalars\n")
        tb_records = fleet_records
        tb_base = base / "tb"
        tb_base.mkdir()
        loaded = measure_tensorboard(tb_base, args.tb_runs, tb_records)
        if loaded is None:
            print("TensorBoard is not installed (pip install tensorboard): not measured.")
            return
        folder, _ = _fleet(base, args.tb_runs, tb_records)
        ours, our_points = _timed(_STORE, str(folder))
        seconds, points = loaded
        print("Each loads every run's history in a fresh process; imports are not timed.\n")
        print("| loader | runs x records | points | loaded in | ratio to runlines |")
        print("|---|---|---:|---:|---:|")
        print(f"| runlines serve's RunStore | {args.tb_runs} x {tb_records:,} | {our_points:,} "
              f"| {ours:.2f} s | 1 |")  # fmt: skip
        print(
            f"| TensorBoard's EventAccumulator | {args.tb_runs} x {tb_records:,} | {points:,} "
            f"| {seconds:.2f} s | {seconds / ours:.2f} |"
        )


if __name__ == "__main__":
    main()
