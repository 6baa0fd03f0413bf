"""A long run: RECORDS train_step records (an eval every 1,000), printing its memory as it goes.

Run as `python _scale_writer.py RUN_DIR RECORDS`. Prints `rss <percent> <bytes>` at 10% and
at 100% of the records, from /proc/self/statm (the resident set now, not the peak).
"""

from __future__ import annotations

import os
import sys

from runlines import Run

_PAGE = os.sysconf("SC_PAGE_SIZE")


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * _PAGE


def main(run_dir: str, records: int) -> None:
    marks = {records // 10: 10, records: 100}
    with Run("long", run_dir, stdout=False) as run:
        for step in range(1, records + 1):
            run.log("train_step", epoch=step // 10_000, step=step, loss=1.0 / step, lr=3e-4)
            if step % 1000 == 0:
                run.log("eval", step=step, accuracy=step / records, split="val")
            if step in marks:
                print(f"rss {marks[step]} {resident_bytes()}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
