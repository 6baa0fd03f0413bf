"""The runs page's media panel in headless Chromium: the selected runs side by side at one step,
lazy thumbnails, and new records while a run logs. Every wait is bounded on what the page shows.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _serve_helpers import CHROMIUM

from runlines import Run
from runlines.dashboard import Server

sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
if not Path(CHROMIUM).exists():
    pytest.skip("needs Debian's chromium: apt-get install chromium", allow_module_level=True)

expect = sync_api.expect
QUIET: dict[str, Any] = {"stdout": False, "system": False, "capture": False}
MEDIA = "#runs-media"


def _card(page: Any, kind: str, name: str) -> Any:
    return page.locator(f'{MEDIA} .media-card[data-kind="{kind}"][data-name="{name}"]')


def test_the_selected_runs_media_are_side_by_side_at_one_step(
    serve_dir: Path, server: Server, page: Any, errors: list[str]
) -> None:
    for label, steps in (("a", (10, 20, 30)), ("b", (10, 30))):
        with Run(label, serve_dir, **QUIET) as run:
            for step in steps:
                run.log("train_step", step=step, loss=1.0 / step)
                run.image("samples", np.full((4, 4, 3), step, dtype=np.uint8), step=step)
                run.text("answer", f"{label} at {step}", step=step)
    page.goto(server.url)
    card = _card(page, "image", "samples")
    expect(card.locator(".media-run")).to_have_count(2)  # a column per selected run
    expect(_card(page, "text", "answer").locator(".media-run")).to_have_count(2)

    page.locator("#runs-media-step").fill("1")  # step 20: a has it, b does not

    expect(page.locator("#runs-media-step-value")).to_have_text("20")
    expect(card.locator('.media-run[data-run="a"] .media-step')).to_have_text("step 20")
    expect(card.locator('.media-run[data-run="b"] .media-step')).to_have_text(
        "step 10 (nearest to 20)"
    )
    expect(card.locator('.media-run[data-run="b"] img')).to_have_attribute(
        "src", re.compile(r"%2F10-[0-9a-f]+\.png$")
    )
    expect(_card(page, "text", "answer").locator('.media-run[data-run="b"] pre')).to_have_text(
        "b at 10"
    )
    page.locator('tr[data-run="b"] input[type=checkbox]').uncheck()  # one run: one column
    expect(card.locator(".media-run")).to_have_count(1)
    assert errors == []


def _many_images(folder: Path, frames: int, grid: int) -> None:
    """A finished run 'big' with one image at each of *frames* steps and *grid* images at its
    last step, 256x256 each: one real PNG that every record's file links to (10,000 images
    written one by one take minutes of fsyncs)."""
    build = folder.parent / "build"  # the log is written whole, then moved into the served folder
    with Run("big", build, **QUIET) as run:
        run.image("one", np.zeros((256, 256, 3), dtype=np.uint8), step=0)
    lines = run.path.read_text().splitlines()
    start, image, end = json.loads(lines[0]), json.loads(lines[1]), json.loads(lines[-1])
    source = build / image["path"]
    out = [json.dumps(start)]
    for name, count in (("frames", frames), ("grid", grid)):
        (folder / "big.artifacts" / "media" / name).mkdir(parents=True)
        for k in range(count):
            step = k if name == "frames" else frames - 1
            path = f"big.artifacts/media/{name}/{step}-{k:08x}.png"
            os.link(source, folder / path)
            out.append(json.dumps({**image, "name": name, "step": step, "path": path}))
    out.append(json.dumps(end))
    (build / "big.jsonl").write_text("\n".join(out) + "\n")
    os.replace(build / "big.jsonl", folder / "big.jsonl")


def test_a_run_with_10000_images_loads_only_a_bounded_number_of_them(
    serve_dir: Path, server: Server, page: Any, errors: list[str]
) -> None:
    _many_images(serve_dir, frames=10_000, grid=1_000)
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url) if "/api/artifact" in r.url else None)

    page.goto(server.url)
    frames = _card(page, "image", "frames")
    expect(frames).to_have_attribute("data-step", "9999")
    expect(page.locator("#runs-media-step")).to_have_attribute("max", "9999")
    grid = _card(page, "image", "grid")
    expect(grid.locator("img")).to_have_count(1_000)
    grid.scroll_into_view_if_needed()
    first = grid.locator("img").first
    page.wait_for_function("i => i.complete && i.naturalWidth === 256", arg=first.element_handle())
    page.evaluate("() => new Promise((done) => requestAnimationFrame(() => setTimeout(done, 0)))")

    # the frame, and the grid's images near the screen (Chromium's lazy margin: 1250-2500 px)
    assert 2 <= len(requested) <= 150, len(requested)
    assert all(img == "lazy" for img in grid.locator("img").evaluate_all(
        "imgs => imgs.map((i) => i.loading)"))  # fmt: skip
    assert errors == []


def test_media_logged_while_the_page_is_open_appear_without_a_reload(
    serve_dir: Path, server: Server, page: Any, errors: list[str]
) -> None:
    pixels = np.zeros((4, 4, 3), dtype=np.uint8)
    with Run("live", serve_dir, **QUIET) as run:
        for step in (1, 2):
            run.image("samples", pixels, step=step)
        page.goto(server.url)
        card = _card(page, "image", "samples")
        slider = page.locator("#runs-media-step")
        expect(card).to_have_attribute("data-step", "2")

        run.image("samples", pixels, step=3)  # the slider at the last step follows it

        expect(slider).to_have_attribute("max", "2")
        expect(card).to_have_attribute("data-step", "3")
        expect(page.locator("#runs-media-step-value")).to_have_text("3")
        slider.fill("0")  # a slider moved back stays where it is
        expect(card).to_have_attribute("data-step", "1")
        run.image("samples", pixels, step=4)
        run.histogram("weights", [1.0, 2.0], step=4)

        expect(_card(page, "histogram", "weights")).to_have_count(1)
        expect(page.locator("#runs-media-step")).to_have_attribute("max", "3")
        expect(card).to_have_attribute("data-step", "1")
        expect(page.locator("#runs-media-step-value")).to_have_text("1")
    assert errors == []


def test_a_runs_own_page_follows_its_media_too(
    serve_dir: Path, server: Server, page: Any, errors: list[str]
) -> None:
    with Run("live", serve_dir, **QUIET) as run:
        run.text("answer", "first", step=1)
        page.goto(server.url + "#/run/live")
        card = page.locator('#view-run .media-card[data-kind="text"][data-name="answer"]')
        expect(card.locator("pre")).to_have_text("first")

        run.text("answer", "second", step=2)

        expect(card.locator("pre")).to_have_text("second")
        expect(page.locator("#media-step")).to_have_attribute("max", "1")
    assert errors == []


def test_the_media_panel_is_hidden_while_the_selected_runs_have_none(
    serve_dir: Path, server: Server, page: Any, errors: list[str]
) -> None:
    with Run("plain", serve_dir, **QUIET) as run:
        run.log("train_step", step=1, loss=0.5)
        page.goto(server.url)
        expect(page.locator('tr[data-run="plain"].selected')).to_have_count(1)
        panel = page.locator(".runs-media-panel")
        expect(page.locator("#charts .chart").first).to_be_visible()  # the page has polled
        expect(panel).to_be_hidden()

        run.image("samples", np.zeros((4, 4, 3), dtype=np.uint8), step=1)

        expect(panel).to_be_visible()
        expect(_card(page, "image", "samples")).to_have_attribute("data-step", "1")
    assert errors == []
