"""`runlines sync` to a folder: prefixes of whole lines while the job writes, then equal."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from _sync_checks import (
    Writer,
    check_equal,
    check_prefixes,
    folder_files,
    folder_markers,
    race,
)

import runlines
from _logs import line, write
from runlines.cli import _sync as command
from runlines.cli import main
from runlines.reading import is_locked


def _sync(*paths: Path | str) -> int:
    return main(["sync", *map(str, paths)])


def _check_sync(source: Path, dest: Path) -> None:
    assert _sync(source, dest) == 0


def test_fifty_passes_while_the_job_writes_are_prefixes_then_equal(tmp_path: Path) -> None:
    source, dest = tmp_path / "runs", tmp_path / "copy"
    writer = Writer(source, "job")
    try:
        race(
            writer,
            50,
            seed=1,
            one_pass=lambda: _check_sync(source, dest),
            check=lambda: _check_live_copy(source, dest),
        )
    finally:
        writer.kill()

    assert _sync(source, dest) == 0
    check_equal(folder_files(source), folder_files(dest))
    assert folder_markers(dest) == {}
    assert runlines.runs(dest)["status"].tolist() == ["ok"]
    assert any(rel.startswith("job.artifacts/") for rel in folder_files(dest))


def _check_live_copy(source: Path, dest: Path) -> None:
    """Assert that *dest* holds whole lines of the source's and reads live, as it does."""
    check_prefixes(folder_files(source), folder_files(dest))
    assert is_locked(source / "job.jsonl")
    assert list(folder_markers(dest)) == ["job.jsonl"]
    assert is_locked(dest / "job.jsonl")


