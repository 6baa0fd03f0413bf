"""`runlines import tensorboard`: files written by torch's real SummaryWriter, read back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from _optional import skip_without

skip_without("tensorboard")
skip_without("torch")

import numpy as np  # noqa: E402
from torch.utils.tensorboard import SummaryWriter  # noqa: E402

import runlines  # noqa: E402
from runlines.cli import main  # noqa: E402
from runlines.importers.tensorboard import (  # noqa: E402
    TensorBoardImportError,
    import_tensorboard,
)
from runlines.reading import iter_events  # noqa: E402


def write_run(folder: Path) -> None:
    """Write scalars (with given wall times), a histogram, an image and text."""
    with SummaryWriter(str(folder)) as writer:
        for step in range(5):
            writer.add_scalar("train/loss", 1.0 / (step + 1), step * 10, walltime=1000.0 + step)
        writer.add_scalar("lr", 0.25, 7, walltime=2000.5)
        writer.add_histogram("weights/w", np.arange(10.0), 3, walltime=3000.0)
        image = np.zeros((3, 4, 5), dtype=np.uint8)
        image[0] = 255
        writer.add_image("samples", image, 2, walltime=4000.0)
        writer.add_text("notes/setup", "batch 8", 1, walltime=5000.0)


def records(path: Path, event: str) -> list[dict[str, Any]]:
    return [r for r in iter_events(path) if r["event"] == event]


def test_scalars_keep_their_values_steps_and_wall_times(tmp_path: Path) -> None:
    write_run(tmp_path / "tb" / "exp1")

    (result,) = import_tensorboard(tmp_path / "tb", tmp_path / "runs")

    assert result.path == tmp_path / "runs" / "exp1.jsonl"
    assert result.written
    train = records(result.path, "train")
    assert [(r["ts"], r["step"], r["loss"]) for r in train] == [
        (1000.0 + s, s * 10, pytest.approx(1.0 / (s + 1), rel=1e-6)) for s in range(5)
    ]
    (lr,) = records(result.path, "metrics")
    assert (lr["ts"], lr["step"], lr["lr"]) == (2000.5, 7, 0.25)


def test_histograms_images_and_text_go_to_the_media_records(tmp_path: Path) -> None:
    write_run(tmp_path / "tb" / "exp1")

    (result,) = import_tensorboard(tmp_path / "tb", tmp_path / "runs")

    (hist,) = records(result.path, "histogram")
    assert (hist["name"], hist["step"], hist["ts"], hist["count"]) == ("weights/w", 3, 3000.0, 10)
    assert len(hist["edges"]) == len(hist["counts"]) + 1
    (image,) = records(result.path, "image")
    assert (image["name"], image["step"], image["ts"]) == ("samples", 2, 4000.0)
    assert (image["width"], image["height"], image["format"]) == (5, 4, "png")
    png = (tmp_path / "runs" / image["path"]).read_bytes()
    assert png.startswith(b"\x89PNG")
    from PIL import Image

    with Image.open(tmp_path / "runs" / image["path"]) as decoded:
        assert decoded.convert("RGB").getpixel((0, 0)) == (255, 0, 0)
    (text,) = records(result.path, "text")
    assert (text["name"], text["step"], text["text"], text["ts"]) == (
        "notes/setup", 1, "batch 8", 5000.0,
    )  # fmt: skip


def test_run_start_names_the_source_and_hparams_are_the_config(tmp_path: Path) -> None:
    with SummaryWriter(str(tmp_path / "tb")) as writer:
        writer.add_hparams({"lr": 0.1, "opt": "sgd"}, {"hparam/acc": 0.9}, run_name="hp")

    results = import_tensorboard(tmp_path / "tb", tmp_path / "runs")

    by_name = {r.path.name: r for r in results}
    (start,) = records(by_name["hp.jsonl"].path, "run_start")
    assert start["config"] == {"lr": 0.1, "opt": "sgd"}
    source = start["imported_from"]
    assert source["tool"] == "tensorboard"
    assert source["path"] == str(tmp_path / "tb/hp")
    assert len(source["sha256"]) == 64
    assert source["files"][0].startswith("events.out.tfevents")
    (acc,) = records(by_name["hp.jsonl"].path, "hparam")
    assert acc["acc"] == pytest.approx(0.9)
    assert runlines.runs(tmp_path / "runs").set_index("run").loc["hp", "config.lr"] == 0.1


def test_importing_twice_is_a_no_op_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_run(tmp_path / "tb" / "exp1")
    assert main(["import", "tensorboard", str(tmp_path / "tb"), "-o", str(tmp_path / "runs")]) == 0
    log = tmp_path / "runs" / "exp1.jsonl"
    before = log.read_bytes()
    assert "exp1.jsonl: 9 records" in capsys.readouterr().out

    assert main(["import", "tensorboard", str(tmp_path / "tb"), "-o", str(tmp_path / "runs")]) == 0

    assert "already imported" in capsys.readouterr().out
    assert log.read_bytes() == before
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["exp1.artifacts", "exp1.jsonl"]


def test_a_log_of_that_name_from_other_files_is_not_overwritten(tmp_path: Path) -> None:
    write_run(tmp_path / "tb" / "exp1")
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "exp1.jsonl").write_text('{"event":"run_start"}\n')

    with pytest.raises(TensorBoardImportError, match="exists and was not imported from"):
        import_tensorboard(tmp_path / "tb", tmp_path / "runs")

    assert (tmp_path / "runs" / "exp1.jsonl").read_text() == '{"event":"run_start"}\n'


def test_a_folder_without_event_files_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("no events")

    status = main(["import", "tensorboard", str(tmp_path / "empty"), "-o", str(tmp_path / "r")])

    assert status == 1
    assert "no TensorBoard event files (*tfevents*) under" in capsys.readouterr().err
    assert not (tmp_path / "r").exists() or list((tmp_path / "r").iterdir()) == []


def flip_a_byte(data: bytes) -> bytes:
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0xFF  # a crc fails
    return bytes(flipped)


@pytest.mark.parametrize(
    "damage", [flip_a_byte, lambda data: data[:-3]], ids=["flipped-byte", "truncated"]
)
def test_a_corrupted_event_file_imports_nothing_not_even_the_good_runs(
    tmp_path: Path, damage: Any
) -> None:
    write_run(tmp_path / "tb" / "a_good")
    write_run(tmp_path / "tb" / "b_bad")
    (events,) = (tmp_path / "tb" / "b_bad").glob("*tfevents*")
    events.write_bytes(damage(events.read_bytes()))

    with pytest.raises(TensorBoardImportError, match=r"b_bad.*is corrupted after \d+ records"):
        import_tensorboard(tmp_path / "tb", tmp_path / "runs")

    assert list((tmp_path / "runs").iterdir()) == []


def test_the_scalars_agree_with_event_accumulators(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    write_run(tmp_path / "tb")
    accumulator = EventAccumulator(str(tmp_path / "tb"), size_guidance={"scalars": 0})
    accumulator.Reload()

    (result,) = import_tensorboard(tmp_path / "tb", tmp_path / "runs")

    theirs = [(e.wall_time, e.step, e.value) for e in accumulator.Scalars("train/loss")]
    ours = [(r["ts"], r["step"], r["loss"]) for r in records(result.path, "train")]
    assert ours == theirs


def test_the_import_of_torchs_writer_gives_the_scalars_of_the_drop_in(tmp_path: Path) -> None:
    from runlines.compat.tensorboard import SummaryWriter as DropIn

    def train(writer: Any) -> None:
        for step in range(4):
            writer.add_scalar("train/loss", 1.0 / (step + 1), step)
            writer.add_scalar("eval/acc", step / 4, step)
        writer.close()

    train(SummaryWriter(str(tmp_path / "tb" / "real")))
    train(DropIn(tmp_path / "dropin"))
    (result,) = import_tensorboard(tmp_path / "tb", tmp_path / "runs")

    def scalars(path: Path) -> list[tuple[str, int, str, float]]:
        found = [
            (r["event"], r["step"], key, value)
            for r in iter_events(path)
            if r["event"] in ("train", "eval")
            for key, value in r.items()
            if key not in ("ts", "event", "run", "step")
        ]
        return sorted(found)

    imported, dropped_in = scalars(result.path), scalars(tmp_path / "dropin" / "dropin.jsonl")
    assert [row[:3] for row in imported] == [row[:3] for row in dropped_in]
    assert len(imported) == 8
    assert [row[3] for row in imported] == pytest.approx([row[3] for row in dropped_in], rel=1e-6)


def test_a_left_over_artifacts_folder_is_an_error_before_anything_is_written(
    tmp_path: Path,
) -> None:
    write_run(tmp_path / "tb" / "a_first")
    write_run(tmp_path / "tb" / "b_second")
    (tmp_path / "runs" / "b_second.artifacts").mkdir(parents=True)

    with pytest.raises(TensorBoardImportError, match="exists without its log"):
        import_tensorboard(tmp_path / "tb", tmp_path / "runs")

    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["b_second.artifacts"]


@pytest.mark.filterwarnings("ignore:`torch.jit.trace:DeprecationWarning")
def test_audio_and_pr_curves_are_imported_and_graphs_counted(tmp_path: Path) -> None:
    import io
    import wave

    import torch

    with SummaryWriter(str(tmp_path / "tb")) as writer:
        clip = np.sin(np.linspace(0, 200, 800)).astype(np.float32) * 0.5
        writer.add_audio("sounds/sine", torch.from_numpy(clip), 3, sample_rate=8000, walltime=10.0)
        labels = np.array([0, 1, 1, 0, 1])
        scores = np.array([0.1, 0.9, 0.6, 0.4, 0.8])
        writer.add_pr_curve("eval/pr", labels, scores, 5, num_thresholds=11, walltime=20.0)
        writer.add_graph(torch.nn.Linear(3, 2), torch.zeros(1, 3))

    (result,) = import_tensorboard(tmp_path / "tb", tmp_path / "runs")

    (audio,) = records(result.path, "audio")
    assert (audio["name"], audio["step"], audio["ts"]) == ("sounds/sine", 3, 10.0)
    assert (audio["sample_rate"], audio["channels"], audio["frames"]) == (8000, 1, 800)
    with wave.open(io.BytesIO((tmp_path / "runs" / audio["path"]).read_bytes())) as decoded:
        assert decoded.getframerate() == 8000
    (curve,) = records(result.path, "pr_curve")
    assert (curve["name"], curve["step"], curve["ts"]) == ("eval/pr", 5, 20.0)
    assert curve["thresholds"] == [i / 10 for i in range(11)]
    assert (curve["tp"][0], curve["fp"][0]) == (3, 2)  # at threshold 0, all are positives
    assert curve["precision"][0] == pytest.approx(0.6)
    assert curve["recall"][0] == pytest.approx(1.0)
    assert result.skipped["graphs"] >= 1
