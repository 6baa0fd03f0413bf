"""`runlines which PATH`: the run that registered a file or folder, found by its sha256."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _logs import refuse_to_open, train, write
from runlines import Run
from runlines.cli import main


class TestWhich:
    @pytest.fixture(name="checkpoint")
    def _checkpoint(self, run_dir: Path) -> Path:
        checkpoint = write(run_dir / "ckpt-3.pt", b"\x00weights" * 1000)
        train(run_dir, "w", range(1, 3))
        with Run("w", run_dir, stdout=False, resume_step=2, resume="allow") as run:
            run.log("train_step", step=3, loss=0.1)
            run.artifact("ckpt", path=checkpoint, step=3)
        return checkpoint

    def test_a_log_that_cannot_be_read_is_named_and_the_others_searched(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        weights = run_dir / "model.bin"
        with Run("w", run_dir, stdout=False) as run:
            weights.write_bytes(b"weights")
            run.artifact("model", path=weights)
        theirs = train(run_dir, "theirs", range(1, 3))
        refuse_to_open(monkeypatch, theirs, "denied")

        assert main(["which", str(weights)]) == 0

        captured = capsys.readouterr()
        assert captured.out.startswith("run w  attempt 1")
        assert f"left out {theirs}: it cannot be read (Permission denied)" in captured.err

    def test_finds_the_run_that_registered_a_file(
        self, checkpoint: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["which", str(checkpoint)]) == 0

        out = capsys.readouterr().out
        assert out.startswith("run w  attempt 2  step 3  artifact 'ckpt'  path ckpt-3.pt  log ")

    def test_finds_a_copy_moved_elsewhere_by_content(
        self, checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        copy = write(tmp_path / "elsewhere" / "deep" / "model.bin", checkpoint.read_bytes())

        assert main(["which", str(copy)]) == 1
        assert main(["which", str(copy), str(checkpoint.parent)]) == 0

        captured = capsys.readouterr()
        assert "no run registered a file with sha256" in captured.err
        assert "run w  attempt 2" in captured.out

    def test_finds_it_from_a_subfolder_of_the_logs(
        self, checkpoint: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        copy = write(checkpoint.parent / "w.artifacts" / "again.pt", checkpoint.read_bytes())

        assert main(["which", str(copy)]) == 0

        assert "artifact 'ckpt'" in capsys.readouterr().out

    def test_missing_file_is_an_error(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["which", str(run_dir / "nope.pt")]) == 1

        assert "no such file" in capsys.readouterr().err

    def test_which_finds_a_folder_artifact(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        folder = tmp_path / "ckpt"
        folder.mkdir()
        (folder / "w.bin").write_bytes(b"weights")
        with Run("r", tmp_path, stdout=False) as run:
            run.artifact("ckpt", path=folder, step=3)

        assert main(["which", "--json", str(folder)]) == 0

        (match,) = json.loads(capsys.readouterr().out)
        assert (match["run"], match["record"]["step"]) == ("r", 3)
