"""The `runlines` command: ls, show, tail, compare, plot and which, each a call into reading."""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import shlex
import sys
import time
import warnings
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TextIO

from runlines import _native, reading
from runlines._encoding import format_console
from runlines._version import __version__
from runlines.cli import _summaries
from runlines.cli._options import seconds
from runlines.cli._terminal import printable, printable_lines
from runlines.errors import ReadError, RunlinesError, RunlinesWarning
from runlines.reading._files import check_source
from runlines.reading._lines import RAISE_HINT, decode_line, open_log
from runlines.reading._rules import foreign_log_message, json_ready
from runlines.reading._table import quick_summary_of, summary_of

__all__ = ["COMMAND_GROUPS", "follow", "main", "resolve_run"]

_WHICH_LEVELS: Final = 3  # `which` looks in the file's folder and this many parents
_POLL_S: Final = 0.5
# Modules that add commands: each has `add_commands(subparsers)` (see cli/_scale.py).
COMMAND_GROUPS: list[str] = [
    "runlines.cli._scale",
    "runlines.cli._diff",
    "runlines.cli._top",
    "runlines.cli._compact",
    "runlines.cli._serve",
]
_RUNS_DIR: Final = "runs"  # a bare run name not found here is looked up in runs/ too
_CONFIG_KEYS: Final = 20  # `show` lists this many config keys unless --config
_CANDIDATES: Final = 10  # an ambiguous run name's error lists this many of its logs
_HEAD_BYTES: Final = 1 << 16  # a run's name is read from its first line, up to this long
_sleep: Callable[[float], None] = time.sleep  # tests replace it to drive `tail -f` step by step


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
    _add_ls(commands)
    _add_show(commands)
    _add_tail(commands)
    _add_compare(commands, "compare", "print a metric per run, one row per step")
    _add_compare(commands, "plot", "plot a metric per run to a PNG")
    _add_which(commands)
    for group in COMMAND_GROUPS:
        importlib.import_module(group).add_commands(commands)
    return parser


def _add_ls(commands: Any) -> None:
    ls = commands.add_parser("ls", help="list the runs in folders, one line each")
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
    ls.set_defaults(handler=_ls)


def _add_show(commands: Any) -> None:
    show = commands.add_parser("show", help="show a run: start, status, events, spans, artifacts")
    show.add_argument("run", metavar="RUN")
    show.add_argument("--config", action="store_true", help="list every config key")
    show.add_argument("--json", action="store_true", help="print what show gathers as JSON")
    show.set_defaults(handler=_show)


def _add_tail(commands: Any) -> None:
    tail = commands.add_parser("tail", help="print a run's last records; -f to follow it")
    tail.add_argument("run", metavar="RUN")
    tail.add_argument("-n", type=_count, default=10, metavar="N", help="records (default 10)")
    tail.add_argument("-f", "--follow", action="store_true", help="wait for new records")
    tail.add_argument("--event", action="append", metavar="NAME", help="only this event")
    tail.add_argument("--poll", type=seconds, default=_POLL_S, metavar="S", help=argparse.SUPPRESS)
    tail.set_defaults(handler=_tail)


def _add_compare(commands: Any, name: str, summary: str) -> None:
    sub = commands.add_parser(name, help=summary)
    sub.add_argument("runs", nargs="+", metavar="RUN", help="log files, run names or folders")
    sub.add_argument("--metric", required=True, metavar="M", help="the field to compare")
    sub.add_argument("--by", default="step", metavar="FIELD", help="the x field (default: step)")
    sub.add_argument("--agg", default="mean", choices=reading.AGGREGATIONS)
    sub.add_argument("--event", metavar="NAME", help="only records of this event")
    if name == "plot":
        sub.add_argument("-o", "--output", required=True, type=Path, metavar="FILE.png")
        sub.set_defaults(handler=_plot)
    else:
        sub.add_argument("--json", action="store_true", help="print the table as JSON")
        sub.set_defaults(handler=_compare)


