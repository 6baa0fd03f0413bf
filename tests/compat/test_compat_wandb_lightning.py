"""Lightning's own `WandbLogger` after install(): a real Trainer on the CPU writes a log."""

from __future__ import annotations

import importlib.metadata
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import runlines
import runlines.compat.wandb as dropin
from _optional import skip_without

skip_without("lightning")
skip_without("torch")

import lightning as L  # noqa: E402
import torch  # noqa: E402
from lightning.pytorch.callbacks import ModelCheckpoint  # noqa: E402
from lightning.pytorch.loggers import WandbLogger  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

# Lightning 2.6's CombinedLoader builds a torch LeafSpec, which torch 2.13 deprecates.
LEAFSPEC = r"ignore:`isinstance\(treespec, LeafSpec\)` is deprecated:FutureWarning"
pytestmark = pytest.mark.filterwarnings(LEAFSPEC)


class _Linear(L.LightningModule):
    """One linear layer fitted to the sum of its inputs; logs images, a table and a summary."""

    def __init__(self, lr: float = 0.05) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.layer = nn.Linear(4, 1)
        self.seen_steps: list[int] = []

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.mse_loss(self.layer(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", nn.functional.mse_loss(self.layer(x), y))
        logger = self.logger
        assert isinstance(logger, WandbLogger)
        images = [torch.rand(3, 4, 6), torch.rand(3, 4, 6)]
        logger.log_image("samples", images, step=self.global_step, caption=["a", "b"])
        logger.log_table("preds", columns=["x", "y"], data=[[1, 2.0]], step=self.global_step)
        self.seen_steps.append(self.global_step)

    def on_fit_end(self) -> None:
        self.logger.experiment.summary["best_val"] = 0.5  # type: ignore[union-attr]

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.hparams["lr"])


def _loader() -> DataLoader[tuple[torch.Tensor, ...]]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(32, 4, generator=generator)
    return DataLoader(TensorDataset(x, x.sum(dim=1, keepdim=True)), batch_size=8)


@pytest.fixture(autouse=True)
def _installed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in [n for n in sys.modules if n == "wandb" or n.startswith("wandb.")]:
        monkeypatch.delitem(sys.modules, name)
    dropin.install()
    yield
    dropin.finish()
    dropin.uninstall()


def _fit(tmp_path: Path, module: _Linear, **logger_options: Any) -> WandbLogger:
    logger = WandbLogger(project="lit", name="tiny", save_dir=str(tmp_path), **logger_options)
    trainer = L.Trainer(
        max_steps=4,
        accelerator="cpu",
        logger=logger,
        log_every_n_steps=1,
        val_check_interval=2,
        limit_val_batches=1,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        default_root_dir=tmp_path,
        callbacks=[ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=2)],
    )
    trainer.fit(module, _loader(), _loader())
    return logger


def _records(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_the_logger_writes_metrics_at_the_trainers_steps_config_and_summary(
    tmp_path: Path,
) -> None:
    torch.manual_seed(0)

    logger = _fit(tmp_path, _Linear(lr=0.05))
    dropin.finish()  # as a script's exit does

    assert isinstance(logger.experiment, dropin.Run)
    records = _records(tmp_path / "lit" / "tiny.jsonl")
    (start,) = [r for r in records if r["event"] == "run_start"]
    assert start["config"] == {"lr": 0.05}
    train = [r["step"] for r in records if r["event"] == "metrics" and "train_loss" in r]
    val = [r["step"] for r in records if r["event"] == "metrics" and "val_loss" in r]
    assert train == [0, 1, 2, 3]  # trainer/global_step as Lightning hands it to the logger
    assert val == [1, 3]
    assert not [r for r in records if r["event"] == "trainer"]  # the step metric, as the step
    (summary,) = [r for r in records if r["event"] == "summary"]
    assert summary["values"] == {"metrics.best_val": 0.5}
    row = runlines.runs(tmp_path / "lit").iloc[0]
    assert row["metrics.best_val"] == 0.5
    assert row["metrics.train_loss"] == [r for r in records if "train_loss" in r][-1]["train_loss"]


def test_log_image_and_log_table_are_media_at_the_steps_given(tmp_path: Path) -> None:
    module = _Linear()

    _fit(tmp_path, module)
    dropin.finish()

    images = runlines.media(tmp_path / "lit", kind="image")
    tables = runlines.media(tmp_path / "lit", kind="table")
    assert module.seen_steps == [2, 4]
    assert images[["name", "step", "index", "caption", "width", "height"]].values.tolist() == [
        ["samples", step, index, caption, 6, 4]
        for step in (2, 4)
        for index, caption in enumerate("ab")
    ]
    assert tables[["name", "step", "rows"]].values.tolist() == [["preds", 2, 1], ["preds", 4, 1]]


def test_log_model_registers_each_checkpoint_as_an_artifact(tmp_path: Path) -> None:
    _fit(tmp_path, _Linear(), log_model=True)
    dropin.finish()

    records = _records(tmp_path / "lit" / "tiny.jsonl")
    artifacts = [r for r in records if r["event"] == "artifact"]
    assert artifacts
    assert {r["name"] for r in artifacts} == {"model"}
    assert {r["artifact"] for r in artifacts} == {"model-tiny"}
    assert all(r["file"] == "model.ckpt" and "latest" in r["aliases"] for r in artifacts)
    assert all((tmp_path / "lit" / r["path"]).is_file() for r in artifacts)


def test_the_installed_version_is_the_drop_ins_and_its_modules_are_there() -> None:
    from wandb.sdk.lib import RunDisabled  # type: ignore[import-not-found,unused-ignore]
    from wandb.wandb_run import Run  # type: ignore[import-not-found,unused-ignore]

    metadata = importlib.metadata.metadata("wandb")

    assert importlib.metadata.version("wandb") == dropin.__version__
    assert "runlines" in metadata["Summary"]
    assert Run is dropin.Run  # type: ignore[comparison-overlap,unused-ignore]
    assert RunDisabled is dropin.RunDisabled  # type: ignore[comparison-overlap,unused-ignore]
    dropin.uninstall()
    assert all("runlines" not in (d.metadata["Summary"] or "") for d in _wandb_distributions())


def _wandb_distributions() -> list[importlib.metadata.Distribution]:
    return list(importlib.metadata.distributions(name="wandb"))


def test_a_call_outside_the_subset_still_raises_naming_it(tmp_path: Path) -> None:
    logger = WandbLogger(project="lit", name="tiny", save_dir=str(tmp_path))

    with pytest.raises(AttributeError, match=r"wandb\.run has no 'use_artifact'.*compat\.md"):
        logger.use_artifact("model-tiny:latest")
