"""The Parquet copy a run writes as it closes, `runlines compact`, and runs() through copies."""

from __future__ import annotations

import json
import math
import os
import signal
import tempfile
import warnings
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import runlines
import runlines._compact as compacting
from _logs import T0, line, raw, write
from runlines._encoding import encode_line
from runlines.cli import main
from runlines.reading._columnar import Columns, FileReader
from runlines.reading._columnar import blocks as engine
from runlines.reading._copies import compact, write_copy
from runlines.reading._copies import format as copy_format
from runlines.reading._copies import write as copy_write
from runlines.reading._copies.summary import declines, line_reader, python_summary, summary_state
from runlines.reading._copies.write import complete_lines, reordered
from runlines.reading._files import log_file


def _train(directory: Path, name: str = "r", steps: int = 20, **options: Any) -> Path:
    with runlines.Run(name, directory, stdout=False, config={"lr": 0.1}, **options) as run:
        for step in range(steps):
            run.log("train", step=step, loss=1.0 / (step + 1))
        run.log("eval", step=steps, accuracy=0.5)
    return directory / f"{name}.jsonl"


class TestAtClose:
    def test_compact_true_writes_a_zstd_copy_beside_the_log(self, tmp_path: Path) -> None:
        log = _train(tmp_path, compact=True)

        copy = tmp_path / "r.parquet"
        assert copy.is_file()
        columns = pq.ParquetFile(copy).metadata.row_group(0).column(0)
        assert columns.compression == "ZSTD"
        assert len(runlines.load(log)) == 23

    def test_compact_false_writes_none(self, tmp_path: Path) -> None:
        _train(tmp_path, compact=False)

        assert not (tmp_path / "r.parquet").exists()

    def test_by_default_only_a_log_over_the_threshold_gets_one(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        _train(tmp_path / "small")
        monkeypatch.setattr(compacting, "AUTO_BYTES", 1000)
        _train(tmp_path / "big")

        assert not (tmp_path / "small" / "r.parquet").exists()
        assert (tmp_path / "big" / "r.parquet").is_file()

    def test_a_run_ended_by_ctrl_c_writes_no_copy(self, tmp_path: Path) -> None:
        with pytest.raises(KeyboardInterrupt), runlines.Run("r", tmp_path, stdout=False,
                                                            compact=True) as run:  # fmt: skip
            run.log("train", step=1)
            raise KeyboardInterrupt

        assert not (tmp_path / "r.parquet").exists()

    def test_a_run_ended_by_sigterm_writes_no_copy(self, tmp_path: Path) -> None:
        run = runlines.Run("r", tmp_path, stdout=False, compact=True)
        run.log("train", step=1)

        run._on_signal(signal.SIGTERM, True)

        assert run.closed
        assert not (tmp_path / "r.parquet").exists()

    @pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork: POSIX only")
    def test_a_forked_child_that_closes_the_run_writes_no_copy(self, tmp_path: Path) -> None:
        run = runlines.Run("r", tmp_path, stdout=False, compact=True)
        run.log("train", step=1)
        child = os.fork()
        if child == 0:  # the child: close its copy of the run, then leave at once
            run.close()
            os._exit(0 if not (tmp_path / "r.parquet").exists() else 3)
        _, status = os.waitpid(child, 0)

        assert os.waitstatus_to_exitcode(status) == 0
        assert not (tmp_path / "r.parquet").exists()
        run.close()
        assert (tmp_path / "r.parquet").is_file()

    def test_a_failed_run_still_gets_its_copy(self, tmp_path: Path) -> None:
        with pytest.raises(ValueError, match="boom"), runlines.Run("r", tmp_path, stdout=False,
                                                                   compact=True):  # fmt: skip
            raise ValueError("boom")

        assert (tmp_path / "r.parquet").is_file()

    def test_a_copy_that_cannot_be_written_warns_and_the_run_ends_well(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        def fail(path: Any) -> None:
            raise OSError("disk full")

        monkeypatch.setattr("runlines.reading._copies.write_copy", fail)

        with pytest.warns(runlines.RunlinesWarning, match="Parquet copy .* was not written"):
            log = _train(tmp_path, compact=True)

        assert runlines.load(log)["event"].iloc[-1] == "run_end"

    def test_compact_must_be_a_bool_or_none(self, tmp_path: Path) -> None:
        with pytest.raises(TypeError, match="compact must be True, False or None"):
            runlines.Run("r", tmp_path, stdout=False, compact="yes")  # type: ignore[arg-type]

        assert not (tmp_path / "r.jsonl").exists()


class TestCompactCommand:
    def test_compact_writes_a_copy_of_each_log_and_prints_it(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        write(tmp_path / "a.jsonl", line("train", run="a", step=1, loss=0.5))
        write(tmp_path / "b.jsonl", line("train", run="b", step=1, loss=0.25))

        assert main(["compact", str(tmp_path)]) == 0

        printed = capsys.readouterr().out.split()
        assert printed == [str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")]

    def test_compact_of_an_empty_log_writes_nothing(self, tmp_path: Path) -> None:
        write(tmp_path / "a.jsonl")

        assert compact(tmp_path) == []
        assert not (tmp_path / "a.parquet").exists()

    def test_a_torn_last_line_is_left_to_the_jsonl(self, tmp_path: Path) -> None:
        log = write(tmp_path / "a.jsonl", line("train", step=1), b'{"ts": 1, "eve')

        write_copy(log)

        with pytest.warns(runlines.RunlinesWarning, match="line 2"):
            frame = runlines.load(log)
        assert frame["step"].tolist() == [1]

    def test_compact_of_a_missing_source_is_a_clear_error(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["compact", str(tmp_path / "nope.jsonl")]) == 1

        assert "runlines: error:" in capsys.readouterr().err


class TestRunsFromCopies:
    def _sweep(self, root: Path) -> list[Path]:
        logs = []
        for name in ("a", "b", "c"):
            logs.append(_train(root, name, compact=False))
        with runlines.Run(
            "b", root, stdout=False, resume_step=10, compact=False, resume="allow"
        ) as run:
            run.log("train", step=11, loss=0.001)
        return logs

    def test_runs_through_copies_equals_runs_of_the_jsonl(self, tmp_path: Path) -> None:
        logs = self._sweep(tmp_path)
        plain = runlines.runs(tmp_path)
        for log in logs:
            write_copy(log)

        copied = runlines.runs(tmp_path)

        pd.testing.assert_frame_equal(plain, copied)
        assert copied.set_index("run").loc["b", "train.loss.best"] == 0.001

    def test_records_after_the_copy_count_in(self, tmp_path: Path) -> None:
        log = _train(tmp_path, "a", compact=True)
        with runlines.Run(
            "a", tmp_path, stdout=False, resume_step=5, compact=False, resume="allow"
        ) as run:
            run.log("train", step=6, loss=5.0)
            run.log("eval", step=7, accuracy=0.9)
        copied = runlines.runs(log)
        (tmp_path / "a.parquet").unlink()

        plain = runlines.runs(log)

        pd.testing.assert_frame_equal(plain, copied)
        assert copied.loc[0, "attempts"] == 2
        assert copied.loc[0, "eval.accuracy"] == 0.9

    def test_runs_reads_no_jsonl_record_of_a_copied_log(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        log = _train(tmp_path, compact=True)

        def no_records(*args: Any, **kwargs: Any) -> None:
            raise AssertionError("the JSONL was read")

        monkeypatch.setattr("runlines.reading._table.iter_events", no_records)

        assert runlines.runs(log).loc[0, "train.loss"] == pytest.approx(1 / 20)

    def test_the_run_table_of_a_hand_written_log_survives_the_copy(self, tmp_path: Path) -> None:
        log = write(
            tmp_path / "h.jsonl",
            line("run_start", ts=T0, attempt=1, config={"opt": {"lr": 0.1}, "tags": [1, 2]}),
            line("train", ts=T0 + 1, step=1, loss=float("nan"), big=2**70),
            line("train", ts=T0 + 2, step=2, loss=float("inf")),
            line("run_end", ts=T0 + 3, status="ok"),
        )
        plain = runlines.runs(log)
        write_copy(log)

        copied = runlines.runs(log)

        pd.testing.assert_frame_equal(plain, copied)
        assert copied.loc[0, "train.big"] == 2**70


_EVENTS = ["train", "eval", "run_start", "run_end", "system", "stall", "warning", "a.b", 7]
_FIELDS = ["loss", "accuracy", "value", "step", "run", "status", "attempt", "resume_step",
           "config", "lr", "grad_norm"]  # fmt: skip
_values = st.one_of(
    st.integers(-5, 5),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([True, None, "x", 2**70, -(2**64), {"lr": 0.1, "opt": {"b": 1}}, [1]]),
)
_records = st.fixed_dictionaries(
    {"ts": st.one_of(st.floats(0, 1e4), st.sampled_from([None, "t", math.nan, 5])),
     "event": st.sampled_from(_EVENTS)},
    optional={name: _values for name in _FIELDS},
)  # fmt: skip


def _normal(state: dict[str, Any]) -> Any:
    """Return *state* comparable with ==: NaN as text."""
    return json.loads(json.dumps(state, allow_nan=True).replace("NaN", '"NaN"'))


def _states(path: Path) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """Return the summary state from the parsed columns (None: declined), and from Python."""
    log = log_file(path)
    _, data = complete_lines(path)
    reader = FileReader(log, data, None, find_nulls=True)
    parsed = reader.read()
    read_line = line_reader(path, reader.main.starts, reader.main.ends)
    try:
        state = summary_state(parsed, Columns([parsed]), read_line)
    finally:
        read_line.close()
    return state, python_summary(path, len(data))[0]


def _runs_and_warnings(path: Path) -> tuple[pd.DataFrame, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frame = runlines.runs(path)
    return frame, [str(w.message) for w in caught]


class TestSummaryFromColumns:
    """write_copy() builds runs()' state from the parsed columns: what a Python pass gives."""

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        records=st.lists(_records, min_size=1, max_size=12),
        repeat=st.sampled_from([1, 3]),
        as_run_writes=st.booleans(),
    )
    def test_the_state_is_the_python_pass_state(
        self, records: list[dict[str, Any]], repeat: int, as_run_writes: bool
    ) -> None:
        def encoded(record: dict[str, Any]) -> bytes:
            if as_run_writes:  # `_nonfinite` marks, as Run writes them
                return encode_line(record)
            return json.dumps(record, allow_nan=True).encode() + b"\n"

        # small buckets and blocks: several pieces, as a big log has
        with tempfile.TemporaryDirectory() as tmp, mock.patch.object(engine, "MIN_BUCKET", 2), \
                mock.patch.object(engine, "BLOCK_BYTES", 300):  # fmt: skip
            path = Path(tmp) / "h.jsonl"
            path.write_bytes(b"".join(encoded(r) for r in records * repeat))

            fast, python = _states(path)

        assert fast is not None
        assert _normal(fast) == _normal(python)
        assert list(fast["last"]) == list(python["last"])  # runs()' column order

    def test_only_a_mark_or_invalid_utf8_declines_before_parsing(self) -> None:
        def bytes_of(text: bytes) -> Any:
            return np.frombuffer(text, dtype=np.uint8).copy()

        assert declines(bytes_of(b'\xef\xbb\xbf{"a":1}\n'))
        assert declines(bytes_of(b'{"a":"\xc0\xaf"}\n'))
        assert not declines(bytes_of('{"a":"Inference: \u00e9"}\n'.encode()))

    def test_two_metrics_of_one_column_name_take_the_python_pass(self, tmp_path: Path) -> None:
        path = write(tmp_path / "r.jsonl", line("a.b", c=1.0), raw({"event": "a", "b.c": 2.0}))

        fast, python = _states(path)

        assert fast is None
        assert python["last"] == {"a.b.c": 2.0}

    def test_the_benchmark_mix_is_summarised_from_columns(self, tmp_path: Path) -> None:
        steps = [line("run_start", ts=T0, attempt=1, config={"lr": 0.1})]
        for step in range(3000):
            steps.append(line("train", ts=T0 + step, step=step, loss=1 / (step + 1), lr=0.1))
            if step % 100 == 0:
                steps.append(line("eval", ts=T0 + step, step=step, accuracy=step / 3000))
            if step == 1500:
                steps.append(line("run_start", ts=T0 + step, attempt=2, resume_step=1000))
        steps.append(line("run_end", ts=T0 + 3000, status="ok"))
        path = write(tmp_path / "r.jsonl", *steps)

        fast, python = _states(path)

        assert fast is not None
        assert _normal(fast) == _normal(python)
        assert fast["attempts"] == 2
        assert fast["best"]["train.loss"][3] == 2999.0  # the best's step, of the second attempt

    @pytest.mark.parametrize(
        ("name", "odd"),
        [
            ("a byte-order mark", b'\xef\xbb\xbf{"ts":0,"event":"warning","line":1}\n'),
            ("invalid UTF-8", b'{"ts":9,"event":"warning","text":"\xff"}\n'),
            ("Inf, which only pyarrow reads", b'{"ts":9,"event":"warning","line":Inf}\n'),
            ("-NaN, likewise", b'{"ts":9,"event":"warning","line": -NaN}\n'),
        ],
    )
    def test_lines_the_engine_and_iter_events_read_apart_take_the_python_pass(
        self, tmp_path: Path, name: str, odd: bytes
    ) -> None:
        """load() reads the odd line, iter_events() skips it: runs() is as without a copy."""
        good = b'{"ts":2,"event":"train","loss":0.5,"note":"Inference: Infinity"}\n'
        lines = (odd, good, good) if odd.startswith(b"\xef") else (good, good, odd)
        path = write(tmp_path / "r.jsonl", *lines)
        plain, said = _runs_and_warnings(path)

        write_copy(path)
        copied, said_too = _runs_and_warnings(path)

        pd.testing.assert_frame_equal(plain, copied)
        assert said == said_too

    def test_an_older_copy_format_is_ignored_with_a_warning(self, tmp_path: Path) -> None:
        log = _train(tmp_path, compact=True)
        copy = tmp_path / "r.parquet"
        table = pq.read_table(copy)
        metadata = dict(pq.read_metadata(copy).metadata)
        about = json.loads(metadata[b"runlines.copy"])
        about["format"] = 1
        metadata[b"runlines.copy"] = json.dumps(about).encode()
        pq.write_table(table.replace_schema_metadata(metadata), copy)

        with pytest.warns(runlines.RunlinesWarning, match="r.parquet is not used: .*copy format 1"):
            frame = runlines.runs(log)

        assert frame.loc[0, "train.loss"] == pytest.approx(1 / 20)


class TestDamage:
    """A copy's own bytes are checked: a damaged or rewritten copy is not used, with a warning."""

    def _read(self, log: Path) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
        copy_format.cache.clear()  # a fresh process: nothing verified yet
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            frames = runlines.load(log), runlines.runs(log)
        return frames[0], frames[1], [str(w.message) for w in caught]

    def test_no_byte_flipped_in_a_copy_changes_what_load_and_runs_give(
        self, tmp_path: Path
    ) -> None:
        log = _train(tmp_path, compact=False)
        plain, plain_runs, _ = self._read(log)
        copy = write_copy(log)
        assert copy is not None
        good = copy.read_bytes()
        footer = len(good) - 8 - int.from_bytes(good[-8:-4], "little")
        places = sorted({*range(0, footer, 11), *range(footer, len(good), 7)})

        for place in places:
            damaged = bytearray(good)
            damaged[place] ^= 0x01
            copy.write_bytes(damaged)
            frame, table, said = self._read(log)

            pd.testing.assert_frame_equal(frame, plain, obj=f"load(), byte {place} flipped")
            pd.testing.assert_frame_equal(table, plain_runs, obj=f"runs(), byte {place} flipped")
            assert all("r.parquet is not used" in text for text in said), (place, said)

    def test_a_copy_rewritten_by_pyarrow_with_its_footer_kept_is_not_used(
        self, tmp_path: Path
    ) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        log = _train(tmp_path, compact=True)
        plain = runlines.load(log)
        copy = tmp_path / "r.parquet"
        table = pq.read_table(copy)
        columns = [
            pc.add(column, 1.0) if pa.types.is_floating(column.type) else column
            for column in table.columns
        ]
        kept = {k: v for k, v in pq.read_metadata(copy).metadata.items() if b"runlines" in k}
        pq.write_table(pa.table(columns, schema=table.schema.with_metadata(kept)), copy)
        copy_format.cache.clear()

        with pytest.warns(runlines.RunlinesWarning, match="r.parquet is not used: .*bytes"):
            frame = runlines.load(log)

        pd.testing.assert_frame_equal(frame, plain)


def _loads_and_warnings(path: Path) -> list[tuple[Any, list[str]]]:
    """Return what each load() variant gives for *path* (a frame or an error's type), and the
    warnings it gave."""
    variants: list[dict[str, Any]] = [
        {},
        {"superseded": True},
        {"event": "eval"},
        {"event": ["train", "warning"]},
        {"event": "train", "columns": ["loss", "value"]},
        {"columns": ["value"]},
    ]
    found = []
    for options in variants:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                result: Any = runlines.load(path, **options)
            except runlines.RunlinesError as err:
                result = type(err)
        found.append((result, [str(w.message) for w in caught]))
    return found


def _same_loads(plain: list[tuple[Any, list[str]]], copied: list[tuple[Any, list[str]]]) -> None:
    for (ours, said), (theirs, said_too) in zip(plain, copied, strict=True):
        if isinstance(ours, pd.DataFrame):
            pd.testing.assert_frame_equal(ours, theirs)
        else:
            assert ours == theirs
        assert said == said_too


def _ints_and_floats(records: list[dict[str, Any]]) -> bool:
    """Return whether some field holds an int in one record and a float in another."""
    kinds: dict[str, set[type]] = {}
    for record in records:
        for name, value in record.items():
            if type(value) in (int, float):
                kinds.setdefault(name, set()).add(type(value))
    return any(len(held) == 2 for held in kinds.values())


class TestLoadFromCopies:
    """load() through a copy of many pieces (small buckets, as a big log has) gives what the
    JSONL alone gives: fields whose type changes between events, event filters that leave
    pieces unread, superseded records, and the JSONL appended after the copy."""

    @settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        records=st.lists(_records, min_size=1, max_size=10),
        repeat=st.sampled_from([1, 3]),
        tail=st.lists(_records, max_size=3),
    )
    def test_every_load_is_the_jsonl_load(
        self, records: list[dict[str, Any]], repeat: int, tail: list[dict[str, Any]]
    ) -> None:
        def encoded(rows: list[dict[str, Any]]) -> bytes:
            return b"".join(json.dumps(r, allow_nan=True).encode() + b"\n" for r in rows)

        with tempfile.TemporaryDirectory() as tmp, mock.patch.object(engine, "MIN_BUCKET", 2), \
                mock.patch.object(engine, "BLOCK_BYTES", 300):  # fmt: skip
            path = Path(tmp) / "h.jsonl"
            path.write_bytes(encoded(records * repeat))
            plain = _loads_and_warnings(path)
            assert write_copy(path) is not None
            _same_loads(plain, _loads_and_warnings(path))

            # pyarrow reads the ints of a block as floats where the block holds floats too, and
            # where a block starts depends on where the read starts (the copy's end, or the
            # file's start): a field of ints and floats may then read differently
            if _ints_and_floats(records + tail):
                return
            with path.open("ab") as stream:
                stream.write(encoded(tail))
            copy = path.with_suffix(".parquet")
            os.rename(copy, copy.with_suffix(".away"))
            plain = _loads_and_warnings(path)
            os.rename(copy.with_suffix(".away"), copy)
            _same_loads(plain, _loads_and_warnings(path))

    def test_a_resumed_run_stores_its_superseded_records_last(self, tmp_path: Path) -> None:
        """The records load() keeps come first, in line order: its columns as they are."""
        lines = [line("run_start", attempt=1)]
        for step in range(1, 3001):
            lines.append(line("train", step=step, loss=1 / step))
            if step == 2000:  # killed; resumed from the step-1500 checkpoint
                lines.append(line("run_start", attempt=2, resume_step=1500))
        lines[2002:] = [line("train", step=s, loss=2 / s) for s in range(1501, 3001)]
        path = write(tmp_path / "r.jsonl", *lines)
        plain = _loads_and_warnings(path)
        copy = write_copy(path)
        assert copy is not None

        stored = pq.read_table(copy, columns=["__line", "__superseded"]).to_pandas()
        rewound = stored["__superseded"].to_numpy()
        assert rewound.sum() == 500  # steps 1501-2000 of the first attempt
        assert not rewound[:-500].any()
        assert (np.diff(stored["__line"][:-500]) > 0).all()
        assert (np.diff(stored["__line"][-500:]) > 0).all()
        copied = _loads_and_warnings(path)
        _same_loads(plain, copied)
        steps = copied[1][0]["step"].fillna(0).astype(int).tolist()  # superseded=True
        assert steps == [0, *range(1, 2001), 0, *range(1501, 3001)]  # in line order
        assert copied[0][0]["step"].dropna().astype(int).tolist() == list(range(1, 3001))

    @pytest.mark.parametrize("resumed", [False, True], ids=["one_attempt", "resumed"])
    def test_the_frame_from_a_copy_can_be_written_to(self, tmp_path: Path, resumed: bool) -> None:
        """pandas writes into a frame's columns in place: they are numpy's, not the copy's."""
        steps = range(1, 2001)
        lines = [line("train", ts=T0 + s, step=s, loss=1 / s, ok=s % 2 == 0) for s in steps]
        if resumed:
            lines.insert(1500, line("run_start", ts=T0, attempt=2, resume_step=1200))
        lines += [line("eval", ts=T0 + 2001, step=2000, accuracy=0.5)]  # gaps in step-less ones
        path = write(tmp_path / "r.jsonl", *lines)
        assert write_copy(path) is not None

        frame = runlines.load(path)
        first = frame.index[0]
        frame.loc[first, ["ts", "loss", "accuracy"]] = 0.0
        frame.loc[first, "step"] = 7
        frame.loc[first, "ok"] = False
        frame.iloc[1, frame.columns.get_loc("step")] = 8

        assert frame.loc[first, ["ts", "loss", "step", "ok"]].tolist() == [0.0, 0.0, 7, False]
        assert frame["step"].iloc[1] == 8

    def test_a_field_of_two_types_in_two_buckets(self, tmp_path: Path) -> None:
        """`value` is an int in eval, a float in train and text in warning: one column each."""
        lines = []
        for step in range(1500):  # each event over _MIN_BUCKET lines: a bucket of its own
            lines.append(line("train", step=step, value=step / 2))
            lines.append(line("eval", step=step, value=step))
            if step < 1100:
                lines.append(line("warning", step=step, value=f"w{step}"))
        path = write(tmp_path / "r.jsonl", *lines)
        plain = _loads_and_warnings(path)
        copy = write_copy(path)
        assert copy is not None
        stored = pq.read_schema(copy)
        assert {str(stored.field(n).type) for n in stored.names if n.startswith("c")} >= {
            "int64", "double", "large_string"
        }  # fmt: skip

        copied = _loads_and_warnings(path)

        _same_loads(plain, copied)
        frame = copied[0][0]
        assert frame["value"].dtype == object
        assert frame["value"].map(type).value_counts().to_dict() == {float: 1500, int: 1500,
                                                                    str: 1100}  # fmt: skip
        assert copied[3][0]["value"].dtype == object  # train and warning: floats and text
        numbers = runlines.load(path, event=["train", "eval"])["value"]
        assert numbers.dtype == np.float64  # ints and floats: floats, as without the copy


class TestFooter:
    """runs() reads a copy's footer with pyarrow, once per copy and process."""

    def test_a_field_holding_the_footer_keys_bytes_reads_as_itself(self, tmp_path: Path) -> None:
        # a string field that holds a key's bytes: the column statistics hold them too
        marker = "\x18\x10runlines.summary\x18\x05hello\x00"
        path = write(tmp_path / "r.jsonl", *(line("note", text=marker, step=i) for i in range(5)))
        assert write_copy(path) is not None

        frame = runlines.runs(path)

        assert frame.loc[0, "step"] == 4
        assert runlines.load(path)["text"].tolist() == [marker] * 5

    def test_a_copy_written_again_is_read_again_not_from_the_cache(self, tmp_path: Path) -> None:
        log = _train(tmp_path, compact=True)
        assert runlines.runs(log).loc[0, "attempts"] == 1
        with runlines.Run("r", tmp_path, stdout=False, compact=True, resume="allow") as run:
            run.log("train", step=30, loss=0.001)

        copied = runlines.runs(log)

        assert copied.loc[0, "attempts"] == 2
        assert copied.loc[0, "train.loss.best"] == 0.001

    def test_the_footer_grows_with_the_fields_not_with_the_records(self, tmp_path: Path) -> None:
        # a loss that improves at every step and a schedule: each record is a new best, over
        # several of the engine's blocks
        sizes = {}
        for steps in (2_000, 40_000):
            log = _train(tmp_path / str(steps), steps=steps, compact=False)
            copy = write_copy(log)
            assert copy is not None
            metadata = pq.read_metadata(copy).metadata
            sizes[steps] = {key: len(value) for key, value in metadata.items()}

        small, big = sizes[2_000], sizes[40_000]
        assert small.keys() == big.keys()
        for key in big:  # the same to a few digits of the counts, lines and times they hold
            assert abs(big[key] - small[key]) < 64, key
        # once: the metadata is not kept in the Arrow schema too
        assert big[b"ARROW:schema"] < 2048

    def test_steps_and_lines_are_delta_encoded_and_floats_split_by_byte(
        self, tmp_path: Path
    ) -> None:
        copy = write_copy(_train(tmp_path, steps=5_000, compact=False))
        assert copy is not None
        metadata = pq.read_metadata(copy)
        names = pq.read_schema(copy).names
        chunks = {names[i]: metadata.row_group(0).column(i) for i in range(len(names) - 1)}
        step = next(c for c in chunks.values() if c.statistics and c.statistics.max == 5_000)

        assert "DELTA_BINARY_PACKED" in step.encodings
        assert "DELTA_BINARY_PACKED" in chunks["__line"].encodings
        loss = next(c for c in chunks.values() if c.physical_type == "DOUBLE" and c.statistics
                    and c.statistics.max == 1.0)  # fmt: skip
        assert "BYTE_STREAM_SPLIT" in loss.encodings
        # about 0.1x; the `ts` column holds the real clock's times, so its size varies a little
        assert copy.stat().st_size < 0.15 * (tmp_path / "r.jsonl").stat().st_size


class TestVerifiedLogs:
    """A log whose mtime changed is hashed whole once per process, not at every read."""

    def _log(self, tmp_path: Path) -> Path:
        log = _train(tmp_path, steps=2_000, compact=True)
        assert log.stat().st_size > 10 * copy_format.SAMPLE_BYTES
        copy_format.verified.clear()
        stat = log.stat()
        os.utime(log, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # touched, as cp does
        return log

    def _bytes_read(self, monkeypatch: pytest.MonkeyPatch) -> list[int]:
        read: list[int] = []
        pread = os.pread

        def counted(fd: int, size: int, offset: int) -> bytes:
            data = pread(fd, size, offset)
            read.append(len(data))
            return data

        monkeypatch.setattr(os, "pread", counted)  # the module's os is this one
        return read

    def test_a_touched_log_is_hashed_whole_once(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        log = self._log(tmp_path)
        covered = log.stat().st_size
        read = self._bytes_read(monkeypatch)

        first = runlines.load(log)
        after_first = sum(read)
        second = runlines.load(log)

        assert after_first >= covered  # the first read hashed the covered bytes
        assert sum(read) - after_first < covered / 4  # the second only their two ends
        pd.testing.assert_frame_equal(first, second)

    def test_a_log_grown_since_it_was_hashed_is_not_hashed_again(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        log = self._log(tmp_path)
        covered = log.stat().st_size
        runlines.load(log)
        with log.open("ab") as out:
            out.write(line("train", run="r", step=5_000, loss=0.25))
        read = self._bytes_read(monkeypatch)

        frame = runlines.load(log)

        assert sum(read) < covered / 4
        assert frame["step"].iloc[-1] == 5_000

    def test_a_log_rewritten_in_place_after_it_was_hashed_is_hashed_again(
        self, tmp_path: Path
    ) -> None:
        log = self._log(tmp_path)
        runlines.load(log)
        data = bytearray(log.read_bytes())
        at = data.index(b'"step":1000,')
        data[at : at + 12] = b'"step":9999,'  # same size, in the middle of the covered bytes
        with log.open("r+b") as out:
            out.write(data)

        with pytest.warns(runlines.RunlinesWarning, match="r.parquet is not used: .*differ"):
            frame = runlines.load(log)

        assert (frame["step"] == 9999).any()


@given(st.permutations(list(range(12))) | st.just(list(range(12))), st.integers(0, 12))
def test_a_table_is_reordered_as_take_would(order: list[int], slices: int) -> None:
    import pyarrow as pa

    table = pa.table({"a": list(range(12)), "b": [str(i) for i in range(12)]})
    with mock.patch.object(copy_write, "MAX_SLICES", slices):  # by slices, or by take()
        found = reordered(table, np.asarray(order, dtype=np.int64))

    assert found.to_pylist() == table.take(order).to_pylist()