def _add_which(commands: Any) -> None:
    which = commands.add_parser("which", help="which run registered a file or folder (by sha256)")
    which.add_argument("file", type=Path, metavar="PATH", help="a file or a folder artifact")
    which.add_argument("dir", nargs="?", type=Path, metavar="DIR", help="search logs under it")
    which.add_argument("--json", action="store_true", help="print the matches as JSON")
    which.set_defaults(handler=_which)


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        msg = f"expected a count of records (0 or more), got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


# --- finding runs ----------------------------------------------------------------------------


def resolve_run(text: str) -> Path:
    """Return the log of RUN *text*: a file, ``<text>.jsonl`` in the current folder or in
    runs/, or the log under the current folder that `ls -r` lists as *text*.

    Raises:
        ReadError: no such run, a name several logs have, a folder, or a FIFO, socket or
            device named like a log.
    """
    candidates = _run_candidates(text)
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    path, named = candidates[:2]
    if path.is_dir():
        msg = f"{text} is a folder; pass one log file or run name (list them: runlines ls {text})"
        raise ReadError(msg, text)
    for candidate in candidates:
        if candidate.exists():
            check_source(candidate)  # the readers' rule: a FIFO would block, refuse it
    listed = _listed_as(text)
    if len(listed) == 1:
        return listed[0]
    if listed:
        shown = ", ".join(str(p) for p in listed[:_CANDIDATES])
        more = f" and {len(listed) - _CANDIDATES} more" if len(listed) > _CANDIDATES else ""
        msg = (
            f"run {text!r} is ambiguous: {len(listed)} logs under {Path.cwd()} are named so "
            f"({shown}{more}); pass the log file of the one you mean"
        )
        raise _AmbiguousRunError(msg, text)
    msg = (
        f"no run {text!r}: there is no file {text}, and no {named} in {Path.cwd()}, in "
        f"{_RUNS_DIR}/ or in a subfolder; pass a log "
        "file, or a run name from the folder that holds its log (list them: runlines ls)"
    )
    raise ReadError(msg, text)


class _AmbiguousRunError(ReadError):
    """A run name that several logs have: `tail -f` waits for no run then."""


def _listed_as(text: str) -> list[Path]:
    """Return the logs under the current folder that `ls -r` names *text*, by path.

    A log is named by its label where two folders hold runs of one name (`exp1/baseline`), by
    the run name its first record holds, and by its file name without `.jsonl` (a rank file's
    too: `ddp.rank1`). A label names one log, so it wins over the other names.
    """
    if not text or Path(text).is_absolute():
        return []
    logs = [reading.log_file(path) for path in _logs_below(Path("."))]
    mains = [log for log in logs if log.rank is None]
    labels = reading.run_labels(mains)
    labelled = [log.path for log in mains if labels.get(log.path) == text]
    if labelled:
        return labelled
    named = {log.path for log in logs if log.path.name == f"{text}{reading.LOG_SUFFIX}"}
    named |= {log.path for log in mains if log.path not in labels and _run_name(log.path) == text}
    return sorted(named)


def _run_name(path: Path) -> str | None:
    """Return the run name the first record of *path* holds; None when it holds none."""
    try:
        with open_log(path) as stream:
            record = decode_line(stream.readline(_HEAD_BYTES))
    except (OSError, ReadError, ValueError):  # unreadable, or no record on the first line
        return None
    name = record.get("run")
    return name if isinstance(name, str) else None


def _run_candidates(text: str) -> list[Path]:
    """Return where RUN *text* may be: the path, NAME.jsonl here, then in runs/."""
    path = Path(text)
    named = Path(f"{text}{reading.LOG_SUFFIX}")
    under_runs = [] if path.is_absolute() else [Path(_RUNS_DIR, named)]  # the Quick start's
    return [path, named, *under_runs]


