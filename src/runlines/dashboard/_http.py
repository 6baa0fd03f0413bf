"""The HTTP side: the read-only JSON API and the page, over the standard library's server."""

from __future__ import annotations

import datetime
import hmac
import ipaddress
import json
import mimetypes
import os
import socket
import threading
from collections.abc import Callable, Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any, Final, TypeVar
from urllib.parse import parse_qs, urlsplit

import orjson

from runlines import reading
from runlines.dashboard._console import ConsoleRequestError, console_answer
from runlines.dashboard._runs import SPAN_EVENT, RunState, RunStore
from runlines.dashboard._series import unit_of
from runlines.dashboard._study import study
from runlines.errors import ReadError
from runlines.fields import Vocabulary
from runlines.reading._rules import json_ready as jsonable

_STATIC_FILES: Final = (
    "index.html",
    "app.js",
    "media.js",
    "console.js",
    "groups.js",
    "study.js",
    "table.js",
    "app.css",
    "vendor/uPlot.iife.min.js",
    "vendor/uPlot.min.css",
    "vendor/LICENSE",
)
REQUEST_READ_BYTES: Final = 1 << 20  # the most a request reads of one file
SEND_BLOCK_BYTES: Final = 64 << 10  # a file is sent in blocks: memory stays bounded
TABLE_PAGE_ROWS: Final = 500  # the most rows /api/table answers at once
MAX_CONNECTIONS: Final = 64  # open at once, well below any limit on descriptors
IDLE_TIMEOUT_S: Final = 5.0  # a connection silent this long (no request, or not reading) ends
DIFF_RTOL: Final = 1e-5  # runlines.diff's defaults
DIFF_ATOL: Final = 1e-8
_IMAGE_TYPES: Final = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}
_VOCABULARY: Final = Vocabulary()  # the standard fields: a column's unit is its agreed name's
_LOOPBACK_NAMES: Final = frozenset({"localhost"})  # and any loopback address
_CSP: Final = (
    "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
    "script-src 'self'; connect-src 'self'; frame-ancestors 'none'"
)


class ApiError(Exception):
    """A request the API refuses: its HTTP status and a message that says what to fix."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


def _static(name: str) -> bytes:
    return resources.files("runlines.dashboard").joinpath(f"static/{name}").read_bytes()


def dumps(value: Any) -> bytes:
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:  # an int beyond 64 bits, from a foreign writer
        return json.dumps(value, default=_iso).encode()


def _iso(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime.datetime) else str(value)


class DashboardServer(ThreadingHTTPServer):
    """A threading HTTP server that knows its runs and, off loopback, its token.

    It holds at most `max_connections` open. A new one beyond them takes the place of the
    oldest that is waiting for a request (a silent or idle connection); when every one is
    answering, the new one gets 503. A connection silent for `idle_timeout_s` is closed.
    So silent sockets never use up the descriptors, nor lock out the token holder.
    """

    daemon_threads = True
    request_queue_size = 128  # a burst of connections waits in the kernel, not refused
    max_connections = MAX_CONNECTIONS
    idle_timeout_s = IDLE_TIMEOUT_S
    store: RunStore
    token: str | None
    loopback: bool
    clock: Callable[[], float]

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self._guard = threading.Lock()
        # The open connections, oldest first: True while one waits for a request's head
        self._open: dict[socket.socket, bool] = {}

    def process_request(self, request: Any, client_address: Any) -> None:
        if self._admit(request):
            super().process_request(request, client_address)
        else:
            _refuse_busy(request)
            self.shutdown_request(request)

    def _admit(self, connection: socket.socket) -> bool:
        with self._guard:
            if len(self._open) >= self.max_connections:
                waiting = next((c for c, idle in self._open.items() if idle), None)
                if waiting is None:
                    return False
                del self._open[waiting]
                _hang_up(waiting)  # its thread wakes from its read and closes it
            self._open[connection] = True
            return True

    def mark_waiting(self, connection: socket.socket, *, waiting: bool) -> None:
        """Say whether *connection* waits for a request's head (and may give its place)."""
        with self._guard:
            if connection in self._open:
                self._open[connection] = waiting

    def shutdown_request(self, request: Any) -> None:
        with self._guard:
            self._open.pop(request, None)
        super().shutdown_request(request)


