"""The `runlines which PATH` command: which run registered a file or folder, by its sha256."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Final

from runlines import reading
from runlines._layout import is_log_name
from runlines.cli._common import cell, print_json
from runlines.cli._summaries import ArtifactMatch, find_artifact
from runlines.cli._terminal import printable
from runlines.errors import ReadError

__all__ = ["add_commands"]

_WHICH_LEVELS: Final = 3  # `which` looks in the file's folder and this many parents


def add_commands(subparsers: Any) -> None:
    """Add `which` to *subparsers* (from ``parser.add_subparsers()``)."""
    which = subparsers.add_parser("which", help="which run registered a file or folder (by sha256)")
    which.add_argument("file", type=Path, metavar="PATH", help="a file or a folder artifact")
    which.add_argument("dir", nargs="?", type=Path, metavar="DIR", help="search logs under it")
    which.add_argument("--json", action="store_true", help="print the matches as JSON")
    which.set_defaults(handler=_which)


def _which(args: argparse.Namespace) -> int:
    target: Path = args.file
    if not target.is_file() and not target.is_dir():
        msg = f"no such file or folder: {target}; pass the file whose run you want to find"
        raise ReadError(msg, str(target))
    digest = reading.sha256_of(target)
    logs = _logs_for_which(target, args.dir)
    matches = find_artifact(digest, logs)
    if not matches:
        where = args.dir or f"{target.resolve().parent} and {_WHICH_LEVELS} folders up"
        msg = (
            f"no run registered a file with sha256 {digest[:16]}... ({len(logs)} logs searched in "
            f"{where}); pass the folder that holds the run logs: runlines which {target} DIR"
        )
        raise ReadError(msg, str(target))
    if args.json:
        found = [
            {"run": m.log.run, "log": str(m.log.path), "attempt": m.attempt, "record": m.record}
            for m in matches
        ]
        print_json(found)
        return 0
    for match in matches:
        print(printable(_which_line(match)))
    return 0


def _logs_for_which(target: Path, folder: Path | None) -> list[reading.LogFile]:
    if folder is not None:
        if not folder.is_dir():
            msg = f"no such folder: {folder}; pass the folder that holds the run logs"
            raise ReadError(msg, str(folder))
        paths = sorted(folder.rglob(f"*{reading.LOG_SUFFIX}"))
    else:
        here = target.resolve().parent
        folders = [here, *list(here.parents)[:_WHICH_LEVELS]]
        paths = [p for f in folders for p in sorted(f.glob(f"*{reading.LOG_SUFFIX}"))]
    return [reading.log_file(p) for p in paths if is_log_name(p.name) and p.is_file()]


def _which_line(match: ArtifactMatch) -> str:
    record = match.record
    parts = [
        f"run {match.log.run}",
        f"attempt {match.attempt}",
        f"step {cell(record.get('step'))}",
        f"artifact {record.get('name')!r}",
        f"path {record.get('path')}",
        f"log {match.log.path}",
    ]
    return "  ".join(parts)
