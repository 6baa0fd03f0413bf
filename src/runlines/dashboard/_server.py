"""The dashboard's server: the HTTP side and the thread that reads the logs, started and stopped."""

from __future__ import annotations

import ipaddress
import os
import secrets
import sys
import threading
import time
import webbrowser
from typing import Final

from runlines.dashboard._http import DashboardServer, Handler
from runlines.dashboard._runs import RunStore

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8000
_CATCH_UP_BYTES: Final = 1 << 20  # per file and turn: requests wait at most one such slice
_IDLE_POLL_S: Final = 0.5


def is_loopback(host: str) -> bool:
    """Return whether *host* names this machine only (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Server:
    """The dashboard over *sources* (log files and folders of logs), started and stopped in code.

    ``port=0`` picks a free port; `url` says which, with the token when there is one. A host
    that is not loopback needs a token, made here unless given.
    """

    def __init__(
        self,
        *sources: str | os.PathLike[str],
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        token: str | None = None,
    ) -> None:
        self.store = RunStore(sources)
        loopback = is_loopback(host)
        self.token = token if token is not None or loopback else secrets.token_urlsafe(24)
        try:
            self._http = DashboardServer((host, port), Handler)
        except OSError as err:
            msg = f"cannot listen on {host}:{port} ({err.strerror}); pick another --port, or 0"
            raise OSError(err.errno, msg) from err
        self._http.store = self.store
        self._http.token = self.token
        self._http.loopback = loopback
        self._http.clock = time.time
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._reader = threading.Thread(target=self._read, name="runlines-reader", daemon=True)

    def _read(self) -> None:
        """Read the logs' history and what they gain, a bounded slice of each file at a time."""
        while not self._stopping.is_set():
            try:
                read = self.store.catch_up(_CATCH_UP_BYTES)
            except Exception as err:  # a bug must not stop the page's updates without a word
                print(f"runlines: warning: reading the logs failed: {err!r}", file=sys.stderr)
                read = 0
            if read == 0:
                self._stopping.wait(_IDLE_POLL_S)

    @property
    def url(self) -> str:
        """The page's address, with ``?token=`` when the server needs one."""
        host, port = self._http.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else str(host)
        shown = f"[{name}]" if ":" in name else name
        token = f"/?token={self.token}" if self.token else "/"
        return f"http://{shown}:{port}{token}"

    def start(self) -> Server:
        """Serve in a background thread; return self."""
        self._reader.start()
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until `stop()` or KeyboardInterrupt."""
        self._reader.start()
        self._http.serve_forever()

    def stop(self) -> None:
        """Stop serving and reading, and close the socket."""
        self._stopping.set()
        if self._reader.is_alive():
            self._reader.join()
        if self._thread is not None:
            self._http.shutdown()
            self._thread.join()
            self._thread = None
        self._http.server_close()

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_until_interrupted(
    *sources: str | os.PathLike[str],
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    open_browser: bool = False,
) -> None:
    """Serve the dashboard over *sources* (default: the current folder) until interrupted.

    Binds 127.0.0.1 by default. Any other host prints a warning and requires the token that the
    printed URL carries.
    """
    server = Server(*sources, host=host, port=port)
    if not is_loopback(host):
        print(
            f"runlines: warning: serving on {host}, reachable from other machines: anyone with "
            "the URL below (token included) can read these logs",
            file=sys.stderr,
        )
    print(f"runlines dashboard: {server.url}  (Ctrl+C to stop)", file=sys.stderr)
    if open_browser:
        webbrowser.open(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
