"""`run.close(status="pruned")`: a run a sweep stopped early ends with its own status."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import runlines
from runlines.cli import main


def test_a_pruned_run_ends_pruned_in_its_log_runs_and_show(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = runlines.Run("trial", run_dir, stdout=False)
    run.log("report", step=1, loss=0.9)

    run.close(status="pruned")

    end = json.loads(run.path.read_text().splitlines()[-1])
    assert (end["event"], end["status"]) == ("run_end", "pruned")
    assert runlines.runs(run.path).loc[0, "status"] == "pruned"
    assert main(["show", str(run.path)]) == 0
    assert "status    pruned" in capsys.readouterr().out


def test_another_status_is_refused_and_the_run_goes_on(run_dir: Path) -> None:
    run = runlines.Run("trial", run_dir, stdout=False)

    with pytest.raises(ValueError, match=r"close\(status='failed'\) is not a status; pass one of"):
        run.close(status="failed")  # type: ignore[arg-type]
    run.log("report", step=2, loss=0.5)
    run.close()

    events = [json.loads(line)["event"] for line in run.path.read_text().splitlines()]
    assert events == ["run_start", "report", "run_end"]
