"""Fixtures for the dashboard's tests: a server on a free port over a folder, its client, and
headless Chromium (Debian's package, driven by Playwright) for the browser tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas  # noqa: F401 (imported after Playwright started, it crashes the process)
import pytest
from _serve_helpers import CHROMIUM, WAIT_MS, Client

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


@pytest.fixture(name="browser", scope="module")
def _browser() -> Iterator[Any]:
    """One headless Chromium per test module."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    if not Path(CHROMIUM).exists():
        pytest.skip("needs Debian's chromium: apt-get install chromium")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        yield browser
        browser.close()


@pytest.fixture(name="errors")
def _errors() -> list[str]:
    """The console errors and uncaught exceptions of the test's `page`."""
    return []


@pytest.fixture(name="page")
def _page(browser: Any, errors: list[str]) -> Iterator[Any]:
    """A fresh page of 1400 x 1000 whose console errors go to `errors`."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda err: errors.append(str(err)))
    yield page
    context.close()
