"""The C fast paths (`_speedups/speedups.c`): built, taken for plain records, and never different.

Every record the fast path writes must be byte for byte what the pure-Python log() writes, and
every call it cannot take must reach the Python log() unchanged: the tests compare the two
paths side by side, under frozen time.
"""

from __future__ import annotations

import inspect
import json
import math
import os
import subprocess
import sys
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from freezegun import freeze_time
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import runlines._writer
from _extensions import import_extension
from _optional import skip_without
from runlines import FieldError, Run, RunStateError
from runlines.spans import Span

_speedups = import_extension("_speedups.speedups")
SpanBase, Writer = _speedups.SpanBase, _speedups.Writer

# RUNLINES_NO_SPEEDUPS=1 switches the C paths off on purpose: then there is nothing here to test.
pytestmark = pytest.mark.skipif(
    bool(os.environ.get("RUNLINES_NO_SPEEDUPS")), reason="RUNLINES_NO_SPEEDUPS=1 is set"
)


def lines_of(path: Path, event: str) -> list[bytes]:
    """The raw lines of *event* records, in order."""
    tag = b'"event":"' + event.encode() + b'"'
    return [line for line in path.read_bytes().splitlines() if tag in line]


def records(path: Path, event: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines_of(path, event)]


def open_run(directory: Path, *, pure: bool, name: str = "r", **kw: Any) -> Run:
    """A run on the C fast path, or on the pure-Python one (as without a C compiler)."""
    if not pure:
        return Run(name, directory, stdout=False, **kw)
    saved = runlines._writer._CWriter
    runlines._writer._CWriter = None
    try:
        return Run(name, directory, stdout=False, **kw)
    finally:
        runlines._writer._CWriter = saved


class TestTaken:
    def test_log_and_span_of_a_run_are_the_c_fast_paths(self, run_dir: Path) -> None:
        with Run("r", run_dir, stdout=False) as run:
            assert isinstance(run.log, Writer)
            assert isinstance(run.span("eval"), SpanBase)
            assert isinstance(run.span("eval"), Span)

    def test_help_shows_the_methods_signatures_and_docs(self, run_dir: Path) -> None:
        with Run("r", run_dir, stdout=False) as run:
            assert str(inspect.signature(run.log)) == "(event: 'str', /, **fields: 'Any') -> 'None'"
            assert run.log.__doc__ == Run.log.__doc__
            assert str(inspect.signature(run.span)) == "(name, /, **fields)"
            assert "with run.span" in (run.span.__doc__ or "")

    def test_plain_records_after_the_first_of_their_key_set_take_the_fast_path(
        self, run_dir: Path
    ) -> None:
        with Run("r", run_dir, stdout=False) as run:
            run.log("train_step", step=0, loss=0.5, done=False)  # plans the key set
            before = run._writer.twin.hits
            for step in range(1, 101):
                run.log("train_step", step=step, loss=0.5 / step, done=step == 100)
            assert run._writer.twin.hits - before == 100
        assert [r["step"] for r in records(run.path, "train_step")] == list(range(101))

    def test_without_the_extension_log_is_the_python_writers_method(self, run_dir: Path) -> None:
        with open_run(run_dir, pure=True) as run:
            assert run._writer.twin is None
            assert run.log.__func__ is runlines._writer.Writer.log  # type: ignore[attr-defined]
            run.log("step", seq=1)
            run.log("step", seq=2)
        assert [r["seq"] for r in records(run.path, "step")] == [1, 2]

    def test_a_subclass_that_overrides_log_keeps_its_own(self, run_dir: Path) -> None:
        seen: list[str] = []

        class Tagged(Run):
            def log(self, event: str, /, **fields: Any) -> None:
                seen.append(event)
                super().log(event, tagged=True, **fields)

        with Tagged("r", run_dir, stdout=False) as run:
            run.log("step", seq=1)
            run.log("step", seq=2)
        assert seen == ["step", "step"]
        assert [r["tagged"] for r in records(run.path, "step")] == [True, True]

    def test_run_subprocess_with_no_speedups_env_runs_pure_python(self, tmp_path: Path) -> None:
        code = (
            "import runlines._writer, runlines.spans, sys;"
            "print(runlines._writer._CWriter, runlines.spans.Span.__mro__[1].__name__)"
        )
        env = {**os.environ, "RUNLINES_NO_SPEEDUPS": "1"}
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        assert done.stdout.split() == ["None", "_PySpanBase"]


_NAMES = st.sampled_from(["step", "epoch", "loss", "lr", "grad_norm", "tokens", "x", "y"])
_PLAIN = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
)


