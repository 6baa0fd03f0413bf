"""Run every benchmark script in tests/benchmarks/, each in its own process, and print its tables.

Run: python tests/benchmarks/run_all.py [--quick] [--bench-python PATH] [--only NAME ...]

Scripts run one after another (never two at once: they time themselves), each under a heading
with the exact command. The scripts that compare runlines with other loggers (bench_peers.py,
bench_growth.py) run with the bench interpreter: --bench-python, else $RUNLINES_BENCH_PYTHON,
else this one (their peers then show as not available). With --quick, a script that has a
--quick option gets it, a few known scripts get smaller sizes, and the others run as they are.
A script that fails or times out prints its error under its heading, and the rest still run.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PEER_SCRIPTS = frozenset({"bench_peers.py", "bench_growth.py"})
# Smaller sizes for the scripts that have no --quick option of their own.
QUICK_ARGS = {
    "bench_write.py": ["--events", "10000", "--reps", "5"],
    "bench_load.py": ["--records", "200000"],
    "bench_query.py": ["--runs", "100", "--records", "1000000"],
}
STDERR_TAIL = 30  # lines of a failed script's stderr to show


def scripts(only: list[str]) -> list[Path]:
    """Return the bench_*.py scripts beside this file, sorted, or those named in *only*."""
    found = sorted(HERE.glob("bench_*.py"))
    if not only:
        return found
    wanted = {name if name.endswith(".py") else f"{name}.py" for name in only}
    return [path for path in found if path.name in wanted]


def command_for(script: Path, quick: bool, python: str, bench_python: str) -> list[str]:
    """Return the command line that runs *script*, at quick sizes when asked."""
    interpreter = bench_python if script.name in PEER_SCRIPTS else python
    args: list[str] = []
    if quick:
        has_quick = "--quick" in script.read_text()
        args = ["--quick"] if has_quick else QUICK_ARGS.get(script.name, [])
    return [interpreter, str(script.relative_to(ROOT)), *args]


def run_one(command: list[str], timeout_s: float) -> tuple[str, str | None, float]:
    """Run *command* from the repository root; return its stdout, its error (or None), seconds."""
    start = time.perf_counter()
    try:
        done = subprocess.run(
            command, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired as err:
        out = err.stdout.decode() if isinstance(err.stdout, bytes) else (err.stdout or "")
        return out, f"timed out after {timeout_s:g} s", time.perf_counter() - start
    elapsed = time.perf_counter() - start
    if done.returncode == 0:
        return done.stdout, None, elapsed
    tail = "\n".join(done.stderr.rstrip().splitlines()[-STDERR_TAIL:])
    return done.stdout, f"exit {done.returncode}\n\n```text\n{tail}\n```", elapsed


def print_header(quick: bool, python: str, bench_python: str) -> None:
    """Say when, where and how the tables below were measured."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print("# runlines benchmarks")
    print()
    print(f"- date: {now}; sizes: {'quick (--quick)' if quick else 'full (default sizes)'}")
    print(f"- machine: {_cpu()}, {os.cpu_count()} cores; load average at start {_load()}")
    print(f"- Python {platform.python_version()}: `{python}`; peers: `{bench_python}`")
    print()


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _load() -> str:
    try:
        return " ".join(f"{value:.2f}" for value in os.getloadavg())
    except OSError:
        return "unknown"


def main() -> int:
    """Run the scripts in turn; return 1 if any failed, so a caller can tell."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, a few minutes")
    parser.add_argument(
        "--bench-python",
        default=os.environ.get("RUNLINES_BENCH_PYTHON", sys.executable),
        help="interpreter with the peers installed (pip install -e '.[bench]')",
    )
    parser.add_argument("--only", nargs="*", default=[], help="script names to run")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per script")
    args = parser.parse_args()
    if os.sep in args.bench_python:  # a path, not a name on PATH: the scripts run from ROOT
        args.bench_python = os.path.abspath(args.bench_python)
    print_header(args.quick, sys.executable, args.bench_python)
    failed = []
    for script in scripts(args.only):
        command = command_for(script, args.quick, sys.executable, args.bench_python)
        print(f"## {script.name}")
        print()
        print(f"`{' '.join(command)}`")
        print(flush=True)
        out, error, elapsed = run_one(command, args.timeout)
        if out.strip():
            print(out.rstrip())
            print()
        if error is not None:
            failed.append(script.name)
            print(f"**{script.name} failed** ({error})")
            print()
        print(f"({elapsed:.0f} s)")
        print(flush=True)
    print(f"Load average at the end: {_load()}.", end=" ")
    print(f"Failed: {', '.join(failed)}." if failed else "No script failed.")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
