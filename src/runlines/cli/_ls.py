"""The `runlines ls` command: the runs of folders, logs or run names, one line each."""

from __future__ import annotations

import argparse
import shlex
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from runlines import reading
from runlines.cli._common import (
    cell,
    duration,
    logs_below,
    print_json,
    resolve_run,
    table,
    when,
)
from runlines.cli._compare import group_keys
from runlines.cli._summaries import unreadable_reason, warn_unreadable
from runlines.cli._terminal import printable
from runlines.errors import ReadError, RunlinesWarning
from runlines.reading._files import check_source
from runlines.reading._groups import group_rows
from runlines.reading._rules import foreign_log_message, json_ready
from runlines.reading._table import quick_summary_of, summary_of

__all__ = ["add_commands"]


def add_commands(subparsers: Any) -> None:
    """Add `ls` to *subparsers* (from ``parser.add_subparsers()``)."""
    ls = subparsers.add_parser("ls", help="list the runs in folders, one line each")
    ls.add_argument(
        "sources",
        nargs="*",
        default=["."],
        metavar="SOURCE",
        help="folders of logs, log files or run names (default: the current folder)",
    )
    ls.add_argument("-r", "--recursive", action="store_true", help="walk subfolders too")
    ls.add_argument("--sort", metavar="COLUMN", help="sort by a column; --sort=-COLUMN: descending")
    ls.add_argument("--columns", metavar="A,B", help="more columns: config.lr,eval.accuracy")
    ls.add_argument("--json", action="store_true", help="print every column as JSON")
    ls.add_argument("--group-by", metavar="K,K", help="one line per group of config keys (or auto)")
    ls.set_defaults(handler=_ls)


def _ls(args: argparse.Namespace) -> int:
    logs = _ls_logs(args.sources, recursive=args.recursive)
    ranks: dict[tuple[Path, str], int] = {}
    for log in logs:
        key = (log.path.parent, log.run)
        ranks[key] = ranks.get(key, 0) + 1
    mains = [log for log in logs if log.rank is None]
    labels = reading.run_labels(mains)
    # the table's key columns need no full read of a big log; --json shows every column
    read = summary_of if args.json or args.columns or args.group_by else quick_summary_of
    rows = []
    for log in mains:
        summary = _readable_summary(read, log, labels.get(log.path))
        if summary is not None:
            row = summary.row()
            row["_last_ts"] = summary.last_ts
            row["_files"] = ranks[(log.path.parent, log.run)]
            rows.append(row)
    if args.group_by:
        return _ls_groups(args, rows)
    rows = _sorted_rows(rows, args.sort)
    if args.json:
        print_json([_json_row(r) for r in rows])
        return 0
    extra = [c for c in (args.columns or "").split(",") if c]
    if any(row.get("tags") for row in rows) and "tags" not in extra:  # `runlines tag` gave some
        extra.insert(0, "tags")
    header = ["RUN", "STATUS", "ATTEMPTS", "STARTED", "DURATION", "STEP", "METRIC"]
    print(table([*header, *(c.upper() for c in extra)], [_ls_row(r, extra) for r in rows]))
    return 0


def _ls_groups(args: argparse.Namespace, rows: list[dict[str, Any]]) -> int:
    """Print one line per group of *rows*: its keys, n, and the main metric's mean ± std."""
    keys, groups = group_rows(rows, group_keys(args.group_by))
    if args.group_by.strip() == "auto":
        chosen = ", ".join(keys) or "(none: one group)"
        print(printable(f"runlines: grouped by {chosen} (auto)"), file=sys.stderr)
    groups = _sorted_rows(groups, args.sort)
    if args.json:
        print_json([_json_row(g) for g in groups])
        return 0
    metric = _main_metric({k: None for r in rows for k in r})
    extra = [c for c in (args.columns or "").split(",") if c]
    header = [*(k.upper() for k in keys), "N", "METRIC", *(c.upper() for c in extra)]
    lines = []
    for group in groups:
        shown = "-"
        if metric:
            mean, std = group.get(f"{metric}.mean"), group.get(f"{metric}.std")
            shown = f"{metric}={cell(mean)}" + (f" ± {cell(std)}" if std is not None else "")
        values = [cell(group[k]) for k in keys]
        lines.append([*values, str(group["n"]), shown, *(cell(group.get(c)) for c in extra)])
    print(table(header, lines))
    return 0


def _readable_summary(
    read: Callable[[reading.LogFile, str | None], reading.RunSummary],
    log: reading.LogFile,
    label: str | None,
) -> reading.RunSummary | None:
    """Return *read* of *log*; None, with a warning, for a log that cannot be read or is none."""
    try:
        summary = read(log, label)
        return summary if _is_log(summary) else None
    except (OSError, ReadError) as err:  # another user's log, one deleted meanwhile
        reason = unreadable_reason(err)
        if reason is None:
            raise
    warn_unreadable(log.path, reason)
    return None


