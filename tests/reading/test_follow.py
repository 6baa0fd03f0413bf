"""LogFollower: the records appended to a growing log, as `tail -f`, `top` and the dashboard
read them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from _logs import line, write
from runlines.cli._top import Top
from runlines.dashboard._runs import RunStore
from runlines.errors import ReadError
from runlines.reading import LogFollower


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_fifo_named_like_a_log_is_refused_not_read_as_empty(tmp_path: Path) -> None:
    fifo = tmp_path / "f.jsonl"
    os.mkfifo(fifo)
    follower = LogFollower(fifo)

    with pytest.raises(ReadError, match="a FIFO, not a regular file"):
        follower.poll()


def records(run: str, numbers: range) -> bytes:
    return b"".join(line("train_step", run=run, step=n, loss=1 / (n + 1)) for n in numbers)


class TestRewrittenInPlace:
    """The same file written again from its start, longer than what was read: read anew."""

    def test_a_longer_rewrite_is_read_from_its_start(self, tmp_path: Path) -> None:
        log = write(tmp_path / "r.jsonl", records("old", range(3)))
        follower = LogFollower(log)
        assert [r["step"] for r in follower.poll()] == [0, 1, 2]

        log.write_bytes(records("new", range(10, 20)))  # same inode, more bytes

        assert [(r["run"], r["step"]) for r in follower.poll()] == [
            ("new", n) for n in range(10, 20)
        ]
        assert follower.restarts == 1

    def test_a_rewrite_after_the_offset_given_is_read_from_its_start(self, tmp_path: Path) -> None:
        log = write(tmp_path / "r.jsonl", records("old", range(3)))
        follower = LogFollower(log, log.stat().st_size)  # as `tail -f` starts after the last

        log.write_bytes(records("new", range(10, 20)))

        assert [r["step"] for r in follower.poll()] == list(range(10, 20))
        assert follower.restarts == 1

    def test_a_rewrite_that_keeps_the_bytes_before_the_offset_is_seen_by_its_start(
        self, tmp_path: Path
    ) -> None:
        first, rest = line("run_start", run="old", n=1), records("same", range(5))
        log = write(tmp_path / "r.jsonl", first, rest)
        follower = LogFollower(log)
        follower.poll()

        other = line("run_start", run="new", n=2)
        assert len(other) == len(first)
        log.write_bytes(other + rest + records("same", range(5, 7)))

        assert [r["event"] for r in follower.poll()][:2] == ["run_start", "train_step"]
        assert follower.restarts == 1

    def test_appends_and_torn_lines_never_start_over(self, tmp_path: Path) -> None:
        log = write(tmp_path / "a.jsonl")
        follower = LogFollower(log)
        data = records("a", range(200))
        steps = []

        for at in range(0, len(data), 97):  # cuts inside lines, before and after 128 bytes
            with log.open("ab") as out:
                out.write(data[at : at + 97])
            steps += [r["step"] for r in follower.poll()]

        assert steps == list(range(200))
        assert follower.restarts == 0


class TestOneFollower:
    """`tail -f`, `top` and the dashboard read through the one `LogFollower`."""

    def test_the_dashboard_and_top_follow_with_the_same_class(self, tmp_path: Path) -> None:
        log = write(tmp_path / "r.jsonl", records("r", range(3)))
        top = Top([log], alive=lambda _: True)
        top.refresh()
        store = RunStore([log])
        store.refresh(force=True)

        (watch,) = top.watches.values()
        assert type(watch.follower) is type(store.runs["r"].files[0].tail) is LogFollower

    @pytest.mark.parametrize("read", ["poll", "stream"])
    def test_a_rewrite_that_differs_past_the_first_64_bytes_is_seen(
        self, read: str, tmp_path: Path
    ) -> None:
        """The first 128 bytes are compared, for every reader (the dashboard's held 64)."""
        first = line("run_start", run="old", note="x" * 60 + "a" * 40)
        rest = records("same", range(5))
        log = write(tmp_path / "r.jsonl", first, rest)
        follower = LogFollower(log)
        list(getattr(follower, read)())

        other = line("run_start", run="old", note="x" * 60 + "b" * 40)
        assert other[:64] == first[:64]
        assert other != first
        log.write_bytes(other + rest + records("same", range(5, 7)))

        again = list(getattr(follower, read)())
        assert [r["event"] for r in again][:2] == ["run_start", "train_step"]
        assert again[0]["note"].endswith("b" * 40)
        assert follower.restarts == 1
