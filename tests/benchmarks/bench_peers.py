"""Peers: the same train_step record through runlines and through other loggers, side by side.

Run: python tests/benchmarks/bench_peers.py [--events N] [--slow-events M] [--reps R] [--quick]

The peers are benchmark-only dependencies (see tests/benchmarks/README.md); a peer that is not
installed, or fails to start, is reported as "not available (reason)", never dropped. Every
contender logs `train_step` with epoch, step, loss and lr, flushed per record where its API
allows. Stdout is redirected to a temporary file for the measurement (all contenders share it),
and the table is printed to the real stdout at the end.

In each repetition every peer (in an order that rotates) is opened afresh next to a fresh
runlines run, and the two alternate in chunks; the ratio peer / runlines of that pair is one
sample. The table gives the median us/call and the median and range of those ratios. Slow peers
(MLflow, DVCLive) make fewer calls than the loggers (--slow-events), W&B a tenth of theirs.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import itertools
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from runlines import Run

Loop = Callable[[int], None]
Close = Callable[[], None]
Opened = tuple[Loop, Close]

RUNLINES = "runlines `Run.log`"
# Peers must never reach the network or a telemetry endpoint from a benchmark.
OFFLINE_ENV = {
    "WANDB_MODE": "offline",
    "WANDB_SILENT": "true",
    "WANDB_CONSOLE": "off",
    "DO_NOT_TRACK": "true",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "ITERATIVE_DO_NOT_TRACK": "1",
    "DVC_NO_ANALYTICS": "1",
    "DVC_STUDIO_OFFLINE": "true",
    "MLFLOW_ALLOW_FILE_STORE": "true",  # else the file store (maintenance mode) refuses to open
}


@dataclass(frozen=True)
class Contender:
    """One logger: how it is opened, how many calls it makes, what a call guarantees."""

    name: str
    open: Callable[[Path], Opened]
    speed: str  # "fast", "medium" or "slow": picks the calls per repetition
    config: str
    guarantee: str
    is_peer: bool = True


def open_runlines(tmp: Path) -> Opened:
    run = Run("bench", tmp, console="json")
    log = run.log

    def loop(n: int) -> None:
        for step in range(n):
            log("train_step", epoch=3, step=step, loss=0.412, lr=3e-4)

    return loop, run.close


def _stdlib_logger(tmp: Path, formatter: logging.Formatter) -> Opened:
    logger = logging.getLogger(f"bench-{tmp.name}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    handlers: list[logging.Handler] = [
        logging.StreamHandler(sys.stdout),
        logging.FileHandler(tmp / "logging.jsonl"),
    ]
    for handler in handlers:
        handler.setFormatter(formatter)
        logger.addHandler(handler)
    info = logger.info

    def loop(n: int) -> None:
        for step in range(n):
            info("train_step", extra={"epoch": 3, "step": step, "loss": 0.412, "lr": 3e-4})

    def close() -> None:
        for handler in handlers:
            logger.removeHandler(handler)
            handler.close()

    return loop, close


def open_json_logger(tmp: Path) -> Opened:
    from pythonjsonlogger.json import JsonFormatter

    return _stdlib_logger(tmp, JsonFormatter("{message}", style="{", timestamp=True))


def open_json_logger_orjson(tmp: Path) -> Opened:
    from pythonjsonlogger.orjson import OrjsonFormatter

    return _stdlib_logger(tmp, OrjsonFormatter("{message}", style="{", timestamp=True))


class _TeeBytesLogger:
    """structlog's BytesLogger to stdout and to a file: the same two outputs as runlines."""

    def __init__(self, files: list[BinaryIO]) -> None:
        import structlog

        self._loggers = [structlog.BytesLogger(file) for file in files]

    def info(self, message: bytes) -> None:
        for logger in self._loggers:
            logger.msg(message)


def open_structlog(tmp: Path) -> Opened:
    import orjson
    import structlog

    file = open(tmp / "structlog.jsonl", "ab")  # noqa: SIM115 - closed by the returned closer
    # The configuration of structlog's "Performance" docs page (orjson, BytesLogger, cached).
    log = structlog.wrap_logger(
        _TeeBytesLogger([sys.stdout.buffer, file]),
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.format_exc_info,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.JSONRenderer(serializer=orjson.dumps),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        cache_logger_on_first_use=True,
    )
    info = log.info

    def loop(n: int) -> None:
        for step in range(n):
            info("train_step", epoch=3, step=step, loss=0.412, lr=3e-4)

    return loop, file.close


