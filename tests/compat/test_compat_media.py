"""The drop-ins' media values reach the run's media calls: read back by runlines.media()."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import runlines
import runlines.compat.wandb as wandb
from _optional import needs
from runlines.compat.tensorboard import SummaryWriter
from runlines.errors import RunlinesWarning


@pytest.fixture(autouse=True)
def _no_run_left() -> object:
    yield
    wandb.finish()


def _image() -> np.ndarray:
    return np.arange(4 * 6 * 3, dtype=np.uint8).reshape(4, 6, 3)


def test_wandb_media_values_are_media_records_at_the_commit_step(tmp_path: Path) -> None:
    run = wandb.init(project="proj", name="exp", dir=tmp_path)
    wandb.log({"train/loss": 0.5}, step=3)
    wandb.log({"samples/grid": wandb.Image(_image(), caption="c"), "weights": wandb.Histogram(
        [0.0, 1.0, 1.0, 2.0], num_bins=2)}, step=4)  # fmt: skip
    run.finish()

    images = runlines.media(tmp_path / "proj", kind="image")
    hists = runlines.histograms(tmp_path / "proj")

    assert images[["name", "step", "width", "height", "caption"]].values.tolist() == [
        ["samples/grid", 4, 6, 4, "c"]
    ]
    assert Path(images["path"].iloc[0]).is_file()
    assert hists[["name", "step"]].values.tolist() == [["weights", 4]]
    assert list(hists["counts"].iloc[0]) == [1, 3]


def test_summary_writer_images_and_histograms_are_media_records(tmp_path: Path) -> None:
    with SummaryWriter(tmp_path / "exp") as writer:
        writer.add_image("input/x", _image(), global_step=2, dataformats="HWC")
        writer.add_histogram("w", np.array([0.0, 0.5, 1.0]), global_step=2)

    images = runlines.media(tmp_path / "exp", kind="image")
    hists = runlines.histograms(tmp_path / "exp")

    assert images[["name", "step", "width", "height"]].values.tolist() == [["input/x", 2, 6, 4]]
    assert hists["name"].tolist() == ["w"]
    assert sum(hists["counts"].iloc[0]) == 3


def test_init_tags_and_notes_reach_runs_and_a_refused_tag_is_said(tmp_path: Path) -> None:
    with pytest.warns(RunlinesWarning, match="wandb.init\\(\\): .*'two words'"):
        run = wandb.init(
            project="proj", name="exp", dir=tmp_path, tags=["base", "two words"], notes="first"
        )
        wandb.log({"loss": 1.0})
    run.finish()

    row = runlines.runs(tmp_path / "proj").iloc[0]

    assert list(row["tags"]) == ["base"]
    assert list(row["notes"]) == ["first"]


@needs("matplotlib")
def test_add_figure_writes_the_figure_and_closes_it(tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure = plt.figure(figsize=(1, 1))
    with SummaryWriter(tmp_path / "exp") as writer:
        writer.add_figure("plots/loss", figure, global_step=3)

    images = runlines.media(tmp_path / "exp", kind="image")
    assert images[["name", "step"]].values.tolist() == [["plots/loss", 3]]
    assert not plt.fignum_exists(figure.number)
