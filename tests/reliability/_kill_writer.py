"""Zygote of the SIGKILL trials: imports runlines once, then forks one writer per trial.

Reads one JSON trial spec a line on stdin: {"dir", "name", "kind", "fsync"}. Each writer prints
`pid <pid>`, then `ack <seq>` after every log() call that returned, until the test kills it;
the zygote then prints `done <wait status>`. Every line is one os.write below PIPE_BUF, so it
arrives whole. Run as `python _kill_writer.py [--torch]`.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any

import numpy  # noqa: F401 - imported once here, not in every forked writer
from _payloads import logged

import runlines._context
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


def no_git(cwd: str, timeout_s: float = 0.0) -> dict[str, Any]:
    """run_start's git probe starts two subprocesses per Run; it has no part in durability."""
    return {}


def main() -> None:
    if "--torch" in sys.argv:
        import torch  # noqa: F401
    runlines._context.git_state = no_git

    for line in sys.stdin:
        spec = json.loads(line)
        pid = os.fork()
        if pid == 0:
            try:
                write_trial(spec)
            except BaseException:
                traceback.print_exc()
            os._exit(70)  # only reached when the writer failed: the test sees status 70
        _, status = os.waitpid(pid, 0)
        os.write(1, b"done %d\n" % status)


if __name__ == "__main__":
    main()
