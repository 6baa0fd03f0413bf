"""`runlines plot`: a PNG of a metric per run; without matplotlib, the line to install it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from _logs import T0, line, train, write
from _optional import skip_without
from runlines.cli import main


class TestPlot:
    def test_writes_a_png(self, run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
        skip_without("matplotlib")
        train(run_dir, "a", range(1, 20))
        train(run_dir, "b", range(1, 15))
        target = run_dir / "loss.png"

        assert main(["plot", str(run_dir), "--metric", "loss", "-o", str(target)]) == 0

        assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert capsys.readouterr().out == f"wrote {target} (loss by step, 2 runs)\n"

    def test_without_matplotlib_says_what_to_install(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        train(run_dir, "a", range(1, 3))
        monkeypatch.setitem(sys.modules, "matplotlib", None)
        # the plotting module imports matplotlib at its top: imported anew, as a fresh process would
        monkeypatch.delitem(sys.modules, "runlines.cli._plotting", raising=False)

        assert main(["plot", str(run_dir), "--metric", "loss", "-o", str(run_dir / "x.png")]) == 1

        assert capsys.readouterr().err == (
            "runlines: error: plotting needs matplotlib: pip install 'runlines[plot]'\n"
        )

    @pytest.mark.parametrize("by", ["ts", "elapsed_s"])
    def test_plot_by_time(
        self, tmp_path: Path, by: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        pytest.importorskip("matplotlib")
        out = tmp_path / "p.png"

        assert (
            main(
                [
                    "plot",
                    str(_train_and_eval(tmp_path)),
                    "--metric",
                    "loss",
                    "--by",
                    by,
                    "-o",
                    str(out),
                ]
            )
            == 0
        )

        assert out.stat().st_size > 0
        assert "2 runs" not in capsys.readouterr().err


def _train_and_eval(tmp_path: Path) -> Path:
    return write(
        tmp_path / "lr1e-2.jsonl",
        line("train_step", run="lr1e-2", step=50, loss=0.0975),
        line("eval", run="lr1e-2", ts=T0 + 1, step=50, loss=0.1085),
    )
