"""The dashboard of `runlines serve`: a local, read-only view of run logs, live as they grow.

The server follows each log by byte offset, so that a poll reads only what was appended, and
keeps each (event, field) series downsampled to its buckets' minima and maxima. The page is
static HTML with a vendored uPlot; its JSON endpoints are documented in docs/dashboard.md.
`serve` is `runlines.serve`. Importing this package is light: the HTTP server is imported on
first use.
"""

from __future__ import annotations

import os
import typing

if typing.TYPE_CHECKING:
    from runlines.dashboard._server import Server

__all__ = ["Server", "serve"]


def serve(
    *sources: str | os.PathLike[str],
    host: str = "127.0.0.1",
    port: int = 8000,
    open_browser: bool = False,
) -> None:
    """Serve the dashboard over *sources* (default: the current folder) until interrupted.

    Binds 127.0.0.1 by default. Any other host prints a warning and requires the token that the
    printed URL carries.
    """
    from runlines.dashboard._server import serve_until_interrupted

    serve_until_interrupted(*sources, host=host, port=port, open_browser=open_browser)


def __getattr__(name: str) -> typing.Any:
    if name == "Server":
        from runlines.dashboard._server import Server

        return Server
    msg = f"module 'runlines.dashboard' has no attribute {name!r}"
    raise AttributeError(msg)
