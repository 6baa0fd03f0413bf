"""The dashboard through Parquet copies: every JSON answer the same as from the JSONL alone.

Each log is served without a copy, then compacted and served again by a fresh store: the run
table, the reading progress, each rank's series and the run page must be equal (as JSON values:
the page's numbers are doubles). A stale copy is ignored with its warning on the page.
"""

from __future__ import annotations

import json
import math
import random
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _serve_helpers import Client, png_bytes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _logs import T0, line, write
from runlines import Run
from runlines.dashboard import Server, _copy_columns
from runlines.dashboard import _history as copying
from runlines.dashboard._history import read_history
from runlines.dashboard._http import _API, dumps
from runlines.dashboard._runs import RunStore
from runlines.dashboard._series import MAX_BUCKETS, MAX_MARKS, Series
from runlines.reading._copies import compact, write_copy
from runlines.reading._follow import LogFollower

NOW = T0 + 10_000.0


def answers(*sources: Path) -> dict[str, Any]:
    """Return every JSON answer of a fresh store over *sources*, once it has read everything."""
    store = RunStore(sources)
    store.refresh()
    found = {
        "runs": _API["/api/runs"](store, {}, NOW),
        "progress": _API["/api/progress"](store, {}, NOW),
    }
    for label, run in store.runs.items():
        found[f"run {label}"] = _API["/api/run"](store, {"run": label}, NOW)
        for rank in run.files:
            query = {"run": label, "rank": str(rank)}
            found[f"series {label} {rank}"] = _API["/api/series"](store, query, NOW)
    return json.loads(dumps(found))  # type: ignore[no-any-return]


@pytest.fixture(autouse=True)
def _copies_of_any_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """These small logs stand for big ones: their copies are used too."""
    monkeypatch.setattr(copying, "MIN_LOG_BYTES", 0)


@pytest.fixture(name="first_reads")
def _first_reads(monkeypatch: pytest.MonkeyPatch) -> dict[Path, list[int]]:
    """Record where each poll of each log file started reading."""
    starts: dict[Path, list[int]] = {}
    stream = LogFollower.stream

    def spy(self: LogFollower, max_bytes: int | None = None) -> Iterator[dict[str, Any]]:
        starts.setdefault(self.path, []).append(self.offset + self.pending_bytes)
        return stream(self, max_bytes)

    monkeypatch.setattr(LogFollower, "stream", spy)
    return starts


def _check_same_through_copies(folder: Path, first_reads: dict[Path, list[int]]) -> dict[str, Any]:
    """Assert the answers with copies equal those without; return them."""
    plain = answers(folder)
    copies = compact(folder)
    first_reads.clear()

    copied = answers(folder)

    assert copies
    assert copied.keys() == plain.keys()
    for key, value in plain.items():
        assert copied[key] == value, key
    for copy in copies:  # each log's reading went on after its copy: no byte read twice
        log = copy.with_suffix(".jsonl")
        history, problems = read_history(log)
        assert history is not None
        assert problems == []
        assert first_reads[log][0] == history.covers_bytes
    return copied


def _full_run(folder: Path) -> None:
    """A run with every kind of thing the page shows, over two attempts and two ranks."""
    rng = random.Random(0)
    picture = folder / "sample.png"
    picture.write_bytes(png_bytes())
    with (
        pytest.raises(ValueError, match="boom"),
        Run(
            "full",
            folder,
            stdout=False,
            compact=False,
            on_nonfinite="ignore",
            config={"optim": {"lr": 0.1}},
        ) as run,
    ):
        for step in range(3000):  # past MAX_BUCKETS: buckets merge
            loss = rng.random() if step % 500 else float("nan")
            run.log("train_step", step=step, loss=loss, lr=0.1 if step % 3 else 1)
            if step % 100 == 0:
                run.log("eval", step=step, accuracy=step / 3000, best=float("inf"))
                with run.span("checkpoint"):
                    pass
        run.log("system", cpu=2.5)  # no step: drawn at the last step before it
        raise ValueError("boom")
    with Run("full", folder, stdout=False, compact=False, resume_step=2000) as run:
        for step in range(2000, 2600):
            run.log("train_step", step=step, loss=rng.random())
        run.artifact("samples", path=picture, step=2600)
    write(
        folder / "full.rank1.jsonl",
        line("run_start", "full", T0, attempt=1),
        *(
            line("train_step", "full", T0 + i, step=i, loss=1.0 / (i + 1), rank=1)
            for i in range(50)
        ),
    )


