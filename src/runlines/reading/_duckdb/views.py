"""The view ``records`` over a plan, the connections that hold it, and the SQL run on them.

Which attempt a record belongs to depends on its place in the file. For a file whose only
``run_start`` is its first record (the common case) the attempt is a constant. For the others
the view counts the ``run_start`` records before each row with window functions that have no
ORDER BY (``lag() OVER ()``, ``sum() OVER (ROWS UNBOUNDED PRECEDING)``): DuckDB runs them as
streaming windows over the scan in file order, with ``preserve_insertion_order`` on, which we
set (DuckDB's "order preservation" guarantee; tests/reading/test_duckdb.py checks it over many
attempts and two threads). A torn line reads as a row of NULLs; the view drops it by columns
that every record has a value in (usually ``ts`` alone), so that DuckDB still reads only the
columns a query uses.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from runlines._encoding import NONFINITE_KEY
from runlines.errors import QueryError
from runlines.reading._duckdb.copies import copies_sql, tail_sql
from runlines.reading._duckdb.plan import Plan, plan_of
from runlines.reading._duckdb.schema import Schema
from runlines.reading._duckdb.text import (
    BASE,
    FIDX,
    FILE,
    FILES,
    IS_START,
    PREV,
    ROW,
    SEEN,
    STARTS,
    VIEW,
    K,
    ident,
    literal,
    pointer_path,
    sql_list,
)
from runlines.reading._files import run_labels
from runlines.reading._rules import attempt_numbers, step_cutoffs

if TYPE_CHECKING:
    import pandas as pd


def read_sql(plan: Plan, files: list[str], skip: tuple[int, ...], *, ordered: bool) -> str:
    schema = plan.schema
    columns = ", ".join(
        f"{literal(name)}: {literal(schema.column_type(name))}" for name in schema.kinds
    )
    read = (
        f"read_json({sql_list(files)}, format='newline_delimited', records=true, "
        f"ignore_errors=true, filename='{FILE}', columns={{{columns}}})"
    )
    row = f", row_number() OVER () AS {ROW}" if ordered or skip else ""
    if not skip:
        return f"SELECT *{row} FROM {read}"
    # the rows of one file, numbered as the discovery pass numbered them (both skip blank lines)
    rows = ", ".join(map(str, skip))
    return f"SELECT * FROM (SELECT *{row} FROM {read}) WHERE {ROW} NOT IN ({rows})"


def counted_sql(plan: Plan, files: list[str], skip: tuple[int, ...], *, ordered: bool) -> str:
    """Return the read of files whose records need their run_start counted: `K` per row."""
    is_start = f"CAST(coalesce(event = 'run_start', false) AS INTEGER) AS {IS_START}"
    read = read_sql(plan, files, skip, ordered=ordered)
    marked = f"SELECT *, {is_start}, lag({FILE}) OVER () AS {PREV} FROM ({read})"
    seen = f"SELECT *, sum({IS_START}) OVER (ROWS UNBOUNDED PRECEDING) AS {SEEN} FROM ({marked})"
    base = f"CASE WHEN {PREV} IS DISTINCT FROM {FILE} THEN {SEEN} - {IS_START} END"
    k = f"CAST({SEEN} - last_value({base} IGNORE NULLS) OVER (ROWS UNBOUNDED PRECEDING) AS BIGINT)"
    return f"SELECT * EXCLUDE ({IS_START}, {PREV}, {SEEN}), {k} AS {K} FROM ({seen})"


def field_sql(schema: Schema, name: str) -> str:
    column = f"r.{ident(name)}"
    if name in schema.nonfinite and schema.column_type(name) == "DOUBLE":
        marks = f"r.{ident(NONFINITE_KEY)}"
        path = literal(pointer_path("/" + name.replace("~", "~0").replace("/", "~1")))
        return f"coalesce(TRY_CAST(json_extract_string({marks}, {path}) AS DOUBLE), {column})"
    return column


def base_sql(plan: Plan, *, superseded: bool, ordered: bool) -> str:
    """Return the SELECT of every record with run, rank and attempt, and internal columns."""
    schema = plan.schema
    parts = [read_sql(plan, *group, ordered=ordered) for group in plan.reads(counted=False)]
    parts += [counted_sql(plan, *group, ordered=ordered) for group in plan.reads(counted=True)]
    parts += copy_parts(plan, plan.copies, ordered=ordered)
    source = " UNION ALL BY NAME ".join(f"({part})" for part in parts)
    attempt = "coalesce(s.attempt, f.attempt)" if plan.counted else "f.attempt"
    columns = ["r.ts AS ts", "r.event AS event", "coalesce(f.label, r.run, f.run) AS run"]
    if plan.has_rank:
        rank = "coalesce(r.rank, f.rank)" if "rank" in schema.kinds else "f.rank"
        columns.append(f"{rank} AS rank")
    columns.append(f"{attempt} AS attempt")
    columns += [f"{field_sql(schema, n)} AS {ident(n)}" for n in schema.fields]
    if NONFINITE_KEY in schema.kinds:
        columns.append(f"r.{ident(NONFINITE_KEY)} AS {ident(NONFINITE_KEY)}")
    columns.append(f"f.fidx AS {FIDX}")
    if ordered:
        columns.append(f"r.{ROW} AS {ROW}")
    joins = f"LEFT JOIN {FILES} AS f ON r.{FILE} = f.file"
    if plan.counted:
        joins += f" LEFT JOIN {STARTS} AS s ON r.{FILE} = s.file AND r.{K} = s.k"
    # a torn line reads as a row of NULLs; every record has a value in one of these columns
    where = "(" + " OR ".join(f"r.{ident(n)} IS NOT NULL" for n in schema.present) + ")"
    if not superseded and plan.counted and schema.kinds.get("step") in ("int", "float"):
        where += ' AND coalesce(NOT (CAST(r."step" AS DOUBLE) > s.cutoff), true)'
        joins += f" LEFT JOIN ({latest_sql(plan)}) AS l ON r.{FILE} = l.file"
        joins += ' AND r.event = l.event AND CAST(r."step" AS DOUBLE) = l.step'
        where += f" AND coalesce(r.{K} >= l.k, true)"
    return f"SELECT {', '.join(columns)} FROM ({source}) AS r {joins} WHERE {where}"


def latest_sql(plan: Plan) -> str:
    """Return the last attempt (as k) that wrote each (file, event, step) of the counted files.

    A later attempt's record wins over an earlier one's at the same (event, step).
    """
    parts = [counted_sql(plan, *group, ordered=False) for group in plan.reads(counted=True)]
    counted_copies = [index for index in plan.copies if not plan.scans[index].is_simple]
    parts += copy_parts(plan, counted_copies, ordered=False)
    counted = " UNION ALL BY NAME ".join(f"({part})" for part in parts)
    return (
        f'SELECT {FILE} AS file, event, CAST("step" AS DOUBLE) AS step, max({K}) AS k '
        f'FROM ({counted}) WHERE "step" IS NOT NULL GROUP BY ALL'
    )


def copy_parts(plan: Plan, indexes: Iterable[int], *, ordered: bool) -> list[str]:
    """Return the SELECTs of the logs read through their copies: the copies' rows, their tails'.

    Their columns are those of `read_sql` (and `K` for logs whose attempts are counted).
    Copies of one layout whose attempts need no counting are read in one `read_parquet`.
    """
    together: dict[Any, list[int]] = {}
    alone = []
    for index in indexes:
        read = plan.copies[index]
        if plan.scans[index].is_simple:
            layout = (tuple((n, tuple(c)) for n, c in read.copy.storage.items()), read.types)
            together.setdefault(repr(layout), []).append(index)
        else:
            alone.append(index)
    reads = plan.copies
    parts = [
        copies_sql([reads[i] for i in group], plan.schema, counted=False, ordered=ordered)
        for group in together.values()
    ]
    parts += [copies_sql([reads[i]], plan.schema, counted=True, ordered=ordered) for i in alone]
    return parts + [tail_of(plan, i, ordered=ordered) for i in indexes if reads[i].tail]


def tail_of(plan: Plan, index: int, *, ordered: bool) -> str:
    """Return the SELECT of the rows of the tail after a log's copy, as rows of that log."""
    read = plan.copies[index]
    assert read.tail is not None
    assert read.tail_scan is not None
    counted = not plan.scans[index].is_simple
    make = counted_sql if counted else read_sql
    inner = make(plan, [str(read.tail)], read.tail_scan.deep, ordered=ordered)
    return tail_sql(read, plan.logs[index].path, inner, counted=counted, ordered=ordered)


