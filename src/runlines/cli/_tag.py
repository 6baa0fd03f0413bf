"""The `runlines tag`, `untag` and `note` commands: a run's tags and notes, beside its log.

Each appends one record to `<name>.notes.jsonl` (docs/format.md); the log is never touched.
"""

from __future__ import annotations

import argparse
from typing import Any

from runlines import _notes
from runlines.cli._common import resolve_run
from runlines.cli._terminal import printable

__all__ = ["add_commands"]


def add_commands(subparsers: Any) -> None:
    """Add `tag`, `untag` and `note` to *subparsers* (from ``parser.add_subparsers()``)."""
    tag = subparsers.add_parser("tag", help="tag a run (in NAME.notes.jsonl, not in its log)")
    tag.add_argument("run", metavar="RUN")
    tag.add_argument("tags", nargs="+", metavar="TAG", help="tags: no whitespace, no commas")
    tag.set_defaults(handler=_tag)
    untag = subparsers.add_parser("untag", help="remove tags from a run (a later record)")
    untag.add_argument("run", metavar="RUN")
    untag.add_argument("tags", nargs="+", metavar="TAG")
    untag.set_defaults(handler=_untag)
    note = subparsers.add_parser("note", help="add a note to a run (in NAME.notes.jsonl)")
    note.add_argument("run", metavar="RUN")
    note.add_argument("text", metavar="TEXT", help="the note; quote it")
    note.set_defaults(handler=_note)


def _tag(args: argparse.Namespace) -> int:
    path = resolve_run(args.run)
    _notes.tag(path, *args.tags)
    return _say_tags(path)


def _untag(args: argparse.Namespace) -> int:
    path = resolve_run(args.run)
    _notes.untag(path, *args.tags)
    return _say_tags(path)


def _note(args: argparse.Namespace) -> int:
    path = resolve_run(args.run)
    _notes.note(path, args.text)
    count = len(_notes.read_notes(path).notes)
    print(printable(f"{path}: {count} note{'s' if count != 1 else ''}"))
    return 0


def _say_tags(path: Any) -> int:
    tags = _notes.read_notes(path).tags
    print(printable(f"{path}: tags {', '.join(tags) if tags else '(none)'}"))
    return 0
