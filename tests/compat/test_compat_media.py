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


def test_a_key_logged_as_a_number_then_as_media_is_each_in_its_place(tmp_path: Path) -> None:
    """The commit's plan is decided per set of keys, the media check per value's type."""
    run = wandb.init(project="proj", name="exp", dir=tmp_path)
    wandb.log({"val/x": 0.5})
    wandb.log({"val/x": wandb.Image(_image())})
    wandb.log({"val/x": [wandb.Image(_image(), caption="a"), wandb.Image(_image())]})
    wandb.log({"val/xs": [1.0, 2.0]})  # a list of numbers is a field
    run.finish()

    images = runlines.media(tmp_path / "proj", kind="image")
    fields = [r for r in runlines.iter_events(run.path) if r["event"] == "val"]  # type: ignore[arg-type]

    rows = images[["name", "step", "index", "caption"]].astype(object)
    assert rows.where(rows.notna(), None).values.tolist() == [
        ["val/x", 1, None, None],
        ["val/x", 2, 0, "a"],
        ["val/x", 2, 1, None],
    ]
    assert [(r["step"], r.get("x"), r.get("xs")) for r in fields] == [
        (0, 0.5, None),
        (3, None, [1.0, 2.0]),
    ]


def test_a_list_mixing_media_kinds_is_refused_naming_the_key(tmp_path: Path) -> None:
    wandb.init(project="proj", name="exp", dir=tmp_path)

    with pytest.raises(TypeError, match=r"'mixed' mixes \['Histogram', 'Image'\]"):
        wandb.log({"mixed": [wandb.Image(_image()), wandb.Histogram([1.0])]})
