"""The dashboard's /api/groups: each group's statistics are compare(group_by=)'s."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from _serve_helpers import Client

import runlines
from runlines import Run
from runlines.dashboard import Server


def sweep(root: Path) -> Path:
    """Two learning rates, two seeds each; seed 1 logs two steps more, tokens on every record."""
    for lr in (0.1, 0.01):
        for seed in range(2):
            config = {"lr": lr, "seed": seed}
            with Run(f"lr{lr}-s{seed}", root, stdout=False, config=config) as run:
                for step in range(1, 6 + 2 * seed):
                    run.log("train_step", step=step, tokens=step * 64, loss=lr / step + seed)
    return root


def test_groups_means_equal_compare(tmp_path: Path) -> None:
    root = sweep(tmp_path / "sweep")
    expected = runlines.compare(root, metric="loss", x="tokens", group_by=["lr"])
    with Server(root, port=0) as server:
        answer = Client(server).json(
            "/api/groups?event=train_step&field=loss&x=tokens&group_by=lr&with_runs=1"
        )
    assert answer["group_by"] == ["lr"]
    groups = {g["group"]: g for g in answer["groups"]}
    assert sorted(groups) == sorted(set(expected.columns.get_level_values(0)))
    for label, group in groups.items():
        assert group["x"] == [float(x) for x in expected.index]  # few points: every one kept
        for stat in ("n", "mean", "std", "min", "max"):
            want = [None if v is pd.NA else float(v) for v in expected[(label, stat)]]
            got = group[stat]
            assert len(got) == len(want)
            for a, b in zip(got, want, strict=True):
                assert (a is None and b is None) or math.isclose(a, b), (label, stat, got, want)  # type: ignore[arg-type]
    assert groups["lr=0.1"]["n"][-1] == 1  # only seed 1 logged the last steps
    runs = {r["run"]: r for r in answer["runs"]}
    assert len(runs) == 4
    assert runs["lr0.1-s1"]["x"][-1] == 7 * 64


def test_groups_downsampled_keep_a_spike(tmp_path: Path) -> None:
    root = tmp_path / "long"
    for seed in range(2):
        with Run(f"s{seed}", root, stdout=False, config={"seed": seed, "lr": 1}) as run:
            values = [1.0] * 5000
            values[3210] = 99.0
            for step, value in enumerate(values):
                run.log("train_step", step=step, loss=value)
    with Server(root, port=0) as server:
        answer = Client(server).json("/api/groups?field=loss&group_by=lr")
    (group,) = answer["groups"]
    assert group["count"] == 5000
    assert len(group["x"]) < 2100  # a min and a max per bucket
    assert max(group["mean"]) == 99.0  # the spike survives


def test_groups_refuses_an_unknown_run(tmp_path: Path) -> None:
    root = sweep(tmp_path / "sweep")
    with Server(root, port=0) as server:
        status, _, body = Client(server).request("/api/groups?field=loss&runs=nope")
    assert status == 404
    assert b"/api/runs" in body


@pytest.mark.parametrize("query", ["group_by=lr", ""])
def test_groups_needs_a_field(tmp_path: Path, query: str) -> None:
    root = sweep(tmp_path / "sweep")
    with Server(root, port=0) as server:
        status, _, body = Client(server).request("/api/groups?" + query)
    assert status == 400
    assert b"?field=" in body


def test_groups_x_of_a_field_logged_on_some_records(tmp_path: Path) -> None:
    root = tmp_path / "some"
    for seed in range(2):
        with Run(f"s{seed}", root, stdout=False, config={"seed": seed, "lr": 1}) as run:
            for step in range(1, 7):
                run.log("train_step", step=step, loss=float(step + seed))
                if step % 2 == 0:  # tokens only on every other step, in another event
                    run.log("progress", step=step, tokens=step * 100)
    expected = runlines.compare(root, metric="loss", x="tokens", group_by=["lr"])
    with Server(root, port=0) as server:
        answer = Client(server).json("/api/groups?event=train_step&field=loss&x=tokens&group_by=lr")
    (group,) = answer["groups"]
    assert group["x"] == [200.0, 400.0, 600.0] == [float(x) for x in expected.index]
    assert group["mean"] == [2.5, 4.5, 6.5]
    assert group["n"] == [2, 2, 2]
