"""What the sync tests check: a destination's files are prefixes of whole lines of the
source's, its artifacts the source's bytes, and in the end it holds what the source does.

A destination is read as docs/sync.md says: a folder's files as they are, an object store's
lines file as the segments its manifest names, in order.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

WRITER = Path(__file__).with_name("_sync_writer.py")

# file path relative to the destination -> its bytes there
Holdings = dict[str, bytes]


def folder_files(folder: Path) -> Holdings:
    """Return the run files of *folder* (no locks, no live-at-source markers, no hidden
    names: no sync state)."""
    found = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_file() and not rel.endswith((".lock", ".live")) and "/." not in f"/{rel}":
            found[rel] = path.read_bytes()
    return found


def folder_markers(folder: Path) -> dict[str, dict[str, Any]]:
    """Return the live-at-source markers of *folder*: the log each is beside -> its fields."""
    return {
        path.relative_to(folder).as_posix().removesuffix(".live"): json.loads(path.read_bytes())
        for path in sorted(folder.rglob("*.jsonl.live"))
    }


def store_markers(fs: Any, root: str) -> dict[str, dict[str, Any]]:
    """Return the live-at-source markers of a store: the log each is beside -> its fields."""
    fs.invalidate_cache()
    return {
        path[len(root) + 1 :].removesuffix(".live"): json.loads(fs.cat_file(path))
        for path in sorted(fs.find(root))
        if path.endswith(".jsonl.live")
    }


def store_files(fs: Any, root: str, seen: dict[str, bytes] | None = None) -> Holdings:
    """Return what an object-store destination holds, each lines file put back together.

    *seen* keeps the segments and artifacts read by an earlier call, by path and size: a
    segment a manifest names is never written again, nor is an artifact.
    """
    seen = {} if seen is None else seen
    found: Holdings = {}
    fs.invalidate_cache()
    for path, info in sorted(fs.find(root, detail=True).items()):
        rel = path[len(root) + 1 :]
        if rel.startswith(".") or rel.endswith(".live"):
            continue
        if rel.endswith(".seg/manifest.json"):
            name = rel.removesuffix(".seg/manifest.json")
            manifest = json.loads(fs.cat_file(path))
            parts = []
            for segment, size in manifest["segments"]:
                key = f"{root}/{name}.seg/{segment}:{size}"
                if key not in seen:
                    seen[key] = fs.cat_file(f"{root}/{name}.seg/{segment}")
                parts.append(seen[key])
            data = b"".join(parts)
            assert len(data) == manifest["bytes"], name
            found[name] = data
        elif ".artifacts/" in rel:
            key = f"{path}:{info['size']}"
            if key not in seen:
                seen[key] = fs.cat_file(path)
            found[rel] = seen[key]
        elif ".seg/" not in rel:
            found[rel] = fs.cat_file(path)
    return found


def check_prefixes(source: Holdings, dest: Holdings) -> None:
    """Assert that each lines file of *dest* is whole lines of the source's, and each other
    file the source's bytes."""
    for rel, data in dest.items():
        assert rel in source, f"{rel} is at the destination only"
        if rel.endswith((".jsonl", ".console.log")):
            assert source[rel].startswith(data), f"{rel} is no prefix of the source's"
            assert data == b"" or data.endswith(b"\n"), f"{rel} ends in a torn line"
            for line in data.splitlines():
                json.loads(line)
        else:
            assert data == source[rel], rel


def check_equal(source: Holdings, dest: Holdings) -> None:
    """Assert that *dest* holds what *source* does, byte for byte."""
    assert sorted(dest) == sorted(source)
    for rel, data in source.items():
        assert dest[rel] == data, rel


class Writer:
    """A child process that logs run *name* in *folder* when told to (`_sync_writer.py`)."""

    def __init__(self, folder: Path, name: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(WRITER), str(folder), name],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        self.records = 0
        self.expected = ""

    def start(self, records: int) -> None:
        """Have it log *records* more records; do not wait for them."""
        self._send(str(records))
        self.records += records
        self.expected = f"ack {self.records}"

    def wait(self) -> None:
        """Wait until what `start` asked for is written."""
        assert self.process.stdout is not None
        assert self.process.stdout.readline().strip() == self.expected

    def finish(self) -> None:
        """Have it close the run and end; do not wait for it."""
        self._send("end")

    def end(self) -> None:
        """Close the run and wait for the process to end."""
        self._send("end")
        self.expected = "ack end"
        self.wait()
        assert self.process.wait(timeout=60) == 0

    def kill(self) -> None:
        """End the process at once if it still runs (a failed test's clean-up); close pipes."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=60)
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()

    def _send(self, command: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()


def race(
    writer: Writer, passes: int, seed: int, one_pass: Callable[[], None], check: Callable[[], None]
) -> None:
    """Run *passes* passes, each while the writer logs a random number of records."""
    rng = random.Random(seed)
    writer.start(1)  # the run's folder and log exist
    writer.wait()
    for _ in range(passes):
        writer.start(rng.randint(1, 60))
        one_pass()
        check()
        writer.wait()
    writer.end()
