"""The `runlines import tensorboard|mlflow|wandb SOURCE -o OUT` command (docs/compat.md)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from runlines.cli._terminal import printable

if TYPE_CHECKING:
    from runlines.importers._common import ImportedRun

__all__ = ["add_commands"]

_SOURCES = {
    "tensorboard": (
        "TensorBoard event files: one log per folder that holds them",
        "LOGDIR",
        "the TensorBoard log folder",
    ),
    "mlflow": (
        "MLflow runs: one log per run, <experiment>/<run name>",
        "MLRUNS",
        "an MLflow tracking folder (mlruns/) or SQLite store (sqlite:///path.db)",
    ),
    "wandb": (
        "an offline W&B run (wandb/offline-run-*): one log, <project>/<run name>",
        "RUN_DIR",
        "the run's folder (wandb/offline-run-*), or its .wandb file",
    ),
}


def add_commands(subparsers: Any) -> None:
    """Add `import` to *subparsers* (from ``parser.add_subparsers()``)."""
    parser = subparsers.add_parser("import", help="import another tracker's runs as logs")
    sources = parser.add_subparsers(dest="source", metavar="SOURCE", required=True)
    for source, (help, metavar, what) in _SOURCES.items():
        command = sources.add_parser(source, help=help)
        command.add_argument("path", metavar=metavar, help=what)
        command.add_argument(
            "-o",
            "--out",
            default="runs",
            metavar="OUT",
            help="the folder of the logs (default: runs)",
        )
    parser.set_defaults(handler=_import)


def _import(args: argparse.Namespace) -> int:
    # each importer module is the door to its tracker's library: imported only here
    run_import: Callable[[str, str], list[ImportedRun]]
    if args.source == "mlflow":
        from runlines.importers.mlflow import import_mlflow as run_import
    elif args.source == "wandb":
        from runlines.importers.wandb import import_wandb as run_import
    else:
        from runlines.importers.tensorboard import import_tensorboard as run_import
    for result in run_import(args.path, args.out):
        if result.written:
            line = f"{result.source} -> {result.path}: {result.records} records"
            if result.skipped:
                left = ", ".join(f"{n} {what}" for what, n in sorted(result.skipped.items()))
                line += f" (left out: {left})"
            if result.note:
                line += f"; {result.note}"
        else:
            line = f"{result.source}: already imported as {result.path}, nothing written"
        print(printable(line))
    return 0
