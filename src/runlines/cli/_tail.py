"""The `runlines tail RUN` command: a run's last records, and with -f each one appended."""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any, Final, TextIO

from runlines import reading
from runlines._encoding import format_console
from runlines.cli._common import AmbiguousRunError, resolve_run, run_candidates
from runlines.cli._options import seconds
from runlines.cli._terminal import printable
from runlines.errors import ReadError, RunlinesWarning

__all__ = ["add_commands", "follow"]

_POLL_S: Final = 0.5
_sleep: Callable[[float], None] = time.sleep  # tests replace it to drive `tail -f` step by step


def add_commands(subparsers: Any) -> None:
    """Add `tail` to *subparsers* (from ``parser.add_subparsers()``)."""
    tail = subparsers.add_parser("tail", help="print a run's last records; -f to follow it")
    tail.add_argument("run", metavar="RUN")
    tail.add_argument("-n", type=_count, default=10, metavar="N", help="records (default 10)")
    tail.add_argument("-f", "--follow", action="store_true", help="wait for new records")
    tail.add_argument("--event", action="append", metavar="NAME", help="only this event")
    tail.add_argument("--poll", type=seconds, default=_POLL_S, metavar="S", help=argparse.SUPPRESS)
    tail.set_defaults(handler=_tail)


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        msg = f"expected a count of records (0 or more), got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


def _tail(args: argparse.Namespace) -> int:
    events = set(args.event) if args.event else None
    try:
        path = resolve_run(args.run)
    except ReadError as err:
        there = any(p.exists() for p in run_candidates(args.run))
        if not args.follow or there or isinstance(err, AmbiguousRunError):
            raise  # only a run that is not there yet is waited for
        return _wait_and_follow(args, events)
    size = path.stat().st_size
    records = reading.last_records(path, args.n, events=events) if args.n else []
    if not records and not args.follow and args.n:  # -n 0 asks for nothing: not an error
        _explain_no_records(path, events)
    width = max([12, *(len(str(r.get("event", ""))) for r in records)])
    sys.stdout.writelines(_console_line(record, width) for record in records)
    if not args.follow:
        return 0
    sys.stdout.flush()
    try:
        follow(path, sys.stdout, events=events, offset=size, poll_s=args.poll, width=width)
    except KeyboardInterrupt:
        return 0
    return 0


def _wait_and_follow(args: argparse.Namespace, events: Collection[str] | None) -> int:
    """Follow a run that has not started yet from its first record, as `tail -F` does."""
    text = args.run
    path = Path(text if text.endswith(reading.LOG_SUFFIX) else f"{text}{reading.LOG_SUFFIX}")
    print(f"runlines: waiting for {path} to appear (Ctrl-C to stop)", file=sys.stderr)
    try:
        follow(path, sys.stdout, events=events, offset=0, poll_s=args.poll)
    except KeyboardInterrupt:
        return 0
    return 0


def _console_line(record: Mapping[str, Any], width: int) -> str:
    """Return *record* as `tail` prints it: the console format, `printable`, one line."""
    return printable(format_console(record, width).removesuffix("\n")) + "\n"


def _explain_no_records(path: Path, events: Collection[str] | None) -> None:
    """Raise the reason `tail` found nothing: an empty log, or an event no record has."""
    seen = {str(r.get("event")) for r in reading.last_records(path)}
    if events is None or not seen:
        if events is None and path.stat().st_size == 0:
            return  # a run that has only just started: nothing to print yet
        what = "it is empty" if path.stat().st_size == 0 else "none of its lines is a JSON object"
        msg = f"{path} has no records: {what}; pass a .jsonl log written by runlines.Run"
        raise ReadError(msg, str(path))
    if not seen & set(events):
        wanted = " or ".join(repr(e) for e in sorted(events))
        msg = f"no record of {path} has event {wanted}; its events: {', '.join(sorted(seen))}"
        raise ReadError(msg, str(path))


def follow(
    path: Path,
    out: TextIO,
    *,
    events: Collection[str] | None = None,
    offset: int = 0,
    poll_s: float = _POLL_S,
    width: int = 12,
    should_stop: Callable[[], bool] = lambda: False,
) -> None:
    """Print the records appended to *path* after *offset*, polling every *poll_s* seconds.

    Runs until *should_stop* returns True or the user presses Ctrl-C (KeyboardInterrupt); it
    follows a restarted attempt that appends to the same file, and a file that is replaced.
    """
    follower = reading.LogFollower(path, offset)
    skipped = 0
    while not should_stop():
        for record in follower.poll():
            event = record.get("event")
            if events is None or (isinstance(event, str) and event in events):
                out.write(_console_line(record, width))
        out.flush()
        if follower.skipped > skipped:
            skipped = follower.skipped
            msg = f"{path}: skipped a line that is not a complete JSON object (the run crashed?)"
            warnings.warn(msg, RunlinesWarning, stacklevel=2)
        _sleep(poll_s)
