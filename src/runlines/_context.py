"""What a run records about its process: identity, host, versions, git state, distributed rank."""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from runlines import _layout
from runlines._version import __version__
from runlines.errors import FieldError

if TYPE_CHECKING:
    from pathlib import Path

_NAME_RE: Final = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
_RANK_SUFFIX_RE: Final = re.compile(r"\.rank\d+$")


class Distributed(NamedTuple):  # not a dataclass: dataclasses takes ~8 ms to import
    """The process's place in a distributed job, from the launcher's environment."""

    rank: int
    world_size: int


def check_run_name(name: object) -> str:
    """Return *name* if it can name a log file, else raise with the rule."""
    if not isinstance(name, str):
        msg = f"a run name must be a str, got {type(name).__name__} {name!r}"
        raise TypeError(msg)
    if not _NAME_RE.fullmatch(name) or _RANK_SUFFIX_RE.search(name):
        msg = (
            f"run name {name!r} cannot name a log file; use letters, digits, '.', '_' and '-', "
            "not starting with '.' and not ending in '.rank<N>' (e.g. 'baseline-lr3e-4')"
        )
        raise FieldError(msg)
    return name


def distributed_from_env(environ: Mapping[str, str] | None = None) -> Distributed | None:
    """Return the rank and world size that torchrun (or a launcher like it) set, if above one."""
    env = os.environ if environ is None else environ
    try:
        world_size = int(env.get("WORLD_SIZE", "1"))
        rank = int(env.get("RANK", "0"))
    except ValueError:
        return None
    return Distributed(rank, world_size) if world_size > 1 else None


def log_path(directory: Path, name: str, dist: Distributed | None) -> Path:
    """Return this process's log file: <name>.jsonl, or <name>.rank<R>.jsonl for rank R > 0."""
    return _layout.log_path(directory, name, None if dist is None else dist.rank)


def new_run_id() -> str:
    """Return an identifier unique to this process's run, sortable by start time."""
    import secrets  # imported when a run opens, not with runlines

    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return f"{stamp}-{os.getpid()}-{secrets.token_hex(3)}"


def describe_process() -> dict[str, Any]:
    """Return host, pid, versions, argv, cwd and the git state of the working directory."""
    import platform  # imported when a run opens, not with runlines
    import socket

    cwd = os.getcwd()
    info: dict[str, Any] = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "python": platform.python_version(),
        "runlines": __version__,
        "argv": list(sys.argv),
        "cwd": cwd,
    }
    info.update(git_state(cwd))
    return info


def git_state(cwd: str) -> dict[str, Any]:
    """Return the commit and dirty flag of the git repository at *cwd*, or nothing."""
    commit = _git(cwd, "rev-parse", "HEAD")
    if commit is None:
        return {}
    status = _git(cwd, "status", "--porcelain", "--untracked-files=no")
    return {"git_commit": commit, "git_dirty": bool(status)}


def _git(cwd: str, *args: str) -> str | None:
    import subprocess  # imported when a run opens, not with runlines

    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None  # no git, or it hung: the run is still worth logging
    return done.stdout.strip() if done.returncode == 0 else None
