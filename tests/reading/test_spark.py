"""runlines.spark.read: a real PySpark session in local mode over runs written by runlines."""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from test_duckdb import MEAN_LOSS, write_runs

from _optional import skip_without
from runlines.sql import query

pytestmark = [
    # PySpark 4 warns once that it does not fully support pandas 3; these tests use no pandas
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),
    pytest.mark.skipif(
        shutil.which("java") is None and "JAVA_HOME" not in os.environ,
        reason="PySpark needs a Java runtime (java on PATH or JAVA_HOME); none is installed",
    ),
]


@pytest.fixture(name="spark", scope="module")
def _spark() -> Iterator[Any]:
    skip_without("pyspark")
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[1]")
        .appName("runlines-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.default.parallelism", "1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        # a JVM that starts fast matters more here than peak speed
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(name="runs", scope="module")
def _runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with pytest.MonkeyPatch.context() as monkeypatch:
        yield write_runs(tmp_path_factory.mktemp("runs"), monkeypatch)


@pytest.fixture(name="records", scope="module")
def _records(spark: Any, runs: Path) -> Any:
    from runlines.spark import read

    frame = read(spark, runs)
    frame.createOrReplaceTempView("records")
    return frame


def _rows(spark: Any, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in spark.sql(sql).collect()]


def _same(left: list[tuple[Any, ...]], right: list[tuple[Any, ...]]) -> bool:
    def equal(a: Any, b: Any) -> bool:
        if isinstance(a, float) and isinstance(b, float):
            return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b)
        return bool(a == b)

    return len(left) == len(right) and all(
        len(x) == len(y) and all(equal(a, b) for a, b in zip(x, y, strict=True))
        for x, y in zip(left, right, strict=True)
    )


def test_mean_loss_per_run_and_epoch_equals_runlines_query(
    spark: Any, records: Any, runs: Path
) -> None:
    expected = [tuple(row) for row in query(MEAN_LOSS, runs).itertuples(index=False)]

    result = _rows(spark, MEAN_LOSS)

    assert _same(result, expected)


def test_counts_per_run_rank_and_attempt_equal_runlines_query(
    spark: Any, records: Any, runs: Path
) -> None:
    sql = "SELECT run, rank, attempt, count(*) AS n FROM records GROUP BY ALL ORDER BY ALL"
    expected = [
        tuple(None if pd.isna(v) else v for v in row)
        for row in query(sql, runs).itertuples(index=False)
    ]

    result = _rows(spark, sql)

    assert result == expected
    assert ("ddp", 1, 1, 5) in result


def test_columns_are_load_columns(records: Any, runs: Path) -> None:
    expected = query("SELECT * FROM records LIMIT 0", runs)

    assert records.columns[:5] == ["ts", "event", "run", "rank", "attempt"]
    assert set(records.columns) == set(expected.columns)


def test_nonfinite_floats_are_restored(spark: Any, runs: Path) -> None:
    from runlines.spark import read

    read(spark, runs, superseded=True).createOrReplaceTempView("every")

    rows = _rows(
        spark,
        "SELECT attempt, step, loss FROM every WHERE run = 'baseline' AND step >= 7 "
        "AND event = 'train_step' ORDER BY attempt, step",
    )

    assert rows[0] == (1, 7, math.inf)
    assert math.isnan(rows[-1][2])


def test_superseded_records_are_dropped_unless_asked(spark: Any, records: Any, runs: Path) -> None:
    from runlines.spark import read

    every = read(spark, runs, superseded=True)

    assert records.where("run = 'baseline'").count() == 13
    assert every.where("run = 'baseline'").count() == 16


def test_torn_line_is_dropped_and_fields_of_every_run_are_merged(spark: Any, records: Any) -> None:
    rows = _rows(
        spark,
        "SELECT run, count(*), count(grad_norm), max(config.note) FROM records "
        "GROUP BY run ORDER BY run",
    )

    assert rows == [("baseline", 13, 0, None), ("ddp", 10, 0, None), ("sweep", 7, 4, "wide")]


def test_a_glob_reads_the_matching_logs(spark: Any, runs: Path) -> None:
    from runlines.spark import read

    frame = read(spark, f"{runs}/ddp*.jsonl")

    assert sorted({(r.run, r.rank) for r in frame.select("run", "rank").collect()}) == [
        ("ddp", 0),
        ("ddp", 1),
    ]
