"""The dashboard's run table shows each run's tags and notes, and filters by tag.

The API rows are runs()'s; the page is driven in headless Chromium where Playwright is there.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _serve_helpers import Client

import runlines
from _logs import train
from runlines import Run
from runlines.dashboard import Server

WAIT_MS = 15_000


def _tagged_runs(folder: Path) -> None:
    for name in ("a", "b", "c"):
        train(folder, name, range(1, 5))
    runlines.tag(folder / "a.jsonl", "baseline", "keep")
    runlines.tag(folder / "b.jsonl", "baseline")
    runlines.note(folder / "b.jsonl", "first look")
    runlines.note(folder / "b.jsonl", "lr too high")
    run = Run("d", folder, stdout=False)
    run.log("train_step", step=1, loss=2.0)
    run.close(status="pruned")


def test_api_runs_rows_hold_the_tags_and_notes_and_no_notes_file_is_a_run(
    serve_dir: Path, server: Server, client: Client
) -> None:
    _tagged_runs(serve_dir)

    rows = {row["run"]: row for row in client.json("/api/runs")}

    assert sorted(rows) == ["a", "b", "c", "d"]
    assert rows["a"]["tags"] == ["baseline", "keep"]
    assert rows["b"]["notes"] == ["first look", "lr too high"]
    assert rows["c"]["tags"] == []
    assert rows["d"]["status"] == "pruned"


def test_a_tag_added_while_the_server_runs_is_in_the_next_rows(
    serve_dir: Path, server: Server, client: Client
) -> None:
    train(serve_dir, "a", range(1, 5))
    assert client.json("/api/runs")[0]["tags"] == []

    runlines.tag(serve_dir / "a.jsonl", "late")

    assert client.json("/api/runs")[0]["tags"] == ["late"]


@pytest.fixture(name="page")
def _page() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(chromium).exists():
        pytest.skip("needs Debian's chromium: apt-get install chromium")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(WAIT_MS)
        errors: list[str] = []
        page.on("pageerror", lambda err: errors.append(str(err)))
        yield page
        browser.close()
        assert errors == []


def test_the_table_shows_tags_and_notes_and_a_tag_filters_the_runs(
    serve_dir: Path, server: Server, page: Any
) -> None:
    from playwright.sync_api import expect

    _tagged_runs(serve_dir)
    page.goto(server.url)
    rows = page.locator("#runs tbody tr")
    expect(rows).to_have_count(4)

    expect(page.locator('#runs tr[data-run="a"] button.tag')).to_have_text(["baseline", "keep"])
    notes = page.locator('#runs tr[data-run="b"] td.notes')
    expect(notes).to_contain_text("lr too high")
    expect(notes).to_have_attribute("title", "first look\n\nlr too high")
    expect(page.locator('#runs tr[data-run="d"] .badge')).to_have_text("pruned")

    page.locator('#runs tr[data-run="a"] button.tag', has_text="keep").click()
    expect(page.locator("#filter")).to_have_value("tag:keep")
    expect(rows).to_have_count(1)
    page.fill("#filter", "tag:baseline")
    expect(rows).to_have_count(2)
    shown = rows.evaluate_all("rows => rows.map((row) => row.dataset.run)")
    assert sorted(shown) == ["a", "b"]
