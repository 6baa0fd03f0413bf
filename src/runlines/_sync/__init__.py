"""Copy runs to a shared folder or an object store, and read them back (docs/sync.md).

`ends` holds what a run's files are to a sync and the folder end, `store` the object-store
end (fsspec, imported only for a URL), `passes` one pass: `sync`, its `Report`, and
`local_copy` (a store synced down into a local folder, for the readers), `live` the marker
that says a synced log's run is live at its source (`live_at_source`, for the readers;
`fresh_marker`, what it says).
"""

from __future__ import annotations

from runlines._sync.live import LIVE_FOR_S, fresh_marker, live_at_source
from runlines._sync.passes import Report, cache_folder, is_url, local_copy, open_end, sync

__all__ = [
    "LIVE_FOR_S",
    "Report",
    "cache_folder",
    "fresh_marker",
    "is_url",
    "live_at_source",
    "local_copy",
    "open_end",
    "sync",
]
