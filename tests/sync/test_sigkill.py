"""`runlines sync` killed with SIGKILL mid-pass, again and again: the reruns converge, with no
byte sent twice and none missing."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from _sync_checks import check_equal, folder_files

import runlines

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="no SIGKILL here")


def _big_source(folder: Path) -> None:
    """A finished run with a 40 MB log and 120 artifacts, half of them duplicates."""
    with runlines.Run("big", folder, stdout=False) as run:
        for index in range(120):
            run.artifact("chunk", random.Random(index % 60).randbytes(65_536), step=index)
    pad = "p" * 400
    lines = b"".join(
        b'{"ts": 1.0, "event": "train_step", "run": "big", "step": %d, "pad": "%s"}\n'
        % (step, pad.encode())
        for step in range(100_000)
    )
    with (folder / "big.jsonl").open("ab") as out:
        out.write(lines)
    runlines.note(folder / "big.jsonl", "a note")


def _bytes_at(folder: Path) -> int:
    total = 0
    for root, _dirs, names in os.walk(folder):
        for name in names:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except FileNotFoundError:  # renamed away meanwhile
                pass
    return total


def _sync_killed_at(source: Path, dest: Path, at_bytes: int) -> int | None:
    """Start `python -m runlines sync`, SIGKILL it once *dest* holds *at_bytes*; return the
    exit status when it ended first, else None."""
    process = subprocess.Popen(
        [sys.executable, "-m", "runlines", "sync", str(source), str(dest)],
        stdout=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        while _bytes_at(dest) < at_bytes:
            try:
                return process.wait(timeout=0.002)  # a poll, with a pause between
            except subprocess.TimeoutExpired:
                continue
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
        return None
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=60)


def test_sigkill_mid_pass_then_a_rerun_converges(run_dir: Path, tmp_path: Path) -> None:
    _big_source(run_dir)
    dest = tmp_path / "copy"
    source = folder_files(run_dir)
    total = sum(map(len, source.values()))
    rng = random.Random(3)
    kills = 0

    for at_bytes in sorted(rng.randrange(1, total) for _ in range(8)):
        status = _sync_killed_at(run_dir, dest, at_bytes)
        kills += status is None
        held = folder_files(dest)
        for rel, data in held.items():  # a killed append may end mid-line: still a prefix
            assert source[rel].startswith(data), rel

    assert kills >= 4
    assert subprocess.run(
        [sys.executable, "-m", "runlines", "sync", str(run_dir), str(dest)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        check=True,
        capture_output=True,
    ).stdout
    check_equal(source, folder_files(dest))
