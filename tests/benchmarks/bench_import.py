"""What `from runlines import Run` adds to a fresh interpreter's start, against `python -c pass`.

Run: python tests/benchmarks/bench_import.py [--runs N] [--python PATH] [--quick]

Starts N fresh processes of each, `python -c pass`, `python -c "import orjson"` (runlines'
one encoder dependency, for scale), `python -c "import runlines"` (which imports each public
name on first use) and `python -c "from runlines import Run"` (what a training script imports),
interleaved, the order reversing each run; the difference to `-c pass` within each run is one
sample, and the table gives the median difference in ms (target: at most 30 ms for `Run`) with
the median of each command, both in wall time and in the child's CPU time (user + system),
which other jobs on a shared machine disturb less.

Two settings, interleaved: with bytecode cached (`PYTHONPYCACHEPREFIX` set to a temporary
folder and bytecode writing on, warmed up first: what an installed wheel gets, since pip
compiles it), on which the target is judged; and the environment as it is, which on a machine
with `PYTHONDONTWRITEBYTECODE=1` and an editable install compiles runlines from source at every
start. One more run with `-X importtime` (not timed, bytecode cached) lists the modules
`from runlines import Run` loads, the ten slowest by cumulative and by self import time, and
whether the heavy libraries stayed out (orjson and filelock load when the first Run opens; the
rest are optional).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

TARGET_MS = 30.0
HEAVY = ("orjson", "filelock", "pandas", "numpy", "pyarrow", "torch", "matplotlib")
NEW_MODULES = (
    "import sys; before = set(sys.modules); from runlines import Run; "
    "print(' '.join(sorted(set(sys.modules) - before)))"
)
Env = dict[str, str]


def start_ms(python: str, code: str, env: Env) -> tuple[float, float]:
    """Return the wall and the CPU (user + system) time in ms of one fresh `python -c code`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([python, "-c", code], check=True, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall * 1e3, cpu * 1e3


# The commands timed per run; `import orjson` shows what runlines' encoder alone costs.
COMMANDS = {
    "pass": "pass",
    "orjson": "import orjson",
    "runlines": "import runlines",
    "run": "from runlines import Run",
}
JUDGED = "run"  # the target's command


@dataclass
class Runs:
    """(wall, CPU) ms per fresh process of each command, one entry per run."""

    times: dict[str, list[tuple[float, float]]]

    def column(self, command: str, which: int) -> list[float]:
        """Return wall (*which* 0) or CPU (1) ms of *command*, per run."""
        return [times[which] for times in self.times[command]]

    def added(self, command: str, which: int) -> list[float]:
        """Return what *command* adds to `-c pass` in the same run, per run."""
        bare = self.column("pass", which)
        return [t - b for t, b in zip(self.column(command, which), bare, strict=True)]


def measure(python: str, runs: int, settings: dict[str, Env]) -> dict[str, Runs]:
    """Time each command *runs* times per setting; settings interleave, the order reverses."""
    results = {name: Runs({command: [] for command in COMMANDS}) for name in settings}
    for env in settings.values():
        for _ in range(3):  # warm up: the file system cache, and the bytecode where it is kept
            start_ms(python, COMMANDS[JUDGED], env)
    for i in range(runs):
        for name, env in settings.items():
            order = list(COMMANDS.items())
            for command, code in order[::-1] if i % 2 else order:
                results[name].times[command].append(start_ms(python, code, env))
    return results


@dataclass(frozen=True)
class ImportTime:
    """One line of `-X importtime`: the module and its self and cumulative times."""

    module: str
    self_us: int
    cumulative_us: int


def import_times(python: str, env: Env) -> list[ImportTime]:
    """Return the `-X importtime` lines of `-c "from runlines import Run"` (startup imports
    included)."""
    done = subprocess.run(
        [python, "-X", "importtime", "-c", COMMANDS[JUDGED]],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "[us]" in line:
            continue
        self_us, cumulative_us, name = line.removeprefix("import time:").split("|")
        rows.append(ImportTime(name.strip(), int(self_us), int(cumulative_us)))
    return rows


def print_timing(python: str, results: dict[str, Runs], runs: int) -> None:
    """Print one row per setting and command, and the verdict on the target."""
    print(f"{runs} fresh processes of each command per setting, interleaved; {python}")
    print()
    print("| setting | command | wall ms (median) | min | max | CPU ms (median) | min | max |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name, one in results.items():
        for command, code in COMMANDS.items():
            wall, cpu = _stats(one.column(command, 0)), _stats(one.column(command, 1))
            print(f'| {name} | `python -c "{code}"` | {wall} | {cpu} |')
        for command in ("orjson", "runlines", "run"):
            wall, cpu = _stats(one.added(command, 0)), _stats(one.added(command, 1))
            print(f"| {name} | **added by `{COMMANDS[command]}`** | {wall} | {cpu} |")
    print()
    cached = next(iter(results.values()))
    for label, which in (("wall", 0), ("CPU", 1)):
        added = statistics.median(cached.added(JUDGED, which))
        verdict = "met" if added <= TARGET_MS else "NOT met"
        print(
            f"`{COMMANDS[JUDGED]}` adds {added:.1f} ms of {label} time (median, bytecode cached); "
            f"target <= {TARGET_MS:g} ms: {verdict}."
        )


def print_imports(python: str, env: Env) -> None:
    """Print what `from runlines import Run` loads: a count, heavy libraries, the slowest."""
    new = subprocess.run(
        [python, "-c", NEW_MODULES], capture_output=True, text=True, check=True, env=env
    ).stdout.split()
    heavy_in = [name for name in HEAVY if name in new]
    print(
        f"`{COMMANDS[JUDGED]}` loads {len(new)} modules beyond the interpreter's start; "
        f"heavy libraries among them: {', '.join(heavy_in) or 'none'} "
        f"(checked: {', '.join(HEAVY)})."
    )
    rows = import_times(python, env)
    for key, label in (("cumulative_us", "cumulative"), ("self_us", "self")):
        print()
        print(f"Top 10 by {label} import time, one `-X importtime` run, bytecode cached:")
        print()
        print("| module | cumulative ms | self ms |")
        print("|---|---:|---:|")
        for row in sorted(rows, key=lambda r: getattr(r, key), reverse=True)[:10]:
            print(f"| `{row.module}` | {row.cumulative_us / 1e3:.1f} | {row.self_us / 1e3:.1f} |")


def _stats(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} | {min(values):.1f} | {max(values):.1f}"


def _settings(cache_dir: str) -> dict[str, Env]:
    """The two environments to time in: bytecode cached in *cache_dir*, and as it is."""
    cached = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    cached["PYTHONPYCACHEPREFIX"] = cache_dir
    as_is = "PYTHONDONTWRITEBYTECODE=" + os.environ.get("PYTHONDONTWRITEBYTECODE", "(unset)")
    return {"bytecode cached": cached, f"environment as is ({as_is})": dict(os.environ)}


def main() -> None:
    """Time the fresh processes, then print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, help="processes of each kind per setting (30)")
    parser.add_argument("--python", default=sys.executable, help="the interpreter to start")
    parser.add_argument("--quick", action="store_true", help="default 10 runs")
    args = parser.parse_args()
    runs = args.runs or (10 if args.quick else 30)
    with tempfile.TemporaryDirectory(prefix="runlines-bench-pycache-") as cache_dir:
        settings = _settings(cache_dir)
        results = measure(args.python, runs, settings)
        print_timing(args.python, results, runs)
        print()
        print_imports(args.python, settings["bytecode cached"])


if __name__ == "__main__":
    main()
