"""A logged NaN or infinity stays what it is in compare, its CLI tables, query and plot, and a
step with no record stays missing: the two never look alike."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import runlines
from _logs import T0, line, write
from runlines.cli import main


def _strict(text: str) -> Any:
    """Parse *text* as strict JSON: a bare NaN or Infinity token fails the test."""

    def refuse(token: str) -> None:
        pytest.fail(f"{token} is not JSON: the output must name it as a string")

    return json.loads(text, parse_constant=refuse)


def _diverged(root: Path, name: str = "a", steps: int = 20, bad: int = 10) -> Path:
    """Write a run whose train loss is finite, then `inf` for its last *bad* steps."""
    losses = [1.0 / s if s <= steps - bad else math.inf for s in range(1, steps + 1)]
    return write(
        root / f"{name}.jsonl",
        line("run_start", run=name, attempt=1),
        *(
            line("train_step", run=name, ts=T0 + s, step=s, loss=loss)
            for s, loss in enumerate(losses, 1)
        ),
        line("run_end", run=name, ts=T0 + steps + 1, attempt=1, status="ok"),
    )


@pytest.fixture(name="logs")
def _logs(tmp_path: Path) -> tuple[Path, Path]:
    """Run a logs NaN at step 2 and -inf at step 3, not step 4; run b logs step 4 only."""
    a = write(
        tmp_path / "a.jsonl",
        line("train_step", run="a", ts=T0 + 1, step=1, loss=0.5),
        line("train_step", run="a", ts=T0 + 2, step=2, loss=math.nan),
        line("train_step", run="a", ts=T0 + 3, step=3, loss=-math.inf),
    )
    b = write(tmp_path / "b.jsonl", line("train_step", run="b", ts=T0 + 4, step=4, loss=0.25))
    return a, b


class TestCompareFrame:
    def test_a_logged_nan_is_nan_and_no_record_is_na(self, logs: tuple[Path, Path]) -> None:
        table = runlines.compare(*logs, metric="loss")

        assert table.dtypes.tolist() == [pd.Float64Dtype(), pd.Float64Dtype()]
        a = table["a"]
        assert a.isna().tolist() == [False, False, False, True]  # only step 4: no record
        assert a.iloc[0] == 0.5
        assert math.isnan(a.iloc[1])  # a NaN the run logged, not pd.NA
        assert a.iloc[2] == -math.inf
        assert a.iloc[3] is pd.NA
        assert table["b"].isna().tolist() == [True, True, True, False]

    @pytest.mark.parametrize("compact", [False, True], ids=["jsonl", "parquet-copy"])
    def test_a_run_written_by_run_reads_alike_through_its_copy(
        self, tmp_path: Path, compact: bool
    ) -> None:
        with runlines.Run(
            "r", tmp_path, stdout=False, system=False, compact=compact, on_nonfinite="ignore"
        ) as run:
            run.log("train_step", step=1, loss=0.5)
            run.log("train_step", step=2, loss=math.nan)
            run.log("train_step", step=4, loss=math.inf)
        write(tmp_path / "o.jsonl", line("train_step", run="o", step=3, loss=0.25))
        assert (tmp_path / "r.parquet").exists() == compact

        table = runlines.compare(tmp_path, metric="loss")

        assert table["r"].isna().tolist() == [False, False, True, False]
        assert math.isnan(table["r"].iloc[1])
        assert table["r"].iloc[3] == math.inf

    def test_a_logged_none_is_no_record(self, tmp_path: Path) -> None:
        log = write(
            tmp_path / "r.jsonl",
            line("eval", run="r", step=1, loss=0.5),
            line("eval", run="r", step=2, loss=None),
        )

        other = write(tmp_path / "o.jsonl", line("eval", run="o", step=2, loss=0.25))

        table = runlines.compare(log, other, metric="loss")

        assert table["r"].isna().tolist() == [False, True]

    @pytest.mark.parametrize(
        ("agg", "expected"),
        [("mean", math.nan), ("max", math.nan), ("sum", math.nan), ("first", 2.0)],
    )
    def test_a_nan_among_a_steps_records_is_not_skipped(
        self, tmp_path: Path, agg: str, expected: float
    ) -> None:
        log = write(
            tmp_path / "r.jsonl",
            line("train_step", run="r", step=1, loss=2.0),
            line("train_step", run="r", step=1, loss=math.nan),
        )

        value = runlines.compare(log, metric="loss", agg=agg)["r"].iloc[0]

        assert value is not pd.NA
        assert value == expected or (math.isnan(value) and math.isnan(expected))

    def test_last_and_count_keep_the_nan_record(self, tmp_path: Path) -> None:
        log = write(
            tmp_path / "r.jsonl",
            line("train_step", run="r", step=1, loss=2.0),
            line("train_step", run="r", step=1, loss=math.nan),
        )

        assert math.isnan(runlines.compare(log, metric="loss", agg="last")["r"].iloc[0])
        assert runlines.compare(log, metric="loss", agg="count")["r"].iloc[0] == 2

    def test_a_metric_logged_only_as_nan_is_compared(self, tmp_path: Path) -> None:
        log = write(
            tmp_path / "r.jsonl",
            line("train_step", run="r", step=1, loss=math.nan),
            line("train_step", run="r", ts=T0 + 1, step=2, loss=math.nan),
        )

        table = runlines.compare(log, metric="loss")

        assert table["r"].isna().tolist() == [False, False]
        assert all(math.isnan(v) for v in table["r"])

    def test_by_elapsed_seconds_keeps_the_nan(self, logs: tuple[Path, Path]) -> None:
        table = runlines.compare(logs[0], metric="loss", by="elapsed_s")

        assert table.index.tolist() == [0.0, 1.0, 2.0]
        assert math.isnan(table["a"].iloc[1])


class TestCompareCommand:
    def test_table_prints_nan_and_infinity_and_a_dash_for_no_record(
        self, logs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["compare", *map(str, logs), "--metric", "loss"]) == 0

        rows = [row.split() for row in capsys.readouterr().out.splitlines()]
        assert rows == [
            ["step", "a", "b"],
            ["1", "0.5", "-"],
            ["2", "nan", "-"],
            ["3", "-inf", "-"],
            ["4", "-", "0.25"],
        ]

    def test_json_names_nan_and_gives_null_for_no_record(
        self, logs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["compare", "--json", *map(str, logs), "--metric", "loss"]) == 0

        assert _strict(capsys.readouterr().out) == [
            {"step": 1, "a": 0.5, "b": None},
            {"step": 2, "a": "NaN", "b": None},
            {"step": 3, "a": "-Infinity", "b": None},
            {"step": 4, "a": None, "b": 0.25},
        ]


def test_query_table_prints_a_logged_nan_as_nan_and_sql_null_as_null(
    logs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("duckdb")
    sql = "SELECT step, loss, NULL::DOUBLE AS none FROM records WHERE run = 'a' ORDER BY step"

    assert main(["query", sql, str(logs[0])]) == 0

    rows = [row.split() for row in capsys.readouterr().out.splitlines()]
    assert rows == [
        ["step", "loss", "none"],
        ["1", "0.5", "NULL"],
        ["2", "nan", "NULL"],
        ["3", "-inf", "NULL"],
    ]


def test_the_shared_cell_format_tells_nan_from_no_value() -> None:
    from runlines.cli._common import cell

    assert [cell(v) for v in (math.nan, math.inf, -math.inf, None, pd.NA)] == [
        "nan",
        "inf",
        "-inf",
        "-",
        "-",
    ]


class TestPlot:
    @pytest.fixture(autouse=True)
    def _matplotlib(self) -> None:
        pytest.importorskip("matplotlib")

    def _axes(self, *logs: Path, **kwargs: Any) -> Any:
        from runlines.cli._plotting import draw_metric

        table = runlines.compare(*logs, metric="loss", **kwargs)
        return draw_metric(table, metric="loss").axes[0]

    def test_a_loss_gone_to_inf_is_marked_at_the_top_edge(self, tmp_path: Path) -> None:
        from runlines.cli._plotting import NONFINITE_GID

        axes = self._axes(_diverged(tmp_path))

        curve, marks = axes.get_lines()
        assert curve.get_xdata().tolist() == list(range(1, 11))
        assert marks.get_gid() == NONFINITE_GID
        assert marks.get_xdata().tolist() == list(range(11, 21))
        assert marks.get_ydata().tolist() == [1.0] * 10  # the top of the axes
        assert marks.get_transform() == axes.get_xaxis_transform()
        assert marks.get_color() == curve.get_color()
        assert axes.get_xlim()[1] >= 20  # the x range takes in every mark
        legend = [t.get_text() for t in axes.get_legend().get_texts()]
        assert legend == ["a (10 non-finite)"]

    def test_nan_and_minus_infinity_get_their_own_marks(self, logs: tuple[Path, Path]) -> None:
        axes = self._axes(*logs)

        marks = {
            line.get_label(): (line.get_xdata().tolist(), line.get_ydata().tolist())
            for line in axes.get_lines()
            if line.get_gid() == "nonfinite"
        }
        assert marks == {"_a -inf": ([3.0], [0.0]), "_a NaN": ([2.0], [1.0])}
        legend = [t.get_text() for t in axes.get_legend().get_texts()]
        assert legend == ["a (2 non-finite)", "b"]

    def test_one_colour_per_run_and_one_line_style_per_event(self, tmp_path: Path) -> None:
        for name in ("a", "b"):
            write(
                tmp_path / f"{name}.jsonl",
                line("train_step", run=name, step=1, loss=0.5),
                line("eval", run=name, ts=T0 + 1, step=1, loss=0.6),
            )

        axes = self._axes(tmp_path / "a.jsonl", tmp_path / "b.jsonl")

        drawn = {line.get_label(): line for line in axes.get_lines()}
        assert set(drawn) == {"a · train_step", "a · eval", "b · train_step", "b · eval"}
        colour = {label: line.get_color() for label, line in drawn.items()}
        style = {label: line.get_linestyle() for label, line in drawn.items()}
        assert colour["a · train_step"] == colour["a · eval"] != colour["b · eval"]
        assert colour["b · train_step"] == colour["b · eval"]
        assert style["a · train_step"] == style["b · train_step"] != style["a · eval"]
        assert style["a · eval"] == style["b · eval"]

    def test_the_command_counts_runs_and_the_marks(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = _diverged(tmp_path)
        with log.open("ab") as out:
            out.write(line("eval", run="a", ts=T0 + 30, step=20, loss=0.7))
        out_png = tmp_path / "p.png"

        assert main(["plot", str(log), "--metric", "loss", "-o", str(out_png)]) == 0

        printed = capsys.readouterr().out.strip()
        assert printed == (
            f"wrote {out_png} (loss by step, 1 run, 2 events, "
            "10 non-finite values marked at the edge)"
        )
