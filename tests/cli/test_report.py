"""`runlines report` and `runlines.report`: the runs in one HTML file, its data inline."""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

import pytest

import runlines
from _logs import T0, line, train, write
from runlines.cli import main
from runlines.dashboard import _charts, _report

pd = pytest.importorskip("pandas")
np = pytest.importorskip("numpy")


def data_of(page: Path, block: str = "runlines-report") -> Any:
    """Return the JSON a report's <script type="application/json" id=*block*> holds."""
    found = re.search(
        rf'<script type="application/json" id="{block}">(.*?)</script>', page.read_text()
    )
    assert found is not None, f"no {block} block in {page}"
    return json.loads(found.group(1))


def nan_run(folder: Path) -> Path:
    """Write a run whose last loss is NaN, and whose best is not."""
    return write(
        folder / "nan.jsonl",
        line("run_start", run="nan", attempt=1, config={"lr": 0.5}),
        line("train_step", run="nan", ts=T0 + 1, step=1, loss=0.5),
        line("train_step", run="nan", ts=T0 + 2, step=2, loss=math.nan),
        line("run_end", run="nan", ts=T0 + 3, status="ok"),
    )


def same(shown: Any, expected: Any) -> bool:
    """Whether a report's JSON value is runs()' value (NaN as "NaN", a time as ISO text)."""
    if isinstance(expected, pd.Timestamp):
        return bool(pd.Timestamp(shown) == expected)
    if isinstance(expected, float) and math.isnan(expected):
        return bool(shown == "NaN")
    return bool(shown == expected)


