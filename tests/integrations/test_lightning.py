"""RunlinesLogger on a real Lightning Trainer: a linear layer on random tensors, on CPU."""

from __future__ import annotations

import json
import signal
from argparse import Namespace
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("lightning", reason="lightning is not installed: pip install lightning")
pytest.importorskip("torch", reason="torch is not installed (no wheel for this Python?)")

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.utilities import rank_zero_only
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from runlines import Run
from runlines.artifacts import hash_path
from runlines.integrations.lightning import RunlinesLogger

# Lightning 2.6's CombinedLoader builds a torch LeafSpec, which torch 2.13 deprecates.
LEAFSPEC = r"ignore:`isinstance\(treespec, LeafSpec\)` is deprecated:FutureWarning"
pytestmark = pytest.mark.filterwarnings(LEAFSPEC)
SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)  # what Lightning and Run both handle


class _Linear(L.LightningModule):
    """One linear layer fitted to the sum of its inputs."""

    def __init__(self, lr: float = 0.05, fail_at: int | None = None) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.layer = nn.Linear(4, 1)

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        if batch_idx == self.hparams["fail_at"]:
            raise ValueError("diverged")
        x, y = batch
        loss = nn.functional.mse_loss(self.layer(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", nn.functional.mse_loss(self.layer(x), y))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.hparams["lr"])


def _loader() -> DataLoader[tuple[torch.Tensor, ...]]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(32, 4, generator=generator)
    return DataLoader(TensorDataset(x, x.sum(dim=1, keepdim=True)), batch_size=8)


def _fit(logger: RunlinesLogger, module: _Linear, **options: Any) -> L.Trainer:
    trainer = L.Trainer(
        max_steps=4,
        accelerator="cpu",
        logger=logger,
        log_every_n_steps=1,
        val_check_interval=2,
        limit_val_batches=1,
        enable_progress_bar=False,
        enable_model_summary=False,
        **options,
    )
    trainer.fit(module, _loader(), _loader())
    return trainer


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _of(records: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    return [record for record in records if record["event"] == event]


@pytest.fixture(scope="module", name="run_dir")
def _run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fit of 4 steps, validated and checkpointed every 2, logged by RunlinesLogger."""
    run_dir = tmp_path_factory.mktemp("lightning")
    with pytest.MonkeyPatch.context() as patch, torch.random.fork_rng():
        patch.chdir(run_dir)  # Lightning's default_root_dir
        torch.manual_seed(0)
        logger = RunlinesLogger("tiny", run_dir, stdout=False)
        _fit(logger, _Linear(lr=0.05), callbacks=[ModelCheckpoint(save_last=True)])
    return run_dir


@pytest.fixture(name="records")
def _logged(run_dir: Path) -> list[dict[str, Any]]:
    return _records(run_dir / "tiny.jsonl")


def test_hyperparameters_are_the_run_start_config(records: list[dict[str, Any]]) -> None:
    assert records[0]["event"] == "run_start"
    assert records[0]["config"] == {"lr": 0.05, "fail_at": None}
    assert _of(records, "hyperparams") == []


def test_training_metrics_are_train_step_records_with_step(
    records: list[dict[str, Any]],
) -> None:
    steps = _of(records, "train_step")

    assert [record["step"] for record in steps] == [1, 2, 3, 4]  # the trainer's global_step
    assert all(set(record) == {"ts", "event", "run", "step", "epoch", "loss"} for record in steps)


def test_validation_metrics_are_eval_records_of_split_val(records: list[dict[str, Any]]) -> None:
    evals = _of(records, "eval")

    assert len(evals) == 2
    assert all(record["split"] == "val" for record in evals)
    assert all("loss" in record and "val_loss" not in record for record in evals)


def test_every_checkpoint_file_is_an_artifact(run_dir: Path, records: list[dict[str, Any]]) -> None:
    artifacts = _of(records, "artifact")
    folder = "tiny/checkpoints"  # Lightning's default: <save_dir>/<name>/checkpoints

    assert [(a["name"], a["path"], a.get("step")) for a in artifacts] == [
        ("checkpoint", f"{folder}/epoch=0-step=2.ckpt", 2),
        ("checkpoint", f"{folder}/last.ckpt", 2),
        ("checkpoint", f"{folder}/epoch=0-step=4.ckpt", 4),
        ("checkpoint", f"{folder}/last.ckpt", 4),
    ]
    assert artifacts[-1]["sha256"] == hash_path(run_dir / folder / "last.ckpt")


def test_metrics_evaluations_and_checkpoints_share_one_step_numbering(
    records: list[dict[str, Any]],
) -> None:
    evals = [record["step"] for record in _of(records, "eval")]
    checkpoints = sorted({record["step"] for record in _of(records, "artifact")})

    assert evals == checkpoints == [2, 4]  # validated and saved every 2 optimizer steps


def test_successful_fit_ends_the_run_ok(records: list[dict[str, Any]]) -> None:
    assert records[-1]["event"] == "run_end"
    assert records[-1]["status"] == "ok"


def test_failed_fit_ends_the_run_failed_with_the_exception(tmp_path: Path) -> None:
    logger = RunlinesLogger("broken", tmp_path, stdout=False)
    handlers = [signal.getsignal(signum) for signum in SIGNALS]

    with pytest.raises(ValueError, match="diverged"):
        _fit(logger, _Linear(fail_at=2), default_root_dir=tmp_path, enable_checkpointing=False)

    end = _records(tmp_path / "broken.jsonl")[-1]
    assert (end["event"], end["status"], end["exc_type"]) == ("run_end", "failed", "ValueError")
    assert [signal.getsignal(signum) for signum in SIGNALS] == handlers


class TestLoggerWithoutTrainer:
    def test_metric_prefixes_choose_the_event_and_split(self, tmp_path: Path) -> None:
        logger = RunlinesLogger("m", tmp_path, stdout=False)
        metrics = {"train/loss": 1.0, "val_loss": 2.0, "val/acc": 0.5, "test_loss": 3.0}

        logger.log_metrics({**metrics, "learning_rate": 0.1, "epoch": 1}, step=7)
        logger.finalize("success")

        records = [
            {k: v for k, v in r.items() if k not in ("ts", "run")}
            for r in _records(tmp_path / "m.jsonl")[1:-1]
        ]
        assert records == [
            {"event": "train_step", "step": 7, "epoch": 1, "loss": 1.0, "lr": 0.1},
            {"event": "eval", "step": 7, "epoch": 1, "loss": 2.0, "accuracy": 0.5, "split": "val"},
            {"event": "eval", "step": 7, "epoch": 1, "loss": 3.0, "split": "test"},
        ]

    def test_hyperparameters_after_the_run_opened_are_a_record(self, tmp_path: Path) -> None:
        logger = RunlinesLogger("h", tmp_path, stdout=False, config={"seed": 1})

        logger.log_hyperparams({"lr": 0.1})
        logger.log_hyperparams(Namespace(momentum=0.9))
        logger.log_metrics({"loss": 1.0}, step=0)
        logger.log_hyperparams({"batch_size": 8})
        logger.finalize("success")

        records = _records(tmp_path / "h.jsonl")
        assert records[0]["config"] == {"seed": 1, "lr": 0.1, "momentum": 0.9}
        assert _of(records, "hyperparams")[0]["config"] == {"batch_size": 8}

    def test_stage_that_logged_nothing_leaves_no_run(self, tmp_path: Path) -> None:
        logger = RunlinesLogger("quiet", tmp_path, stdout=False)

        logger.log_hyperparams({"lr": 0.1})
        logger.finalize("success")

        assert list(tmp_path.iterdir()) == []

    def test_stage_that_failed_before_logging_is_recorded(self, tmp_path: Path) -> None:
        logger = RunlinesLogger("early", tmp_path, stdout=False)

        logger.log_hyperparams({"lr": 0.1})
        try:
            raise RuntimeError("bad batch")
        except RuntimeError:
            logger.finalize("failed")

        records = _records(tmp_path / "early.jsonl")
        assert records[0]["config"] == {"lr": 0.1}
        assert (records[-1]["status"], records[-1]["exc_message"]) == ("failed", "bad batch")

    def test_experiment_is_the_run_opened_at_first_use(self, tmp_path: Path) -> None:
        logger = RunlinesLogger("e", tmp_path, stdout=False)
        stand_in = logger.experiment
        assert not (tmp_path / "e.jsonl").exists()

        stand_in.log("note", text="hello")
        run = logger.experiment
        logger.finalize("success")

        assert isinstance(run, Run)
        assert run.closed
        assert [r["event"] for r in _records(run.path)] == ["run_start", "note", "run_end"]

    @pytest.mark.parametrize(
        ("error", "status", "exc_type"),
        [
            (ValueError("nan loss"), "failed", "ValueError"),
            (KeyboardInterrupt(), "interrupted", None),
        ],
    )
    def test_finalize_failed_records_the_exception_being_handled(
        self, tmp_path: Path, error: BaseException, status: str, exc_type: str | None
    ) -> None:
        logger = RunlinesLogger("f", tmp_path, stdout=False)
        logger.log_metrics({"loss": 1.0}, step=0)

        try:
            raise error
        except BaseException:
            logger.finalize("failed")

        end = _records(tmp_path / "f.jsonl")[-1]
        assert (end["status"], end.get("exc_type")) == (status, exc_type)

    def test_finalize_failed_without_an_exception_still_fails(self, tmp_path: Path) -> None:
        logger = RunlinesLogger("g", tmp_path, stdout=False)
        logger.log_metrics({"loss": 1.0}, step=0)

        logger.finalize("failed")

        end = _records(tmp_path / "g.jsonl")[-1]
        assert end["status"] == "failed"
        assert "'failed'" in end["exc_message"]

    def test_a_run_of_your_own_is_joined_and_left_open(self, tmp_path: Path) -> None:
        with Run("mine", tmp_path, stdout=False) as run:
            logger = RunlinesLogger(run=run)
            logger.log_metrics({"loss": 1.0}, step=0)
            logger.finalize("success")

            assert logger.experiment is run
            assert not run.closed
            assert logger.name == "mine"

    def test_run_and_run_options_together_are_refused(self, tmp_path: Path) -> None:
        with Run("mine", tmp_path, stdout=False) as run, pytest.raises(TypeError, match="run="):
            RunlinesLogger(run=run, stdout=False)

    def test_other_ranks_write_nothing(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(rank_zero_only, "rank", 1)
        logger = RunlinesLogger("r", tmp_path, stdout=False)

        logger.log_hyperparams({"lr": 0.1})
        logger.log_metrics({"loss": 1.0}, step=0)
        logger.experiment.log("ignored", x=1)
        logger.finalize("success")

        assert list(tmp_path.iterdir()) == []

    def test_a_fit_after_finalize_appends_a_new_attempt(self, tmp_path: Path) -> None:
        logger = RunlinesLogger("again", tmp_path, stdout=False)
        for loss in (1.0, 0.5):
            logger.log_hyperparams({"lr": 0.1})
            logger.log_metrics({"loss": loss}, step=0)
            logger.finalize("success")

        records = _records(tmp_path / "again.jsonl")
        assert [r["attempt"] for r in _of(records, "run_start")] == [1, 2]
        assert [r["status"] for r in _of(records, "run_end")] == ["ok", "ok"]


def test_the_logger_says_where_its_log_is(run_dir: Path) -> None:
    logger = RunlinesLogger("tiny", run_dir / "where", stdout=False)
    assert logger.path is None

    logger.log_metrics({"loss": 1.0}, step=0)
    logger.finalize("success")

    assert logger.path == run_dir / "where" / "tiny.jsonl"
    assert logger.path.is_file()
