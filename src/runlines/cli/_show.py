"""The `runlines show RUN` command: a run's start, status, attempts, events, spans and values."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

from runlines import _notes, _sync, reading
from runlines._layout import console_path
from runlines.cli._common import cell, duration, print_json, resolve_run, table, when
from runlines.cli._summaries import RunDetails, describe
from runlines.cli._terminal import printable
from runlines.reading._console import ConsoleLine, read_console

__all__ = ["add_commands"]

_CONFIG_KEYS: Final = 20  # `show` lists this many config keys unless --config
_CONSOLE_LINES: Final = 10  # `show` prints this much of a captured console unless --console
_ALIVE: Final = ("running", "stalled")  # the statuses of a run whose lock is held, or marked


def add_commands(subparsers: Any) -> None:
    """Add `show` to *subparsers* (from ``parser.add_subparsers()``)."""
    show = subparsers.add_parser(
        "show", help="show a run: start, status, events, spans, artifacts, media"
    )
    show.add_argument("run", metavar="RUN")
    show.add_argument("--config", action="store_true", help="list every config key")
    show.add_argument("--json", action="store_true", help="print what show gathers as JSON")
    show.add_argument(
        "--console",
        type=int,
        default=_CONSOLE_LINES,
        metavar="N",
        help=f"show the last N lines of the captured console (default {_CONSOLE_LINES}; 0: none)",
    )
    show.add_argument(
        "--console-at",
        type=int,
        metavar="STEP",
        help="show instead what the console printed at STEP (docs/console.md)",
    )
    show.set_defaults(handler=_show)


def _show(args: argparse.Namespace) -> int:
    path = resolve_run(args.run)
    details = describe(reading.log_file(path))
    ranks = [describe(log) for log in _rank_logs(path)]
    if args.console_at is None:
        console = _console_tail(path, max(args.console, 0))
        head = f"last {len(console or ())} lines"
    else:
        console = reading.console(path, step=args.console_at)
        head = f"at step {args.console_at}, {len(console)} lines"
    if args.json:
        shown = _show_json(details, ranks)
        if console is not None:
            shown["console"] = [line._asdict() for line in console]
        print_json(shown)
        return 0
    print(_show_header(details))
    limit = None if args.config else _CONFIG_KEYS
    sections = (
        _attempts,
        _notes_section,
        lambda d: _config(d, limit),
        _events,
        _spans,
        _artifacts,
        _media,
        _last_values,
    )
    for section in sections:
        text = section(details)
        if text:
            print()
            print(text)
    for rank in ranks:
        print()
        print(_rank_section(rank))
    if console or args.console_at is not None:
        print()
        print(_console_section(path, console or [], head))
    return 0


def _console_tail(path: Path, lines: int) -> list[ConsoleLine] | None:
    """Return the last *lines* lines of the run's captured console; None without one."""
    if not lines:
        return None
    try:
        return read_console(console_path(path), lines)
    except OSError:  # no capture, or no access to it: nothing to show
        return None


def _console_section(path: Path, console: list[ConsoleLine], what: str) -> str:
    """Return the console's lines under *what*, each with its local time; stderr's marked `!`."""
    head = printable(f"console, {what} ({console_path(path)})")
    rows = [
        f"  {when(line.ts)[11:] or '-'} {'!' if line.stream == 'err' else ' '} "
        + printable(line.text)
        for line in console
    ]
    return "\n".join([head, *rows])


def _rank_logs(path: Path) -> list[reading.LogFile]:
    """Return the rank files that sit next to the main log *path*, by rank."""
    run = reading.log_file(path).run
    found = [reading.log_file(p) for p in path.parent.glob(f"{run}.rank*{reading.LOG_SUFFIX}")]
    return sorted(
        (log for log in found if log.run == run and log.rank), key=lambda log: log.rank or 0
    )


def _show_json(details: RunDetails, ranks: list[RunDetails]) -> Any:
    def one(d: RunDetails) -> dict[str, Any]:
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
            "media": [
                {"kind": kind, "name": name, "count": count}
                for (kind, name), count in d.media.items()
            ],
            "last": d.last_values(),
        }

    notes = _notes.read_notes(details.log.path)  # the run's, beside its main log
    tagged = {"tags": notes.tags, "notes": notes.notes}
    return {**one(details), **tagged, "ranks": [one(rank) for rank in ranks]}


def _run_config(details: RunDetails) -> Any:
    """Return the run's config as logged: that of the last attempt that gave one."""
    configs = [s["config"] for s in details.starts if isinstance(s.get("config"), Mapping)]
    given = [config for config in configs if config]
    return given[-1] if given else (configs[-1] if configs else None)


def _attempts(details: RunDetails) -> str:
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
            when(attempt["started"]),
            duration(attempt["duration_s"]),
            ended,
            cell(attempt.get("dropped")),
        ]
        if changed:
            row.append(_changes(attempt.get("config_changes") or {}))
        rows.append(row)
    header = ["ATTEMPT", "STARTED", "DURATION", "ENDED", "DROPPED"]
    text = "attempts\n" + table([*header, *(["CONFIG CHANGED"] if changed else [])], rows, "  ")
    drops = [
        [str(a["attempt"]), str(sink), cell(count)]
        for a in details.attempts
        if isinstance(a.get("dropped_by_sink"), Mapping)
        for sink, count in a["dropped_by_sink"].items()
    ]
    if drops:
        text += "\n\ndrops per sink\n" + table(["ATTEMPT", "SINK", "DROPPED"], drops, "  ")
    return text


