"""`runlines ls`: one line per run of folders, logs or run names; --sort, --columns, -r, --json."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from filelock import FileLock
from freezegun import freeze_time

from _logs import T0, line, refuse_to_open, train, write
from runlines import Run
from runlines.cli import main


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


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
    def test_lists_a_finished_run(self, run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
        with (
            freeze_time("2026-05-01 12:00:00") as frozen,
            Run("base", run_dir, stdout=False) as run,
        ):
            for step in (1, 2, 3):
                frozen.tick(60)
                run.log("train_step", step=step, loss=1 / step)

        assert main(["ls", str(run_dir)]) == 0

        header, row = capsys.readouterr().out.strip().splitlines()
        assert header.split() == [
            "RUN",
            "STATUS",
            "ATTEMPTS",
            "STARTED",
            "DURATION",
            "STEP",
            "METRIC",
        ]
        started = _when(datetime(2026, 5, 1, 12, tzinfo=UTC).timestamp())
        assert row.split() == [
            *("base", "ok", "1", *started.split(), "3m00s", "3", "train_step.loss=0.333333")
        ]

    @pytest.mark.parametrize("how", ["denied", "deleted"])
    def test_a_log_that_cannot_be_read_is_named_once_and_left_out(
        self,
        how: str,
        run_dir: Path,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        train(run_dir, "a", range(1, 3))
        theirs = train(run_dir, "b", range(1, 3))
        train(run_dir, "c", range(1, 3))
        refuse_to_open(monkeypatch, theirs, how)

        assert main(["ls", str(run_dir)]) == 0

        captured = capsys.readouterr()
        assert [row.split()[0] for row in captured.out.splitlines()[1:]] == ["a", "c"]
        (warning,) = captured.err.splitlines()
        assert warning.startswith(f"runlines: warning: left out {theirs}: it cannot be read (")

    def test_counts_attempts_and_shows_failed(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        train(run_dir, "f", range(1, 3))
        with (
            pytest.raises(ZeroDivisionError),
            Run("f", run_dir, stdout=False, resume="allow") as run,
        ):
            run.log("train_step", step=3, loss=0.1)
            _ = 1 / 0

        assert main(["ls", str(run_dir)]) == 0

        row = capsys.readouterr().out.splitlines()[1].split()
        assert row[:3] == ["f", "failed", "2"]

    def test_open_run_is_running(self, run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
        with Run("live", run_dir, stdout=False) as run:
            run.log("train_step", step=1, loss=0.5)

            assert main(["ls", str(run_dir)]) == 0

        assert capsys.readouterr().out.splitlines()[1].split()[:2] == ["live", "running"]

    def test_held_lock_without_run_end_is_running(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = write(
            run_dir / "held.jsonl",
            line("run_start", run="held", attempt=1),
            line("train_step", run="held", step=1),
        )

        with FileLock(f"{log}.lock"), freeze_time(datetime.fromtimestamp(T0 + 10, UTC)):
            assert main(["ls", str(run_dir)]) == 0

        assert capsys.readouterr().out.splitlines()[1].split()[:2] == ["held", "running"]

    def test_held_lock_and_silence_is_stalled(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = write(run_dir / "quiet.jsonl", line("run_start", run="quiet", attempt=1))

        with FileLock(f"{log}.lock"), freeze_time(datetime.fromtimestamp(T0 + 61, UTC)):
            assert main(["ls", str(run_dir)]) == 0

        assert capsys.readouterr().out.splitlines()[1].split()[:2] == ["quiet", "stalled"]

    def test_no_run_end_and_no_lock_is_died_with_last_record_time(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        write(
            run_dir / "gone.jsonl",
            line("run_start", run="gone", attempt=1),
            line("train_step", run="gone", ts=T0 + 90, step=7, loss=0.3),
        )

        assert main(["ls", str(run_dir)]) == 0

        row = capsys.readouterr().out.splitlines()[1]
        assert f"died (last record {_when(T0 + 90)})" in row
        assert "loss=0.3" in row
        assert not (run_dir / "gone.jsonl.lock").exists()  # the probe creates no lock file

    def test_released_lock_file_is_died(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = write(run_dir / "gone.jsonl", line("run_start", run="gone", attempt=1))
        (run_dir / "gone.jsonl.lock").touch()

        assert main(["ls", str(run_dir)]) == 0

        assert "died" in capsys.readouterr().out
        assert log.exists()

    def test_rank_files_are_one_run(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("WORLD_SIZE", "2")
        for rank in ("0", "1"):
            monkeypatch.setenv("RANK", rank)
            train(run_dir, "ddp", range(1, 3))

        assert main(["ls", str(run_dir)]) == 0

        rows = capsys.readouterr().out.splitlines()[1:]
        assert len(rows) == 1
        assert rows[0].startswith("ddp (2 ranks)")

    def test_metric_without_loss_is_the_first_numeric_field(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        write(run_dir / "acc.jsonl", line("eval", run="acc", step=4, accuracy=0.75, split="val"))

        assert main(["ls", str(run_dir)]) == 0

        assert "accuracy=0.75" in capsys.readouterr().out

    def test_a_file_that_is_no_log_is_skipped_with_a_warning(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        train(run_dir, "good", range(1, 3))
        write(run_dir / "junk.jsonl", b"\x00\x01 not json\n" * 5)

        assert main(["ls", str(run_dir)]) == 0

        captured = capsys.readouterr()
        assert [row.split()[0] for row in captured.out.splitlines()[1:]] == ["good"]
        assert "runlines: warning: left out" in captured.err
        assert "junk.jsonl: it is not a runlines log" in captured.err

    def test_empty_log_is_listed(self, run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
        write(run_dir / "new.jsonl")

        assert main(["ls", str(run_dir)]) == 0

        assert capsys.readouterr().out.splitlines()[1].split()[:2] == ["new", "died"]

    def test_folder_without_logs_is_an_error(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["ls", str(tmp_path)]) == 1

        err = capsys.readouterr().err
        assert err.startswith("runlines: error: ")
        assert "has no *.jsonl logs" in err
        assert err.count("\n") == 1

    def test_lists_the_runs_of_several_sources(
        self,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        train(tmp_path / "a", "base", range(1, 3))
        train(tmp_path / "a", "wide", range(1, 4))
        train(tmp_path / "b", "base", range(1, 5))
        solo = train(tmp_path / "c", "solo", range(1, 2))
        train(tmp_path, "named", range(1, 6))
        monkeypatch.chdir(tmp_path)

        assert main(["ls", "a", "b", str(solo), "named"]) == 0

        header, *rows = capsys.readouterr().out.splitlines()
        assert header.split()[:2] == ["RUN", "STATUS"]
        # the same name in two folders is labelled by its folder, as in one folder's subfolders
        assert [(r.split()[0], r.split()[6]) for r in rows] == [
            ("a/base", "2"),
            ("wide", "3"),
            ("b/base", "4"),
            ("solo", "1"),
            ("named", "5"),
        ]

    def test_json_of_several_sources_lists_each_log_once(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        one = train(tmp_path / "a", "one", range(1, 3))
        two = train(tmp_path / "b", "two", range(1, 4))

        assert main(["ls", "--json", str(tmp_path / "a"), str(tmp_path / "b"), str(one)]) == 0

        rows = json.loads(capsys.readouterr().out)
        assert [(r["run"], r["path"], r["step"]) for r in rows] == [
            ("one", str(one), 2),
            ("two", str(two), 3),
        ]

    def test_a_missing_source_is_an_error(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        train(tmp_path / "a", "one", range(1, 3))

        assert main(["ls", str(tmp_path / "a"), str(tmp_path / "nope")]) == 1

        assert capsys.readouterr().err == (
            f"runlines: error: no such log or folder: {tmp_path / 'nope'}; "
            "pass a folder of logs or a .jsonl log file\n"
        )

    def test_a_folder_whose_logs_are_all_in_subfolders_suggests_r(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        train(tmp_path / "exp1", "base", range(1, 3))
        train(tmp_path / "exp2" / "deep", "wide", range(1, 3))
        (tmp_path / "notes.txt").write_text("no log")

        assert main(["ls", str(tmp_path)]) == 1

        err = capsys.readouterr().err
        assert err == (
            f"runlines: error: {tmp_path} has no *.jsonl logs of its own, but its subfolders "
            f"hold 2 (exp1/base.jsonl, 1 more); list them with: runlines ls -r {tmp_path}\n"
        )
        assert main(["ls", "-r", str(tmp_path)]) == 0  # the suggestion works
        rows = capsys.readouterr().out.splitlines()[1:]
        assert [row.split()[0] for row in rows] == ["base", "wide"]

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
