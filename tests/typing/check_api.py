"""Typical user code, checked by mypy --strict in .ci/run and never run.

A change that makes this file fail to type-check breaks users' type checking too.
"""

from __future__ import annotations

import io
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import runlines
from runlines import (
    Field,
    FieldError,
    ReadError,
    Redactor,
    Run,
    RunlinesError,
    RunlinesWarning,
    RunStateError,
    Vocabulary,
)


def train(directory: Path) -> Path:
    vocabulary = Vocabulary().extend(
        fields=[Field("tokens_seen", "integer", "tokens consumed so far")],
        aliases={"tok": "tokens_seen"},
    )
    redactor = Redactor(extra_keys=["ssn"], allow=["token_count"])
    with Run(
        "baseline",
        directory,
        config={"lr": 3e-4, "batch_size": 64},
        stdout=False,
        vocabulary=vocabulary,
        redact=redactor,
    ) as run:
        run.sample("batch", every=10, aggregate=True)
        for step in range(100):
            run.log("batch", step=step, loss=1.0 / (step + 1))
        with run.span("eval", split="val"):
            accuracy = 0.91
        run.log("eval", step=100, accuracy=accuracy)
        run.artifact("predictions", [[0.1, 0.9]], step=100)
        dropped: int = run.dropped
    assert run.closed
    assert dropped == 0
    path: Path = run.path
    return path


def read_back(path: Path) -> float:
    records: Iterator[dict[str, Any]] = runlines.iter_events(path, errors="raise")
    losses = [float(r["loss"]) for r in records if r["event"] == "batch"]
    frame = runlines.load(path, event="eval")
    by_step = runlines.compare(path, metric="loss")
    top = runlines.query("SELECT max(step) AS last FROM records", path)
    return min(losses) + float(frame["accuracy"].iloc[-1]) + len(by_step) + len(top)


class CountingSink:
    """A sink of the user's own: any object with write(line), flush() and close()."""

    def __init__(self) -> None:
        self.lines = 0

    def write(self, line: bytes) -> None:
        self.lines += 1

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


def extra_sinks(directory: Path) -> int:
    counting, stream = CountingSink(), io.BytesIO()  # a binary stream is a sink too
    with Run("sinks", directory, stdout=False, sinks=[counting, stream]) as run:
        run.log("train_step", step=1, loss=0.5)
    return counting.lines + len(stream.getvalue())


def handle(error: Exception) -> str:
    if isinstance(error, FieldError | ReadError | RunStateError):
        base: RunlinesError = error
        return str(base)
    return type(error).__name__


def warning_category() -> type[Warning]:
    return RunlinesWarning


with tempfile.TemporaryDirectory() as tmp:
    read_back(train(Path(tmp)))
    extra_sinks(Path(tmp))
