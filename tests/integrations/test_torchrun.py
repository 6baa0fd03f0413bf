"""examples/torchrun_train.py under a real `torchrun --nproc_per_node=2`: gloo on CPU, DDP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from _optional import skip_without

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "torchrun_train.py"
STEPS = 12
EVAL_EVERY = 6


# torch 2.13's gloo backend now and then aborts a worker as its process exits, after
# destroy_process_group() and after the run's logs are complete (1 launch in ~40 here, with or
# without runlines): such a launch is tried again.
TORCH_EXIT_ABORT = "terminate called without an active exception"
LAUNCHES = 3


@pytest.fixture(scope="module", name="launched")
def _launched(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """Run the example on 2 processes; return its log directory and the launcher's stdout."""
    skip_without("torch")
    for _ in range(LAUNCHES):
        out = tmp_path_factory.mktemp("ddp")
        done = _launch(out)
        if done.returncode == 0 or TORCH_EXIT_ABORT not in done.stderr:
            break
    assert done.returncode == 0, done.stderr[-5000:]
    return out, done.stdout


def _launch(out: Path) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",  # a free port of its own for the rendezvous
        "--nproc_per_node=2",
        str(EXAMPLE),
        *("--out", str(out), "--name", "ddp"),
        *("--steps", str(STEPS), "--eval-every", str(EVAL_EVERY)),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        command, capture_output=True, text=True, timeout=180, cwd=out, env=env, check=False
    )


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_each_rank_writes_a_log_of_its_own(launched: tuple[Path, str]) -> None:
    out, _ = launched

    assert sorted(p.name for p in out.glob("*.jsonl")) == ["ddp.jsonl", "ddp.rank1.jsonl"]
    assert {r["rank"] for r in _records(out / "ddp.jsonl")} == {0}
    assert {r["rank"] for r in _records(out / "ddp.rank1.jsonl")} == {1}


@pytest.mark.parametrize("file_name", ["ddp.jsonl", "ddp.rank1.jsonl"])
def test_every_record_of_a_rank_is_present_once(launched: tuple[Path, str], file_name: str) -> None:
    records = _records(launched[0] / file_name)
    steps = [r for r in records if r["event"] == "train_step"]
    events = Counter(r["event"] for r in records)

    assert (events["run_start"], events["run_end"]) == (1, 1)
    assert records[-1]["status"] == "ok"
    assert records[0]["world_size"] == 2
    assert len({r["step"] for r in steps}) == len(steps)
    assert sum(r["n"] for r in steps) == STEPS  # sampled: every call counted once
    assert [r["step"] for r in records if r["event"] == "eval"] == [6, 12]
    assert events["span"] == STEPS // EVAL_EVERY
    assert all(isinstance(r["loss"], float) for r in steps)  # tensors written as numbers


def test_only_rank_0_writes_to_stdout(launched: tuple[Path, str]) -> None:
    out, stdout = launched
    printed = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]

    assert printed == _records(out / "ddp.jsonl")


def test_load_returns_one_run_with_a_rank_column(launched: tuple[Path, str]) -> None:
    from runlines.reading import load

    frame = load(launched[0])

    assert list(frame["run"].unique()) == ["ddp"]
    assert sorted(frame["rank"].unique()) == [0, 1]
    assert len(frame) == sum(len(_records(p)) for p in launched[0].glob("*.jsonl"))


def test_show_summarizes_each_rank(
    launched: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    from runlines.cli import main

    assert main(["show", str(launched[0] / "ddp.jsonl")]) == 0

    shown = capsys.readouterr().out
    assert "ddp" in shown
    assert "rank 1" in shown