class TestSameBytes:
    @settings(
        max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(rows=st.lists(st.dictionaries(_NAMES, _PLAIN, min_size=1, max_size=5), min_size=1))
    def test_plain_records_are_written_byte_for_byte_as_python_writes_them(
        self, tmp_path_factory: pytest.TempPathFactory, rows: list[dict[str, Any]]
    ) -> None:
        base = tmp_path_factory.mktemp("same")
        said = []
        for pure in (False, True):
            with warnings.catch_warnings(record=True) as caught, freeze_time("2026-11-30 01:02"):
                warnings.simplefilter("always")  # type drift between rows warns on both paths
                with open_run(base / ("pure" if pure else "c"), pure=pure) as run:
                    for row in rows * 2:  # the second round repeats every key set: fast
                        run.log("rec", **row)
            said.append([str(w.message) for w in caught])
        fast, slow = base / "c" / "r.jsonl", base / "pure" / "r.jsonl"
        assert lines_of(fast, "rec") == lines_of(slow, "rec")
        assert said[0] == said[1]

    def test_spans_are_written_byte_for_byte_as_python_writes_them(self, run_dir: Path) -> None:
        def work(run: Run) -> None:
            for _ in range(3):
                with run.span("epoch"), run.span("eval"):
                    pass
            with pytest.raises(KeyError), run.span("step"):
                raise KeyError("x")

        with freeze_time("2026-11-30 01:02:03"):
            for pure in (False, True):
                with open_run(run_dir / str(pure), pure=pure) as run:
                    work(run)
        fast, slow = run_dir / "False" / "r.jsonl", run_dir / "True" / "r.jsonl"
        assert lines_of(fast, "span") == lines_of(slow, "span")
        assert [(r["name"], r.get("parent"), r["status"]) for r in records(fast, "span")][-3:] == [
            ("eval", "epoch", "ok"),
            ("epoch", None, "ok"),
            ("step", None, "failed"),
        ]

    def test_the_run_end_span_summary_counts_fast_spans(self, run_dir: Path) -> None:
        with freeze_time("2026-11-30 01:02:03") as frozen, Run("r", run_dir, stdout=False) as run:
            for _ in range(4):
                with run.span("eval"):
                    frozen.tick(0.5)
        (end,) = records(run.path, "run_end")
        assert end["spans"]["eval"] == {"count": 4, "total_s": 2.0, "mean_s": 0.5, "max_s": 0.5}


def _tensor(value: float) -> Any:
    skip_without("torch")
    import torch

    return torch.tensor(value)


# Values a light plan takes: short strings (some with secrets or quotes), None, 0-d numpy and
# torch values, non-finite floats, and values that make the fast path hand the call back.
_LIGHT = st.one_of(
    _PLAIN,
    st.sampled_from(["train", "eval", 'say "hi"', "nullspace", "ada@example.org", ""]),
    st.sampled_from(["ghp_" + "a" * 36, "best@epoch12.ckpt", "x" * 300, "bad\ud800"]),
    st.text(max_size=8),
    st.none(),
    st.sampled_from([math.nan, math.inf]),
    st.floats(allow_nan=False, allow_infinity=False, width=32).map(_tensor),
    st.sampled_from([np.float32(0.5), np.int64(7), np.bool_(True), np.float64(1e300)]),
    st.sampled_from([np.zeros(2), "tensor-shape"]).map(
        lambda v: _tensor(1.0).reshape(1) if isinstance(v, str) else v
    ),
)


class TestLightSameBytes:
    """Strings and 0-d tensors: the fast path writes what Python writes, byte for byte."""

    @settings(
        max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(rows=st.lists(st.dictionaries(_NAMES, _LIGHT, min_size=1, max_size=4), min_size=1))
    def test_records_of_strings_and_tensors_are_written_as_python_writes_them(
        self, tmp_path_factory: pytest.TempPathFactory, rows: list[dict[str, Any]]
    ) -> None:
        base = tmp_path_factory.mktemp("light")

        def scenario(run: Run) -> None:
            for row in rows * 3:  # later rounds repeat every key set: planned, fast
                run.log("rec", **row)

        lines, _ = both_paths(base, scenario)
        assert sum(b'"event":"rec"' in line for line in lines) == len(rows) * 3

    def test_string_and_tensor_records_take_the_fast_path_after_their_first(
        self, run_dir: Path
    ) -> None:
        with Run("r", run_dir, stdout=False) as run:
            run.log("train_step", step=0, loss=_tensor(0.5), split="train", note=None)
            before = run._writer.twin.hits
            for step in range(1, 101):
                run.log("train_step", step=step, loss=_tensor(0.25), split="train", note=None)
            assert run._writer.twin.hits - before == 100

        last = records(run.path, "train_step")[-1]
        assert last == {**last, "loss": 0.25, "split": "train", "note": None}

    def test_a_secret_in_a_repeated_string_is_redacted_on_every_record(self, run_dir: Path) -> None:
        token = "ghp_" + "b" * 36

        def scenario(run: Run) -> None:
            for _ in range(5):
                run.log("push", target=f"token {token}", step=1)

        lines, _ = both_paths(run_dir, scenario)
        assert sum(b'"event":"push"' in line for line in lines) == 5
        assert all(token.encode() not in line for line in lines)

    def test_a_string_where_a_tensor_was_warns_on_both_paths(self, run_dir: Path) -> None:
        def scenario(run: Run) -> None:
            for loss in (_tensor(0.5), _tensor(0.25), "diverged", _tensor(0.1)):
                run.log("step", loss=loss)

        _, said = both_paths(run_dir, scenario)
        assert sum("changed type" in message for message in said) == 1


def both_paths(run_dir: Path, scenario: Any) -> tuple[list[bytes], list[str]]:
    """Run *scenario(run)* on the C path and on the pure-Python path under frozen time; check
    they wrote the same lines and warned the same; return the lines and the warnings."""
    seen = []
    for pure in (False, True):
        with warnings.catch_warnings(record=True) as said, freeze_time("2026-11-30 01:00:00"):
            warnings.simplefilter("always")
            run = open_run(run_dir / ("pure" if pure else "c"), pure=pure)
            try:
                scenario(run)
            finally:
                run.close()
        lines = [
            line for line in run.path.read_bytes().splitlines() if b'"event":"run_' not in line
        ]
        seen.append((lines, [str(w.message) for w in said]))
    assert seen[0] == seen[1]
    return seen[0]


class TestDeclined:
    """What the fast path hands to Python: the same lines and warnings as pure Python."""

    def test_a_secret_key_name_is_redacted_even_for_a_number(self, run_dir: Path) -> None:
        def scenario(run: Run) -> None:
            for _ in range(3):
                run.log("auth", api_key=123456789, step=1)

        lines, _ = both_paths(run_dir, scenario)
        assert all(b"123456789" not in line for line in lines)

    def test_a_string_where_numbers_were_is_redacted_and_warned(self, run_dir: Path) -> None:
        def scenario(run: Run) -> None:
            run.log("step", loss=0.5)
            run.log("step", loss=0.25)
            run.log("step", loss="token ghp_" + "a" * 36)

        lines, said = both_paths(run_dir, scenario)
        assert all(b"ghp_" not in line for line in lines)
        assert any("changed type" in message for message in said)

    @pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, None, 2**70, -(2**64)])
    def test_values_orjson_cannot_write_plainly_take_the_careful_path(
        self, run_dir: Path, value: Any
    ) -> None:
        def scenario(run: Run) -> None:
            for loss in (0.5, 0.25, value, 0.125):
                run.log("step", loss=loss if isinstance(value, float | None) else 1, n=value)

        lines, _ = both_paths(run_dir, scenario)
        assert len([line for line in lines if b'"event":"step"' in line]) == 4

    def test_an_event_name_orjson_cannot_write_is_written_safely(self, run_dir: Path) -> None:
        def scenario(run: Run) -> None:  # a lone surrogate, as a broken decode may leave one
            for seq in range(3):
                run.log("bad\ud800", seq=seq)

        lines, _ = both_paths(run_dir, scenario)
        assert [json.loads(line)["seq"] for line in lines] == [0, 1, 2]

    def test_a_sampled_event_is_sampled(self, run_dir: Path) -> None:
        def scenario(run: Run) -> None:
            run.log("step", seq=0)
            run.log("step", seq=1)
            run.sample("step", every=10)
            for seq in range(2, 102):
                run.log("step", seq=seq)

        lines, _ = both_paths(run_dir, scenario)
        sampled = [json.loads(line) for line in lines[2:]]
        assert sum(r["n"] for r in sampled) == 100

    def test_a_closed_run_refuses_through_the_fast_path(self, run_dir: Path) -> None:
        run = Run("r", run_dir, stdout=False)
        run.log("step", seq=0)
        log = run.log
        run.close()
        with pytest.raises(RunStateError, match="after it closed"):
            log("step", seq=1)

    def test_wrong_call_shapes_raise_as_the_method_would(self, run_dir: Path) -> None:
        with Run("r", run_dir, stdout=False) as run:
            run.log("step", seq=0)
            with pytest.raises(TypeError):
                run.log()  # type: ignore[call-arg]
            with pytest.raises(TypeError):
                run.log("step", 1)  # type: ignore[call-arg]
            with pytest.raises(TypeError):
                run.log(event="step", seq=1)  # type: ignore[call-arg]
            with pytest.raises(TypeError, match="event name must be a str"):
                run.log(3, seq=1)  # type: ignore[arg-type]
            with pytest.raises(FieldError, match="reserved"):
                run.log("step", ts=1)
            run.log("bare")
        assert records(run.path, "bare")[0]["event"] == "bare"

    def test_keys_from_a_dict_of_any_shape_are_written_right(self, run_dir: Path) -> None:
        def scenario(run: Run) -> None:
            for seq in range(50):
                row = {"a": seq, "b": seq / 2} if seq % 2 else {"b": seq / 2, "a": seq}
                run.log("step", **row)

        lines, _ = both_paths(run_dir, scenario)
        got = [list(json.loads(line))[3:] for line in lines]
        assert got == [["b", "a"] if seq % 2 == 0 else ["a", "b"] for seq in range(50)]

    def test_frozen_time_stamps_fast_records_and_the_file_check_still_runs(
        self, run_dir: Path
    ) -> None:
        with freeze_time("2026-11-30 00:00:00") as frozen, Run("r", run_dir, stdout=False) as run:
            run.log("step", seq=0)
            run.log("step", seq=1)
            run.path.unlink()  # a cleanup job deletes the log
            frozen.tick(2.0)
            run.log("step", seq=2)  # the once-a-second check re-creates the file
        got = records(run.path, "step")
        assert [r["seq"] for r in got] == [0, 1, 2]
        start = datetime(2026, 11, 30, tzinfo=UTC).timestamp()
        assert (got[1]["ts"], got[2]["ts"]) == (start, start + 2.0)


