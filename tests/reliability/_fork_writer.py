"""A training process that forks data-loader-like children while two threads log.

Run as `python _fork_writer.py RUN_DIR ROUNDS`. The run writes JSON to stdout (a pipe) and its
file. Each round forks a fork-context Pool of 2 workers (4 tasks), a Process, and a plain
os.fork() child that leaves the `with` block and exits through the interpreter; all of them log
through the inherited Run. Joins have timeouts: a deadlock prints `deadlock: <what>` to stderr
and exits 3. Then it prints `children done` to stderr and waits for a line on stdin (the test
checks the run's lock meanwhile) before it stops its threads and closes the run.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
import warnings

from runlines import Run

# Python 3.12+ warns of fork() in a process with threads: forking while threads log is the test.
warnings.filterwarnings("ignore", "This process .* is multi-threaded", DeprecationWarning)

JOIN_TIMEOUT_S = 60
POOL_RECORDS = 300
CHILD_RECORDS = 100
RUN: Run | None = None  # the open run, inherited by forked children (never pickled)


def log_many(writer: str, count: int) -> int:
    assert RUN is not None
    for seq in range(count):
        RUN.log("tick", writer=writer, seq=seq, loss=1.0 / (seq + 1))
    return count


def deadlock(what: str) -> None:
    print(f"deadlock: {what}", file=sys.stderr, flush=True)
    os._exit(3)


def fork_round(number: int) -> None:
    context = multiprocessing.get_context("fork")
    with context.Pool(2) as pool:
        tasks = [(f"pool{number}-{task}", POOL_RECORDS) for task in range(4)]
        result = pool.starmap_async(log_many, tasks)
        try:
            result.get(timeout=JOIN_TIMEOUT_S)
        except multiprocessing.TimeoutError:
            deadlock(f"pool of round {number}")
    process = context.Process(target=log_many, args=(f"process{number}", CHILD_RECORDS))
    process.start()
    process.join(JOIN_TIMEOUT_S)
    if process.exitcode != 0:
        deadlock(f"process of round {number} (exit code {process.exitcode})")


def plain_fork() -> None:
    """A child that leaves the with-block (Run.__exit__ runs in it) and exits normally."""
    pid = os.fork()
    if pid == 0:
        log_many("plainfork", CHILD_RECORDS)
        raise SystemExit(0)
    reaped: list[int] = []
    waiter = threading.Thread(target=lambda: reaped.append(os.waitpid(pid, 0)[1]))
    waiter.start()
    waiter.join(JOIN_TIMEOUT_S)
    if not reaped or reaped[0] != 0:
        deadlock(f"plain fork child (status {reaped})")


def main(run_dir: str, rounds: int) -> None:
    global RUN
    with Run("r", run_dir, console="json") as run:
        RUN = run
        stop = threading.Event()

        def busy(thread: int) -> None:
            seq = 0
            while not stop.is_set():
                run.log("tick", writer=f"parent{thread}", seq=seq, loss=0.5)
                seq += 1

        threads = [threading.Thread(target=busy, args=(t,)) for t in range(2)]
        for thread in threads:
            thread.start()
        for number in range(rounds):
            fork_round(number)
        plain_fork()
        print("children done", file=sys.stderr, flush=True)
        sys.stdin.readline()
        stop.set()
        for thread in threads:
            thread.join(JOIN_TIMEOUT_S)
            if thread.is_alive():
                deadlock("a parent thread")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
