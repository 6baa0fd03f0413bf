"""Copy runs to a shared folder or an object store, and read them back (docs/sync.md).

`ends` holds what a run's files are to a sync and the folder end, `store` the object-store
end (fsspec, imported only for a URL), `passes` one pass: `sync`, its `Report`, and
`local_copy` (a store synced down into a local folder, for the readers).
"""

from __future__ import annotations

from runlines._sync.passes import Report, cache_folder, is_url, local_copy, open_end, sync

__all__ = ["Report", "cache_folder", "is_url", "local_copy", "open_end", "sync"]