class TestFailures:
    def test_a_disk_that_fails_after_the_plan_drops_and_warns_once(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        run_dir.mkdir(parents=True)
        (run_dir / "r.jsonl").symlink_to("/dev/full")  # ENOSPC on every write(2)
        with Run("r", run_dir, stdout=False) as run:
            for seq in range(100):
                run.log("step", seq=seq)
            dropped = run.dropped
        assert dropped == 101  # run_start and every record
        assert capsys.readouterr().err.count("runlines: warning:") == 1


class TestReferences:
    def test_the_fast_paths_leak_no_reference(self, run_dir: Path) -> None:
        loss, name, event = 0.123456, "eval-block", "train_step"
        with Run("r", run_dir, stdout=False) as run:
            for _ in range(2):  # the second call caches the plan, which holds the event
                run.log(event, loss=loss)
                with run.span(name):
                    pass
            counts = sys.getrefcount(loss), sys.getrefcount(name), sys.getrefcount(event)
            for _ in range(1000):
                run.log(event, loss=loss)
                with run.span(name):
                    pass
            assert (sys.getrefcount(loss), sys.getrefcount(name), sys.getrefcount(event)) == counts

    def test_the_light_fast_path_leaks_no_reference(self, run_dir: Path) -> None:
        split, tensor, number = "train-split", _tensor(0.5), np.float32(0.25)
        with Run("r", run_dir, stdout=False) as run:
            for _ in range(2):  # the first call plans and remembers the text
                run.log("step", split=split, loss=tensor, lr=number, note=None)
            before = run._writer.twin.hits
            counts = sys.getrefcount(split), sys.getrefcount(tensor), sys.getrefcount(number)
            for _ in range(1000):
                run.log("step", split=split, loss=tensor, lr=number, note=None)
            after = sys.getrefcount(split), sys.getrefcount(tensor), sys.getrefcount(number)
            assert run._writer.twin.hits - before == 1000
        assert after == counts


SOURCE = Path(runlines.__file__).parent / "_speedups" / "speedups.c"


class TestContract:
    """The C twin gets every object as an argument: it reads no Python name by string."""

    def test_the_source_looks_up_no_private_name_and_imports_no_module(self) -> None:
        source = SOURCE.read_text()
        import re

        named = re.findall(r"(\w+)\(\s*(?:[\w>-]+,\s*)?\"([^\"]*)\"", source)
        lookups = {
            (call, text)
            for call, text in named
            if call
            in ("PyUnicode_InternFromString", "PyObject_GetAttrString", "PyDict_GetItemString")
        }
        private = {text for _, text in lookups if text.startswith("_") and not text.endswith("__")}
        assert lookups  # the pattern finds the interned keys ("ts", "event", ...)
        assert private == set()
        assert "PyImport_" not in source
        assert "PyEval_GetGlobals" not in source

    def test_the_clock_passed_in_stamps_ts(
        self, run_dir: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        with Run("r", run_dir, stdout=False) as run:
            run.log("train_step", step=0)  # the first record of a key set plans it
            monkeypatch.setattr(runlines._writer, "_now", lambda: 1234.5)
            before = run._writer.twin.hits
            run.log("train_step", step=1)
            run.log("train_step", step=2)
            assert run._writer.twin.hits - before == 2
            monkeypatch.undo()

        assert [r["ts"] for r in records(run.path, "train_step")][1:] == [1234.5, 1234.5]

    def test_freezegun_stamps_records_and_times_spans_on_the_c_path(self, run_dir: Path) -> None:
        with freeze_time("2026-01-01T00:00:00Z") as frozen, Run("r", run_dir, stdout=False) as run:
            before = run._writer.twin.hits
            for step in range(4):
                run.log("train_step", step=step)
                with run.span("step"):
                    frozen.tick(0.25)
            # the first record and span of a kind are Python's (plans, names): then C
            assert run._writer.twin.hits - before == 6
            assert type(run.span("x")) is Span

        t0 = 1767225600.0
        assert [r["ts"] for r in records(run.path, "train_step")] == [
            t0,
            t0 + 0.25,
            t0 + 0.5,
            t0 + 0.75,
        ]
        assert [r["duration_s"] for r in records(run.path, "span")] == [0.25] * 4

    def test_a_tracer_clock_passed_in_times_c_spans(self) -> None:
        from runlines.spans import Tracer

        ticks = iter([10.0, 10.25, 20.0, 21.0])
        seen: list[tuple[str, float]] = []
        tracer = Tracer(lambda name, d, *_: seen.append((name, d)), clock=lambda: next(ticks))

        with tracer.span("a"), tracer.span("b"):
            pass

        assert isinstance(tracer.span("a"), SpanBase)
        assert seen == [("b", 9.75), ("a", 11.0)]


def _workload(run: Run) -> None:
    """Two records or more of each key set: plain, strings, tensors, None, NaN, sampled, spans."""
    skip_without("torch")
    import torch

    run.sample("batch", every=3)
    run.sample("agg", every=2, aggregate=True)
    for step in range(6):
        run.log("train_step", epoch=1, step=step, loss=0.5 / (step + 1), lr=3e-4)
        run.log("eval", step=step, split="val" if step % 2 else "train", acc=np.float32(0.75))
        run.log("tensor", step=step, loss=torch.tensor(0.25 * step))
        run.log("maybe", step=step, value=None if step % 2 else 1.0)
        run.log("batch", step=step, loss=0.1)
        run.log("agg", step=step, loss=float(step))
        with run.span("step"):
            pass
        with run.span("outer"), run.span("inner", step=step):
            pass
    run.log("train_step", epoch=1, step=7, loss=float("nan"), lr=3e-4)
    run.log("train_step", epoch=1, step=8, loss=2**70, lr=3e-4)


class TestWholeRun:
    """The whole log and the run's state are the same on both paths, run_start and run_end too."""

    def test_a_mixed_run_writes_the_same_file_and_state(self, run_dir: Path) -> None:
        seen = []
        for pure in (False, True):
            with warnings.catch_warnings(record=True), freeze_time("2026-11-30 01:00:00"):
                warnings.simplefilter("always")
                run = open_run(run_dir / ("pure" if pure else "c"), pure=pure)
                try:
                    _workload(run)
                finally:
                    run.close()
            lines = [json.loads(line) for line in run.path.read_bytes().splitlines()]
            start = lines.pop(0)  # the process and its environment, the same for both
            writer = start["writer"]
            del lines[-1]["id"]  # a new run id per run
            seen.append((writer, lines, run.dropped, run.dropped_by_sink))

        (c_writer, c_lines, *c_state), (py_writer, py_lines, *py_state) = seen
        assert (c_writer, py_writer) == ("c", "python")
        assert c_lines == py_lines
        assert c_state == py_state
        end = c_lines[-1]
        assert end["event"] == "run_end"
        assert end["spans"]["step"]["count"] == 6
        assert sum(r.get("n", 0) for r in c_lines if r["event"] == "batch") == 6
        assert sum(r.get("n", 0) for r in c_lines if r["event"] == "agg") == 6
