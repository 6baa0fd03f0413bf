"""The `runlines diff A B` command: what differs between two runs (text, or --json)."""

from __future__ import annotations

import argparse
import json
import shlex
from typing import Any

from runlines.cli._common import print_json, resolve_run
from runlines.cli._terminal import printable_lines
from runlines.reading import RunDiff, diff
from runlines.reading._diff import check_tolerance

__all__ = ["add_commands"]


def add_commands(subparsers: Any) -> None:
    """Add `diff` to *subparsers* (from ``parser.add_subparsers()``)."""
    sub = subparsers.add_parser(
        "diff", help="what differs between two runs: config, environment, first differing step"
    )
    sub.add_argument("a", metavar="A", help="a log file or run name")
    sub.add_argument("b", metavar="B", help="a log file or run name")
    sub.add_argument("--rtol", type=_tolerance("rtol"), default=1e-5, help="relative tolerance")
    sub.add_argument("--atol", type=_tolerance("atol"), default=1e-8, help="absolute tolerance")
    sub.add_argument("--json", action="store_true", help="print the diff as JSON")
    sub.set_defaults(handler=_diff)


def _tolerance(name: str) -> Any:
    """Return argparse's type for --rtol and --atol: a finite number >= 0."""

    def parse(text: str) -> float:
        try:
            value = float(text)
            check_tolerance(name, value)
        except ValueError as err:
            hint = f"{name} must be a finite number >= 0 (0: exact), got {text!r}"
            raise argparse.ArgumentTypeError(hint) from err
        return value

    return parse


def _diff(args: argparse.Namespace) -> int:
    found = diff(resolve_run(args.a), resolve_run(args.b), rtol=args.rtol, atol=args.atol)
    if args.json:
        print_json(found.to_dict())
    else:
        print(printable_lines(format_diff(found)))
    return 0


def format_diff(found: RunDiff) -> str:
    """Return *found* as text for people: one section per kind of difference."""
    lines = [f"a: {found.a}", f"b: {found.b}"]
    config = [f"  changed  {k}: {_v(a)} -> {_v(b)}" for k, (a, b) in found.changed.items()]
    config += [f"  added    {k}: {_v(v)}" for k, v in sorted(found.added.items())]
    config += [f"  removed  {k}: {_v(v)}" for k, v in sorted(found.removed.items())]
    lines += ["", "config", *(config or ["  same"])]
    lines += ["", "command"]
    if found.argv is None:
        lines.append("  same")
    else:
        lines += [
            f"  {side}: {_command(argv)}" for side, argv in zip("ab", found.argv, strict=True)
        ]
    env = [f"  {k}: {_v(a)} -> {_v(b)}" for k, (a, b) in found.environment.items()]
    lines += ["", "environment", *(env or ["  same, as far as both recorded it"])]
    if any(len(attempts) > 1 for attempts in found.attempts.values()):
        lines += ["", "attempts"]
        for side in ("a", "b"):
            lines += [f"  {side}: {_attempt(attempt)}" for attempt in found.attempts.get(side, [])]
    lines += ["", "metrics"]
    width = max([0, *(len(f"{m.event}.{m.field}") for m in found.metrics)])
    for m in found.metrics:
        name = f"{m.event}.{m.field}".ljust(width)
        if m.agrees:
            lines.append(f"  {name}  agree up to step {m.last_shared_step}")
        else:
            where = ", ".join(f"{k}={v}" for k, v in m.where.items())
            where = f" ({where})" if where else ""
            lines.append(f"  {name}  first differ at step {m.step}{where}: {_v(m.a)} vs {_v(m.b)}")
    if not found.metrics:
        lines.append("  no (event, field) logged at the same steps by both")
    return "\n".join(lines)


def _attempt(attempt: dict[str, Any]) -> str:
    """Return one attempt as a line: its number, status and what its config changed."""
    changes = attempt.get("config_changes") or {}
    said = ", ".join(f"{k} {_v(a)} -> {_v(b)}" for k, (a, b) in sorted(changes.items()))
    return f"attempt {attempt.get('attempt')} {attempt.get('status')}" + (
        f"; config: {said}" if said else ""
    )


def _command(argv: Any) -> str:
    """Return a run_start's argv as one line; '-' for none (a foreign log may hold anything)."""
    if argv is None:
        return "- (not recorded)"
    if isinstance(argv, list):
        return shlex.join(map(str, argv)) or "-"
    return str(argv)


def _v(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else json.dumps(value, default=str)
