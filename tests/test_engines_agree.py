"""Every engine (load, iter_events, query, Spark) reads the same records from awkward logs.

The logs: attempts that rewind (resume_step) and a rerun without one, ranks, torn lines, NaN,
an int beyond int64, nested values, lines nested 50,000 deep, and the same run name in two
folders. iter_events yields raw records: the rules of `runlines.reading._rules` are applied to
them here, in plain Python, as the reference the engines must match.
"""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import runlines
from _logs import T0, line, write

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*skipped .* not a complete JSON object:runlines.RunlinesWarning",
    "ignore:.*skipped .* nested deeper than:runlines.RunlinesWarning",
    "ignore:PySpark does not yet fully support pandas:FutureWarning",
)
FIELDS = ("run", "rank", "attempt", "event", "step", "loss", "big", "cfg")
# every reader skips a line nested deeper than 1,024 levels; here in a mixed array, which
# DuckDB's json_structure folds into a shallow "JSON" shape
DEEP = (
    b'{"ts": 1767225604.5, "event": "train", "run": "baseline", "step": 9, "loss": 9.0, '
    b'"cfg": [0, ' + b"[" * 50_000 + b"]" * 50_000 + b"]}\n"
)


def _awkward(root: Path) -> Path:
    write(
        root / "exp1" / "baseline.jsonl",
        line("run_start", run="baseline", ts=T0, attempt=1),
        line("train", run="baseline", ts=T0 + 1, step=1, loss=1.0, big=2**70),
        line("train", run="baseline", ts=T0 + 2, step=2, loss=float("nan"), cfg={"a": [1, 2]}),
        b'{"ts": 1767225603, "event": "train", "run": "base\n',  # torn
        line("train", run="baseline", ts=T0 + 4, step=3, loss=0.5),
        line("run_start", run="baseline", ts=T0 + 5, attempt=2, resume_step=2),
        line("train", run="baseline", ts=T0 + 6, step=3, loss=0.4),
        line("run_start", run="baseline", ts=T0 + 7, attempt=3),  # a rerun, no resume_step
        line("train", run="baseline", ts=T0 + 8, step=1, loss=0.9),
        DEEP,  # in a file whose attempts are counted
    )
    write(
        root / "exp2" / "baseline.jsonl",
        line("run_start", run="baseline", ts=T0, attempt=1),
        DEEP,  # in a file of one attempt
        line("train", run="baseline", ts=T0 + 1, step=1, loss=2.0),
    )
    write(
        root / "exp2" / "dist.jsonl",
        line("run_start", run="dist", ts=T0, rank=0, attempt=1),
        line("train", run="dist", ts=T0 + 1, rank=0, step=1, loss=3.0),
    )
    write(
        root / "exp2" / "dist.rank1.jsonl", line("train", run="dist", ts=T0 + 1, step=1, loss=3.1)
    )
    return root


def _plain(value: Any) -> Any:
    if hasattr(value, "asDict"):
        return {k: _plain(v) for k, v in value.asDict(recursive=True).items()}
    if isinstance(value, str) and value[:1] in "{[":
        import json

        return json.loads(value)
    if isinstance(value, float) and math.isnan(value):
        return None  # a float column cannot tell NaN from missing: both read as NaN
    if hasattr(value, "item"):
        return _plain(value.item())
    try:
        import pandas as pd

        if value is pd.NA or value is pd.NaT:
            return None
    except ImportError:
        pass
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def _key(record: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(_plain(record.get(name)) for name in FIELDS)


def _reference(root: Path) -> list[tuple[Any, ...]]:
    """Apply the shared rules to iter_events' raw records: attempts, superseded, labels."""
    rows: list[tuple[Any, ...]] = []
    for folder, name in (("exp1", "baseline"), ("exp2", "baseline"), ("exp2", "dist"),
                         ("exp2", "dist.rank1")):  # fmt: skip
        path = root / folder / f"{name}.jsonl"
        records = list(runlines.iter_events(path))
        attempt, numbered = 1, []
        for record in records:
            attempt = record["attempt"] if record["event"] == "run_start" else attempt
            numbered.append({**record, "attempt": attempt})
        kept = []
        for i, record in enumerate(numbered):
            later = numbered[i + 1 :]
            step = record.get("step")
            resumed = [r.get("resume_step") for r in later if r["event"] == "run_start"]
            rewound = any(s is not None and step is not None and step > s for s in resumed)
            rewritten = step is not None and any(
                r["attempt"] > record["attempt"]
                and (r["event"], r.get("step")) == (record["event"], step)
                for r in later
            )
            if not rewound and not rewritten:
                kept.append(record)
        for record in kept:
            if name == "baseline":
                record["run"] = f"{folder}/baseline"
            if name.startswith("dist"):
                record["rank"] = record.get("rank", 1 if "rank1" in name else 0)
            rows.append(_key(record))
    return sorted(rows, key=repr)


@pytest.fixture(name="logs", scope="module")
def _logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _awkward(tmp_path_factory.mktemp("awkward"))


def _sources(root: Path) -> list[Path]:
    return [root / "exp1", root / "exp2"]


def test_load_reads_the_reference_records(logs: Path) -> None:
    frame = runlines.load(*_sources(logs))

    got = sorted((_key(r) for r in frame.to_dict("records")), key=repr)

    assert got == _reference(logs)
    assert {"exp1/baseline", "exp2/baseline", "dist"} == set(frame["run"])


def test_load_through_duckdb_reads_the_reference_records(logs: Path) -> None:
    frame = runlines.load(*_sources(logs), engine="duckdb")

    assert sorted((_key(r) for r in frame.to_dict("records")), key=repr) == _reference(logs)


def test_query_reads_the_reference_records(logs: Path) -> None:
    frame = runlines.query("SELECT * FROM records", *_sources(logs))

    assert sorted((_key(r) for r in frame.to_dict("records")), key=repr) == _reference(logs)


@pytest.fixture(name="spark", scope="module")
def _spark() -> Iterator[Any]:
    if shutil.which("java") is None and "JAVA_HOME" not in os.environ:
        pytest.skip("PySpark needs a Java runtime (java on PATH or JAVA_HOME); none is installed")
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def test_spark_reads_the_reference_records(spark: Any, logs: Path) -> None:
    from runlines.spark import read

    rows = read(spark, str(logs / "exp*" / "*.jsonl")).collect()

    assert sorted((_key(r.asDict()) for r in rows), key=repr) == _reference(logs)
