"""One pass of a sync: what the destination lacks of the sources' runs, sent (docs/sync.md).

A lines file is sent from the number of bytes the destination holds (the file's size, a
store's manifest) up to the source's last newline: what arrives is a prefix of the log made
of whole lines, and a pass killed midway is resumed from what did arrive. The destination's
bytes are checked against the source's before they are appended to; a source that is not
their continuation (a log deleted and written anew) is sent again from its start.

A log whose run is live at its source gets a live-at-source marker beside its copy
(`live.py`, `_send_log`): the copy then reads as the source does, running, not died.
"""

from __future__ import annotations

import hashlib
import importlib
import io
import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from runlines._layout import LOG_SUFFIX, is_log_name
from runlines._sync.ends import ARTIFACT, LINES, WHOLE, End, Entry, FolderEnd
from runlines._sync.live import LIVE_FOR_S, LIVE_SUFFIX
from runlines.errors import ReadError

__all__ = ["Report", "cache_folder", "is_url", "local_copy", "open_end", "sync"]

_CHUNK: Final = 8 << 20  # bytes of a lines file read (and sent: one segment) at a time
_CHECKED: Final = 4096  # bytes before the resume offset compared with the source
_URL: Final = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_CACHE_ENV: Final = "RUNLINES_SYNC_CACHE"
_STORE_HINT: Final = "pip install 'runlines[sync-s3]' (s3fs and fsspec; gcsfs for gs://)"


@dataclass
class Report:
    """What one pass sent to *dest*: files appended to, copied and deduplicated, bytes, and
    the logs marked live at their source."""

    dest: str
    appended: int = 0
    copied: int = 0
    deduplicated: int = 0
    bytes_sent: int = 0
    sent: list[str] = field(default_factory=list)
    live: list[str] = field(default_factory=list)  # logs marked live at the source

    def describe(self) -> str:
        """Return one line for the command to print."""
        live = f"; {_count(len(self.live), 'log')} marked live at the source" if self.live else ""
        if not self.sent:
            return f"nothing new to send to {self.dest}: it holds every whole line and file{live}"
        parts = [f"lines appended to {_count(self.appended, 'file')}"]
        parts.append(f"{_count(self.copied, 'file')} copied")
        if self.deduplicated:
            parts.append(f"{_count(self.deduplicated, 'artifact')} deduplicated by sha256")
        return f"sent {self.bytes_sent} bytes to {self.dest}: {', '.join(parts)}{live}"


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def is_url(location: str | os.PathLike[str]) -> bool:
    """Return whether *location* is a URL (`s3://bucket/runs`), not a local path."""
    return isinstance(location, str) and _URL.match(location) is not None


def open_end(location: str | os.PathLike[str]) -> End:
    """Return the end at *location*: a folder, or an object store's prefix for a URL."""
    if not is_url(location):
        return FolderEnd(Path(location))
    try:
        store = importlib.import_module("runlines._sync.store")
    except ImportError as err:
        msg = f"syncing with {location} needs fsspec and its backend: {_STORE_HINT} ({err})"
        raise ImportError(msg) from err
    end: End = store.StoreEnd(str(location))
    return end


def sync(
    sources: Sequence[str | os.PathLike[str]],
    dest: str | os.PathLike[str],
    *,
    live_for_s: float = LIVE_FOR_S,
) -> Report:
    """Send what *dest* lacks of the runs in *sources* (folders, log files, store URLs).

    Beside each log whose run is live at its source (its lock held), a live-at-source
    marker that expires in *live_for_s* seconds (`live.py`); it is removed once the run is
    no longer live there, after the log's last lines.

    Raises:
        ReadError: a source that is missing, or two sources with a file of the same name.
    """
    target = open_end(dest)
    ends = [_source_end(source, dest) for source in sources]
    state = target.load_state()
    before = json.dumps(state, sort_keys=True)
    files: dict[str, Any] = state.setdefault("files", {})
    by_sha: dict[str, str] = state.setdefault("sha256", {})
    live = _Live(set(state.get("live", ())), live_for_s)
    report = Report(str(dest))
    pending: list[tuple[End, Entry]] = []
    # a log's size is taken before its folder's artifacts are listed: each artifact its
    # sent records point at arrives in this pass, and before them
    for end, entry in _entries(ends):
        if entry.kind == ARTIFACT:
            _send_artifact(end, entry, target, files, by_sha, report)
        else:
            pending.append((end, entry))
    for end, entry in sorted(pending, key=lambda pair: pair[1].kind != LINES):
        if entry.kind == LINES and is_log_name(entry.rel.rsplit("/", 1)[-1]):
            _send_log(end, entry, target, files, live, report)
        elif entry.kind == LINES:
            _send_lines(end, entry, target, files, report)
        elif entry.kind == WHOLE:
            _send_whole(end, entry, target, files, report)
    if live.marked or "live" in state:
        state["live"] = sorted(live.marked)
    if json.dumps(state, sort_keys=True) != before:  # a pass with nothing new writes nothing
        target.save_state(state)
    return report


def cache_folder(url: str) -> Path:
    """Return the local folder that `local_copy` syncs *url* down into.

    Under `$RUNLINES_SYNC_CACHE` if set, else `~/.cache/runlines/sync`: `s3://b/runs` is
    `<cache>/s3/b/runs`.
    """
    base = os.environ.get(_CACHE_ENV) or Path.home() / ".cache" / "runlines" / "sync"
    scheme, _, rest = url.partition("://")
    parts = [part for part in rest.split("/") if part and part not in (".", "..")]
    return Path(base, scheme, *parts)


def local_copy(source: str | os.PathLike[str]) -> str | os.PathLike[str]:
    """Return *source* itself, or for a URL the local folder it was just synced down into."""
    if not is_url(source):
        return source
    folder = cache_folder(str(source))
    sync([source], folder)
    return folder


