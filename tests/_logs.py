"""Logs for the read side's tests: real ones written by Run, and hand-written odd or torn lines."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from runlines import Run
from runlines._encoding import encode_line
from runlines._layout import open_regular as real_open

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def line(event: str, run: str = "hand", ts: float = T0, **fields: Any) -> bytes:
    """Return one record as Run would write it, non-finite floats included."""
    return encode_line({"ts": ts, "event": event, "run": run, **fields})


def raw(value: Any) -> bytes:
    """Return any JSON value as one line, as a foreign writer might."""
    return orjson.dumps(value) + b"\n"


def write(path: Path, *lines: bytes) -> Path:
    """Write *lines* (bytes, newlines included) to *path* and return it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(lines))
    return path


def train(
    directory: Path,
    name: str,
    steps: range,
    *,
    resume_step: int | None = None,
    config: dict[str, Any] | None = None,
    evals: bool = False,
) -> Path:
    """Write a real log with Run: one train_step per step (loss = 1/step), evals every 2 steps."""
    with Run(
        name,
        directory,
        stdout=False,
        config=config,
        resume_step=resume_step,
        resume="allow",  # called again with a name: its next attempt, even after an ok end
        on_nonfinite="ignore",  # the fixtures' record counts are the records they log
    ) as run:
        for step in steps:
            run.log("train_step", epoch=step // 10, step=step, loss=1.0 / step, lr=0.1)
            if evals and step % 2 == 0:
                run.log("eval", step=step, split="val", accuracy=step / 100)
    return directory / f"{name}.jsonl"


def refuse_to_open(monkeypatch: pytest.MonkeyPatch, log: Path, how: str) -> None:
    """Make *log* unreadable to the readers: permission denied (another user's log; the tests
    run as root), or deleted by the time it is opened.
    """

    def open_regular(path: str | os.PathLike[str]) -> Any:
        if Path(path) == log:
            if how == "denied":
                raise PermissionError(13, "Permission denied", str(path))
            log.unlink(missing_ok=True)
        return real_open(path)

    monkeypatch.setattr("runlines.reading._lines.open_regular", open_regular)