def _changes(changed: Mapping[str, Any]) -> str:
    """Return an attempt's config changes as ``key: before -> after``, comma-separated."""
    if not changed:
        return "-"
    return ", ".join(f"{k}: {cell(old)} -> {cell(new)}" for k, (old, new) in changed.items())


def _show_header(details: RunDetails) -> str:
    start = details.starts[-1] if details.starts else {}
    rows = [
        ("run", details.log.run),
        ("log", str(details.log.path)),
        ("status", details.status),
        ("attempts", str(details.summary.attempts or 1)),
        ("started", when(details.first_ts)),
        ("duration", duration(details.duration_s)),
        ("host", _host(start)),
        ("git", _git(start)),
        ("command", _command(start.get("argv"))),
        ("tags", ", ".join(_notes.read_notes(details.log.path).tags) or "-"),
    ]
    if details.status == "died":
        rows.insert(3, ("last record", when(details.last_ts)))
    live = _sync.fresh_marker(details.log.path) if details.status in _ALIVE else None
    if live is not None:  # a synced copy: the status is what sync last saw at the source
        seen = f"{live.get('host', '?')} as of {when(live['ts'])} (runlines sync's marker)"
        rows.insert(3, ("live at", seen))
    end = details.attempts[-1] if details.attempts else {}
    if details.status == "failed" and end.get("exc_type"):
        rows.insert(3, ("error", f"{end['exc_type']}: {end.get('exc_message', '')}"[:200]))
    width = max(len(key) for key, _ in rows)
    return "\n".join(f"{key:<{width}}  {printable(value)}" for key, value in rows)


def _notes_section(details: RunDetails) -> str:
    """Return the notes `runlines note` gave the run, oldest first."""
    notes = _notes.read_notes(details.log.path).notes
    if not notes:
        return ""
    rows = [[when(entry["ts"]), entry["text"]] for entry in notes]
    return "notes\n" + table(["WRITTEN", "NOTE"], rows, "  ")


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


def _config(details: RunDetails, limit: int | None) -> str:
    config = _run_config(details)
    if not isinstance(config, Mapping) or not config:
        return ""
    items = _flatten(config)
    shown = items if limit is None else items[:limit]
    text = "config\n" + table(["KEY", "VALUE"], _pairs(shown), "  ")
    if len(shown) < len(items):
        more = len(items) - len(shown)
        text += f"\n  ... {more} more (runlines show --config {printable(str(details.log.path))})"
    return text


def _pairs(items: Iterable[tuple[str, Any]]) -> list[list[str]]:
    return [[key, cell(value)] for key, value in items]


def _events(details: RunDetails) -> str:
    """Return the event counts as load() counts them; records a later attempt superseded apart."""
    gone = details.superseded
    counts = sorted(
        ((e, n - gone.get(e, 0)) for e, n in details.counts.items()), key=lambda item: -item[1]
    )
    if not any(gone.values()):
        return "events\n" + table(["EVENT", "COUNT"], [[e, f"{n:,}"] for e, n in counts], "  ")
    rows = [[e, f"{n:,}", f"{gone.get(e, 0):,}"] for e, n in counts]
    return "events\n" + table(["EVENT", "COUNT", "SUPERSEDED"], rows, "  ")


def _spans(details: RunDetails) -> str:
    if not details.spans:
        return ""
    rows = [
        [name, *(cell(stats.get(k)) for k in ("count", "total_s", "mean_s", "max_s"))]
        for name, stats in details.spans.items()
    ]
    return "spans\n" + table(["SPAN", "COUNT", "TOTAL_S", "MEAN_S", "MAX_S"], rows, "  ")


def _artifacts(details: RunDetails) -> str:
    if not details.artifacts:
        return ""
    rows = [
        [
            cell(a.get("name")),
            cell(a.get("step")),
            _size(a.get("bytes")),
            cell(a.get("path")),
            str(a.get("sha256", "-"))[:12],
        ]
        for a in details.artifacts
    ]
    return "artifacts\n" + table(["NAME", "STEP", "SIZE", "PATH", "SHA256"], rows, "  ")


def _media(details: RunDetails) -> str:
    """Return the media records counted by kind and name (docs/media.md)."""
    if not details.media:
        return ""
    rows = [[kind, name, f"{count:,}"] for (kind, name), count in sorted(details.media.items())]
    return "media\n" + table(["KIND", "NAME", "COUNT"], rows, "  ")


def _size(value: Any) -> str:
    if not isinstance(value, int) or isinstance(value, bool):
        return "-"
    size = float(value)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return "-"


def _last_values(details: RunDetails) -> str:
    """Return the metrics' last values and bests (bookkeeping left out, as in runs())."""
    values = details.last_values()
    if not values:
        return ""
    rows = [
        [v["event"], v["field"], cell(v["value"]), cell(v["step"]), cell(v["best"])] for v in values
    ]
    return "last values\n" + table(["EVENT", "FIELD", "VALUE", "STEP", "BEST"], rows, "  ")


def _rank_section(details: RunDetails) -> str:
    head = printable(f"rank {details.log.rank} ({details.log.path}): {details.status}")
    parts = [head, _events(details), _last_values(details)]
    return "\n".join(part for part in parts if part)