def _source_end(source: str | os.PathLike[str], dest: str | os.PathLike[str]) -> End:
    if is_url(source):
        return open_end(source)
    path = Path(source)
    if path.is_dir():
        if not is_url(dest) and Path(dest).resolve().is_relative_to(path.resolve()):
            msg = f"{dest} is inside the source {source}; sync to a folder outside it"
            raise ReadError(msg, str(source))
        return FolderEnd(path)
    if path.is_file() and path.name.endswith(LOG_SUFFIX):
        return FolderEnd(path.parent, only=path.name.removesuffix(LOG_SUFFIX))
    msg = f"no such folder of logs or .jsonl log: {source}; pass folders, logs or store URLs"
    raise ReadError(msg, str(source))


def _entries(ends: list[End]) -> Iterator[tuple[End, Entry]]:
    owner: dict[str, End] = {}
    for end in ends:
        count = 0
        for entry in end.entries():
            first = owner.setdefault(entry.rel, end)
            if first is not end:
                msg = (
                    f"{first} and {end} both have {entry.rel}; sync them to two destinations"
                    " (or pass one)"
                )
                raise ReadError(msg, entry.rel)
            count += 1
            yield end, entry
        if not count and is_url(str(end)):
            msg = f"{end} holds no synced runs; check the URL (runlines sync writes them there)"
            raise ReadError(msg, str(end))


def _unchanged(entry: Entry, files: dict[str, Any]) -> bool:
    known = files.get(entry.rel)
    return known is not None and (known["size"], known["stamp"]) == (entry.size, entry.stamp)


@dataclass
class _Live:
    """The logs whose copies hold a live-at-source marker (the state's `live`), and its life."""

    marked: set[str]
    live_for_s: float


def _send_log(
    source: End, entry: Entry, target: End, files: dict[str, Any], live: _Live, report: Report
) -> None:
    """Send a log's new lines, and mark its copy live at the source, or no longer.

    The order keeps the copy's status the source's: a live run's marker goes before its
    lines (a reader never finds them unmarked), and is removed after them. A log whose run
    is not live is looked at again after that check: its run may have ended since `entries`
    took its size, and the copy must hold the run_end, not read `died`.
    """
    was_live = entry.rel in live.marked
    if not was_live and _unchanged(entry, files):
        return  # unchanged since a pass that found it not live: a run writes when it starts
    data = source.live(entry.rel, live.live_for_s)
    if data is not None:
        target.put(entry.rel + LIVE_SUFFIX, io.BytesIO(data))
        live.marked.add(entry.rel)
        report.live.append(entry.rel)
        _send_lines(source, entry, target, files, report)
        return
    now = source.refresh(entry)
    if now is not None:
        _send_lines(source, now, target, files, report)
    if was_live:
        target.remove(entry.rel + LIVE_SUFFIX)
        live.marked.discard(entry.rel)


def _send_lines(
    source: End, entry: Entry, target: End, files: dict[str, Any], report: Report
) -> None:
    if _unchanged(entry, files):
        return
    at = target.lines_size(entry.rel)
    if at and not _continues(source, entry, target, at):
        target.reset(entry.rel)
        at = 0
    sent = 0
    want = _CHUNK
    while at < entry.size:
        chunk = source.read(entry.rel, at, min(entry.size, at + want))
        cut = chunk.rfind(b"\n") + 1
        if cut == 0:
            if at + len(chunk) >= entry.size:
                break  # a line still being written: it goes once it ends
            want *= 2  # a line longer than a chunk
            continue
        target.append(entry.rel, chunk[:cut])
        at, sent, want = at + cut, sent + cut, _CHUNK
    files[entry.rel] = {"size": entry.size, "stamp": entry.stamp}
    if sent:
        report.appended += 1
        report.bytes_sent += sent
        report.sent.append(entry.rel)


def _continues(source: End, entry: Entry, target: End, at: int) -> bool:
    """Return whether the destination's first *at* bytes end as the source's do there."""
    if at > entry.size:
        return False
    first = max(0, at - _CHECKED)
    return target.read(entry.rel, first, at) == source.read(entry.rel, first, at)


def _send_artifact(
    source: End,
    entry: Entry,
    target: End,
    files: dict[str, Any],
    by_sha: dict[str, str],
    report: Report,
) -> None:
    if _unchanged(entry, files):
        return
    digest = hashlib.sha256()
    with source.open_read(entry.rel) as file:
        while block := file.read(1 << 20):
            digest.update(block)
    sha = digest.hexdigest()
    files[entry.rel] = {"size": entry.size, "stamp": entry.stamp, "sha256": sha}
    if target.size_of(entry.rel) == entry.size:
        by_sha.setdefault(sha, entry.rel)  # sent by a pass killed before its state
        return
    twin = by_sha.get(sha)
    if twin is not None and twin != entry.rel and target.size_of(twin) == entry.size:
        target.copy(twin, entry.rel)
        report.deduplicated += 1
    else:
        with source.open_read(entry.rel) as file:
            target.put(entry.rel, file)
        report.copied += 1
        report.bytes_sent += entry.size
    by_sha.setdefault(sha, entry.rel)
    report.sent.append(entry.rel)


def _send_whole(
    source: End, entry: Entry, target: End, files: dict[str, Any], report: Report
) -> None:
    if _unchanged(entry, files):
        return
    with source.open_read(entry.rel) as file:
        target.put(entry.rel, file)
    files[entry.rel] = {"size": entry.size, "stamp": entry.stamp}
    report.copied += 1
    report.bytes_sent += entry.size
    report.sent.append(entry.rel)
