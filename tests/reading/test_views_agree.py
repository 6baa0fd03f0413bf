"""The "views agree" suite: every view states what the log says.

For each awkward log of `_awkward` (killed and resumed attempts, a rerun after `ok`, NaN and
inf, a resume without `config=`, a foreign JSONL, ranks, synced copies of live and dead runs)
and each view (`runs()`, `ls`, `show`, `compare`, `query`, the dashboard's API, `top`'s model,
the dashboard page in Chromium), each property the view states (status, attempts, duration,
last and best values, non-finite values, config, the runs listed, per-rank values) must be the
oracle's, read from the log with `json`.

One test per (log, view, property). A view is one function under `@view(...)`: it reads a
case's folder and returns, per run, what it states. A view that disagrees is marked in
`XFAILS` (strict), with the fix that removes it (none is).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
import shutil
import urllib.request
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pytest

from _awkward import CASES, Truth, direction, truth, write_cases
from _optional import skip_without
from runlines import runs
from runlines.cli import main
from runlines.cli._top import Top
from runlines.dashboard import Server

# --- what a view states ----------------------------------------------------------------------

PROPERTIES: Final = (
    "runs",  # the runs listed (a list view's)
    "status",  # the run's status: its last attempt's
    "attempts",  # each attempt's own status
    "attempt_s",  # each attempt's own duration, in seconds
    "duration",  # the run's duration, in seconds
    "last",  # `<event>.<field>` -> the last value
    "best",  # `<event>.<field>` -> the best value (None: no finite one)
    "nonfinite",  # `<event>.<field>` -> {step: "NaN" | "Infinity" | "-Infinity"}
    "config",  # the run's config, nested keys dotted
    "ranks",  # rank -> its last values
)
Seen = dict[str, dict[str, Any]]  # run -> property -> what the view states; "" -> list props
Reader = Callable[[Path, "Shared"], Seen]


def counts(nonfinite: dict[str, dict[float, str]]) -> dict[str, tuple[int, list[str]]]:
    """Return per metric the number of non-finite values and their names, as a chart says."""
    return {key: (len(steps), sorted(set(steps.values()))) for key, steps in nonfinite.items()}


@dataclass(frozen=True)
class View:
    """A view: the properties it states, how it reads a case, and how precise it is."""

    name: str
    states: tuple[str, ...]
    read: Reader
    rel: float = 1e-9  # the relative precision of its numbers
    abs_s: float = 1e-6  # the precision of its durations, seconds
    # properties the view states coarser than the oracle: how to make the oracle's as coarse
    coarse: Mapping[str, Callable[[Any], Any]] = field(default_factory=dict)


VIEWS: dict[str, View] = {}


def view(
    name: str,
    *states: str,
    rel: float = 1e-9,
    abs_s: float = 1e-6,
    coarse: Mapping[str, Callable[[Any], Any]] | None = None,
) -> Callable[[Reader], Reader]:
    """Register the function below, (folder, shared) -> Seen, as view *name*, stating
    *states* of each run.
    """
    assert set(states) <= set(PROPERTIES), states

    def register(read: Reader) -> Reader:
        VIEWS[name] = View(name, states, read, rel, abs_s, dict(coarse or {}))
        return read

    return register


class Shared:
    """What the views of one module share, started on first use: the dashboard and its page."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self._request = request

    @property
    def dashboard(self) -> Dashboard:
        dashboard: Dashboard = self._request.getfixturevalue("dashboard")
        return dashboard

    @property
    def page(self) -> Page:
        page: Page = self._request.getfixturevalue("page")
        return page


def number(value: Any) -> Any:
    """Return a JSON number or its non-finite name ("NaN", "Infinity") as a float."""
    if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity"):
        return float(value)
    return value


def flat(config: Any, prefix: str = "") -> dict[str, Any]:
    """Return a nested config with dotted keys ({} for none)."""
    out: dict[str, Any] = {}
    for key, value in (config or {}).items():
        if isinstance(value, dict) and value:
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def from_row(row: dict[str, Any], keys: list[str]) -> dict[str, Any]:
    """Return what a `runs()`-style row states: status, duration, last, best, config."""
    return {
        "status": row["status"],
        "attempts": row.get("attempts"),
        "duration": number(row.get("duration_s")),
        "last": {key: number(row.get(key)) for key in keys},
        "best": {key: number(row.get(f"{key}.best")) for key in keys},
        "config": {
            k.removeprefix("config."): v
            for k, v in row.items()
            if k.startswith("config.") and v is not None
        },
    }


