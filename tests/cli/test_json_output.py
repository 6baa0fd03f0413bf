"""Every `--json` output is strict JSON: NaN and infinities as the log's `_nonfinite` names them."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

import runlines
from _logs import T0, line, write
from _optional import needs
from runlines.cli import main


def _strict(text: str) -> Any:
    """Parse *text* as strict JSON: a bare NaN or Infinity token fails the test."""

    def refuse(token: str) -> None:
        pytest.fail(f"{token} is not JSON: the output must name it as a string")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture(name="log")
def _log(tmp_path: Path) -> Path:
    return write(
        tmp_path / "nan.jsonl",
        line("run_start", run="nan", attempt=1),
        line("train_step", run="nan", ts=T0 + 1, step=1, loss=0.5, grad=1.0),
        line("train_step", run="nan", ts=T0 + 2, step=2, loss=math.nan, grad=math.inf),
        line("run_end", run="nan", ts=T0 + 3, attempt=1, status="ok"),
    )


def test_ls_json_names_nan_and_infinity(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ls", "--json", str(log.parent)]) == 0

    row = _strict(capsys.readouterr().out)[0]

    assert row["train_step.loss"] == "NaN"
    assert row["train_step.loss.best"] == 0.5
    assert row["train_step.grad"] == "Infinity"


def test_show_json_names_nan_and_infinity(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "--json", str(log)]) == 0

    data = _strict(capsys.readouterr().out)

    last = {item["field"]: item["value"] for item in data["last"]}
    assert last["loss"] == "NaN"
    assert last["grad"] == "Infinity"


def test_compare_json_names_infinity_and_a_missing_value_is_null(
    log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = write(
        log.parent / "other.jsonl",
        line("train_step", run="other", ts=T0 + 1, step=1, grad=-math.inf),
    )

    assert main(["compare", str(log), str(other), "--metric", "grad", "--json"]) == 0

    rows = _strict(capsys.readouterr().out)
    assert rows == [
        {"step": 1, "nan": 1.0, "other": "-Infinity"},
        {"step": 2, "nan": "Infinity", "other": None},
    ]


@needs("duckdb")
def test_query_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write(tmp_path / "r.jsonl", line("eval", run="r", step=1, loss=0.5))

    sql = "SELECT run, loss FROM records WHERE event = 'eval'"
    assert main(["query", "--json", sql, str(log)]) == 0

    assert json.loads(capsys.readouterr().out) == [{"run": "r", "loss": 0.5}]


@needs("duckdb")
def test_query_json_tells_a_logged_nan_from_a_missing_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with runlines.Run("r", tmp_path, stdout=False, system=False, on_nonfinite="ignore") as run:
        run.log("eval", step=1, loss=float("nan"))
        run.log("eval", step=2, loss=None)
        run.log("eval", step=3, loss=float("-inf"), scores=[2.5, 1.0])
        run.log("eval", step=4)

    sql = "SELECT step, loss, scores FROM records WHERE event = 'eval' ORDER BY step"
    assert main(["query", "--json", sql, str(run.path)]) == 0

    assert json.loads(capsys.readouterr().out) == [
        {"step": 1, "loss": "NaN", "scores": None},
        {"step": 2, "loss": None, "scores": None},
        {"step": 3, "loss": "-Infinity", "scores": [2.5, 1.0]},
        {"step": 4, "loss": None, "scores": None},
    ]


@needs("duckdb")
def test_query_json_writes_times_as_iso_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = write(tmp_path / "r.jsonl", line("eval", run="r", step=1, loss=0.5))

    sql = "SELECT to_timestamp(0) AS t, 1.5::DECIMAL(4, 2) AS d FROM records"
    assert main(["query", "--json", sql, str(log)]) == 0

    assert json.loads(capsys.readouterr().out) == [{"t": "1970-01-01T00:00:00+00:00", "d": 1.5}]
