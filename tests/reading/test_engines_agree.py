"""Every engine (load, iter_events, query, Spark) reads the same records from awkward logs.

The logs: attempts that rewind (resume_step) and a rerun without one, ranks, torn lines, NaN,
an int beyond int64, nested values, lines nested 50,000 deep, and the same run name in two
folders. iter_events yields raw records: the rules of `runlines.reading._rules` are applied to
them here, in plain Python, as the reference the engines must match.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import runlines
import runlines.sql
from _logs import T0, line, write
from runlines import RunlinesError, RunlinesWarning
from runlines.reading._copies import compact, write_copy

sys.path.insert(0, str(Path(__file__).parents[1] / "reliability"))  # the reliability suite's logs
from _reliability import examples
from test_hostile_logs import HOSTILE, _json_values

from _optional import needs, skip_without

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


@needs("duckdb")
def test_load_through_duckdb_reads_the_reference_records(logs: Path) -> None:
    frame = runlines.load(*_sources(logs), engine="duckdb")

    assert sorted((_key(r) for r in frame.to_dict("records")), key=repr) == _reference(logs)


@needs("duckdb")
def test_query_reads_the_reference_records(logs: Path) -> None:
    frame = runlines.query("SELECT * FROM records", *_sources(logs))

    assert sorted((_key(r) for r in frame.to_dict("records")), key=repr) == _reference(logs)


@pytest.fixture(name="spark", scope="module")
def _spark() -> Iterator[Any]:
    if shutil.which("java") is None and "JAVA_HOME" not in os.environ:
        pytest.skip("PySpark needs a Java runtime (java on PATH or JAVA_HOME); none is installed")
    skip_without("pyspark")
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


# --- the same records through Parquet copies --------------------------------------------------
#
# Each engine reads a tree of logs twice: JSONL only, and with copies (`runlines compact`) in one
# of four states: fresh; with a resumed attempt appended after them (the tail); stale (the log
# rewritten since); foreign (a file at the copy's path that is no copy, or no Parquet at all).

_ORDERED = "SELECT * FROM records ORDER BY ALL"
_PER_ATTEMPT = (
    "SELECT run, attempt, count(*) AS n, max(loss) AS loss, max(step) AS step FROM records "
    "GROUP BY ALL ORDER BY ALL"
)
READERS: dict[str, Callable[..., Any]] = {
    "load": runlines.load,
    "load_duckdb": lambda *sources: runlines.load(*sources, engine="duckdb"),
    "query": lambda *sources: runlines.query(_ORDERED, *sources),
    "query_per_attempt": lambda *sources: runlines.query(_PER_ATTEMPT, *sources),
}
STATES = ("fresh", "tail", "stale", "foreign")
_NOT_USED = "is not used"


def _appended(root: Path) -> None:
    """Append a resumed attempt that rewinds past the copy's records, and a torn line."""
    with (root / "exp1" / "baseline.jsonl").open("ab") as log:
        log.write(line("run_start", run="baseline", ts=T0 + 20, attempt=4, resume_step=0))
        log.write(line("train", run="baseline", ts=T0 + 21, step=1, loss=0.25, tag="tail"))
    with (root / "exp2" / "dist.jsonl").open("ab") as log:
        log.write(line("train", run="dist", ts=T0 + 2, rank=0, step=2, loss=float("inf")))
    with (root / "exp2" / "baseline.jsonl").open("ab") as log:
        log.write(b'{"ts": 1767225699, "event": "tra')  # torn: a writer killed mid-line


def _made_stale(root: Path) -> None:
    """Rewrite a log's covered bytes, keeping its size: the copy no longer matches it."""
    path = root / "exp2" / "dist.rank1.jsonl"
    path.write_bytes(path.read_bytes().replace(b"3.1", b"3.2"))


def _with_state(root: Path, state: str, *, copies: bool) -> Path:
    _awkward(root)
    if copies:
        compact(*_sources(root))
    if state == "tail":
        _appended(root)
    elif state == "stale":
        _made_stale(root)
    elif state == "foreign" and copies:
        (root / "exp2" / "baseline.parquet").write_bytes(b"PAR1 not a Parquet file")
        pd.DataFrame({"a": [1]}).to_parquet(root / "exp1" / "baseline.parquet")
    return root


