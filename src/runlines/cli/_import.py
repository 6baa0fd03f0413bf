"""The `runlines import tensorboard LOGDIR -o OUT` command (docs/compat.md)."""

from __future__ import annotations

import argparse
from typing import Any

from runlines.cli._terminal import printable

__all__ = ["add_commands"]


def add_commands(subparsers: Any) -> None:
    """Add `import` to *subparsers* (from ``parser.add_subparsers()``)."""
    parser = subparsers.add_parser("import", help="import another tracker's runs as logs")
    sources = parser.add_subparsers(dest="source", metavar="SOURCE", required=True)
    tensorboard = sources.add_parser(
        "tensorboard", help="TensorBoard event files: one log per folder that holds them"
    )
    tensorboard.add_argument("logdir", metavar="LOGDIR", help="the TensorBoard log folder")
    tensorboard.add_argument(
        "-o", "--out", default="runs", metavar="OUT", help="the folder of the logs (default: runs)"
    )
    parser.set_defaults(handler=_import)


def _import(args: argparse.Namespace) -> int:
    return _tensorboard(args)  # the one source so far: argparse checked SOURCE


def _tensorboard(args: argparse.Namespace) -> int:
    from runlines.importers.tensorboard import import_tensorboard

    for result in import_tensorboard(args.logdir, args.out):
        if result.written:
            line = f"{result.source} -> {result.path}: {result.records} records"
            if result.skipped:
                left = ", ".join(f"{n} {plugin}" for plugin, n in sorted(result.skipped.items()))
                line += f" (left out: {left})"
        else:
            line = f"{result.source}: already imported as {result.path}, nothing written"
        print(printable(line))
    return 0
