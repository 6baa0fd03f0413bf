"""The dashboard in headless Chromium (Debian's package), driven by Playwright.

Every wait is a bounded wait on a condition the page shows; none sleeps for time.
"""

from __future__ import annotations

import math
import re
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas  # noqa: F401 (for runs(): imported after Playwright started, it crashes the process)
import pytest
from _serve_helpers import CHROMIUM, NOW, WAIT_MS, awkward_logs, png_bytes

import runlines
from _logs import T0, line, train, write
from runlines import Run
from runlines.dashboard import Server
from runlines.errors import RunlinesWarning
from runlines.reading import lock_path

sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
FileLock = pytest.importorskip("filelock").FileLock
freeze_time = pytest.importorskip("freezegun").freeze_time
if not Path(CHROMIUM).exists():
    pytest.skip("needs Debian's chromium: apt-get install chromium", allow_module_level=True)

expect = sync_api.expect


def _chart(page: Any, event: str, field: str, board: str = "#charts") -> Any:
    return page.locator(f'{board} .chart[data-event="{event}"][data-field="{field}"]')


def test_page_loads_without_console_errors_and_lists_runs_with_status(
    serve_dir: Path, server: Server, page: Any, errors: list[str]
) -> None:
    train(serve_dir, "finished", range(1, 20))
    write(serve_dir / "crashed.jsonl", line("run_start", "crashed", attempt=1))

    page.goto(server.url)

    expect(page.locator('#runs tr[data-run="finished"] .badge')).to_have_text("ok")
    expect(page.locator('#runs tr[data-run="crashed"] .badge')).to_have_text("died")
    expect(_chart(page, "train_step", "loss")).to_be_visible()
    assert errors == []


def test_selecting_two_runs_draws_two_lines(
    serve_dir: Path, server: Server, page: Any, errors: list[str]
) -> None:
    for name in ("a", "b", "c"):
        train(serve_dir, name, range(1, 30))
    page.goto(server.url)
    expect(_chart(page, "train_step", "loss")).to_have_attribute("data-runs", "3")

    page.click("#select-none")
    page.check('#runs tr[data-run="a"] input')
    page.check('#runs tr[data-run="c"] input')

    chart = _chart(page, "train_step", "loss")
    expect(chart).to_have_attribute("data-runs", "2")
    legend = chart.locator(".u-legend .u-series:not(.raw) th")
    expect(legend).to_have_text(["step", "a", "c"])
    expect(chart.locator("canvas")).to_have_count(1)
    assert errors == []


def test_a_run_that_logs_while_the_page_is_open_grows_on_screen(
    serve_dir: Path, server: Server, page: Any, errors: list[str]
) -> None:
    with Run("live", serve_dir, stdout=False) as run:
        for step in range(1, 11):
            run.log("train_step", step=step, loss=1.0 / step)
        page.goto(server.url)
        chart = _chart(page, "train_step", "loss")
        expect(chart).to_have_attribute("data-points", "10")
        expect(page.locator('#runs tr[data-run="live"] .badge')).to_have_text("running")

        for step in range(11, 26):
            run.log("train_step", step=step, loss=1.0 / step)

        expect(chart).to_have_attribute("data-points", "25")
        expect(page.locator('#runs tr[data-run="live"] td').nth(4)).to_have_text("25")
    expect(page.locator('#runs tr[data-run="live"] .badge')).to_have_text("ok")
    assert errors == []