def _ls_logs(sources: Sequence[str], *, recursive: bool) -> list[reading.LogFile]:
    """Return the logs `ls` lists: each folder's (with *recursive*, its subfolders' too), each
    log file or run name's, in the order of *sources*; a log named twice once.
    """
    paths: list[Path] = []
    for text in sources:
        source = _ls_source(text)
        paths.extend(_folder_logs(source, recursive=recursive) if source.is_dir() else [source])
    return reading.find_logs(*paths)


def _ls_source(text: str) -> Path:
    """Return the folder or log *text* names: a path, else a run name (`resolve_run`)."""
    path = Path(text)
    if path.exists():
        return path
    try:
        return resolve_run(text)
    except ReadError:
        check_source(path)  # the error of a missing folder or log
        raise


def _folder_logs(folder: Path, *, recursive: bool) -> list[Path]:
    """Return the logs of *folder*, by run; with *recursive*, every log under it, by path.

    Raises:
        ReadError: there is none; where its subfolders hold some, the error suggests `-r`.
    """
    if recursive:
        below = logs_below(folder)
        if below:
            return below
    try:
        return [log.path for log in reading.find_logs(folder)]
    except ReadError:
        below = [] if recursive else [p for p in logs_below(folder) if p.parent != folder]
        if not below:
            raise
    more = f", {len(below) - 1} more" if len(below) > 1 else ""
    msg = (
        f"{folder} has no *{reading.LOG_SUFFIX} logs of its own, but its subfolders hold "
        f"{len(below)} ({below[0].relative_to(folder)}{more}); list them with: "
        f"runlines ls -r {shlex.quote(str(folder))}"
    )
    raise ReadError(msg, str(folder))


def _sorted_rows(rows: list[dict[str, Any]], key: str | None) -> list[dict[str, Any]]:
    if not key:
        return rows
    column = key.removeprefix("-")
    if rows and all(column not in row for row in rows):
        known = sorted({name for row in rows for name in row if not name.startswith("_")})
        msg = f"no column {column!r} to sort by; columns: {', '.join(known)}"
        raise ReadError(msg)
    present = [r for r in rows if r.get(column) is not None]
    present.sort(key=lambda r: _sort_key(r[column]), reverse=key.startswith("-"))
    return present + [r for r in rows if r.get(column) is None]


def _sort_key(value: Any) -> tuple[int, Any]:
    return (0, value) if isinstance(value, (int, float)) else (1, str(value))


def _json_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """Return *row* for JSON: no private keys, datetimes as ISO text, NaN as "NaN"."""
    out = {}
    for key, value in row.items():
        if key.startswith("_"):
            continue
        out[key] = value.isoformat() if hasattr(value, "isoformat") else json_ready(value)
    return out


def _is_log(summary: reading.RunSummary) -> bool:
    """Return whether *summary* is of a runlines log; warn about a foreign JSONL."""
    if summary.is_runlines_log():
        return True
    warnings.warn(foreign_log_message(summary.path, left_out=True), RunlinesWarning, stacklevel=2)
    return False


def _main_metric(row: Mapping[str, Any]) -> str | None:
    """Return the metric `ls` shows: a `loss` (an eval's first), else the first metric."""
    metrics = [
        k for k in row if "." in k and not k.startswith("config.") and not k.endswith(".best")
    ]
    losses = [k for k in metrics if k.split(".", 1)[1] == "loss"]
    lossy = [k for k in metrics if "loss" in k.split(".", 1)[1]]
    evals = [k for k in losses if not k.startswith("train")]
    found = evals or losses or lossy or metrics
    return found[0] if found else None


def _ls_row(row: Mapping[str, Any], extra: Sequence[str]) -> list[str]:
    files = row["_files"]
    name = str(row["run"]) + (f" ({files} ranks)" if files > 1 else "")
    status = row["status"]
    if status == "died":
        status = f"died (last record {when(row['_last_ts'])})"
    metric = _main_metric(row)
    started = row["started"].timestamp() if row["started"] is not None else None
    return [
        name,
        status,
        str(row["attempts"]),
        when(started),
        duration(row["duration_s"]),
        cell(row["step"]),
        f"{metric}={cell(row[metric])}" if metric else "-",
        *(_ls_cell(row.get(column)) for column in extra),
    ]


def _ls_cell(value: Any) -> str:
    """Return a cell of `ls`: a list (the tags) as its items, comma-separated."""
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return ", ".join(value) or "-"
    return cell(value)