def open_loguru(tmp: Path) -> Opened:
    from loguru import logger

    logger.remove()
    ids = [
        logger.add(sys.stdout, serialize=True),
        logger.add(tmp / "loguru.jsonl", serialize=True, buffering=1),
    ]
    info = logger.info

    def loop(n: int) -> None:
        for step in range(n):
            info("train_step", epoch=3, step=step, loss=0.412, lr=3e-4)

    def close() -> None:
        for handler_id in ids:
            logger.remove(handler_id)

    return loop, close


def open_dvclive(tmp: Path) -> Opened:
    from dvclive import Live

    live = Live(dir=str(tmp / "dvclive"), save_dvc_exp=False)
    log_metric, next_step = live.log_metric, live.next_step

    def loop(n: int) -> None:
        for _ in range(n):
            log_metric("epoch", 3)
            log_metric("loss", 0.412)
            log_metric("lr", 3e-4)
            next_step()

    return loop, live.end


def open_runlines_wrapped(tmp: Path) -> Opened:
    """Run.log opened while sys.stdout is what `import dvclive` made of it."""
    import dvclive  # noqa: F401 - ImportError: reported as not installed

    wrapped = dvclive_stdout()
    if wrapped is None:
        msg = "import dvclive left sys.stdout alone here"
        raise RuntimeError(msg)
    sys.stdout = wrapped  # time_pair() puts the original back
    return open_runlines(tmp / "wrapped")


@functools.cache
def dvclive_stdout() -> Any:
    """Import dvclive; return the sys.stdout it installs (None: none) and put the old one back.

    dvc's logger setup, run at import, calls colorama.init(), which replaces a sys.stdout that
    is not a terminal with a StreamWrapper stripping ANSI codes from every write.
    """
    stdout = sys.stdout
    try:
        import dvclive  # noqa: F401 - imported for its side effect on sys.stdout
    except ImportError:
        return None
    wrapped, sys.stdout = sys.stdout, stdout
    return wrapped if wrapped is not stdout else None


def _mlflow(uri: str) -> Opened:
    import mlflow

    mlflow.set_tracking_uri(uri)
    mlflow.start_run()
    log_metrics = mlflow.log_metrics
    steps = itertools.count()  # the step goes on across the warm-up and the timed loop

    def loop(n: int) -> None:
        for _ in range(n):
            step = next(steps)
            log_metrics({"epoch": 3, "loss": 0.412, "lr": 3e-4}, step=step)

    return loop, mlflow.end_run


def open_mlflow_file(tmp: Path) -> Opened:
    return _mlflow((tmp / "mlruns").as_uri())


def open_mlflow_sqlite(tmp: Path) -> Opened:
    return _mlflow(f"sqlite:///{tmp / 'mlflow.db'}")


def open_wandb(tmp: Path) -> Opened:
    import wandb

    settings = wandb.Settings(
        mode="offline",
        silent=True,
        console="off",
        disable_git=True,
        save_code=False,
        x_disable_stats=True,
        x_disable_meta=True,
    )
    run = wandb.init(project="runlines-bench", dir=str(tmp), settings=settings)
    log = run.log

    def loop(n: int) -> None:
        for step in range(n):
            log({"epoch": 3, "step": step, "loss": 0.412, "lr": 3e-4})

    def close() -> None:
        run.finish()
        wandb.teardown()  # no idle wandb-core process while the others are timed

    return loop, close


