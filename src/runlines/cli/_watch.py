"""The `runlines watch` command: alerts on runs' events, sent from outside the job (`_alerts`)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Final

from runlines.cli._options import seconds
from runlines.reading._files import check_source

__all__ = ["add_commands"]

STATE_FILE: Final = ".runlines-watch.json"
INTERVAL_S: Final = 10.0
_RUNS_DIR: Final = "runs"


def add_commands(subparsers: Any) -> None:
    """Add `watch` to *subparsers* (from ``parser.add_subparsers()``)."""
    watch = subparsers.add_parser(
        "watch",
        help="send an alert when a run dies, fails, stalls, logs a NaN or crosses a rule",
        description=(
            "Watch the runs of SOURCES from outside the job and send one alert per event: a "
            "run died (no run_end, its lock free), ended failed, terminated or interrupted, "
            "wrote a `stall` record or a `nonfinite` one, or crossed a --when rule. Each alert "
            "goes to each target once, across restarts of the watcher (its --state file)."
        ),
    )
    watch.add_argument(
        "sources",
        nargs="*",
        metavar="SOURCE",
        help="folders of logs or .jsonl logs (default: the current folder, and runs/ if any)",
    )
    watch.add_argument(
        "--notify",
        action="append",
        required=True,
        metavar="TARGET",
        help=(
            "where alerts go, repeatable: cmd:COMMAND (the alert as JSON on stdin), "
            "file:PATH (JSON lines appended), or an http(s):// webhook URL (a JSON POST)"
        ),
    )
    watch.add_argument(
        "--state",
        default=STATE_FILE,
        metavar="PATH",
        help=(
            "the file that keeps which alerts were sent, and when; watchers may share one "
            f"(default: {STATE_FILE})"
        ),
    )
    watch.add_argument(
        "--when",
        action="append",
        default=[],
        metavar="RULE",
        help='a metric rule, repeatable: "eval.loss > 2", "train_step.loss is nan"',
    )
    watch.add_argument("--ok", action="store_true", help="alert on runs that end ok too")
    watch.add_argument(
        "--interval", type=seconds, default=INTERVAL_S, metavar="S", help="seconds per pass"
    )
    watch.add_argument(
        "--retries", type=int, default=3, metavar="N", help="tries again of a failing target"
    )
    watch.add_argument(
        "--per-minute",
        type=int,
        default=20,
        metavar="N",
        help="alerts to one target a minute, the rest summed up in one (0: no limit)",
    )
    watch.add_argument("--once", action="store_true", help="one pass, then exit")
    watch.set_defaults(handler=_watch)


def _watch(args: argparse.Namespace) -> int:
    from runlines._alerts import Rule, Watcher, parse_target

    targets = [parse_target(spec) for spec in args.notify]
    rules = [Rule.parse(text) for text in args.when]
    sources = args.sources or ["."] + ([_RUNS_DIR] if Path(_RUNS_DIR).is_dir() else [])
    for source in map(Path, sources):
        if source.exists() or args.once:
            if not source.is_dir():
                check_source(source)  # a FIFO named like a log would block: refused
        else:  # its runs are picked up once it appears
            print(f"runlines: waiting for {source} to appear (Ctrl-C to stop)", file=sys.stderr)
    watcher = Watcher(
        sources,
        targets,
        args.state,
        ok=args.ok,
        rules=rules,
        retries=max(0, args.retries),
        per_minute=max(0, args.per_minute),
    )
    try:
        while True:
            for alert in watcher.poll():
                print(alert.message, file=sys.stderr)
            if args.once:
                return 0
            time.sleep(args.interval)
    except KeyboardInterrupt:
        return 0
