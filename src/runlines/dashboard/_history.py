"""A log's history from its Parquet copy: what the dashboard would have read from its JSONL.

The copy (see `runlines.reading._copies`) is used only while it matches the JSONL's bytes;
`_copy_columns` then reads it, column by column, into the state the dashboard would hold after
the bytes it covers. The JSONL after the covered bytes is tailed as before. numpy and pyarrow
are imported only for a log that has a copy to read.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Final

from runlines.reading import _copies, log_file

if TYPE_CHECKING:
    from runlines.dashboard._copy_columns import History

__all__ = ["MAX_COPY_RECORDS", "MIN_LOG_BYTES", "read_history"]

# As Run's compact=None: a smaller log is read from its JSONL, copy or not, in less time than
# importing pyarrow takes (measured: 0.5 s and more; a 1 MiB log is read in about 0.1 s)
MIN_LOG_BYTES: Final = 4 << 20
# A copy is read whole: its columns take about 250 MB per million records while a history is
# built from them (measured, 1M and 3M records). Past this, the JSONL is read instead, in the
# bounded memory a series keeps, so that the server's memory stays bounded however long a run.
MAX_COPY_RECORDS: Final = 4_000_000


def read_history(path: Path, *, label: str | None = None) -> tuple[History | None, list[str]]:
    """Return the history *path*'s copy holds (None: read the JSONL), and the warnings met.

    A stale, foreign or damaged copy gives None and its warning; a log without a copy, under
    `MIN_LOG_BYTES`, of more than `MAX_COPY_RECORDS`, or without pyarrow, gives None and no
    warning.
    """
    try:
        if os.stat(path).st_size < MIN_LOG_BYTES:
            return None, []
    except OSError:  # gone: the tail says so
        return None, []
    # The readers say why a copy is not used by a warning: caught here, for the page to show.
    # (catch_warnings is process-wide: a warning of another thread meanwhile is caught too.)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            history = _history(path, label)
        except (OSError, ValueError):  # the log changed under us, or odd columns (Inexact)
            history = None
        except ImportError:  # no pyarrow: the JSONL is read
            history = None
        except Exception as err:  # a bug must cost the copy only, never the log's reading
            warnings.warn(
                f"{path}: its copy could not be read ({err!r}); please report it", stacklevel=1
            )
            history = None
    return history, [str(warning.message) for warning in caught]


def _history(path: Path, label: str | None) -> History | None:
    before = os.stat(path)
    log = log_file(path)
    copy = _copies.usable_copy(log, stacklevel=3)
    if copy is None:
        return None
    if copy.meta.summary["records"] > MAX_COPY_RECORDS:
        return None
    from runlines.dashboard import _copy_columns  # numpy and pyarrow: a copy is read

    return _copy_columns.history_of(path, log, copy, before, label)
