"""A job that leaves by SystemExit: its run_end says the exit code the process ends with.

Each case runs _exiting.py in a child process, its run inside `with Run(...)` or left open
(closed as the interpreter exits), and compares the child's exit code with run_end.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _reliability import HERE, child_env, finish, read_log, spawn

from runlines.reading import lifecycle, run_status


def _leave(
    how: str, where: str, run_dir: Path, *, as_module: bool = False
) -> tuple[int, dict[str, Any]]:
    """Run the child (as a script, or with `python -m`); return its exit code and its run_end."""
    if as_module:
        path = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
        child = subprocess.Popen(
            [sys.executable, "-m", "_exiting", how, where, str(run_dir)],
            env=child_env({"PYTHONPATH": path}),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    else:
        child = spawn("_exiting.py", how, where, str(run_dir))
    code, _, err = finish(child)
    records, tail = read_log(run_dir / "r.jsonl")
    ends = [r for r in records if r["event"] == "run_end"]
    assert (tail, len(ends)) == (b"", 1), err
    assert records[-1] is ends[0]
    return code, ends[0]


_FAILED_2 = {"status": "failed", "exit_code": 2, "exc_type": "SystemExit"}
_EXITS = [
    ("exit0", 0, {"status": "ok", "exit_code": 0}),
    ("exit_none", 0, {"status": "ok", "exit_code": 0}),
    ("exit2", 2, _FAILED_2),
    ("exit_message", 1, {"status": "failed", "exit_code": 1, "exc_message": "cannot continue"}),
    ("argparse", 2, _FAILED_2),
    ("thread", 0, {"status": "ok", "exit_code": None}),
    ("caught", 0, {"status": "ok", "exit_code": None}),
]


@pytest.mark.parametrize("where", ["with", "open"])
@pytest.mark.parametrize(("how", "code", "expected"), _EXITS)
def test_run_end_says_how_sys_exit_ended_the_job(
    run_dir: Path, where: str, how: str, code: int, expected: dict[str, Any]
) -> None:
    exit_code, end = _leave(how, where, run_dir)

    assert exit_code == code
    assert {key: end.get(key) for key in expected} == expected


def test_raise_system_exit_in_the_with_block_fails_the_run(run_dir: Path) -> None:
    exit_code, end = _leave("raise2", "with", run_dir)

    assert exit_code == 2
    assert {key: end.get(key) for key in _FAILED_2} == _FAILED_2


def test_a_failed_exit_is_failed_in_the_readers(run_dir: Path) -> None:
    _leave("exit2", "open", run_dir)

    log = run_dir / "r.jsonl"
    assert run_status(log, lifecycle(log)) == "failed"


def test_sys_exit_caught_in_the_top_level_code_leaves_the_run_ok(run_dir: Path) -> None:
    exit_code, end = _leave("caught_here", "open", run_dir)

    assert (exit_code, end["status"], end.get("exit_code")) == (0, "ok", None)


def test_sys_exit_of_a_module_run_with_dash_m_fails_the_run(run_dir: Path) -> None:
    exit_code, end = _leave("exit2", "open", run_dir, as_module=True)

    assert exit_code == 2
    assert {key: end.get(key) for key in _FAILED_2} == _FAILED_2
