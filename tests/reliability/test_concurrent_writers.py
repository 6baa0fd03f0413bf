"""Writers at once: 8 threads in 4 rank processes log into one run at full speed (every record
once, in order); many jobs open one run at the same moment (one of them writes it)."""

from __future__ import annotations

import multiprocessing
import queue
import subprocess
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import _opener
import pytest
from _reliability import CHILD_TIMEOUT_S, examples, finish, read_log, spawn

import runlines

_RANKS = 4
_THREADS = 2
_OPENERS = 8


# It runs on log()'s C fast path and on its pure-Python path (tests/conftest.py); the child
# processes follow it (RUNLINES_NO_SPEEDUPS=1 on the "python" side).
@pytest.mark.usefixtures("fast_path")
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


def test_jobs_opening_one_run_at_once_never_write_it_together(run_dir: Path) -> None:
    """8 spawned jobs open the same run at the same moment, and a refused one tries again.

    One of them writes it; no refused job removes the lock file the writer holds, so no
    attempt starts before the previous one ended.
    """
    rounds = examples(4, 40)
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(_OPENERS + 1, timeout=CHILD_TIMEOUT_S)
    results = context.Queue()
    workers = [
        context.Process(
            target=_opener.open_rounds, args=(worker, str(run_dir), rounds, barrier, results)
        )
        for worker in range(_OPENERS)
    ]
    for worker in workers:
        worker.start()
    try:
        reports = [_one_round(barrier, results) for _ in range(rounds)]
    finally:
        for worker in workers:
            worker.join(CHILD_TIMEOUT_S)
            if worker.is_alive():
                worker.kill()

    assert [worker.exitcode for worker in workers] == [0] * _OPENERS
    for round_, (opened, kept) in enumerate(reports):
        records, tail = read_log(run_dir / f"round{round_}.jsonl")
        assert tail == b""
        lifecycle = [(r["event"], r["attempt"]) for r in records if "attempt" in r]
        attempts = len(lifecycle) // 2
        assert lifecycle == [
            (event, attempt) for attempt in range(1, attempts + 1) for event in _ONE_ATTEMPT
        ], f"round {round_}: two jobs wrote the run at once"
        assert len(opened) == 1, f"round {round_}: {len(opened)} jobs held the run at once"
        assert kept == [True], f"round {round_}: the lock file was removed while held"


_ONE_ATTEMPT = ("run_start", "run_end")


def _one_round(barrier: Any, results: Any) -> tuple[list[int], list[bool]]:
    """Release the workers, wait for their reports; return who opened, and their lock checks."""
    try:
        barrier.wait()
        outcomes = [_get(results) for _ in range(_OPENERS)]
        barrier.wait()  # the holders check their lock file and close
        opened = [worker for worker, _, what, _ in outcomes if what == "opened"]
        kept = [bool(_get(results)[3]) for _ in opened]
        barrier.wait()
    except threading.BrokenBarrierError:
        raise AssertionError("a worker failed (its traceback is on stderr)") from None
    return opened, kept


def _get(results: Any) -> tuple[int, int, str, Any]:
    try:
        return results.get(timeout=CHILD_TIMEOUT_S)  # type: ignore[no-any-return]
    except queue.Empty:
        raise AssertionError("a worker stopped reporting") from None
