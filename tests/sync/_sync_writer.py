"""A job that logs while the sync tests copy its run; it writes records when told to.

Run as `python _sync_writer.py DIR NAME`. Reads one command a line on stdin: a number N (log
N more records, then print `ack <records so far>`) or `end` (close the run, print `ack end`,
exit). Every 10th record is an artifact, and every other artifact has the bytes of an
earlier one (the destination holds them once); every 7th record has a 20,000-character
field, so that a pass may well find a line half written.
"""

from __future__ import annotations

import sys

import runlines._context
from runlines import Run


def no_git(cwd: str, timeout_s: float = 0.0) -> dict[str, object]:
    """run_start's git probe starts subprocesses; it has no part in what is synced."""
    return {}


def write(run: Run, seq: int) -> None:
    """Log record number *seq*."""
    if seq % 10 == 9:
        content = f"artifact {seq - 10 if seq % 20 == 19 else seq}"
        run.artifact("sample", content, step=seq)
    elif seq % 7 == 0:
        run.log("train_step", step=seq, loss=1.0 / (seq + 1), text="x" * 20_000)
    else:
        run.log("train_step", step=seq, loss=1.0 / (seq + 1))


def main() -> None:
    runlines._context.git_state = no_git
    directory, name = sys.argv[1:3]
    run = Run(name, directory, stdout=False, system=False)
    seq = 0
    for command in sys.stdin:
        if command.strip() == "end":
            run.close()
            print("ack end", flush=True)
            return
        for _ in range(int(command)):
            write(run, seq)
            seq += 1
        print(f"ack {seq}", flush=True)


if __name__ == "__main__":
    main()