CONTENDERS = [
    Contender(
        RUNLINES,
        open_runlines,
        "fast",
        '`Run("bench", tmp, console="json")`: stdout (JSON) and the run file',
        "one `write(2)` per sink before the call returns (survives `kill -9`)",
        is_peer=False,
    ),
    Contender(
        "logging + python-json-logger",
        open_json_logger,
        "fast",
        '`JsonFormatter("{message}", style="{", timestamp=True)` (json.dumps) on a '
        "`StreamHandler(sys.stdout)` and a `FileHandler`; fields in `extra=`",
        "each handler writes and flushes per record: in the OS on return",
    ),
    Contender(
        "logging + python-json-logger (orjson)",
        open_json_logger_orjson,
        "fast",
        "as above with `pythonjsonlogger.orjson.OrjsonFormatter`",
        "each handler writes and flushes per record: in the OS on return",
    ),
    Contender(
        "structlog + orjson",
        open_structlog,
        "fast",
        "the structlog docs' performance setup: `make_filtering_bound_logger(INFO)`, "
        "`cache_logger_on_first_use`, `JSONRenderer(serializer=orjson.dumps)`, "
        "`TimeStamper(fmt='iso', utc=True)`; `BytesLogger` on stdout and on a file",
        "`BytesLogger` writes and flushes per record: in the OS on return",
    ),
    Contender(
        "loguru `serialize=True`",
        open_loguru,
        "fast",
        "`logger.add(sys.stdout, serialize=True)` and `logger.add(path, serialize=True, "
        "buffering=1)`",
        "stdout sink flushed per record, file line-buffered: in the OS on return",
    ),
    Contender(
        "W&B offline `run.log`",
        open_wandb,
        "medium",
        '`wandb.init(mode="offline", dir=tmp)`, `console="off"`, no git, code, meta or '
        "system stats",
        "handed to the wandb-core process, which writes the `.wandb` file later",
    ),
    Contender(
        "MLflow `log_metrics`, file store",
        open_mlflow_file,
        "slow",
        "tracking URI `file:<tmp>/mlruns`, MLflow's former default local store "
        "(`MLFLOW_ALLOW_FILE_STORE=true`: it is in maintenance mode)",
        "each metric appended to its own file, closed per call: in the OS on return",
    ),
    Contender(
        "MLflow `log_metrics`, SQLite (default)",
        open_mlflow_sqlite,
        "slow",
        "tracking URI `sqlite:///<tmp>/mlflow.db`, the form of MLflow's current default "
        "local store (`sqlite:///mlflow.db`)",
        "one committed SQLite transaction per call",
    ),
    Contender(
        "DVCLive `log_metric` x3 + `next_step`",
        open_dvclive,
        "slow",
        "`Live(dir=tmp, save_dvc_exp=False)`, default `dvcyaml`, no report",
        "`next_step` appends the metric .tsv files and rewrites metrics.json and dvc.yaml",
    ),
    Contender(
        "runlines `Run.log` after `import dvclive`",
        open_runlines_wrapped,
        "fast",
        "as runlines; importing dvclive (dvc) has replaced `sys.stdout` with colorama's "
        "`StreamWrapper`, so runlines writes stdout through it instead of `os.write`",
        "as runlines",
        is_peer=False,
    ),
]


@dataclass
class Results:
    """Per contender: us/call and ratio to runlines per repetition, calls, why it is missing."""

    times: dict[str, list[float]]
    ratios: dict[str, list[float]]
    calls: dict[str, int]
    missing: dict[str, str]


