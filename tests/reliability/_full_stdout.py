"""A job whose stdout is a pipe that nobody reads (a log collector that stopped reading).

Run as `python _full_stdout.py WHERE RUN_DIR`: it opens a run with JSON on stdout, says `ready`
on stderr, and logs until SIGTERM ends it, from the main thread (WHERE `main`) or from a second
thread while the main thread waits (WHERE `thread`). With WHERE `close` it waits for a line on
stdin, says `closing` and closes the run, then waits. Once the pipe is full, every write to
stdout blocks.
"""

from __future__ import annotations

import itertools
import os
import sys
import threading

from runlines import Run


def main(where: str, run_dir: str) -> None:
    with Run("r", run_dir, console="json", system=False) as run:

        def work() -> None:
            for step in itertools.count():
                run.log("step", step=step, loss=1.0 / (step + 1))

        os.write(2, b"ready\n")
        if where == "close":
            sys.stdin.readline()
            os.write(2, b"closing\n")
            run.close()  # blocks in the write of run_end to stdout
            threading.Event().wait()
        elif where == "main":
            work()
        else:
            threading.Thread(target=work, daemon=True).start()
            threading.Event().wait()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
