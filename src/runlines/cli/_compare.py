"""The `runlines compare RUNS --metric M` command: a metric per run, one row per step."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from runlines import reading
from runlines.cli._common import cell, plain, print_json, resolve_source, table
from runlines.cli._terminal import printable
from runlines.reading._groups import GROUP_STATS

__all__ = ["add_arguments", "add_commands", "compare_table", "group_keys", "say_keys"]


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
    sub.add_argument(
        "--x",
        "--by",
        dest="by",
        default="step",
        metavar="FIELD",
        help="the x field (default: step)",
    )
    sub.add_argument("--agg", default="mean", choices=reading.AGGREGATIONS)
    sub.add_argument("--event", metavar="NAME", help="only records of this event")
    sub.add_argument(
        "--group-by", metavar="K,K", help="config keys (or auto): mean, std, min, max per group"
    )


def group_keys(text: str | None) -> str | list[str] | None:
    """Return `--group-by`'s keys: ``auto``, a list of keys, or None."""
    if text is None:
        return None
    return "auto" if text.strip() == "auto" else [k.strip() for k in text.split(",") if k.strip()]


def say_keys(args: argparse.Namespace, found: Any) -> None:
    """Print on stderr the keys `--group-by auto` chose."""
    if getattr(args, "group_by", None) and args.group_by.strip() == "auto":
        keys = ", ".join(found.attrs.get("group_by", [])) or "(none: one group)"
        print(printable(f"runlines: grouped by {keys} (auto)"), file=sys.stderr)


def compare_table(args: argparse.Namespace) -> Any:
    """Return `reading.compare` of the runs and folders *args* name."""
    sources: list[Path] = [resolve_source(run) for run in args.runs]
    found = reading.compare(
        *sources,
        metric=args.metric,
        x=args.by,
        event=args.event,
        agg=args.agg,
        group_by=group_keys(getattr(args, "group_by", None)),
    )
    say_keys(args, found)
    return found


def _compare(args: argparse.Namespace) -> int:
    found = compare_table(args)
    if args.group_by:
        return _print_groups(args, found)
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


def _print_groups(args: argparse.Namespace, found: Any) -> int:
    """Print a grouped table: per step, each group's n, mean, std, min and max."""
    steps = [plain(at) for at in found.index]
    labels = list(dict.fromkeys(found.columns.get_level_values(0)))
    columns = {pair: [plain(v) for v in found[pair].array] for pair in found.columns}
    if args.json:
        print_json(
            [
                {
                    args.by: at,
                    **{
                        label: {stat: columns[(label, stat)][i] for stat in GROUP_STATS}
                        for label in labels
                    },
                }
                for i, at in enumerate(steps)
            ]
        )
        return 0
    header = [args.by, *(f"{label} {stat}" for label, stat in found.columns)]
    rows = [[cell(v) for v in row] for row in zip(steps, *columns.values(), strict=True)]
    print(table(header, rows))
    return 0
