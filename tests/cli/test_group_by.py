"""`runlines compare/ls/plot --group-by` and `--x`, `--logx`, `--logy`."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from _optional import skip_without
from runlines import Run
from runlines.cli import main


def _sweep(folder: Path) -> Path:
    for lr in (0.1, 0.01):
        for seed in range(2):
            config = {"lr": lr, "seed": seed}
            with Run(f"lr{lr}-s{seed}", folder, stdout=False, config=config) as run:
                for step in range(1, 4):
                    run.log("train_step", step=step, tokens=step * 10, loss=lr * step + seed)
    return folder


def test_compare_group_by_json(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _sweep(run_dir)

    assert main(["compare", str(run_dir), "--metric", "loss", "--group-by", "lr", "--json"]) == 0

    rows = json.loads(capsys.readouterr().out)
    assert [row["step"] for row in rows] == [1, 2, 3]
    first = rows[0]["lr=0.1"]
    assert first["n"] == 2
    assert first["mean"] == pytest.approx(0.6)
    assert first["min"] == pytest.approx(0.1)
    assert first["max"] == pytest.approx(1.1)
    assert first["std"] == pytest.approx(math.sqrt(0.5))


def test_compare_auto_says_its_keys_on_stderr(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _sweep(run_dir)

    assert main(["compare", str(run_dir), "--metric", "loss", "--group-by", "auto"]) == 0

    out, err = capsys.readouterr()
    assert err == "runlines: grouped by lr (auto)\n"
    assert out.splitlines()[0].split()[:4] == ["step", "lr=0.01", "n", "lr=0.01"]


def test_compare_x_field(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _sweep(run_dir)

    assert main(["compare", str(run_dir), "--metric", "loss", "--x", "tokens", "--json"]) == 0

    rows = json.loads(capsys.readouterr().out)
    assert [row["tokens"] for row in rows] == [10, 20, 30]


def test_ls_group_by(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _sweep(run_dir)

    assert main(["ls", str(run_dir), "--group-by", "lr"]) == 0

    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["LR", "N", "METRIC"]
    assert lines[1].split()[:2] == ["0.01", "2"]
    assert lines[1].split()[2].startswith("train_step.loss=")


def test_ls_group_by_json(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _sweep(run_dir)

    assert main(["ls", str(run_dir), "--group-by", "auto", "--json"]) == 0

    out, err = capsys.readouterr()
    groups = json.loads(out)
    assert err == "runlines: grouped by lr (auto)\n"
    assert [g["group"] for g in groups] == ["lr=0.01", "lr=0.1"]
    assert groups[1]["runs"] == ["lr0.1-s0", "lr0.1-s1"]
    assert groups[1]["train_step.loss.mean"] == pytest.approx(0.8)


def test_plot_groups_draws_a_band_per_group(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    skip_without("matplotlib")
    from runlines import compare
    from runlines.cli._plotting import draw_groups

    _sweep(run_dir)
    out = tmp_path / "g.png"

    code = main(
        ["plot", str(run_dir), "--metric", "loss", "--group-by", "lr", "--logy", "-o", str(out)]
    )

    assert code == 0
    assert out.stat().st_size > 0
    assert "2 groups, mean ± std" in capsys.readouterr().out
    figure = draw_groups(compare(run_dir, metric="loss", group_by="lr"), metric="loss", logx=True)
    axes = figure.axes[0]
    assert len(axes.collections) == 2  # one band per group
    assert [line.get_label() for line in axes.lines] == ["lr=0.01 (n=2)", "lr=0.1 (n=2)"]
    assert axes.get_xscale() == "log"
