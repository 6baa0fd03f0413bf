"""load() from a log's Parquet copy gives the frame it gives from the JSONL, dtypes and values.

Every frame read through a copy (and through a copy plus the JSONL appended after it) must
equal the one read from the JSONL alone, with the same warnings; lines are read by pyarrow's
JSON reader, Python (orjson) taking only those it cannot.
"""

from __future__ import annotations

import random
import tempfile
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import runlines
from runlines import RunlinesWarning
from runlines._encoding import encode_line
from runlines.errors import RunlinesError
from runlines.reading import _columnar
from runlines.reading._columnar import blocks as reading  # the block reader: its knobs
from runlines.reading._copies import write_copy


def _load(path: Path, **kwargs: Any) -> tuple[pd.DataFrame, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frame = runlines.load(path, **kwargs)
    return frame, [str(w.message) for w in caught if w.category is RunlinesWarning]


def both_frames(path: Path, **kwargs: Any) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """load() from the JSONL alone, then through a fresh copy; the warnings asserted the same."""
    path.with_suffix(".parquet").unlink(missing_ok=True)
    plain, said = _load(path, **kwargs)
    assert write_copy(path) is not None
    copied, said_too = _load(path, **kwargs)
    assert said == said_too
    return plain, copied, said


# --- the same frame either way ----------------------------------------------------------------

_KEYS = st.sampled_from(["step", "loss", "name", "ok", "note", "é", "a\\b", 'q"'])
_FLOATS = st.floats(allow_nan=True, allow_infinity=True)
_INTS = st.integers(min_value=-(2**63), max_value=2**63 - 1)
_ANY = st.one_of(_INTS, _FLOATS, st.booleans(), st.none(), st.text(max_size=8))
# one kind per key, as real logs have it
_TYPED = st.fixed_dictionaries(
    {},
    optional={
        "step": _INTS,
        "loss": _FLOATS,
        "lr": st.one_of(_INTS, _FLOATS),
        "name": st.text(max_size=8),
        "ok": st.booleans(),
        "note": st.none(),
        "big": st.integers(min_value=2**63, max_value=2**70),
        "conf": st.dictionaries(st.text(max_size=3), _INTS, max_size=2),
    },
)


def _write_log(path: Path, events: list[str], records: list[dict[str, Any]], torn: int) -> None:
    lines = [
        encode_line({"ts": 1.0 + i, "event": events[i % len(events)], "run": "r", **record})
        for i, record in enumerate(records)
    ]
    if torn:
        lines.insert(torn % (len(lines) + 1), lines[torn % len(lines)][: torn % 17] + b"\n")
    path.write_bytes(b"".join(lines))


def _assert_same(path: Path, **kwargs: Any) -> None:
    """Both ways make the same frame, or fail with the same error."""
    try:
        plain, copied, _ = both_frames(path, **kwargs)
    except RunlinesError as err:
        with pytest.raises(type(err)), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            runlines.load(path, **kwargs)
        return
    pd.testing.assert_frame_equal(plain, copied)


class TestSameFrame:
    @settings(
        max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(
        records=st.lists(_TYPED, min_size=1, max_size=30),
        events=st.lists(st.sampled_from(["train", "eval", "x"]), min_size=1, max_size=3),
        torn=st.integers(min_value=0, max_value=100),
    )
    def test_records_of_one_kind_per_field(
        self,
        tmp_path_factory: pytest.TempPathFactory,
        records: list[dict[str, Any]],
        events: list[str],
        torn: int,
    ) -> None:
        path = tmp_path_factory.mktemp("typed") / "r.jsonl"
        _write_log(path, events, records, torn)
        _assert_same(path)
        _assert_same(path, event=events[0])

    @settings(
        max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(records=st.lists(st.dictionaries(_KEYS, _ANY, max_size=5), min_size=1, max_size=30))
    def test_records_of_any_values(
        self, tmp_path_factory: pytest.TempPathFactory, records: list[dict[str, Any]]
    ) -> None:
        path = tmp_path_factory.mktemp("any") / "r.jsonl"
        _write_log(path, ["train", "eval"], records, 0)
        _assert_same(path)
        _assert_same(path, event="eval")

    def test_braced_lines_that_are_no_json_are_no_runlines_log_and_get_no_copy(
        self, tmp_path: Path
    ) -> None:
        path = tmp_path / "r.jsonl"
        path.write_bytes(b'{"a":1,}\n{"b"}\n{"c":"\\ud800"}\n')

        with pytest.raises(RunlinesError, match="is not a runlines log"):
            runlines.load(path)
        write_copy(path)
        with pytest.raises(RunlinesError, match="is not a runlines log"):
            runlines.load(path)

    def test_an_int_just_past_int64_stays_exact_either_way(self, tmp_path: Path) -> None:
        """2**63 has 19 digits: pyarrow reads it as a float, and Python must read it again."""
        path = tmp_path / "r.jsonl"
        records: list[dict[str, Any]] = [{"big": 2**63}, {"big": 5}, {"big": 2**64 - 1, "c": {}}]
        _write_log(path, ["train"], records, 0)

        plain, copied, _ = both_frames(path)

        pd.testing.assert_frame_equal(plain, copied)
        assert copied["big"].tolist() == [2**63, 5, 2**64 - 1]

    @pytest.mark.parametrize(
        "records",
        [
            [{"lr": 0.5, "c": {}}, {"lr": 2**53 + 1}],  # a float only in a nested line
            [{"lr": 2**53 + 1, "c": {}}, {"lr": 0.5}],
            [{"v": "a", "c": {}}, {"v": 1}],
            [{"v": 2**63, "c": {}}, {"v": 1}],
            [{"v": float("nan")}, {"v": float("-inf")}, {"v": None}, {"w": [1, {"x": None}]}],
        ],
    )
    def test_nested_and_odd_values_come_back_as_they_were(
        self, tmp_path: Path, records: list[dict[str, Any]]
    ) -> None:
        path = tmp_path / "r.jsonl"
        _write_log(path, ["train"], records, 0)

        plain, copied, _ = both_frames(path)

        pd.testing.assert_frame_equal(plain, copied)

    @pytest.mark.parametrize("block_bytes", [4096, 16 << 20])
    def test_a_log_of_buckets_and_blocks(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block_bytes: int
    ) -> None:
        """Thousands of lines: events in buckets of their own, read in blocks, every odd line."""
        monkeypatch.setattr(reading, "BLOCK_BYTES", block_bytes)
        path = tmp_path / "r.jsonl"
        path.write_bytes(b"".join(_bucket_lines(6000)))

        for kwargs in ({}, {"event": "eval"}, {"event": ["warn", "span"]}, {"superseded": True}):
            plain, copied, said = both_frames(path, **kwargs)
            pd.testing.assert_frame_equal(plain, copied, check_like="event" in kwargs)
            assert len(said) == 1
        plain, copied, _ = both_frames(path, columns=["loss", "value", "huge", "tokens"])
        pd.testing.assert_frame_equal(plain, copied)
        assert copied["huge"].dropna().tolist() == [2**64]
        assert copied["tokens"].dtype == "Int64"  # in train records only
        assert copied["value"].dtype == object  # ints, and one string


def _bucket_lines(count: int, first: int = 0, seed: int = 4) -> list[bytes]:
    rng = random.Random(seed)
    lines = [encode_line({"ts": 0.0, "event": "run_start", "run": "r", "attempt": 1})]
    for i in range(first, first + count):
        kind = rng.choice(["train", "train", "eval", "span", "warn"])
        record: dict[str, Any] = {"ts": 1.0 + i, "event": kind, "run": "r", "step": i}
        if kind == "train":
            record["loss"] = rng.random() if i % 500 else float("nan")
            record["tokens"] = rng.randrange(1 << 40)
        elif kind == "eval":
            record["value"] = rng.randrange(9) if i != 3001 else "high"  # two kinds once
            record["acc"] = None if i % 7 == 0 else rng.random()
        elif kind == "span":
            record["name"] = rng.choice(["data", "fwd", "bwd"]) + "\u00e9"
            record["duration_s"] = rng.random()
        else:
            record["context"] = {"step": i, "tags": ["a"]}
        if i == 4000:
            record["huge"] = 2**64  # beyond 64 bits
        lines.append(encode_line(record))
        if i == 2500:
            lines.append(b'{"ts":2.5,"event":"train","run":"r","st\n')  # torn
            lines.append(encode_line({"ts": 3.0, "event": "run_start", "run": "r",
                                      "attempt": 2, "resume_step": 2000}))  # fmt: skip
    return lines


class TestAppendedAfterTheCopy:
    def test_the_lines_after_the_copy_are_read_from_the_jsonl(self, tmp_path: Path) -> None:
        path = tmp_path / "r.jsonl"
        lines = _bucket_lines(6000)
        path.write_bytes(b"".join(lines[:3000]))
        write_copy(path)
        with path.open("ab") as file:
            file.write(b"".join(lines[3000:]) + b'{"ts":9,"event":"tr\n')  # and a torn line
        copied, said = _load(path)
        path.with_suffix(".parquet").unlink()

        plain, said_plain = _load(path)

        pd.testing.assert_frame_equal(plain, copied)
        assert said == said_plain
        assert "6004" in said[0]  # the torn line's number in the whole log

    def test_a_resumed_run_reads_its_copy_and_its_new_attempt(self, tmp_path: Path) -> None:
        with runlines.Run("r", tmp_path, stdout=False, compact=True) as run:
            for step in range(50):
                run.log("train", step=step, loss=1.0 / (step + 1))
        copy = tmp_path / "r.parquet"
        written = copy.stat().st_mtime_ns
        copy.rename(tmp_path / "kept.parquet")
        with runlines.Run(
            "r", tmp_path, stdout=False, resume_step=30, compact=False, resume="allow"
        ) as run:
            run.log("train", step=31, loss=0.01)
        plain = runlines.load(tmp_path / "r.jsonl")
        (tmp_path / "kept.parquet").rename(copy)

        copied = runlines.load(tmp_path / "r.jsonl")

        assert copy.stat().st_mtime_ns == written
        pd.testing.assert_frame_equal(plain, copied)
        assert copied["attempt"].max() == 2


class TestTrust:
    def _log_and_copy(self, tmp_path: Path) -> Path:
        path = tmp_path / "r.jsonl"
        _write_log(path, ["train"], [{"step": i, "loss": i / 2} for i in range(100)], 0)
        write_copy(path)
        return path

    def test_a_copy_is_used_while_it_matches(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        path = self._log_and_copy(tmp_path)
        from runlines.reading._copies import read

        def no_parse(*args: Any, **kwargs: Any) -> None:
            raise AssertionError("the JSONL was parsed")

        monkeypatch.setattr(read, "FileReader", no_parse)

        assert len(runlines.load(path)) == 100

    def test_a_log_rewritten_in_place_is_read_and_its_copy_ignored(self, tmp_path: Path) -> None:
        path = self._log_and_copy(tmp_path)
        stat = path.stat()
        data = path.read_bytes()
        path.write_bytes(data.replace(b'"loss":0.5', b'"loss":9.5'))  # same length
        import os

        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and the same mtime

        with pytest.warns(RunlinesWarning, match="r.parquet is not used: the log's bytes differ"):
            frame = runlines.load(path)

        assert 9.5 in frame["loss"].tolist()

    def test_a_log_that_changed_after_its_copy_is_hashed_again(self, tmp_path: Path) -> None:
        path = self._log_and_copy(tmp_path)
        data = path.read_bytes()
        first = data[: data.index(b"\n") + 1]
        path.write_bytes(data.replace(b'"loss":49.5', b'"loss":99.5') + first)

        with pytest.warns(RunlinesWarning, match="the log's bytes differ"):
            frame = runlines.load(path)

        assert 99.5 in frame["loss"].tolist()

    def test_a_log_shorter_than_its_copy_is_read_alone(self, tmp_path: Path) -> None:
        path = self._log_and_copy(tmp_path)
        data = path.read_bytes()
        path.write_bytes(data[: data.index(b"\n", 500) + 1])

        with pytest.warns(RunlinesWarning, match="the log is shorter than"):
            frame = runlines.load(path)

        assert len(frame) < 100

    def test_a_foreign_parquet_file_is_ignored(self, tmp_path: Path) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = tmp_path / "r.jsonl"
        _write_log(path, ["train"], [{"step": 1}], 0)
        pq.write_table(pa.table({"step": [5, 6]}), tmp_path / "r.parquet")

        with pytest.warns(RunlinesWarning, match="it is no runlines copy"):
            frame = runlines.load(path)

        assert frame["step"].tolist() == [1]

    def test_a_half_written_copy_is_ignored(self, tmp_path: Path) -> None:
        path = self._log_and_copy(tmp_path)
        copy = path.with_suffix(".parquet")
        copy.write_bytes(copy.read_bytes()[:-100])

        with pytest.warns(RunlinesWarning, match="it cannot be read"):
            frame = runlines.load(path)

        assert len(frame) == 100

    def test_a_copy_with_damaged_data_is_ignored(self, tmp_path: Path) -> None:
        path = self._log_and_copy(tmp_path)
        copy = path.with_suffix(".parquet")
        data = bytearray(copy.read_bytes())
        data[4:400] = b"\xff" * 396  # the first data pages; the footer stays readable
        copy.write_bytes(bytes(data))

        with pytest.warns(RunlinesWarning, match="r.parquet is not used: it cannot be read"):
            frame = runlines.load(path)

        assert len(frame) == 100

    def test_another_logs_copy_is_ignored(self, tmp_path: Path) -> None:
        path = self._log_and_copy(tmp_path)
        other = tmp_path / "o.jsonl"
        _write_log(other, ["train"], [{"step": i, "loss": 1.0} for i in range(100)], 0)
        path.with_suffix(".parquet").rename(other.with_suffix(".parquet"))

        with pytest.warns(RunlinesWarning, match="o.parquet is not used"):
            frame = runlines.load(other)

        assert set(frame["loss"]) == {1.0}


class TestMemory:
    """load() drops each field's Arrow values once the frame's column is built from them."""

    def _log(self, tmp_path: Path) -> Path:
        lines = [encode_line({"ts": 1.0 + i, "event": "train", "step": i, "loss": 0.5})
                 for i in range(50)]  # fmt: skip
        path = tmp_path / "r.jsonl"
        path.write_bytes(b"".join(lines))
        return path

    @pytest.mark.parametrize("copied", [False, True])
    def test_each_field_is_released_once_built(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, copied: bool
    ) -> None:
        path = self._log(tmp_path)
        if copied:
            write_copy(path)
        released: list[str] = []
        release = _columnar.Columns.release

        def noted(table: _columnar.Columns, name: str) -> None:
            release(table, name)
            released.append(name)
            assert all(p.column(name) is None or p.column(name).null_count == len(p.column(name))
                       for p in table.pieces)  # fmt: skip

        monkeypatch.setattr(_columnar.Columns, "release", noted)

        frame = runlines.load(path)

        assert sorted(released) == sorted(["ts", "event", "run", "step", "loss"])
        assert frame["loss"].tolist() == [0.5] * 50

    def test_an_event_filter_keeps_the_table_for_the_fields_it_drops(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        path = self._log(tmp_path)
        monkeypatch.setattr(_columnar.Columns, "release", lambda *args: pytest.fail("released"))

        frame = runlines.load(path, event="train")

        assert list(frame.columns) == ["ts", "event", "run", "attempt", "step", "loss"]


def _kept_by_hand(records: list[dict[str, Any]]) -> list[int]:
    """Return the indexes of the records load() keeps: no later attempt wrote their (event,
    step), and no later resume_step is below their step.
    """
    segment, resumes, segments = 0, [], []
    for record in records:
        if record["event"] == "run_start":
            segment += 1
            resumes.append(record.get("resume_step"))
        segments.append(segment)
    kept = []
    for i, record in enumerate(records):
        step = record.get("step")
        later = [r for r in resumes[segments[i] :] if r is not None]
        if step is not None and later and step > min(later):
            continue
        twins = (j for j in range(i + 1, len(records)) if segments[j] > segments[i])
        same = (records[j]["event"] == record["event"] and records[j].get("step") == step
                for j in twins)  # fmt: skip
        if step is not None and any(same):
            continue
        kept.append(i)
    return kept


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    attempts=st.lists(
        st.tuples(
            st.one_of(st.none(), st.integers(0, 6)),  # resume_step
            st.lists(st.tuples(st.sampled_from(["train", "eval"]), st.integers(0, 8)),
                     max_size=8),  # (event, step) records
        ),
        min_size=1,
        max_size=4,
    )
)  # fmt: skip
def test_superseded_records_are_those_a_later_attempt_replaced(
    attempts: list[tuple[int | None, list[tuple[str, int]]]],
) -> None:
    records: list[dict[str, Any]] = []
    for number, (resume, steps) in enumerate(attempts, start=1):
        start: dict[str, Any] = {"ts": 1.0, "event": "run_start", "attempt": number}
        if resume is not None and number > 1:
            start["resume_step"] = resume
        records.append(start)
        records.extend({"ts": 1.0, "event": e, "step": s, "i": len(records) + k}
                       for k, (e, s) in enumerate(steps))  # fmt: skip
    for k, record in enumerate(records):
        record["i"] = k
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "r.jsonl"
        path.write_bytes(b"".join(encode_line(r) for r in records))

        frame = runlines.load(path)

    assert frame["i"].tolist() == _kept_by_hand(records)
