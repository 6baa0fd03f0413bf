"""The hot path of Run.log: which path wrote a log, and the decisions made once per plan."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import runlines._writer
from runlines import Run


def records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


class TestWriterField:
    def test_run_start_names_the_path_that_writes(self, run_dir: Path, fast_path: str) -> None:
        with Run("r", run_dir, stdout=False) as run:
            run.log("train_step", step=1)
            run.log("train_step", step=2)

        assert records(run.path)[0]["writer"] == fast_path

    def test_a_user_sink_or_fsync_is_written_by_python(self, run_dir: Path) -> None:
        from runlines.testing import MemorySink

        with Run("a", run_dir, stdout=False, sinks=[MemorySink()]) as a:
            a.log("train_step", step=1)
        with Run("b", run_dir, stdout=False, fsync=True) as b:
            b.log("train_step", step=1)

        assert records(a.path)[0]["writer"] == records(b.path)[0]["writer"] == "python"

    def test_a_subclass_with_its_own_log_is_written_by_python(self, run_dir: Path) -> None:
        class Counting(Run):
            def log(self, event: str, /, **fields: object) -> None:
                super().log(event, **fields)

        with Counting("r", run_dir, stdout=False) as run:
            run.log("train_step", step=1)

        assert records(run.path)[0]["writer"] == "python"


@pytest.mark.usefixtures("pure_python")
class TestNullCheck:
    """The pure path sends a line holding null to the careful path: None or NaN, not a name."""

    @pytest.mark.parametrize(
        ("name", "event", "key"),
        [("nullspace", "train_step", "loss"), ("r", "null_check", "loss"), ("r", "e", "nulls")],
    )
    def test_null_in_a_name_keeps_the_plain_path(
        self, run_dir: Path, monkeypatch: pytest.MonkeyPatch, name: str, event: str, key: str
    ) -> None:
        with Run(name, run_dir, stdout=False) as run:
            calls: list[tuple[Any, ...]] = []
            careful = runlines._writer._encode_line_safe

            def spy(*args: Any) -> bytes:
                calls.append(args)
                return careful(*args)

            monkeypatch.setattr(runlines._writer, "_encode_line_safe", spy)
            for step in range(3):
                run.log(event, step=step, **{key: 0.5})
            monkeypatch.undo()

        assert calls == []
        assert [r[key] for r in records(run.path) if r["event"] == event] == [0.5] * 3

    def test_nan_in_a_nullspace_run_still_raises_the_alarm(self, run_dir: Path) -> None:
        with Run("nullspace", run_dir, stdout=False) as run, pytest.warns(match="non-finite"):
            run.log("train_step", step=1, loss=0.5)
            run.log("train_step", step=2, loss=float("nan"))

        nonfinite = [r for r in records(run.path) if r["event"] == "nonfinite"]
        assert [(r["field"], r["last_finite"]) for r in nonfinite] == [("loss", 0.5)]