class TestSameAnswers:
    def test_a_real_run_with_attempts_ranks_spans_and_nan(
        self, tmp_path: Path, first_reads: dict[Path, list[int]]
    ) -> None:
        _full_run(tmp_path)

        copied = _check_same_through_copies(tmp_path, first_reads)

        detail = copied["run full"]
        assert [a["status"] for a in detail["attempts"]] == ["failed", "ok"]
        assert detail["spans"]["checkpoint"]["count"] == 30
        series = {(s["event"], s["field"]): s for s in copied["series full 0"]["series"]}
        assert series[("train_step", "loss")]["nonfinite"] == 6
        assert series[("train_step", "loss")]["level"] > 1
        assert max(series[("train_step", "loss")]["step"]) <= 2599

    def test_hand_written_logs_with_odd_and_torn_lines(
        self, tmp_path: Path, first_reads: dict[Path, list[int]]
    ) -> None:
        write(
            tmp_path / "odd.jsonl",
            line("run_start", "odd", T0, attempt=1, config={"tags": [1, 2]}, git_commit=None),
            *(line("train", "odd", T0 + i, step=i, loss=i % 7, lr=0.5 * i) for i in range(1500)),
            b'{"ts": 1767225602.0, "event": "train", "st\n',  # torn by a kill
            line("train", "odd", T0 + 2000, step=1500, loss="high", big=2**70, flag=True),
            line("train", "odd", T0 + 2001, step=1501.5, loss=float("-inf"), ts_note=[1]),
            line("train", "odd", T0 + 2002, loss=0.25),  # no step
            line("span", "odd", T0 + 2003, name="io", duration_s=3, step=1502),
            line("span", "odd", T0 + 2004, name="io", duration_s=float("nan")),
            line("artifact", "odd", T0 + 2005, name="ckpt", path=None, step=None),
            line("signal", "odd", T0 + 2006, signal="SIGUSR1"),
            line("run_end", "odd", T0 + 2007, status="ok"),
        )
        write(
            tmp_path / "foreign.jsonl",
            b"\xef\xbb\xbf" + line("step", "f", T0, step=1, loss=0.5),
            b'{"ts":2,"event":"step","run":"f","step":2,"loss":NaN}\r\n',
            b'{"ts":3,"event":"step","run":"f","step":3,"loss":' + b"9" * 30 + b"}\n",
            b'{"ts":"late","event":"step","run":"f","step":4,"loss":1}\n',
            b'{"ts":5,"event":7,"run":"f","step":5,"loss":1}\n',
            b'{"a":1}\n',
            b"[1, 2]\n",
        )

        write(  # a foreign writer's last line, without its newline: the copy leaves it out
            tmp_path / "unended.jsonl",
            *(line("step", "u", T0 + i, step=i, loss=0.5) for i in range(3)),
            line("step", "u", T0 + 3, step=3, loss=0.25).rstrip(b"\n"),
        )
        rng = random.Random(0)
        write(  # durations whose sum depends on the order they are added in
            tmp_path / "spans.jsonl",
            *(
                line(
                    "span",
                    "s",
                    T0 + i,
                    name="io",
                    duration_s=rng.random() * 10.0 ** rng.randint(-3, 3),
                )
                for i in range(300)
            ),
        )

        copied = _check_same_through_copies(tmp_path, first_reads)

        assert copied["progress"]["runs"]["odd"]["torn_lines"] == 1
        assert copied["progress"]["runs"]["unended"]["records"] == 4
        assert copied["run odd"]["spans"]["io"]["count"] == 2

    def test_a_copy_then_a_resumed_attempt_appended_to_the_log(
        self, tmp_path: Path, first_reads: dict[Path, list[int]]
    ) -> None:
        with Run("r", tmp_path, stdout=False, compact=True) as run:
            for step in range(1500):
                run.log("train_step", step=step, loss=1.0 / (step + 1))
        covered = (tmp_path / "r.jsonl").stat().st_size
        with Run(
            "r", tmp_path, stdout=False, compact=False, resume_step=1000, resume="allow"
        ) as run:
            for step in range(1000, 1200):
                run.log("train_step", step=step, loss=2.0)
        (tmp_path / "r.parquet").rename(tmp_path / "kept.parquet")
        plain = answers(tmp_path / "r.jsonl")
        (tmp_path / "kept.parquet").rename(tmp_path / "r.parquet")
        first_reads.clear()

        copied = answers(tmp_path / "r.jsonl")

        assert first_reads[tmp_path / "r.jsonl"][0] == covered
        assert copied == plain
        assert [a["resume_step"] for a in copied["run r"]["attempts"]] == [None, 1000]
        (loss,) = copied["series r 0"]["series"]
        assert {y for step, y in zip(loss["step"], loss["y"], strict=True) if step > 1000} == {2.0}