def _hang_up(connection: socket.socket) -> None:
    try:
        connection.shutdown(socket.SHUT_RDWR)
    except OSError:  # closed by its peer meanwhile
        pass


def _refuse_busy(connection: socket.socket) -> None:
    """Answer 503 on the accepting thread, without waiting for the request."""
    body = dumps({"error": "the dashboard is busy: too many connections; retry", "status": 503})
    head = (
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n"
    )
    try:
        connection.settimeout(0)  # a full send buffer must not stop the accepting thread
        connection.send(head.encode() + body)
    except OSError:
        pass


class Handler(BaseHTTPRequestHandler):
    """Answer GET and HEAD only: the dashboard never writes, moves or deletes anything."""

    server: DashboardServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Keep the terminal quiet: one line per request would drown the URL."""

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.idle_timeout_s)  # per read and write

    def handle_one_request(self) -> None:
        self.server.mark_waiting(self.connection, waiting=True)
        super().handle_one_request()

    def parse_request(self) -> bool:
        parsed = super().parse_request()
        self.server.mark_waiting(self.connection, waiting=False)  # its head is read: answering
        return parsed

    def do_GET(self) -> None:
        self._answer(head=False)

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def _refuse_method(self) -> None:
        self.close_connection = True  # the request's body is never read
        error = ApiError(HTTPStatus.METHOD_NOT_ALLOWED, "the dashboard is read-only: use GET")
        self._send_error(error, extra={"Allow": "GET, HEAD"})

    do_POST = do_PUT = do_DELETE = do_PATCH = _refuse_method

    def _answer(self, *, head: bool) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        try:
            self._check_host()
            if not url.path.startswith("/static/"):
                self._check_token(query)
            body, kind, extra = self._route(url.path, query)
        except ApiError as err:
            self._send_error(err, head=head)
            return
        except Exception as err:  # a bug: answer it, and keep serving the other requests
            message = f"the dashboard failed on {url.path}: {err!r}; please report it"
            self._send_error(ApiError(HTTPStatus.INTERNAL_SERVER_ERROR, message), head=head)
            return
        self._send(HTTPStatus.OK, body, kind, extra, head=head)

    def _check_host(self) -> None:
        """On loopback, refuse a Host header that names another site (DNS rebinding)."""
        if not self.server.loopback:
            return
        host = self.headers.get("Host", "")
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        # A name that DNS answers could lead here from another site; an address cannot
        if name not in _LOOPBACK_NAMES and not _is_loopback_address(name):
            bound, port = self.server.server_address[:2]
            listening = bound.decode() if isinstance(bound, bytes) else str(bound)
            shown = f"[{listening}]" if ":" in listening else listening
            msg = f"Host {host!r} is not this machine; open http://{shown}:{port} instead"
            raise ApiError(HTTPStatus.FORBIDDEN, msg)

    def _check_token(self, query: Mapping[str, str]) -> None:
        token = self.server.token
        if token is None:
            return
        given = query.get("token") or self.headers.get("X-Runlines-Token") or ""
        if not hmac.compare_digest(given.encode(), token.encode()):
            msg = "missing or wrong token; open the URL with ?token= that `runlines serve` printed"
            raise ApiError(HTTPStatus.UNAUTHORIZED, msg)

    def _route(
        self, path: str, query: Mapping[str, str]
    ) -> tuple[bytes | Path, str, dict[str, str]]:
        if path in ("/", "/index.html"):
            return _static("index.html"), "text/html; charset=utf-8", {}
        if path.startswith("/static/"):
            name = path.removeprefix("/static/")
            if name not in _STATIC_FILES:  # a fixed list: no path ever reaches the disk
                raise ApiError(HTTPStatus.NOT_FOUND, f"no such file: {path}")
            kind = mimetypes.guess_type(name)[0] or "text/plain"
            if kind.startswith("text/") or kind.endswith("javascript"):
                kind += "; charset=utf-8"
            return _static(name), kind, {"Cache-Control": "no-cache"}
        if path == "/api/artifact":
            return self._artifact(query)
        if path == "/api/table":
            return self._table(query)
        if path == "/api/diff":
            return self._diff(query)
        if path == "/api/groups":
            return self._groups(query)
        if path == "/api/study":
            return self._study(query)
        api = _API.get(path)
        if api is None:
            raise ApiError(HTTPStatus.NOT_FOUND, f"no such page: {path}; see docs/dashboard.md")
        store = self.server.store
        with store.serving():
            # what a poll brings is small; a long history is read by the catch-up thread
            # the run table (and its units) look for new logs each time; the reader thread once
            # a second
            run = query.get("run")
            store.refresh(
                run,
                force=path
                in ("/api/runs", "/api/units", "/api/run"),  # a run page: its new rank files
                max_bytes=REQUEST_READ_BYTES,
                skip_behind=True,
            )
            value = api(store, query, self.server.clock())
        return dumps(value), "application/json", {"Cache-Control": "no-store"}

    def _artifact(self, query: Mapping[str, str]) -> tuple[Path, str, dict[str, str]]:
        """Answer an artifact file the run registered: sent in blocks, never read whole."""
        target, wanted = self._registered_file(query)
        kind = _IMAGE_TYPES.get(target.suffix.lower())
        headers = {"Cache-Control": "no-cache"}
        if kind is None:
            kind = "application/octet-stream"
            headers["Content-Disposition"] = f'attachment; filename="{Path(wanted).name}"'
        return target, kind, headers

    def _table(self, query: Mapping[str, str]) -> tuple[bytes, str, dict[str, str]]:
        """Answer a page of a table record's Parquet file: ?offset= (0) and ?limit= (50, at
        most TABLE_PAGE_ROWS) rows, read from the row groups that hold them only."""
        target, wanted = self._registered_file(query, event="table")
        offset, limit = _count(query, "offset", 0), _count(query, "limit", 50)
        page = _table_page(target, offset, min(max(limit, 1), TABLE_PAGE_ROWS))
        return dumps(jsonable({"path": wanted, **page})), "application/json", {}

    def _registered_file(
        self, query: Mapping[str, str], event: str | None = None
    ) -> tuple[Path, str]:
        """The file ?path= names, when a record of the run (of *event*, if given) points to it."""
        store = self.server.store
        with store.serving():
            store.refresh(query.get("run"), max_bytes=REQUEST_READ_BYTES, skip_behind=True)
            run = _run(store, query)
            wanted = _param(query, "path")
            if "\x00" in wanted:
                msg = f"?path= holds a NUL byte, which no file name has: {wanted!r}"
                raise ApiError(HTTPStatus.BAD_REQUEST, msg)
            records = (*run.artifacts, *run.media) if event is None else run.media
            known = {
                a.get("path")
                for a in records
                if isinstance(a.get("path"), str) and event in (None, a.get("event"))
            }
        if wanted not in known:  # only files the run's own artifact and media records name
            what = "artifact" if event is None else f"{event} record's file"
            msg = f"run {run.label!r} has no {what} {wanted!r}; see /api/media?run=..."
            raise ApiError(HTTPStatus.NOT_FOUND, msg)
        target = run.path.parent / wanted
        if not store.allowed(target) or not target.is_file():
            msg = f"artifact {wanted!r} is not a file inside the served folders"
            raise ApiError(HTTPStatus.FORBIDDEN, msg)
        return target, wanted

    def _diff(self, query: Mapping[str, str]) -> tuple[bytes, str, dict[str, str]]:
        """Answer `runlines.diff` of two runs, read outside the store's lock.

        The diff reads both logs whole: it is asked for on demand, never polled.
        """
        store = self.server.store
        with store.serving():
            for label in filter(None, (query.get("a"), query.get("b"))):
                store.refresh(label, max_bytes=REQUEST_READ_BYTES, skip_behind=True)
            a, b = _run(store, query, "a"), _run(store, query, "b")
        rtol, atol = _float(query, "rtol", DIFF_RTOL), _float(query, "atol", DIFF_ATOL)
        try:
            found = reading.diff(a.path, b.path, rtol=rtol, atol=atol)
        except ReadError as err:
            gone = [run.label for run in (a, b) if not run.path.is_file()]
            if not gone:
                raise ApiError(HTTPStatus.INTERNAL_SERVER_ERROR, str(err)) from err
            msg = f"run {gone[0]!r} was deleted; GET /api/runs lists the runs"
            raise ApiError(HTTPStatus.NOT_FOUND, msg) from err
        except ValueError as err:  # a tolerance diff refuses (negative, NaN)
            raise ApiError(HTTPStatus.BAD_REQUEST, f"{err}; see ?rtol= and ?atol=") from err
        except ImportError as err:
            raise ApiError(HTTPStatus.INTERNAL_SERVER_ERROR, str(err)) from err
        return dumps(found.to_dict()), "application/json", {"Cache-Control": "no-store"}

    def _groups(self, query: Mapping[str, str]) -> tuple[bytes, str, dict[str, str]]:
        """Answer groups of runs (docs/dashboard.md), read whole outside the store's lock.

        ?field= is the metric, ?event= its event, ?x= the x field (step), ?group_by= config
        keys, comma-separated, or auto; ?runs= the run labels (all), ?with_runs=1 each run's line.
        """
        store = self.server.store
        metric = _param(query, "field")
        keys = [k for k in query.get("group_by", "").split(",") if k]
        group_by: str | list[str] = "auto" if keys == ["auto"] else keys
        with store.serving():
            store.refresh(None, max_bytes=REQUEST_READ_BYTES, skip_behind=True)
            wanted = [r for r in query.get("runs", "").split(",") if r] or list(store.runs)
            paths = {label: _run(store, {"run": label}).path for label in wanted}
        from runlines.dashboard._groups import grouped  # numpy and pandas: for this answer only

        try:
            found = grouped(
                paths,
                metric=metric,
                event=query.get("event") or None,
                x=query.get("x") or "step",
                group_by=group_by,
                with_runs=query.get("with_runs") == "1",
            )
        except (ValueError, KeyError) as err:  # an unknown x field or config key
            raise ApiError(HTTPStatus.BAD_REQUEST, f"{err}; see docs/dashboard.md") from err
        return dumps(jsonable(found)), "application/json", {"Cache-Control": "no-store"}

    def _study(self, query: Mapping[str, str]) -> tuple[bytes, str, dict[str, str]]:
        """Answer the study page (docs/dashboard.md): each run's config against ?metric= (its
        ?stat=last or best), read whole outside the store's lock; ?runs= the run labels (all).
        """
        store = self.server.store
        with store.serving():
            store.refresh(None, force=True, max_bytes=REQUEST_READ_BYTES, skip_behind=True)
            wanted = [r for r in query.get("runs", "").split(",") if r] or list(store.runs)
            paths = {label: _run(store, {"run": label}).path for label in wanted}
        try:
            metric, stat = query.get("metric") or None, query.get("stat") or "last"
            found = study(paths, metric=metric, stat=stat)
        except ValueError as err:  # an unknown metric or stat
            raise ApiError(HTTPStatus.BAD_REQUEST, f"{err}; see docs/dashboard.md") from err
        return dumps(jsonable(found)), "application/json", {"Cache-Control": "no-store"}

    def _send(
        self,
        status: HTTPStatus,
        body: bytes | Path,
        kind: str,
        extra: Mapping[str, str],
        *,
        head: bool = False,
    ) -> None:
        if isinstance(body, Path):
            self._send_file(body, kind, extra, head=head)
            return
        self._send_head(status, kind, len(body), extra)
        if head:
            return
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the page went away mid-answer
            self.close_connection = True

    def _send_head(
        self, status: HTTPStatus, kind: str, length: int, extra: Mapping[str, str]
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(length))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Content-Security-Policy", _CSP)
        for name, value in extra.items():
            self.send_header(name, value)
        self.end_headers()

    def _send_file(self, path: Path, kind: str, extra: Mapping[str, str], *, head: bool) -> None:
        """Send *path* in blocks of `SEND_BLOCK_BYTES`; HEAD only stats it."""
        try:
            if head:
                self._send_head(HTTPStatus.OK, kind, path.stat().st_size, extra)
                return
            stream = open(path, "rb")  # noqa: SIM115 (closed by the with below: only open is tried)
        except OSError as err:  # gone since it was checked
            message = f"artifact {path.name!r} cannot be read ({err.strerror}); it may be gone"
            self._send_error(ApiError(HTTPStatus.NOT_FOUND, message), head=head)
            return
        with stream:
            length = os.fstat(stream.fileno()).st_size  # what this answer promises: no more
            self._send_head(HTTPStatus.OK, kind, length, extra)
            try:
                while length > 0 and (block := stream.read(min(length, SEND_BLOCK_BYTES))):
                    self.wfile.write(block)
                    length -= len(block)
            except (BrokenPipeError, ConnectionResetError):  # the page went away mid-answer
                self.close_connection = True
            if length > 0:  # the file shrank: the answer is short, the connection ends
                self.close_connection = True

    def _send_error(
        self, err: ApiError, *, head: bool = False, extra: Mapping[str, str] | None = None
    ) -> None:
        body = dumps({"error": str(err), "status": int(err.status)})
        headers = {"Cache-Control": "no-store", **(extra or {})}
        self._send(err.status, body, "application/json", headers, head=head)


def _is_loopback_address(name: str) -> bool:
    """Return whether *name* is an address of this machine (127.0.0.0/8, ::1), not a name."""
    try:
        return ipaddress.ip_address(name.removeprefix("[").removesuffix("]")).is_loopback
    except ValueError:
        return False


def _param(query: Mapping[str, str], name: str) -> str:
    value = query.get(name)
    if not value:
        raise ApiError(HTTPStatus.BAD_REQUEST, f"missing ?{name}=; see docs/dashboard.md")
    return value


def _run(store: RunStore, query: Mapping[str, str], name: str = "run") -> RunState:
    label = _param(query, name)
    run = store.runs.get(label)
    if run is None:
        msg = f"no run {label!r}; GET /api/runs lists the runs by their 'run' key"
        raise ApiError(HTTPStatus.NOT_FOUND, msg)
    return run


_N = TypeVar("_N", int, float)


def _float(query: Mapping[str, str], name: str, default: float) -> float:
    return _number(query, name, default, float, "a number")


def _int(query: Mapping[str, str], name: str, default: int) -> int:
    return _number(query, name, default, int, "a whole number")


def _number(query: Mapping[str, str], name: str, default: _N, kind: type[_N], what: str) -> _N:
    """Return ?name= as *kind*, or *default* when it is absent; 400 when it is not *what*."""
    try:
        return kind(query.get(name, default))
    except ValueError:
        msg = f"?{name}= must be {what}, got {query[name]!r}"
        raise ApiError(HTTPStatus.BAD_REQUEST, msg) from None


def _runs(store: RunStore, query: Mapping[str, str], now: float) -> Any:
    return [jsonable(run.row(now)) for run in store.runs.values()]


def _units(store: RunStore, query: Mapping[str, str], now: float) -> Any:
    """The unit ("bytes", "s", "%") of each run table column that has one."""
    units: dict[str, str] = {}
    for run in store.runs.values():
        for key in run.row(now):
            if key not in units and not key.startswith("config."):
                unit = unit_of(key, _VOCABULARY)
                if unit is not None:
                    units[key] = unit
    return units


def _progress(store: RunStore, query: Mapping[str, str], now: float) -> Any:
    runs = {label: run.progress() for label, run in store.runs.items()}
    behind = sum(p["bytes_behind"] for p in runs.values())
    return {"bytes_behind": behind, "runs": runs}


def _series(store: RunStore, query: Mapping[str, str], now: float) -> Any:
    run = _run(store, query)
    rank = _int(query, "rank", 0)
    if rank not in run.files:
        msg = f"run {run.label!r} has no rank {rank}; it has {sorted(run.files)}"
        raise ApiError(HTTPStatus.NOT_FOUND, msg)
    since = query.get("since")
    answer: dict[str, Any] = {"run": run.label, "rank": rank, "version": run.version}
    answer["started"] = run.started_ts
    if since is not None and since == str(run.version):
        return {**answer, "unchanged": True}
    log = run.files[rank]
    answer["series"] = [
        {"event": event, "field": name, "unit": _series_unit(event, name), **series.points()}
        for (event, name), series in sorted(log.series.items())
    ]
    answer["events"] = list(dict.fromkeys(event for event, _ in log.series))  # as first logged
    return answer


def _series_unit(event: str, name: str) -> str | None:
    """Return the unit of a series: a span's are durations, in seconds."""
    return "s" if event == SPAN_EVENT else unit_of(name, _VOCABULARY)


