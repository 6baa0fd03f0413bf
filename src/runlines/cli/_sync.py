"""The `runlines sync` command: copy runs to a shared folder or an object store (`_sync`)."""

from __future__ import annotations

import argparse
import time
from typing import Any, Final

from runlines import _sync
from runlines.cli._options import seconds
from runlines.cli._terminal import printable

__all__ = ["add_commands"]

INTERVAL_S: Final = 5.0
# A live-at-source marker lasts this many intervals: a pass or two may be slow or fail
LIVE_INTERVALS: Final = 3
_sleep = time.sleep  # the tests' one way into `--watch`'s waits


def add_commands(subparsers: Any) -> None:
    """Add `sync` to *subparsers* (from ``parser.add_subparsers()``)."""
    sync = subparsers.add_parser(
        "sync",
        help="copy runs to a shared folder or an object store (s3://...), resuming",
        description=(
            "Send DEST what it lacks of the runs in SOURCES: a log's whole lines appended "
            "since the last pass, artifacts once (deduplicated by sha256), a changed Parquet "
            "copy. DEST is a folder (a shared mount, another disk) or an fsspec URL "
            "(s3://bucket/prefix, needs pip install 'runlines[sync-s3]'). The runs of every "
            "SOURCE go into DEST side by side. A run live at its source (its lock held "
            f"there) is marked live in DEST for {LIVE_INTERVALS} intervals after each pass, "
            "so it reads running there, not died; see docs/sync.md."
        ),
    )
    sync.add_argument(
        "sources", nargs="+", metavar="SOURCE", help="folders of logs, .jsonl logs or store URLs"
    )
    sync.add_argument("dest", metavar="DEST", help="a folder, or a store URL (s3://bucket/runs)")
    sync.add_argument("--watch", action="store_true", help="keep syncing as the runs grow")
    sync.add_argument(
        "--interval",
        type=seconds,
        default=INTERVAL_S,
        metavar="S",
        help=(
            f"seconds between passes with --watch (default {INTERVAL_S:g}); a run live at "
            f"its source reads live in DEST for {LIVE_INTERVALS} intervals after a pass"
        ),
    )
    sync.set_defaults(handler=_run_sync)


def _run_sync(args: argparse.Namespace) -> int:
    sources, dest = args.sources, args.dest
    live_for_s = LIVE_INTERVALS * args.interval
    report = _sync.sync(sources, dest, live_for_s=live_for_s)
    print(printable(report.describe()))
    if not args.watch:
        return 0
    try:
        while True:
            _sleep(args.interval)
            report = _sync.sync(sources, dest, live_for_s=live_for_s)
            if report.sent:
                print(printable(report.describe()), flush=True)
    except KeyboardInterrupt:
        return 0
