"""The runs page's grouped charts and its URL state in headless Chromium (Debian's package).

Every wait is a bounded wait on a condition the page shows; none sleeps for time.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("playwright.sync_api", reason="pip install playwright")

from playwright.sync_api import expect

from _logs import T0, line, write
from runlines.dashboard import Server

STEPS = range(1, 9)


def _sweep(folder: Path, *, nan_at: int | None = None) -> None:
    """Two lr, two seeds each; run lr0.1-s1 logs NaN at step *nan_at*."""
    for lr in (0.1, 0.01):
        for seed in (0, 1):
            name = f"lr{lr}-s{seed}"
            records = [line("run_start", name, T0, attempt=1, config={"lr": lr, "seed": seed})]
            for step in STEPS:
                loss = math.nan if (step == nan_at and name == "lr0.1-s1") else lr / step + seed
                records.append(
                    line("train_step", name, T0 + step, step=step, tokens=step * 64, loss=loss)
                )
                records.append(line("eval", name, T0 + step, step=step, accuracy=step / 10))
            records.append(line("run_end", name, T0 + 20, status="ok"))
            write(folder / f"{name}.jsonl", *records)


def _group_chart(page: Any) -> Any:
    return page.locator('#group-charts .chart[data-event="train_step"][data-field="loss"]')


def _ema(values: list[float], weight: float) -> list[float]:
    """app.js's smoothing: a debiased exponential moving average."""
    out, last, debias = [], 0.0, 0.0
    for value in values:
        last = last * weight + value * (1 - weight)
        debias = debias * weight + (1 - weight)
        out.append(last / debias)
    return out


def test_group_bands_honour_smoothing(
    serve_dir: Path, server: Server, page: Any, errors: list[str]
) -> None:
    _sweep(serve_dir)
    page.goto(server.url + "?group=lr&smoothing=0")
    chart = _group_chart(page)
    expect(chart).to_have_attribute("data-bands", "2")
    expect(chart).to_have_attribute("data-smoothed", "false")

    page.fill("#smoothing", "0.8")

    expect(chart).to_have_attribute("data-smoothed", "true")
    data = page.evaluate("groupView.charts.get('train_step:loss').plot.data")
    answer = page.evaluate("groupView.answers.get('train_step:loss')")
    first = answer["groups"][0]
    # columns of a group: low, high, mean (smoothed), mean (raw); the first group's are 1 to 4
    assert data[0] == first["x"]
    assert data[4] == first["mean"]
    assert data[3] == pytest.approx(_ema(first["mean"], 0.8))
    spread = [m + s for m, s in zip(first["mean"], first["std"], strict=True)]
    assert data[2] == pytest.approx(_ema(spread, 0.8))
    # the raw mean is drawn faintly; neither it nor the band's edges have a legend row
    expect(chart.locator(".u-legend .u-series:not(.raw) th")).to_have_text(
        ["step", "lr=0.01", "lr=0.1"]
    )
    assert "smoothing=0.8" in page.url
    assert errors == []


def test_a_nan_in_a_group_is_marked_at_its_step(
    serve_dir: Path, server: Server, page: Any, errors: list[str]
) -> None:
    _sweep(serve_dir, nan_at=5)

    page.goto(server.url + "?group=lr")

    chart = _group_chart(page)
    expect(chart).to_have_attribute("data-nonfinite", "1")
    expect(chart.locator(".marks")).to_have_text("⚠ 1 non-finite (NaN)")
    marks = page.evaluate("groupView.charts.get('train_step:loss').marks")
    assert [(m["run"], m["x"], m["value"]) for m in marks] == [("lr=0.1", 5, "NaN")]
    # by another x, ungrouped: the run's own NaN is marked, as app.js marks it
    page.select_option("#group-by", "")
    page.select_option("#x-axis", "field:tokens")
    expect(chart).to_have_attribute("data-x", "tokens")
    expect(chart).to_have_attribute("data-groups", "0")
    expect(chart).to_have_attribute("data-nonfinite", "1")
    marks = page.evaluate("groupView.charts.get('train_step:loss').marks")
    assert [(m["run"], m["x"], m["value"]) for m in marks] == [("lr0.1-s1", 5 * 64, "NaN")]
    assert errors == []


def test_the_url_keeps_selection_grouping_x_smoothing_filters_and_pins(
    serve_dir: Path, server: Server, page: Any, browser: Any, errors: list[str]
) -> None:
    _sweep(serve_dir)
    page.goto(server.url)
    expect(page.locator("#runs tbody tr")).to_have_count(4)
    page.click("#select-none")
    for run in ("lr0.1-s0", "lr0.01-s0", "lr0.01-s1"):
        page.check(f'#runs tr[data-run="{run}"] input')
    page.locator('#charts .chart[data-field="accuracy"] .pin').click()
    page.fill("#smoothing", "0.3")
    page.fill("#filter", "lr0.01")
    page.fill("#chart-filter", "loss")
    page.select_option("#x-axis", "relative")
    expect(page.locator("#charts .chart")).to_have_count(1)
    page.select_option("#group-by", "lr")
    expect(_group_chart(page)).to_have_attribute("data-bands", "1")  # lr0.01, as filtered

    url = page.url
    for kept in (
        "run=lr0.01-s0", "run=lr0.01-s1", "run=lr0.1-s0", "group=lr", "x=relative",
        "smoothing=0.3", "filter=lr0.01", "charts=loss", "pin=eval%3Aaccuracy",
    ):  # fmt: skip
        assert kept in url, kept
    again = browser.new_page()
    again.on("pageerror", lambda err: errors.append(str(err)))
    again.goto(url)
    reopened = _group_chart(again)
    expect(reopened).to_have_attribute("data-bands", "1")
    expect(reopened).to_have_attribute("data-x", "elapsed_s")
    expect(again.locator("#runs tr.selected")).to_have_count(2)  # the filter hides lr0.1-s0
    expect(again.locator("#smoothing")).to_have_value("0.3")
    expect(again.locator("#filter")).to_have_value("lr0.01")
    expect(again.locator("#chart-filter")).to_have_value("loss")
    expect(again.locator("#group-by")).to_have_value("lr")
    expect(again.locator("#x-axis")).to_have_value("relative")
    again.fill("#chart-filter", "")
    again.fill("#filter", "")
    again.select_option("#group-by", "")
    again.select_option("#x-axis", "step")
    expect(again.locator("#charts .chart").first).to_have_attribute("data-field", "accuracy")
    expect(again.locator("#runs tr.selected")).to_have_count(3)
    again.close()
    assert errors == []