def _detail(store: RunStore, query: Mapping[str, str], now: float) -> Any:
    run = _run(store, query)
    main = run.files[0]
    row = run.row(now)
    return jsonable(
        {
            "run": run.label,
            "path": str(run.path),
            "row": row,
            "progress": run.progress(),
            "config": run.config,
            "environment": run.environment,
            "attempts": _attempts(run, row["status"]),
            "spans": {
                name: {"count": c, "total_s": t, "mean_s": t / c if c else None, "max_s": m}
                for name, (c, t, m) in sorted(main.spans.items())
            },
            "artifacts": [_artifact_entry(run, a) for a in run.artifacts],
            "signals": run.signals,
            "ranks": [
                {
                    "rank": rank,
                    "path": str(log.tail.path),
                    "records": log.tail.records,
                    "torn_lines": log.tail.torn_lines,
                    "step": log.last_step,
                    "last": log.last,
                }
                for rank, log in sorted(run.files.items())
            ],
        }
    )


def _attempts(run: RunState, status: str) -> list[dict[str, Any]]:
    """Each attempt's own status and duration; the last one's status is the run's *status*.

    An attempt with no run_end died, whatever came after it; the last one, while its run
    holds the lock, is running or stalled. Its duration is from its first record to its
    last, as the run's `duration_s` (their sum: the gaps between attempts never count). An
    attempt that passed no config keeps the run's; one that did says what it changed.
    """
    keys = ("exc_type", "exc_message", "traceback", "exit_code", "signal", "dropped")
    answer = []
    for place, attempt in enumerate(run.attempts):
        start, end = attempt["start"], attempt["end"]
        given = start.get("config")
        first, last = attempt["first_ts"], attempt["last_ts"]
        if end is not None:
            own = end.get("status")
            shown = own if isinstance(own, str) and own else "ok"
        else:
            shown = status if place == len(run.attempts) - 1 else "died"
        answer.append(
            {
                "attempt": attempt["attempt"],
                "started": start.get("ts"),
                "resume_step": start.get("resume_step"),
                "ended": None if end is None else end.get("ts"),
                "status": shown,
                "duration_s": None if first is None else max(0.0, last - first),
                # what this attempt's config changed ({key: [before, after]}); false: it
                # passed none, and the run's config is kept
                "config_given": isinstance(given, Mapping) and bool(given),
                "config_changes": attempt.get("config_changes") or {},
                **{key: (end or {}).get(key) for key in keys},
            }
        )
    return answer


