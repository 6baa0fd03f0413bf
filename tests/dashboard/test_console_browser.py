"""The run page's console panel in headless Chromium (Debian's package), driven by Playwright.

Every wait is a bounded wait on a condition the page shows; none sleeps for time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _serve_helpers import CHROMIUM

from runlines import Run
from runlines.dashboard import Server

sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
if not Path(CHROMIUM).exists():
    pytest.skip("needs Debian's chromium: apt-get install chromium", allow_module_level=True)

expect = sync_api.expect
QUIET: dict[str, Any] = {"stdout": False, "system": False, "capture": False}
LINES = 300
INJECTION = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>'


@pytest.fixture(name="job")
def _job(serve_dir: Path) -> Path:
    """A run whose console has LINES lines: an HTML injection, a coloured CUDA error, steps."""
    with Run("job", serve_dir, **QUIET) as run:
        run.log("train_step", step=1, loss=0.5)
    lines = [f"1796231348.{n:03d} out step {n}\n" for n in range(LINES)]
    lines[250] = f"1796231348.250 out {INJECTION}\n"
    lines[260] = "1796231348.260 err \x1b[1;31mCUDA error\x1b[0m: out of memory\x07\n"
    (serve_dir / "job.console.log").write_text("".join(lines))
    with Run("plain", serve_dir, **QUIET) as run:
        run.log("train_step", step=1, loss=0.5)
    return serve_dir


def _console(page: Any) -> Any:
    return page.locator("#console")


def test_the_tail_shows_as_text_coloured_and_pages_back(
    job: Path, server: Server, page: Any, errors: list[str]
) -> None:
    page.goto(server.url + "#/run/job")
    lines = _console(page).locator(".console-line")

    expect(lines).to_have_count(200)
    expect(lines.last.locator(".console-text")).to_have_text(f"step {LINES - 1}")
    injected = lines.filter(has_text="onerror")
    expect(injected.locator(".console-text")).to_have_text(INJECTION)  # shown, not obeyed
    expect(_console(page).locator("img, script")).to_have_count(0)
    assert page.evaluate("window.pwned") is None
    error = lines.filter(has_text="CUDA error")
    expect(error).to_have_attribute("data-stream", "err")
    expect(error.locator(".console-text")).to_have_text("CUDA error: out of memory")
    colour = error.locator("span.ansi").first
    expect(colour).to_have_text("CUDA error")
    style = colour.evaluate("s => [getComputedStyle(s).color, getComputedStyle(s).fontWeight]")
    assert style == ["rgb(194, 54, 33)", "700"]  # SGR 1;31: bold, red
    expect(_console(page).locator(".console-status")).to_contain_text("last 200 line(s)")

    _console(page).locator(".console-more").click()

    expect(lines).to_have_count(LINES)
    expect(lines.first.locator(".console-text")).to_have_text("step 0")
    expect(_console(page).locator(".console-more")).to_be_hidden()
    assert errors == []


def test_a_search_finds_a_line_and_clearing_it_shows_the_tail_again(
    job: Path, server: Server, page: Any, errors: list[str]
) -> None:
    page.goto(server.url + "#/run/job")
    lines = _console(page).locator(".console-line")
    expect(lines).to_have_count(200)
    search = _console(page).locator(".console-search")

    search.fill("cuda ERROR")
    search.press("Enter")

    expect(lines).to_have_count(1)
    expect(lines.first.locator(".console-text")).to_have_text("CUDA error: out of memory")
    expect(_console(page).locator(".console-status")).to_have_text("1 matching line(s)")

    _console(page).locator(".console-regex").check()
    search.fill(r"^step 1\d$")
    search.press("Enter")
    expect(lines).to_have_count(10)
    expect(lines.first.locator(".console-text")).to_have_text("step 10")

    search.fill("")
    expect(lines).to_have_count(200)
    assert errors == []


def test_a_bad_pattern_says_what_is_wrong(job: Path, server: Server, page: Any) -> None:
    page.goto(server.url + "#/run/job")
    expect(_console(page).locator(".console-line")).to_have_count(200)
    _console(page).locator(".console-regex").check()
    search = _console(page).locator(".console-search")

    search.fill("(unclosed")
    search.press("Enter")

    expect(_console(page).locator(".console-status")).to_contain_text(
        "not a valid regular expression"
    )


def test_a_run_without_a_console_says_so(
    job: Path, server: Server, page: Any, errors: list[str]
) -> None:
    page.goto(server.url + "#/run/plain")

    expect(_console(page)).to_contain_text("no console captured")
    assert errors == []


def test_the_tail_grows_as_the_run_prints(
    job: Path, server: Server, page: Any, errors: list[str]
) -> None:
    page.goto(server.url + "#/run/job")
    lines = _console(page).locator(".console-line")
    expect(lines).to_have_count(200)

    with (job / "job.console.log").open("a") as side:
        side.write("1796231349.000 out a line printed since\n")

    expect(lines).to_have_count(201)  # appended, the lines shown before kept
    expect(lines.last.locator(".console-text")).to_have_text("a line printed since")
    expect(lines.first.locator(".console-text")).to_have_text("step 100")
    assert errors == []


def test_a_console_that_begins_later_shows_once_it_does(
    job: Path, server: Server, page: Any, errors: list[str]
) -> None:
    page.goto(server.url + "#/run/plain")
    expect(_console(page)).to_contain_text("no console captured")

    (job / "plain.console.log").write_text("1796231349.000 err now it prints\n")

    expect(_console(page).locator(".console-line .console-text")).to_have_text(["now it prints"])
    assert errors == []
