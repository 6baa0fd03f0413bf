"""The dashboard of `runlines serve`: a local, read-only view of run logs, live as they grow.

The server follows each log by byte offset, so that a poll reads only what was appended, and
keeps each (event, field) series downsampled to its buckets' minima and maxima. The page is
static HTML with a vendored uPlot; its JSON endpoints are documented in docs/dashboard.md.
`serve` is `runlines.serve`; `report` (`runlines.report`) writes the same view of finished runs
to one HTML file that opens from disk. Importing this package is light: the HTTP server and the
report's writer are imported on first use.
"""

from __future__ import annotations

import importlib
import os
import typing
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

if typing.TYPE_CHECKING:
    from runlines.dashboard._server import Server

__all__ = ["Server", "report", "serve"]

_PORTS = "from 0 to 65535 (0 picks a free one)"
_MAX_PORT = 65535


def serve(
    *sources: str | os.PathLike[str],
    host: str = "127.0.0.1",
    port: int = 8000,
    open_browser: bool = False,
) -> None:
    """Serve the dashboard over *sources* (default: the current folder) until interrupted.

    Binds 127.0.0.1 by default. Any other host prints a warning and requires the token that the
    printed URL carries.

    Raises:
        ValueError: *port* is not a port number, 0 to 65535 (0 picks a free one).
    """
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= _MAX_PORT:
        msg = f"serve(port={port!r}) expected a port number {_PORTS}"
        raise ValueError(msg)
    _part("_server").serve_until_interrupted(
        *sources, host=host, port=port, open_browser=open_browser
    )


def report(
    *sources: str | os.PathLike[str],
    path: str | os.PathLike[str],
    event: str | None = None,
    metric: str | None = None,
    x: str = "step",
    group_by: Sequence[str] | None = None,
) -> Path:
    """Write the runs of *sources* to one self-contained HTML file at *path*; return its path.

    The page needs no server and no network: it shows the run table (the rows of `runs()`),
    a chart of each numeric field of each event by *x* (`compare(metric=..., by=x)`, each
    run's line downsampled to min/max buckets), each run's config and attempts, and the size
    and sha256 of every log read. *event* and *metric* keep only the charts of that event or
    field. With *group_by* (config keys), each chart draws each group's mean with a band.

    Raises:
        ReadError: a source that does not exist, or a folder without logs.
        FieldError: *metric* is not a numeric field of any record.
    """
    written = _part("_report").report(
        *sources, path=path, event=event, metric=metric, x=x, group_by=group_by
    )
    return Path(written)


def _part(name: str) -> ModuleType:
    """Return the module *name* of this package (the HTTP server, the report's writer),
    imported on first use: `import runlines` loads neither."""
    return importlib.import_module(f"{__name__}.{name}")


def __getattr__(name: str) -> typing.Any:
    if name == "Server":
        return _part("_server").Server
    msg = f"module 'runlines.dashboard' has no attribute {name!r}"
    raise AttributeError(msg)