def metric_keys(folder: Path) -> list[str]:
    """Return every `<event>.<field>` the oracle finds in *folder*'s runs."""
    return sorted({key for t in truth(folder).values() for key in t.values})


def cli(*argv: str) -> Any:
    """Return what `runlines ARGV` prints on stdout, as JSON; its stderr is dropped."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(argv))
    assert status == 0, err.getvalue()
    return json.loads(out.getvalue())


def series_view(rows: dict[float, Any]) -> dict[str, Any]:
    """Return last, best and non-finite values of one run's {step: value} (None: no record)."""
    logged = {step: number(v) for step, v in sorted(rows.items()) if v is not None}
    values = list(logged.values())
    return {
        "last": values[-1] if values else None,
        "finite_or_inf": [v for v in values if not math.isnan(v)],
        "nonfinite": {s: _name(v) for s, v in logged.items() if not math.isfinite(v)},
    }


def _name(value: float) -> str:
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def per_step_views(
    folder: Path, steps: Callable[[str, str, str], dict[str, dict[float, Any]]]
) -> Seen:
    """Return last, best and non-finite values from *steps*(event, field, key): run -> {step:
    value} for one metric, for views that give a metric's values step by step.
    """
    seen: Seen = {}
    oracle = truth(folder)
    for key in metric_keys(folder):
        event, field = key.split(".", 1)
        for run, rows in steps(event, field, key).items():
            if run not in oracle:
                continue
            got = series_view(rows)
            entry = seen.setdefault(run, {"last": {}, "best": {}, "nonfinite": {}})
            entry["last"][key] = got["last"]
            numbers = got["finite_or_inf"]
            way = direction(key)
            if way is not None:
                entry["best"][key] = (min if way == "min" else max)(numbers) if numbers else None
            entry["nonfinite"][key] = got["nonfinite"]
    return seen


# --- the views -------------------------------------------------------------------------------


_COUNT: Final = {"attempts": len}  # a runs() row states how many attempts, not how each ended


@view("runs()", "runs", "status", "attempts", "duration", "last", "best", "config", coarse=_COUNT)
def _runs_frame(folder: Path, shared: Shared) -> Seen:
    table = runs(folder)
    keys = metric_keys(folder)
    rows = table.astype(object).where(table.notna(), None).to_dict("records")
    seen: Seen = {row["run"]: from_row(row, keys) for row in rows}
    for row in rows:  # pandas holds a missing value and a NaN alike: ask the frame
        for key in keys:
            if key in table.columns:
                value = table.loc[table.run == row["run"], key].iloc[0]
                seen[row["run"]]["last"][key] = None if value is None else float(value)
    seen[""] = {"runs": sorted(row["run"] for row in rows)}
    return seen


@view(
    "ls --json", "runs", "status", "attempts", "duration", "last", "best", "config", coarse=_COUNT
)
def _ls_json(folder: Path, shared: Shared) -> Seen:
    rows = cli("ls", "--json", str(folder))
    keys = metric_keys(folder)
    seen: Seen = {row["run"]: from_row(row, keys) for row in rows}
    seen[""] = {"runs": sorted(row["run"] for row in rows)}
    return seen


@view("show --json", "status", "attempts", "attempt_s", "duration", "last", "config", "ranks")
def _show_json(folder: Path, shared: Shared) -> Seen:
    seen: Seen = {}
    for run in truth(folder):
        shown = cli("show", "--json", str(folder / f"{run}.jsonl"))

        def last(one: dict[str, Any]) -> dict[str, Any]:
            return {f"{m['event']}.{m['field']}": number(m["value"]) for m in one["last"]}

        seen[run] = {
            "status": shown["status"],
            "attempts": [a["status"] for a in shown["attempts"]],
            "attempt_s": [number(a["duration_s"]) for a in shown["attempts"]],
            "duration": number(shown.get("duration_s")),
            "last": last(shown),
            "config": flat(shown["config"]),
            "ranks": {0: last(shown), **{r["rank"]: last(r) for r in shown["ranks"]}},
        }
    return seen


