"""Helpers shared by the reliability suite: the long switch, strict parsing, child processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

import orjson

#: True when the long variants run (set by conftest.pytest_configure).
LONG = False
HERE = Path(__file__).resolve().parent
#: Seconds a child process may take before the test fails instead of hanging.
CHILD_TIMEOUT_S = 120


def examples(default: int, long: int) -> int:
    """Return the hypothesis example count: *default*, or *long* under --long."""
    return long if LONG else default


def _refuse_constant(token: str) -> None:
    msg = f"non-strict JSON token {token!r}"
    raise ValueError(msg)


def strict_loads(line: bytes | str) -> Any:
    """Parse one line with both strict parsers: json (NaN and Infinity refused) and orjson.

    Raises:
        ValueError: either parser refuses the line.
    """
    value = json.loads(line, parse_constant=_refuse_constant)
    orjson.loads(line)
    return value


def read_log(path: Path) -> tuple[list[dict[str, Any]], bytes]:
    """Return the records of every complete line of *path*, parsed strictly, and the torn tail.

    The tail is what follows the last newline: empty for a log that ends cleanly.
    """
    data = path.read_bytes()
    *lines, tail = data.split(b"\n")
    records = []
    for number, line in enumerate(lines, start=1):
        try:
            records.append(strict_loads(line))
        except ValueError as err:
            msg = f"{path} line {number} is not strict JSON ({err}): {line[:200]!r}"
            raise AssertionError(msg) from err
    return records, tail


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Return the environment for a child: this one, single-threaded math, not distributed."""
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    env.update({"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
    env.update(extra or {})
    return env


def spawn(
    script: str,
    *args: str,
    env: Mapping[str, str] | None = None,
    stdin: int | None = subprocess.DEVNULL,
    stdout: int | IO[bytes] = subprocess.PIPE,
    new_session: bool = False,
) -> subprocess.Popen[bytes]:
    """Start `python <script> <args>` (a script beside this file); stdout and stderr piped.

    A child that writes more than a pipe holds (64 KiB) before the test reads it must get a
    file as *stdout*, or it blocks. With *new_session* the child leads a process group of its
    own, so that `os.killpg` ends it with every process it forked.
    """
    return subprocess.Popen(
        [sys.executable, str(HERE / script), *args],
        env=child_env(env),
        stdin=stdin,
        stdout=stdout,
        stderr=subprocess.PIPE,
        start_new_session=new_session,
    )


def finish(
    child: subprocess.Popen[bytes], stdin: bytes | None = None, timeout_s: float = CHILD_TIMEOUT_S
) -> tuple[int, str, str]:
    """Wait for *child* (closing its pipes) and return (exit code, stdout, stderr).

    Raises:
        AssertionError: the child did not end within *timeout_s*; it is killed.
    """
    try:
        out, err = child.communicate(stdin, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        child.kill()
        out, err = child.communicate()
        msg = f"child {child.args!r} hung; stderr: {err.decode(errors='replace')[-2000:]}"
        raise AssertionError(msg) from None
    return child.returncode, (out or b"").decode(errors="replace"), err.decode(errors="replace")
