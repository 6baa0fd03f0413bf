"""load()'s C reader (`_readfast.c`): built, taken, and never different from the pyarrow path.

Every frame the C reader makes must equal, dtypes and values, the one the pyarrow reader makes
of the same log; every line it accepts must read as orjson reads it, and no line, however
broken, may crash it.
"""

from __future__ import annotations

import ctypes
import math
import mmap
import os
import random
import subprocess
import sys
import tracemalloc
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import runlines.reading as reading
from _extensions import import_extension
from runlines import RunlinesWarning, _native
from runlines.encoding import encode_line
from runlines.errors import RunlinesError

_readfast = import_extension("_readfast")


def both_frames(*args: Any, **kwargs: Any) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """load() with the C reader and with pyarrow's; the warnings, asserted the same."""
    frames, said = [], []
    for fast in (_readfast, None):
        saved = _native.readfast
        _native.readfast = fast
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                frames.append(reading.load(*args, **kwargs))
        finally:
            _native.readfast = saved
        said.append([str(w.message) for w in caught if w.category is RunlinesWarning])
    assert said[0] == said[1]
    return frames[0], frames[1], said[0]


def parse(lines: list[bytes]) -> tuple[list[dict[str, Any] | None], list[str]] | None:
    """Return each line as the C reader read it (None: refused), and the column kinds."""
    data = np.frombuffer(b"\n".join(lines) + b"\n", dtype=np.uint8)
    lengths = np.array([len(x) for x in lines], dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(lengths + 1)[:-1])).astype(np.int64)
    result = _readfast.parse_lines(data, starts, starts + lengths)
    if result is None:
        return None
    names, columns, refused = result
    rows: list[dict[str, Any] | None] = [{} for _ in lines]
    kinds = []
    for name, (kind, validity, values, strings, nulls) in zip(names, columns, strict=True):
        kinds.append(kind)
        array = reading._fast_array(len(lines), kind, validity, values, strings)
        for row, value in enumerate(array.to_pylist()):
            if value is not None:
                rows[row][name] = value  # type: ignore[index]
        for row in np.frombuffer(nulls, dtype=np.int64).tolist():
            rows[row][name] = None
    for row in np.frombuffer(refused, dtype=np.int64).tolist():
        assert rows[row] == {}
        rows[row] = None
    return rows, kinds


def same_value(ours: Any, theirs: Any) -> bool:
    if isinstance(ours, float) and isinstance(theirs, (int, float)) and type(theirs) is not bool:
        return math.copysign(1, ours) == math.copysign(1, theirs) and ours == float(theirs)
    return type(ours) is type(theirs) and ours == theirs


class Guarded:
    """One line at a time, placed to end where an unreadable page starts: a read past the
    line's end crashes the process (SIGSEGV) instead of passing unseen."""

    def __init__(self) -> None:
        self.page = mmap.PAGESIZE
        self.region = mmap.mmap(-1, 2 * self.page)
        self.data = np.frombuffer(self.region, dtype=np.uint8)
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        guard = self.data.ctypes.data + self.page
        if libc.mprotect(guard, self.page, 0) != 0:  # PROT_NONE
            pytest.skip("cannot protect a page here")

    def parse(self, line: bytes) -> Any:
        line = line[-self.page :]
        start = self.page - len(line)
        self.data[start : self.page] = np.frombuffer(line, dtype=np.uint8)
        bounds = np.array([start], dtype=np.int64), np.array([self.page], dtype=np.int64)
        return _readfast.parse_lines(self.data, *bounds)


@pytest.fixture(name="guarded", scope="module")
def _guarded() -> Guarded:
    if not sys.platform.startswith("linux"):
        pytest.skip("mprotect through ctypes: Linux only")
    return Guarded()


class TestTaken:
    def test_load_reads_with_the_c_reader_when_built(self) -> None:
        off = bool(os.environ.get("RUNLINES_NO_SPEEDUPS"))
        assert _native.readfast is (None if off else _readfast)

    def test_the_fast_reader_is_off_with_runlines_no_speedups(self) -> None:
        env = {**os.environ, "RUNLINES_NO_SPEEDUPS": "1"}
        code = "from runlines import _native; print(_native.readfast)"
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        assert done.stdout.split() == ["None"]


