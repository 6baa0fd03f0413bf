"""Helpers for the dashboard's tests: a PNG to register, a client for the JSON API, and the
awkward logs every view must agree on.
"""

from __future__ import annotations

import http.client
import json
import shutil
import struct
import zlib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from _logs import T0, line, train, write
from runlines import Run
from runlines.dashboard import Server

NOW = T0 + 30  # the clock every reader of the awkward logs is read at
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"  # Debian's package
WAIT_MS = 15_000  # the longest a browser test waits for what a page shows


def png_bytes() -> bytes:
    """Return a valid 2x2 red PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    pixels = b"".join(b"\x00" + b"\xff\x00\x00" * 2 for _ in range(2))
    header = struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(pixels))
        + chunk(b"IEND", b"")
    )


class Client:
    """Plain HTTP requests to a running `Server`."""

    def __init__(self, server: Server) -> None:
        url = urlsplit(server.url)
        self.host = url.hostname or "127.0.0.1"
        self.port = url.port or 80

    def request(
        self, path: str, *, method: str = "GET", headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            connection.request(method, path, headers=headers or {})
            answer = connection.getresponse()
            return answer.status, dict(answer.getheaders()), answer.read()
        finally:
            connection.close()

    def json(self, path: str, **options: Any) -> Any:
        status, _, body = self.request(path, **options)
        assert status == 200, body
        return json.loads(body)


def awkward_logs(root: Path) -> list[Path]:
    """Write the logs; return the sources: two folders sharing a run name, and one of the rest."""
    train(root / "exp1", "baseline", range(1, 4), evals=True)
    train(root / "exp2", "baseline", range(1, 7), evals=True)
    flat = root / "flat"
    train(flat, "rerun", range(1, 11), evals=True, config={"optim": {"lr": 0.1}})
    train(flat, "rerun", range(6, 9), resume_step=5, evals=True)  # a second, shorter attempt
    with Run("nan", flat, stdout=False, on_nonfinite="ignore") as run:
        run.log("train_step", step=1, loss=0.5)
        run.log("train_step", step=2, loss=float("nan"))
    write(  # killed (no run_end), then resumed to its end
        flat / "killed.jsonl",
        line("run_start", "killed", T0, attempt=1),
        line("train_step", "killed", T0 + 1, step=1, loss=0.9),
        line("run_start", "killed", T0 + 10, attempt=2, resume_step=1),
        line("train_step", "killed", T0 + 11, step=2, loss=0.8),
        line("run_end", "killed", T0 + 12, status="ok"),
    )
    write(
        flat / "torn.jsonl",
        line("run_start", "torn", T0, attempt=1),
        line("train_step", "torn", T0 + 1, step=1, loss=0.9),
        b'{"ts": 1767225602.0, "event": "train_st',
    )
    for name, last in (("live", NOW - 5), ("stuck", NOW - 200)):
        write(
            flat / f"{name}.jsonl",
            line("run_start", name, last - 2, attempt=1, config={"seed": 1}),
            *(line("train_step", name, last - 1 + i, step=i, loss=1.0 / i) for i in (1, 2)),
        )
    return [root / "exp1", root / "exp2", flat]
