"""The `runlines report SOURCES -o report.html` command: the runs in one HTML file."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from runlines import dashboard
from runlines.cli._common import resolve_source
from runlines.cli._terminal import printable

__all__ = ["add_commands", "group_keys"]


def add_commands(commands: Any) -> None:
    """Add `report` to the CLI's subparsers *commands*."""
    sub = commands.add_parser(
        "report", help="write the runs to one HTML file that opens from disk, no server"
    )
    sub.add_argument("runs", nargs="+", metavar="SOURCE", help="log files, run names or folders")
    sub.add_argument(
        "-o", "--output", type=Path, default=Path("report.html"), metavar="FILE.html",
        help="where to write it (default: report.html)",
    )  # fmt: skip
    sub.add_argument("--event", metavar="NAME", help="only the charts of this event")
    sub.add_argument("--metric", metavar="M", help="only the charts of this field")
    sub.add_argument("--x", default="step", metavar="FIELD", help="the x axis (default: step)")
    sub.add_argument(
        "--group-by", type=group_keys, metavar="KEY,KEY",
        help="config keys: each chart draws each group's mean with a band",
    )  # fmt: skip
    sub.set_defaults(handler=_report)


def group_keys(text: str) -> list[str]:
    """Return the config keys of ``--group-by lr,batch_size``."""
    keys = [key.strip() for key in text.split(",") if key.strip()]
    if not keys:
        msg = f"expected config keys separated by commas (e.g. lr,batch_size), got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return keys


def _report(args: argparse.Namespace) -> int:
    sources = [resolve_source(run) for run in args.runs]
    path = dashboard.report(
        *sources, path=args.output, event=args.event, metric=args.metric, x=args.x,
        group_by=args.group_by,
    )  # fmt: skip
    size = path.stat().st_size
    print(printable(f"wrote {path} ({size / 1e6:.1f} MB); open it in a browser, no server needed"))
    return 0