def measure(events: int, slow_events: int, reps: int, chunks: int, tmp: Path) -> Results:
    """Time every peer against runlines once per repetition, the peers' order rotating."""
    dvclive_stdout()  # before any peer imports dvclive, so its effect can be seen and undone
    calls = {"fast": events, "medium": max(events // 10, slow_events), "slow": slow_events}
    names = [c.name for c in CONTENDERS]
    results = Results({n: [] for n in names}, {n: [] for n in names}, {RUNLINES: events}, {})
    peers = CONTENDERS[1:]
    for rep in range(reps):
        directory = tmp / f"rep{rep}-alone"
        results.times[RUNLINES].append(time_alone(directory, events))
        for contender in peers[rep % len(peers) :] + peers[: rep % len(peers)]:
            if contender.name in results.missing:
                continue
            n = calls[contender.speed]
            results.calls[contender.name] = n
            directory = tmp / f"rep{rep}-{names.index(contender.name)}"
            directory.mkdir()
            try:
                ours, theirs = time_pair(contender, directory, events, n, chunks)
            except PeerFailed as failed:
                results.missing[contender.name] = failed.reason
                continue
            finally:
                shutil.rmtree(directory, ignore_errors=True)
            results.times[RUNLINES].append(ours)
            results.times[contender.name].append(theirs)
            results.ratios[contender.name].append(theirs / ours)
    return results


def time_pair(
    contender: Contender, directory: Path, ours_n: int, theirs_n: int, chunks: int
) -> tuple[float, float]:
    """Return us/call of runlines and of *contender*, opened side by side, chunks alternating."""
    stdout = sys.stdout  # every pair starts from the same sys.stdout
    ours_loop, ours_close = open_runlines(directory)
    try:
        with blame_peer("failed to start"):
            loop, close = contender.open(directory)
        try:
            ours_loop(max(ours_n // 20, 10))  # warm up: first plan, caches, files created
            with blame_peer("failed"):
                loop(max(theirs_n // 20, 10))
            ours = theirs = 0.0
            for _ in range(chunks):
                ours += _timed(ours_loop, ours_n // chunks)
                with blame_peer("failed"):
                    theirs += _timed(loop, theirs_n // chunks)
        finally:
            with blame_peer("failed to close"):
                close()
    finally:
        ours_close()
        sys.stdout = stdout
    return ours / (ours_n // chunks * chunks) * 1e6, theirs / (theirs_n // chunks * chunks) * 1e6


def time_alone(directory: Path, n: int) -> float:
    """Return us/call of runlines on its own, so it has a figure when no peer is installed."""
    loop, close = open_runlines(directory)
    try:
        loop(max(n // 20, 10))
        return _timed(loop, n) / n * 1e6
    finally:
        close()
        shutil.rmtree(directory, ignore_errors=True)


class PeerFailed(Exception):
    """A peer could not be imported, opened, called or closed; carries the table's reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@contextlib.contextmanager
def blame_peer(doing: str) -> Iterator[None]:
    """Turn an exception raised by a peer into PeerFailed, saying what it was *doing*."""
    try:
        yield
    except ImportError as err:
        raise PeerFailed(f"not installed: {err}") from err
    except Exception as err:
        text = str(err).splitlines()[0][:120] if str(err) else ""
        raise PeerFailed(f"{doing}: {type(err).__name__}: {text}") from err


def _timed(loop: Loop, n: int) -> float:
    start = time.perf_counter()
    loop(n)
    return time.perf_counter() - start


def print_table(results: Results, reps: int) -> None:
    """Print median us/call and the median per-repetition ratio to runlines."""
    print(
        f"{reps} repetitions; in each, every peer runs side by side with its own runlines run, "
        "in alternating chunks; ratio = peer / runlines per repetition, median and range."
    )
    print()
    print("| logger | calls/rep | us/call (median) | x runlines (median ratio) | ratio range |")
    print("|---|---:|---:|---:|---:|")
    for contender in CONTENDERS:
        name, times = contender.name, results.times[contender.name]
        if name in results.missing:
            print(f"| {name} | | not available ({results.missing[name]}) | | |")
            continue
        if not times:
            print(f"| {name} | | not measured | | |")
            continue
        ratios = results.ratios[name]
        ratio, spread = "1 (reference)", ""
        if ratios:
            ratio = f"{statistics.median(ratios):,.2f}"
            spread = f"{min(ratios):,.2f}-{max(ratios):,.2f}"
        print(
            f"| {name} | {results.calls[name]:,} | {statistics.median(times):,.2f} | "
            f"{ratio} | {spread} |"
        )
    peers = [c.name for c in CONTENDERS if c.is_peer and results.ratios[c.name]]
    slower = [n for n in peers if statistics.median(results.ratios[n]) > 1]
    print()
    print(f"Measured peers slower than runlines (median ratio > 1): {len(slower)} of {len(peers)}.")
    print()
    print("| logger | setup | what a call has done when it returns |")
    print("|---|---|---|")
    for contender in CONTENDERS:
        print(f"| {contender.name} | {contender.config} | {contender.guarantee} |")
    print()
    versions = ", ".join(_versions())
    print(f"Python {sys.version.split()[0]}; {versions}")


def _versions() -> list[str]:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for dist in (
        "runlines",
        "orjson",
        "python-json-logger",
        "structlog",
        "loguru",
        "wandb",
        "mlflow",
        "dvclive",
    ):
        try:
            found.append(f"{dist} {version(dist)}")
        except PackageNotFoundError:
            found.append(f"{dist} (not installed)")
    return found


def main() -> None:
    """Measure with stdout sent to a temporary file, then print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, help="calls/rep of the loggers (20,000)")
    parser.add_argument("--slow-events", type=int, help="calls/rep of MLflow, DVCLive (200)")
    parser.add_argument("--reps", type=int, help="repetitions (7)")
    parser.add_argument("--chunks", type=int, default=4, help="alternations per repetition")
    parser.add_argument("--quick", action="store_true", help="defaults 5,000, 100 and 3 reps")
    args = parser.parse_args()
    quick = args.quick
    args.events = args.events or (5_000 if quick else 20_000)
    args.slow_events = args.slow_events or (100 if quick else 200)
    args.reps = args.reps or (3 if quick else 7)
    os.environ.update(OFFLINE_ENV)
    tmp = Path(tempfile.mkdtemp(prefix="runlines-bench-peers-"))
    cwd = Path.cwd()
    os.chdir(tmp)  # peers that write next to the working directory write here
    real_stdout = os.dup(1)
    sink = tempfile.NamedTemporaryFile(prefix="runlines-bench-stdout-")  # noqa: SIM115
    sys.stdout.flush()
    os.dup2(sink.fileno(), 1)
    try:
        results = measure(args.events, args.slow_events, args.reps, args.chunks, tmp)
    finally:
        sys.stdout.flush()
        os.dup2(real_stdout, 1)
        os.chdir(cwd)
        shutil.rmtree(tmp, ignore_errors=True)
    print_table(results, args.reps)


if __name__ == "__main__":
    main()
