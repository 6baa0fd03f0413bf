"""Regenerate the dashboard's screenshots in docs/: a small sweep served and photographed.

    python docs/screenshots.py          # needs playwright and Debian's chromium

It writes a sweep of runs to a temporary folder (one with a NaN loss, one that failed and was
resumed, and is still running), serves it with `runlines.dashboard.Server`, and saves
dashboard-runs.png, dashboard-run.png and dashboard-diff.png next to this file; then writes
the sweep's `runlines.report` and saves report.png of it, opened from disk; and
dashboard-media.png, the media panel of a run that logged images, histograms, text, audio and a
table; and, over a sweep of learning rates with three seeds each, dashboard-groups.png (the runs
grouped by lr: a band per group) and dashboard-study.png (the study page).
"""

from __future__ import annotations

import math
import random
import shutil
import struct
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS.parent / "src"))

from freezegun import freeze_time  # noqa: E402
from playwright.sync_api import Page, expect, sync_playwright  # noqa: E402

from runlines import Run  # noqa: E402
from runlines.dashboard import Server, report  # noqa: E402

STEPS = 3000
STEP_S = 0.2  # the sweep's pace: each step takes this long, each eval loop EVAL_S
EVAL_S = 2.0
WRITTEN_S = 2300  # about how long the whole sweep takes at that pace


def _png(width: int, height: int, seed: int) -> bytes:
    """Return a small PNG of coloured noise, standing in for a sample image."""
    rng = random.Random(seed)
    rows = b"".join(
        b"\x00" + bytes(rng.randrange(256) if c % 3 == seed % 3 else 40 for c in range(width * 3))
        for _ in range(height)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def _train(
    run: Run,
    lr: float,
    seed: int,
    steps: range,
    tick: Callable[[float], object],
    *,
    nan_at: int | None = None,
) -> None:
    rng = random.Random(seed)
    for step in steps:
        tick(STEP_S)
        loss = 2.3 * math.exp(-step * lr / 8) + 0.05 + rng.gauss(0, 0.04)
        run.log("train_step", step=step, loss=math.nan if step == nan_at else loss, lr=lr)
        if step % 250 == 0:
            accuracy = min(0.99, 1 - loss / 2.6 + rng.gauss(0, 0.01))
            run.log("eval", step=step, loss=loss * 1.08, accuracy=accuracy)
            run.log(
                "system",
                gpu0_util_percent=70 + rng.random() * 25,
                gpu0_mem_used_bytes=int((18 + step / 1000) * 1e9),
            )
            with run.span("eval_loop"):
                tick(EVAL_S * (0.8 + 0.4 * rng.random()))


def write_sweep(folder: Path) -> Run:
    """Write the sweep at a training pace, ending now; return the run left open (running)."""
    start = datetime.fromtimestamp(time.time() - WRITTEN_S, UTC)
    with freeze_time(start) as clock:
        return _write_sweep(folder, clock.tick)


def _write_sweep(folder: Path, tick: Callable[[float], object]) -> Run:
    for seed, lr in enumerate((0.003, 0.01, 0.03)):
        config = {"lr": lr, "batch_size": 256, "model": "resnet50", "optim": {"name": "adamw"}}
        with Run(f"sweep-lr{lr:g}", folder, stdout=False, config=config) as run:
            _train(run, lr, seed, range(STEPS), tick, nan_at=2100 if lr == 0.03 else None)
            for step in (1000, 2000):
                picture = folder / f"samples-{lr:g}-{step}.png"
                picture.write_bytes(_png(96, 64, seed * 10 + step))
                run.artifact(f"samples-{step}", path=picture, step=step)
    config = {"lr": 0.02, "batch_size": 512, "model": "resnet50", "optim": {"name": "adamw"}}
    try:
        with Run("bs512", folder, stdout=False, config=config) as run:
            _train(run, 0.02, 7, range(1200), tick)
            message = "CUDA out of memory"
            raise MemoryError(message)
    except MemoryError:
        pass
    live = Run("bs512", folder, stdout=False, config=config, resume_step=1000).__enter__()
    _train(live, 0.02, 8, range(1000, 1800), tick)
    picture = folder / "samples-bs512-1500.png"
    picture.write_bytes(_png(96, 64, 75))
    live.artifact("samples-1500", path=picture, step=1500)
    return live


def _shot(page: Page, name: str, part: str | None = None) -> None:
    """Save the whole page (or its *part*, a selector) as docs/<name>: 128 colours with Pillow,
    a third the size."""
    path = DOCS / name
    if part is None:
        page.screenshot(path=path, full_page=True)
    else:
        page.locator(part).screenshot(path=path)
    try:
        from PIL import Image
    except ImportError:
        return
    with Image.open(path) as shot:
        small = shot.convert("RGB").quantize(colors=128, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)


def main() -> None:
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    with tempfile.TemporaryDirectory(prefix="runlines-screens-") as tmp:
        live = write_sweep(Path(tmp))
        try:
            with Server(tmp, port=0) as server, sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=chromium)
                page = browser.new_page(viewport={"width": 1440, "height": 1000})
                page.goto(server.url)
                chart = page.locator('#charts .chart[data-event="train_step"][data-field="loss"]')
                expect(chart).to_have_attribute("data-runs", "4")
                _shot(page, "dashboard-runs.png")
                page.goto(server.url + "#/run/bs512")  # a failed attempt, resumed: running
                expect(page.locator("#view-run img").first).to_be_visible()
                expect(page.locator("#view-run pre.trace")).to_contain_text("MemoryError")
                expect(page.locator(".run-charts .chart").first).to_have_attribute("data-runs", "1")
                _shot(page, "dashboard-run.png")
                page.goto(server.url + "#/diff/sweep-lr0.01/sweep-lr0.03")
                expect(page.locator("#view-diff")).to_contain_text("differ from step")
                _shot(page, "dashboard-diff.png")
                _report_shot(page, Path(tmp))
                browser.close()
            media_shot()
            study_shot()
        finally:
            live.__exit__(None, None, None)
    names = ("runs", "run", "diff", "media", "groups", "study")
    print("wrote", ", ".join(f"docs/dashboard-{n}.png" for n in names), end="")
    print(", docs/report.png")


