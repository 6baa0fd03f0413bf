"""The dashboard's first grouped chart against its ungrouped charts, side by side.

Target (issue #28): the first grouped chart within 2x of the ungrouped chart's time. Each is
timed on a fresh server over the same logs, from its start: ungrouped, until every run's
/api/series holds all its records; grouped, until /api/groups (two config keys) answers,
which reads every record of every run through compare(group_by=...).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from bench_groups import _write

from runlines.dashboard import Server


def _get(server: Server, path: str) -> object:
    with urllib.request.urlopen(server.url.rstrip("/") + path, timeout=600) as answer:
        return json.loads(answer.read())


def _ungrouped(folder: str, runs: int, steps: int) -> float:
    start = time.perf_counter()
    with Server(folder, port=0) as server:
        done: set[str] = set()
        while len(done) < runs:
            for row in _get(server, "/api/runs"):  # type: ignore[attr-defined]
                label = row["run"]
                if label in done:
                    continue
                answer = _get(server, f"/api/series?run={label}")
                counts = [s["count"] for s in answer["series"] if s["field"] == "loss"]  # type: ignore[index]
                if counts and counts[0] >= steps:
                    done.add(label)
        return time.perf_counter() - start


def _grouped(folder: str) -> float:
    start = time.perf_counter()
    with Server(folder, port=0) as server:
        answer = _get(server, "/api/groups?event=train_step&field=loss&group_by=lr,batch_size")
        assert answer["groups"]  # type: ignore[index]
        return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="10 runs x 20,000 records")
    args = parser.parse_args()
    runs, steps = (10, 20_000) if args.quick else (args.runs, args.steps)
    plain_s, group_s, ratios = [], [], []
    with tempfile.TemporaryDirectory() as folder:
        _write(Path(folder), runs, steps)
        for rep in range(args.reps):
            if rep % 2 == 0:
                plain, group = _ungrouped(folder, runs, steps), _grouped(folder)
            else:
                group, plain = _grouped(folder), _ungrouped(folder, runs, steps)
            plain_s.append(plain)
            group_s.append(group)
            ratios.append(group / plain)
    print(f"### the dashboard's first grouped chart over {runs} runs x {steps:,} records\n")
    print("| chart | median s | ratio to ungrouped (median, range) |")
    print("|---|---|---|")
    print(f"| every run's /api/series complete | {statistics.median(plain_s):.2f} | 1.00 |")
    print(
        f"| /api/groups?group_by=lr,batch_size | {statistics.median(group_s):.2f} "
        f"| {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) |"
    )
    print("\ntarget: at most 2x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
