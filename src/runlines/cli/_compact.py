"""The `runlines compact SOURCES` command: write the Parquet copy of logs written before."""

from __future__ import annotations

import argparse
from typing import Any

from runlines.reading import _copies
from runlines.reading._rules import import_arrow

__all__ = ["add_commands"]


def add_commands(subparsers: Any) -> None:
    """Add `compact` to *subparsers* (from ``parser.add_subparsers()``)."""
    sub = subparsers.add_parser(
        "compact", help="write a Parquet copy beside each log, read instead of its JSONL"
    )
    sub.add_argument("sources", nargs="+", metavar="SOURCE", help="log files or folders of logs")
    sub.set_defaults(handler=_compact)


def _compact(args: argparse.Namespace) -> int:
    import_arrow("compact")
    for copy in _copies.compact(*args.sources):
        print(copy)
    return 0
