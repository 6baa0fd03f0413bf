"""Read runlines logs with Apache Spark: `read` gives a Spark DataFrame of every record.

The decoding is `runlines.load`'s: non-finite floats restored (top-level fields), torn lines
dropped, rank files merged into their run (``run`` and ``rank`` from the record, else the file
name), each record's ``attempt``, and records superseded by a resumed attempt dropped. Spark
infers one schema over every file, so runs whose fields differ merge into one frame.

Attempts depend on where ``run_start`` records sit in a file. `read` runs one small job that
collects the ``run_start`` records and each file's first record, ordered by
(``_metadata.file_block_start``, ``monotonically_increasing_id()``): line order within a file
split. Files whose only ``run_start`` is their first record (the common case) get a constant
attempt through a broadcast join; the others count ``run_start`` records with a window over
their file, which shuffles those files' records only.

A local log with a Parquet copy that matches it is read from the copy (``spark.read.parquet``,
each field mapped from the copy's storage columns and ``__patch``, see reading/_copies/) and
from its tail, the bytes after the copy, written to a file of its own. Spark infers the schema
from the other logs, the tails, and one line per field and value type the copies hold (their
patched records re-encoded as Run writes them), so the frame is the one the JSONL gives.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import unquote, urlparse

from pyspark.sql import Window
from pyspark.sql import functions as F
from pyspark.sql.types import NumericType

from runlines._encoding import NONFINITE_KEY
from runlines._layout import LOG_SUFFIX, is_log_name
from runlines.reading._copies import (
    LINE,
    NULLS,
    PATCH,
    Copy,
    sample_lines,
    usable_copy,
    write_tail,
)
from runlines.reading._files import log_file, run_labels
from runlines.reading._rules import attempt_numbers, step_cutoffs

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, DataFrameReader, SparkSession
    from pyspark.sql.types import StructType

__all__ = ["read"]

_FILE: Final = "__runlines_file"
_POS: Final = "__runlines_pos"
_K: Final = "__runlines_k"
_FIRST: Final = ("ts", "event", "run")
_NONFINITE: Final = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}
_NUMERIC: Final = ("LongType", "IntegerType", "DoubleType", "FloatType")


def read(
    spark: SparkSession, path_or_glob: str | os.PathLike[str], *, superseded: bool = False
) -> DataFrame:
    """Return every record of the logs at *path_or_glob* as a Spark DataFrame: the door's
    `read` (reading/_spark/__init__), once PySpark is there.
    """
    path = os.fspath(path_or_glob)
    listed = _reader(spark, None).text(path).inputFiles()  # listed, not read
    files = [uri for uri in listed if is_log_name(uri)]  # no `runlines tag` notes file
    copies = _usable_copies(files)
    scratch = _scratch(spark) if copies else None
    tails = {}
    for uri, copy in copies.items():
        if copy.has_tail and scratch is not None:
            tails[write_tail(copy, scratch).as_uri()] = uri
    jsonl = [uri for uri in files if uri not in copies] + list(tails)
    samples = _write_samples(copies, scratch) if scratch is not None else None
    inferred = [*jsonl, *([samples] if samples else [])]
    raw = _reader(spark, None).json(inferred) if inferred else None
    if raw is None or "event" not in raw.columns:
        return _empty(spark)
    every = _records(spark, raw, jsonl, tails, copies)
    simple, counted = _classify(every)
    tables = _Tables(spark, files, simple, counted)
    parts = []
    if simple:
        part = every.where(F.col(_FILE).isin(list(simple))).drop(_POS, "attempt")
        parts.append(part.join(F.broadcast(tables.files), _FILE))
    if counted:
        parts.append(_counted_part(every, counted, tables, superseded=superseded))
    if not parts:  # files without one complete record
        return _empty(spark)
    frame = parts[0]
    for part in parts[1:]:
        frame = frame.unionByName(part, allowMissingColumns=True)
    return _output(frame, raw, tables.has_rank)


def _usable_copies(files: list[str]) -> dict[str, Copy]:
    """Return the local logs of *files* whose copies match them (warning about the others)."""
    level = 3
    frame = sys._getframe(1)
    package = str(Path(__file__).resolve().parents[2])  # runlines
    while frame.f_back is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    found = {}
    for uri in files:
        parts = urlparse(uri)
        if parts.scheme not in ("", "file"):
            continue  # on another filesystem: the JSONL
        copy = usable_copy(log_file(unquote(parts.path)), stacklevel=level)
        if copy is not None:
            found[uri] = copy
    return found


def _scratch(spark: SparkSession) -> Path:
    """Return a new folder for the tails and samples, removed with the session."""
    folder = Path(tempfile.mkdtemp(prefix="runlines-spark-"))
    weakref.finalize(spark, shutil.rmtree, folder, True)
    return folder


def _write_samples(copies: dict[str, Copy], folder: Path) -> str | None:
    """Write lines holding the copies' values to a log of *folder*, for Spark to infer from
    (`sample_lines`: one per field and storage type, and each distinct patched record).
    """
    lines = set().union(*(sample_lines(copy) for copy in copies.values()))
    if not lines:
        return None
    path = folder / f"samples{LOG_SUFFIX}"
    path.write_bytes(b"".join(sorted(lines)))
    return path.as_uri()


def _records(
    spark: SparkSession,
    raw: DataFrame,
    jsonl: list[str],
    tails: dict[str, str],
    copies: dict[str, Copy],
) -> DataFrame:
    """Return every record with its log (`_FILE`) and its place in the log (`_POS`)."""
    parts = []
    if jsonl:
        part = _with_file(_reader(spark, raw.schema).json(jsonl))
        tail = F.col(_FILE).isin(list(tails))
        log = F.col(_FILE)
        for uri, of in tails.items():
            log = F.when(F.col(_FILE) == uri, F.lit(of)).otherwise(log)
        block = F.col("_metadata.file_block_start")
        place = _place(tail.cast("int"), block, F.monotonically_increasing_id())
        parts.append(part.withColumn(_POS, place).withColumn(_FILE, log))
    parts += [_copy_frame(spark, raw, uri, copy) for uri, copy in copies.items()]
    frame = parts[0]
    for part in parts[1:]:
        frame = frame.unionByName(part)
    return frame


def _place(part: Column, offset: Column, order: Column) -> Column:
    """Return a record's place in its log: (0, then 1 for the tail after a copy), split offset
    (or line, in a copy), order within the split.
    """
    return F.struct(part.alias("part"), offset.alias("offset"), order.alias("order"))


def _copy_frame(spark: SparkSession, raw: DataFrame, uri: str, copy: Copy) -> DataFrame:
    """Return the records of *copy* in the columns and types of *raw*."""
    stored = spark.read.parquet(copy.path.as_uri())
    patch = F.from_json(F.col(PATCH), raw.schema, {"allowNonNumericNumbers": "true"})
    columns = []
    for field in raw.schema.fields:
        name, kind = field.name, field.dataType
        value = patch.getField(name)
        if not isinstance(kind, NumericType):  # a line's null stands, as in the JSONL
            value = F.when(~F.coalesce(F.array_contains(NULLS, name), F.lit(False)), value)
        parts = [value, *(F.col(column).cast(kind) for column in copy.storage.get(name, ()))]
        columns.append(F.coalesce(*parts).alias(name))
    columns.append(F.lit(uri).alias(_FILE))
    columns.append(_place(F.lit(0), F.col(LINE), F.lit(0).cast("long")).alias(_POS))
    return stored.select(*columns)


def _reader(spark: SparkSession, schema: StructType | None) -> DataFrameReader:
    # DROPMALFORMED skips torn lines; the schema the first read inferred fits every record
    reader = spark.read.options(mode="DROPMALFORMED", pathGlobFilter=f"*{LOG_SUFFIX}")
    return reader if schema is None else reader.schema(schema)


def _with_file(frame: DataFrame) -> DataFrame:
    return frame.withColumn(_FILE, F.input_file_name())


def _field(frame: DataFrame, name: str) -> Column:
    return F.col(name) if name in frame.columns else F.lit(None)


def _classify(raw: DataFrame) -> tuple[dict[str, int | None], dict[str, list[tuple[Any, Any]]]]:
    """Return the files with one attempt (file: its attempt number, or None) and the others.

    The others map to their run_start records in file order: (attempt, resume_step).
    """
    start = F.struct(
        F.col(_POS), _field(raw, "attempt").alias("attempt"), _field(raw, "resume_step").alias("r")
    )
    rows = (
        raw.groupBy(_FILE)
        .agg(
            F.min(_POS).alias("first"),
            F.sort_array(F.collect_list(F.when(F.col("event") == "run_start", start))).alias(
                "starts"
            ),
        )
        .collect()
    )
    simple: dict[str, int | None] = {}
    counted: dict[str, list[tuple[Any, Any]]] = {}
    for row in rows:
        starts = row["starts"]
        if not starts or (len(starts) == 1 and starts[0][_POS] == row["first"]):
            simple[row[_FILE]] = attempt_numbers([s["attempt"] for s in starts])[0] if starts else 1
        else:
            counted[row[_FILE]] = [(s["attempt"], s["r"]) for s in starts]
    return simple, counted


class _Tables:
    """The small tables joined to the records: per file (run, rank, attempt), per attempt."""

    def __init__(
        self,
        spark: SparkSession,
        files: list[str],
        simple: dict[str, int | None],
        counted: dict[str, list[tuple[Any, Any]]],
    ) -> None:
        logs = {uri: log_file(unquote(urlparse(uri).path)) for uri in files}
        ranked = {log.run for log in logs.values() if log.rank is not None}
        labels = run_labels(list(logs.values()))
        self.has_rank = bool(ranked)
        rows = []
        for uri, log in logs.items():
            rank = log.rank if log.rank is not None else (0 if log.run in ranked else None)
            rows.append((uri, log.run, rank, simple.get(uri), labels.get(log.path)))
        schema = (
            f"{_FILE} string, __runlines_run string, __runlines_rank long, attempt long, "
            "__runlines_label string"
        )
        self.files = spark.createDataFrame(rows, schema)
        starts = []
        for uri, found in counted.items():
            numbers = [1, *attempt_numbers([attempt for attempt, _ in found])]
            cutoffs = step_cutoffs([resume for _, resume in found])
            starts += [(uri, k, numbers[k], cutoffs[k]) for k in range(len(numbers))]
        schema = f"{_FILE} string, {_K} long, attempt long, __runlines_cutoff double"
        self.starts = spark.createDataFrame(starts, schema)


def _counted_part(
    every: DataFrame,
    counted: dict[str, list[tuple[Any, Any]]],
    tables: _Tables,
    *,
    superseded: bool,
) -> DataFrame:
    """Return the records of files with several attempts, each with its attempt."""
    frame = every.where(F.col(_FILE).isin(list(counted))).drop("attempt")
    before = Window.partitionBy(_FILE).orderBy(_POS).rowsBetween(Window.unboundedPreceding, 0)
    is_start = F.coalesce(F.col("event") == "run_start", F.lit(False)).cast("long")
    frame = frame.withColumn(_K, F.sum(is_start).over(before)).drop(_POS)
    frame = frame.join(F.broadcast(tables.starts), [_FILE, _K])
    if not superseded and "step" in frame.columns:
        step = F.col("step").cast("double")
        rewound = step > F.col("__runlines_cutoff")
        # a later attempt's record wins over an earlier one's at the same (event, step)
        latest = F.max(_K).over(Window.partitionBy(_FILE, "event", step))
        frame = frame.withColumn("__runlines_latest", latest)
        later = (
            step.isNotNull() & F.col("event").isNotNull() & (F.col(_K) < F.col("__runlines_latest"))
        )
        frame = frame.where(~F.coalesce(rewound, F.lit(False)) & ~F.coalesce(later, F.lit(False)))
        frame = frame.drop("__runlines_latest")
    frame = frame.drop(_K)
    files = tables.files.drop("attempt")
    return frame.drop("__runlines_cutoff").join(F.broadcast(files), _FILE)


def _output(frame: DataFrame, raw: DataFrame, has_rank: bool) -> DataFrame:
    """Return the columns in load()'s order, run and rank filled, non-finite floats restored."""
    types = {f.name: type(f.dataType).__name__ for f in raw.schema.fields}
    pointers = _nonfinite_fields(raw)
    columns = [
        F.col("ts").cast("double").alias("ts")
        if "ts" in types
        else F.lit(None).cast("double").alias("ts"),
        _field(frame, "event").cast("string").alias("event"),
        F.coalesce(
            F.col("__runlines_label"), _field(frame, "run").cast("string"), F.col("__runlines_run")
        ).alias("run"),
    ]
    record_rank = "rank" in types
    if has_rank or record_rank:
        rank = (
            F.coalesce(F.col("rank").cast("long"), F.col("__runlines_rank"))
            if record_rank
            else F.col("__runlines_rank")
        )
        columns.append(rank.alias("rank"))
    columns.append(F.col("attempt").cast("long").alias("attempt"))
    for name in raw.columns:
        if name in (*_FIRST, "rank", "attempt", NONFINITE_KEY):
            continue
        column = F.col(f"`{name}`")
        if name in pointers and types[name] in _NUMERIC:
            column = _restored(name)
        columns.append(column.alias(name))
    return frame.select(*columns)


def _nonfinite_fields(raw: DataFrame) -> set[str]:
    if NONFINITE_KEY not in raw.columns:
        return set()
    marks = raw.schema[NONFINITE_KEY].dataType
    names = getattr(marks, "names", [])
    return {p[1:].replace("~1", "/").replace("~0", "~") for p in names if p.count("/") == 1}


def _restored(name: str) -> Column:
    pointer = "/" + name.replace("~", "~0").replace("/", "~1")
    mark = F.col(NONFINITE_KEY).getField(pointer)
    column = F.col(f"`{name}`").cast("double")
    for text, value in _NONFINITE.items():
        column = F.when(mark == text, F.lit(value)).otherwise(column)
    return column


def _empty(spark: SparkSession) -> DataFrame:
    schema = "ts double, event string, run string, attempt long"
    return spark.createDataFrame([], schema)