def _media(store: RunStore, query: Mapping[str, str], now: float) -> Any:
    """Answer a run's media records (docs/media.md), filtered by ?kind= and ?name=; each file's
    bytes come from /api/artifact?run=...&path=<its path>.

    A page that follows the run asks ?since=N&epoch=E (N: the records it has, E: the answer's
    `epoch`): the answer holds the records from the N-th on (`from`: N), or all of them
    (`from`: 0) when the log started over since.
    """
    run = _run(store, query)
    kind, name = query.get("kind"), query.get("name")
    records = run.media
    start = _count(query, "since", 0) if query.get("epoch") == str(run.restarts) else 0
    start = start if start <= len(records) else 0
    found = [
        {k: v for k, v in record.items() if k not in ("run",)}
        for record in records[start:]
        if (kind is None or record.get("event") == kind)
        and (name is None or record.get("name") == name)
    ]
    answer = {"run": run.label, "media": found, "from": start, "total": len(records)}
    return jsonable({**answer, "epoch": run.restarts})


def _console(store: RunStore, query: Mapping[str, str], now: float) -> Any:
    """Answer a run's captured console: its last lines, or a search (dashboard/_console.py)."""
    run = _run(store, query)
    rank = _int(query, "rank", 0)
    if rank not in run.files:
        msg = f"run {run.label!r} has no rank {rank}; it has {sorted(run.files)}"
        raise ApiError(HTTPStatus.NOT_FOUND, msg)
    try:
        return jsonable(console_answer(run.label, rank, run.files[rank].tail.path, query))
    except ConsoleRequestError as err:
        raise ApiError(err.status, str(err)) from None