def test_a_torn_last_line_and_nan_losses_both_show(
    serve_dir: Path, server: Server, page: Any, errors: list[str]
) -> None:
    whole = line("train_step", "torn", T0 + 3, step=3, loss=0.2)
    write(
        serve_dir / "torn.jsonl",
        line("run_start", "torn", T0, attempt=1),
        line("train_step", "torn", T0 + 1, step=1, loss=0.5),
        line("train_step", "torn", T0 + 2, step=2, loss=0.4),
        whole[: len(whole) // 2],
    )
    write(
        serve_dir / "nan.jsonl",
        line("run_start", "nan", T0, attempt=1),
        *(
            line("train_step", "nan", T0 + s, step=s, loss=float("nan") if s == 3 else 1.0 / s)
            for s in range(1, 6)
        ),
    )

    page.goto(server.url)

    expect(page.locator('#runs tr[data-run="torn"] .badge')).to_have_text("died")
    expect(page.locator('#runs tr[data-run="torn"] .torn')).to_have_text(re.compile("1 torn"))
    expect(page.locator('#runs tr[data-run="nan"] .badge')).to_have_text("died")
    chart = _chart(page, "train_step", "loss")
    expect(chart).to_have_attribute("data-runs", "2")
    expect(chart).to_have_attribute("data-nonfinite", "1")
    expect(chart.locator(".marks")).to_have_text(re.compile(r"1 non-finite \(NaN\)"))
    assert errors == []


def test_the_run_page_shows_config_attempts_spans_ranks_and_inline_images(
    serve_dir: Path, server: Server, page: Any, errors: list[str]
) -> None:
    picture = serve_dir / "sample.png"
    picture.write_bytes(png_bytes())
    with Run("r", serve_dir, stdout=False, config={"optim": {"lr": 0.1}}) as run:
        with run.span("forward"):
            run.log("train_step", step=1, loss=0.5)
        run.artifact("samples", path=picture, step=1)
    write(serve_dir / "r.rank1.jsonl", line("train_step", "r", step=1, loss=0.7, rank=1))

    page.goto(server.url + "#/run/r")

    view = page.locator("#view-run")
    expect(view.locator("h1")).to_have_text("r")
    expect(view).to_contain_text("optim.lr")
    expect(view).to_contain_text("forward")
    expect(view.locator("th", has_text="rank 1")).to_be_visible()
    image = view.locator("img")
    expect(image).to_be_visible()
    expect(image).to_have_js_property("naturalWidth", 2)
    assert errors == []


def test_diff_of_two_selected_runs_names_the_step_where_they_part(
    serve_dir: Path, server: Server, page: Any, errors: list[str]
) -> None:
    for name, lr, drift in (("a", 0.1, 0.0), ("b", 0.2, 1.0)):
        with Run(name, serve_dir, stdout=False, config={"lr": lr}) as run:
            for step in range(1, 51):
                run.log("train_step", step=step, loss=1.0 / step + (drift if step > 40 else 0))
    page.goto(server.url)
    expect(_chart(page, "train_step", "loss")).to_have_attribute("data-runs", "2")

    page.click("#diff-selected")

    view = page.locator("#view-diff")
    expect(view).to_contain_text("differ from step 41")
    expect(view).to_contain_text("lr")
    assert errors == []


def test_diff_page_names_the_split_of_the_record_that_differs(
    serve_dir: Path, server: Server, page: Any, errors: list[str]
) -> None:
    for name, val in (("a", 0.5), ("b", 0.6)):
        with Run(name, serve_dir, stdout=False) as run:
            run.log("eval", step=1, split="val", accuracy=val)
            run.log("eval", step=1, split="test", accuracy=0.9)
    page.goto(server.url)
    expect(page.locator("#run-count")).to_contain_text("2 selected")

    page.click("#diff-selected")

    expect(page.locator("#view-diff")).to_contain_text("differ from step 1 (split=val)")
    assert errors == []


def test_x_axis_log_y_and_smoothing_redraw_the_charts(
    serve_dir: Path, server: Server, page: Any, errors: list[str]
) -> None:
    train(serve_dir, "r", range(1, 40))
    page.goto(server.url)
    chart = _chart(page, "train_step", "loss")
    expect(chart).to_have_attribute("data-axes", "step|false|true")

    page.select_option("#x-axis", "relative")
    page.check("#log-y")
    page.fill("#smoothing", "0")

    expect(chart).to_have_attribute("data-axes", "relative|true|false")
    page.select_option("#x-axis", "wall")
    expect(chart).to_have_attribute("data-axes", "wall|true|false")
    expect(chart.locator(".u-legend .u-series:not(.raw) th")).to_have_text(["time", "r"])
    assert errors == []


def test_a_stale_copy_is_named_in_the_table_and_on_the_run_page(
    serve_dir: Path, page: Any, errors: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from runlines.reading._copies import write_copy

    monkeypatch.setattr("runlines.dashboard._history.MIN_LOG_BYTES", 0)  # a small log for a big one

    log = train(serve_dir, "stale", range(1, 6))
    write_copy(log)
    log.write_bytes(log.read_bytes().replace(b'"loss":0.5', b'"loss":0.6'))
    server = Server(serve_dir, port=0).start()  # after the copy: it is looked for once

    try:
        page.goto(server.url)
        _expect_the_problem_shown(page)
    finally:
        server.stop()
    assert errors == []


def _expect_the_problem_shown(page: Any) -> None:
    problem = page.locator('#runs tr[data-run="stale"] .problem')
    expect(problem).to_have_text("⚠ copy not used")
    expect(problem).to_have_attribute("title", re.compile(r"stale\.parquet is not used"))
    page.locator('#runs tr[data-run="stale"] a').click()
    expect(page.locator(".panel .problem")).to_have_text(re.compile("runlines compact"))


def _sweep(folder: Path) -> None:
    """Two runs: one whose loss goes to inf for its last 10 steps, with events of every group."""
    records = [line("run_start", "inf", T0, attempt=1, config={"lr": 0.1})]
    for step in range(1, 101):
        loss = float("inf") if step > 90 else 1.0 / step
        records.append(line("fit", "inf", T0 + step, step=step, loss=loss))
        if step % 50 == 0:
            records.append(line("eval", "inf", T0 + step, step=step, accuracy=step / 100))
            records.append(line("batch", "inf", T0 + step, step=step, size=32))
            records.append(line("system", "inf", T0 + step, rss_bytes=25_300_000_000))
            records.append(line("span", "inf", T0 + step, name="save", duration_s=0.0012))
    records.append(line("run_end", "inf", T0 + 101, status="ok"))
    write(folder / "inf.jsonl", *records)
    write(
        folder / "plain.jsonl",
        line("run_start", "plain", T0, attempt=1, config={"lr": 0.2}),
        *(line("fit", "plain", T0 + s, step=s, loss=0.5, ratio=1 + s * 1e-5) for s in range(1, 10)),
        line("run_end", "plain", T0 + 10, status="ok"),
    )


def test_the_runs_page_orders_pins_filters_and_labels_its_charts(
    serve_dir: Path, server: Server, page: Any, errors: list[str]
) -> None:
    _sweep(serve_dir)
    page.goto(server.url)
    loss = _chart(page, "fit", "loss")
    expect(loss).to_have_attribute("data-runs", "2")

    # the x range holds the marks past the last finite point, and they name their run
    assert float(loss.get_attribute("data-x-max")) >= 100
    expect(loss.locator(".marks")).to_have_text(re.compile(r"10 non-finite \(Infinity\)"))
    expect(loss.locator(".marks")).to_have_attribute(
        "title", re.compile("inf: Infinity \u00d710 from step 91")
    )
    # the user's events first, as first logged; then eval-like; then system and spans
    order = [
        f"{c.get_attribute('data-event')}.{c.get_attribute('data-field')}"
        for c in page.locator("#charts .chart").all()
    ]
    assert order == [
        "fit.loss", "fit.ratio", "batch.size", "eval.accuracy", "system.rss_bytes", "span.save",
    ]  # fmt: skip
    # y labels: each distinct, and never wider than their axis
    ratio = _chart(page, "fit", "ratio")
    ticks = ratio.get_attribute("data-y-ticks").split("|")
    assert len(ticks) > 2
    assert len(set(ticks)) == len(ticks), ticks
    widest = page.evaluate(
        """(labels) => {
          const c = document.createElement("canvas").getContext("2d");
          c.font = "12px system-ui";
          return Math.max(...labels.map((t) => c.measureText(t).width));
        }""",
        ticks,
    )
    assert float(ratio.get_attribute("data-y-axis-width")) >= widest
    # and each says its tick exactly, in the unit of its field
    assert page.evaluate("fmtTicks([0, 250, 500, 750, 1000, 1250], null, 250)") == [
        "0", "250", "500", "750", "1000", "1250",
    ]  # fmt: skip
    assert page.evaluate("fmtTicks([18e9, 18.5e9, 19e9], 'bytes', 5e8)") == [
        "18 GB", "18.5 GB", "19 GB",
    ]  # fmt: skip
    # units from the field vocabulary, in the table; metric columns before the config's
    row = page.locator('#runs tr[data-run="inf"]')
    expect(row).to_contain_text("25.3 GB")
    columns = page.locator("#runs").get_attribute("data-columns").split("|")
    assert columns.index("fit.loss") < columns.index("config.lr")
    assert columns.index("system.rss_bytes") < columns.index("config.lr")
    assert columns.index("fit.loss") < columns.index("eval.accuracy")  # as the charts' groups
    assert columns.index("eval.accuracy") < columns.index("system.rss_bytes")

    # a chart pinned to the top stays there in the URL
    _chart(page, "eval", "accuracy").locator(".pin").click()
    expect(page.locator("#charts .chart").first).to_have_attribute("data-event", "eval")
    assert "pin=eval%3Aaccuracy" in page.url
    page.reload()
    expect(page.locator("#charts .chart").first).to_have_attribute("data-event", "eval")
    expect(page.locator("#charts h2").first).to_have_text("pinned")

    # the table filter filters the charts too
    page.fill("#filter", "plain")
    expect(_chart(page, "fit", "loss")).to_have_attribute("data-runs", "1")
    expect(_chart(page, "eval", "accuracy")).to_have_count(0)
    assert errors == []


def test_the_run_page_has_each_attempts_status_its_traceback_and_its_charts(
    serve_dir: Path, server: Server, page: Any, errors: list[str]
) -> None:
    trace = (
        "Traceback (most recent call last):\n"
        '  File "train.py", line 9, in <module>\nValueError: boom\n'
    )
    write(
        serve_dir / "r.jsonl",
        line("run_start", "r", T0, attempt=1, config={"lr": 0.1}),
        *(line("train_step", "r", T0 + s, step=s, loss=1.0 / s) for s in range(1, 6)),
        # the first was killed; the second changes the lr
        line("run_start", "r", T0 + 100, attempt=2, resume_step=5, config={"lr": 0.2}),
        *(line("train_step", "r", T0 + 100 + s, step=s, loss=1.0 / s) for s in range(6, 9)),
        line(
            "run_end",
            "r",
            T0 + 104,
            status="failed",
            exc_type="ValueError",
            exc_message="boom",
            traceback=trace,
        ),
    )

    page.goto(server.url + "#/run/r")

    view = page.locator("#view-run")
    expect(view.locator("td .badge")).to_have_text(["died", "failed"])
    expect(view.locator("tr", has_text="died")).to_contain_text("5.0 s")
    expect(view.locator("tr", has_text="ValueError: boom").first).to_contain_text("4.0 s")
    expect(view.locator("pre.trace")).to_contain_text('File "train.py", line 9, in <module>')
    expect(view.locator(".config-change")).to_have_text("lr 0.1 → 0.2")
    chart = _chart(page, "train_step", "loss", board=".run-charts")
    expect(chart).to_have_attribute("data-points", "8")
    assert errors == []


def test_a_run_that_starts_while_the_page_is_open_is_drawn_while_following(
    serve_dir: Path, server: Server, page: Any, errors: list[str]
) -> None:
    for name in "abcde":
        train(serve_dir, name, range(1, 4))
    page.goto(server.url)
    chart = _chart(page, "train_step", "loss")
    expect(chart).to_have_attribute("data-runs", "5")  # as many as are selected at first
    follow = page.locator("#follow")
    expect(follow).to_be_visible()
    expect(follow).to_be_checked()

    train(serve_dir, "f", range(1, 4))

    expect(chart).to_have_attribute("data-runs", "6")
    follow.uncheck()
    train(serve_dir, "g", range(1, 4))
    expect(page.locator('#runs tr[data-run="g"]')).to_be_visible()
    expect(page.locator('#runs tr[data-run="g"] input')).not_to_be_checked()
    expect(chart).to_have_attribute("data-runs", "6")
    assert errors == []


def _page_table(page: Any) -> dict[str, dict[str, str]]:
    """Return the run table as the page shows it: run -> column -> the cell's text."""
    table: dict[str, dict[str, str]] = page.evaluate(
        """() => {
          const columns = document.getElementById("runs").dataset.columns.split("|");
          const rows = {};
          for (const tr of document.querySelectorAll("#runs tbody tr")) {
            const cells = [...tr.children].slice(1);  // after the checkbox
            const text = (cell) => (cell.querySelector(".badge") || cell).textContent;
            rows[tr.dataset.run] = Object.fromEntries(columns.map((c, i) => [c, text(cells[i])]));
          }
          return rows;
        }"""
    )
    return table


def _as_shown(value: Any) -> str:
    """Return how the page shows a number of runs() (4 significant digits), NaN as NaN."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def test_the_page_states_the_status_attempts_duration_and_values_runs_gives(
    tmp_path: Path, page: Any, errors: list[str]
) -> None:
    sources = awkward_logs(tmp_path)
    with ExitStack() as held:  # the live writers of `live` and `stuck`
        for name in ("live", "stuck"):
            held.enter_context(FileLock(lock_path(sources[2] / f"{name}.jsonl")))
        with (
            freeze_time(datetime.fromtimestamp(NOW, UTC)),
            pytest.warns(RunlinesWarning, match="torn.jsonl: skipped 1 line"),
        ):
            table = runlines.runs(*sources)
        with Server(*sources, port=0) as server:
            server._http.clock = lambda: NOW
            server.store.catch_up(1 << 30)
            page.goto(server.url)
            expect(page.locator("#runs tbody tr")).to_have_count(len(table))
            shown = _page_table(page)
            page.goto(server.url + "#/run/killed")
            expect(page.locator("#view-run td .badge")).to_have_text(["died", "ok"])
            expect(page.locator("#view-run tr", has_text="died")).to_contain_text("1.0 s")

    for row in table.to_dict("records"):
        cells = shown[row["run"]]
        assert cells["status"] == row["status"], row["run"]
        assert cells["attempts"] == str(row["attempts"]), row["run"]
        assert cells["duration_s"] == f"{row['duration_s']:.1f} s", row["run"]
        for column in ("step", "train_step.loss", "train_step.loss.best"):
            assert cells[column] == _as_shown(row[column]), (row["run"], column)
    assert shown["nan"]["train_step.loss"] == "NaN"
    assert errors == []


def _lr_sweep(root: Path) -> None:
    """Three learning rates, two seeds each, with tokens on every record."""
    for lr in (0.1, 0.01, 0.001):
        for seed in range(2):
            config = {"lr": lr, "seed": seed}
            with Run(f"lr{lr}-s{seed}", root, stdout=False, config=config) as run:
                for step in range(1, 8):
                    run.log("train_step", step=step, tokens=step * 64, loss=lr / step + seed)


def test_group_by_draws_a_band_per_group_and_the_url_round_trips(
    serve_dir: Path, server: Server, page: Any, browser: Any, errors: list[str]
) -> None:
    _lr_sweep(serve_dir)
    page.goto(server.url)
    expect(page.locator("#runs tbody tr")).to_have_count(6)
    page.click("#select-none")
    for run in ("lr0.1-s0", "lr0.1-s1", "lr0.01-s0", "lr0.01-s1"):
        page.check(f'#runs tr[data-run="{run}"] input')
    expect(_chart(page, "train_step", "loss")).to_be_visible()

    page.select_option("#group-by", "lr")
    chart = _chart(page, "train_step", "loss", "#group-charts")
    expect(chart).to_have_attribute("data-bands", "2")  # the two lr of the selected runs
    expect(chart.locator(".u-legend .u-series th")).to_contain_text(["lr=0.01", "lr=0.1"])
    expect(page.locator("#charts")).to_be_hidden()
    box = chart.locator(".u-over").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    expect(chart.locator(".u-legend")).to_contain_text(re.compile(r"\(n=2\)"))  # two seeds each
    page.select_option("#x-axis", "field:tokens")
    page.check("#log-x")
    page.select_option("#band", "minmax")
    page.check("#faint")
    expect(chart).to_have_attribute("data-x", "tokens")
    expect(chart).to_have_attribute("data-axes", "true|false|minmax")
    expect(chart).to_have_attribute("data-runs", "4")  # faintly, behind the bands

    url = page.url
    for kept in ("group=lr", "x=tokens", "logx=1", "band=minmax", "faint=1", "run=lr0.1-s0"):
        assert kept in url
    again = browser.new_page()
    again.set_default_timeout(WAIT_MS)
    again.on("pageerror", lambda err: errors.append(str(err)))
    again.goto(url)
    reopened = _chart(again, "train_step", "loss", "#group-charts")
    expect(reopened).to_have_attribute("data-bands", "2")
    expect(reopened).to_have_attribute("data-x", "tokens")
    expect(reopened).to_have_attribute("data-axes", "true|false|minmax")
    expect(reopened).to_have_attribute("data-runs", "4")
    expect(again.locator("#group-by")).to_have_value("lr")
    expect(again.locator("#x-axis")).to_have_value("field:tokens")
    expect(again.locator("#runs tr.selected")).to_have_count(4)
    assert again.url == url
    again.close()
    assert errors == []
