"""The hot path of Run.log: which path wrote a log, and the decisions made once per plan."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import runlines._encoding
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


class TestSpanNulls:
    """A span's line goes the careful way for a non-finite duration, not for a null in a name."""

    @pytest.mark.usefixtures("pure_python")
    def test_a_span_named_nullify_keeps_the_plain_path(
        self, run_dir: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        with Run("nullspace", run_dir, stdout=False) as run:
            calls: list[tuple[Any, ...]] = []
            careful = runlines._writer._encode_line_safe

            def spy(*args: Any) -> bytes:
                calls.append(args)
                return careful(*args)

            monkeypatch.setattr(runlines._writer, "_encode_line_safe", spy)
            monkeypatch.setattr(runlines._encoding, "encode_line_safe", spy)  # encode_line's
            for _ in range(3):
                with run.span("nullify"):
                    pass
            monkeypatch.undo()

        spans = [r for r in records(run.path) if r["event"] == "span"]
        assert calls == []
        assert [(r["name"], r["status"], "_nonfinite" in r) for r in spans] == [
            ("nullify", "ok", False)
        ] * 3

    def test_a_non_finite_duration_is_marked(self, run_dir: Path, fast_path: str) -> None:
        with Run("r", run_dir, stdout=False) as run:
            with run.span("step"):
                pass  # the name is redacted and remembered: the next record takes no detour
            run._writer.log_span("step", float("inf"), None, "ok", None, {})

        last = [r for r in records(run.path) if r["event"] == "span"][-1]
        assert (last["duration_s"], last["_nonfinite"]) == (None, {"/duration_s": "Infinity"})


class TestFront:
    """The writer's log() stands in front of Run.log, with the method's signature and doc."""

    def test_log_is_the_writers_own_with_the_methods_signature_and_doc(
        self, run_dir: Path, fast_path: str
    ) -> None:
        import inspect

        with Run("r", run_dir, stdout=False) as run:
            if fast_path == "python":
                assert run.log.__func__ is runlines._writer.Writer.log  # type: ignore[attr-defined]
            else:
                assert run.log is run._writer.twin
            assert str(inspect.signature(run.log)) == str(inspect.signature(run._writer.log))
            assert str(inspect.signature(run.log)) == "(event: 'str', /, **fields: 'Any') -> 'None'"
            assert run.log.__doc__ == Run.log.__doc__

    def test_a_subclass_calling_super_log_writes_each_record_once(self, run_dir: Path) -> None:
        class Tagged(Run):
            def log(self, event: str, /, **fields: object) -> None:
                super().log(event, tagged=True, **fields)

        with Tagged("r", run_dir, stdout=False) as run:
            run.log("train_step", step=1)
            run.log("train_step", step=2)
            with run.span("eval"):
                pass

        steps = [r for r in records(run.path) if r["event"] == "train_step"]
        assert [(r["step"], r["tagged"]) for r in steps] == [(1, True), (2, True)]
        assert [r["name"] for r in records(run.path) if r["event"] == "span"] == ["eval"]

    def test_a_closed_run_refuses_on_both_paths(self, run_dir: Path, fast_path: str) -> None:
        from runlines import RunStateError

        with Run("r", run_dir, stdout=False) as run:
            run.log("train_step", step=1)
            run.log("train_step", step=2)

        assert run._writer.open is False
        with pytest.raises(RunStateError, match="after it closed"):
            run.log("train_step", step=3)
        assert [r["event"] for r in records(run.path)][-1] == "run_end"
