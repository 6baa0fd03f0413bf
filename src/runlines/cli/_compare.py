"""The `runlines compare RUNS --metric M` command: a metric per run, one row per step."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from runlines import reading
from runlines.cli._common import cell, plain, print_json, resolve_source, table

__all__ = ["add_arguments", "add_commands", "compare_table"]


def add_commands(subparsers: Any) -> None:
    """Add `compare` to *subparsers* (from ``parser.add_subparsers()``)."""
    sub = subparsers.add_parser("compare", help="print a metric per run, one row per step")
    add_arguments(sub)
    sub.add_argument("--json", action="store_true", help="print the table as JSON")
    sub.set_defaults(handler=_compare)


def add_arguments(sub: argparse.ArgumentParser) -> None:
    """Add the arguments of a comparison (`compare`, `plot`): runs, metric, by, agg, event."""
    sub.add_argument("runs", nargs="+", metavar="RUN", help="log files, run names or folders")
    sub.add_argument("--metric", required=True, metavar="M", help="the field to compare")
    sub.add_argument("--by", default="step", metavar="FIELD", help="the x field (default: step)")
    sub.add_argument("--agg", default="mean", choices=reading.AGGREGATIONS)
    sub.add_argument("--event", metavar="NAME", help="only records of this event")


def compare_table(args: argparse.Namespace) -> Any:
    """Return `reading.compare` of the runs and folders *args* name."""
    sources: list[Path] = [resolve_source(run) for run in args.runs]
    return reading.compare(*sources, metric=args.metric, by=args.by, event=args.event, agg=args.agg)


def _compare(args: argparse.Namespace) -> int:
    found = compare_table(args)
    runs = [str(run) for run in found.columns]
    # column by column: a row of a Float64 frame (iterrows) would read pd.NA back as NaN
    columns = [[plain(v) for v in found[run].array] for run in found.columns]
    steps = [plain(at) for at in found.index]
    if args.json:
        print_json(
            [
                {args.by: at, **dict(zip(runs, values, strict=True))}
                for at, *values in zip(steps, *columns, strict=True)
            ]
        )
        return 0
    rows = [[cell(v) for v in row] for row in zip(steps, *columns, strict=True)]
    print(table([args.by, *runs], rows))
    return 0
