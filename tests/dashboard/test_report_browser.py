"""The report in headless Chromium, opened from file:// (Debian's package, driven by Playwright).

Every wait is a bounded wait on a condition the page shows; none sleeps for time.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd  # for runs(): imported after Playwright started, it crashes the process
import pytest
from _serve_helpers import CHROMIUM, WAIT_MS

import runlines
from _logs import T0, line, train, write

sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
if not Path(CHROMIUM).exists():
    pytest.skip("needs Debian's chromium: apt-get install chromium", allow_module_level=True)

expect = sync_api.expect


class Page:
    """A page that records every request it makes, every console error and every dialog."""

    def __init__(self, browser: Any) -> None:
        self.context = browser.new_context(viewport={"width": 1400, "height": 1000})
        self.page = self.context.new_page()
        self.page.set_default_timeout(WAIT_MS)
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.page.on("request", lambda request: self.requests.append(request.url))
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda err: self.errors.append(str(err)))
        self.page.on("dialog", self._dialog)

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def open(self, report: Path) -> Any:
        self.page.goto(report.resolve().as_uri())
        expect(self.page.locator("body")).to_have_attribute("data-ready", "true")
        return self.page


@pytest.fixture(name="tab")
def _tab(browser: Any) -> Iterator[Page]:
    tab = Page(browser)
    yield tab
    tab.context.close()


def _sweep(folder: Path) -> None:
    for seed, lr in enumerate((0.1, 0.1, 0.2, 0.2)):
        train(folder, f"r{seed}", range(1, 40), config={"lr": lr, "seed": seed}, evals=True)
    write(
        folder / "nan.jsonl",
        line("run_start", run="nan", attempt=1, config={"lr": 0.3, "seed": 9}),
        line("train_step", run="nan", ts=T0 + 1, step=1, loss=0.5, lr=0.3),
        line("train_step", run="nan", ts=T0 + 2, step=2, loss=math.nan, lr=0.3),
        line("run_end", run="nan", ts=T0 + 3, status="ok"),
    )


def test_opens_from_disk_with_no_request_and_shows_the_table_of_runs(
    tmp_path: Path, tab: Page
) -> None:
    _sweep(tmp_path / "runs")
    report = runlines.report(tmp_path / "runs", path=tmp_path / "report.html")
    expected = runlines.runs(tmp_path / "runs")

    page = tab.open(report)

    rows = page.locator("#runs tbody tr")
    expect(rows).to_have_count(len(expected))
    for _, row in expected.iterrows():
        for column in expected.columns:
            if column == "path":  # the run's cell has it as its title
                continue
            if column in ("tags", "notes") and not expected[column].map(len).any():
                continue  # no run has any: no column, as on the dashboard
            cell = page.locator(f'#runs tr[data-run="{row["run"]}"] td[data-key="{column}"]')
            shown = cell.get_attribute("data-value")
            value = row[column]
            if shown is None:
                assert pd.isna(value), (row["run"], column)
            elif isinstance(value, float):
                assert shown == "NaN" if math.isnan(value) else float(shown) == value
            elif isinstance(value, pd.Timestamp):
                assert pd.Timestamp(shown) == value
            elif isinstance(value, list):
                assert json.loads(shown) == value
            else:
                assert shown == str(value), (row["run"], column)
    nan_cell = page.locator('#runs tr[data-run="nan"] td[data-key="train_step.loss"]')
    expect(nan_cell).to_have_text("nan")
    expect(page.locator('.chart[data-event="train_step"][data-field="loss"] canvas')).to_have_count(
        1
    )
    expect(page.locator('.chart[data-event="train_step"][data-field="loss"]')).to_have_attribute(
        "data-runs", "5"
    )
    expect(page.locator('.chart[data-field="loss"][data-nonfinite="1"] .marks')).to_have_text(
        "⚠ 1 non-finite"
    )
    assert tab.requests == [report.resolve().as_uri()]
    assert tab.errors == []


def test_each_run_shows_its_config_and_the_logs_sha256(tmp_path: Path, tab: Page) -> None:
    train(
        tmp_path, "a", range(1, 5), config={"lr": 0.1, "note": "</script><script>alert(1)</script>"}
    )
    report = runlines.report(tmp_path / "a.jsonl", path=tmp_path / "report.html")

    page = tab.open(report)
    page.click('#runs tr[data-run="a"] td[data-key="run"] a')

    details = page.locator('#details details[data-run="a"]')
    expect(details).to_have_attribute("open", "")
    expect(details.locator(".config td")).to_have_text(
        ["lr", "0.1", "note", "</script><script>alert(1)</script>"]
    )
    expect(details.locator(".attempts .badge")).to_have_text(["ok"])
    sha = hashlib.sha256((tmp_path / "a.jsonl").read_bytes()).hexdigest()
    expect(page.locator("#inputs td.sha")).to_have_text([sha])
    assert tab.dialogs == []
    assert tab.errors == []


def test_group_by_draws_two_bands(
    tmp_path: Path, tab: Page, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Groups come from compare(group_by=...): a mean line and a band per group."""
    _sweep(tmp_path / "runs")
    (tmp_path / "runs" / "nan.jsonl").unlink()
    report = runlines.report(
        tmp_path / "runs", path=tmp_path / "report.html", metric="loss", group_by=["lr"]
    )

    page = tab.open(report)

    chart = page.locator('.chart[data-event="train_step"][data-field="loss"]')
    expect(chart).to_have_attribute("data-groups", "2")
    expect(chart).to_have_attribute("data-bands", "2")
    legend = chart.locator(".u-legend .u-series:not([hidden]) th")
    expect(legend).to_have_text(["step", "lr=0.1", "lr=0.2"])
    box = chart.locator(".u-over").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    expect(chart.locator(".u-legend .u-series:not([hidden]) td").nth(1)).to_contain_text("(n=2)")
    assert tab.requests == [report.resolve().as_uri()]
    assert tab.errors == []