@view("compare --json", "last", "best", "nonfinite")
def _compare_json(folder: Path, shared: Shared) -> Seen:
    def steps(event: str, field: str, key: str) -> dict[str, dict[float, Any]]:
        table = cli("compare", str(folder), "--metric", field, "--event", event, "--json")
        found: dict[str, dict[float, Any]] = {}
        for row in table:
            at = row.pop("step")
            for run, value in row.items():
                found.setdefault(run, {})[at] = value
        return found

    return per_step_views(folder, steps)


@view("query --json", "last", "best", "nonfinite")
def _query_json(folder: Path, shared: Shared) -> Seen:
    skip_without("duckdb")
    ranked = any(folder.glob("*.rank*.jsonl"))

    def steps(event: str, field: str, key: str) -> dict[str, dict[float, Any]]:
        rank = " AND coalesce(rank, 0) = 0" if ranked else ""
        sql = f"SELECT run, step, \"{field}\" AS value FROM records WHERE event = '{event}'{rank}"
        found: dict[str, dict[float, Any]] = {}
        for row in cli("query", sql, str(folder), "--json"):
            found.setdefault(row["run"], {})[row["step"]] = row["value"]
        return found

    return per_step_views(folder, steps)


@view(
    "/api/runs", "runs", "status", "attempts", "duration", "last", "best", "config", coarse=_COUNT
)
def _api_runs(folder: Path, shared: Shared) -> Seen:
    rows = [row for row in shared.dashboard.json("/api/runs") if _folder(row) == folder]
    keys = metric_keys(folder)
    seen: Seen = {row["run"]: from_row(row, keys) for row in rows}
    seen[""] = {"runs": sorted(row["run"] for row in rows)}
    return seen


@view(
    "/api/run",
    "status",
    "attempts",
    "attempt_s",
    "duration",
    "last",
    "best",
    "nonfinite",
    "config",
    "ranks",
)
def _api_run(folder: Path, shared: Shared) -> Seen:
    seen: Seen = {}
    keys = metric_keys(folder)
    for run in truth(folder):
        detail = shared.dashboard.json(f"/api/run?run={run}")
        entry = seen[run] = from_row(detail["row"], keys)
        entry["attempts"] = [a["status"] for a in detail["attempts"]]
        entry["attempt_s"] = [a["duration_s"] for a in detail["attempts"]]
        entry["config"] = flat(detail["config"])
        entry["ranks"] = {
            r["rank"]: {k: number(v) for k, v in r["last"].items() if k in keys}
            for r in detail["ranks"]
        }
        series = shared.dashboard.json(f"/api/series?run={run}")["series"]
        marks = {f"{s['event']}.{s['field']}": s["marks"] for s in series}
        entry["nonfinite"] = {
            key: {m["step"]: m["value"] for m in marks.get(key, [])} for key in keys if key in marks
        }
    return seen


@view("top", "runs", "status", "last", "ranks")
def _top_model(folder: Path, shared: Shared) -> Seen:
    top = Top([folder])
    top.refresh()
    seen: Seen = {}
    keys = metric_keys(folder)
    for row in top.rows():
        hot = row.metric.split(".", 1)[0] if row.metric else ""
        values = {key if "." in key else f"{hot}.{key}": v for key, v in row.last}
        if row.metric:
            values[row.metric] = row.value
        last = {key: values.get(key) for key in keys}
        entry = seen.setdefault(row.run, {"ranks": {}})
        entry["ranks"][row.rank or 0] = {k: v for k, v in last.items() if v is not None}
        if not row.rank:
            entry.update(status=row.status, last=last)
    seen[""] = {"runs": sorted(run for run in seen)}
    return seen


@view(
    "dashboard page",
    "runs",
    "status",
    "attempts",
    "attempt_s",
    "duration",
    "last",
    "best",
    "nonfinite",
    "config",
    rel=1e-3,  # fmt(): 4 significant digits
    abs_s=0.051,  # fmtDuration(): "12.5 s"
    coarse={"nonfinite": counts},  # a chart's title counts its marks and names them
)
def _page(folder: Path, shared: Shared) -> Seen:
    return shared.page.read(folder)


