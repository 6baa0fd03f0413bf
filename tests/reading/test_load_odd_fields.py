"""load() on the odd corners: a field named attempt, huge ints, huge numbers, fields all None."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pytest

import runlines.reading._columnar.blocks as reading  # the block reader: its knobs
from _logs import line, raw, train, write
from runlines.reading import decode_line, iter_events, load


@pytest.fixture(name="small_blocks", params=[False, True], ids=["default", "small_blocks"])
def _small_blocks(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run each test with the default blocks and with tiny ones, so every path is walked."""
    if request.param:
        monkeypatch.setattr(reading, "BLOCK_BYTES", 400)
        monkeypatch.setattr(reading, "MIN_BUCKET", 2)
        monkeypatch.setattr(reading, "PYTHON_LINES", 3)


@pytest.mark.usefixtures("small_blocks")
class TestOwnAttemptField:
    def test_a_record_keeps_the_attempt_it_logged(self, run_dir: Path) -> None:
        log = write(
            run_dir / "r.jsonl",
            line("run_start", attempt=1),
            line("retry", attempt=7, url="a"),
            line("train_step", step=1),
            line("run_start", attempt=2, resume_step=1),
            line("retry", attempt=3, url="b"),
            line("train_step", step=1),
        )

        frame = load(log, superseded=True)

        assert frame.attempt.tolist() == [1, 7, 1, 2, 3, 2]
        assert frame.attempt.dtype == np.int64

    def test_an_attempt_that_is_not_an_int_is_kept_too(self, run_dir: Path) -> None:
        log = write(
            run_dir / "r.jsonl",
            line("run_start", attempt=1),
            line("retry", attempt="third"),
            line("train_step", step=1),
        )

        assert load(log).attempt.tolist() == [1, "third", 1]


@pytest.mark.usefixtures("small_blocks")
class TestBigInts:
    def test_ints_beyond_int64_come_back_exact(self, run_dir: Path) -> None:
        log = write(
            run_dir / "r.jsonl",
            line("train_step", step=1, big=2**64 + 1, n=5),
            line("train_step", step=2, big=3, n=2**63),
            line("train_step", step=3, n=-(2**63) - 1),
        )

        frame = load(log)

        assert frame.big.tolist() == [2**64 + 1, 3, None]
        assert frame.n.tolist() == [5, 2**63, -(2**63) - 1]
        assert all(type(v) is int for v in frame.n)

    def test_a_big_float_stays_a_float(self, run_dir: Path) -> None:
        log = write(run_dir / "r.jsonl", line("x", flops=1.5e20), line("x", flops=2.0))

        frame = load(log)

        assert frame.flops.dtype == np.float64
        assert frame.flops.tolist() == [1.5e20, 2.0]

    def test_iter_events_reads_ints_beyond_64_bits_exactly(self, run_dir: Path) -> None:
        log = write(run_dir / "r.jsonl", line("x", big=2**70 + 1, neg=-(2**64) - 1))

        (record,) = iter_events(log)

        assert record["big"] == 2**70 + 1  # not a float: 2**70 + 1 has no double
        assert record["neg"] == -(2**64) - 1


@pytest.mark.usefixtures("small_blocks")
class TestNumberBeyondADouble:
    def test_a_foreign_line_with_one_is_read_not_skipped(self, run_dir: Path) -> None:
        log = write(
            run_dir / "f.jsonl",
            b'{"ts":1,"event":"x","v":1e400,"w":-1e999}\n',
            raw({"ts": 2, "event": "x", "v": 1.0}),
        )

        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no "not a complete JSON object" warning
            frame = load(log)

        assert frame.v.tolist() == [math.inf, 1.0]
        assert frame.w.tolist()[0] == -math.inf

    def test_decode_line_reads_it_as_an_infinity(self) -> None:
        assert decode_line(b'{"v":1e400}') == {"v": math.inf}

    def test_a_torn_line_is_still_an_error(self) -> None:
        with pytest.raises(ValueError, match="line 1"):
            decode_line(b'{"v":1e400,"w":')


@pytest.mark.usefixtures("small_blocks")
class TestEventFilterKeepsFieldsLoggedAsNone:
    def test_a_field_none_in_every_record_of_the_event_stays(self, run_dir: Path) -> None:
        log = write(
            run_dir / "r.jsonl",
            line("train_step", step=1, loss=0.5),
            line("eval", step=1, accuracy=None, split="val"),
            line("train_step", step=2, loss=0.4),
            line("eval", step=2, accuracy=None, split="val"),
        )

        frame = load(log, event="eval")

        assert frame.columns.tolist() == [
            "ts",
            "event",
            "run",
            "attempt",
            "step",
            "split",
            "accuracy",
        ]
        assert frame.accuracy.isna().all()

    def test_fields_of_other_events_still_go(self, run_dir: Path) -> None:
        log = train(run_dir, "r", range(1, 5), evals=True)

        frame = load(log, event="eval")

        assert "loss" not in frame.columns
        assert "host" not in frame.columns  # run_start's, read for the attempts

    def test_a_field_none_in_an_event_mixed_with_others_stays(self, run_dir: Path) -> None:
        log = write(
            run_dir / "r.jsonl",
            line("a", x=1.0),
            line("b", x=None),
            line("c", y=2),
        )

        assert "x" in load(log, event="b").columns
        assert "x" not in load(log, event="c").columns

    def test_a_field_only_ever_nan_in_the_event_stays(self, run_dir: Path) -> None:
        """pyarrow reads a bare NaN as a float: the value is in the table, not in Python's."""
        lines = [raw({"ts": 1, "event": "train", "loss": 0.5})] * 3
        lines += [b'{"ts":2,"event":"warning","step":NaN}\n'] * 3
        log = write(run_dir / "r.jsonl", *lines)

        frame = load(log, event="warning")

        assert frame.columns.tolist() == ["ts", "event", "run", "attempt", "step"]
        assert frame.step.isna().all()