def _outcome(read: Callable[[], Any], root: Path) -> tuple[Any, list[str]]:
    """Return what *read* returned (or its error's type) and its warnings, paths made relative."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result: Any = read()
        except RunlinesError as err:
            result = type(err)
    said = [str(w.message).replace(str(root), "<root>") for w in caught]
    return result, [text for text in said if "PySpark" not in text]


def _assert_same(ours: Any, theirs: Any, *, ints_as_floats: bool = False) -> None:
    """Assert two outcomes are the same: frames of the same columns, dtypes and values.

    With *ints_as_floats*, an int in a JSON column may be the equal float (0.0 for 0).
    """
    if not isinstance(ours, pd.DataFrame):
        assert ours == theirs
    elif not ints_as_floats:
        pd.testing.assert_frame_equal(ours, theirs, check_exact=True)
    else:
        assert list(ours.columns) == list(theirs.columns)
        assert list(ours.dtypes) == list(theirs.dtypes)
        for name in ours.columns:
            assert [_value(v) for v in ours[name]] == [_value(v) for v in theirs[name]], name


def _value(value: Any) -> Any:
    """Return *value* comparable with ==: JSON text decoded, NaN and missing as markers."""
    if isinstance(value, str) and value[:1] in '[{"-0123456789tfnNI':
        try:
            value = json.loads(value)
        except ValueError:
            return value
    if isinstance(value, dict):
        return {key: _value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)) or hasattr(value, "tolist"):
        items = value.tolist() if hasattr(value, "tolist") else value
        return [_value(item) for item in items] if isinstance(items, list) else _value(items)
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return "<missing>"
    return value


@pytest.fixture(name="trees", scope="module", params=STATES)
def _trees(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    state = request.param
    plain = _with_state(tmp_path_factory.mktemp(f"{state}-jsonl"), state, copies=False)
    copied = _with_state(tmp_path_factory.mktemp(f"{state}-copies"), state, copies=True)
    return state, plain, copied


@pytest.mark.parametrize(
    "reader", [pytest.param(r, marks=[] if r == "load" else needs("duckdb")) for r in READERS]
)
def test_each_engine_reads_the_same_through_copies(trees: Any, reader: str) -> None:
    state, plain, copied = trees
    read = READERS[reader]

    ours, said = _outcome(lambda: read(*_sources(plain)), plain)
    theirs, said_too = _outcome(lambda: read(*_sources(copied)), copied)

    _assert_same(ours, theirs)
    assert said == [text for text in said_too if _NOT_USED not in text]
    assert _ignored(said_too) == _IGNORED.get(state, [])


_IGNORED = {  # the copies each state leaves unusable: warned about once per read, then not read
    "stale": ["<root>/exp2/dist.rank1.parquet"],
    "foreign": ["<root>/exp1/baseline.parquet", "<root>/exp2/baseline.parquet"],
}


def _ignored(said: list[str]) -> list[str]:
    return sorted(text.split()[0] for text in said if _NOT_USED in text)


def _view_sql(*sources: Path) -> str:
    with runlines.sql.connect(*sources) as con:
        return _views_of(con)


def _views_of(con: Any) -> str:
    rows = con.sql("SELECT sql FROM duckdb_views() WHERE view_name LIKE '__runlines%'").fetchall()
    return "\n".join(sql for (sql,) in rows)


@needs("duckdb")
def test_the_view_reads_each_copy_and_not_the_jsonl_it_covers(tmp_path: Path) -> None:
    root = _with_state(tmp_path, "fresh", copies=True)

    sql = _view_sql(*_sources(root))

    assert set(re.findall(r"'([^']+\.parquet)'", sql)) == {
        str(path) for path in root.glob("exp*/*.parquet")
    }
    assert "read_json(" not in sql


@needs("duckdb")
def test_the_view_reads_only_the_tail_after_a_copy(tmp_path: Path) -> None:
    root = _with_state(tmp_path, "tail", copies=True)

    sql = _view_sql(*_sources(root))

    assert len(set(re.findall(r"'([^']+\.parquet)'", sql))) == 4
    read = set(re.findall(r"read_json\(list_value\('([^']+)'\)", sql))
    assert len(read) == 3  # the three tails, each in a file of its own
    assert not read & {str(path) for path in root.glob("exp*/*.jsonl")}


@needs("duckdb")
def test_a_connection_removes_the_tails_it_wrote_when_it_goes(tmp_path: Path) -> None:
    root = _with_state(tmp_path, "tail", copies=True)
    con = runlines.sql.connect(*_sources(root))
    sql = _views_of(con)
    tails = {Path(p) for p in re.findall(r"read_json\(list_value\('([^']+)'\)", sql)}
    assert tails
    assert all(path.is_file() for path in tails)

    con.close()
    del con

    assert not any(path.exists() for path in tails)


@needs("duckdb")
def test_a_nested_non_finite_float_comes_back_from_a_copy_as_load_reads_it(tmp_path: Path) -> None:
    log = write(
        tmp_path / "e.jsonl",
        line("eval", run="e", step=1, scores={"top1": 0.9, "top5": -math.inf}),
        line("eval", run="e", step=2, scores={"top1": 0.8, "top5": 0.7}),
    )
    sql = "SELECT typeof(scores) AS kind, scores.top5 AS top5 FROM records ORDER BY step"
    jsonl = runlines.query(sql, log)

    write_copy(log)

    copied = runlines.query(sql, log)
    assert copied.kind.tolist() == jsonl.kind.tolist()
    assert jsonl.top5.isna().tolist() == [True, False]  # the JSONL's null
    assert copied.top5.tolist() == [-math.inf, 0.7]
    assert runlines.load(log).scores[0] == {"top1": 0.9, "top5": -math.inf}


# The hostile logs where DuckDB's JSON reader and load() (so, the copy) read a line differently:
# there the copy gives load()'s reading.
_READ_OTHERWISE = {
    ("duplicate_keys", "query"): "DuckDB keeps a key's first value, load() its last",
    ("duplicate_keys", "load_duckdb"): "DuckDB keeps a key's first value, load() its last",
    ("odd_types", "query"): "a `_nonfinite` mark on a value that is not null: load() follows it",
}


def _hostile_cases() -> list[Any]:
    cases = []
    for name in HOSTILE:
        for reader in ("query", "load_duckdb"):
            reason = _READ_OTHERWISE.get((name, reader))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            cases.append(pytest.param(name, reader, marks=marks, id=f"{name}-{reader}"))
    return cases


def _check_through_a_copy(path: Path, reader: str, *, ints_as_floats: bool = False) -> None:
    read = READERS[reader]
    ours, said = _outcome(lambda: read(path), path.parent)
    try:
        written = write_copy(path)
    except RunlinesError:
        return  # no copy of what cannot be read
    theirs, said_too = _outcome(lambda: read(path), path.parent)
    if written is not None:
        written.unlink()
    _assert_same(ours, theirs, ints_as_floats=ints_as_floats)
    assert said == said_too


@needs("duckdb")
@pytest.mark.parametrize(("name", "reader"), _hostile_cases())
def test_a_hostile_log_reads_the_same_through_its_copy(
    tmp_path: Path, name: str, reader: str
) -> None:
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(HOSTILE[name]())

    _check_through_a_copy(path, reader)


_numbers = st.none() | st.floats() | st.integers(min_value=-(2**70), max_value=2**70)
_values = _json_values | st.integers(min_value=-(2**70), max_value=2**70)
_records = st.fixed_dictionaries(
    {
        "ts": st.floats(min_value=0, max_value=2e9),
        "event": st.sampled_from(["run_start", "train", "eval", "span"]),
        "step": st.none() | st.integers(min_value=0, max_value=5),
    },
    optional={
        # non-finite floats in a field of numbers: in a field that also holds other kinds of
        # values, the JSONL's view has null for them, and a copy the float (docs/scale.md)
        "loss": _numbers,
        **{name: _values for name in ("cfg", "note", "big")},
        # Run writes these two as ints; an int in a block of floats reads as a float
        **{name: st.none() | st.integers(0, 5) for name in ("attempt", "resume_step")},
    },
)


@needs("duckdb")
@settings(
    max_examples=examples(25, 400),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(records=st.lists(_records, min_size=1, max_size=8), reader=st.sampled_from(["query",
       "load_duckdb"]))  # fmt: skip
def test_records_as_run_writes_them_read_the_same_through_a_copy(
    records: list[dict[str, Any]], reader: str
) -> None:
    """Any values, in Run's line format (non-finite floats as null with `_nonfinite` marks)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = write(Path(tmp) / "h.jsonl", *(line(run="h", **record) for record in records))

        # an int that pyarrow read in a block of floats is a float in the copy, as in load()
        _check_through_a_copy(path, reader, ints_as_floats=True)


