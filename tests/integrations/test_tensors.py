"""Tensors straight from a training loop: read once, at write time, never when dropped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest

pytest.importorskip("torch", reason="torch is not installed (no wheel for this Python?)")

import torch

from runlines import Run


class _Unreadable(torch.Tensor):
    """A tensor that records, and refuses, every attempt to read its value."""

    reads: ClassVar[list[str]] = []

    def item(self) -> Any:
        self.reads.append("item")
        raise AssertionError("a dropped record's tensor was read")

    def tolist(self) -> Any:
        self.reads.append("tolist")
        raise AssertionError("a dropped record's tensor was read")

    def __float__(self) -> float:
        self.reads.append("__float__")
        raise AssertionError("a dropped record's tensor was read")


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_scalar_tensor_is_written_as_a_number(tmp_path: Path) -> None:
    with Run("loop", tmp_path, stdout=False) as run:
        run.log("train_step", step=1, loss=torch.tensor(0.25), correct=torch.tensor(3))

    record = _records(run.path)[1]
    assert (record["loss"], record["correct"]) == (0.25, 3)


def test_tensor_that_needs_grad_is_written_as_a_number(tmp_path: Path) -> None:
    weight = torch.tensor(2.0, requires_grad=True)

    with Run("loop", tmp_path, stdout=False) as run:
        run.log("train_step", step=1, loss=weight * 0.5)

    assert _records(run.path)[1]["loss"] == 1.0


def test_sampled_out_tensor_is_never_read(tmp_path: Path) -> None:
    _Unreadable.reads.clear()
    unreadable = torch.tensor(9.0).as_subclass(_Unreadable)

    with Run("loop", tmp_path, stdout=False) as run:
        run.sample("train_step", every=2)
        run.log("train_step", step=1, loss=torch.tensor(1.0))
        run.log("train_step", step=2, loss=unreadable)  # dropped
        run.log("train_step", step=3, loss=torch.tensor(3.0))

    steps = [r for r in _records(run.path) if r["event"] == "train_step"]
    assert _Unreadable.reads == []
    assert [(r["step"], r["loss"], r["n"]) for r in steps] == [(1, 1.0, 1), (3, 3.0, 2)]
