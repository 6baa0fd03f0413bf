"""The `runlines` command: the parser and `main`; each command is a module of its own."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings
from typing import TextIO

from runlines import _native
from runlines._version import __version__
from runlines.cli import _compare, _ls, _plot, _show, _tail, _which
from runlines.cli._common import resolve_run
from runlines.cli._tail import follow
from runlines.cli._terminal import printable_lines
from runlines.errors import RunlinesError
from runlines.reading._lines import RAISE_HINT

__all__ = ["COMMAND_GROUPS", "follow", "main", "resolve_run"]

# Modules that add commands: each has `add_commands(subparsers)` (see cli/_query.py).
COMMAND_GROUPS: list[str] = [
    "runlines.cli._query",
    "runlines.cli._diff",
    "runlines.cli._top",
    "runlines.cli._compact",
    "runlines.cli._serve",
    "runlines.cli._tag",
    "runlines.cli._report",
    "runlines.cli._watch",
    "runlines.cli._import",
    "runlines.cli._sync",
]


def main(argv: list[str] | None = None) -> int:
    """Run the command line *argv* (default: sys.argv[1:]); return the exit status.

    0 on success, 1 when the command failed (one ``runlines: error:`` line on stderr), 2 for a
    usage error.
    """
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # --help, --version and usage errors
        return stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 2)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = _show_warning
        try:
            status: int = args.handler(args)
        except BrokenPipeError:  # `runlines show x | head`: the reader left, quietly stop
            _silence_stdout()
            return 1
        except (RunlinesError, ImportError, OSError) as err:
            print(f"runlines: error: {printable_lines(str(err))}", file=sys.stderr)
            return 1
    return status


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that Python's exit-time flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is no real file (a test's capture)
        pass


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    # the Python option the message suggests is no option of any command
    text = str(message).replace(RAISE_HINT, "")
    print(f"runlines: warning: {printable_lines(text)}", file=sys.stderr)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="runlines",
        description="Look at runlines logs: list runs, show one, follow it, compare and plot.",
        epilog=(
            "A RUN is a log file, or a run name looked up in the current folder (NAME.jsonl), "
            "then in runs/, then as `runlines ls -r` names it."
        ),
    )
    version = f"runlines {__version__}, {_native.describe()}"
    parser.add_argument("--version", action="version", version=version)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
    for module in (_ls, _show, _tail, _compare, _plot, _which):
        module.add_commands(commands)
    for group in COMMAND_GROUPS:
        importlib.import_module(group).add_commands(commands)
    return parser
