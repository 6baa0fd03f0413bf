"""A script that leaves by SystemExit, with its run open at the top level or in a `with` block.

Run as `python _exiting.py HOW WHERE RUN_DIR`: HOW is how it leaves (see _LEAVE), WHERE is
`with` (inside `with Run(...)`) or `open` (a run left open, closed as the interpreter exits).
"""

from __future__ import annotations

import argparse
import sys
import threading

from runlines import Run

HOW, WHERE, RUN_DIR = sys.argv[1:4]


def exit_in_a_thread() -> None:
    thread = threading.Thread(target=sys.exit, args=(4,))  # ends the thread, not the process
    thread.start()
    thread.join()


def exit_caught() -> None:
    try:
        sys.exit(2)
    except SystemExit:
        pass  # the job goes on, and ends by itself


def leave() -> None:
    if HOW == "exit0":
        sys.exit(0)
    elif HOW == "exit_none":
        sys.exit()
    elif HOW == "exit2":
        sys.exit(2)
    elif HOW == "exit_message":
        sys.exit("cannot continue")
    elif HOW == "raise2":
        raise SystemExit(2)
    elif HOW == "argparse":
        argparse.ArgumentParser(prog="train").parse_args(["--no-such-option"])
    elif HOW == "thread":
        exit_in_a_thread()
    elif HOW == "caught":
        exit_caught()


if WHERE == "with":
    with Run("r", RUN_DIR, stdout=False) as run:
        run.log("step", step=0)
        leave()
else:
    run = Run("r", RUN_DIR, stdout=False)
    run.log("step", step=0)
    if HOW == "caught_here":
        try:
            sys.exit(2)
        except SystemExit:
            pass  # caught in the script's own top-level code: it goes on, and exits 0
    leave()
