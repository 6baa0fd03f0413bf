"""A run's notes file (`<name>.notes.jsonl`) ends in `.jsonl` but no reader of logs reads it:
load(), query() and Spark see the same records with and without one.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import runlines
from _logs import train
from _optional import needs


@pytest.fixture(name="tagged")
def _tagged(run_dir: Path) -> Path:
    for name in ("a", "b"):
        train(run_dir, name, range(1, 6))
        runlines.tag(run_dir / f"{name}.jsonl", "baseline")
        runlines.note(run_dir / f"{name}.jsonl", "a note")
    return run_dir


def test_load_reads_the_logs_only(tagged: Path) -> None:
    frame = runlines.load(tagged)

    assert sorted(frame["run"].unique()) == ["a", "b"]
    assert len(frame) == 2 * (5 + 2)
    assert "op" not in frame.columns


@needs("duckdb")
def test_query_reads_the_logs_only(tagged: Path) -> None:
    rows = runlines.query(
        "SELECT run, count(*) AS n FROM records GROUP BY run ORDER BY run", tagged
    )

    assert rows.to_dict("records") == [{"run": "a", "n": 7}, {"run": "b", "n": 7}]


@pytest.fixture(name="spark")
def _spark() -> Iterator[Any]:
    if shutil.which("java") is None and "JAVA_HOME" not in os.environ:
        pytest.skip("PySpark needs a Java runtime (java on PATH or JAVA_HOME); none is installed")
    pyspark_sql = pytest.importorskip("pyspark.sql", reason="pip install 'runlines[spark]'")
    session = (
        pyspark_sql.SparkSession.builder.master("local[1]")
        .appName("runlines-notes-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning")
def test_spark_reads_the_logs_only(spark: Any, tagged: Path) -> None:
    from runlines.spark import read

    frame = read(spark, tagged)

    counts = {row["run"]: row["count"] for row in frame.groupBy("run").count().collect()}
    assert counts == {"a": 7, "b": 7}
    assert "op" not in frame.columns