def _folder(row: dict[str, Any]) -> Path:
    """Return the folder of a dashboard row's run: the case it belongs to."""
    return Path(row["path"]).parent


# --- the dashboard, served once for every case -------------------------------------------


class Dashboard:
    """One server over every case's folder, its history read before the first request."""

    def __init__(self, server: Server) -> None:
        self.server = server
        server.store.catch_up(1 << 30)  # the whole history, as the reader thread gets to it

    def json(self, path: str) -> Any:
        """Return the JSON answer of GET *path*."""
        url = self.server.url.rstrip("/") + path
        with urllib.request.urlopen(url, timeout=30) as answer:
            return json.loads(answer.read())


def _parse_number(text: str) -> float | None:
    text = text.strip()
    return float(text) if text else None


def _parse_duration(text: str) -> float | None:
    """Return seconds from the page's "12.5 s", "1 m 50 s" or "1 h 2 m"."""
    parts = re.findall(r"([\d.]+) (h|m|s)", text)
    if not parts:
        return None
    scale = {"h": 3600.0, "m": 60.0, "s": 1.0}
    return sum(float(n) * scale[unit] for n, unit in parts)


class Page:
    """The dashboard in one Chromium page; every value is read from the page's DOM."""

    WAIT_MS: Final = 15_000

    def __init__(self, browser: Any, dashboard: Dashboard) -> None:
        self.dashboard = dashboard
        self.context = browser.new_context(viewport={"width": 1400, "height": 1000})
        self.page = self.context.new_page()
        self.page.set_default_timeout(self.WAIT_MS)
        self.page.goto(dashboard.server.url)
        self.page.wait_for_selector("#runs tbody tr[data-run]")
        self.page.wait_for_function("!document.querySelector('#runs .reading')")
        self.table = self._table()

    def _table(self) -> dict[str, dict[str, Any]]:
        """Return the run table: run -> column key -> the cell's text (the status badge's)."""
        rows: list[dict[str, Any]] = self.page.evaluate(
            """() => {
              const heads = [...document.querySelectorAll('#runs thead th')];
              const keys = heads.map((th) => th.dataset.key);
              return [...document.querySelectorAll('#runs tbody tr[data-run]')].map((tr) => {
                const link = tr.querySelector('a[href^="#/run/"]');
                const row = {_run: tr.dataset.run, _title: link.closest('td').title};
                [...tr.cells].forEach((td, i) => {
                  if (!keys[i]) return;
                  const badge = td.querySelector('.badge');
                  row[keys[i]] = badge ? badge.dataset.status : td.textContent;
                });
                return row;
              });
            }"""
        )
        return {row["_run"]: row for row in rows}

    def read(self, folder: Path) -> Seen:
        keys = metric_keys(folder)
        seen: Seen = {}
        listed = [r for r in self.table.values() if Path(r["_title"]).parent == folder]
        for row in listed:
            seen[row["_run"]] = {
                "status": row["status"],
                "duration": _parse_duration(row.get("duration_s", "")),
                "last": {key: _parse_number(row.get(key, "")) for key in keys},
                "best": {key: _parse_number(row.get(f"{key}.best", "")) for key in keys},
            }
        seen[""] = {"runs": sorted(r["_run"] for r in listed)}
        for run in truth(folder):
            if run in seen:
                seen[run].update(self._run_page(run))
                seen[run]["nonfinite"] = self._marks(run, keys)
        return seen

    def _run_page(self, run: str) -> dict[str, Any]:
        """Return the attempts' statuses and the config on the run's page."""
        self.page.goto(f"{self.dashboard.server.url}#/run/{run}")
        self.page.wait_for_function(
            "(run) => document.querySelector('#view-run h1')?.textContent === run", arg=run
        )
        shown: dict[str, Any] = self.page.evaluate(
            """() => {
              const panels = [...document.querySelectorAll('#view-run .panel')];
              const titled = (t) => panels.find((p) => p.querySelector('h2')?.textContent === t);
              const table = titled('Attempts').querySelector('table');
              const heads = [...table.querySelectorAll('thead th')].map((th) => th.textContent);
              const rows = [...table.querySelectorAll('tbody tr')];
              const cell = (tr, name) => tr.cells[heads.indexOf(name)];
              const attempts = rows.map((tr) => cell(tr, 'status').textContent);
              const durations = rows.map((tr) => cell(tr, 'duration').textContent);
              const config = {};
              for (const tr of titled('Config').querySelectorAll('table.kv tr')) {
                const [k, v] = tr.cells;
                const text = v.textContent;
                config[k.textContent] = text !== '' && !isNaN(Number(text)) ? Number(text) : text;
              }
              return {attempts, durations, config};
            }"""
        )
        durations = shown.pop("durations")
        return {**shown, "attempt_s": [_parse_duration(text) for text in durations]}

    def _marks(self, run: str, keys: list[str]) -> dict[str, Any]:
        """Return, per chart of *run* alone, the count and names of its non-finite marks."""
        self.page.goto(self.dashboard.server.url)
        self.page.wait_for_selector(f'#runs tr[data-run="{run}"]')
        self.page.click("#select-none")
        self.page.check(f'#runs tr[data-run="{run}"] input')
        # every chart drawn from this run alone: the first load's own selection may still land
        self.page.wait_for_function(
            """(run) => {
              const charts = [...document.querySelectorAll('.chart')];
              return charts.length > 0 && charts.every((c) => c.dataset.runs === '1'
                && [...c.querySelectorAll('.u-legend .u-series:not(.raw) th')]
                  .some((th) => th.textContent === run));
            }""",
            arg=run,
        )
        charts: list[dict[str, Any]] = self.page.evaluate(
            """() => [...document.querySelectorAll('.chart')].map((c) => ({
                key: c.dataset.event + '.' + c.dataset.field,
                count: Number(c.dataset.nonfinite || 0),
                label: c.querySelector('.marks').textContent}))"""
        )
        found = {}
        for chart in charts:
            if chart["key"] in keys:
                names = sorted(set(re.findall(r"-?Infinity|NaN", chart["label"])))
                found[chart["key"]] = (chart["count"], names)
        return found