class TestCommand:
    def test_writes_one_file_with_everything_inline(
        self, run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        train(run_dir, "a", range(1, 30))
        out = tmp_path / "out" / "report.html"

        assert main(["report", str(run_dir), "-o", str(out)]) == 0

        assert capsys.readouterr().out.startswith(f"wrote {out} (")
        page = out.read_text()
        assert "<script src" not in page
        assert '<link rel="stylesheet"' not in page
        assert "uPlot" in page
        assert "The MIT License" in page
        assert data_of(out)["rows"][0]["run"] == "a"

    def test_rows_are_those_of_runs(self, run_dir: Path, tmp_path: Path) -> None:
        train(run_dir, "a", range(1, 30), config={"lr": 0.1, "opt": {"name": "adam"}}, evals=True)
        train(run_dir, "b", range(1, 10), config={"lr": 0.2})
        nan_run(run_dir)

        data = data_of(runlines.report(run_dir, path=tmp_path / "r.html"))

        expected = runlines.runs(run_dir)
        assert list(data["columns"]) == list(expected.columns)
        assert [row["run"] for row in data["rows"]] == list(expected["run"])
        for shown, (_, row) in zip(data["rows"], expected.iterrows(), strict=True):
            for column in expected.columns:
                if column in shown:
                    assert same(shown[column], row[column]), (row["run"], column)
                else:  # no such value in that run: runs() fills NaN in
                    assert pd.isna(row[column]), (row["run"], column)
        assert data["rows"][2]["train_step.loss"] == "NaN"
        assert data["rows"][2]["train_step.loss.best"] == 0.5

    def test_records_the_size_and_sha256_of_every_log(self, run_dir: Path, tmp_path: Path) -> None:
        train(run_dir, "a", range(1, 10))
        write(run_dir / "a.rank1.jsonl", line("train_step", run="a", rank=1, step=1, loss=1.0))

        out = runlines.report(run_dir, path=tmp_path / "r.html")

        inputs = {Path(entry["path"]).name: entry for entry in data_of(out, "runlines-inputs")}
        assert set(inputs) == {"a.jsonl", "a.rank1.jsonl"}
        for name, entry in inputs.items():
            content = (run_dir / name).read_bytes()
            assert entry["size_bytes"] == len(content)
            assert entry["sha256"] == hashlib.sha256(content).hexdigest()
        assert data_of(out)["inputs"] == data_of(out, "runlines-inputs")

    def test_each_run_has_its_config_and_the_status_of_each_attempt(
        self, run_dir: Path, tmp_path: Path
    ) -> None:
        write(run_dir / "a.jsonl", line("run_start", run="a", attempt=1, config={"lr": 0.1}))
        train(run_dir, "a", range(1, 5), config={"lr": 0.1, "opt": {"name": "adam"}})

        (run,) = data_of(runlines.report(run_dir, path=tmp_path / "r.html"))["runs"]

        assert run["config"] == {"lr": 0.1, "opt.name": "adam"}
        assert [a["status"] for a in run["attempts"]] == ["died", "ok"]

    def test_metric_and_event_keep_their_charts(self, run_dir: Path, tmp_path: Path) -> None:
        train(run_dir, "a", range(1, 30), evals=True)
        out = tmp_path / "r.html"

        assert main(["report", str(run_dir), "-o", str(out), "--metric", "loss"]) == 0
        assert [(c["event"], c["field"]) for c in data_of(out)["charts"]] == [
            ("train_step", "loss")
        ]
        assert main(["report", str(run_dir), "-o", str(out), "--event", "eval"]) == 0
        assert [(c["event"], c["field"]) for c in data_of(out)["charts"]] == [("eval", "accuracy")]
        assert len(data_of(out)["rows"][0]) > 8  # the table keeps every column

    def test_x_is_any_numeric_field(self, run_dir: Path, tmp_path: Path) -> None:
        write(
            run_dir / "t.jsonl",
            *(line("train_step", run="t", ts=T0 + i, step=i, tokens=512 * i, loss=1 / (i + 1))
              for i in range(10)),
        )  # fmt: skip

        out = runlines.report(run_dir, path=tmp_path / "r.html", x="tokens", metric="loss")

        (chart,) = data_of(out)["charts"]
        assert chart["lines"][0]["x"] == [512.0 * i for i in range(10)]
        assert data_of(out)["x"] == "tokens"

    def test_a_chart_without_the_x_field_is_named_not_drawn(
        self, run_dir: Path, tmp_path: Path
    ) -> None:
        write(
            run_dir / "s.jsonl",
            line("train_step", run="s", step=1, loss=1.0),
            line("system", run="s", ts=T0 + 1, rss_bytes=1000),
        )

        data = data_of(runlines.report(run_dir, path=tmp_path / "r.html"))

        assert [c["field"] for c in data["charts"]] == ["loss"]
        assert len(data["skipped"]) == 1
        assert data["skipped"][0].startswith("system · rss_bytes: by 'step'")

    def test_unknown_metric_is_one_error_line(
        self, run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        train(run_dir, "a", range(1, 5))
        out = tmp_path / "r.html"

        assert main(["report", str(run_dir), "-o", str(out), "--metric", "acc"]) == 1

        err = capsys.readouterr().err
        assert err.startswith("runlines: error: metric 'acc' is in no record; numeric fields: ")
        assert not out.exists()

    def test_without_pandas_the_charts_say_what_to_install(
        self,
        run_dir: Path,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        train(run_dir, "a", range(1, 5))
        for name in ("numpy", "pandas", "pyarrow"):
            monkeypatch.setitem(sys.modules, name, None)
        # the charts' module imports numpy at its top: not imported yet, as in a fresh process
        monkeypatch.delitem(sys.modules, "runlines.dashboard._charts")
        monkeypatch.delattr(runlines.dashboard, "_charts")

        assert main(["report", str(run_dir), "-o", str(tmp_path / "r.html")]) == 1

        assert capsys.readouterr().err == (
            "runlines: error: compare() needs pandas and pyarrow: pip install 'runlines[pandas]'\n"
        )

    def test_missing_source_is_one_error_line(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["report", str(tmp_path / "nope.jsonl"), "-o", str(tmp_path / "r.html")]) == 1

        assert capsys.readouterr().err.startswith("runlines: error: ")

    def test_empty_group_by_is_a_usage_error(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["report", str(run_dir), "--group-by", " , "]) == 2

        assert "expected config keys separated by commas" in capsys.readouterr().err

    def test_a_config_value_cannot_end_the_data_block(self, run_dir: Path, tmp_path: Path) -> None:
        evil = "</script><script>alert(1)</script> {{inputs}}"
        train(run_dir, "a", range(1, 3), config={"note": evil})

        out = runlines.report(run_dir, path=tmp_path / "r.html")

        assert out.read_text().count("<script>alert(1)") == 0
        assert data_of(out)["runs"][0]["config"]["note"] == evil


class TestDownsampling:
    def test_a_long_series_keeps_its_spike_and_its_nan(self) -> None:
        values = np.sin(np.arange(100_000) / 500.0)
        values[54_321] = 40.0  # one spike
        values[77_777] = math.nan
        missing = np.arange(100_000) % 7 == 3  # steps some runs never logged: pd.NA
        # as compare() builds its columns: a NaN logged stays NaN, apart from pd.NA
        column = pd.Series(pd.arrays.FloatingArray(values, missing))
        xs = np.arange(100_000, dtype="float64")

        line = _charts.downsampled(xs, column, 200)

        assert len(line["x"]) <= 2 * 200
        assert max(line["y"]) == 40.0
        assert line["x"][line["y"].index(40.0)] == 54_321.0
        assert line["marks"] == [[77_777.0, "NaN"]]
        assert line["count"] == 100_000 - len(range(3, 100_000, 7)) - 1
        assert line["x"] == sorted(line["x"])

    def test_the_budget_shares_points_among_the_lines(self) -> None:
        assert _report._buckets(1) == 1000  # the dashboard's
        assert _report._buckets(200) == _report.MAX_POINTS // 400
        assert _report._buckets(10**6) == _report.MIN_BUCKETS


class TestGroups:
    """Groups come from compare(group_by=...): a mean line and a band per group."""

    def test_each_group_is_its_mean_and_band_with_n(self) -> None:
        index = pd.Index(np.arange(5000, dtype="float64"), name="step")
        stats = {
            "n": np.full(5000, 3.0),
            "mean": np.ones(5000),
            "std": np.full(5000, 0.1),
            "min": np.full(5000, 0.5),
            "max": np.full(5000, 1.5),
        }
        stats["max"][4321] = 99.0  # one run's spike: in the band, not the mean
        table = pd.concat(
            {
                "lr=0.1": pd.DataFrame(stats, index=index),
                "lr=0.2": pd.DataFrame(stats, index=index) * 2,
            },
            axis=1,
        )

        bands = _charts.group_bands(table, 100)

        assert [band["group"] for band in bands] == ["lr=0.1", "lr=0.2"]
        first = bands[0]
        assert len(first["x"]) <= 3 * 2 * 100
        assert 4321.0 in first["x"]
        assert max(first["max"]) == 99.0
        assert set(first["n"]) == {3.0}
        assert bands[1]["mean"][0] == 2.0

    def test_group_by_draws_a_band_per_group(
        self, run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        for seed, lr in enumerate((0.1, 0.1, 0.2, 0.2)):
            train(run_dir, f"r{seed}", range(1, 20), config={"lr": lr, "seed": seed})
        out = tmp_path / "r.html"

        assert (
            main(["report", str(run_dir), "-o", str(out), "--group-by", "lr", "--metric", "loss"])
            == 0
        )

        data = data_of(out)
        assert data["group_by"] == ["lr"]
        (chart,) = data["charts"]
        assert [g["group"] for g in chart["groups"]] == ["lr=0.1", "lr=0.2"]
        assert chart["groups"][0]["n"] == [2.0] * 19