def file_rows(plan: Plan) -> list[tuple[str, int, str, int | None, int | None, str | None]]:
    """Return (file, index, run, rank, attempt, label) per file.

    attempt is None where it is counted; label is the run's name where names collide.
    """
    ranked = {log.run for log in plan.logs if log.rank is not None}
    labels = run_labels(plan.logs)
    rows = []
    for index, (log, scan) in enumerate(zip(plan.logs, plan.scans, strict=True)):
        rank = log.rank if log.rank is not None else (0 if log.run in ranked else None)
        attempt = None
        if scan.is_simple:
            attempt = attempt_numbers([s.attempt for s in scan.starts])[0] if scan.starts else 1
        rows.append((str(log.path), index, log.run, rank, attempt, labels.get(log.path)))
    return rows


def start_rows(plan: Plan) -> list[tuple[str, int, int, float]]:
    """Return (file, k, attempt, cutoff) for each k run_starts seen, in files counted."""
    rows = []
    for log, scan in zip(plan.logs, plan.scans, strict=True):
        if scan.is_simple:
            continue
        numbers = [1, *attempt_numbers([s.attempt for s in scan.starts])]
        cutoffs = step_cutoffs([s.resume_step for s in scan.starts])
        rows += [(str(log.path), k, numbers[k], cutoffs[k]) for k in range(len(numbers))]
    return rows


