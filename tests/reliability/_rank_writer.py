"""One rank of a distributed job: THREADS threads log RECORDS records each into the run.

Run as `python _rank_writer.py RUN_DIR RECORDS THREADS` with WORLD_SIZE and RANK set. Prints
`ready` once the run is open, waits for a line on stdin (so that all ranks start together),
logs at full speed, then closes the run.
"""

from __future__ import annotations

import os
import sys
import threading

from runlines import Run


def main(run_dir: str, records: int, threads: int) -> None:
    rank = int(os.environ["RANK"])
    with Run("big", run_dir, stdout=False) as run:
        print("ready", flush=True)
        sys.stdin.readline()

        def work(thread: int) -> None:
            writer = f"rank{rank}-t{thread}"
            for seq in range(records):
                run.log("train_step", writer=writer, seq=seq, loss=1.0 / (seq + 1), lr=3e-4)

        workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
