"""An object store as an end of a sync, through fsspec (`s3://` with s3fs, `gs://`, ...).

Objects cannot be appended to, so a lines file `<rel>` is a folder of segments,
`<rel>.seg/000001`, `000002`, ..., each the whole lines one pass sent, and the manifest
`<rel>.seg/manifest.json` that names them, written after them: `{"format": 1, "bytes": N,
"segments": [["000001", n1], ...]}`. The file is the segments the manifest names, in order;
a segment the manifest does not name (a pass killed before its manifest) is written over by
the next pass. Artifacts, whole files, the state and live-at-source markers (`<log>.live`)
are plain objects at `<rel>`.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from typing import IO, Any, Final

import fsspec

from runlines._sync.ends import LINES, STATE_NAME, Entry, kind_of
from runlines._sync.live import LIVE_SUFFIX, is_fresh

__all__ = ["SEGMENTS_SUFFIX", "StoreEnd"]

SEGMENTS_SUFFIX: Final = ".seg"
_MANIFEST: Final = "manifest.json"
_FORMAT: Final = 1


class StoreEnd:
    """A prefix of an object store, named by its URL (`s3://bucket/runs`)."""

    def __init__(self, url: str, *, storage_options: dict[str, Any] | None = None) -> None:
        self.url = url
        self.fs, root = fsspec.core.url_to_fs(url, **(storage_options or {}))
        self.root = root.rstrip("/")
        self._manifests: dict[str, dict[str, Any]] = {}
        self._markers: set[str] = set()  # the live-at-source markers the listing found

    def __str__(self) -> str:
        return self.url

    def entries(self) -> Iterator[Entry]:
        self._manifests.clear()
        self.fs.invalidate_cache()  # a listing cached by an earlier pass misses new files
        found = self.fs.find(self.root, detail=True)
        self._markers = {path[len(self.root) + 1 :] for path in found if path.endswith(LIVE_SUFFIX)}
        for path, info in sorted(found.items()):
            rel = path[len(self.root) + 1 :]
            if rel.endswith(f"{SEGMENTS_SUFFIX}/{_MANIFEST}"):
                rel = rel[: -len(f"{SEGMENTS_SUFFIX}/{_MANIFEST}")]
                if kind_of(rel) == LINES:
                    size = self.lines_size(rel)
                    yield Entry(rel, LINES, size, str(size))
                continue
            kind = kind_of(rel)
            if kind is not None and kind != LINES and SEGMENTS_SUFFIX + "/" not in rel:
                stamp = info.get("ETag") or info.get("etag") or info.get("mtime") or ""
                yield Entry(rel, kind, int(info.get("size") or 0), f"{info['size']}:{stamp}")

    def read(self, rel: str, start: int, end: int) -> bytes:
        manifest = self._manifest(rel)
        parts = []
        at = 0
        for name, size in manifest["segments"]:
            first, last = max(start, at), min(end, at + size)
            if first < last:
                path = self._segment(rel, name)
                parts.append(self.fs.cat_file(path, start=first - at, end=last - at))
            at += size
        return b"".join(parts)

    def open_read(self, rel: str) -> IO[bytes]:
        file: IO[bytes] = self.fs.open(self._path(rel), "rb")
        return file

    def lines_size(self, rel: str) -> int:
        return int(self._manifest(rel)["bytes"])

    def append(self, rel: str, data: bytes) -> None:
        manifest = self._manifest(rel)
        name = f"{len(manifest['segments']) + 1:06d}"
        self.fs.pipe_file(self._segment(rel, name), data)
        segments = [*manifest["segments"], [name, len(data)]]
        self._write_manifest(rel, segments)

    def reset(self, rel: str) -> None:
        self._write_manifest(rel, [])

    def put(self, rel: str, source: IO[bytes]) -> None:
        with self.fs.open(self._path(rel), "wb") as out:  # the object appears when closed
            shutil.copyfileobj(source, out)

    def size_of(self, rel: str) -> int | None:
        try:
            return int(self.fs.info(self._path(rel))["size"])
        except FileNotFoundError:
            return None

    def copy(self, from_rel: str, rel: str) -> None:
        self.fs.copy(self._path(from_rel), self._path(rel))

    def load_state(self) -> dict[str, Any]:
        try:
            state: dict[str, Any] = json.loads(self.fs.cat_file(self._path(STATE_NAME)))
        except (FileNotFoundError, ValueError):
            return {}
        return state

    def save_state(self, state: dict[str, Any]) -> None:
        data = json.dumps(state, sort_keys=True).encode()
        self.fs.pipe_file(self._path(STATE_NAME), data)

    def live(self, rel: str, live_for_s: float) -> bytes | None:
        # no lock is held in a store: its marker, if fresh, is sent on as it is
        if rel + LIVE_SUFFIX not in self._markers:
            return None
        try:
            data: bytes = self.fs.cat_file(self._path(rel + LIVE_SUFFIX))
        except FileNotFoundError:  # removed since the listing: the run's end is there
            return None
        return data if is_fresh(data) else None

    def refresh(self, entry: Entry) -> Entry | None:
        if entry.kind != LINES:
            return entry
        self._manifests.pop(entry.rel, None)
        size = self.lines_size(entry.rel)
        return Entry(entry.rel, LINES, size, str(size))

    def remove(self, rel: str) -> None:
        try:
            self.fs.rm_file(self._path(rel))
        except FileNotFoundError:
            pass

    def _manifest(self, rel: str) -> dict[str, Any]:
        manifest = self._manifests.get(rel)
        if manifest is None:
            try:
                manifest = json.loads(self.fs.cat_file(self._segment(rel, _MANIFEST)))
            except FileNotFoundError:
                manifest = {"format": _FORMAT, "bytes": 0, "segments": []}
            self._manifests[rel] = manifest
        return manifest

    def _write_manifest(self, rel: str, segments: list[list[Any]]) -> None:
        total = sum(size for _, size in segments)
        manifest = {"format": _FORMAT, "bytes": total, "segments": segments}
        self.fs.pipe_file(self._segment(rel, _MANIFEST), json.dumps(manifest).encode())
        self._manifests[rel] = manifest

    def _path(self, rel: str) -> str:
        return f"{self.root}/{rel}"

    def _segment(self, rel: str, name: str) -> str:
        return f"{self.root}/{rel}{SEGMENTS_SUFFIX}/{name}"
