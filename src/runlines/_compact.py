"""The Parquet copy a run writes of its log as it closes: when, and within what bound.

`Run(..., compact=None)` (the default) writes it for a log of at least `AUTO_BYTES`; True
always, False never. Only a run that ended by itself (ok, or failed by an exception) writes
it: a run ended by a signal (SIGTERM, preemption, Ctrl-C) or in a forked child does not. The
copy is written on a helper thread that the closing thread waits for in steps of
`SIGNAL_STEP_S`: a signal that arrives meanwhile is served within that bound, and the copy is
abandoned (the log is complete; `runlines compact` writes it later).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Final

from runlines._warnings import warn_user
from runlines.errors import RunlinesWarning

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["AUTO_BYTES", "SIGNAL_STEP_S", "check_compact", "compact_at_close"]

AUTO_BYTES: Final = 4 << 20  # compact=None: smaller logs are cheap to parse, pyarrow to import
SIGNAL_STEP_S: Final = 0.1


def check_compact(compact: object) -> bool | None:
    """Return *compact* when it is True, False or None; raise TypeError otherwise."""
    if compact is None or isinstance(compact, bool):
        return compact
    msg = f"compact must be True, False or None (by size), got {compact!r}"
    raise TypeError(msg)


def compact_at_close(log: Path, compact: bool | None) -> None:
    """Write the Parquet copy of the just-closed *log* when *compact* asks for it; never raise."""
    if compact is False or (compact is None and _size(log) < AUTO_BYTES):
        return
    failure: list[BaseException] = []
    worker = threading.Thread(target=_write, args=(log, failure), daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(SIGNAL_STEP_S)  # Python serves signals between these waits
    if not failure:
        return
    err = failure[0]
    if isinstance(err, ImportError) and compact is None:
        return  # no pyarrow: the log is read from its JSONL, as without a copy
    warn_user(
        f"the Parquet copy of {log} was not written ({type(err).__name__}: {err}); the log "
        f"is complete, and `runlines compact {log}` writes the copy later",
        RunlinesWarning,
    )


def _write(log: Path, failure: list[BaseException]) -> None:
    try:
        from runlines.reading import _copies, _rules  # the read side, loaded at a close

        _rules.import_arrow("the Parquet copy")
        _copies.write_copy(log)
    except Exception as err:  # a copy never fails the job: it is a cache of the log
        failure.append(err)


def _size(log: Path) -> int:
    try:
        return log.stat().st_size
    except OSError:
        return 0