def test_the_group_table_and_each_runs_tags_and_notes(tmp_path: Path, tab: Page) -> None:
    """--group-by adds a row per group, as runs(group_by=...) gives it; tags and notes show."""
    _sweep(tmp_path / "runs")
    runlines.tag(tmp_path / "runs" / "r0.jsonl", "best", "baseline")
    runlines.tag(tmp_path / "runs" / "r2.jsonl", "best")
    runlines.note(tmp_path / "runs" / "r2.jsonl", "lr 0.2 looks stable")
    runlines.note(tmp_path / "runs" / "r2.jsonl", "rerun with seed 3")
    report = runlines.report(
        tmp_path / "runs", path=tmp_path / "report.html", metric="loss", group_by=["lr"]
    )
    expected = runlines.runs(tmp_path / "runs", group_by=["lr"])

    page = tab.open(report)

    rows = page.locator("#groups tbody tr")
    expect(rows).to_have_count(len(expected))
    for _, group in expected.iterrows():
        row = page.locator(f'#groups tr[data-group="{group["group"]}"]')
        expect(row.locator('td[data-key="n"]')).to_have_text(str(group["n"]))
        for metric in ("train_step.loss", "train_step.loss.best", "eval.accuracy"):
            cell = row.locator(f'td[data-key="{metric}"]')
            for stat in ("mean", "std"):
                value, shown = group[f"{metric}.{stat}"], cell.get_attribute(f"data-{stat}")
                if value is pd.NA:  # no value: no attribute
                    assert shown is None, (group["group"], metric, stat)
                elif math.isnan(value):  # a logged NaN: as the log names it
                    assert shown == "NaN", (group["group"], metric, stat)
                else:
                    assert float(shown) == value, (group["group"], metric, stat)
    nan_group = page.locator('#groups tr[data-group="lr=0.3"] td[data-key="train_step.loss"]')
    expect(nan_group).to_have_attribute("data-mean", "NaN")  # its one run's last loss is NaN
    # tags and notes: in the table, and in the run's panel
    expect(page.locator('#runs tr[data-run="r0"] td[data-key="tags"] button')).to_have_text(
        ["best", "baseline"]
    )
    expect(page.locator('#runs tr[data-run="r2"] td[data-key="notes"]')).to_have_text(
        "rerun with seed 3 +1"
    )
    page.locator('#runs tr[data-run="r0"] td[data-key="tags"] button', has_text="best").click()
    expect(page.locator("#runs tbody tr")).to_have_count(2)  # the filter is tag:best
    details = page.locator('#details details[data-run="r2"]')
    page.click('#runs tr[data-run="r2"] td[data-key="run"] a')
    expect(details.locator(".notes-panel .note")).to_have_text(
        ["lr 0.2 looks stable", "rerun with seed 3"]
    )
    expect(details.locator(".notes-panel .tag")).to_have_text(["best"])
    auto = runlines.report(tmp_path / "runs", path=tmp_path / "auto.html", group_by=["auto"])
    tab.open(auto)
    expect(page.locator("#x-name")).to_have_text("x axis: step · grouped by lr")  # seed left out
    expect(page.locator("#groups tbody tr")).to_have_count(len(expected))
    assert tab.requests == [report.resolve().as_uri(), auto.resolve().as_uri()]
    assert tab.errors == []
