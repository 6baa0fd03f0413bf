"""A full disk, a deleted log folder, a read-only folder: training goes on, losses are counted.

The small filesystems are tmpfs mounts made for the test, which needs root (CAP_SYS_ADMIN).
Where mounting is refused the tmpfs tests skip, saying why; the /dev/full tests still cover a
full disk.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _reliability import read_log, strict_loads
from freezegun import freeze_time

import runlines
from runlines import Run, RunlinesWarning

_PAD = "x" * 100


MORE = 1024  # records logged after the deletion


class Mounts:
    """Mounts made for one test, undone in reverse order."""

    def __init__(self) -> None:
        self.made: list[Path] = []

    def mount(self, *args: str, target: Path) -> None:
        done = subprocess.run(
            ["mount", *args, str(target)], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            pytest.skip(
                f"cannot mount here ({done.stderr.strip() or done.returncode}): this test needs "
                "root with CAP_SYS_ADMIN; the /dev/full tests still cover a full disk"
            )
        self.made.append(target)

    def tmpfs(self, target: Path, size: str) -> Path:
        target.mkdir(parents=True, exist_ok=True)
        self.mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", target=target)
        return target

    def read_only(self, target: Path) -> None:
        """Lay a read-only bind mount over *target*: files opened before keep their writes."""
        self.mount("--bind", str(target), target=target)
        self.mount("-o", "remount,ro,bind", target=target)

    def undo(self) -> None:
        for target in reversed(self.made):
            subprocess.run(["umount", "-l", str(target)], capture_output=True, check=False)


@pytest.fixture(name="mounts")
def _mounts() -> Iterator[Mounts]:
    mounts = Mounts()
    try:
        yield mounts
    finally:
        mounts.undo()


def _warnings_of(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("runlines: warning:")]


def _log(run: Run, seqs: range) -> None:
    """Log one record per seq, without reading run.dropped (which checks the file)."""
    for seq in seqs:
        run.log("step", seq=seq, pad=_PAD)


def _log_tracking(run: Run, seqs: range, on_seq: dict[int, Any] | None = None) -> list[int]:
    """Log one record per seq; return the seqs whose log() did not add to run.dropped."""
    kept = []
    for seq in seqs:
        if on_seq and seq in on_seq:
            on_seq[seq]()
        before = run.dropped
        run.log("step", seq=seq, pad=_PAD)
        if run.dropped == before:
            kept.append(seq)
    return kept


@pytest.mark.usefixtures("fast_path")
class TestFullDisk:
    @pytest.mark.parametrize("console", ["off", "json"])
    def test_log_on_dev_full_drops_every_record_warns_once_and_training_goes_on(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str], console: str
    ) -> None:
        run_dir.mkdir(parents=True)
        (run_dir / "r.jsonl").symlink_to("/dev/full")

        run = Run("r", run_dir, stdout=console != "off", console="json")
        for seq in range(100):
            run.log("step", seq=seq)
        assert run.dropped == 101  # run_start and every record
        run.close()

        assert run.dropped == 102  # run_end too
        captured = capsys.readouterr()
        assert len(_warnings_of(captured.err)) == 1
        assert "the file sink failed" in captured.err
        if console == "json":
            out = [strict_loads(line) for line in captured.out.splitlines()]
            assert [r["seq"] for r in out if r["event"] == "step"] == list(range(100))
            assert (out[-1]["event"], out[-1]["dropped"]) == ("run_end", 101)

    @pytest.mark.parametrize("console", ["off", "json"])
    def test_small_filesystem_fills_up_and_frees_space_again(
        self,
        tmp_path: Path,
        mounts: Mounts,
        capsys: pytest.CaptureFixture[str],
        console: str,
    ) -> None:
        """A 64 KiB tmpfs: the log fills it, space comes back, the log fills it again."""
        disk = mounts.tmpfs(tmp_path / "mnt", "64k")
        filler = disk / "filler"
        filler.write_bytes(b"\0" * 16384)

        with Run("r", disk / "runs", stdout=console != "off", console="json") as run:
            kept = _log_tracking(run, range(2000), {1000: filler.unlink})
            dropped_before_end = run.dropped

        assert 0 < len(kept) < 2000
        assert kept[0] == 0
        assert kept[-1] > 1000  # records came back after space did
        assert run.dropped >= 2000 - len(kept)
        captured = capsys.readouterr()
        assert len(_warnings_of(captured.err)) == 1
        whole, torn = [], []
        for line in run.path.read_bytes().split(b"\n"):
            try:
                whole.append(strict_loads(line))
            except ValueError:
                if line:
                    torn.append(line)
        assert len(torn) <= 2, "only writes cut by the two full disks may leave fragments"
        written = [r["seq"] for r in whole if r["event"] == "step"]
        others = [r for r in whole if r["event"] not in ("run_start", "step", "run_end")]
        assert written == kept, (sorted(set(written) ^ set(kept)), others, torn)
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            frame = runlines.load(run.path)
        assert frame[frame.event == "step"]["seq"].tolist() == kept
        assert len([w for w in said if w.category is RunlinesWarning]) == (1 if torn else 0)
        if console == "json":
            out = [strict_loads(line) for line in captured.out.splitlines()]
            assert [r["seq"] for r in out if r["event"] == "step"] == list(range(2000))
            assert out[-1]["dropped"] == dropped_before_end


@pytest.mark.usefixtures("fast_path")
class TestDeletedLog:
    def test_log_deleted_mid_run_is_recreated_with_every_record(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        with Run("r", run_dir, stdout=False) as run:
            _log(run, range(100))
            shutil.rmtree(run_dir)
            _log(run, range(100, 200))

        records, tail = read_log(run.path)
        assert tail == b""
        assert [r["event"] for r in records[:1] + records[-1:]] == ["run_start", "run_end"]
        assert [r["seq"] for r in records if r["event"] == "step"] == list(range(200))
        assert records[-1]["dropped"] == 0
        assert run.dropped == 0
        said = _warnings_of(capsys.readouterr().err)
        assert len(said) == 1
        assert "was deleted while the run was writing it; re-created it" in said[0]

    @pytest.mark.parametrize("path", ["direct", "fsync"])
    def test_log_deleted_mid_run_is_recreated_while_the_run_goes_on(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str], path: str
    ) -> None:
        """Noticed while the run goes on, not only at its end: a later SIGKILL loses nothing.

        "direct" is log()'s own write to the file descriptor (stdout off, no fsync); "fsync"
        goes through FileSink.write. log() checks once a second on both.
        """
        with freeze_time("2026-01-01T00:00:00Z") as frozen:
            run = Run("r", run_dir, stdout=False, fsync=path == "fsync")
            try:
                _log(run, range(10))
                shutil.rmtree(run_dir)
                frozen.tick(2.0)
                _log(run, range(10, 10 + MORE))

                assert run.path.exists(), "the deleted log was not noticed while the run went on"
                records, _ = read_log(run.path)
                steps = [r["seq"] for r in records if r["event"] == "step"]
                assert steps == list(range(10 + MORE))
            finally:
                run.close()
        assert len(_warnings_of(capsys.readouterr().err)) == 1

    def test_log_that_cannot_be_recreated_counts_its_records_as_dropped(
        self, tmp_path: Path, mounts: Mounts, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The folder is deleted, then its filesystem turns read-only: nothing can be saved."""
        disk = mounts.tmpfs(tmp_path / "mnt", "4m")

        with Run("r", disk / "runs", console="json") as run:
            _log(run, range(100))
            shutil.rmtree(disk / "runs")
            mounts.read_only(disk)
            _log(run, range(100, 3000))

        assert not (disk / "runs").exists()
        assert run.dropped == 1 + 3000 + 1  # run_start, the records, run_end: all lost
        captured = capsys.readouterr()
        said = _warnings_of(captured.err)
        assert len(said) == 1
        assert "cannot be re-created" in said[0]
        out = [strict_loads(line) for line in captured.out.splitlines()]
        assert [r["seq"] for r in out if r["event"] == "step"] == list(range(3000))
        assert (out[-1]["event"], out[-1]["dropped"]) == ("run_end", 3001)


