"""`import runlines` stays light: what a run needs is imported when the first Run opens.

Each test starts a fresh interpreter, since this one has imported everything already. The
budget (at most 30 ms over `python -c pass`) is timed by tests/benchmarks/bench_import.py;
these tests catch the usual way it is lost: one eager import of a heavy module.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# Each costs milliseconds to import, directly or through what it imports (orjson loads
# dataclasses, inspect, uuid and json), and none is needed before a Run opens.
DEFERRED = (
    *("orjson", "filelock", "numpy", "pandas", "pyarrow", "torch", "matplotlib"),
    *("dataclasses", "inspect", "pathlib", "traceback", "uuid", "json", "datetime", "signal"),
    *("mmap", "subprocess", "platform", "socket", "secrets", "logging", "hashlib", "base64"),
    *("runlines._encoding", "runlines.fields", "runlines._capture", "runlines.artifacts"),
    *("runlines._logfile", "runlines._watching"),
    *("runlines.reading", "runlines.sql"),
)


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_import_runlines_defers_heavy_modules() -> None:
    code = (
        "import sys; before = set(sys.modules); from runlines import Run; "
        "print(' '.join(sorted(set(sys.modules) - before)))"
    )

    loaded = set(_run(code).split())

    assert "runlines.run" in loaded  # the check sees what runlines imports
    assert sorted(loaded.intersection(DEFERRED)) == []


def test_import_runlines_compiles_no_secret_shapes() -> None:
    code = "import runlines.redaction as r; print(r._secret_shapes.cache_info().currsize)"

    assert _run(code) == "0"


def test_a_run_opened_in_a_fresh_process_writes_its_records(tmp_path: Path) -> None:
    """The names bound when the first Run opens are there for its first records."""
    code = (
        "import runlines\n"
        f"with runlines.Run('a', {str(tmp_path)!r}, stdout=False) as run:\n"
        "    run.log('step', loss=0.5, note=None)\n"
        "    with run.span('eval'):\n"
        "        pass\n"
    )

    _run(code)

    lines = (tmp_path / "a.jsonl").read_text().splitlines()
    assert [json.loads(line)["event"] for line in lines] == ["run_start", "step", "span", "run_end"]


# `load` is often a fresh process's one call (a script, a notebook's first cell), and what it
# imports is part of the read: reading a finished run needs neither the writer nor the
# summaries, diffs and error hints of the other readers.
NOT_FOR_LOAD = (
    *("runlines.run", "runlines._writer", "runlines.redaction", "runlines.sampling"),
    *("runlines.reading._diff", "runlines.reading._summary", "runlines.reading._table"),
    *("runlines.reading._copies.summary", "runlines.reading._copies.write", "difflib"),
    "statistics",
)


def test_load_of_a_finished_run_imports_neither_the_writer_nor_other_readers(
    tmp_path: Path,
) -> None:
    from runlines import Run

    with Run("a", tmp_path, stdout=False, compact=True) as run:
        run.log("step", step=1, loss=0.5)
    code = (
        "import sys, runlines\n"
        f"frame = runlines.load({str(tmp_path / 'a.jsonl')!r})\n"
        "print(len(frame), ' '.join(sorted(sys.modules)))\n"
    )

    rows, *loaded = _run(code).split()

    assert (tmp_path / "a.parquet").exists()
    assert rows == "3"
    assert "runlines.reading._frames" in loaded  # the check sees what load imports
    assert sorted(set(loaded).intersection(NOT_FOR_LOAD)) == []


def test_the_copy_written_at_close_imports_neither_pandas_nor_pyarrow_compute(
    tmp_path: Path,
) -> None:
    from runlines import Run

    with Run("a", tmp_path, stdout=False, compact=False) as run:
        for step in range(3_000):  # more than a bucket: the events are read apart
            run.log("step", step=step, loss=0.5, phase=("warmup", "train")[step % 2])
    code = (
        "import sys, runlines\n"
        "from runlines.reading._copies import write_copy\n"
        f"copy = write_copy({str(tmp_path / 'a.jsonl')!r})\n"
        "print(copy.name, ' '.join(sorted(sys.modules)))\n"
    )

    name, *loaded = _run(code).split()

    assert name == "a.parquet"
    assert "pyarrow.parquet" in loaded  # the check sees what writing the copy imports
    assert sorted(set(loaded).intersection({"pandas", "pyarrow.compute", "numpy.ma"})) == []
