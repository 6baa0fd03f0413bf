"""A launch of a run that other launches start at the same moment. Imported by the spawn
workers of test_reruns_racing.py.

The worker sets the rank's environment (WORLD_SIZE and RANK, as torchrun does) when given one,
waits at the barrier, opens the run with the default resume="auto", reports the name and
attempt it got, keeps the run open until every worker has reported, then closes it.
"""

from __future__ import annotations

import os
from typing import Any

from runlines import Run


def launch(
    worker: int, run_dir: str, name: str, env: dict[str, str], barrier: Any, results: Any
) -> None:
    """Open *name* in *run_dir* when released; put (worker, run name, attempt, rank)."""
    try:
        os.environ.update(env)
        barrier.wait()  # all released together
        run = Run(name, run_dir, stdout=False, system=False, capture=False)
        results.put((worker, run.name, run.attempt, run.rank))
        barrier.wait()  # every worker holds its run
        run.close()
    except BaseException:
        barrier.abort()  # the test fails at once instead of waiting for this worker
        raise
