"""Fixtures for the dashboard's tests: a server on a free port over a folder, and its client."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _serve_helpers import Client

from runlines.dashboard import Server


@pytest.fixture(name="serve_dir")
def _serve_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "runs"
    folder.mkdir()
    return folder


@pytest.fixture(name="server")
def _server(serve_dir: Path) -> Iterator[Server]:
    with Server(serve_dir, port=0) as server:
        yield server


@pytest.fixture(name="client")
def _client(server: Server) -> Client:
    return Client(server)
