"""Plots of one metric per run: labelled, one line per run, matplotlib only when plotting."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip(
    "matplotlib", reason="matplotlib is not installed: pip install 'runlines[plot]'"
)

from runlines.cli._plotting import draw_metric, plot_metric


@pytest.fixture(name="table")
def _table() -> pd.DataFrame:
    index = pd.Index([1, 2, 3], name="step", dtype="Int64")
    frame = pd.DataFrame({"base": [1.0, 0.5, 0.3], "lr-1e-3": [0.9, None, 0.2]}, index=index)
    frame.columns.name = "run"
    return frame


def test_draws_one_labelled_line_per_run(table: pd.DataFrame) -> None:
    axes = draw_metric(table, metric="loss").axes[0]

    assert [line.get_label() for line in axes.get_lines()] == ["base", "lr-1e-3"]
    assert (axes.get_xlabel(), axes.get_ylabel(), axes.get_title()) == (
        "step",
        "loss",
        "loss by step",
    )
    assert [t.get_text() for t in axes.get_legend().get_texts()] == ["base", "lr-1e-3"]


def test_missing_steps_are_left_out_of_a_line(table: pd.DataFrame) -> None:
    line = draw_metric(table, metric="loss").axes[0].get_lines()[1]

    assert line.get_xdata().tolist() == [1.0, 3.0]


def test_integer_steps_get_integer_ticks(table: pd.DataFrame) -> None:
    axes = draw_metric(table, metric="loss").axes[0]

    assert all(float(tick).is_integer() for tick in axes.get_xticks())


def test_title_can_be_given(table: pd.DataFrame) -> None:
    assert (
        draw_metric(table, metric="acc", by="epoch", title="sweep").axes[0].get_title() == "sweep"
    )


def test_plot_metric_writes_the_file(table: pd.DataFrame, tmp_path: Path) -> None:
    target = plot_metric(table, tmp_path / "loss.png", metric="loss")

    assert target.read_bytes()[:4] == b"\x89PNG"


def test_without_matplotlib_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.delitem(sys.modules, "runlines.cli._plotting")

    with pytest.raises(ImportError, match=r"pip install 'runlines\[plot\]'"):
        importlib.import_module("runlines.cli._plotting")


def test_the_cli_imports_matplotlib_only_to_plot() -> None:
    import subprocess

    code = "import runlines.cli, sys; print('matplotlib' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert done.stdout.strip() == "False"
