"""Helpers for the dashboard's tests: a PNG to register, and a client for the JSON API."""

from __future__ import annotations

import http.client
import json
import struct
import zlib
from typing import Any
from urllib.parse import urlsplit

from runlines.serve import Server


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
