"""The SummaryWriter drop-in: tags, steps, walltime, hparams; torch's own writer's code on it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from _optional import needs
from runlines.compat import _media
from runlines.compat.tensorboard import SummaryWriter
from runlines.reading import RunSummary, iter_events


def records(path: Path, *events: str) -> list[dict[str, Any]]:
    found = [r for r in iter_events(path) if r["event"] in events]
    return [{k: v for k, v in r.items() if k not in ("ts", "run")} for r in found]


def test_the_log_is_in_log_dir_named_by_its_last_part(tmp_path: Path) -> None:
    with SummaryWriter(tmp_path / "exp1") as writer:
        pass

    assert writer.path == tmp_path / "exp1" / "exp1.jsonl"
    assert writer.get_logdir() == str(tmp_path / "exp1")


def test_log_dir_defaults_to_runs_date_host_comment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    with SummaryWriter(comment="_lr0.1") as writer:
        pass

    assert re.fullmatch(r"runs/[A-Z][a-z]{2}\d\d_\d\d-\d\d-\d\d_.+_lr0\.1", writer.log_dir)


def test_add_scalar_maps_the_tag_and_keeps_step_and_walltime(tmp_path: Path) -> None:
    with SummaryWriter(tmp_path / "exp") as writer:
        writer.add_scalar("train/loss", 0.5, global_step=3, walltime=1_700_000_000.5)
        writer.add_scalar("lr", 0.1)

    assert records(writer.path, "train", "metrics") == [
        {"event": "train", "step": 3, "loss": 0.5, "walltime": 1_700_000_000.5},
        {"event": "metrics", "lr": 0.1},
    ]


@needs("torch")
def test_a_tensor_or_numpy_scalar_is_written_as_its_number(tmp_path: Path) -> None:
    import numpy as np
    import torch

    with SummaryWriter(tmp_path / "exp") as writer:
        writer.add_scalar("train/loss", torch.tensor(0.5), global_step=1)
        writer.add_scalar("train/loss", np.float32(0.25), global_step=np.int64(2))  # type: ignore[arg-type]

    assert [(r["step"], r["loss"]) for r in records(writer.path, "train")] == [(1, 0.5), (2, 0.25)]


def test_add_scalars_is_one_record_per_event(tmp_path: Path) -> None:
    with SummaryWriter(tmp_path / "exp") as writer:
        writer.add_scalars("loss", {"train": 0.5, "val": 0.7}, global_step=2)

    assert records(writer.path, "loss") == [{"event": "loss", "step": 2, "train": 0.5, "val": 0.7}]


def test_add_text_writes_the_string(tmp_path: Path) -> None:
    with SummaryWriter(tmp_path / "exp") as writer:
        writer.add_text("notes/setup", "batch 8", global_step=0)

    assert records(writer.path, "notes") == [{"event": "notes", "step": 0, "setup": "batch 8"}]


def test_add_hparams_writes_them_and_declares_the_metrics_final(tmp_path: Path) -> None:
    with SummaryWriter(tmp_path / "exp") as writer:
        writer.add_scalar("hparam/accuracy", 0.5, global_step=1)
        writer.add_hparams({"lr": 0.1, "opt": "adam"}, {"hparam/accuracy": 0.9})

    assert records(writer.path, "hparams") == [
        {"event": "hparams", "hparams": {"lr": 0.1, "opt": "adam"}}
    ]
    summary = RunSummary(writer.path)
    for record in iter_events(writer.path):
        summary.add(record)
    assert summary.row()["hparam.accuracy"] == 0.9


def test_a_method_outside_the_drop_in_raises_naming_it(tmp_path: Path) -> None:
    writer = SummaryWriter(tmp_path / "exp")

    with pytest.raises(AttributeError, match=r"SummaryWriter\.add_graph .*docs/compat\.md"):
        writer.add_graph(object())
    writer.close()


def test_close_ends_the_run_ok(tmp_path: Path) -> None:
    writer = SummaryWriter(tmp_path / "exp")
    writer.flush()

    writer.close()
    writer.close()

    assert [r["status"] for r in records(writer.path, "run_end")] == ["ok"]


class _MediaCalls:
    """Records the media calls made on it, as a Run with media calls would take them."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, kind: str) -> Any:
        return lambda *args, **kwargs: self.calls.append((kind, args, kwargs))


@pytest.mark.parametrize(
    ("value", "call"),
    [
        (
            _media.Image("a.png", caption="c"),
            ("image", ("k", "a.png"), {"step": 4, "caption": "c"}),
        ),
        (
            _media.Histogram([1, 2], num_bins=8),
            ("histogram", ("k", [1, 2]), {"step": 4, "bins": 8}),
        ),
        (_media.Audio([0.0], sample_rate=8000), ("audio", ("k", [0.0], 8000), {"step": 4})),
        (
            _media.Table(columns=["a", "b"], data=[[1, 2]]),
            ("table", ("k", [{"a": 1, "b": 2}]), {"step": 4}),
        ),
    ],
)
def test_log_media_calls_the_runs_media_call_of_its_kind(value: _media.Media, call: Any) -> None:
    """The routing alone: the Run's media calls come with the media issue (tested there)."""
    run = _MediaCalls()

    _media.log_media(run, "k", value, 4)  # type: ignore[arg-type]

    assert run.calls == [call]


def train(writer_class: Any, log_dir: Path) -> None:
    """Code written for torch.utils.tensorboard.SummaryWriter."""
    import torch

    writer = writer_class(log_dir=str(log_dir))
    for step in range(5):
        writer.add_scalar("train/loss", torch.tensor(1.0 / (step + 1)), step)
        writer.add_scalar("lr", 0.1 * step, global_step=step, walltime=1_700_000_000.0 + step)
    writer.add_scalar("eval/loss", 0.3, 4)
    writer.flush()
    writer.close()


@needs("tensorboard")
@needs("torch")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_torch_summary_writer_code_runs_unchanged_and_gives_the_same_scalars(
    tmp_path: Path,
) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from torch.utils.tensorboard import SummaryWriter as TorchWriter

    train(TorchWriter, tmp_path / "real")
    train(SummaryWriter, tmp_path / "dropin")

    events = EventAccumulator(str(tmp_path / "real"))
    events.Reload()
    real = {
        (tag, e.step): (e.value, e.wall_time)
        for tag in events.Tags()["scalars"]
        for e in events.Scalars(tag)
    }
    ours = {}
    for record in iter_events(tmp_path / "dropin" / "dropin.jsonl"):
        for field, value in record.items():
            if record["event"] in ("train", "eval", "metrics") and field not in (
                "ts",
                "event",
                "run",
                "step",
                "walltime",
            ):
                tag = field if record["event"] == "metrics" else f"{record['event']}/{field}"
                ours[(tag, record["step"])] = (value, record.get("walltime"))
    assert set(ours) == set(real)
    for key, (value, walltime) in ours.items():
        assert value == pytest.approx(real[key][0], rel=1e-6)  # TensorBoard keeps float32
        if walltime is not None:
            assert walltime == real[key][1]