def register_tables(con: duckdb.DuckDBPyConnection, plan: Plan) -> None:
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE {FILES} "
        "(file VARCHAR, fidx INTEGER, run VARCHAR, rank BIGINT, attempt BIGINT, label VARCHAR)"
    )
    con.executemany(f"INSERT INTO {FILES} VALUES (?, ?, ?, ?, ?, ?)", file_rows(plan))
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE {STARTS} "
        "(file VARCHAR, k BIGINT, attempt BIGINT, cutoff DOUBLE)"
    )
    starts = start_rows(plan)
    if starts:
        con.executemany(f"INSERT INTO {STARTS} VALUES (?, ?, ?, ?)", starts)


def create_views(
    con: duckdb.DuckDBPyConnection, plan: Plan, *, superseded: bool, ordered: bool = False
) -> None:
    register_tables(con, plan)
    base = base_sql(plan, superseded=superseded, ordered=ordered)
    con.execute(f"CREATE OR REPLACE TEMP VIEW {BASE} AS {base}")
    public = ["ts", "event", "run", *(["rank"] if plan.has_rank else []), "attempt"]
    public += plan.schema.fields
    names = ", ".join(ident(name) for name in public)
    con.execute(f"CREATE OR REPLACE TEMP VIEW {VIEW} AS SELECT {names} FROM {BASE}")


def new_connection() -> duckdb.DuckDBPyConnection:
    """Return an in-memory DuckDB connection set up for the view: order kept, no progress bar."""
    # spill files go to the system's temp folder, not a `.tmp` in the caller's working folder
    spill = Path(tempfile.gettempdir()) / f"runlines-duckdb-{os.getpid()}"
    con = duckdb.connect(
        ":memory:", config={"preserve_insertion_order": True, "temp_directory": str(spill)}
    )
    con.execute("SET enable_progress_bar = false")  # it would print into the caller's stdout
    # each Parquet copy's footer read once per connection, not once per scan of it
    con.execute("SET parquet_metadata_cache = true")
    return con


def connect(
    *sources: str | os.PathLike[str], superseded: bool = False
) -> duckdb.DuckDBPyConnection:
    """Return a connection whose view ``records`` holds the records: `runlines.sql.connect`."""
    con = new_connection()
    try:
        create_views(con, plan_of(con, sources), superseded=superseded)
    except BaseException:
        con.close()
        raise
    return con


@contextmanager
def connected(
    sources: Sequence[str | os.PathLike[str]], *, superseded: bool
) -> Iterator[duckdb.DuckDBPyConnection]:
    con = connect(*sources, superseded=superseded)
    try:
        yield con
    finally:
        con.close()


