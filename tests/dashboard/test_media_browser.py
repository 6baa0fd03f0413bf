"""The run page's media panels in headless Chromium (Debian's package), driven by Playwright.

Every wait is a bounded wait on a condition the page shows; none sleeps for time.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas  # noqa: F401 (for media(): imported after Playwright started, it crashes the process)
import pytest
from _serve_helpers import CHROMIUM, WAIT_MS

import runlines
from runlines import Run
from runlines.dashboard import Server

sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
pytest.importorskip("PIL", reason="pip install runlines[media]")
if not Path(CHROMIUM).exists():
    pytest.skip("needs Debian's chromium: apt-get install chromium", allow_module_level=True)

expect = sync_api.expect
QUIET: dict[str, Any] = {"stdout": False, "system": False, "capture": False}
STEPS = (10, 20, 30)
LONG = "a long completion " * 6_000  # past the inline limit: a side file


@pytest.fixture(name="gallery")
def _gallery(serve_dir: Path) -> Path:
    """A run with an image and a histogram at each of STEPS, text at 10 and 30 (the one at 30
    long, in a side file) and at 10 and 20, audio at 20 and a table of 45 rows at 10."""
    rng = np.random.default_rng(0)
    with Run("gallery", serve_dir, **QUIET) as run:
        for i, step in enumerate(STEPS):
            pixels = np.zeros((8, 8, 3), dtype=np.uint8)
            pixels[..., i] = 255
            run.image("samples", pixels, step=step, caption=f"colour {i}")
            run.histogram("weights", rng.normal(i, 1.0, 1000), step=step, bins=32)
        run.text("completion", "the first sample", step=10)
        run.text("completion", LONG, step=30)
        run.text("answer", "the cat sat on a mat", step=10)
        run.text("answer", "the cat sat down on the mat", step=20)
        run.audio("voice", np.zeros(800, dtype=np.float32), 8000, step=20)
        run.table("preds", [{"label": i % 2, "score": i / 100} for i in range(45)], step=10)
    return serve_dir


def _card(page: Any, kind: str, name: str) -> Any:
    return page.locator(f'.media-card[data-kind="{kind}"][data-name="{name}"]')


def _image_paths(folder: Path) -> dict[int, str]:
    frame = runlines.media(folder, kind="image")
    return {int(s): Path(p).name for s, p in zip(frame["step"], frame["path"], strict=True)}


def test_the_slider_shows_each_panels_record_at_its_step_or_nearest_labelled(
    gallery: Path, server: Server, page: Any, errors: list[str]
) -> None:
    paths = _image_paths(gallery)
    page.goto(server.url + "#/run/gallery")
    images = _card(page, "image", "samples")
    expect(images).to_have_attribute("data-step", "30")  # the last step first
    expect(images.locator("img")).to_have_attribute("src", re.compile(re.escape(paths[30])))

    page.locator("#media-step").fill("1")  # the second of the steps with media: 20

    expect(page.locator("#media-step-value")).to_have_text("20")
    expect(images.locator(".media-step")).to_have_text("step 20")
    img = images.locator("img")
    expect(img).to_have_attribute("src", re.compile(re.escape(paths[20])))
    expect(img).to_have_attribute("loading", "lazy")
    img.scroll_into_view_if_needed()
    page.wait_for_function(
        "i => i.complete && i.naturalWidth === 8", arg=img.element_handle(), timeout=WAIT_MS
    )
    # the pixel shown is the step's own colour: green at step 20
    rgb = img.evaluate(
        "i => { const c = document.createElement('canvas'); c.width = c.height = 8;"
        " const x = c.getContext('2d'); x.drawImage(i, 0, 0);"
        " return [...x.getImageData(4, 4, 1, 1).data].slice(0, 3); }"
    )
    assert rgb == [0, 255, 0]
    text = _card(page, "text", "completion")
    expect(text.locator(".media-step")).to_have_text("step 10 (nearest to 20)")
    expect(text.locator("pre")).to_have_text("the first sample")
    expect(_card(page, "audio", "voice").locator("audio")).to_have_attribute(
        "src", re.compile(r"/api/artifact\?run=gallery&path=.*\.wav$")
    )
    table = _card(page, "table", "preds")
    expect(table.locator(".media-step")).to_have_text("step 10 (nearest to 20)")
    expect(table.locator(".table-info")).to_contain_text("45 row(s) · 2 column(s): label, score")
    expect(table.locator(".pager")).to_contain_text("rows 1-20 of 45")
    expect(table.locator("tbody tr")).to_have_count(20)
    expect(table.locator("tbody tr").first.locator("td")).to_have_text(["0", "0"])

    table.locator(".pager button.next").click()
    expect(table.locator(".pager")).to_contain_text("rows 21-40 of 45")
    table.locator(".pager button.next").click()

    expect(table.locator(".pager")).to_contain_text("rows 41-45 of 45")
    expect(table.locator("tbody tr")).to_have_count(5)
    expect(table.locator("tbody tr").first.locator("td")).to_have_text(["0", "0.4"])
    expect(table.locator(".pager button.next")).to_be_disabled()
    assert errors == []


def test_the_histograms_heatmap_is_drawn_and_a_long_text_is_fetched_from_its_file(
    gallery: Path, server: Server, page: Any, errors: list[str]
) -> None:
    page.goto(server.url + "#/run/gallery")
    card = _card(page, "histogram", "weights")
    heat = card.locator("canvas.heatmap")
    expect(heat).to_have_attribute("data-drawn", "3")
    expect(card.locator(".media-step")).to_have_text("step 30")
    expect(card.locator(".media-stats")).to_contain_text("count 1000")
    # coloured cells in each of the three step columns, none in the empty corners
    columns = heat.evaluate(
        "c => { const x = c.getContext('2d'); const w = c.width / 3;"
        " return [0, 1, 2].map((k) => {"
        " const d = x.getImageData(k * w + 2, 0, w - 6, c.height).data;"
        " let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i]) n++; return n; }); }"
    )
    assert all(n > 0 for n in columns), columns
    bars = card.locator("canvas.distribution").evaluate(
        "c => { const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
        " let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i]) n++; return n; }"
    )
    assert bars > 0
    expect(_card(page, "text", "completion").locator("pre")).to_have_text(LONG)
    assert errors == []


def test_a_text_sample_diffs_to_the_previous_step_on_request(
    gallery: Path, server: Server, page: Any, errors: list[str]
) -> None:
    page.goto(server.url + "#/run/gallery")
    card = _card(page, "text", "answer")
    page.locator("#media-step").fill("1")
    expect(card.locator("pre")).to_have_text("the cat sat down on the mat")
    expect(card.locator("pre ins")).to_have_count(0)

    card.locator("input.diff-toggle").check()

    expect(card.locator(".media-step")).to_have_text("step 20 · diff to step 10")
    expect(card.locator("pre ins")).to_have_text(["down", " ", "the"])
    expect(card.locator("pre del")).to_have_text(["a"])
    page.locator("#media-step").fill("0")  # the first step has no previous one: no diff
    expect(card.locator(".media-step")).to_have_text("step 10")
    expect(card.locator("pre")).to_have_text("the cat sat on a mat")
    expect(card.locator("pre ins")).to_have_count(0)
    assert errors == []


def test_a_run_without_media_says_so(serve_dir: Path, server: Server, page: Any) -> None:
    with Run("plain", serve_dir, **QUIET) as run:
        run.log("train_step", step=1, loss=0.5)

    page.goto(server.url + "#/run/plain")

    expect(page.locator("#media .run-media")).to_have_text("no media")


def test_the_diff_page_shows_two_runs_media_side_by_side_at_one_step(
    serve_dir: Path, server: Server, page: Any, errors: list[str]
) -> None:
    for label, steps in (("a", STEPS), ("b", (10, 30))):
        with Run(label, serve_dir, **QUIET) as run:
            for step in steps:
                run.image("samples", np.full((4, 4, 3), step, dtype=np.uint8), step=step)
                run.histogram("weights", [float(step)] * 3, step=step, bins=2)
    page.goto(server.url + "#/diff/a/b")
    card = page.locator('#view-diff .media-card[data-kind="image"][data-name="samples"]')
    expect(card.locator(".media-run")).to_have_count(2)

    page.locator("#view-diff #media-step").fill("1")  # step 20: a has it, b does not

    expect(card.locator('.media-run[data-run="a"] .media-step')).to_have_text("step 20")
    expect(card.locator('.media-run[data-run="b"] .media-step')).to_have_text(
        "step 10 (nearest to 20)"
    )
    expect(card.locator('.media-run[data-run="b"] img')).to_have_attribute(
        "src", re.compile(r"%2F10-[0-9a-f]+\.png$")
    )
    overlay = page.locator('#view-diff .media-card[data-kind="histogram"] canvas.overlay')
    expect(overlay).to_have_attribute("data-runs", "2")
    # a line of each run's colour: a's (step 20) and b's (step 10) distributions, both drawn
    colours = overlay.evaluate(
        "c => { const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
        " const seen = new Set(); for (let i = 0; i < d.length; i += 4)"
        " if (d[i + 3] === 255) seen.add(d[i] + ',' + d[i + 1] + ',' + d[i + 2]);"
        " return seen.size; }"
    )
    assert colours >= 2
    assert errors == []
