"""A training script that ends in a chosen way, with or without runlines around it.

Run as `python _ending.py MODE USE_RUNLINES RUN_DIR`. The test runs it twice side by side, with
USE_RUNLINES 1 and 0, and compares how the two processes ended. Modes that wait for a signal
print `ready` (or an `ack <step>` after each record) and then keep going until it arrives.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import sys
from typing import Any

MODE, USE_RUNLINES, RUN_DIR = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
stop_requested = False


def request_stop(signum: int, frame: Any) -> None:
    """A graceful-preemption handler: finish the step, checkpoint, leave."""
    global stop_requested
    stop_requested = True


def log(run: Any, event: str, **fields: Any) -> None:
    if run is not None:
        run.log(event, **fields)


def main() -> None:
    if MODE == "sigterm_graceful":
        signal.signal(signal.SIGTERM, request_stop)
    if USE_RUNLINES:
        from runlines import Run

        context: Any = Run("r", RUN_DIR, stdout=False)
    else:
        context = contextlib.nullcontext()
    with context as run:
        log(run, "step", step=0)
        if MODE in ("sigterm", "sigint"):
            print("ready", flush=True)
            sys.stdin.readline()  # the signal arrives while the job waits here
        elif MODE in ("sigterm_busy", "sigterm_graceful"):
            for step in itertools.count(1):
                log(run, "step", step=step)
                os.write(1, b"ack %d\n" % step)
                if stop_requested:
                    log(run, "checkpoint", step=step)
                    break
        elif MODE == "exception":
            raise ValueError("boom")
        elif MODE == "exit3":
            sys.exit(3)
        elif MODE == "exit_message":
            sys.exit("cannot continue")
        elif MODE == "os_exit":
            os._exit(5)
    print("finished", flush=True)


if __name__ == "__main__":
    main()
