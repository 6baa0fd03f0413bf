"""RunlinesLogger's media calls (Lightning WandbLogger's log_image, log_table, log_text,
log_audio) on a real Trainer: the records are at the trainer's step, read back by media()."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import runlines
from _optional import skip_without

skip_without("lightning")
skip_without("torch")
skip_without("pyarrow")

import lightning as L  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from runlines.integrations.lightning import RunlinesLogger  # noqa: E402

# Lightning 2.6's CombinedLoader builds a torch LeafSpec, which torch 2.13 deprecates.
LEAFSPEC = r"ignore:`isinstance\(treespec, LeafSpec\)` is deprecated:FutureWarning"
pytestmark = pytest.mark.filterwarnings(LEAFSPEC)


class _Linear(L.LightningModule):
    """One linear layer; each validation logs media through the logger, with no step."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(4, 1)
        self.steps: list[int] = []

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.mse_loss(self.layer(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        logger = self.logger
        assert isinstance(logger, RunlinesLogger)
        logger.log_image("samples", [torch.rand(3, 4, 6), torch.rand(3, 4, 6)], caption=["a", "b"])
        logger.log_image("one", [np.zeros((2, 3), dtype=np.uint8)])
        logger.log_table("preds", columns=["x", "y"], data=[[1, 2.0], [3, 4.0]])
        logger.log_text("notes", data=f"at {self.global_step}")
        logger.log_audio("tone", [np.zeros(80)], sample_rate=[8000])
        self.steps.append(self.global_step)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.05)


def _loader() -> DataLoader[tuple[torch.Tensor, ...]]:
    x = torch.randn(32, 4, generator=torch.Generator().manual_seed(0))
    return DataLoader(TensorDataset(x, x.sum(dim=1, keepdim=True)), batch_size=8)


@pytest.fixture(scope="module", name="fitted")
def _fitted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[int]]:
    run_dir = tmp_path_factory.mktemp("lightning-media")
    module = _Linear()
    trainer = L.Trainer(
        max_steps=4,
        accelerator="cpu",
        logger=RunlinesLogger("tiny", run_dir, stdout=False),
        log_every_n_steps=1,
        val_check_interval=2,
        limit_val_batches=1,
        num_sanity_val_steps=0,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        default_root_dir=run_dir,
    )
    trainer.fit(module, _loader(), _loader())
    return run_dir, module.steps


def _media(run_dir: Path, kind: str) -> list[list[Any]]:
    frame = runlines.media(run_dir, kind=kind)
    return frame[["name", "step"]].values.tolist()  # type: ignore[no-any-return]


def test_images_are_at_the_trainers_step_with_their_captions(
    fitted: tuple[Path, list[int]],
) -> None:
    run_dir, steps = fitted

    images = runlines.media(run_dir, kind="image")

    assert steps == [2, 4]
    samples = images[images["name"] == "samples"]
    assert samples[["step", "index", "caption", "width", "height"]].values.tolist() == [
        [step, index, caption, 6, 4] for step in steps for index, caption in enumerate("ab")
    ]
    one = images[images["name"] == "one"]
    assert one[["step", "width", "height"]].values.tolist() == [[2, 3, 2], [4, 3, 2]]


def test_tables_text_and_audio_are_at_the_trainers_step(fitted: tuple[Path, list[int]]) -> None:
    run_dir, steps = fitted

    assert _media(run_dir, "table") == [["preds", step] for step in steps]
    assert _media(run_dir, "audio") == [["tone", step] for step in steps]
    texts = [r for r in runlines.iter_events(run_dir / "tiny.jsonl") if r["event"] == "text"]
    assert [(r["name"], r["step"], r["text"]) for r in texts] == [
        ("notes", step, f"at {step}") for step in steps
    ]


class TestChecks:
    def test_a_step_is_needed_outside_a_trainer(self, tmp_path: Path) -> None:
        logger = RunlinesLogger("tiny", tmp_path, stdout=False)

        with pytest.raises(ValueError, match=r"log_image\(\) needs step="):
            logger.log_image("x", [np.zeros((2, 2), dtype=np.uint8)])
        logger.log_image("x", [np.zeros((2, 2), dtype=np.uint8)], step=7)
        logger.finalize("success")

        assert _media(tmp_path, "image") == [["x", 7]]

    def test_lightnings_checks_of_the_lists(self, tmp_path: Path) -> None:
        logger = RunlinesLogger("tiny", tmp_path, stdout=False)

        with pytest.raises(TypeError, match=r"log_image\(\) takes a list, found ndarray"):
            logger.log_image("x", np.zeros((2, 2)), step=1)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=r"2 items but 1 values of caption="):
            logger.log_image("x", [np.zeros((2, 2))] * 2, step=1, caption=["a"])
        with pytest.raises(TypeError, match=r"caption= per item, not \['masks'\]"):
            logger.log_image("x", [np.zeros((2, 2))], step=1, masks=[{}])
        with pytest.raises(TypeError, match=r"log_audio\(\) needs sample_rate="):
            logger.log_audio("a", [np.zeros(8)], step=1)