# --- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="session", name="folders")
def _folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_cases(tmp_path_factory.mktemp("awkward"))


@pytest.fixture(scope="module", name="dashboard")
def _dashboard(folders: dict[str, Path]) -> Iterator[Dashboard]:
    with Server(*folders.values(), port=0) as server:
        with warnings.catch_warnings():  # its notes (a foreign log left out) are not judged here
            warnings.simplefilter("ignore")
            dashboard = Dashboard(server)
        yield dashboard


@pytest.fixture(scope="module", name="page")
def _page_fixture(dashboard: Dashboard) -> Iterator[Page]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(chromium).exists():
        pytest.skip("needs Debian's chromium: apt-get install chromium")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium)
        page = Page(browser, dashboard)
        yield page
        page.context.close()
        browser.close()


@pytest.fixture(scope="module", name="cache")
def _cache() -> dict[tuple[str, str], Seen]:
    return {}


@pytest.fixture(name="seen")
def _seen(
    request: pytest.FixtureRequest,
    folders: dict[str, Path],
    cache: dict[tuple[str, str], Seen],
) -> Callable[[str, str], Seen]:
    """Return what a view states of a case, read once per module."""

    def seen(case: str, name: str) -> Seen:
        if (case, name) not in cache:
            with warnings.catch_warnings():  # a view's notes (a foreign log left out) are no
                warnings.simplefilter("ignore")  # statement of a run; the suite makes them errors
                cache[case, name] = VIEWS[name].read(folders[case], Shared(request))
        return cache[case, name]

    return seen


# --- the oracle's side -----------------------------------------------------------------------


def expected(prop: str, oracle: dict[str, Truth], run: str) -> Any:
    """Return what the log says of property *prop* of *run*."""
    t = oracle[run]
    return {
        "status": t.status,
        "attempts": [a.status for a in t.attempts],
        "attempt_s": [a.duration_s for a in t.attempts],
        "duration": t.duration_s,
        "last": t.last,
        "best": t.best,
        "nonfinite": t.nonfinite,
        "config": flat(t.config),
        "ranks": t.ranks,
    }[prop]


