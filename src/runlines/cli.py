"""The `runlines` command: ls, show, tail, compare, plot and which, each a call into reading."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import warnings
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, TextIO

from runlines import _native, reading
from runlines._cli_scale import add_commands as add_scale_commands
from runlines._version import __version__
from runlines.encoding import format_console
from runlines.errors import ReadError, RunlinesError, RunlinesWarning

__all__ = ["follow", "main"]

_WHICH_LEVELS: Final = 3  # `which` looks in the file's folder and this many parents
_POLL_S: Final = 0.5
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
            print(f"runlines: error: {err}", file=sys.stderr)
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
    print(f"runlines: warning: {message}", file=sys.stderr)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="runlines",
        description="Look at runlines logs: list runs, show one, follow it, compare and plot.",
        epilog="A RUN is a log file, or a run name looked up in the current folder (NAME.jsonl).",
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
    add_scale_commands(commands)
    return parser


def _add_ls(commands: Any) -> None:
    ls = commands.add_parser("ls", help="list the runs in a folder, one line each")
    ls.add_argument("dir", nargs="?", default=".", metavar="DIR", help="default: the current one")
    ls.set_defaults(handler=_ls)


def _add_show(commands: Any) -> None:
    show = commands.add_parser("show", help="show a run: start, status, events, spans, artifacts")
    show.add_argument("run", metavar="RUN")
    show.set_defaults(handler=_show)


def _add_tail(commands: Any) -> None:
    tail = commands.add_parser("tail", help="print a run's last records; -f to follow it")
    tail.add_argument("run", metavar="RUN")
    tail.add_argument("-n", type=_count, default=10, metavar="N", help="records (default 10)")
    tail.add_argument("-f", "--follow", action="store_true", help="wait for new records")
    tail.add_argument("--event", action="append", metavar="NAME", help="only this event")
    tail.add_argument("--poll", type=float, default=_POLL_S, metavar="S", help=argparse.SUPPRESS)
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
        sub.set_defaults(handler=_compare)


def _add_which(commands: Any) -> None:
    which = commands.add_parser("which", help="which run registered this file (by sha256)")
    which.add_argument("file", type=Path, metavar="FILE")
    which.add_argument("dir", nargs="?", type=Path, metavar="DIR", help="search logs under it")
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


def _resolve_run(text: str) -> Path:
    """Return the log of RUN *text*: a file, or ``<text>.jsonl`` in the current folder."""
    path = Path(text)
    if path.is_file():
        return path
    named = Path(f"{text}{reading.LOG_SUFFIX}")
    if named.is_file():
        return named
    if path.is_dir():
        msg = f"{text} is a folder; pass one log file or run name (list them: runlines ls {text})"
        raise ReadError(msg, text)
    msg = (
        f"no run {text!r}: there is no file {text} and no {named} in {Path.cwd()}; pass a log "
        "file, or a run name from the folder that holds its log (list them: runlines ls)"
    )
    raise ReadError(msg, text)


def _resolve_source(text: str) -> Path:
    return Path(text) if Path(text).is_dir() else _resolve_run(text)


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
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (int, str)):
        return str(value)
    return json.dumps(value, default=str)


def _table(header: Sequence[str], rows: Iterable[Sequence[str]], indent: str = "") -> str:
    """Return *rows* under *header* in aligned columns, numbers right-aligned."""
    rows = [list(header), *(list(row) for row in rows)]
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
    logs = reading.find_logs(args.dir)
    ranks: dict[str, int] = {}
    for log in logs:
        ranks[log.run] = ranks.get(log.run, 0) + 1
    mains = {log.run: log for log in sorted(logs, key=lambda log: -(log.rank or 0))}
    summaries = [(reading.summarize(log), ranks[run]) for run, log in sorted(mains.items())]
    rows = [_ls_row(summary, files) for summary, files in summaries if _is_log(summary)]
    header = ["RUN", "STATUS", "ATTEMPTS", "STARTED", "DURATION", "STEP", "METRIC"]
    print(_table(header, rows))
    return 0


def _is_log(summary: reading.RunSummary) -> bool:
    """Return whether *summary* is of a log; warn about a file whose lines are no records."""
    path = summary.log.path
    if summary.last is not None or summary.started is not None or path.stat().st_size == 0:
        return True
    warnings.warn(
        f"skipped {path}: none of its lines is a JSON object", RunlinesWarning, stacklevel=2
    )
    return False


def _ls_row(summary: reading.RunSummary, files: int) -> list[str]:
    name = summary.log.run + (f" ({files} ranks)" if files > 1 else "")
    status = summary.status
    if status == "died":
        status = f"died (last record {_when(summary.last)})"
    metric = f"{summary.metric}={_value(summary.value)}" if summary.metric else "-"
    return [
        name,
        status,
        str(summary.attempts),
        _when(summary.started),
        _duration(summary.duration_s),
        _value(summary.step),
        metric,
    ]


# --- show ------------------------------------------------------------------------------------


def _show(args: argparse.Namespace) -> int:
    path = _resolve_run(args.run)
    details = reading.describe(reading.log_file(path))
    print(_show_header(details))
    for section in (_config, _events, _spans, _artifacts, _last_values):
        text = section(details)
        if text:
            print()
            print(text)
    for log in _rank_logs(path):
        print()
        print(_rank_section(reading.describe(log)))
    return 0


def _show_header(details: reading.RunDetails) -> str:
    start = details.starts[-1] if details.starts else {}
    attempts = reading.attempt_count([(0, r) for r in details.starts])
    duration = None
    if details.first_ts is not None and details.last_ts is not None:
        duration = details.last_ts - details.first_ts
    rows = [
        ("run", details.log.run),
        ("log", str(details.log.path)),
        ("status", details.status),
        ("attempts", str(attempts)),
        ("started", _when(details.first_ts)),
        ("duration", _duration(duration)),
        ("host", _host(start)),
        ("git", _git(start)),
        ("command", _command(start.get("argv"))),
    ]
    if details.status == "died":
        rows.insert(3, ("last record", _when(details.last_ts)))
    end = details.ends[-1] if details.ends else {}
    if details.status == "failed" and end.get("exc_type"):
        rows.insert(3, ("error", f"{end['exc_type']}: {end.get('exc_message', '')}"[:200]))
    width = max(len(key) for key, _ in rows)
    return "\n".join(f"{key:<{width}}  {value}" for key, value in rows)


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


def _config(details: reading.RunDetails) -> str:
    config = details.starts[-1].get("config") if details.starts else None
    if not isinstance(config, Mapping) or not config:
        return ""
    return "config\n" + _table(["KEY", "VALUE"], _pairs(_flatten(config)), "  ")


def _pairs(items: Iterable[tuple[str, Any]]) -> list[list[str]]:
    return [[key, _value(value)] for key, value in items]


def _events(details: reading.RunDetails) -> str:
    counts = sorted(details.counts.items(), key=lambda item: -item[1])
    return "events\n" + _table(["EVENT", "COUNT"], [[e, f"{n:,}"] for e, n in counts], "  ")


def _spans(details: reading.RunDetails) -> str:
    if not details.spans:
        return ""
    rows = [
        [name, *(_value(stats.get(k)) for k in ("count", "total_s", "mean_s", "max_s"))]
        for name, stats in details.spans.items()
    ]
    return "spans\n" + _table(["SPAN", "COUNT", "TOTAL_S", "MEAN_S", "MAX_S"], rows, "  ")


def _artifacts(details: reading.RunDetails) -> str:
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


def _last_values(details: reading.RunDetails) -> str:
    if not details.last:
        return ""
    rows = [[name, _value(value), _value(step)] for name, (value, step) in details.last.items()]
    return "last values\n" + _table(["FIELD", "VALUE", "STEP"], rows, "  ")


def _rank_section(details: reading.RunDetails) -> str:
    head = f"rank {details.log.rank} ({details.log.path}): {details.status}"
    parts = [head, _events(details), _last_values(details)]
    return "\n".join(part for part in parts if part)


# --- tail ------------------------------------------------------------------------------------


def _tail(args: argparse.Namespace) -> int:
    path = _resolve_run(args.run)
    events = set(args.event) if args.event else None
    size = path.stat().st_size
    records = reading.last_records(path, args.n, events=events) if args.n else []
    if not records and not args.follow and args.n:  # -n 0 asks for nothing: not an error
        _explain_no_records(path, events)
    width = max([12, *(len(str(r.get("event", ""))) for r in records)])
    sys.stdout.writelines(format_console(record, width) for record in records)
    if not args.follow:
        return 0
    sys.stdout.flush()
    try:
        follow(path, sys.stdout, events=events, offset=size, poll_s=args.poll, width=width)
    except KeyboardInterrupt:
        return 0
    return 0


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
                out.write(format_console(record, width))
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
    header = [args.by, *(str(run) for run in table.columns)]
    rows = [
        [_value(_plain(at)), *(_value(_plain(v)) for v in values)]
        for at, values in table.iterrows()
    ]
    print(_table(header, rows))
    return 0


def _plain(value: Any) -> Any:
    """Return a numpy or pandas scalar as a Python number, and a missing value as None."""
    if hasattr(value, "item"):
        value = value.item()
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value


def _plot(args: argparse.Namespace) -> int:
    from runlines.plotting import plot_metric

    table = _compare_table(args)
    path = plot_metric(table, args.output, metric=args.metric, by=args.by)
    print(f"wrote {path} ({args.metric} by {args.by}, {len(table.columns)} runs)")
    return 0


# --- which -----------------------------------------------------------------------------------


def _which(args: argparse.Namespace) -> int:
    target: Path = args.file
    if not target.is_file():
        msg = f"no such file: {target}; pass the file whose run you want to find"
        raise ReadError(msg, str(target))
    digest = reading.sha256_of(target)
    logs = _logs_for_which(target, args.dir)
    matches = reading.find_artifact(digest, logs)
    if not matches:
        where = args.dir or f"{target.resolve().parent} and {_WHICH_LEVELS} folders up"
        msg = (
            f"no run registered a file with sha256 {digest[:16]}... ({len(logs)} logs searched in "
            f"{where}); pass the folder that holds the run logs: runlines which {target} DIR"
        )
        raise ReadError(msg, str(target))
    for match in matches:
        print(_which_line(match))
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


def _which_line(match: reading.ArtifactMatch) -> str:
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
