"""Zygote of the media SIGKILL trials: imports runlines and numpy once, forks one writer per trial.

Reads one JSON trial spec a line on stdin: {"dir", "name", "seed"}; each writer opens its run,
then acks every run.image() (or images(), table(), audio()) call that returned (see
_zygote.py). Run as `python _media_writer.py`.
"""

from __future__ import annotations

import os

import numpy as np
import pandas  # noqa: F401 - imported once here (pyarrow's tables use it), not per writer
import pyarrow.parquet  # noqa: F401
from _zygote import fork_trials

from runlines import Run


def write_trial(spec: dict[str, object]) -> None:
    run = Run(str(spec["name"]), str(spec["dir"]), stdout=False, system=False, capture=False)
    os.write(1, b"pid %d\n" % os.getpid())  # once the run is open: its log exists
    rng = np.random.default_rng(int(str(spec["seed"])))
    seq = 0
    while True:
        side = int(rng.integers(64, 320))  # noise: ~1-6 ms to encode, a kill lands mid-write
        pixels = rng.integers(0, 256, (side, side, 3), dtype=np.uint8)
        kind = seq % 4
        if kind == 0:
            run.image("samples", pixels, step=seq)
        elif kind == 1:
            run.images("grid", [pixels, pixels[:, :, 0]], step=seq)
        elif kind == 2:
            run.table("preds", [{"id": i, "score": float(i)} for i in range(side)], step=seq)
        else:
            run.audio("clip", rng.standard_normal(side * 50) / 4, 16000, step=seq)
        os.write(1, b"ack %d\n" % seq)
        seq += 1


if __name__ == "__main__":
    fork_trials(write_trial)
