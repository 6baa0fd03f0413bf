"""The `runlines plot RUNS --metric M -o FILE.png` command: a metric per run, drawn to a file."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from runlines.cli._compare import add_arguments, compare_table
from runlines.cli._terminal import printable

__all__ = ["add_commands"]


def add_commands(subparsers: Any) -> None:
    """Add `plot` to *subparsers* (from ``parser.add_subparsers()``)."""
    sub = subparsers.add_parser("plot", help="plot a metric per run to a PNG")
    add_arguments(sub)
    sub.add_argument("-o", "--output", required=True, type=Path, metavar="FILE.png")
    sub.add_argument("--logx", action="store_true", help="a log-scale x axis")
    sub.add_argument("--logy", action="store_true", help="a log-scale y axis")
    sub.set_defaults(handler=_plot)


def _plot(args: argparse.Namespace) -> int:
    table = compare_table(args)
    # matplotlib: imported for this command only
    from runlines.cli._plotting import nonfinite_count, plot_groups, plot_metric, runs_and_events

    scales = {"logx": args.logx, "logy": args.logy}
    if args.group_by:
        path = plot_groups(table, args.output, metric=args.metric, by=args.by, **scales)
        groups = len(dict.fromkeys(table.columns.get_level_values(0)))
        label = f"{_counted(groups, 'group')}, mean ± std"
        print(printable(f"wrote {path} ({args.metric} by {args.by}, {label})"))
        return 0
    path = plot_metric(table, args.output, metric=args.metric, by=args.by, **scales)
    runs, events = (set(names) for names in runs_and_events(table.columns))
    drawn = [_counted(len(runs), "run")]
    if len(events) > 1:  # a line style per event
        drawn.append(_counted(len(events), "event"))
    marked = nonfinite_count(table)
    if marked:
        drawn.append(f"{_counted(marked, 'non-finite value')} marked at the edge")
    print(printable(f"wrote {path} ({args.metric} by {args.by}, {', '.join(drawn)})"))
    return 0


def _counted(count: int, noun: str) -> str:
    """Return ``1 run``, ``2 runs``, ``1,000 runs``."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"
