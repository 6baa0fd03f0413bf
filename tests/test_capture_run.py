"""Run(..., capture=...): warnings and logging records in the run's log, restored at close."""

from __future__ import annotations

import json
import logging
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import pytest

from runlines import FieldDriftWarning, Run
from runlines._capture import CaptureSettings

# Every test runs on log()'s C fast path and on its pure-Python path (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("fast_path")


def _records(path: Path, event: str | None = None) -> list[dict[str, Any]]:
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return [r for r in records if event is None or r["event"] == event]


@pytest.fixture(name="shown")
def _shown() -> Iterator[list[str]]:
    """Warnings under the "default" filter, shown by a recording showwarning."""
    shown: list[str] = []

    def showwarning(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        shown.append(str(message))

    with warnings.catch_warnings():
        warnings.simplefilter("default")
        warnings.showwarning = showwarning
        yield shown


def test_warnings_are_captured_by_default(run_dir: Path, shown: list[str]) -> None:
    with Run("w", run_dir, stdout=False) as run:
        warnings.warn("old api", DeprecationWarning, stacklevel=1)

    (record,) = _records(run.path, "warning")
    assert record["category"] == "DeprecationWarning"
    assert record["message"] == "old api"
    assert record["filename"] == __file__
    assert isinstance(record["lineno"], int)
    assert shown == ["old api"]


def test_same_location_is_recorded_once(run_dir: Path, shown: list[str]) -> None:
    with Run("w", run_dir, stdout=False) as run:
        for _ in range(3):
            warnings.warn("again", UserWarning, stacklevel=1)

    assert len(_records(run.path, "warning")) == 1


def test_capture_false_records_no_warning(run_dir: Path, shown: list[str]) -> None:
    with Run("w", run_dir, stdout=False, capture=False) as run:
        warnings.warn("not recorded", UserWarning, stacklevel=1)

    assert _records(run.path, "warning") == []
    assert shown == ["not recorded"]


def test_logging_is_captured_with_capture_all(run_dir: Path) -> None:
    logger = logging.getLogger("tests.capture_run")

    with Run("l", run_dir, stdout=False, capture="all") as run:
        logger.warning("disk %s", "low")
        logger.info("below the level")

    assert [(r["logger"], r["level"], r["message"]) for r in _records(run.path, "log")] == [
        ("tests.capture_run", "WARNING", "disk low")
    ]


def test_logging_level_can_be_lowered(run_dir: Path) -> None:
    logger = logging.getLogger("tests.capture_run")
    logger.setLevel(logging.INFO)
    settings = CaptureSettings(warnings=False, logging_level=logging.INFO)

    try:
        with Run("l", run_dir, stdout=False, capture=settings) as run:
            logger.info("epoch done")
    finally:
        logger.setLevel(logging.NOTSET)

    assert [r["message"] for r in _records(run.path, "log")] == ["epoch done"]


def test_log_record_carries_the_exception_text(run_dir: Path) -> None:
    with Run("l", run_dir, stdout=False, capture="logging") as run:
        try:
            raise KeyError("missing")
        except KeyError:
            logging.getLogger("tests.capture_run").exception("lookup failed")

    (record,) = _records(run.path, "log")
    assert "KeyError: 'missing'" in record["exc_text"]


def test_everything_is_restored_exactly_at_close(run_dir: Path, shown: list[str]) -> None:
    root = logging.getLogger()
    before = (warnings.showwarning, root.level, list(root.handlers))

    with Run("r", run_dir, stdout=False, capture="all"):
        assert warnings.showwarning is not before[0]

    assert (warnings.showwarning, root.level, list(root.handlers)) == before


def test_runs_closed_out_of_order_restore_the_original(run_dir: Path, shown: list[str]) -> None:
    before = warnings.showwarning
    first = Run("first", run_dir, stdout=False)
    second = Run("second", run_dir, stdout=False)

    first.close()
    warnings.warn("only the second", UserWarning, stacklevel=1)
    second.close()

    assert warnings.showwarning is before
    assert _records(first.path, "warning") == []
    assert len(_records(second.path, "warning")) == 1


def test_nothing_is_recorded_after_run_end(run_dir: Path, shown: list[str]) -> None:
    with Run("late", run_dir, stdout=False) as run:
        pass

    warnings.warn("after close", UserWarning, stacklevel=1)

    assert _records(run.path)[-1]["event"] == "run_end"
    assert shown == ["after close"]


def test_runlines_own_warning_is_recorded_once(run_dir: Path, shown: list[str]) -> None:
    with Run("drift", run_dir, stdout=False) as run:
        run.log("train_step", iteration=1)
        run.log("train_step", iteration=2)

    (record,) = _records(run.path, "warning")
    assert record["category"] == FieldDriftWarning.__name__
    assert "'iteration'" in record["message"]


def test_captured_messages_are_redacted(run_dir: Path, shown: list[str]) -> None:
    secret = "hunter2-correct-horse"

    with Run("secret", run_dir, stdout=False, capture="all") as run:
        warnings.warn(f"login with password={secret}", UserWarning, stacklevel=1)
        logging.getLogger("tests.capture_run").warning("password=%s", secret)

    assert len(_records(run.path, "warning")) == len(_records(run.path, "log")) == 1
    assert secret not in run.path.read_text()


def test_warnings_from_other_threads_are_recorded(run_dir: Path, shown: list[str]) -> None:
    with Run("threads", run_dir, stdout=False) as run:
        thread = threading.Thread(target=warnings.warn, args=("from a thread", UserWarning))
        thread.start()
        thread.join()

    assert [r["message"] for r in _records(run.path, "warning")] == ["from a thread"]


def test_unknown_capture_value_is_refused_before_any_file(run_dir: Path) -> None:
    with pytest.raises(ValueError, match="'warnings', 'logging', 'all'"):
        Run("bad", run_dir, stdout=False, capture="everything")

    assert not (run_dir / "bad.jsonl").exists()


def test_logging_is_captured_by_default_at_warning_and_above(run_dir: Path) -> None:
    logger = logging.getLogger("tests.capture_run.default")

    with Run("d", run_dir, stdout=False) as run:
        logger.warning("loader worker %d restarted", 3)
        logger.info("below the level")

    assert [(r["level"], r["message"]) for r in _records(run.path, "log")] == [
        ("WARNING", "loader worker 3 restarted")
    ]


def test_capture_adds_no_handler_so_basic_config_and_stderr_work_as_without_runlines(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    logger = logging.getLogger("tests.capture_run.once")

    with Run("b", run_dir, stdout=False) as run:
        assert root.handlers == []
        assert not logger.hasHandlers()
        logging.basicConfig(format="basic: %(message)s")  # configures: root has no handler
        logger.warning("printed once")
        root.handlers.clear()

    assert capsys.readouterr().err.splitlines() == ["basic: printed once"]
    assert [r["message"] for r in _records(run.path, "log")] == ["printed once"]
    assert logging.Logger.callHandlers.__module__ == "logging"


def test_a_logger_that_does_not_propagate_is_captured_too(run_dir: Path) -> None:
    library = logging.getLogger("tests.capture_run.library")  # as transformers sets its own
    library.propagate = False
    library.addHandler(logging.NullHandler())

    try:
        with Run("p", run_dir, stdout=False) as run:
            logging.getLogger("tests.capture_run.library.trainer").warning("lr is 0")
    finally:
        library.propagate = True
        library.handlers.clear()

    assert [r["message"] for r in _records(run.path, "log")] == ["lr is 0"]
