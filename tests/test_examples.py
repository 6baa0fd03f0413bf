"""The example training run works end to end and reads its own log back."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import runlines

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "train.py"


def test_train_example_logs_and_summarizes_its_run(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--epochs", "3", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert "validation accuracy:" in done.stdout
    frame = runlines.load(tmp_path / "spirals.jsonl")
    events = set(frame.event)
    assert {"run_start", "batch", "eval", "span", "artifact", "run_end"} <= events
    assert frame[frame.event == "run_end"].status.iloc[-1] == "ok"
    assert int(frame[frame.event == "batch"].n.sum()) == 3 * 125  # every batch counted
