"""Zygote of the SIGKILL trials: imports runlines once, then forks one writer per trial.

Reads one JSON trial spec a line on stdin: {"dir", "name", "kind", "fsync"}; each writer acks
every log() call that returned (see _zygote.py). Run as `python _kill_writer.py [--torch]`.
"""

from __future__ import annotations

import os
import sys

import numpy  # noqa: F401 - imported once here, not in every forked writer
from _payloads import logged
from _zygote import fork_trials

from runlines import Run


def write_trial(spec: dict[str, object]) -> None:
    os.write(1, b"pid %d\n" % os.getpid())
    run = Run(
        str(spec["name"]),
        str(spec["dir"]),
        stdout=False,
        fsync=bool(spec["fsync"]),
        system=False,  # the log holds only the trial's records: no samples, no NaN alarms
        on_nonfinite="ignore",
    )
    kind = str(spec["kind"])
    seq = 0
    while True:
        run.log("rec", **logged(kind, seq))
        os.write(1, b"ack %d\n" % seq)
        seq += 1


def main() -> None:
    if "--torch" in sys.argv:
        import torch  # noqa: F401
    fork_trials(write_trial)


if __name__ == "__main__":
    main()
