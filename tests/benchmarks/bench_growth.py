"""Growth: the per-call cost in each sixth of one long run, and the writing process's memory.

Run: python tests/benchmarks/bench_growth.py [--records N] [--reps R] [--dvclive-steps S]
     [--peer-python PATH] [--quick]

Each run happens in a fresh subprocess (this script with --child), so the memory figures are
that process's own: its resident set (/proc/self/statm) after the first chunk of records, at
the end of each sixth, and its peak (getrusage). runlines logs N `train_step` records (default
1,000,000) through `Run("bench", tmp)` with its default sinks, the file and stdout, fd 1 sent to
a temporary file. Each sixth is timed in chunks; a sixth's per-call cost is the median of its
chunks. After every chunk the same process runs a reference of constant cost (orjson.dumps of
the record and one os.write to /dev/null, as many calls as the chunk, at least 2,000), and the
growth is judged on the ratio chunk / reference: other jobs on a shared machine slow both alike,
a logger whose cost grows does not. Target: last sixth / first sixth of that ratio at most 1.1
(the median over R runs), and memory flat (grown by at most 1 MiB).

The same measurement runs for DVCLive (`log_metric` x3 + `next_step` per step, S steps,
default 3,000) when --peer-python (default: this interpreter) can import it; otherwise its
table says why not.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import stdout_to_temp_file

SIXTHS = 6
FLAT_MIB = 1.0  # memory counts as flat when it grew by at most this much over the run
TARGET_GROWTH = 1.1
MIN_REFERENCE_CALLS = 2_000  # a reference chunk long enough to time well
PAGE = os.sysconf("SC_PAGE_SIZE")
Step = Callable[[int, int], None]  # log the records [start, stop)


def rss_mib() -> float:
    """Return this process's resident set size in MiB."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE / 2**20


