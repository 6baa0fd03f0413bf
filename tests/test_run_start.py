"""Opening a run as a new user would: reruns, notebooks, mistakes, names; and how it reports
what it lost or how the job failed."""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path
from typing import Any

import filelock
import pytest

import runlines._context
from runlines import Run, RunLockedError
from runlines.reading import is_locked

# Every test runs on log()'s C fast path and on its pure-Python path (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("fast_path")


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line]


class TestResume:
    def test_allow_appends_to_a_finished_run_and_says_so_on_stderr(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        with Run("x", tmp_path / "out", stdout=False):
            pass
        assert capsys.readouterr().err == ""

        with Run("x", tmp_path / "out", stdout=False, resume="allow") as second:
            pass

        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert f"continuing run 'x' in '{tmp_path / 'out'}' as attempt 2" in err
        assert second.attempt == 2
        starts = [r for r in records(second.path) if r["event"] == "run_start"]
        assert [r["attempt"] for r in starts] == [1, 2]

    def test_never_refuses_an_existing_log_and_leaves_it_as_it_was(self, tmp_path: Path) -> None:
        with Run("x", tmp_path, stdout=False) as run:
            run.log("step", step=1)
        before = run.path.read_bytes()

        with pytest.raises(FileExistsError, match=r"run 'x' in .* exists already .*resume='never'"):
            Run("x", tmp_path, stdout=False, resume="never")

        assert run.path.read_bytes() == before

    def test_never_starts_a_fresh_run(self, tmp_path: Path) -> None:
        with Run("x", tmp_path, stdout=False, resume="never") as run:
            pass

        assert run.attempt == 1

    def test_must_refuses_a_missing_log_and_creates_nothing(self, tmp_path: Path) -> None:
        with pytest.raises(FileNotFoundError, match=r"has no log to continue .*resume='must'"):
            Run("x", tmp_path / "out", stdout=False, resume="must")

        assert not (tmp_path / "out").exists()

    def test_must_continues_an_existing_log(self, tmp_path: Path) -> None:
        with Run("x", tmp_path, stdout=False):
            pass

        with Run("x", tmp_path, stdout=False, resume="must") as second:
            pass

        assert second.attempt == 2

    def test_an_unknown_value_is_refused(self, tmp_path: Path) -> None:
        expected = "resume must be 'auto', 'allow', 'never' or 'must', got 'yes'"
        with pytest.raises(ValueError, match=expected):
            Run("x", tmp_path, stdout=False, resume="yes")  # type: ignore[arg-type]


class TestRefusedRunLeavesNothing:
    @pytest.mark.parametrize(
        "options",
        [
            pytest.param({"console": "rich"}, id="console"),
            pytest.param({"resume": "sometimes"}, id="resume"),
            pytest.param({"resume_step": -1}, id="resume_step"),
            pytest.param({"config": 3}, id="config"),
            pytest.param({"redact": "yes"}, id="redact"),
            pytest.param({"capture": "everything"}, id="capture"),
        ],
    )
    def test_no_log_no_lock_no_folder(self, tmp_path: Path, options: dict[str, Any]) -> None:
        with pytest.raises((ValueError, TypeError)):
            Run("cb", tmp_path / "out", stdout=False, **options)

        assert not (tmp_path / "out").exists()

    def test_an_existing_folder_keeps_only_what_it_had(self, tmp_path: Path) -> None:
        (tmp_path / "notes.txt").write_text("mine")

        with pytest.raises(ValueError, match="console must be"):
            Run("cb", tmp_path, console="rich")  # type: ignore[arg-type]

        assert sorted(os.listdir(tmp_path)) == ["notes.txt"]


def test_a_log_that_cannot_be_opened_leaves_only_a_free_lock_file(tmp_path: Path) -> None:
    """The lock file stays: removing it could free a lock that another process waits for."""
    (tmp_path / "x.jsonl").mkdir()  # in the way of the log file

    with pytest.raises(OSError, match="cannot open the log file"):
        Run("x", tmp_path, stdout=False)

    assert sorted(os.listdir(tmp_path)) == ["x.jsonl", "x.jsonl.lock"]
    assert not is_locked(tmp_path / "x.jsonl")


@pytest.mark.parametrize("log_before", [None, b""], ids=["no-log", "empty-log"])
def test_a_start_that_fails_removes_only_the_empty_log_it_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, log_before: bytes | None
) -> None:
    log = tmp_path / "x.jsonl"
    if log_before is not None:
        log.write_bytes(log_before)

    def fail(*args: Any) -> None:
        raise MemoryError

    monkeypatch.setattr(runlines._context, "describe_process", fail)  # before run_start
    with pytest.raises(MemoryError):
        Run("x", tmp_path, stdout=False)

    kept = ["x.jsonl.lock"] if log_before is None else ["x.jsonl", "x.jsonl.lock"]
    assert sorted(os.listdir(tmp_path)) == kept
    assert not is_locked(log)