class TestParseLines:
    def test_values_of_each_kind_and_the_lines_it_refuses(self) -> None:
        lines = [
            b'{"i":1,"f":1.5,"s":"a\\u00e9\\ud83d\\ude00\\n","b":true,"n":null}',
            b'{ "i" : -9223372036854775808 , "f" : -0.0 , "b" : false }',
            b'{"i":2,"nested":{"a":1}}',  # nested: Python's
            b'{"i":3,"i":4}',  # a duplicate key: Python's
            b'{"s":"\\ud800"}',  # a lone surrogate
            b'{"s":"\xff"}',  # not UTF-8
            b'{"i":5} x',  # trailing garbage
            b"{}   ",
        ]
        parsed = parse(lines)
        assert parsed is not None
        rows, kinds = parsed
        assert rows == [
            {"i": 1, "f": 1.5, "s": "aé😀\n", "b": True, "n": None},
            {"i": -(2**63), "f": -0.0, "b": False},
            None,
            None,
            None,
            None,
            None,
            {},
        ]
        assert kinds == ["int", "float", "str", "bool", "null"]

    def test_ints_and_floats_of_one_key_are_floats_as_pyarrow_reads_them(self) -> None:
        parsed = parse([b'{"x":1}', b'{"x":2.5}', b'{"y":1e400}'])
        assert parsed == ([{"x": 1.0}, {"x": 2.5}, None], ["float"])

    @pytest.mark.parametrize(
        "lines",
        [
            [b'{"x":1}', b'{"x":"a"}'],  # a number and a string
            [b'{"x":true}', b'{"x":1}'],
            [b'{"x":18446744073709551616}'],  # beyond 64 bits
            [b'{"x":-9223372036854775809}'],
        ],
    )
    def test_what_pyarrow_decides_is_left_to_pyarrow(self, lines: list[bytes]) -> None:
        assert parse(lines) is None

    def test_bounds_outside_the_data_and_wrong_arrays_are_refused(self) -> None:
        data = np.frombuffer(b'{"a":1}\n', dtype=np.uint8)
        one = np.array([0], dtype=np.int64)
        with pytest.raises(ValueError, match="outside the data"):
            _readfast.parse_lines(data, one, np.array([9], dtype=np.int64))
        with pytest.raises(ValueError, match="outside the data"):
            _readfast.parse_lines(data, np.array([-1], dtype=np.int64), one)
        with pytest.raises(ValueError, match="same length"):
            _readfast.parse_lines(data, one, np.array([7, 7], dtype=np.int64))
        with pytest.raises(TypeError, match="int64"):
            _readfast.parse_lines(data, one.astype(np.int32), one)

    def test_no_line_is_read_past_its_end(self, guarded: Guarded) -> None:
        """Every prefix of rich lines, each ending where unreadable memory starts."""
        rich = [
            b'{"a\\u00e9\\"":-1.25e-3,"s":"\\ud83d\\ude00 \xc3\xa9\\n",'
            b'"t":true,"f":false,"n":null}',
            b'{ "i" : 123456789012345678 , "x" : 0.1e+5 , "y" : -0 }',
        ]
        for line in rich:
            for end in range(len(line) + 1):
                guarded.parse(line[:end])
        assert guarded.parse(rich[0]) is not None

    @settings(
        max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(
        lines=st.lists(
            st.one_of(
                st.binary(max_size=40),
                st.binary(max_size=20).map(lambda b: b'{"k' + b + b'":1}'),
                st.text(max_size=20).map(
                    lambda t: b'{"a":"' + t.encode("utf-8", "replace") + b'"}'
                ),
                st.tuples(st.sampled_from(range(60)), st.binary(min_size=1, max_size=3)),
            ),
            min_size=1,
            max_size=8,
        )
    )
    def test_garbage_never_crashes_and_what_it_takes_reads_as_orjson_reads_it(
        self, guarded: Guarded, lines: list[Any]
    ) -> None:
        base = b'{"ts":1.5,"event":"e","n":-12,"s":"x\\"y","b":false,"z":null,"f":1e-7}'
        real = []
        for item in lines:
            if isinstance(item, tuple):  # a record with a few bytes cut or replaced
                at, noise = item
                item = base[:at] + noise + base[at + len(noise) :]
            real.append(item.replace(b"\n", b" "))
        for line in real:
            guarded.parse(line)
        parsed = parse(real)
        if parsed is None:
            return
        for line, row in zip(real, parsed[0], strict=True):
            if row is None:
                continue
            record = orjson.loads(line)  # what the C reader takes is JSON
            assert record.keys() == row.keys()
            assert all(same_value(row[k], v) for k, v in record.items()), (line, row)


# --- the same frame either way ----------------------------------------------------------------

_KEYS = st.sampled_from(["step", "loss", "name", "ok", "note", "é", "a\\b", 'q"'])
_FLOATS = st.floats(allow_nan=True, allow_infinity=True)
_INTS = st.integers(min_value=-(2**63), max_value=2**63 - 1)
_ANY = st.one_of(_INTS, _FLOATS, st.booleans(), st.none(), st.text(max_size=8))
# one kind per key, as real logs have it: the C reader's common case
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
    """Both readers make the same frame, or fail with the same error."""
    try:
        fast, slow, _ = both_frames(path, **kwargs)
    except RunlinesError as err:
        saved = _native.readfast
        _native.readfast = None
        try:
            with pytest.raises(type(err)), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                reading.load(path, **kwargs)
        finally:
            _native.readfast = saved
        return
    pd.testing.assert_frame_equal(fast, slow)


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

    def test_braced_lines_that_are_no_json_are_no_runlines_log_either_way(
        self, run_dir: Path
    ) -> None:
        run_dir.mkdir()
        path = run_dir / "r.jsonl"
        path.write_bytes(b'{"a":1,}\n{"b"}\n{"c":"\\ud800"}\n')
        for fast in (_readfast, None):
            saved = _native.readfast
            _native.readfast = fast
            try:
                with pytest.raises(RunlinesError, match="is not a runlines log"):
                    reading.load(path)
            finally:
                _native.readfast = saved

    def test_an_int_just_past_int64_stays_exact_either_way(self, run_dir: Path) -> None:
        """2**63 has 19 digits: pyarrow reads it as a float, and Python must read it again."""
        run_dir.mkdir()
        path = run_dir / "r.jsonl"
        records: list[dict[str, Any]] = [{"big": 2**63}, {"big": 5}, {"big": 2**64 - 1, "c": {}}]
        _write_log(path, ["train"], records, 0)
        fast, slow, _ = both_frames(path)
        pd.testing.assert_frame_equal(fast, slow)
        assert fast["big"].tolist() == [2**63, 5, 2**64 - 1]

    @pytest.mark.parametrize(
        "records",
        [
            [{"lr": 0.5, "c": {}}, {"lr": 2**53 + 1}],  # a float only in a nested line
            [{"lr": 2**53 + 1, "c": {}}, {"lr": 0.5}],
            [{"v": "a", "c": {}}, {"v": 1}],
            [{"v": 2**63, "c": {}}, {"v": 1}],
        ],
    )
    def test_a_nested_line_types_its_fields_as_pyarrow_would(
        self, run_dir: Path, records: list[dict[str, Any]]
    ) -> None:
        run_dir.mkdir()
        path = run_dir / "r.jsonl"
        _write_log(path, ["train"], records, 0)
        fast, slow, _ = both_frames(path)
        pd.testing.assert_frame_equal(fast, slow)

    @pytest.mark.parametrize("block_bytes", [4096, 1 << 16, 16 << 20])
    def test_a_log_of_buckets_and_blocks(
        self, run_dir: Path, monkeypatch: pytest.MonkeyPatch, block_bytes: int
    ) -> None:
        """Thousands of lines: events in buckets of their own, read in blocks, every odd line."""
        monkeypatch.setattr(reading, "_BLOCK_BYTES", block_bytes)
        rng = random.Random(4)
        lines = [encode_line({"ts": 0.0, "event": "run_start", "run": "r", "attempt": 1})]
        for i in range(6000):
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
                record["huge"] = 2**64  # beyond 64 bits: its block goes to pyarrow
            lines.append(encode_line(record))
            if i == 2500:
                lines.append(b'{"ts":2.5,"event":"train","run":"r","st\n')  # torn
                lines.append(encode_line({"ts": 3.0, "event": "run_start", "run": "r",
                                          "attempt": 2, "resume_step": 2000}))  # fmt: skip
        path = run_dir / "r.jsonl"
        run_dir.mkdir()
        path.write_bytes(b"".join(lines))
        for kwargs in ({}, {"event": "eval"}, {"event": ["warn", "span"]}, {"superseded": True}):
            fast, slow, said = both_frames(path, **kwargs)
            pd.testing.assert_frame_equal(fast, slow)
            assert len(said) == 1
        fast, slow, _ = both_frames(path, columns=["loss", "value", "huge", "tokens"])
        pd.testing.assert_frame_equal(fast, slow)
        assert fast["huge"].dropna().tolist() == [2**64]
        assert fast["tokens"].dtype == "Int64"  # in train records only
        assert fast["value"].dtype == object  # ints, and one string


class TestNoLeaks:
    def test_repeated_parses_hold_no_memory_and_no_references(self) -> None:
        lines = [
            b'{"i":1,"f":1.5,"s":"abc","b":true,"n":null}',
            b'{"i":2,"nested":{"a":1}}',
            b'{"s":"\\ud800"}',
        ] * 50
        data = np.frombuffer(b"\n".join(lines) + b"\n", dtype=np.uint8)
        lengths = np.array([len(x) for x in lines], dtype=np.int64)
        starts = np.concatenate(([0], np.cumsum(lengths + 1)[:-1])).astype(np.int64)
        ends = starts + lengths
        conflict = np.frombuffer(b'{"x":1}\n{"x":"a"}\n', dtype=np.uint8)
        bounds = np.array([0, 8], dtype=np.int64), np.array([7, 17], dtype=np.int64)
        beyond = np.array([5], dtype=np.int64)

        def once() -> None:
            assert _readfast.parse_lines(data, starts, ends) is not None
            assert _readfast.parse_lines(conflict, *bounds) is None
            try:
                _readfast.parse_lines(conflict, bounds[0][:1], beyond * 9)
            except ValueError:
                pass

        for _ in range(20):  # warm caches and free lists first
            once()
        inputs = [data, starts, ends, conflict, beyond]
        counts = [sys.getrefcount(x) for x in inputs]
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for _ in range(300):
                once()
            grown = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert [sys.getrefcount(x) for x in inputs] == counts
        assert grown < 4096  # one leaked result per call would be over 300 kB
