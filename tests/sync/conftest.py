"""Fixtures of the sync tests: an S3 server on 127.0.0.1 (moto's), and its bucket's URL."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from _optional import skip_without


@pytest.fixture(autouse=True)
def _no_git(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs opened here probe no git repository: a dirty checkout's diff is an artifact."""
    monkeypatch.setattr("runlines._context.git_state", lambda cwd: {})


@pytest.fixture(name="s3", scope="module")
def _s3() -> Iterator[str]:
    """Start moto's S3 server for the module's tests; yield its endpoint URL."""
    skip_without("moto")
    skip_without("s3fs")
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture(name="bucket")
def _bucket(s3: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, str]:
    """Return (an s3fs filesystem, a new empty bucket's name) on the test's S3 server.

    The endpoint and fake credentials are in the environment, for this process and the
    `runlines sync` processes a test starts.
    """
    import s3fs

    for key, value in {
        "AWS_ENDPOINT_URL": s3,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    s3fs.S3FileSystem.clear_instance_cache()  # one made for another test's endpoint
    fs = s3fs.S3FileSystem()
    name = f"runs-{uuid.uuid4().hex[:12]}"
    fs.mkdir(name)
    return fs, name