def test_never_refuses_a_log_that_appeared_while_it_waited_for_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another job held the lock when this one looked, and finished its run meanwhile."""
    with Run("x", tmp_path / "other", stdout=False) as other:
        other.log("step", step=1)
    finished = other.path.read_bytes()
    target = tmp_path / "x.jsonl"

    class OtherJobFinishesFirst(filelock.FileLock):
        def acquire(self, *args: Any, **kwargs: Any) -> Any:
            target.write_bytes(finished)  # the other job's log, complete, as it released
            return super().acquire(*args, **kwargs)

    monkeypatch.setattr(filelock, "FileLock", OtherJobFinishesFirst)
    with pytest.raises(FileExistsError, match=r"exists already .*resume='never'"):
        Run("x", tmp_path, stdout=False, resume="never")

    assert target.read_bytes() == finished
    assert not is_locked(target)


def test_reopening_a_run_in_the_same_process_names_the_open_run(tmp_path: Path) -> None:
    """A notebook cell run twice: the message says who holds it and what to do."""
    first = Run("nb", tmp_path, stdout=False)

    with pytest.raises(RunLockedError) as caught:
        Run("nb", tmp_path, stdout=False)
    first.close()

    message = str(caught.value)
    assert "is already open in this process as Run('nb'" in message
    assert "call close() on that Run" in message
    assert f"pid {os.getpid()}" not in message
    with Run("nb", tmp_path, stdout=False, resume="allow") as again:  # closed: it opens again
        pass
    assert again.attempt == 2


class TestJsonlName:
    def test_a_name_ending_in_jsonl_is_the_log_file_name(self, tmp_path: Path) -> None:
        with Run("x.jsonl", tmp_path, stdout=False) as run:
            run.log("step", step=1)

        assert run.name == "x"
        assert run.path == tmp_path / "x.jsonl"
        assert sorted(p.name for p in tmp_path.glob("*.jsonl")) == ["x.jsonl"]
        assert records(run.path)[0]["run"] == "x"

    def test_the_same_run_by_either_name(self, tmp_path: Path) -> None:
        with Run("x", tmp_path, stdout=False):
            pass

        with Run("x.jsonl", tmp_path, stdout=False, resume="allow") as second:
            pass

        assert second.attempt == 2

    def test_jsonl_alone_is_refused(self, tmp_path: Path) -> None:
        with pytest.raises(ValueError, match="cannot name a log file"):
            Run(".jsonl", tmp_path, stdout=False)


def test_drops_are_counted_per_sink_and_the_warning_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A broken stdout at Ctrl-C: the file holds every record, and run_end says so."""
    broken = io.StringIO()
    broken.close()
    with Run("r", tmp_path, console="json") as run:
        run._stdout.stream = broken  # type: ignore[union-attr]
        run.log("step", step=1)
        run.log("step", step=2)

    end = records(run.path)[-1]
    assert end["dropped_by_sink"] == {"file": 0, "stdout": 2}  # as run_end was made
    assert end["dropped"] == 2
    assert run.dropped_by_sink == {"file": 0, "stdout": 3}  # run_end itself, since
    err = capsys.readouterr().err
    assert "records are dropped from stdout only: the log file still gets them" in err
    assert [r.get("step") for r in records(run.path) if r["event"] == "step"] == [1, 2]


def test_a_log_re_created_late_counts_no_restored_record_as_dropped(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    with Run("r", folder, stdout=False) as run:
        for step in range(5):
            run.log("step", step=step)
        shutil.rmtree(folder)
        folder.write_text("in the way")  # the folder cannot be made again: records are lost
        run._file.check_path()
        assert run._file.dropped == 6
        folder.unlink()  # the way is clear: the next check re-creates the log with them all
        run._file.check_path()
        dropped = run.dropped

    assert dropped == 0
    logged = records(run.path)
    assert [r["step"] for r in logged if r["event"] == "step"] == [0, 1, 2, 3, 4]
    assert logged[-1]["dropped"] == 0


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise AttributeError("no message here")


def test_an_exception_whose_str_raises_reaches_the_job_unchanged(tmp_path: Path) -> None:
    error = _Unprintable("code", 7)

    with pytest.raises(_Unprintable) as caught, Run("r", tmp_path, stdout=False) as run:
        raise error

    assert caught.value is error
    end = records(run.path)[-1]
    assert end["status"] == "failed"
    assert end["exc_type"] == "_Unprintable"
    assert end["exc_message"] == (
        "<str() of the _Unprintable raised AttributeError; args: ('code', 7)>"
    )
    assert "_Unprintable" in end["traceback"]
