"""Refused media input: raised with strict_fields, else warned once per name and counted."""

from __future__ import annotations

import json
import threading
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from runlines import Run
from runlines.errors import FieldError, RunlinesWarning

QUIET: dict[str, Any] = {"stdout": False, "system": False, "capture": False}
GOOD = np.zeros((4, 5, 3), dtype=np.uint8)


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def media_files(run: Run) -> list[Path]:
    folder = run.artifacts_dir / "media"
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


# each refused call: (what it logs, the error strict_fields raises, its text)
REFUSED = [
    (lambda run: run.image("i", np.zeros((2, 3), np.int32), step=1), ValueError, r"dtype int32"),
    (lambda run: run.image("i", [[0, 1]], step=1), TypeError, r"cannot take a list"),
    (lambda run: run.image("i", np.zeros((2, 3, 5)), step=1), ValueError, r"shape \[2, 3, 5\]"),
    (lambda run: run.image("i", "missing.png", step=1), FileNotFoundError, r"missing.png"),
    (lambda run: run.images("i", [GOOD, np.ones((2, 2)) * 3], step=1), ValueError, r"image 1"),
    (lambda run: run.histogram("h", ["a"], step=1), TypeError, r"takes numbers"),
    (lambda run: run.histogram("h", [1.0], step=1, bins=0), FieldError, r"bins must be"),
    (lambda run: run.audio("a", np.array([np.nan]), 8000, step=1), ValueError, r"NaN"),
    (lambda run: run.text("t", b"bytes", step=1), TypeError, r"takes a str, got a bytes"),
    (lambda run: run.table("t", 3, step=1), TypeError, r"takes a pandas DataFrame"),
    (lambda run: run.image("i", GOOD, step=-1), FieldError, r"step"),
]
IDS = [
    "dtype", "type", "shape", "missing-path", "one-of-images", "histogram-type", "bins",
    "audio-nan", "text", "table", "step",
]  # fmt: skip


@pytest.mark.parametrize(("call", "error", "match"), REFUSED, ids=IDS)
def test_a_strict_run_raises_the_error_naming_what_came(
    run_dir: Path, call: Any, error: type[Exception], match: str
) -> None:
    with Run("strict", run_dir, strict_fields=True, **QUIET) as run:
        with pytest.raises(error, match=match):
            call(run)

        assert media_files(run) == []
    assert "media_refused" not in records(run.path)[-1]


@pytest.mark.parametrize(("call", "error", "match"), REFUSED, ids=IDS)
def test_otherwise_it_warns_with_that_error_writes_nothing_and_counts_it(
    run_dir: Path, call: Any, error: type[Exception], match: str
) -> None:
    with Run("lenient", run_dir, **QUIET) as run:
        with pytest.warns(RunlinesWarning, match=match) as caught:
            returned = call(run)

        assert returned in (None, [])
        assert media_files(run) == []
        assert "strict_fields=True) raises instead" in str(caught[0].message)
    lines = records(run.path)
    assert [r["event"] for r in lines] == ["run_start", "run_end"]
    assert sum(lines[-1]["media_refused"].values()) == 1


def test_it_warns_once_per_name_and_counts_every_call(run_dir: Path) -> None:
    bad = np.zeros((2, 3), np.int32)

    with Run("lenient", run_dir, **QUIET) as run, pytest.warns(RunlinesWarning) as caught:
        for step in range(3):
            run.image("a", bad, step=step)
            run.image("b", bad, step=step)
        run.image("a", GOOD, step=9)

    assert len(caught) == 2
    lines = records(run.path)
    assert [r["event"] for r in lines] == ["run_start", "image", "run_end"]
    assert lines[-1]["media_refused"] == {"a": 3, "b": 3}


def test_refusals_from_many_threads_are_all_counted_and_warned_once(run_dir: Path) -> None:
    bad = np.zeros((2, 3), np.int32)
    start = threading.Barrier(8)

    def refuse() -> None:
        start.wait()
        for step in range(50):
            run.image("a", bad, step=step)

    with Run("threads", run_dir, **QUIET) as run, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        threads = [threading.Thread(target=refuse) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    assert len([w for w in caught if issubclass(w.category, RunlinesWarning)]) == 1
    assert records(run.path)[-1]["media_refused"] == {"a": 400}


def test_an_import_error_is_not_refused_input(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A missing extra is the setup's problem: it raises, strict or not."""
    import builtins

    real_import = builtins.__import__

    def no_pyarrow(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("pyarrow"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    with Run("lenient", run_dir, **QUIET) as run:
        monkeypatch.setattr(builtins, "__import__", no_pyarrow)

        with pytest.raises(ImportError, match=r"needs pyarrow"):
            run.table("t", {"a": [1]}, step=1)
