"""`runlines sync` to an S3 server the test runs (moto's): segments and a manifest, read back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _sync_checks import (
    Writer,
    check_equal,
    check_prefixes,
    folder_files,
    race,
    store_files,
    store_markers,
)

import runlines
from runlines.cli import main


def _check_sync(*paths: Path | str) -> None:
    assert main(["sync", *map(str, paths)]) == 0


def test_fifty_passes_while_the_job_writes_are_prefixes_then_equal(
    tmp_path: Path, bucket: tuple[Any, str]
) -> None:
    fs, name = bucket
    source, dest = tmp_path / "runs", f"s3://{name}/team/runs"
    writer = Writer(source, "job")
    seen: dict[str, bytes] = {}

    def check() -> None:
        check_prefixes(folder_files(source), store_files(fs, f"{name}/team/runs", seen))
        _check_marked(fs, f"{name}/team/runs", ["job.jsonl"])

    try:
        race(
            writer,
            50,
            seed=2,
            one_pass=lambda: _check_sync(source, dest),
            check=check,
        )
    finally:
        writer.kill()

    _check_sync(source, dest)
    check_equal(folder_files(source), store_files(fs, f"{name}/team/runs"))
    _check_marked(fs, f"{name}/team/runs", [])
    assert len(fs.ls(f"{name}/team/runs/job.jsonl.seg")) > 2  # a manifest and segments


def _check_marked(fs: Any, root: str, logs: list[str]) -> None:
    """Assert that the logs of the store at *root* marked live at the source are *logs*."""
    assert list(store_markers(fs, root)) == logs


def test_a_store_syncs_back_down_and_reads_as_the_source(
    run_dir: Path,
    tmp_path: Path,
    bucket: tuple[Any, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for run_name in ("a", "b"):
        with runlines.Run(run_name, run_dir, stdout=False) as run:
            run.log("train_step", step=0, loss=2.0)
            run.artifact("weights", b"w" * 1000)
    url = f"s3://{bucket[1]}/runs"
    _check_sync(run_dir, url)
    monkeypatch.setenv("RUNLINES_SYNC_CACHE", str(tmp_path / "cache"))

    _check_sync(url, tmp_path / "down")

    check_equal(folder_files(run_dir), folder_files(tmp_path / "down"))
    columns = ["run", "status", "train_step.loss"]
    assert runlines.runs(url)[columns].equals(runlines.runs(run_dir)[columns])
    assert len(runlines.load(url)) == len(runlines.load(run_dir))
    assert (tmp_path / "cache" / "s3" / bucket[1] / "runs" / "a.jsonl").is_file()
    capsys.readouterr()
    _check_sync(run_dir, url)
    assert capsys.readouterr().out.startswith(f"nothing new to send to {url}")


def test_a_killed_pass_leaves_a_segment_the_manifest_does_not_name_and_the_next_writes_over_it(
    tmp_path: Path, bucket: tuple[Any, str]
) -> None:
    fs, name = bucket
    source = tmp_path / "runs"
    source.mkdir()
    (source / "a.jsonl").write_bytes(b'{"ts": 1.0, "event": "a", "run": "a"}\n')
    _check_sync(source, f"s3://{name}")
    fs.pipe_file(f"{name}/a.jsonl.seg/000002", b'{"ts": 9.0, "event": "orphan"}\n')

    with (source / "a.jsonl").open("ab") as out:
        out.write(b'{"ts": 2.0, "event": "b", "run": "a"}\n')
    _check_sync(source, f"s3://{name}")

    check_equal(folder_files(source), store_files(fs, name))


def test_reading_a_store_url_without_runs_names_it(
    tmp_path: Path, bucket: tuple[Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNLINES_SYNC_CACHE", str(tmp_path / "cache"))

    with pytest.raises(runlines.ReadError, match=f"s3://{bucket[1]}/typo holds no synced runs"):
        runlines.runs(f"s3://{bucket[1]}/typo")