def _spark_read(spark: Any, root: Path) -> tuple[Any, list[str]]:
    """Return the schema and the sorted rows of `runlines.spark.read` over the tree's logs."""
    from runlines.spark import read

    frame = read(spark, str(root / "exp*" / "*.jsonl"))
    rows = sorted(repr(sorted(row.asDict(recursive=True).items())) for row in frame.collect())
    return frame.schema, rows


def test_spark_reads_the_same_through_copies(spark: Any, trees: Any) -> None:
    state, plain, copied = trees

    ours, said = _outcome(lambda: _spark_read(spark, plain), plain)
    theirs, said_too = _outcome(lambda: _spark_read(spark, copied), copied)

    assert ours[0] == theirs[0]
    assert ours[1] == theirs[1]
    assert said == [text for text in said_too if _NOT_USED not in text]
    assert _ignored(said_too) == _IGNORED.get(state, [])


def test_spark_reads_each_copy_and_only_the_tail_after_it(spark: Any, tmp_path: Path) -> None:
    from runlines.spark import read

    root = _with_state(tmp_path, "tail", copies=True)

    files = [unquote(urlparse(uri).path) for uri in read(spark, str(root / "exp*")).inputFiles()]

    assert sorted(Path(f).name for f in files if f.endswith(".parquet")) == [
        "baseline.parquet", "baseline.parquet", "dist.parquet", "dist.rank1.parquet"
    ]  # fmt: skip
    assert not [f for f in files if f.startswith(str(root)) and f.endswith(".jsonl")]


