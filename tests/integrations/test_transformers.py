"""RunlinesCallback on a real Trainer: a tiny BERT built from a config, a few steps on CPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers")

import torch
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    Trainer,
    TrainerControl,
    TrainerState,
    TrainingArguments,
)

from runlines import Run
from runlines.artifacts import hash_path
from runlines.integrations.transformers import RunlinesCallback

SECRET = "hf_Zq8cW3vT1mK9pL2xR7nB4yH6jD0sF5gA"


class _Tokens(torch.utils.data.Dataset[dict[str, torch.Tensor]]):
    """Random token sequences of length 8 with 0/1 labels."""

    def __init__(self, size: int, seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(1, 50, (size, 8), generator=generator)
        self.labels = torch.randint(0, 2, (size,), generator=generator)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {
            "input_ids": self.ids[index],
            "attention_mask": torch.ones(8, dtype=torch.long),
            "labels": self.labels[index],
        }


def _tiny_bert() -> BertForSequenceClassification:
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=50,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
    )
    return BertForSequenceClassification(config)


def _arguments(output_dir: Path, **overrides: Any) -> TrainingArguments:
    options: dict[str, Any] = {
        "output_dir": str(output_dir),
        "run_name": "tiny-bert",
        "max_steps": 4,
        "logging_steps": 1,
        "eval_strategy": "steps",
        "eval_steps": 2,
        "save_steps": 2,
        "per_device_train_batch_size": 4,
        "per_device_eval_batch_size": 4,
        "report_to": [],
        "use_cpu": True,
        "disable_tqdm": True,
        "hub_token": SECRET,
    }
    options.update(overrides)
    return TrainingArguments(**options)


def _train(args: TrainingArguments, callback: RunlinesCallback) -> None:
    trainer = Trainer(
        model=_tiny_bert(),
        args=args,
        train_dataset=_Tokens(16, seed=0),
        eval_dataset=_Tokens(8, seed=1),
        callbacks=[callback],
    )
    trainer.train()


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module", name="output_dir")
def _output_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Trainer run of 4 steps, evaluated and saved every 2, logged by RunlinesCallback."""
    output_dir = tmp_path_factory.mktemp("trainer")
    _train(_arguments(output_dir), RunlinesCallback(stdout=False))
    return output_dir


@pytest.fixture(name="records")
def _logged(output_dir: Path) -> list[dict[str, Any]]:
    return _records(output_dir / "tiny-bert.jsonl")