def _resolve_source(text: str) -> Path:
    return Path(text) if Path(text).is_dir() else resolve_run(text)


def _rank_logs(path: Path) -> list[reading.LogFile]:
    """Return the rank files that sit next to the main log *path*, by rank."""
    run = reading.log_file(path).run
    found = [reading.log_file(p) for p in path.parent.glob(f"{run}.rank*{reading.LOG_SUFFIX}")]
    return sorted(
        (log for log in found if log.run == run and log.rank), key=lambda log: log.rank or 0
    )


# --- formatting ------------------------------------------------------------------------------


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))
    except (OverflowError, OSError, ValueError):  # a ts no clock can show (1e20, NaN)
        return "-"


def _duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


def _value(value: Any) -> str:
    """Return a cell of a table: ``-`` for no value, ``nan``, ``inf`` and ``-inf`` as logged."""
    value = _plain(value)
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (int, str)):
        return str(value)
    return json.dumps(value, default=str)


def _table(header: Sequence[str], rows: Iterable[Sequence[str]], indent: str = "") -> str:
    """Return *rows* under *header* in aligned columns, numbers right-aligned, each cell
    `printable`.
    """
    rows = [[printable(cell) for cell in row] for row in (header, *rows)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    numeric = [all(_is_numeric(row[i]) for row in rows[1:]) for i in range(len(header))]
    lines = []
    for row in rows:
        cells = [
            c.rjust(w) if num else c.ljust(w)
            for c, w, num in zip(row, widths, numeric, strict=True)
        ]
        lines.append(indent + "  ".join(cells).rstrip())
    return "\n".join(lines)


def _is_numeric(text: str) -> bool:
    try:
        float(text.replace(",", ""))
    except ValueError:
        return text == "-"
    return True


# --- ls --------------------------------------------------------------------------------------


def _ls(args: argparse.Namespace) -> int:
    logs = _ls_logs(args.sources, recursive=args.recursive)
    ranks: dict[tuple[Path, str], int] = {}
    for log in logs:
        key = (log.path.parent, log.run)
        ranks[key] = ranks.get(key, 0) + 1
    mains = [log for log in logs if log.rank is None]
    labels = reading.run_labels(mains)
    # the table's key columns need no full read of a big log; --json shows every column
    read = summary_of if args.json or args.columns else quick_summary_of
    rows = []
    for log in mains:
        summary = _readable_summary(read, log, labels.get(log.path))
        if summary is not None:
            row = summary.row()
            row["_last_ts"] = summary.last_ts
            row["_files"] = ranks[(log.path.parent, log.run)]
            rows.append(row)
    rows = _sorted_rows(rows, args.sort)
    if args.json:
        print(json.dumps([_json_row(r) for r in rows], default=str, allow_nan=False))
        return 0
    extra = [c for c in (args.columns or "").split(",") if c]
    header = ["RUN", "STATUS", "ATTEMPTS", "STARTED", "DURATION", "STEP", "METRIC"]
    print(_table([*header, *(c.upper() for c in extra)], [_ls_row(r, extra) for r in rows]))
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
        reason = _summaries.unreadable_reason(err)
        if reason is None:
            raise
    _summaries.warn_unreadable(log.path, reason)
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
        below = _logs_below(folder)
        if below:
            return below
    try:
        return [log.path for log in reading.find_logs(folder)]
    except ReadError:
        below = [] if recursive else [p for p in _logs_below(folder) if p.parent != folder]
        if not below:
            raise
    more = f", {len(below) - 1} more" if len(below) > 1 else ""
    msg = (
        f"{folder} has no *{reading.LOG_SUFFIX} logs of its own, but its subfolders hold "
        f"{len(below)} ({below[0].relative_to(folder)}{more}); list them with: "
        f"runlines ls -r {shlex.quote(str(folder))}"
    )
    raise ReadError(msg, str(folder))


def _logs_below(folder: Path) -> list[Path]:
    """Return every log file in *folder* and its subfolders, by path (what `ls -r` lists)."""
    return sorted(p for p in folder.rglob(f"*{reading.LOG_SUFFIX}") if p.is_file())


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
        status = f"died (last record {_when(row['_last_ts'])})"
    metric = _main_metric(row)
    started = row["started"].timestamp() if row["started"] is not None else None
    return [
        name,
        status,
        str(row["attempts"]),
        _when(started),
        _duration(row["duration_s"]),
        _value(row["step"]),
        f"{metric}={_value(row[metric])}" if metric else "-",
        *(_value(row.get(column)) for column in extra),
    ]


# --- show ------------------------------------------------------------------------------------


def _show(args: argparse.Namespace) -> int:
    path = resolve_run(args.run)
    details = _summaries.describe(reading.log_file(path))
    ranks = [_summaries.describe(log) for log in _rank_logs(path)]
    if args.json:
        print(json.dumps(json_ready(_show_json(details, ranks)), default=str, allow_nan=False))
        return 0
    print(_show_header(details))
    limit = None if args.config else _CONFIG_KEYS
    sections = (_attempts, lambda d: _config(d, limit), _events, _spans, _artifacts, _last_values)
    for section in sections:
        text = section(details)
        if text:
            print()
            print(text)
    for rank in ranks:
        print()
        print(_rank_section(rank))
    return 0


def _show_json(details: _summaries.RunDetails, ranks: list[_summaries.RunDetails]) -> Any:
    def one(d: _summaries.RunDetails) -> dict[str, Any]:
        return {
            "run": d.log.run,
            "path": str(d.log.path),
            "rank": d.log.rank,
            "status": d.status,
            "duration_s": d.duration_s,
            "attempts": d.attempts,
            "config": _run_config(d),
            "counts": {e: n - d.superseded.get(e, 0) for e, n in d.counts.items()},
            "superseded": d.superseded,
            "spans": d.spans,
            "artifacts": d.artifacts,
            "last": d.last_values(),
        }

    return {**one(details), "ranks": [one(rank) for rank in ranks]}


def _run_config(details: _summaries.RunDetails) -> Any:
    """Return the run's config as logged: that of the last attempt that gave one."""
    configs = [s["config"] for s in details.starts if isinstance(s.get("config"), Mapping)]
    given = [config for config in configs if config]
    return given[-1] if given else (configs[-1] if configs else None)


def _attempts(details: _summaries.RunDetails) -> str:
    changed = any(a.get("config_changes") for a in details.attempts)
    dropped = any(a.get("dropped") or a.get("dropped_by_sink") for a in details.attempts)
    if len(details.attempts) < 2 and not dropped:
        return ""
    rows = []
    for attempt in details.attempts:
        ended = attempt["status"] or "-"
        if attempt.get("exc_type"):
            ended += f" ({attempt['exc_type']})"
        row = [
            str(attempt["attempt"]),
            _when(attempt["started"]),
            _duration(attempt["duration_s"]),
            ended,
            _value(attempt.get("dropped")),
        ]
        if changed:
            row.append(_changes(attempt.get("config_changes") or {}))
        rows.append(row)
    header = ["ATTEMPT", "STARTED", "DURATION", "ENDED", "DROPPED"]
    text = "attempts\n" + _table([*header, *(["CONFIG CHANGED"] if changed else [])], rows, "  ")
    drops = [
        [str(a["attempt"]), str(sink), _value(count)]
        for a in details.attempts
        if isinstance(a.get("dropped_by_sink"), Mapping)
        for sink, count in a["dropped_by_sink"].items()
    ]
    if drops:
        text += "\n\ndrops per sink\n" + _table(["ATTEMPT", "SINK", "DROPPED"], drops, "  ")
    return text


def _changes(changed: Mapping[str, Any]) -> str:
    """Return an attempt's config changes as ``key: before -> after``, comma-separated."""
    if not changed:
        return "-"
    return ", ".join(f"{k}: {_value(old)} -> {_value(new)}" for k, (old, new) in changed.items())


def _show_header(details: _summaries.RunDetails) -> str:
    start = details.starts[-1] if details.starts else {}
    rows = [
        ("run", details.log.run),
        ("log", str(details.log.path)),
        ("status", details.status),
        ("attempts", str(details.summary.attempts or 1)),
        ("started", _when(details.first_ts)),
        ("duration", _duration(details.duration_s)),
        ("host", _host(start)),
        ("git", _git(start)),
        ("command", _command(start.get("argv"))),
    ]
    if details.status == "died":
        rows.insert(3, ("last record", _when(details.last_ts)))
    end = details.attempts[-1] if details.attempts else {}
    if details.status == "failed" and end.get("exc_type"):
        rows.insert(3, ("error", f"{end['exc_type']}: {end.get('exc_message', '')}"[:200]))
    width = max(len(key) for key, _ in rows)
    return "\n".join(f"{key:<{width}}  {printable(value)}" for key, value in rows)


def _host(start: Mapping[str, Any]) -> str:
    host = start.get("host")
    if not host:
        return "-"
    return f"{host}, pid {start['pid']}" if start.get("pid") is not None else str(host)


def _git(start: Mapping[str, Any]) -> str:
    commit = start.get("git_commit")
    if not commit:
        return "-"
    return f"{commit}{' (dirty)' if start.get('git_dirty') else ''}"


def _command(argv: object) -> str:
    """Return a run_start's argv as one line; a foreign log may hold anything there."""
    if isinstance(argv, list | tuple):
        return " ".join(map(str, argv)) or "-"
    return "-" if argv is None else str(argv)


def _flatten(config: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    items: list[tuple[str, Any]] = []
    for key, value in config.items():
        if isinstance(value, Mapping) and value:
            items.extend(_flatten(value, f"{prefix}{key}."))
        else:
            items.append((f"{prefix}{key}", value))
    return items


def _config(details: _summaries.RunDetails, limit: int | None) -> str:
    config = _run_config(details)
    if not isinstance(config, Mapping) or not config:
        return ""
    items = _flatten(config)
    shown = items if limit is None else items[:limit]
    text = "config\n" + _table(["KEY", "VALUE"], _pairs(shown), "  ")
    if len(shown) < len(items):
        more = len(items) - len(shown)
        text += f"\n  ... {more} more (runlines show --config {printable(str(details.log.path))})"
    return text


def _pairs(items: Iterable[tuple[str, Any]]) -> list[list[str]]:
    return [[key, _value(value)] for key, value in items]


def _events(details: _summaries.RunDetails) -> str:
    """Return the event counts as load() counts them; records a later attempt superseded apart."""
    gone = details.superseded
    counts = sorted(
        ((e, n - gone.get(e, 0)) for e, n in details.counts.items()), key=lambda item: -item[1]
    )
    if not any(gone.values()):
        return "events\n" + _table(["EVENT", "COUNT"], [[e, f"{n:,}"] for e, n in counts], "  ")
    rows = [[e, f"{n:,}", f"{gone.get(e, 0):,}"] for e, n in counts]
    return "events\n" + _table(["EVENT", "COUNT", "SUPERSEDED"], rows, "  ")


def _spans(details: _summaries.RunDetails) -> str:
    if not details.spans:
        return ""
    rows = [
        [name, *(_value(stats.get(k)) for k in ("count", "total_s", "mean_s", "max_s"))]
        for name, stats in details.spans.items()
    ]
    return "spans\n" + _table(["SPAN", "COUNT", "TOTAL_S", "MEAN_S", "MAX_S"], rows, "  ")


def _artifacts(details: _summaries.RunDetails) -> str:
    if not details.artifacts:
        return ""
    rows = [
        [
            _value(a.get("name")),
            _value(a.get("step")),
            _size(a.get("bytes")),
            _value(a.get("path")),
            str(a.get("sha256", "-"))[:12],
        ]
        for a in details.artifacts
    ]
    return "artifacts\n" + _table(["NAME", "STEP", "SIZE", "PATH", "SHA256"], rows, "  ")


def _size(value: Any) -> str:
    if not isinstance(value, int) or isinstance(value, bool):
        return "-"
    size = float(value)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return "-"


def _last_values(details: _summaries.RunDetails) -> str:
    """Return the metrics' last values and bests (bookkeeping left out, as in runs())."""
    values = details.last_values()
    if not values:
        return ""
    rows = [
        [v["event"], v["field"], _value(v["value"]), _value(v["step"]), _value(v["best"])]
        for v in values
    ]
    return "last values\n" + _table(["EVENT", "FIELD", "VALUE", "STEP", "BEST"], rows, "  ")


def _rank_section(details: _summaries.RunDetails) -> str:
    head = printable(f"rank {details.log.rank} ({details.log.path}): {details.status}")
    parts = [head, _events(details), _last_values(details)]
    return "\n".join(part for part in parts if part)


# --- tail ------------------------------------------------------------------------------------


def _tail(args: argparse.Namespace) -> int:
    events = set(args.event) if args.event else None
    try:
        path = resolve_run(args.run)
    except ReadError as err:
        there = any(p.exists() for p in _run_candidates(args.run))
        if not args.follow or there or isinstance(err, _AmbiguousRunError):
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


# --- compare, plot ---------------------------------------------------------------------------


def _compare_table(args: argparse.Namespace) -> Any:
    sources = [_resolve_source(run) for run in args.runs]
    return reading.compare(*sources, metric=args.metric, by=args.by, event=args.event, agg=args.agg)


def _compare(args: argparse.Namespace) -> int:
    table = _compare_table(args)
    runs = [str(run) for run in table.columns]
    # column by column: a row of a Float64 frame (iterrows) would read pd.NA back as NaN
    columns = [[_plain(v) for v in table[run].array] for run in table.columns]
    steps = [_plain(at) for at in table.index]
    if args.json:
        found = [
            {args.by: at, **dict(zip(runs, values, strict=True))}
            for at, *values in zip(steps, *columns, strict=True)
        ]
        print(json.dumps(json_ready(found), default=str, allow_nan=False))
        return 0
    rows = [[_value(v) for v in row] for row in zip(steps, *columns, strict=True)]
    print(_table([args.by, *runs], rows))
    return 0


def _plain(value: Any) -> Any:
    """Return a numpy or pandas scalar as a Python value: pd.NA and NaT (no record) as None,
    a NaN or an infinity as the float it is.
    """
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return None
    if hasattr(value, "item"):
        return value.item()
    return value


def _plot(args: argparse.Namespace) -> int:
    from runlines._plotting import nonfinite_count, plot_metric, runs_and_events

    table = _compare_table(args)
    path = plot_metric(table, args.output, metric=args.metric, by=args.by)
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
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


# --- which -----------------------------------------------------------------------------------


def _which(args: argparse.Namespace) -> int:
    target: Path = args.file
    if not target.is_file() and not target.is_dir():
        msg = f"no such file or folder: {target}; pass the file whose run you want to find"
        raise ReadError(msg, str(target))
    digest = reading.sha256_of(target)
    logs = _logs_for_which(target, args.dir)
    matches = _summaries.find_artifact(digest, logs)
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
        print(json.dumps(json_ready(found), default=str, allow_nan=False))
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
    return [reading.log_file(p) for p in paths if p.is_file()]


def _which_line(match: _summaries.ArtifactMatch) -> str:
    record = match.record
    parts = [
        f"run {match.log.run}",
        f"attempt {match.attempt}",
        f"step {_value(record.get('step'))}",
        f"artifact {record.get('name')!r}",
        f"path {record.get('path')}",
        f"log {match.log.path}",
    ]
    return "  ".join(parts)
