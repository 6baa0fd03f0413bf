"""8 threads in 4 rank processes log into one run at full speed: every record once, in order."""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

import pytest
from _reliability import finish, read_log, spawn

import runlines

# Every test runs on log()'s C fast path and on its pure-Python path (tests/conftest.py); the
# child processes follow it (RUNLINES_NO_SPEEDUPS=1 on the "python" side).
pytestmark = pytest.mark.usefixtures("fast_path")

_RANKS = 4
_THREADS = 2


@pytest.mark.parametrize(
    "records",
    [
        pytest.param(25_000, id="200k-records"),
        pytest.param(250_000, id="2M-records", marks=pytest.mark.long),
    ],
)
def test_eight_threads_in_four_ranks_write_every_record_once_in_order(
    run_dir: Path, records: int
) -> None:
    children = [
        spawn(
            "_rank_writer.py",
            str(run_dir),
            str(records),
            str(_THREADS),
            env={"WORLD_SIZE": str(_RANKS), "RANK": str(rank)},
            stdin=subprocess.PIPE,
        )
        for rank in range(_RANKS)
    ]
    try:
        for child in children:
            assert child.stdout is not None
            assert child.stdout.readline() == b"ready\n"
    finally:
        results = [finish(child, b"go\n") for child in children]

    assert [code for code, _, _ in results] == [0] * _RANKS, [err for _, _, err in results]
    files = [run_dir / "big.jsonl"] + [run_dir / f"big.rank{r}.jsonl" for r in range(1, _RANKS)]
    seen: Counter[tuple[str, int]] = Counter()
    for rank, path in enumerate(files):
        lines, tail = read_log(path)  # every line parses strictly
        assert tail == b""
        assert (lines[0]["event"], lines[-1]["event"]) == ("run_start", "run_end")
        assert {line["rank"] for line in lines} == {rank}
        steps = [line for line in lines if line["event"] == "train_step"]
        for thread in range(_THREADS):
            writer = f"rank{rank}-t{thread}"
            seqs = [line["seq"] for line in steps if line["writer"] == writer]
            assert seqs == list(range(records)), f"{writer}: records lost, repeated or reordered"
        seen.update((line["writer"], line["seq"]) for line in steps)
    assert len(seen) == _RANKS * _THREADS * records >= 200_000
    assert set(seen.values()) == {1}

    frame = runlines.load(run_dir)
    steps = frame[frame.event == "train_step"]
    assert set(frame.run) == {"big"}
    assert len(steps) == len(seen)
    assert sorted(steps["rank"].unique().tolist()) == list(range(_RANKS))
    for writer, group in steps.groupby("writer"):
        assert group["seq"].tolist() == list(range(records)), writer
        assert set(group["rank"]) == {int(str(writer)[4])}
