"""The CLI's tables: ls (sort, columns, -r, --json), compare per event, plot --by ts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import runlines
from _logs import T0, line, raw, write
from _optional import needs
from runlines.cli import main


def _sweep(root: Path) -> Path:
    for name, acc in (("a", 0.7), ("b", 0.9), ("c", 0.8)):
        write(
            root / f"{name}.jsonl",
            line("run_start", run=name, attempt=1, config={"optim": {"lr": acc / 10}}),
            line("train_step", run=name, ts=T0 + 1, step=1, loss=0.1),
            line("eval", run=name, ts=T0 + 2, step=1, loss=0.2, accuracy=acc),
            line("run_end", run=name, ts=T0 + 3, status="ok"),
        )
    return root


class TestLs:
    def test_json_prints_every_column(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["ls", "--json", str(_sweep(tmp_path))]) == 0

        rows = json.loads(capsys.readouterr().out)
        assert [r["run"] for r in rows] == ["a", "b", "c"]
        assert rows[1]["eval.accuracy"] == 0.9
        assert rows[1]["config.optim.lr"] == pytest.approx(0.09)
        assert rows[0]["started"].startswith("2026-01-01T00:00:00")

    def test_sort_descending_and_a_column_choice(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        args = ["ls", "--sort=-eval.accuracy", "--columns", "eval.accuracy", str(_sweep(tmp_path))]

        assert main(args) == 0

        header, *rows = capsys.readouterr().out.splitlines()
        assert header.split()[-1] == "EVAL.ACCURACY"
        assert [r.split()[0] for r in rows] == ["b", "c", "a"]
        assert rows[0].split()[-1] == "0.9"

    def test_an_unknown_sort_column_names_the_columns(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["ls", "--sort", "acc", str(_sweep(tmp_path))]) == 1

        assert "eval.accuracy" in capsys.readouterr().err

    def test_recursive_walks_subfolders_and_labels_collisions(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        for folder in ("exp1", "exp2"):
            write(tmp_path / folder / "baseline.jsonl", line("eval", run="baseline", loss=1.0))

        assert main(["ls", "-r", "--json", str(tmp_path)]) == 0

        assert sorted(r["run"] for r in json.loads(capsys.readouterr().out)) == [
            "exp1/baseline",
            "exp2/baseline",
        ]


class TestMetricOfOneEvent:
    def _log(self, tmp_path: Path) -> Path:
        return write(
            tmp_path / "lr1e-2.jsonl",
            line("train_step", run="lr1e-2", step=50, loss=0.0975),
            line("eval", run="lr1e-2", ts=T0 + 1, step=50, loss=0.1085),
        )

    def test_compare_never_averages_train_and_eval_loss(self, tmp_path: Path) -> None:
        table = runlines.compare(self._log(tmp_path), metric="loss")

        assert list(table.columns) == ["lr1e-2 · train_step", "lr1e-2 · eval"]
        assert table.loc[50].tolist() == [0.0975, 0.1085]

    def test_a_record_whose_event_is_no_string_is_no_metric(self, tmp_path: Path) -> None:
        log = write(
            tmp_path / "r.jsonl",
            line("train_step", run="r", step=1, loss=0.5),
            line("train_step", run="r", step=2, loss=0.25),
            raw({"ts": T0, "event": [], "run": "r", "step": 1, "loss": 9.0}),  # hand-written
        )

        table = runlines.compare(log, metric="loss")

        assert table["r"].to_dict() == {1: 0.5, 2: 0.25}

    def test_no_record_holding_both_fields_gives_an_empty_table(self, tmp_path: Path) -> None:
        log = write(
            tmp_path / "r.jsonl",
            line("train_step", run="r", step=1),
            line("eval", run="r", loss=0.5),  # no step
        )

        table = runlines.compare(log, metric="loss")

        assert table.empty
        assert list(table.columns) == []

    def test_cli_compare_prints_a_column_per_event(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["compare", str(self._log(tmp_path)), "--metric", "loss"]) == 0

        out = capsys.readouterr().out
        assert "0.0975" in out
        assert "0.1085" in out
        assert "0.10299" not in out

    def test_same_names_in_two_folders_are_two_columns(self, tmp_path: Path) -> None:
        for folder, loss in (("exp1", 0.1), ("exp2", 0.2)):
            write(
                tmp_path / folder / "baseline.jsonl",
                line("eval", run="baseline", step=1, loss=loss),
            )

        table = runlines.compare(tmp_path / "exp1", tmp_path / "exp2", metric="loss")

        assert table.loc[1].to_dict() == {"exp1/baseline": 0.1, "exp2/baseline": 0.2}

    def test_compare_by_elapsed_seconds(self, tmp_path: Path) -> None:
        table = runlines.compare(self._log(tmp_path), metric="loss", by="elapsed_s", event="eval")

        assert table.index.tolist() == [1.0]

    @pytest.mark.parametrize("by", ["ts", "elapsed_s"])
    def test_plot_by_time(
        self, tmp_path: Path, by: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        pytest.importorskip("matplotlib")
        out = tmp_path / "p.png"

        assert (
            main(["plot", str(self._log(tmp_path)), "--metric", "loss", "--by", by, "-o", str(out)])
            == 0
        )

        assert out.stat().st_size > 0
        assert "2 runs" not in capsys.readouterr().err


class TestJsonAndFolders:
    def test_compare_json(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        log = write(tmp_path / "r.jsonl", line("eval", run="r", step=1, loss=0.5))

        assert main(["compare", "--json", str(log), "--metric", "loss"]) == 0

        assert json.loads(capsys.readouterr().out) == [{"step": 1, "r": 0.5}]

    def test_show_json_lists_last_values_per_event_and_every_attempt(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = write(
            tmp_path / "r.jsonl",
            line("run_start", run="r", attempt=1),
            line("train_step", run="r", step=1, loss=0.1, n=3),
            line("run_end", run="r", status="failed", exc_type="OSError"),
            line("run_start", run="r", ts=T0 + 9, attempt=2),
            line("eval", run="r", ts=T0 + 10, step=1, loss=0.2),
            line("run_end", run="r", ts=T0 + 11, status="ok"),
        )

        assert main(["show", "--json", str(log)]) == 0

        shown = json.loads(capsys.readouterr().out)
        assert [(a["attempt"], a["status"]) for a in shown["attempts"]] == [
            (1, "failed"),
            (2, "ok"),
        ]
        assert {(v["event"], v["field"]): v["value"] for v in shown["last"]} == {
            ("train_step", "loss"): 0.1,
            ("eval", "loss"): 0.2,
        }

    def test_show_keeps_a_long_config_short(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        config = {f"key{i:02d}": i for i in range(30)}
        log = write(tmp_path / "c.jsonl", line("run_start", run="c", config=config))

        assert main(["show", str(log)]) == 0
        short = capsys.readouterr().out
        assert main(["show", "--config", str(log)]) == 0

        assert "key25" not in short
        assert "... 10 more" in short
        assert "key29" in capsys.readouterr().out

    def test_which_finds_a_folder_artifact(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        folder = tmp_path / "ckpt"
        folder.mkdir()
        (folder / "w.bin").write_bytes(b"weights")
        with runlines.Run("r", tmp_path, stdout=False) as run:
            run.artifact("ckpt", path=folder, step=3)

        assert main(["which", "--json", str(folder)]) == 0

        (match,) = json.loads(capsys.readouterr().out)
        assert (match["run"], match["record"]["step"]) == ("r", 3)


def test_show_counts_what_load_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write(
        tmp_path / "r.jsonl",
        line("run_start", run="r", attempt=1),
        *(line("train", run="r", step=s, loss=1.0) for s in (1, 2, 3, 4)),
        line("run_start", run="r", attempt=2, resume_step=2),
        *(line("train", run="r", step=s, loss=0.5) for s in (3, 4)),
        line("run_start", run="r", attempt=3),
        line("train", run="r", step=1, loss=0.1),
    )

    assert main(["show", "--json", str(log)]) == 0

    shown = json.loads(capsys.readouterr().out)
    assert shown["counts"]["train"] == len(runlines.load(log, event="train")) == 4
    assert shown["superseded"] == {"train": 3}


@needs("duckdb")
def test_query_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write(tmp_path / "r.jsonl", line("eval", run="r", step=1, loss=0.5))

    sql = "SELECT run, loss FROM records WHERE event = 'eval'"
    assert main(["query", "--json", sql, str(log)]) == 0

    assert json.loads(capsys.readouterr().out) == [{"run": "r", "loss": 0.5}]


@needs("duckdb")
def test_query_json_tells_a_logged_nan_from_a_missing_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with runlines.Run("r", tmp_path, stdout=False, system=False, on_nonfinite="ignore") as run:
        run.log("eval", step=1, loss=float("nan"))
        run.log("eval", step=2, loss=None)
        run.log("eval", step=3, loss=float("-inf"), scores=[2.5, 1.0])
        run.log("eval", step=4)

    sql = "SELECT step, loss, scores FROM records WHERE event = 'eval' ORDER BY step"
    assert main(["query", "--json", sql, str(run.path)]) == 0

    assert json.loads(capsys.readouterr().out) == [
        {"step": 1, "loss": "NaN", "scores": None},
        {"step": 2, "loss": None, "scores": None},
        {"step": 3, "loss": "-Infinity", "scores": [2.5, 1.0]},
        {"step": 4, "loss": None, "scores": None},
    ]


@needs("duckdb")
def test_query_json_writes_times_as_iso_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = write(tmp_path / "r.jsonl", line("eval", run="r", step=1, loss=0.5))

    sql = "SELECT to_timestamp(0) AS t, 1.5::DECIMAL(4, 2) AS d FROM records"
    assert main(["query", "--json", sql, str(log)]) == 0

    assert json.loads(capsys.readouterr().out) == [{"t": "1970-01-01T00:00:00+00:00", "d": 1.5}]