@needs("duckdb")
@pytest.mark.parametrize("reader", ["query", "load_duckdb"])
def test_a_stale_copy_is_reported_at_the_callers_line(tmp_path: Path, reader: str) -> None:
    root = _with_state(tmp_path, "stale", copies=True)
    read: Callable[[], object] = {
        "query": lambda: runlines.query("SELECT count(*) FROM records", *_sources(root)),
        "load_duckdb": lambda: runlines.sql.load_duckdb(*_sources(root)),
    }[reader]

    with pytest.warns(RunlinesWarning, match="is not used") as caught:
        read()

    assert {Path(w.filename).name for w in caught if "is not used" in str(w.message)} == {
        Path(__file__).name
    }


def test_the_copy_is_written_without_importing_pandas(tmp_path: Path) -> None:
    """A run's close writes the copy in the job's own process: pandas (half a second to
    import) is not needed for it, whatever the log holds, and the copies read back as the
    JSONL."""
    logs = []
    for name in HOSTILE:
        logs.append(tmp_path / f"{name}.jsonl")
        logs[-1].write_bytes(HOSTILE[name]())
    logs.append(_awkward(tmp_path / "awkward") / "exp1" / "baseline.jsonl")
    logs.append(_mixed(tmp_path / "mixed.jsonl", 6000))
    code = (
        "import sys\n"
        "from runlines.reading._copies import write_copy\n"
        "for path in sys.argv[1:]:\n"
        "    write_copy(path)\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] == 'pandas'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code, *map(str, logs)],
        capture_output=True,
        text=True,
        check=True,
    )

    assert done.stdout.strip() == "[]"
    assert sum(log.with_suffix(".parquet").exists() for log in logs) > len(HOSTILE) // 2
    for log in logs[-2:]:  # what the hostile logs read through copies is checked above
        through_copy = _outcome(functools.partial(runlines.load, log), tmp_path)
        assert through_copy[0].shape[0] > 5
        _assert_same(through_copy[0], _jsonl_only(log, tmp_path)[0])


def _jsonl_only(log: Path, root: Path) -> tuple[Any, list[str]]:
    """Return the outcome of load() of *log* read from its JSONL, its copy set aside."""
    copy = log.with_suffix(".parquet")
    aside = copy.with_name(copy.name + ".aside")
    copy.rename(aside)
    try:
        return _outcome(lambda: runlines.load(log), root)
    finally:
        aside.rename(copy)


def _mixed(path: Path, count: int) -> Path:
    """Write a log big enough for the engine's event buckets, each holding what is awkward
    in a column: nulls, nested values, strings among numbers, ints past 64 bits, NaN."""
    lines = [line("run_start", run="mixed", ts=T0, attempt=1, config={"lr": 0.1})]
    for i in range(count):
        ts = T0 + 1 + i
        if i % 3 == 0:
            loss = float("nan") if i % 500 == 0 else 1.0 / (i + 1)
            lines.append(line("train", run="mixed", ts=ts, step=i, loss=loss, tag=None))
        elif i % 3 == 1:
            value: Any = "high" if i % 7 == 0 else i
            lines.append(line("eval", run="mixed", ts=ts, step=i, score=value, big=2**65 + i))
        else:
            lines.append(line("probe", run="mixed", ts=ts, step=i, hist={"bins": [i, i + 1]}))
        if i == count // 2:
            lines.append(line("run_start", run="mixed", ts=ts, attempt=2, resume_step=i // 2))
    lines.append(line("run_end", run="mixed", ts=T0 + count + 1, attempt=2, status="ok"))
    return write(path, *lines)