def run_sql(con: duckdb.DuckDBPyConnection, sql: str) -> Any:
    """Run the caller's *sql*, raising `QueryError` with DuckDB's message when it fails."""
    try:
        return con.sql(sql)
    except duckdb.Error as err:
        raise query_error(err) from err


def query_error(err: Exception) -> QueryError:
    """Return the QueryError of DuckDB's *err*: its first line and hint, and the view's name."""
    lines = str(err).strip().splitlines() or [type(err).__name__]
    hints = [line.strip() for line in lines[1:] if line.startswith(("Candidate", "Did you mean"))]
    first = " ".join([lines[0], *hints[:1]])
    msg = (
        f"DuckDB refused the SQL: {first}; the records are in the view {VIEW!r} "
        f"(e.g. SELECT run, count(*) FROM {VIEW} GROUP BY run)"
    )
    return QueryError(msg)


def query(sql: str, *sources: str | os.PathLike[str], superseded: bool = False) -> pd.DataFrame:
    """Return the result of *sql* over the records of *sources*: `runlines.sql.query`."""
    pd = needs_pandas("query()")
    if not isinstance(sql, str):
        msg = f"query() takes the SQL first, then the sources; got {type(sql).__name__} {sql!r}"
        raise TypeError(msg)
    with connected(sources, superseded=superseded) as con:
        relation = run_sql(con, sql)
        if relation is None:  # a statement without a result, e.g. CREATE TABLE
            return pd.DataFrame()
        try:
            return relation.df()
        except duckdb.Error as err:
            raise query_error(err) from err


def rows(
    sql: str, *sources: str | os.PathLike[str], superseded: bool = False
) -> tuple[list[str], list[tuple[Any, ...]]] | None:
    """Return the column names and rows of *sql* over *sources*; None for a statement without
    a result.

    Taken from DuckDB's rows, not a pandas frame: a float column in pandas holds NULL as NaN,
    so a NaN the run logged and a value it never logged would look alike.
    """
    with connected(sources, superseded=superseded) as con:
        relation = run_sql(con, sql)
        if relation is None:  # e.g. CREATE TABLE
            return None
        try:
            return list(relation.columns), relation.fetchall()
        except duckdb.Error as err:  # one that fails as it runs: a bad cast
            raise query_error(err) from err


def needs_pandas(caller: str) -> Any:
    """Return pandas, or raise ImportError with the install line (runlines[duckdb] has it)."""
    try:
        import pandas as pd
    except ImportError as err:
        msg = f"{caller} needs pandas: pip install 'runlines[duckdb]'"
        raise ImportError(msg) from err
    return pd


def query_to_file(
    sql: str,
    *sources: str | os.PathLike[str],
    output: str | os.PathLike[str],
    superseded: bool = False,
) -> Path:
    """Write the result of *sql* over *sources* to *output*: `runlines.sql.query_to_file`."""
    output = Path(output)
    options = {".csv": "FORMAT csv, HEADER true", ".parquet": "FORMAT parquet"}
    if output.suffix.lower() not in options:
        msg = f"cannot write {output}: the output must end in .csv or .parquet"
        raise ValueError(msg)
    body = sql.strip().rstrip(";")
    with connected(sources, superseded=superseded) as con:
        run_sql(con, f"COPY ({body}) TO {literal(str(output))} ({options[output.suffix.lower()]})")
    return output


def export(
    *sources: str | os.PathLike[str],
    output: str | os.PathLike[str],
    partition_by_run: bool = False,
    superseded: bool = False,
) -> Path:
    """Write every record of *sources* to Parquet, return *output*: `runlines.sql.export`."""
    output = Path(output)
    options = "FORMAT parquet"
    if partition_by_run:
        if output.exists() and (not output.is_dir() or any(output.iterdir())):
            msg = f"{output} exists and is not an empty folder; remove it or pick another output"
            raise FileExistsError(msg)
        options += ", PARTITION_BY (run)"
    elif output.is_dir():
        msg = f"{output} is a folder; name a .parquet file, or pass partition_by_run=True"
        raise IsADirectoryError(msg)
    with connected(sources, superseded=superseded) as con:
        con.execute(f"COPY (SELECT * FROM {VIEW}) TO {literal(str(output))} ({options})")
    return output
