"""The Parquet copy a run writes as it closes, `runlines compact`, and runs() through copies."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest

import runlines
import runlines._compact as compacting
from _logs import T0, line, write
from runlines.cli import main
from runlines.reading._parquet import compact, write_copy


def _train(directory: Path, name: str = "r", steps: int = 20, **options: Any) -> Path:
    with runlines.Run(name, directory, stdout=False, config={"lr": 0.1}, **options) as run:
        for step in range(steps):
            run.log("train", step=step, loss=1.0 / (step + 1))
        run.log("eval", step=steps, accuracy=0.5)
    return directory / f"{name}.jsonl"


class TestAtClose:
    def test_compact_true_writes_a_zstd_copy_beside_the_log(self, tmp_path: Path) -> None:
        log = _train(tmp_path, compact=True)

        copy = tmp_path / "r.parquet"
        assert copy.is_file()
        columns = pq.ParquetFile(copy).metadata.row_group(0).column(0)
        assert columns.compression == "ZSTD"
        assert len(runlines.load(log)) == 23

    def test_compact_false_writes_none(self, tmp_path: Path) -> None:
        _train(tmp_path, compact=False)

        assert not (tmp_path / "r.parquet").exists()

    def test_by_default_only_a_log_over_the_threshold_gets_one(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        _train(tmp_path / "small")
        monkeypatch.setattr(compacting, "AUTO_BYTES", 1000)
        _train(tmp_path / "big")

        assert not (tmp_path / "small" / "r.parquet").exists()
        assert (tmp_path / "big" / "r.parquet").is_file()

    def test_a_run_ended_by_ctrl_c_writes_no_copy(self, tmp_path: Path) -> None:
        with pytest.raises(KeyboardInterrupt), runlines.Run("r", tmp_path, stdout=False,
                                                            compact=True) as run:  # fmt: skip
            run.log("train", step=1)
            raise KeyboardInterrupt

        assert not (tmp_path / "r.parquet").exists()

    def test_a_run_ended_by_sigterm_writes_no_copy(self, tmp_path: Path) -> None:
        run = runlines.Run("r", tmp_path, stdout=False, compact=True)
        run.log("train", step=1)

        run._on_signal(signal.SIGTERM, True)

        assert run.closed
        assert not (tmp_path / "r.parquet").exists()

    @pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork: POSIX only")
    def test_a_forked_child_that_closes_the_run_writes_no_copy(self, tmp_path: Path) -> None:
        run = runlines.Run("r", tmp_path, stdout=False, compact=True)
        run.log("train", step=1)
        child = os.fork()
        if child == 0:  # the child: close its copy of the run, then leave at once
            run.close()
            os._exit(0 if not (tmp_path / "r.parquet").exists() else 3)
        _, status = os.waitpid(child, 0)

        assert os.waitstatus_to_exitcode(status) == 0
        assert not (tmp_path / "r.parquet").exists()
        run.close()
        assert (tmp_path / "r.parquet").is_file()

    def test_a_failed_run_still_gets_its_copy(self, tmp_path: Path) -> None:
        with pytest.raises(ValueError, match="boom"), runlines.Run("r", tmp_path, stdout=False,
                                                                   compact=True):  # fmt: skip
            raise ValueError("boom")

        assert (tmp_path / "r.parquet").is_file()

    def test_a_copy_that_cannot_be_written_warns_and_the_run_ends_well(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        def fail(path: Any) -> None:
            raise OSError("disk full")

        monkeypatch.setattr("runlines.reading._parquet.write_copy", fail)

        with pytest.warns(runlines.RunlinesWarning, match="Parquet copy .* was not written"):
            log = _train(tmp_path, compact=True)

        assert runlines.load(log)["event"].iloc[-1] == "run_end"

    def test_compact_must_be_a_bool_or_none(self, tmp_path: Path) -> None:
        with pytest.raises(TypeError, match="compact must be True, False or None"):
            runlines.Run("r", tmp_path, stdout=False, compact="yes")  # type: ignore[arg-type]

        assert not (tmp_path / "r.jsonl").exists()


class TestCompactCommand:
    def test_compact_writes_a_copy_of_each_log_and_prints_it(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        write(tmp_path / "a.jsonl", line("train", run="a", step=1, loss=0.5))
        write(tmp_path / "b.jsonl", line("train", run="b", step=1, loss=0.25))

        assert main(["compact", str(tmp_path)]) == 0

        printed = capsys.readouterr().out.split()
        assert printed == [str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")]

    def test_compact_of_an_empty_log_writes_nothing(self, tmp_path: Path) -> None:
        write(tmp_path / "a.jsonl")

        assert compact(tmp_path) == []
        assert not (tmp_path / "a.parquet").exists()

    def test_a_torn_last_line_is_left_to_the_jsonl(self, tmp_path: Path) -> None:
        log = write(tmp_path / "a.jsonl", line("train", step=1), b'{"ts": 1, "eve')

        write_copy(log)

        with pytest.warns(runlines.RunlinesWarning, match="line 2"):
            frame = runlines.load(log)
        assert frame["step"].tolist() == [1]

    def test_compact_of_a_missing_source_is_a_clear_error(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["compact", str(tmp_path / "nope.jsonl")]) == 1

        assert "runlines: error:" in capsys.readouterr().err


class TestRunsFromCopies:
    def _sweep(self, root: Path) -> list[Path]:
        logs = []
        for name in ("a", "b", "c"):
            logs.append(_train(root, name, compact=False))
        with runlines.Run("b", root, stdout=False, resume_step=10, compact=False) as run:
            run.log("train", step=11, loss=0.001)
        return logs

    def test_runs_through_copies_equals_runs_of_the_jsonl(self, tmp_path: Path) -> None:
        logs = self._sweep(tmp_path)
        plain = runlines.runs(tmp_path)
        for log in logs:
            write_copy(log)

        copied = runlines.runs(tmp_path)

        pd.testing.assert_frame_equal(plain, copied)
        assert copied.set_index("run").loc["b", "train.loss.best"] == 0.001

    def test_records_after_the_copy_count_in(self, tmp_path: Path) -> None:
        log = _train(tmp_path, "a", compact=True)
        with runlines.Run("a", tmp_path, stdout=False, resume_step=5, compact=False) as run:
            run.log("train", step=6, loss=5.0)
            run.log("eval", step=7, accuracy=0.9)
        copied = runlines.runs(log)
        (tmp_path / "a.parquet").unlink()

        plain = runlines.runs(log)

        pd.testing.assert_frame_equal(plain, copied)
        assert copied.loc[0, "attempts"] == 2
        assert copied.loc[0, "eval.accuracy"] == 0.9

    def test_runs_reads_no_jsonl_record_of_a_copied_log(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        log = _train(tmp_path, compact=True)

        def no_records(*args: Any, **kwargs: Any) -> None:
            raise AssertionError("the JSONL was read")

        monkeypatch.setattr("runlines.reading._table.iter_events", no_records)

        assert runlines.runs(log).loc[0, "train.loss"] == pytest.approx(1 / 20)

    def test_the_run_table_of_a_hand_written_log_survives_the_copy(self, tmp_path: Path) -> None:
        log = write(
            tmp_path / "h.jsonl",
            line("run_start", ts=T0, attempt=1, config={"opt": {"lr": 0.1}, "tags": [1, 2]}),
            line("train", ts=T0 + 1, step=1, loss=float("nan"), big=2**70),
            line("train", ts=T0 + 2, step=2, loss=float("inf")),
            line("run_end", ts=T0 + 3, status="ok"),
        )
        plain = runlines.runs(log)
        write_copy(log)

        copied = runlines.runs(log)

        pd.testing.assert_frame_equal(plain, copied)
        assert copied.loc[0, "train.big"] == 2**70
