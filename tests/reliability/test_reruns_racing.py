"""Launches racing for one name with resume="auto": a rerun after an `ok` end is a new run.

Spawned processes open the same name at the same moment. Separate launches never share a
name (`b-2`, `b-3`, ...); the ranks of one launch (WORLD_SIZE, RANK) always share one.
"""

from __future__ import annotations

import multiprocessing
import queue
import threading
from pathlib import Path
from typing import Any

import _rerunner
from _reliability import CHILD_TIMEOUT_S, read_log

_LAUNCHES = 6
_RANKS = 4


def _race(run_dir: Path, name: str, envs: list[dict[str, str]]) -> list[tuple[str, int, Any]]:
    """Start one worker per environment, release them together; return (name, attempt, rank)."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(len(envs) + 1, timeout=CHILD_TIMEOUT_S)
    results = context.Queue()
    workers = [
        context.Process(
            target=_rerunner.launch, args=(worker, str(run_dir), name, env, barrier, results)
        )
        for worker, env in enumerate(envs)
    ]
    for worker in workers:
        worker.start()
    try:
        barrier.wait()
        reports = [results.get(timeout=CHILD_TIMEOUT_S) for _ in workers]
        barrier.wait()  # every worker held its run until all had reported
    except (threading.BrokenBarrierError, queue.Empty):
        raise AssertionError("a worker failed (its traceback is on stderr)") from None
    finally:
        for worker in workers:
            worker.join(CHILD_TIMEOUT_S)
            if worker.is_alive():
                worker.kill()
    assert [worker.exitcode for worker in workers] == [0] * len(envs)
    return [(run, attempt, rank) for _, run, attempt, rank in sorted(reports)]


def _ranks(world_size: int) -> list[dict[str, str]]:
    return [{"WORLD_SIZE": str(world_size), "RANK": str(rank)} for rank in range(world_size)]


def test_launches_racing_after_an_ok_end_each_take_their_own_next_name(run_dir: Path) -> None:
    (first,) = _race(run_dir, "b", [{}])
    assert first == ("b", 1, None)

    reports = _race(run_dir, "b", [{}] * _LAUNCHES)

    names = sorted(name for name, _, _ in reports)
    assert names == sorted(f"b-{n}" for n in range(2, _LAUNCHES + 2)), "two launches shared a name"
    assert {attempt for _, attempt, _ in reports} == {1}
    for name in names:
        records, tail = read_log(run_dir / f"{name}.jsonl")
        assert tail == b""
        assert [r["event"] for r in records] == ["run_start", "run_end"]
        assert {r["run"] for r in records} == {name}


def test_the_ranks_of_a_rerun_share_its_new_name_and_a_restart_continues_it(
    run_dir: Path,
) -> None:
    assert _race(run_dir, "ddp", _ranks(_RANKS)) == [("ddp", 1, r) for r in range(_RANKS)]

    rerun = _race(run_dir, "ddp", _ranks(_RANKS))

    assert rerun == [("ddp-2", 1, r) for r in range(_RANKS)], "the ranks split into runs"
    for rank in range(_RANKS):  # killed: every rank's run_end is lost
        log = run_dir / ("ddp-2.jsonl" if rank == 0 else f"ddp-2.rank{rank}.jsonl")
        lines = log.read_bytes().splitlines(keepends=True)
        log.write_bytes(b"".join(lines[:-1]))

    restart = _race(run_dir, "ddp", _ranks(_RANKS))

    assert restart == [("ddp-2", 2, r) for r in range(_RANKS)]


def test_a_restart_with_more_ranks_puts_every_rank_in_one_run(run_dir: Path) -> None:
    """Ranks with no log of their own yet follow rank 0 into the run it chose."""
    _race(run_dir, "grow", _ranks(2))

    assert _race(run_dir, "grow", _ranks(_RANKS)) == [("grow-2", 1, r) for r in range(_RANKS)]
