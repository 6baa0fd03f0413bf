"""Reading logs back: load, compare, iter_events, the fast reader, and the jq recipes."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import runlines.reading._columnar.blocks as reading  # the block reader: its knobs
from _logs import T0, line, raw, train, write
from runlines import Run
from runlines.errors import FieldError, ReadError, RunlinesWarning
from runlines.reading import compare, iter_events, load

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.fixture(name="small_blocks")
def _small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the fast reader cut tiny blocks and buckets, so a small log walks every path."""
    _shrink(monkeypatch)


def _shrink(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reading, "BLOCK_BYTES", 400)
    monkeypatch.setattr(reading, "MIN_BUCKET", 2)
    monkeypatch.setattr(reading, "PYTHON_LINES", 3)


class TestLoad:
    def test_reads_a_run_log_one_row_per_record(self, run_dir: Path) -> None:
        log = train(run_dir, "base", range(1, 4))

        frame = load(log)

        assert frame.event.tolist() == ["run_start", *["train_step"] * 3, "run_end"]
        assert set(frame.run) == {"base"}
        assert frame.ts.dtype == np.float64
        assert frame.attempt.tolist() == [1] * 5

    def test_ts_converts_to_utc_datetimes(self, run_dir: Path) -> None:
        write(run_dir / "t.jsonl", line("x", ts=T0))

        stamps = pd.to_datetime(load(run_dir / "t.jsonl").ts, unit="s", utc=True)

        assert stamps[0] == pd.Timestamp("2026-01-01T00:00:00Z")

    def test_reads_every_log_of_a_folder(self, run_dir: Path) -> None:
        train(run_dir, "a", range(1, 3))
        train(run_dir, "b", range(1, 4))

        frame = load(run_dir, event="train_step")

        assert frame.groupby("run").size().to_dict() == {"a": 2, "b": 3}

    def test_merges_rank_files_into_their_run(
        self, run_dir: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("WORLD_SIZE", "2")
        for rank in ("0", "1"):
            monkeypatch.setenv("RANK", rank)
            train(run_dir, "ddp", range(1, 3))

        frame = load(run_dir, event="train_step")

        assert sorted(run_dir.glob("*.jsonl")) == [
            run_dir / "ddp.jsonl",
            run_dir / "ddp.rank1.jsonl",
        ]
        assert frame.run.unique().tolist() == ["ddp"]
        assert frame["rank"].tolist() == [0, 0, 1, 1]
        assert frame["rank"].dtype == np.int64

    def test_rank_of_a_hand_written_rank_file_comes_from_its_name(self, run_dir: Path) -> None:
        write(run_dir / "x.jsonl", line("step", run="x", step=1))
        write(run_dir / "x.rank3.jsonl", line("step", run="x", step=1))

        assert load(run_dir)["rank"].tolist() == [0, 3]

    def test_run_comes_from_the_file_name_when_records_lack_it(self, run_dir: Path) -> None:
        write(run_dir / "seed.jsonl", raw({"ts": T0, "event": "train_step", "loss": 0.4}))

        assert load(run_dir / "seed.jsonl").run.tolist() == ["seed"]

    def test_event_filter_keeps_those_events_and_their_fields(self, run_dir: Path) -> None:
        log = train(run_dir, "base", range(1, 5), evals=True, config={"lr": 0.1})

        frame = load(log, event="eval")

        assert frame.event.unique().tolist() == ["eval"]
        assert list(frame.columns) == ["ts", "event", "run", "attempt", "step", "split", "accuracy"]

    def test_event_filter_takes_a_list(self, run_dir: Path) -> None:
        log = train(run_dir, "base", range(1, 5), evals=True)

        frame = load(log, event=["eval", "run_end"])

        assert frame.event.tolist() == ["eval", "eval", "run_end"]

    def test_unknown_event_names_the_events_there_are(self, run_dir: Path) -> None:
        log = train(run_dir, "base", range(1, 3))

        with pytest.raises(
            FieldError, match=r"'train_stp' \(did you mean 'train_step'\?\).*run_end"
        ):
            load(log, event="train_stp")

    def test_columns_selects_fields_and_keeps_ts_event_run(self, run_dir: Path) -> None:
        log = train(run_dir, "base", range(1, 3))

        frame = load(log, columns=["loss", "step"])

        assert list(frame.columns) == ["ts", "event", "run", "loss", "step"]

    def test_unknown_column_is_a_field_error(self, run_dir: Path) -> None:
        log = train(run_dir, "base", range(1, 3))

        with pytest.raises(FieldError, match=r"no record has field 'los' \(did you mean 'loss'"):
            load(log, columns=["los"])

    def test_integer_fields_stay_int64(self, run_dir: Path) -> None:
        log = train(run_dir, "base", range(1, 4))

        frame = load(log, event="train_step")

        assert frame.step.dtype == np.int64
        assert frame.epoch.dtype == np.int64

    def test_integer_field_with_gaps_is_nullable_int64(self, run_dir: Path) -> None:
        log = train(run_dir, "base", range(1, 3))

        step = load(log).step

        assert str(step.dtype) == "Int64"
        assert step.tolist() == [pd.NA, 1, 2, pd.NA]

    def test_nan_and_infinities_come_back_in_float_columns(self, run_dir: Path) -> None:
        with Run("nf", run_dir, stdout=False, on_nonfinite="ignore") as run:
            for loss in (0.5, math.nan, math.inf, -math.inf):
                run.log("train_step", loss=loss)

        loss = load(run_dir / "nf.jsonl", event="train_step").loss

        assert loss.dtype == np.float64
        assert loss[0] == 0.5
        assert math.isnan(loss[1])
        assert loss[2:].tolist() == [math.inf, -math.inf]

    def test_nan_inside_nested_values_is_restored(self, run_dir: Path) -> None:
        with Run("nf", run_dir, stdout=False, on_nonfinite="ignore") as run:
            run.log("grads", norms=[1.0, math.nan], per_layer={"a": math.inf})

        row = load(run_dir / "nf.jsonl", event="grads").iloc[0]

        assert row.norms[0] == 1.0
        assert math.isnan(row.norms[1])
        assert row.per_layer == {"a": math.inf}

    def test_nested_values_stay_python_objects(self, run_dir: Path) -> None:
        log = train(run_dir, "base", range(1, 2), config={"opt": {"name": "adam"}, "seed": None})

        frame = load(log, event="run_start")

        assert frame.config[0] == {"opt": {"name": "adam"}, "seed": None}
        assert frame.config.dtype == object

    def test_a_field_in_one_record_of_many_is_kept(self, run_dir: Path) -> None:
        lines = [line("train_step", step=i, loss=0.1) for i in range(3000)]
        lines[1234] = line("train_step", step=1234, loss=0.1, rare=7)
        write(run_dir / "r.jsonl", *lines)

        frame = load(run_dir / "r.jsonl")

        assert frame.rare.count() == 1
        assert frame.rare[1234] == 7

    def test_a_field_int_in_one_event_and_str_in_another_is_an_object_column(
        self, run_dir: Path
    ) -> None:
        lines = [line("metric", value=i) for i in range(2000)]
        lines += [line("note", value="high"), line("metric", value=5)]
        write(run_dir / "m.jsonl", *lines)

        value = load(run_dir / "m.jsonl").value

        assert value.dtype == object
        assert value.tolist()[-3:] == [1999, "high", 5]

    def test_missing_log_is_a_read_error(self, run_dir: Path) -> None:
        with pytest.raises(ReadError, match="no such log"):
            load(run_dir / "nope.jsonl")

    def test_folder_without_logs_is_a_read_error(self, tmp_path: Path) -> None:
        with pytest.raises(ReadError, match=r"has no \*\.jsonl logs"):
            load(tmp_path)

    def test_empty_log_gives_an_empty_frame(self, run_dir: Path) -> None:
        frame = load(write(run_dir / "e.jsonl"))

        assert frame.empty
        assert list(frame.columns) == ["ts", "event", "run", "attempt"]

    def test_without_pandas_says_what_to_install(
        self, run_dir: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        log = train(run_dir, "base", range(1, 3))
        monkeypatch.setitem(sys.modules, "pandas", None)

        with pytest.raises(
            ImportError,
            match=r"load\(\) needs pandas and pyarrow: pip install 'runlines\[pandas\]'",
        ):
            load(log)

    def test_does_not_import_pandas_on_import_runlines(self) -> None:
        code = "import runlines, runlines.reading, runlines.cli, sys; print(sorted(sys.modules))"
        modules = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout

        for heavy in ("pandas", "numpy", "pyarrow", "matplotlib"):
            assert f"'{heavy}'" not in modules


# A core-only install, in a fresh interpreter: numpy, pandas and pyarrow cannot be found.
_CORE_ONLY = """
import json, sys, warnings

class Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("numpy", "pandas", "pyarrow"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, Absent())
import runlines
from runlines.cli import main

log, said = sys.argv[1], {}
calls = {
    "load": lambda: runlines.load(log),
    "runs": lambda: runlines.runs(log),
    "compare": lambda: runlines.compare(log, metric="loss"),
    "diff": lambda: runlines.diff(log, log),
}
for name, call in calls.items():
    try:
        call()
    except ImportError as err:
        said[name] = str(err)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    with runlines.Run("fresh", sys.argv[2], compact=True, stdout=False) as run:
        run.log("train", step=1, loss=0.5)
said["close"] = " ".join(str(w.message) for w in caught)
said["compact status"] = main(["compact", log])
print(json.dumps(said))
"""


def test_a_core_only_install_says_which_extra_each_reader_needs(
    run_dir: Path, tmp_path: Path
) -> None:
    log = train(run_dir, "base", range(1, 3))

    done = subprocess.run(
        [sys.executable, "-c", _CORE_ONLY, str(log), str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )

    said = json.loads(done.stdout)
    assert said.pop("compact status") == 1
    assert set(said) == {"load", "runs", "compare", "diff", "close"}
    for name, message in said.items():
        assert "pip install 'runlines[pandas]'" in message, (name, message)
    hint = "runlines: error: compact needs numpy and pyarrow: pip install 'runlines[pandas]'"
    assert hint in done.stderr


class TestRewinds:
    def test_records_a_resumed_attempt_rewound_past_are_dropped(self, run_dir: Path) -> None:
        train(run_dir, "r", range(1, 6))
        log = train(run_dir, "r", range(4, 7), resume_step=3)

        frame = load(log, event="train_step")

        assert frame.step.tolist() == [1, 2, 3, 4, 5, 6]
        assert frame.attempt.tolist() == [1, 1, 1, 2, 2, 2]

    def test_superseded_true_keeps_them(self, run_dir: Path) -> None:
        train(run_dir, "r", range(1, 6))
        log = train(run_dir, "r", range(4, 7), resume_step=3)

        frame = load(log, event="train_step", superseded=True)

        assert frame.step.tolist() == [1, 2, 3, 4, 5, 4, 5, 6]

    def test_the_lowest_later_resume_step_wins(self, run_dir: Path) -> None:
        train(run_dir, "r", range(1, 6))
        train(run_dir, "r", range(4, 8), resume_step=3)
        log = train(run_dir, "r", range(3, 5), resume_step=2)

        frame = load(log, event="train_step")

        assert list(zip(frame.attempt, frame.step, strict=True)) == [
            (1, 1), (1, 2), (3, 3), (3, 4)
        ]  # fmt: skip

    def test_records_without_a_step_are_kept(self, run_dir: Path) -> None:
        train(run_dir, "r", range(1, 6))
        log = train(run_dir, "r", range(4, 5), resume_step=3)

        frame = load(log)

        assert frame.event.tolist().count("run_end") == 2

    def test_rewinds_stay_within_their_own_rank_file(
        self, run_dir: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("WORLD_SIZE", "2")
        monkeypatch.setenv("RANK", "1")
        train(run_dir, "d", range(1, 6))
        monkeypatch.setenv("RANK", "0")
        train(run_dir, "d", range(1, 6))
        train(run_dir, "d", range(2, 3), resume_step=1)

        frame = load(run_dir, event="train_step")

        assert frame.groupby("rank").step.max().to_dict() == {0: 2, 1: 5}


class TestBadLines:
    def test_torn_line_mid_file_is_skipped_with_one_warning(self, run_dir: Path) -> None:
        train(run_dir, "t", range(1, 4))
        log = run_dir / "t.jsonl"
        with log.open("ab") as out:
            out.write(b'{"ts": 1.0, "event": "train_st')
        train(run_dir, "t", range(4, 6))

        with pytest.warns(RunlinesWarning) as caught:
            frame = load(log, event="train_step")

        assert frame.step.tolist() == [1, 2, 3, 4, 5]
        assert len(caught) == 1
        assert re.search(
            r"t\.jsonl: skipped 1 line .*\(line 6\); the run may have crashed",
            str(caught[0].message),
        )

    def test_torn_last_line_without_newline_is_skipped(self, run_dir: Path) -> None:
        log = write(run_dir / "t.jsonl", line("a"), line("b"), b'{"ts": 3, "ev')

        with pytest.warns(RunlinesWarning, match=r"t\.jsonl: skipped 1 line .*line 3"):
            frame = load(log)

        assert frame.event.tolist() == ["a", "b"]

    def test_warning_names_the_first_lines_and_the_count(self, run_dir: Path) -> None:
        lines = [line("a")] + [b"{broken\n"] * 7
        log = write(run_dir / "t.jsonl", *lines)

        with pytest.warns(RunlinesWarning, match=r"skipped 7 lines .*lines 2, 3, 4, 5, 6, \.\.\."):
            load(log)

    def test_errors_raise_names_path_line_and_reason(self, run_dir: Path) -> None:
        log = write(run_dir / "t.jsonl", line("a"), b'{"ts": 2, "event"\n', line("c"))

        with pytest.raises(
            ReadError,
            match=r"t\.jsonl line 2 is not a complete JSON object \(.+\); the run may have crashed",
        ) as err:
            load(log, errors="raise")

        assert err.value.line == 2
        assert str(err.value.path).endswith("t.jsonl")

    def test_unknown_errors_mode_is_refused(self, run_dir: Path) -> None:
        with pytest.raises(ValueError, match="errors must be 'warn' or 'raise'"):
            load(write(run_dir / "t.jsonl", line("a")), errors="ignore")  # type: ignore[arg-type]

    def test_blank_lines_are_skipped_silently(self, run_dir: Path) -> None:
        log = write(run_dir / "t.jsonl", line("a"), b"\n", b"   \n", line("b"), b"\n")

        assert load(log).event.tolist() == ["a", "b"]

    def test_json_array_lines_are_skipped(self, run_dir: Path) -> None:
        log = write(run_dir / "t.jsonl", line("a"), b"[1, 2]\n")

        with pytest.warns(RunlinesWarning, match="line 2"):
            assert load(log).event.tolist() == ["a"]

    def test_binary_garbage_is_not_a_runlines_log(self, run_dir: Path) -> None:
        log = write(run_dir / "g.jsonl", bytes(range(256)) * 40)

        with pytest.raises(ReadError, match=r"g\.jsonl is not a runlines log"):
            load(log)

    def test_a_very_long_line_is_read(self, run_dir: Path) -> None:
        log = write(run_dir / "l.jsonl", line("a"), line("big", text="x" * 3_000_000), line("c"))

        frame = load(log)

        assert len(frame.text[1]) == 3_000_000

    def test_nan_literals_from_json_dumps_are_read(self, run_dir: Path) -> None:
        log = write(
            run_dir / "s.jsonl", b'{"ts": 1, "event": "e", "loss": NaN}\n', line("e", loss=1.0)
        )

        loss = load(log).loss

        assert math.isnan(loss[0])
        assert loss[1] == 1.0

    def test_crlf_line_ends_and_a_byte_order_mark_are_read(self, run_dir: Path) -> None:
        log = write(run_dir / "w.jsonl", b"\xef\xbb\xbf" + line("a").rstrip() + b"\r\n", line("b"))

        assert load(log).event.tolist() == ["a", "b"]


class TestFastReader:
    """The block reader's recovery paths, on logs cut into tiny blocks and buckets."""

    def test_torn_lines_in_many_blocks_are_each_skipped(
        self, run_dir: Path, small_blocks: None
    ) -> None:
        lines = [line("train_step", step=i, loss=i / 10) for i in range(200)]
        lines[50] = b'{"ts": 1, "event": "train_step", "st\n'
        lines[150] = b'{"ts": 1, "event": "train_step", "step": {"a"}\n'
        log = write(run_dir / "f.jsonl", *lines)

        with pytest.warns(RunlinesWarning, match=r"skipped 2 lines .*lines 51, 151"):
            frame = load(log)

        assert frame.step.tolist() == [i for i in range(200) if i not in (50, 150)]

    def test_two_objects_on_one_line_are_a_bad_line(
        self, run_dir: Path, small_blocks: None
    ) -> None:
        lines = [line("s", step=i) for i in range(40)]
        lines[20] = b'{"ts": 1, "event": "s"}{"ts": 2, "event": "s"}\n'
        log = write(run_dir / "f.jsonl", *lines)

        with pytest.warns(RunlinesWarning, match="line 21"):
            assert len(load(log)) == 39

    def test_type_conflict_inside_one_event_makes_an_object_column(
        self, run_dir: Path, small_blocks: None
    ) -> None:
        values: list[Any] = [i if i % 7 else f"s{i}" for i in range(100)]
        log = write(run_dir / "f.jsonl", *(line("metric", value=v) for v in values))

        value = load(log).value

        assert value.tolist() == values

    def test_int_and_float_in_one_field_make_a_float_column(self, run_dir: Path) -> None:
        log = write(run_dir / "f.jsonl", line("m", x=1), line("m", x=2.5), line("m", x=3))

        assert load(log).x.tolist() == [1.0, 2.5, 3.0]

    def test_date_strings_stay_strings(self, run_dir: Path, small_blocks: None) -> None:
        stamps = [f"2026-05-{d:02d}T12:00:00+02:00" for d in range(1, 29)]
        log = write(run_dir / "f.jsonl", *(line("day", when=s) for s in stamps))

        assert load(log).when.tolist() == stamps

    def test_duplicate_keys_keep_the_last_value(self, run_dir: Path, small_blocks: None) -> None:
        lines = [line("s", step=i) for i in range(20)]
        lines[5] = b'{"ts": 1, "event": "s", "step": 1, "step": 99}\n'
        log = write(run_dir / "f.jsonl", *lines)

        assert load(log).step[5] == 99

    def test_integers_beyond_int64_come_back_exact(self, run_dir: Path) -> None:
        big = b'{"ts": 1, "event": "s", "n": 18446744073709551615}\n'
        log = write(run_dir / "f.jsonl", line("s", n=1), big)

        assert load(log).n.tolist() == [1, 2**64 - 1]

    def test_event_filter_skips_unwanted_buckets_and_keeps_attempts(
        self, run_dir: Path, small_blocks: None
    ) -> None:
        lines = [line("run_start", run="s", attempt=1)]
        lines += [line("train_step", run="s", step=i) for i in range(1, 40)]
        lines += [line("eval", run="s", step=i, acc=i / 100) for i in range(1, 40, 10)]
        lines += [line("run_start", run="s", attempt=2, resume_step=20)]
        lines += [line("eval", run="s", step=25, acc=0.9), line("train_step", run="s", step=21)]
        log = write(run_dir / "s.jsonl", *lines)

        frame = load(log, event="eval")

        assert frame.step.tolist() == [1, 11, 25]
        assert frame.attempt.tolist() == [1, 1, 2]
        assert list(frame.columns) == ["ts", "event", "run", "attempt", "step", "acc"]

    def test_unknown_event_lists_the_events_of_skipped_buckets_too(
        self, run_dir: Path, small_blocks: None
    ) -> None:
        lines = [line("train_step", step=i) for i in range(50)] + [line("eval", step=1)] * 5
        log = write(run_dir / "s.jsonl", *lines)

        with pytest.raises(FieldError, match=r"events: eval, train_step$"):
            load(log, event="evaluation")

    def test_event_filter_reads_lines_in_other_formats(
        self, run_dir: Path, small_blocks: None
    ) -> None:
        spaced = b'{"ts": 1.0, "event": "eval", "step": 7}\n'
        lines = [line("train_step", step=i) for i in range(30)] + [spaced]
        log = write(run_dir / "s.jsonl", *lines)

        assert load(log, event="eval").step.tolist() == [7]

    def test_records_come_back_in_file_order_across_events(
        self, run_dir: Path, small_blocks: None
    ) -> None:
        names = ["a", "b", "a", "c", "a", "b"] * 20
        log = write(run_dir / "f.jsonl", *(line(n, i=i) for i, n in enumerate(names)))

        frame = load(log)

        assert frame.event.tolist() == names
        assert frame.i.tolist() == list(range(len(names)))


_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.lists(st.integers(-5, 5), max_size=3),
    st.dictionaries(st.sampled_from("xy"), st.integers(-5, 5), max_size=2),
)
_RECORDS = st.lists(
    st.builds(
        lambda event, fields: {"event": event, **fields},
        st.sampled_from(["a", "b", "c"]),
        st.dictionaries(st.sampled_from(["k", "m", "n", "step2"]), _VALUES, max_size=3),
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=_RECORDS, torn=st.sets(st.integers(0, 59), max_size=3))
def test_load_returns_exactly_what_iter_events_reads(
    records: list[dict[str, Any]], torn: set[int]
) -> None:
    """Any mix of events, types, conflicts and torn lines: load agrees with the plain reader."""
    with tempfile.TemporaryDirectory() as folder, pytest.MonkeyPatch.context() as patch:
        _shrink(patch)
        lines = [line(**{"run": "h", **r}) for r in records]
        for at in sorted(torn):
            if at < len(lines):
                lines[at] = lines[at][: len(lines[at]) // 2] + b"\n"
        log = write(Path(folder) / "h.jsonl", *lines)
        broken = torn & set(range(len(lines)))
        assume(len(broken) < len(lines))  # a log of torn lines only is a ReadError
        with pytest.warns(RunlinesWarning) if broken else _nothing():
            frame = load(log, superseded=True)
            expected = list(iter_events(log))

    _assert_same_records(frame, expected)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=_RECORDS, wanted=st.sampled_from(["a", "b"]))
def test_load_of_one_event_returns_what_iter_events_reads(
    records: list[dict[str, Any]], wanted: str
) -> None:
    """Filtering by event, which leaves whole buckets unread, keeps exactly that event's records."""
    with tempfile.TemporaryDirectory() as folder, pytest.MonkeyPatch.context() as patch:
        _shrink(patch)
        log = write(Path(folder) / "h.jsonl", *(line(**{"run": "h", **r}) for r in records))
        expected = [r for r in iter_events(log) if r["event"] == wanted]
        assume(expected)
        frame = load(log, event=wanted, superseded=True)

    _assert_same_records(frame, expected)


def _assert_same_records(frame: pd.DataFrame, expected: list[dict[str, Any]]) -> None:
    assert len(frame) == len(expected)
    for row, record in zip(frame.to_dict("records"), expected, strict=True):
        for key in ("event", "k", "m", "n", "step2"):
            assert _same(row.get(key), record.get(key)), (key, row.get(key), record.get(key))


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _same(got: Any, want: Any) -> bool:
    if want is None:
        return got is None or got is pd.NA or (isinstance(got, float) and math.isnan(got))
    if isinstance(want, float) and math.isnan(want):
        return isinstance(got, float) and math.isnan(got)
    if isinstance(want, bool) or isinstance(got, bool):
        return type(got) is type(want) and got == want
    if isinstance(want, list):
        return list(got) == want
    if isinstance(got, float) and isinstance(want, int):  # ints and floats in one float column
        return got == float(want)
    return bool(got == want)


class TestIterEvents:
    def test_yields_records_in_order_with_nonfinite_restored(self, run_dir: Path) -> None:
        with Run("it", run_dir, stdout=False, on_nonfinite="ignore") as run:
            run.log("a", x=math.inf)
            run.log("b", x=1)

        records = [r for r in iter_events(run_dir / "it.jsonl") if r["event"] in "ab"]

        assert [(r["event"], r["x"]) for r in records] == [("a", math.inf), ("b", 1)]
        assert "_nonfinite" not in records[0]

    def test_warns_once_for_torn_lines(self, run_dir: Path) -> None:
        log = write(run_dir / "t.jsonl", line("a"), b"{torn\n", line("b"), b"{torn again")

        with pytest.warns(RunlinesWarning, match=r"skipped 2 lines .*lines 2, 4") as caught:
            events = [r["event"] for r in iter_events(log)]

        assert events == ["a", "b"]
        assert len(caught) == 1

    def test_errors_raise_stops_at_the_first_bad_line(self, run_dir: Path) -> None:
        log = write(run_dir / "t.jsonl", line("a"), b"{torn\n")

        with pytest.raises(ReadError, match="line 2"):
            list(iter_events(log, errors="raise"))

    def test_missing_file_is_a_read_error(self, run_dir: Path) -> None:
        with pytest.raises(ReadError, match="cannot read log"):
            list(iter_events(run_dir / "nope.jsonl"))

    def test_needs_no_pandas(self) -> None:
        code = (
            "import sys, runlines.reading as r; sys.modules['pandas'] = None;"
            f" print(sum(1 for _ in r.iter_events({str(DOCS / 'format.md')!r}, errors='warn')))"
        )
        done = subprocess.run(
            [sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True
        )

        assert done.returncode == 0, done.stderr


class TestCompare:
    def test_one_row_per_step_one_column_per_run(self, run_dir: Path) -> None:
        train(run_dir, "b", range(1, 4))
        train(run_dir, "a", range(1, 3))

        table = compare(run_dir / "b.jsonl", run_dir / "a.jsonl", metric="loss")

        assert list(table.columns) == ["b", "a"]
        assert table.index.name == "step"
        assert table.loc[2].tolist() == [0.5, 0.5]
        assert table["a"].isna().tolist() == [False, False, True]  # no record at step 3

    def test_aggregates_duplicates_by_agg(self, run_dir: Path) -> None:
        log = write(
            run_dir / "d.jsonl",
            line("e", run="d", epoch=1, acc=0.2),
            line("e", run="d", epoch=1, acc=0.4),
        )

        assert compare(log, metric="acc", by="epoch", agg="max").loc[1, "d"] == 0.4
        assert compare(log, metric="acc", by="epoch").loc[1, "d"] == pytest.approx(0.3)

    def test_unknown_metric_lists_the_numeric_fields(self, run_dir: Path) -> None:
        log = train(run_dir, "b", range(1, 3), evals=True)

        with pytest.raises(
            FieldError,
            match=r"metric 'los' is in no record \(did you mean 'loss'\?\); "
            "numeric fields: accuracy, duration_s, epoch, loss, lr, step$",
        ):
            compare(log, metric="los")

    def test_a_text_metric_is_refused(self, run_dir: Path) -> None:
        log = train(run_dir, "b", range(1, 3), evals=True)

        with pytest.raises(FieldError, match="metric 'split' is not numeric"):
            compare(log, metric="split")

    def test_unknown_agg_is_refused(self, run_dir: Path) -> None:
        with pytest.raises(ValueError, match="agg must be one of mean, median"):
            compare(run_dir, metric="loss", agg="avg")


def _jq_recipes() -> Iterator[str]:
    text = (DOCS / "reading.md").read_text()
    for block in re.findall(r"^```sh\n(.*?)^```", text, re.DOTALL | re.MULTILINE):
        yield from (cmd for cmd in block.splitlines() if cmd.startswith("jq "))


class TestJqRecipes:
    @pytest.fixture(name="jq")
    def _jq(self) -> str:
        found = shutil.which("jq")
        if found is None:
            pytest.fail(
                "the jq recipes in docs/reading.md need jq: apt-get install jq (or brew install jq)"
            )
        return found

    @pytest.fixture(name="baseline")
    def _baseline(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
        monkeypatch.chdir(tmp_path)
        with Run("baseline", tmp_path, stdout=False, on_nonfinite="ignore") as run:
            for step in range(1, 6):
                run.log("train_step", epoch=1, step=step, loss=math.nan if step == 3 else 1 / step)
            run.log("eval", step=5, split="val", accuracy=0.9)
        return tmp_path / "baseline.jsonl"

    def test_docs_have_jq_recipes(self) -> None:
        assert len(list(_jq_recipes())) >= 4

    @pytest.mark.parametrize("recipe", list(_jq_recipes()))
    def test_recipe_runs_on_a_real_log(self, recipe: str, jq: str, baseline: Path) -> None:
        done = subprocess.run(
            ["bash", "-c", recipe], capture_output=True, text=True, cwd=baseline.parent
        )

        assert done.returncode == 0, done.stderr
        assert done.stdout.strip()

    def test_last_loss_recipe_prints_the_last_loss(self, jq: str, baseline: Path) -> None:
        recipe = next(r for r in _jq_recipes() if "last" in r)

        done = subprocess.run(
            ["bash", "-c", recipe], capture_output=True, text=True, cwd=baseline.parent
        )

        assert float(done.stdout.split()[-1]) == pytest.approx(0.2)


def test_event_filter_keeps_a_field_whose_only_value_is_nan(tmp_path: Path) -> None:
    with Run("h", tmp_path, stdout=False, on_nonfinite="ignore") as run:
        run.log("a", k=math.nan)
        run.log("b", other=1)

    frame = load(run.path, event="a")

    assert "other" not in frame.columns
    assert math.isnan(frame.k.iloc[0])


class TestIterEventsOfAGrowingLog:
    def test_a_line_without_its_newline_ends_the_pass(
        self, run_dir: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The rest of a record being written, arriving after its start was read, is no line."""
        from runlines.reading import _lines

        being_written = line("b", n=2)
        log = write(run_dir / "g.jsonl", line("a", n=1), being_written[:12])
        decode = _lines.decode_line

        def decode_while_the_writer_goes_on(raw: bytes) -> dict[str, Any]:
            if raw == being_written[:12]:  # the writer (holding no lock) finishes meanwhile
                with log.open("ab") as out:
                    out.write(being_written[12:] + line("c", n=3))
            return decode(raw)

        monkeypatch.setattr(_lines, "decode_line", decode_while_the_writer_goes_on)

        with pytest.warns(RunlinesWarning, match=r"skipped 1 line .*line 2\)") as caught:
            events = [r["event"] for r in iter_events(log)]

        assert events == ["a"]
        assert len(caught) == 1
        assert [r["event"] for r in iter_events(log)] == ["a", "b", "c"]
