"""The dashboard's run table agrees with `runlines.runs()` and `runlines ls --json`."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from _serve_helpers import NOW, Client, awkward_logs
from filelock import FileLock
from freezegun import freeze_time

import runlines
from runlines.cli import main
from runlines.dashboard import Server
from runlines.errors import RunlinesWarning
from runlines.reading import lock_path


@pytest.fixture(name="sources")
def _sources(tmp_path: Path) -> Iterator[list[Path]]:
    sources = awkward_logs(tmp_path)
    with ExitStack() as held:  # the live writers of `live` and `stuck`
        for name in ("live", "stuck"):
            held.enter_context(FileLock(lock_path(sources[2] / f"{name}.jsonl")))
        yield sources


def _served(sources: list[Path], page: str = "/api/runs") -> dict[str, dict[str, Any]]:
    """Return each run's row; with *page* `/api/run`, each run's page."""
    with Server(*sources, port=0) as server:
        server._http.clock = lambda: NOW
        server.store.catch_up(1 << 30)  # the whole history, as the reader thread gets to it
        client = Client(server)
        rows = client.json("/api/runs")
        if page == "/api/run":
            return {row["run"]: client.json(f"/api/run?run={row['run']}") for row in rows}
    return {row["run"]: row for row in rows}


def _at_now() -> Any:
    return freeze_time(datetime.fromtimestamp(NOW, UTC))


def _same(served: Any, read: Any) -> bool:
    """Whether a served value (NaN as "NaN") and a value read by runs() or ls are the same."""
    if (isinstance(read, float) and math.isnan(read)) or read is None:
        return served in (None, "NaN")
    if isinstance(read, (pd.Timestamp, datetime)):
        return datetime.fromisoformat(served) == read
    return bool(served == read)


def test_api_runs_has_the_keys_statuses_and_values_of_runlines_runs(sources: list[Path]) -> None:
    served = _served(sources)
    with _at_now(), pytest.warns(RunlinesWarning, match="torn.jsonl: skipped 1 line"):
        table = runlines.runs(*sources)

    expected = {row["run"]: row for row in table.to_dict("records")}
    assert set(served) == set(expected)
    assert {run: row["status"] for run, row in served.items()} == {
        "exp1/baseline": "ok",
        "exp2/baseline": "ok",
        "rerun": "ok",
        "nan": "ok",
        "torn": "died",
        "killed": "ok",
        "live": "running",
        "stuck": "stalled",
    }
    for run, row in served.items():
        assert set(row) <= set(table.columns), run
        for column, value in expected[run].items():
            assert _same(row.get(column), value), (run, column, row.get(column), value)
    assert served["nan"]["train_step.loss"] == "NaN"
    assert served["nan"]["train_step.loss.best"] == 0.5
    assert served["rerun"]["attempts"] == 2
    assert served["rerun"]["eval.accuracy.best"] == expected["rerun"]["eval.accuracy.best"]


def test_api_runs_rows_are_the_rows_ls_json_prints(
    sources: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    served = _served(sources)
    with _at_now():
        assert main(["ls", "-r", "--json", str(sources[0].parent)]) == 0
    out, err = capsys.readouterr()
    printed = {row["run"]: row for row in json.loads(out)}

    assert "torn.jsonl: skipped 1 line" in err

    assert set(printed) == set(served)
    for run, row in served.items():
        assert set(row) == set(printed[run]), run
        for column, value in printed[run].items():
            if column == "started":
                value = datetime.fromisoformat(value)
            assert _same(row[column], value), (run, column, row[column], value)


def test_api_run_gives_each_attempt_the_status_runlines_show_json_prints(
    sources: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    pages = _served(sources, "/api/run")

    for run, page in pages.items():
        with _at_now():  # the server's clock: a live run stalled then is stalled for show too
            assert main(["show", "--json", page["path"]]) == 0
        shown = json.loads(capsys.readouterr().out)
        assert [a["status"] for a in page["attempts"]] == [
            a["status"] for a in shown["attempts"]
        ], run
    assert [a["status"] for a in pages["killed"]["attempts"]] == ["died", "ok"]
    assert [a["duration_s"] for a in pages["killed"]["attempts"]] == [1.0, 2.0]
    assert pages["killed"]["row"]["duration_s"] == 3.0
