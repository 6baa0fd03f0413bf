"""The drop-in against the real wandb (offline): the same script gives the same values at the
same steps; tee=True writes both; the HF Trainer's report_to="wandb" runs on install()."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import runlines.compat.wandb as dropin
from _optional import skip_without
from compat._wandb_files import child_env, history
from runlines.compat._keys import DEFAULT_EVENT
from runlines.reading import iter_events

skip_without("wandb")

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.chdir(tmp_path)


def script(wandb: ModuleType | Any, directory: Path) -> None:
    """Training code written for wandb: commits, given steps, a late step, summaries."""
    run = wandb.init(project="proj", name="same", dir=str(directory), config={"lr": 0.1})
    for step in range(5):
        wandb.log({"train/loss": 1.0 / (step + 1), "lr": 0.1 * step})
    wandb.log({"eval/loss": 0.5}, commit=False)
    wandb.log({"eval/score": 3})
    wandb.log({"train/loss": 0.1}, step=9)
    wandb.log({"train/grad": 2.0}, step=9)
    wandb.log({"train/loss": 0.7}, step=4)  # before the current step: both ignore it
    wandb.log({"train/loss": 0.05})
    wandb.summary["best"] = 3
    assert run.summary["train/loss"] == 0.05
    run.finish()


def real_values(directory: Path) -> dict[tuple[int, str], Any]:
    (run_dir,) = (directory / "wandb").glob("offline-run-*")
    return {
        (row["_step"], key): value
        for row in history(run_dir)
        for key, value in row.items()
        if not key.startswith("_")
    }


def real_values_written(directory: Path, deadline_s: float = 30.0) -> dict[tuple[int, str], Any]:
    """Return real_values() once its history is in the file: wandb's finish() of a second run
    in one process returns before its service wrote the last records."""
    give_up = time.monotonic() + deadline_s
    while not (values := real_values(directory)) and time.monotonic() < give_up:
        time.sleep(0.05)  # polling the file, with a deadline
    return values


def dropin_values(log: Path) -> dict[tuple[int, str], Any]:
    values = {}
    for record in iter_events(log):
        event = record["event"]
        if event in ("train", "eval", DEFAULT_EVENT):
            for field, value in record.items():
                if field not in ("ts", "event", "run", "step"):
                    key = field if event == DEFAULT_EVENT else f"{event}/{field}"
                    values[(record["step"], key)] = value
    return values


def test_the_same_script_gives_the_same_values_at_the_same_steps(tmp_path: Path) -> None:
    import wandb

    script(wandb, tmp_path / "real")
    script(dropin, tmp_path / "dropin")

    expected = real_values(tmp_path / "real")
    assert (9, "train/grad") in expected  # the step 9 commit, made by the next log
    assert dropin_values(tmp_path / "dropin" / "proj" / "same.jsonl") == expected


def test_tee_writes_the_runlines_log_and_the_real_run(tmp_path: Path) -> None:
    run = dropin.init(project="proj", name="both", dir=str(tmp_path), tee=True)
    dropin.define_metric("train/loss", goal="minimize")
    dropin.log({"train/loss": 0.5})
    dropin.log({"train/loss": 0.25})
    dropin.config.update({"seed": 1})
    dropin.finish()

    assert run.path is not None
    assert dropin_values(run.path) == real_values_written(tmp_path)


HF_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import runlines.compat.wandb
    runlines.compat.wandb.install()

    import torch
    from transformers import BertConfig, BertForSequenceClassification, Trainer
    from transformers import TrainingArguments

    class Tokens(torch.utils.data.Dataset):
        def __init__(self, size):
            g = torch.Generator().manual_seed(0)
            self.ids = torch.randint(1, 50, (size, 8), generator=g)
            self.labels = torch.randint(0, 2, (size,), generator=g)
        def __len__(self):
            return len(self.labels)
        def __getitem__(self, i):
            return {"input_ids": self.ids[i], "labels": self.labels[i]}

    torch.manual_seed(0)
    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=32)
    args = TrainingArguments(output_dir=sys.argv[1], run_name="hf", report_to="wandb",
                             max_steps=6, logging_steps=2, eval_strategy="steps",
                             eval_steps=3, per_device_train_batch_size=4, use_cpu=True,
                             save_strategy="no", disable_tqdm=True)
    trainer = Trainer(model=BertForSequenceClassification(config), args=args,
                      train_dataset=Tokens(16), eval_dataset=Tokens(8))
    trainer.train()
    import wandb
    print(json.dumps({"module": wandb.__name__, "run": wandb.run.name}))  # finished at exit
    """
)


def test_the_hf_trainer_reports_to_the_drop_in_after_install(tmp_path: Path) -> None:
    skip_without("transformers")
    env = child_env(WANDB_PROJECT="hf", PYTHONPATH=os.pathsep.join(sys.path))

    done = subprocess.run(
        [sys.executable, "-c", HF_SCRIPT, str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )

    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "module": "runlines.compat.wandb",
        "run": "hf",
    }
    log = tmp_path / "runs" / "hf" / "hf.jsonl"
    records = list(iter_events(log))
    (start,) = [r for r in records if r["event"] == "run_start"]
    assert start["config"]["max_steps"] == 6
    assert start["config"]["model/num_parameters"] > 0
    train = [(r["step"], r["loss"]) for r in records if r["event"] == "train" and "loss" in r]
    evals = [r["step"] for r in records if r["event"] == "eval"]
    assert [step for step, _ in train] == [2, 4, 6]
    assert evals == [3, 6]
    (summary,) = [r for r in records if r["event"] == "summary"]
    assert summary["values"]["metrics.train_runtime"] > 0
    assert "metrics.train_loss" in summary["values"]
