"""The study page (#/study) in headless Chromium, over a real Optuna study of 10 trials.

Every wait is a bounded wait on a condition the page shows; none sleeps for time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("optuna", reason="optuna is not installed: pip install 'runlines[optuna]'")
pytest.importorskip("playwright.sync_api", reason="pip install playwright")

from playwright.sync_api import expect

import _optuna_sweep
import runlines
from _optuna_sweep import PRUNED
from runlines.dashboard import Server

TRIALS = 10
PARAMS = ("x", "lr", "optimizer")


@pytest.fixture(name="study_dir", scope="module")
def _study_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A study of TRIALS trials, some pruned and one failed, each a run."""
    root = tmp_path_factory.mktemp("optuna")
    _optuna_sweep.sweep(str(root / "journal.log"), str(root / "runs"), "study", TRIALS)
    return root / "runs" / "study"


def test_the_page_draws_one_line_per_trial_and_lists_the_params(
    study_dir: Path, page: Any, errors: list[str]
) -> None:
    with Server(study_dir, port=0) as server:
        page.goto(server.url + "#/study")

        parallel = page.locator("#study-parallel")
        expect(parallel).to_have_attribute("data-lines", str(TRIALS))
        expect(parallel.locator("path.study-line")).to_have_count(TRIALS)
        expect(parallel.locator(".axis")).to_have_count(len(PARAMS) + 1)  # and the metric
        expect(page.locator("#study-importance tbody tr")).to_have_count(len(PARAMS))
        keys = page.locator("#study-importance tbody tr").evaluate_all(
            "rows => rows.map(r => r.dataset.key)"
        )
        assert sorted(keys) == sorted(PARAMS)
        expect(page.locator(".caveat")).to_contain_text("Correlation, not causation")
        pruned = [f"trial-{n}" for n in PRUNED]
        for run in pruned:
            expect(parallel.locator(f'path.study-line[data-run="{run}"]')).to_have_count(1)
        expect(page.locator("#study-scatter circle.study-point")).to_have_count(TRIALS)
    assert errors == []


def test_the_metric_stat_and_key_round_trip_through_the_url(
    study_dir: Path, page: Any, browser: Any, errors: list[str]
) -> None:
    with Server(study_dir, port=0) as server:
        page.goto(server.url + "#/study")
        expect(page.locator("#study-parallel")).to_have_attribute("data-lines", str(TRIALS))

        page.select_option("#study-metric", "objective.loss")
        page.select_option("#study-stat", "best")
        expect(page.locator("#study-left-out")).to_contain_text("trial-8")  # it failed
        page.select_option("#study-key", "optimizer")
        expect(page.locator("#study-scatter svg")).to_have_attribute("data-key", "optimizer")

        url = page.url
        for kept in ("metric=objective.loss", "stat=best", "key=optimizer", "#/study"):
            assert kept in url
        again = browser.new_page()
        again.on("pageerror", lambda err: errors.append(str(err)))
        again.goto(url)
        expect(again.locator("#study-metric")).to_have_value("objective.loss")
        expect(again.locator("#study-stat")).to_have_value("best")
        expect(again.locator("#study-key")).to_have_value("optimizer")
        expect(again.locator("#study-parallel")).to_have_attribute("data-lines", str(TRIALS - 1))
        again.close()
    assert errors == []


def test_brushing_an_axis_keeps_the_runs_in_its_range(
    study_dir: Path, page: Any, errors: list[str]
) -> None:
    with Server(study_dir, port=0) as server:
        page.goto(server.url + "#/study")
        parallel = page.locator("#study-parallel")
        expect(parallel).to_have_attribute("data-lines", str(TRIALS))
        hit = parallel.locator('.axis[data-key="optimizer"] rect.hit')
        box = hit.bounding_box()
        assert box is not None

        # from above the top category (sgd) to halfway down: sgd only
        x = box["x"] + box["width"] / 2
        page.mouse.move(x, box["y"] + 1)
        page.mouse.down()
        page.mouse.move(x, box["y"] + box["height"] / 2, steps=5)
        page.mouse.up()

        table = runlines.runs(study_dir)
        sgd = int((table["config.optimizer"] == "sgd").sum())
        expect(parallel).to_have_attribute("data-kept", str(sgd))
        expect(parallel.locator("path.study-line.dim")).to_have_count(TRIALS - sgd)
        expect(page.locator("#study-count")).to_have_text(
            f"{sgd} of {TRIALS} runs in the brushed ranges"
        )
        page.click("#study-clear")
        expect(parallel).to_have_attribute("data-kept", str(TRIALS))
    assert errors == []


def test_a_trial_that_ends_while_the_page_is_open_is_drawn(
    tmp_path: Path, page: Any, errors: list[str]
) -> None:
    journal, runs = str(tmp_path / "journal.log"), tmp_path / "runs"
    _optuna_sweep.sweep(journal, str(runs), "live", 3)
    with Server(runs / "live", port=0) as server:
        page.goto(server.url + "#/study")
        parallel = page.locator("#study-parallel")
        expect(parallel).to_have_attribute("data-lines", "3")

        _optuna_sweep.sweep(journal, str(runs), "live", 2)  # the study goes on: two more trials

        expect(parallel).to_have_attribute("data-lines", "5")
        expect(parallel.locator("path.study-line")).to_have_count(5)
    assert errors == []


def test_runs_group_by_over_the_study(study_dir: Path) -> None:
    """runs(group_by=...) over the trials: one row per optimizer, every trial in one."""
    table = runlines.runs(study_dir)

    groups = runlines.runs(study_dir, group_by=["optimizer"])

    assert list(groups["group"]) == ["optimizer=adam", "optimizer=sgd"]
    assert groups["n"].sum() == TRIALS
    for _, group in groups.iterrows():
        members = table[table["config.optimizer"] == group["optimizer"]]
        assert sorted(group["runs"]) == sorted(members["run"])
        assert group["report.loss.mean"] == pytest.approx(members["report.loss"].mean())
        assert group["report.loss.max"] == pytest.approx(members["report.loss"].max())
    assert runlines.runs(study_dir, group_by="auto").attrs["group_by"] == list(PARAMS)
