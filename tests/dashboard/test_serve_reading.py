"""Following logs by offset, and series that stay small without losing spikes or sparse points."""

from __future__ import annotations

import random
from pathlib import Path

from _logs import T0, line, train, write
from runlines.dashboard._runs import RunStore
from runlines.dashboard._series import MAX_BUCKETS, Series
from runlines.reading._follow import LogFollower


def _append(path: Path, data: bytes) -> None:
    with open(path, "ab") as stream:
        stream.write(data)


class TestFollowerAsTheDashboardReads:
    def test_each_poll_reads_only_the_appended_bytes(self, tmp_path: Path) -> None:
        path = write(
            tmp_path / "r.jsonl", *(line("train_step", step=i, loss=1.0) for i in range(100))
        )
        tail = LogFollower(path)
        assert len(list(tail.poll())) == 100
        first = tail.bytes_read
        added = line("train_step", step=100, loss=0.5)

        _append(path, added)
        records = list(tail.poll())

        assert first == path.stat().st_size - len(added)
        assert tail.bytes_read - first == len(added)
        assert [r["step"] for r in records] == [100]
        assert list(tail.poll()) == []
        assert tail.bytes_read - first == len(added)  # nothing new, nothing read

    def test_a_last_line_without_newline_is_held_back_until_written(self, tmp_path: Path) -> None:
        whole = line("train_step", step=2, loss=0.25)
        path = write(tmp_path / "r.jsonl", line("train_step", step=1, loss=0.5), whole[:10])
        tail = LogFollower(path)

        held = list(tail.poll())
        pending = tail.pending_bytes
        _append(path, whole[10:])
        completed = list(tail.poll())

        assert [r["step"] for r in held] == [1]
        assert pending == 10
        assert [r["step"] for r in completed] == [2]
        assert (tail.pending_bytes, tail.torn_lines) == (0, 0)

    def test_a_torn_line_in_the_middle_is_skipped_and_counted(self, tmp_path: Path) -> None:
        path = write(
            tmp_path / "r.jsonl",
            line("train_step", step=1, loss=0.5),
            b'{"ts": 1.0, "event": "train_st\n',
            line("train_step", step=2, loss=0.25),
        )
        tail = LogFollower(path)

        records = list(tail.poll())

        assert [r["step"] for r in records] == [1, 2]
        assert tail.torn_lines == 1

    def test_a_replaced_log_is_read_again_from_its_start(self, tmp_path: Path) -> None:
        path = write(tmp_path / "r.jsonl", *(line("train_step", step=i) for i in range(5)))
        tail = LogFollower(path)
        list(tail.poll())

        path.unlink()
        write(path, line("train_step", step=0))
        records = list(tail.poll())

        assert [r["step"] for r in records] == [0]

    def test_a_log_rewritten_in_place_with_more_bytes_is_read_again_from_its_start(
        self, tmp_path: Path
    ) -> None:
        start = line("run_start", "r", attempt=1)
        path = write(
            tmp_path / "r.jsonl", start, *(line("train_step", "old", step=i) for i in range(5))
        )
        tail = LogFollower(path)
        list(tail.poll())
        inode = path.stat().st_ino

        path.write_bytes(start + b"".join(line("train_step", "new", step=i) for i in range(10)))
        records = list(tail.poll())

        assert path.stat().st_ino == inode  # the same file, grown: no stat tells it apart
        assert [(r["run"], r.get("step")) for r in records] == [("r", None)] + [
            ("new", i) for i in range(10)
        ]
        assert tail.records == 11

    def test_a_deleted_log_is_gone_and_nothing_is_behind(self, tmp_path: Path) -> None:
        path = write(tmp_path / "r.jsonl", *(line("train_step", step=i) for i in range(100)))
        tail = LogFollower(path)
        next(iter(tail.stream(max_bytes=100)))

        path.unlink()
        behind = tail.behind()

        assert (behind, tail.gone) == (0, True)
        assert tail.size == tail.offset + tail.pending_bytes
        assert list(tail.poll()) == []

    def test_non_finite_values_are_restored(self, tmp_path: Path) -> None:
        path = write(tmp_path / "r.jsonl", line("train_step", step=1, loss=float("-inf")))

        (record,) = LogFollower(path).poll()

        assert record["loss"] == float("-inf")