def _coarse(prop: str, value: Any) -> Any:
    """Return *value* as a view that states *prop* as counts states it."""
    if prop == "nonfinite":
        return {key: (len(steps), sorted(set(steps.values()))) for key, steps in value.items()}
    return value


def same(a: Any, b: Any, *, rel: float, abs_s: float = 0.0) -> bool:
    """Whether *a* and *b* are the same: NaN is NaN, None is None, numbers within *rel*."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], rel=rel, abs_s=abs_s) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(
            same(x, y, rel=rel, abs_s=abs_s) for x, y in zip(a, b, strict=True)
        )
    if isinstance(a, bool) or isinstance(b, bool):
        return bool(a == b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=rel, abs_tol=abs_s)
    return bool(a == b)


# --- views that disagree: a strict xfail each, naming the fix that removes it ------------------

_PAGES: Final = ("show --json", "/api/run", "dashboard page")  # views with an attempts table
XFAILS: Final[dict[tuple[str, str, str], str]] = {}  # none: every view agrees


def _cases() -> Iterator[Any]:
    for case in CASES:
        for name, one in VIEWS.items():
            for prop in one.states:
                marks = []
                reason = XFAILS.get((case, name, prop))
                if reason is not None:
                    marks.append(pytest.mark.xfail(strict=True, reason=reason))
                yield pytest.param(case, name, prop, marks=marks, id=f"{case}-{name}-{prop}")


_PER_METRIC: Final = ("last", "best", "nonfinite")


@pytest.mark.parametrize(("case", "name", "prop"), list(_cases()))
def test_every_view_states_what_the_log_says(
    case: str,
    name: str,
    prop: str,
    folders: dict[str, Path],
    seen: Callable[[str, str], Seen],
) -> None:
    one = VIEWS[name]
    oracle = truth(folders[case])
    stated = seen(case, name)
    if prop == "runs":
        assert stated[""]["runs"] == sorted(oracle), name
        return
    for run in oracle:
        assert run in stated, f"{name} does not show run {run!r}"
        want = expected(prop, oracle, run)
        if prop in one.coarse:
            want = one.coarse[prop](want)
        got = stated[run].get(prop)
        if prop in _PER_METRIC and isinstance(got, dict):  # the run's own metrics are checked
            got = {key: got.get(key) for key in want}
        if prop == "ranks" and isinstance(got, dict):
            got = {r: {k: v.get(k) for k in want.get(r, {})} for r, v in got.items()}
        assert same(got, want, rel=one.rel, abs_s=one.abs_s), (run, prop, got, want)


# --- the logs are the awkward ones the issue describes -----------------------------------------

SHAPES: Final = {
    "killed": {"job": ["died", "ok"], "dead": ["died"]},  # a restart continues
    "rerun": {"baseline": ["ok"], "baseline-2": ["ok"]},  # a rerun after ok is a new run
    "nonfinite": {"nan": ["ok"], "short": ["ok"]},
    "noconfig": {"tuned": ["failed", "ok"]},  # a restart continues
    "foreign": {"real": ["ok"]},
    "ranks": {"dist": ["ok"]},
    "media": {"gallery": ["ok"]},
    # copies sync made: live at the source (old records: stalled), a stopped watcher's,
    # killed between two passes, ended ok
    "synced": {"live": ["stalled"], "gone": ["died"], "crashed": ["died"], "done": ["ok"]},
}


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            case,
            marks=[],
        )
        for case in CASES
    ],
)
def test_each_awkward_log_holds_the_runs_and_attempts_it_should(
    case: str, folders: dict[str, Path]
) -> None:
    oracle = truth(folders[case])
    assert {run: [a.status for a in t.attempts] for run, t in oracle.items()} == SHAPES[case]
    nan = oracle.get("nan")
    if nan is not None:
        assert nan.nonfinite["train_step.loss"] == {5: "NaN", 9: "Infinity", 10: "Infinity"}
    if case == "rerun":
        assert [oracle[run].config for run in ("baseline", "baseline-2")] == [
            {"lr": 1e-3},
            {"lr": 1e-2},
        ]