def peak_mib() -> float:
    """Return this process's peak resident set size in MiB (ru_maxrss is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# -- the child: one long run in its own process ------------------------------------------------


def open_runlines(tmp: Path) -> tuple[Step, Callable[[], None]]:
    from runlines import Run

    run = Run("bench", tmp)
    log = run.log

    def steps(start: int, stop: int) -> None:
        for step in range(start, stop):
            log("train_step", epoch=step // 10_000, step=step, loss=0.412, lr=3e-4)

    return steps, run.close


def open_dvclive(tmp: Path) -> tuple[Step, Callable[[], None]]:
    os.environ.update({"DO_NOT_TRACK": "true", "ITERATIVE_DO_NOT_TRACK": "1"})
    os.environ.update({"DVC_NO_ANALYTICS": "1", "DVC_STUDIO_OFFLINE": "true"})
    from dvclive import Live

    live = Live(dir=str(tmp / "dvclive"), save_dvc_exp=False)
    log_metric, next_step = live.log_metric, live.next_step

    def steps(start: int, stop: int) -> None:
        for step in range(start, stop):
            log_metric("epoch", step // 1_000)
            log_metric("loss", 0.412)
            log_metric("lr", 3e-4)
            next_step()

    return steps, live.end


def child(logger: str, records: int, chunks: int, result: Path) -> None:
    """Log *records* records in SIXTHS x *chunks* timed chunks; write the figures to *result*."""
    opener = open_runlines if logger == "runlines" else open_dvclive
    with (
        tempfile.TemporaryDirectory(prefix="runlines-bench-growth-") as tmp,
        stdout_to_temp_file(),
    ):
        steps, close = opener(Path(tmp))
        try:
            figures = time_sixths(steps, records, chunks)
        finally:
            close()
    figures["peak"] = max(peak_mib(), *figures["rss_ends"])  # ru_maxrss lags a little
    result.write_text(json.dumps(figures))


def open_reference() -> tuple[Step, Callable[[], None]]:
    """A constant-cost workload: the record through orjson.dumps and one os.write, discarded."""
    import orjson

    fd = os.open(os.devnull, os.O_WRONLY)
    dumps, write, now, option = orjson.dumps, os.write, time.time, orjson.OPT_APPEND_NEWLINE

    def steps(start: int, stop: int) -> None:
        for step in range(start, stop):
            record = {"ts": now(), "event": "train_step", "run": "bench", "step": step}
            write(fd, dumps(record, option=option))

    return steps, lambda: os.close(fd)


def time_sixths(steps: Step, records: int, chunks: int) -> dict[str, Any]:
    """Return per-sixth us/call of *steps* and of the reference, their ratio, and the RSS.

    A sixth's figure is the median over its chunks; RSS is read after the first chunk and at
    the end of each sixth.
    """
    reference, close_reference = open_reference()
    bounds = [records * i // (SIXTHS * chunks) for i in range(SIXTHS * chunks + 1)]
    costs: list[float] = []
    references: list[float] = []
    rss_ends: list[float] = []
    rss_start = 0.0
    for i, (start, stop) in enumerate(itertools.pairwise(bounds)):
        costs.append(_us_per_call(steps, start, stop))
        references.append(_us_per_call(reference, 0, max(stop - start, MIN_REFERENCE_CALLS)))
        if i == 0:
            rss_start = rss_mib()
        if (i + 1) % chunks == 0:
            rss_ends.append(rss_mib())
    close_reference()
    ratios = [c / r for c, r in zip(costs, references, strict=True)]
    return {
        "sixths_us": _per_sixth(costs, chunks),
        "reference_us": _per_sixth(references, chunks),
        "ratios": _per_sixth(ratios, chunks),
        "rss_start": rss_start,
        "rss_ends": rss_ends,
    }


def _us_per_call(steps: Step, start: int, stop: int) -> float:
    began = time.perf_counter()
    steps(start, stop)
    return (time.perf_counter() - began) / (stop - start) * 1e6


def _per_sixth(values: list[float], chunks: int) -> list[float]:
    return [statistics.median(values[s * chunks : (s + 1) * chunks]) for s in range(SIXTHS)]


# -- the parent: runs the children and prints the tables ---------------------------------------


@dataclass(frozen=True)
class Figures:
    """One child's figures: per sixth, us/call, the reference's and their ratio; memory."""

    sixths_us: list[float]
    reference_us: list[float]
    ratios: list[float]
    rss_start: float
    rss_ends: list[float]
    peak: float

    @property
    def growth(self) -> float:
        """Last sixth / first sixth of the cost relative to the reference."""
        return self.ratios[-1] / self.ratios[0]

    @property
    def raw_growth(self) -> float:
        """Last sixth / first sixth of the plain us/call."""
        return self.sixths_us[-1] / self.sixths_us[0]


def run_child(python: str, logger: str, records: int, chunks: int) -> Figures | str:
    """Return the figures of one run in a fresh process, or why it could not run."""
    with tempfile.TemporaryDirectory(prefix="runlines-bench-result-") as tmp:
        result = Path(tmp) / "result.json"
        command = [python, __file__, "--child", logger, "--records", str(records)]
        command += ["--chunks", str(chunks), "--result", str(result)]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
            return f"not available ({last[:160]})"
        return Figures(**json.loads(result.read_text()))


def print_growth(title: str, runs: list[Figures], records: int, judged: bool) -> None:
    """Print per-sixth cost and memory (medians over *runs*), then the verdicts if *judged*."""
    print(f"### {title}")
    print()
    print(
        "| sixth | calls | us/call | reference us/call | us/call / reference "
        "| x first sixth | RSS at its end (MiB) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    first = statistics.median(r.ratios[0] for r in runs)
    for s in range(SIXTHS):
        cost = statistics.median(r.sixths_us[s] for r in runs)
        reference = statistics.median(r.reference_us[s] for r in runs)
        ratio = statistics.median(r.ratios[s] for r in runs)
        rss = statistics.median(r.rss_ends[s] for r in runs)
        span = f"{records * s // SIXTHS:,}-{records * (s + 1) // SIXTHS:,}"
        print(
            f"| {s + 1} | {span} | {cost:,.2f} | {reference:.2f} | {ratio:,.2f} | "
            f"{ratio / first:.2f} | {rss:.1f} |"
        )
    print()
    growths = [r.growth for r in runs]
    growth = statistics.median(growths)
    raw = statistics.median(r.raw_growth for r in runs)
    verdict = "met" if growth <= TARGET_GROWTH else "NOT met"
    verdict = f"target <= {TARGET_GROWTH}: {verdict}" if judged else "for scale, no target"
    print(
        f"Last sixth / first sixth, relative to the reference: {growth:.2f} (median of "
        f"{len(runs)} run(s), range {min(growths):.2f}-{max(growths):.2f}); {verdict}. "
        f"In plain us/call: {raw:.2f}."
    )
    start = statistics.median(r.rss_start for r in runs)
    end = statistics.median(r.rss_ends[-1] for r in runs)
    peak = statistics.median(r.peak for r in runs)
    flat = "flat" if end - start <= FLAT_MIB else "NOT flat"
    if judged:
        flat += " (met)" if flat == "flat" else ""
    print(
        f"Memory (RSS, median): {start:.1f} MiB after the first chunk, {end:.1f} MiB at the end "
        f"({end - start:+.1f} MiB), peak {peak:.1f} MiB: {flat} (flat: grown <= {FLAT_MIB:g} MiB)."
    )
    print()


def measure(logger: str, python: str, records: int, reps: int, chunks: int) -> None:
    """Run *reps* children one after another and print their table (or why there is none)."""
    names = {"runlines": "runlines `Run.log`", "dvclive": "DVCLive `log_metric` x3 + `next_step`"}
    unit = "records" if logger == "runlines" else "steps"
    title = f"{names[logger]}: {records:,} {unit}, {reps} run(s) in fresh processes"
    runs: list[Figures] = []
    for _ in range(reps):
        figures = run_child(python, logger, records, chunks)
        if isinstance(figures, str):
            print(f"### {title}\n\n{figures}\n")
            return
        runs.append(figures)
    print_growth(title, runs, records, judged=logger == "runlines")


def main() -> None:
    """Parse the options; run the children (or be one)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, help="records of the runlines run (1,000,000)")
    parser.add_argument("--reps", type=int, help="runlines runs, each in a fresh process (3)")
    parser.add_argument("--dvclive-steps", type=int, help="steps of the DVCLive run (3,000)")
    parser.add_argument("--peer-python", default=sys.executable, help="interpreter for DVCLive")
    parser.add_argument(
        "--quick", action="store_true", help="defaults 200,000 records, 2 runs, 600 steps"
    )
    parser.add_argument("--child", choices=["runlines", "dvclive"], help=argparse.SUPPRESS)
    parser.add_argument("--chunks", type=int, default=100, help="timed chunks per sixth")
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.records, args.chunks, args.result)
        return
    records = args.records or (200_000 if args.quick else 1_000_000)
    reps = args.reps or (2 if args.quick else 3)
    dvclive_steps = args.dvclive_steps or (600 if args.quick else 3_000)
    print(
        f"Python {sys.version.split()[0]}; {args.chunks} timed chunks per sixth (DVCLive: "
        f"{max(args.chunks // 10, 1)}), medians; reference: orjson.dumps + os.write to /dev/null."
    )
    print()
    measure("runlines", sys.executable, records, reps, args.chunks)
    measure("dvclive", args.peer_python, dvclive_steps, 1, max(args.chunks // 10, 1))


if __name__ == "__main__":
    main()
