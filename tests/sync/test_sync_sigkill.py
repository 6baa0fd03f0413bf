"""`runlines sync` killed with SIGKILL mid-pass, again and again: the reruns converge, with no
byte sent twice and none missing."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _sync_checks import Holdings, check_equal, folder_files, store_files

import runlines

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="no SIGKILL here")


def _big_source(folder: Path, steps: int) -> None:
    """A finished run with *steps* lines of 480 bytes and 120 artifacts, half duplicates."""
    with runlines.Run("big", folder, stdout=False) as run:
        for index in range(120):
            run.artifact("chunk", random.Random(index % 60).randbytes(65_536), step=index)
    pad = "p" * 400
    lines = b"".join(
        b'{"ts": 1.0, "event": "train_step", "run": "big", "step": %d, "pad": "%s"}\n'
        % (step, pad.encode())
        for step in range(steps)
    )
    with (folder / "big.jsonl").open("ab") as out:
        out.write(lines)
    runlines.note(folder / "big.jsonl", "a note")


def _bytes_in(folder: Path) -> int:
    total = 0
    for root, _dirs, names in os.walk(folder):
        for name in names:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except FileNotFoundError:  # renamed away meanwhile
                pass
    return total


def _sync_killed_at(
    source: Path, dest: str, held: Callable[[], int], at_bytes: int, pause_s: float
) -> int | None:
    """Start `python -m runlines sync`, SIGKILL it once *held()* bytes reach *at_bytes*;
    return the exit status when it ended first, else None."""
    process = subprocess.Popen(
        [sys.executable, "-m", "runlines", "sync", str(source), dest],
        stdout=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        while held() < at_bytes:
            try:
                return process.wait(timeout=pause_s)  # a poll, with a pause between
            except subprocess.TimeoutExpired:
                continue
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
        return None
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=60)


@pytest.mark.parametrize("kind", ["folder", "s3"])
def test_sigkill_mid_pass_then_a_rerun_converges(
    kind: str, run_dir: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if kind == "folder":
        _big_source(run_dir, 80_000)
        dest, holdings, held = _folder_dest(tmp_path / "copy")
        pause_s = 0.002
    else:
        _big_source(run_dir, 20_000)
        dest, holdings, held = _store_dest(*request.getfixturevalue("bucket"))
        pause_s = 0.05  # each look is a listing the server (in this process) answers
    source = folder_files(run_dir)
    total = sum(map(len, source.values()))
    rng = random.Random(3)
    kills = 0

    for at_bytes in sorted(rng.randrange(1, total) for _ in range(8)):
        kills += _sync_killed_at(run_dir, dest, held, at_bytes, pause_s) is None
        for rel, data in holdings().items():  # a killed append may end mid-line: a prefix
            assert source[rel].startswith(data), rel

    assert kills >= 4
    whole = holdings() == source  # the last kill may land once that pass had sent everything
    rerun = subprocess.run(
        [sys.executable, "-m", "runlines", "sync", str(run_dir), dest],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        check=True,
        capture_output=True,
        text=True,
    )
    assert rerun.stdout.startswith("nothing new" if whole else "sent "), rerun.stdout
    check_equal(source, holdings())


Dest = tuple[str, Callable[[], Holdings], Callable[[], int]]


def _folder_dest(folder: Path) -> Dest:
    """Return the destination, what it holds, and its bytes (temporary files too)."""
    return str(folder), lambda: folder_files(folder), lambda: _bytes_in(folder)


def _store_dest(fs: Any, bucket: str) -> Dest:
    """Return the destination, what it holds, and its bytes (all objects)."""
    seen: dict[str, bytes] = {}

    def bytes_in() -> int:
        fs.invalidate_cache()
        return sum(int(info["size"]) for info in fs.find(bucket, detail=True).values())

    return f"s3://{bucket}/runs", lambda: store_files(fs, f"{bucket}/runs", seen), bytes_in