def _count(query: Mapping[str, str], key: str, default: int) -> int:
    text = query.get(key)
    if text is None:
        return default
    if not text.isdigit():
        msg = f"?{key}= must be a whole number of rows, 0 or more; got {text!r}"
        raise ApiError(HTTPStatus.BAD_REQUEST, msg)
    return int(text)


def _table_page(path: Path, offset: int, limit: int) -> dict[str, Any]:
    """Rows [offset, offset + limit) of a Parquet file, streamed in batches (buffered reads)
    from the first row group holding them, and no further than the page's last row."""
    try:
        import pyarrow.parquet as pq
    except ImportError as err:
        msg = f"reading a table needs pyarrow: pip install 'runlines[media]' ({err})"
        raise ApiError(HTTPStatus.NOT_IMPLEMENTED, msg) from None
    try:
        with pq.ParquetFile(path, buffer_size=1 << 16) as parquet:
            meta = parquet.metadata
            groups, start, first = [], 0, None
            for i in range(meta.num_row_groups):
                rows = meta.row_group(i).num_rows
                if start + rows > offset and start < offset + limit:
                    groups.append(i)
                    first = start if first is None else first
                start += rows
            columns = parquet.schema_arrow.names
            if not groups:
                return {"columns": columns, "total": meta.num_rows, "offset": offset, "rows": []}
            skip, rows = offset - (first or 0), []
            for batch in parquet.iter_batches(batch_size=min(limit, 1024), row_groups=groups):
                if skip >= batch.num_rows:
                    skip -= batch.num_rows
                    continue
                part = batch.slice(skip, limit - len(rows))
                skip = 0
                rows.extend(list(r.values()) for r in part.to_pylist())
                if len(rows) >= limit:
                    break
    except (OSError, ValueError) as err:  # pyarrow's errors are OSError and ValueError kin
        msg = f"table {path.name!r} cannot be read as Parquet ({err}); it may be damaged"
        raise ApiError(HTTPStatus.UNPROCESSABLE_ENTITY, msg) from None
    return {"columns": columns, "total": meta.num_rows, "offset": offset, "rows": rows}


def _artifact_entry(run: RunState, record: Mapping[str, Any]) -> dict[str, Any]:
    path = record.get("path")
    entry = {k: v for k, v in record.items() if k not in ("run", "event")}
    if isinstance(path, str):
        entry["image"] = Path(path).suffix.lower() in _IMAGE_TYPES
    return entry


_API: Final[dict[str, Callable[[RunStore, Mapping[str, str], float], Any]]] = {
    "/api/runs": _runs,
    "/api/progress": _progress,
    "/api/units": _units,
    "/api/series": _series,
    "/api/run": _detail,
    "/api/media": _media,
    "/api/console": _console,
}