@pytest.mark.usefixtures("fast_path")
class TestReadOnlyFolder:
    def test_read_only_folder_keeps_the_open_log_and_refuses_new_files_clearly(
        self, tmp_path: Path, mounts: Mounts, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """As root, chmod stops nothing: a read-only bind mount is what read-only means here.

        The log opened before keeps taking writes; a new artifact fails with the OS error
        (the caller asked for a file, not a log line), and logging goes on after it.
        """
        disk = mounts.tmpfs(tmp_path / "mnt", "4m")
        run_dir = disk / "runs"

        with Run("r", run_dir, stdout=False) as run:
            _log_tracking(run, range(10))
            mounts.read_only(disk)
            kept = _log_tracking(run, range(10, 20))
            with pytest.raises(OSError, match="Read-only file system"):
                run.artifact("preds", {"a": 1})
            kept += _log_tracking(run, range(20, 30))

        assert kept == list(range(10, 30))
        assert run.dropped == 0
        assert _warnings_of(capsys.readouterr().err) == []
        records, _ = read_log(run.path)
        assert [r["seq"] for r in records if r["event"] == "step"] == list(range(30))
        assert records[-1]["status"] == "ok"
        with pytest.raises(OSError, match="pass a writable directory"):
            Run("other", run_dir, stdout=False)


@pytest.mark.usefixtures("pure_python")  # replaces runlines._writer._write, which C does not call
def test_a_write_cut_just_before_its_newline_is_whole_and_not_counted_as_dropped(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk can take every byte of a line but its newline: the record is whole.

    The next line that gets through starts with the missing newline.
    """
    real_write = os.write
    with Run("r", run_dir, stdout=False) as run:
        run.log("step", seq=0)

        def all_but_the_newline(fd: int, data: bytes) -> int:
            return real_write(fd, bytes(data[:-1]))

        def disk_full(fd: int, data: bytes) -> int:
            raise OSError(28, os.strerror(28))

        monkeypatch.setattr("runlines._writer._write", all_but_the_newline)
        monkeypatch.setattr("runlines.sinks.os.write", disk_full)
        run.log("step", seq=1)
        monkeypatch.undo()
        dropped = run.dropped
        run.log("step", seq=2)

    assert dropped == 0
    records, tail = read_log(run.path)
    assert tail == b""
    assert [r["seq"] for r in records if r["event"] == "step"] == [0, 1, 2]


def test_a_write_cut_before_its_newline_on_the_sinks_path_is_ended_by_the_next_line(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As above, through the sinks' own writes (fsync=True takes that path)."""
    real_write = os.write
    cut: list[int] = []

    def all_but_the_newline_then_full(fd: int, data: bytes) -> int:
        if not cut:
            cut.append(fd)
            return real_write(fd, bytes(data[:-1]))
        raise OSError(28, os.strerror(28))

    with Run("r", run_dir, stdout=False, fsync=True) as run:
        run.log("step", seq=0)
        monkeypatch.setattr("runlines.sinks.os.write", all_but_the_newline_then_full)
        run.log("step", seq=1)
        monkeypatch.undo()
        dropped = run.dropped
        run.log("step", seq=2)

    assert (dropped, len(cut)) == (0, 1)
    records, tail = read_log(run.path)
    assert tail == b""
    assert [r["seq"] for r in records if r["event"] == "step"] == [0, 1, 2]


@pytest.mark.usefixtures("pure_python")  # replaces runlines._writer._write, which C does not call
def test_a_failed_write_never_raises_from_log(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every errno a write can fail with: EIO, ENOSPC, EDQUOT, EBADF, EPIPE, EROFS, EFBIG."""
    import errno

    codes = [errno.EIO, errno.ENOSPC, errno.EDQUOT, errno.EBADF, errno.EPIPE, errno.EROFS]
    codes.append(errno.EFBIG)
    with Run("r", run_dir, stdout=False) as run:
        for code in codes:

            def failing(fd: int, data: bytes, code: int = code) -> int:
                raise OSError(code, os.strerror(code))

            monkeypatch.setattr("runlines._writer._write", failing)
            monkeypatch.setattr("runlines.sinks.os.write", failing)
            run.log("step", seq=code)
            monkeypatch.undo()
        run.log("step", seq=-1)

    assert run.dropped == len(codes)
    assert len(_warnings_of(capsys.readouterr().err)) == 1
    records = [json.loads(line) for line in run.path.read_text().splitlines()]
    assert [r["seq"] for r in records if r["event"] == "step"] == [-1]