class TestNotUsed:
    def test_a_stale_copy_is_ignored_and_the_page_says_why(
        self, tmp_path: Path, first_reads: dict[Path, list[int]]
    ) -> None:
        log = write(
            tmp_path / "s.jsonl", *(line("train", "s", T0 + i, step=i, loss=i) for i in range(9))
        )
        write_copy(log)
        data = log.read_bytes()
        log.write_bytes(data.replace(b'"loss":3', b'"loss":4'))  # same size, other bytes
        first_reads.clear()

        copied = answers(log)

        assert first_reads[log][0] == 0  # the JSONL, from its start
        (problem,) = copied["progress"]["runs"]["s"]["problems"]
        assert "s.parquet is not used" in problem
        assert "runlines compact" in problem
        assert copied["run s"]["progress"]["problems"] == [problem]
        series = copied["series s 0"]["series"]
        assert [s["y"] for s in series if s["field"] == "loss"] == [[0, 1, 2, 4, 4, 5, 6, 7, 8]]

    def test_a_small_log_is_read_from_its_jsonl_without_looking_at_its_copy(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first_reads: dict[Path, list[int]]
    ) -> None:
        log = write(tmp_path / "s.jsonl", *(line("train", "s", T0 + i, step=i) for i in range(9)))
        write_copy(log)
        (tmp_path / "s.parquet").write_bytes(b"not a copy")
        monkeypatch.setattr(copying, "MIN_LOG_BYTES", log.stat().st_size + 1)

        copied = answers(log)

        assert first_reads[log] == [0]
        assert copied["progress"]["runs"]["s"]["problems"] == []

    def test_a_copy_of_more_records_than_memory_allows_is_left_to_the_jsonl(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first_reads: dict[Path, list[int]]
    ) -> None:
        log = write(tmp_path / "s.jsonl", *(line("train", "s", T0 + i, step=i) for i in range(9)))
        plain = answers(log)
        write_copy(log)
        monkeypatch.setattr(copying, "MAX_COPY_RECORDS", 8)
        first_reads.clear()

        copied = answers(log)

        assert first_reads[log] == [0]
        assert copied == plain

    def test_a_copy_that_fails_to_read_costs_the_copy_only(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        log = write(
            tmp_path / "r.jsonl", *(line("train", "r", T0 + i, step=i, loss=i) for i in range(5))
        )
        plain = answers(log)
        write_copy(log)

        def broken(*args: Any) -> None:
            raise RuntimeError("a bug")

        monkeypatch.setattr("runlines.dashboard._copy_columns._FileColumns.fill", broken)
        copied = answers(log)

        (problem,) = copied["progress"]["runs"]["r"]["problems"]
        assert "RuntimeError('a bug')" in problem
        assert copied["series r 0"] == plain["series r 0"]
        assert copied["runs"] == plain["runs"]

    def test_a_copy_written_while_the_log_is_read_is_not_switched_to(self, tmp_path: Path) -> None:
        log = write(
            tmp_path / "r.jsonl", *(line("train", "r", T0 + i, step=i, loss=i) for i in range(5))
        )
        store = RunStore([tmp_path])
        store.refresh()
        with open(log, "ab") as stream:
            stream.write(line("train", "r", T0 + 5, step=5, loss=5))
        write_copy(log)

        store.refresh()

        run = store.runs["r"]
        assert run.files[0].tail.records == 6
        assert run.problems == []
        (series,) = run.files[0].series.values()
        assert series.count == 6


_numbers = st.one_of(
    st.integers(-5, 5),
    st.integers(min_value=2**60, max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
)
_values = st.one_of(_numbers, st.none(), st.booleans(), st.text(max_size=3))
_records = st.fixed_dictionaries(
    {
        "ts": st.one_of(st.floats(0, 2e9), st.integers(0, 2**31), st.just("x")),
        "event": st.one_of(
            st.sampled_from(["train", "eval", "span", "run_start", "run_end", "artifact"]),
            st.sampled_from(["signal", "system", "nonfinite"]),
            st.integers(0, 2),
        ),
    },
    optional={
        "step": st.one_of(st.integers(0, 50), st.floats(0, 50), st.booleans(), st.just("3")),
        "loss": _values,
        "acc": _numbers,
        "name": st.sampled_from(["io", "fwd", 7]),
        "duration_s": _values,
        "resume_step": st.one_of(st.integers(0, 50), st.floats(0, 50), st.none()),
        "attempt": st.integers(1, 3),
        "path": st.one_of(st.none(), st.just("a.png")),
        "config": st.one_of(st.none(), st.just({"lr": 0.1})),
    },
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=st.lists(_records, min_size=1, max_size=40), repeat=st.integers(1, 60))
def test_any_log_gives_the_same_answers_through_its_copy(
    records: list[dict[str, Any]], repeat: int
) -> None:
    """Records of every JSON type in every field, repeated to fill buckets that merge."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write(folder / "h.jsonl", *(line(**r) for r in records * repeat))
        plain = answers(folder)
        write_copy(folder / "h.jsonl")

        assert answers(folder) == plain


@pytest.mark.parametrize("block", [1, 3, 16, 1 << 20])
def test_lines_are_found_by_number_from_either_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    rng = random.Random(block)
    lines = [
        bytes(rng.choice(b"ab{}") for _ in range(rng.choice([0, 1, 5, 40]))) for _ in range(60)
    ]
    path = tmp_path / "r.jsonl"
    path.write_bytes(b"".join(text + b"\n" for text in lines) + b"a torn tail")
    monkeypatch.setattr(_copy_columns, "_BLOCK_BYTES", block)
    wanted = sorted({*rng.sample(range(60), 12), 0, 29, 30, 59})
    covered = path.stat().st_size - len(b"a torn tail")

    found = _copy_columns._lines_at(path, wanted, covered, 60)

    assert found == {number: lines[number] for number in wanted}


def _steps_of(count: int, rng: random.Random) -> list[float]:
    values: list[float] = []
    for _ in range(count):
        pick = rng.random()
        if pick < 0.02:
            values.append(rng.choice([math.nan, math.inf, -math.inf]))
        elif pick < 0.3:
            values.append(rng.randint(0, 5))  # ties
        else:
            values.append(rng.random())
    return values


class TestSeriesInBulk:
    @pytest.mark.parametrize("count", [0, 1, 7, 999, 1000, 1001, 2003, 5000, 40_000])
    def test_extend_is_that_many_adds(self, count: int) -> None:
        import numpy as np

        rng = random.Random(count)
        values = _steps_of(count, rng)
        one_by_one, bulk = Series(), Series()
        cut = count // 3
        for step, value in enumerate(values):
            one_by_one.add(step, T0 + step, value)
            if step == cut:
                one_by_one.drop_after(cut // 2)

        def at(row: int) -> tuple[float, float, float]:
            return row, T0 + row, values[row]

        floats = np.array(values, dtype=np.float64)
        rows = np.arange(count, dtype=np.int64)
        bulk.extend(floats[: cut + 1], rows[: cut + 1], at)
        if count:
            bulk.drop_after(cut // 2)
        bulk.extend(floats[cut + 1 :], rows[cut + 1 :], at)

        assert bulk.points() == one_by_one.points()
        assert (bulk.last, bulk.level, bulk.count) == (
            one_by_one.last,
            one_by_one.level,
            one_by_one.count,
        )
        assert len(bulk.points()["step"]) <= 2 * (MAX_BUCKETS + 1)

    def test_marks_stop_at_their_limit_in_bulk_too(self) -> None:
        import numpy as np

        values = [math.nan] * (MAX_MARKS + 5)
        bulk = Series()

        bulk.extend(np.array(values), np.arange(len(values)), lambda row: (row, T0, values[row]))

        assert len(bulk.marks) == MAX_MARKS
        assert bulk.nonfinite == MAX_MARKS + 5


def test_the_server_reads_a_copy_in_the_background_and_answers_the_same(
    tmp_path: Path,
) -> None:
    _full_run(tmp_path)
    plain = answers(tmp_path)
    compact(tmp_path)

    with Server(tmp_path, port=0) as server:
        client = Client(server)
        for _ in range(100_000):  # the reader thread is taking the copies in
            if not client.json("/api/progress")["bytes_behind"]:
                break
        else:
            pytest.fail("the reader thread never took the copies in")
        detail = client.json("/api/run?run=full")
        served = [client.json(f"/api/series?run=full&rank={rank}") for rank in (0, 1)]

    assert served == [plain["series full 0"], plain["series full 1"]]
    del detail["row"], plain["run full"]["row"]  # read at the server's clock, not at NOW
    assert detail == plain["run full"]