def _of(records: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [record for record in records if record["event"] == event]


def test_run_is_named_from_run_name_and_written_to_output_dir(output_dir: Path) -> None:
    assert sorted(p.name for p in output_dir.glob("*.jsonl")) == ["tiny-bert.jsonl"]


def test_train_steps_carry_step_and_lr(records: list[dict[str, Any]]) -> None:
    steps = _of(records, "train_step")

    assert [record["step"] for record in steps] == [1, 2, 3, 4]
    assert all({"loss", "lr", "grad_norm", "epoch"} <= record.keys() for record in steps)
    assert not any("learning_rate" in record for record in steps)


def test_eval_records_drop_the_eval_prefix(records: list[dict[str, Any]]) -> None:
    evals = _of(records, "eval")

    assert [record["step"] for record in evals] == [2, 4]
    assert all({"loss", "duration_s", "samples_per_s", "epoch"} <= r.keys() for r in evals)
    assert not any(key.startswith("eval_") for record in evals for key in record)


def test_each_evaluation_is_a_span_after_its_record(records: list[dict[str, Any]]) -> None:
    spans = _of(records, "span")
    events = [record["event"] for record in records]

    assert [(s["name"], s["step"], s["status"]) for s in spans] == [
        ("eval", 2, "ok"),
        ("eval", 4, "ok"),
    ]
    assert all(span["duration_s"] > 0 for span in spans)
    assert events.index("span") == events.index("eval") + 1
    assert _of(records, "run_end")[0]["spans"]["eval"]["count"] == 2


def test_every_checkpoint_is_an_artifact_with_its_hash(
    output_dir: Path, records: list[dict[str, Any]]
) -> None:
    artifacts = _of(records, "artifact")

    assert [(a["name"], a["path"], a["step"]) for a in artifacts] == [
        ("checkpoint", "checkpoint-2", 2),
        ("checkpoint", "checkpoint-4", 4),
    ]
    assert artifacts[-1]["sha256"] == hash_path(output_dir / "checkpoint-4")
    assert artifacts[-1]["format"] == "dir"


def test_train_summary_is_a_train_end_record(records: list[dict[str, Any]]) -> None:
    (end,) = _of(records, "train_end")

    assert end["step"] == 4
    assert {"loss", "duration_s", "samples_per_s", "steps_per_s", "total_flos"} <= end.keys()


def test_run_starts_with_the_arguments_and_ends_ok(records: list[dict[str, Any]]) -> None:
    config = records[0]["config"]

    assert records[0]["event"] == "run_start"
    assert config["max_steps"] == 4
    assert config["eval_steps"] == 2
    assert records[-1]["event"] == "run_end"
    assert records[-1]["status"] == "ok"


def test_secrets_in_the_arguments_never_reach_the_log(output_dir: Path) -> None:
    assert SECRET not in (output_dir / "tiny-bert.jsonl").read_text()


def test_callback_joins_a_run_of_your_own_and_leaves_it_open(tmp_path: Path) -> None:
    with Run("mine", tmp_path, stdout=False) as run:
        args = _arguments(tmp_path / "out", max_steps=2, eval_strategy="no", save_strategy="no")
        _train(args, RunlinesCallback(run=run))

        assert not run.closed
        run.log("after_training", ok=True)

    events = [record["event"] for record in _records(tmp_path / "mine.jsonl")]
    assert events.count("run_start") == 1
    assert events[-2:] == ["after_training", "run_end"]
    assert "train_end" in events


def test_training_resumed_from_a_checkpoint_appends_an_attempt(tmp_path: Path) -> None:
    args = _arguments(tmp_path, eval_strategy="no")
    _train(args, RunlinesCallback(stdout=False))

    trainer = Trainer(
        model=_tiny_bert(),
        args=args,
        train_dataset=_Tokens(16, seed=0),
        callbacks=[RunlinesCallback(stdout=False)],
    )
    trainer.train(resume_from_checkpoint=str(tmp_path / "checkpoint-2"))

    records = _records(tmp_path / "tiny-bert.jsonl")
    starts = [r for r in records if r["event"] == "run_start"]
    assert [(r["attempt"], r.get("resume_step")) for r in starts] == [(1, None), (2, 2)]
    assert [r["step"] for r in records if r["event"] == "train_step"] == [1, 2, 3, 4, 3, 4]


def test_run_and_run_options_together_are_refused(tmp_path: Path) -> None:
    with Run("mine", tmp_path, stdout=False) as run, pytest.raises(TypeError, match="run="):
        RunlinesCallback("other", run=run)


def _begin(tmp_path: Path, state: TrainerState, **options: Any) -> RunlinesCallback:
    callback = RunlinesCallback(**options)
    args = TrainingArguments(output_dir=str(tmp_path), report_to=[], use_cpu=True)
    callback.on_train_begin(args, state, TrainerControl())
    return callback


def test_only_the_main_process_writes_to_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main = _begin(tmp_path / "main", TrainerState(is_world_process_zero=True))
    other = _begin(tmp_path / "other", TrainerState(is_world_process_zero=False))
    assert main.run is not None
    assert other.run is not None
    main.run.close()
    other.run.close()

    out = capsys.readouterr().out
    assert str(tmp_path / "main") in out
    assert str(tmp_path / "other") not in out


def test_run_name_defaults_to_the_output_folder(tmp_path: Path) -> None:
    callback = _begin(tmp_path / "my run", TrainerState(), stdout=False)
    assert callback.run is not None
    callback.run.close()

    assert callback.run.path == tmp_path / "my run" / "my-run.jsonl"


def test_resumed_training_marks_the_resume_step(tmp_path: Path) -> None:
    callback = _begin(tmp_path, TrainerState(global_step=3), stdout=False)
    assert callback.run is not None
    callback.run.close()

    assert _records(callback.run.path)[0]["resume_step"] == 3


@pytest.mark.parametrize(
    ("logs", "event", "fields"),
    [
        ({"loss": 0.5, "learning_rate": 1e-3}, "train_step", {"loss": 0.5, "lr": 1e-3}),
        ({"eval_loss": 0.4, "eval_acc": 0.9}, "eval", {"loss": 0.4, "accuracy": 0.9}),
        ({"test_loss": 0.3}, "eval", {"loss": 0.3, "split": "test"}),
        ({"train_loss": 0.6, "train_runtime": 2.0}, "train_end", {"loss": 0.6, "duration_s": 2.0}),
    ],
)
def test_logs_are_written_in_runlines_names(
    tmp_path: Path, logs: dict[str, float], event: str, fields: dict[str, object]
) -> None:
    callback = _begin(tmp_path, TrainerState(global_step=7), stdout=False)
    args = TrainingArguments(output_dir=str(tmp_path), report_to=[], use_cpu=True)

    callback.on_log(args, TrainerState(global_step=7), TrainerControl(), logs=logs)
    assert callback.run is not None
    callback.run.close()

    record = _records(callback.run.path)[1]
    assert record["event"] == event
    assert {k: v for k, v in record.items() if k not in ("ts", "event", "run")} == {
        "step": 7,
        **fields,
    }


def test_importing_the_integrations_package_imports_no_framework() -> None:
    code = (
        "import sys, runlines, runlines.integrations; "
        "print([m for m in ('torch', 'transformers', 'lightning') if m in sys.modules])"
    )

    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )

    assert loaded.stdout.strip() == "[]"