def _report_shot(page: Page, folder: Path) -> None:
    """Write the sweep's report, open it from disk with one run's config shown, and save it."""
    written = report(folder, path=folder / "report.html")
    page.goto(written.as_uri())
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    page.click('#runs tr[data-run="sweep-lr0.03"] td[data-key="run"] a')
    expect(page.locator('#details details[data-run="sweep-lr0.03"]')).to_have_attribute("open", "")
    _shot(page, "report.png")


def media_shot() -> None:
    """Log a run's images, histograms, text, audio and a table, and save its page's media panel
    as dashboard-media.png (`python -c "import screenshots; screenshots.media_shot()"` alone)."""
    import numpy as np

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    rng = np.random.default_rng(7)
    y, x = np.mgrid[0:64, 0:64] / 63.0
    with tempfile.TemporaryDirectory(prefix="runlines-media-") as tmp:
        quiet = {"stdout": False, "system": False, "capture": False}
        with Run("vae", tmp, **quiet) as run:
            for k, step in enumerate(range(100, 2100, 100)):
                sharp = k / 19  # the samples come into focus as training goes
                blob = np.exp(-((x - 0.5) ** 2 + (y - 0.5) ** 2) / 0.05)
                noise = rng.random((64, 64, 3)) * (1 - sharp)
                pixels = np.clip(blob[..., None] * [0.9, 0.5, 0.2] * sharp + noise, 0, 1)
                run.image("samples", pixels, step=step, caption=f"z ~ N(0, 1), step {step}")
                run.histogram("encoder.weight", rng.normal(0, 1.0 / (1 + k / 4), 20_000), step=step)
                if step % 500 == 0:
                    sample = f"step {step}: the cat sat on the " + "mat " * k
                    run.text("completion", sample, step=step)
                    rows = [{"id": i, "label": i % 3, "p": 0.5} for i in range(64)]
                    run.table("preds", rows, step=step)
            tone = np.sin(np.arange(8000) * 2 * np.pi * 440 / 8000).astype(np.float32) * 0.3
            run.audio("reconstruction", tone, 8000, step=2000)
        with Server(tmp, port=0) as server, sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium)
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            page.goto(server.url + "#/run/vae")
            heat = page.locator('.media-card[data-kind="histogram"] canvas.heatmap')
            expect(heat).to_have_attribute("data-drawn", "20")
            page.locator("#media-step").fill("13")  # step 1400: the text is at its nearest, 1500
            page.locator("#media img").first.scroll_into_view_if_needed()
            page.wait_for_function("document.querySelector('#media img').complete")
            _shot(page, "dashboard-media.png", "#media")
            browser.close()


def _write_lr_sweep(folder: Path) -> None:
    """Write 4 learning rates x 3 seeds, with a batch size, an optimizer and a dropout each."""
    for i, lr in enumerate((0.001, 0.003, 0.01, 0.03)):
        for seed in range(3):
            rng = random.Random(i * 10 + seed)
            optim = "adamw" if (i + seed) % 2 else "sgd"
            config = {"lr": lr, "seed": seed, "batch_size": (128, 256, 512)[seed], "optim": optim}
            config["dropout"] = round(rng.uniform(0.0, 0.3), 2)
            with Run(f"lr{lr:g}-s{seed}", folder, stdout=False, system=False, config=config) as run:
                for step in range(0, 1500, 5):
                    floor = 0.12 + 8 * (lr - 0.008) ** 2 + (0.03 if optim == "sgd" else 0)
                    loss = floor + 2.2 * math.exp(-step * lr / 6) + rng.gauss(0, 0.03)
                    run.log("train_step", step=step, tokens=step * 4096, loss=loss)
                    if step % 100 == 0:
                        run.log("eval", step=step, loss=loss * 1.05 + rng.gauss(0, 0.01))


def study_shot() -> None:
    """Serve a sweep of 4 learning rates x 3 seeds; save the runs grouped by lr as
    dashboard-groups.png and the study page as dashboard-study.png."""
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    with tempfile.TemporaryDirectory(prefix="runlines-groups-") as tmp:
        _write_lr_sweep(Path(tmp))
        with Server(tmp, port=0) as server, sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium)
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            runs = "&".join(
                f"run=lr{lr:g}-s{seed}" for lr in (0.001, 0.003, 0.01, 0.03) for seed in range(3)
            )
            page.goto(server.url + f"?{runs}&group=lr&x=tokens&logx=1&logy=1&smoothing=0.3")
            chart = page.locator('#group-charts .chart[data-event="train_step"][data-field="loss"]')
            expect(chart).to_have_attribute("data-bands", "4")
            evals = page.locator('#group-charts .chart[data-event="eval"][data-field="loss"]')
            expect(evals).to_have_attribute("data-bands", "4")
            _shot(page, "dashboard-groups.png", "#view-runs")
            page.goto(server.url + "?metric=eval.loss&stat=best&key=lr#/study")
            expect(page.locator("#study-parallel")).to_have_attribute("data-lines", "12")
            _shot(page, "dashboard-study.png", "#view-study")
            browser.close()


if __name__ == "__main__":
    main()