def test_a_second_pass_sends_nothing_and_says_so(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with runlines.Run("a", run_dir, stdout=False) as run:
        run.log("train_step", step=1, loss=0.5)
        run.artifact("notes", "hello")
    dest = tmp_path / "copy"
    assert _sync(run_dir, dest) == 0
    state = (dest / ".runlines-sync.json").read_bytes()
    capsys.readouterr()

    assert _sync(run_dir, dest) == 0

    assert capsys.readouterr().out.startswith(f"nothing new to send to {dest}")
    assert (dest / ".runlines-sync.json").read_bytes() == state


def test_a_torn_last_line_is_sent_once_it_ends(tmp_path: Path) -> None:
    source, dest = tmp_path / "runs", tmp_path / "copy"
    source.mkdir()
    whole = line("run_start", run="a")
    log = write(source / "a.jsonl", whole, b'{"ts": 1.0, "event": "st')
    assert _sync(source, dest) == 0
    assert (dest / "a.jsonl").read_bytes() == whole

    with log.open("ab") as out:
        out.write(b'ep", "run": "a"}\n')
    assert _sync(source, dest) == 0

    assert (dest / "a.jsonl").read_bytes() == log.read_bytes()


def test_a_log_written_anew_at_the_source_is_sent_again_from_its_start(tmp_path: Path) -> None:
    source, dest = tmp_path / "runs", tmp_path / "copy"
    source.mkdir()
    log = write(source / "a.jsonl", line("run_start", run="a"), line("step", run="a", n=1))
    assert _sync(source, dest) == 0

    write(source / "a.jsonl", line("run_start", run="a", ts=2.0), line("step", run="a", n=22))
    assert _sync(source, dest) == 0

    assert (dest / "a.jsonl").read_bytes() == log.read_bytes()


def test_an_artifact_whose_bytes_the_destination_holds_is_linked_not_sent(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with runlines.Run("a", run_dir, stdout=False) as run:
        first = run.artifact("weights", b"w" * 10_000)
    dest = tmp_path / "copy"
    assert _sync(run_dir, dest) == 0
    with runlines.Run("b", run_dir, stdout=False) as run:
        second = run.artifact("weights", b"w" * 10_000)
    capsys.readouterr()

    assert _sync(run_dir, dest) == 0

    out = capsys.readouterr().out
    assert "1 artifact deduplicated by sha256" in out
    copied = dest / second.relative_to(run_dir)
    assert copied.read_bytes() == second.read_bytes()
    assert copied.stat().st_ino == (dest / first.relative_to(run_dir)).stat().st_ino


def test_the_synced_folder_reads_as_the_source_does(run_dir: Path, tmp_path: Path) -> None:
    with runlines.Run("a", run_dir, stdout=False) as run:
        for step in range(5):
            run.log("train_step", step=step, loss=1.0 / (step + 1))
    with runlines.Run("b", run_dir, stdout=False) as run:
        run.log("train_step", step=0, loss=2.0)
    dest = tmp_path / "copy"

    assert _sync(run_dir, dest) == 0

    columns = ["run", "status", "train_step.loss"]
    assert runlines.runs(dest)[columns].equals(runlines.runs(run_dir)[columns])
    assert runlines.load(dest).drop(columns="ts").equals(runlines.load(run_dir).drop(columns="ts"))


def test_a_run_live_at_the_source_reads_running_in_the_copy(run_dir: Path, tmp_path: Path) -> None:
    """The copy holds no lock, but a live-at-source marker beside the log (docs/sync.md)."""
    dest = tmp_path / "copy"
    with runlines.Run("a", run_dir, stdout=False) as run:
        run.log("train_step", step=0, loss=2.0)
        assert _sync(run_dir, dest) == 0

        assert runlines.runs(run_dir)["status"].tolist() == ["running"]
        assert runlines.runs(dest)["status"].tolist() == ["running"]
        assert list(folder_markers(dest)) == ["a.jsonl"]
    assert _sync(run_dir, dest) == 0

    assert runlines.runs(dest)["status"].tolist() == ["ok"]
    assert folder_markers(dest) == {}


def test_two_sources_with_a_file_of_the_same_name_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for folder in ("exp1", "exp2"):
        (tmp_path / folder).mkdir()
        write(tmp_path / folder / "a.jsonl", line("run_start", run="a"))

    assert _sync(tmp_path / "exp1", tmp_path / "exp2", tmp_path / "copy") == 1

    assert "both have a.jsonl" in capsys.readouterr().err
    assert not (tmp_path / "copy").exists()


def test_a_destination_inside_its_source_is_refused(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir.mkdir()

    assert _sync(run_dir, run_dir / "copy") == 1

    assert "is inside the source" in capsys.readouterr().err


def test_a_log_file_as_source_sends_its_run_files_only(run_dir: Path, tmp_path: Path) -> None:
    for name in ("a", "b"):
        with runlines.Run(name, run_dir, stdout=False) as run:
            run.artifact("notes", name)
    runlines.tag(run_dir / "a.jsonl", "best")
    dest = tmp_path / "copy"

    assert _sync(run_dir / "a.jsonl", dest) == 0

    assert sorted(folder_files(dest)) == ["a.artifacts/notes.txt", "a.jsonl", "a.notes.jsonl"]


def test_watch_syncs_each_pass_until_stopped(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dest = tmp_path / "copy"
    run = runlines.Run("a", run_dir, stdout=False)
    seen = []

    def sleep(_seconds: float) -> None:
        seen.append((dest / "a.jsonl").read_bytes().count(b"\n"))
        if len(seen) == 3:
            run.close()
            raise KeyboardInterrupt
        run.log("train_step", step=len(seen))

    monkeypatch.setattr(command, "_sleep", sleep)

    assert main(["sync", str(run_dir), str(dest), "--watch", "--interval", "0.1"]) == 0

    assert seen == [1, 2, 3]
    assert json.loads((dest / "a.jsonl").read_bytes().splitlines()[-1])["step"] == 2


def test_a_missing_source_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _sync(tmp_path / "nope", tmp_path / "copy") == 1

    assert f"no such folder of logs or .jsonl log: {tmp_path / 'nope'}" in capsys.readouterr().err


def test_a_store_without_fsspec_says_what_to_install(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir.mkdir()
    monkeypatch.setitem(sys.modules, "fsspec", None)  # import fsspec raises ImportError
    monkeypatch.delitem(sys.modules, "runlines._sync.store", raising=False)

    assert _sync(run_dir, "s3://bucket/runs") == 1

    assert "pip install 'runlines[sync-s3]'" in capsys.readouterr().err


def test_a_source_without_a_destination_is_a_usage_error(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _sync(run_dir) == 2

    assert "the following arguments are required: DEST" in capsys.readouterr().err