class TestSeries:
    def test_points_stay_bounded_and_keep_every_bucket_min_and_max(self) -> None:
        rng = random.Random(0)
        series = Series()
        values = [rng.random() for _ in range(100_000)]
        values[54_321] = 50.0  # a spike
        values[77_777] = -50.0

        for step, value in enumerate(values):
            series.add(step, 1000.0 + step, value)
        points = series.points()

        assert len(points["y"]) <= 2 * MAX_BUCKETS + 2
        assert series.level > 1
        assert max(points["y"]) == 50.0
        assert min(points["y"]) == -50.0
        spike = points["y"].index(50.0)
        assert points["step"][spike] == 54_321
        assert points["ts"][spike] == 1000.0 + 54_321
        assert points["step"] == sorted(points["step"])  # min and max kept in record order
        assert points["count"] == 100_000

    def test_every_bucket_holds_its_own_extremes(self) -> None:
        series = Series()
        for step in range(10_000):
            series.add(step, step, float(step % 97))

        points = series.points()
        level = points["level"]
        buckets: dict[int, list[float]] = {}
        for step, y in zip(points["step"], points["y"], strict=True):
            buckets.setdefault(int(step) // level, []).append(y)

        for number, kept in buckets.items():
            raw = [float(s % 97) for s in range(number * level, min((number + 1) * level, 10_000))]
            assert min(kept) == min(raw)
            assert max(kept) == max(raw)

    def test_a_sparse_series_beside_a_dense_one_is_never_dropped(self, tmp_path: Path) -> None:
        lines = []
        for step in range(20_000):
            lines.append(line("train_step", step=step, loss=1.0 / (step + 1)))
            if step % 5_000 == 0:
                lines.append(line("eval", step=step, accuracy=step / 20_000))
        write(tmp_path / "r.jsonl", *lines)
        store = RunStore([tmp_path])

        store.refresh()
        series = store.runs["r"].files[0].series

        assert series[("eval", "accuracy")].points()["step"] == [0.0, 5000.0, 10000.0, 15000.0]
        assert len(series[("train_step", "loss")].points()["y"]) <= 2 * MAX_BUCKETS + 2

    def test_non_finite_values_are_marks_not_points(self) -> None:
        series = Series()

        series.add(1, 10.0, 1.0)
        series.add(2, 11.0, float("nan"))
        series.add(3, 12.0, float("-inf"))

        points = series.points()
        assert points["y"] == [1.0]
        assert points["nonfinite"] == 2
        assert points["marks"] == [
            {"step": 2, "ts": 11.0, "value": "NaN"},
            {"step": 3, "ts": 12.0, "value": "-Infinity"},
        ]


class TestStore:
    def test_a_run_refresh_reads_only_what_its_files_gained(self, tmp_path: Path) -> None:
        path = write(
            tmp_path / "r.jsonl", *(line("train_step", step=i, loss=1.0) for i in range(1000))
        )
        store = RunStore([tmp_path])
        store.refresh()
        before = store.runs["r"].bytes_read
        added = line("train_step", step=1000, loss=0.5) * 3

        _append(path, added)
        store.refresh()

        assert before == path.stat().st_size - len(added)
        assert store.runs["r"].bytes_read - before == len(added)

    def test_new_logs_are_found_on_the_next_refresh(self, tmp_path: Path) -> None:
        write(tmp_path / "a.jsonl", line("train_step", step=1))
        store = RunStore([tmp_path])
        store.refresh()

        write(tmp_path / "sub" / "b.jsonl", line("train_step", step=1))
        store.refresh(force=True)

        assert sorted(store.runs) == ["a", "b"]

    def test_a_long_history_is_left_to_catch_up_which_reads_it_in_slices(
        self, tmp_path: Path
    ) -> None:
        path = write(tmp_path / "r.jsonl", *(line("train_step", step=i) for i in range(1000)))
        store = RunStore([tmp_path])

        store.refresh(max_bytes=10_000, skip_behind=True)
        skipped = store.runs["r"].bytes_read
        sliced = store.catch_up(10_000)
        while store.catch_up(10_000):
            pass

        assert skipped == 0
        assert sliced == 10_000
        assert store.runs["r"].bytes_read == path.stat().st_size
        assert store.runs["r"].files[0].tail.records == 1000

    def test_a_resumed_attempt_supersedes_the_earlier_records_past_its_step(
        self, tmp_path: Path
    ) -> None:
        write(
            tmp_path / "r.jsonl",
            line("run_start", attempt=1),
            *(line("train_step", step=s, loss=1.0) for s in range(1, 6)),
            line("train_step", step=6, loss=float("nan")),
            line("run_start", attempt=2, resume_step=3),
            *(line("train_step", step=s, loss=0.5) for s in range(4, 7)),
        )
        store = RunStore([tmp_path])

        store.refresh()
        points = store.runs["r"].files[0].series[("train_step", "loss")].points()

        assert points["step"] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
        assert points["y"] == [1.0, 1.0, 1.0, 0.5, 0.5, 0.5]
        assert points["marks"] == []

    def test_a_history_read_in_part_has_the_status_its_last_records_give(
        self, tmp_path: Path
    ) -> None:
        write(
            tmp_path / "r.jsonl",
            line("run_start", attempt=1),
            *(line("train_step", step=i, loss=1.0) for i in range(1000)),
            line("run_end", status="failed"),
        )
        store = RunStore([tmp_path])

        store.catch_up(10_000)
        run = store.runs["r"]
        early = (run.row(now=0.0)["status"], run.progress()["reading"])
        while store.catch_up(10_000):
            pass

        assert early == ("failed", True)  # not "died": how it ended is further down the file
        assert (run.row(now=0.0)["status"], run.progress()["reading"]) == ("failed", False)

    def test_a_dead_log_whose_last_line_has_no_newline_keeps_that_record(
        self, tmp_path: Path
    ) -> None:
        write(tmp_path / "r.jsonl", line("train_step", step=1), line("train_step", step=2)[:-1])
        store = RunStore([tmp_path])

        store.refresh()

        assert store.runs["r"].row(now=0.0)["step"] == 2
        assert store.runs["r"].progress()["torn_lines"] == 0

    def test_a_run_deleted_while_its_history_is_read_leaves_the_table(self, tmp_path: Path) -> None:
        gone = write(tmp_path / "gone.jsonl", *(line("train_step", step=i) for i in range(1000)))
        write(tmp_path / "kept.jsonl", line("train_step", step=1))
        store = RunStore([tmp_path], clock=lambda: 0.0)  # no new look for logs unless forced
        store.catch_up(10_000)  # a part of gone's history
        assert store.runs["gone"].progress()["reading"]

        gone.unlink()
        store.refresh(max_bytes=1 << 20, skip_behind=True)  # as a request does
        rows = [run.row(now=0.0) for run in store.runs.values()]

        assert [row["run"] for row in rows] == ["kept"]

    def test_a_row_whose_log_vanished_since_the_last_look_still_has_a_status(
        self, tmp_path: Path
    ) -> None:
        gone = write(tmp_path / "gone.jsonl", *(line("train_step", step=i) for i in range(1000)))
        store = RunStore([tmp_path])
        store.catch_up(10_000)
        run = store.runs["gone"]

        gone.unlink()
        row = run.row(now=0.0)

        assert row["status"] == "died"

    def test_a_replaced_log_starts_the_run_over(self, tmp_path: Path) -> None:
        path = train(tmp_path, "r", range(1, 26))
        store = RunStore([tmp_path])
        store.refresh()
        version = store.runs["r"].version

        path.unlink()
        train(tmp_path, "r", range(1, 21))
        store.refresh()
        run = store.runs["r"]

        assert run.row(now=0.0)["attempts"] == 1
        assert run.row(now=0.0)["step"] == 20
        assert len(run.attempts) == 1
        assert run.files[0].series[("train_step", "loss")].points()["count"] == 20
        assert run.progress()["records"] == path.read_bytes().count(b"\n")
        assert run.version > version

    def test_a_log_rewritten_in_place_starts_the_run_over(self, tmp_path: Path) -> None:
        path = write(
            tmp_path / "r.jsonl",
            line("run_start", "r", attempt=1),
            *(line("train_step", "r", step=i, loss=1.0) for i in range(1, 6)),
        )
        store = RunStore([tmp_path])
        store.refresh()

        path.write_bytes(
            line("run_start", "r", T0 + 60, attempt=1)
            + b"".join(line("train_step", "r", T0 + 60, step=i, loss=2.0) for i in range(1, 11))
        )
        store.refresh()
        run = store.runs["r"]

        points = run.files[0].series[("train_step", "loss")].points()
        assert (points["count"], set(points["y"])) == (10, {2.0})
        assert len(run.attempts) == 1
        assert run.started_ts == T0 + 60
