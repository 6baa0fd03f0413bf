"""SQL over runlines logs with DuckDB: `query`, `connect`, `load_duckdb` and `export`.

DuckDB is imported at the first call: the engine is reading/_duckdb, the door is here
(`_engine`, which names the extra to install when DuckDB lacks).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Final

from runlines.errors import QueryError
from runlines.reading._rules import import_duckdb

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

__all__ = ["VIEW", "QueryError", "connect", "export", "load_duckdb", "query", "query_to_file"]

#: The name of the view that holds every record of the sources (the engine's own `VIEW`).
VIEW: Final = "records"


def _engine(caller: str) -> ModuleType:
    """Return the SQL engine, reading/_duckdb, having named the extra when DuckDB lacks."""
    import_duckdb(caller)
    from runlines.reading import _duckdb

    return _duckdb


def connect(
    *sources: str | os.PathLike[str], superseded: bool = False
) -> duckdb.DuckDBPyConnection:
    """Return a new in-memory DuckDB connection whose view ``records`` holds the sources' records.

    Args:
        sources: log files, or folders whose ``*.jsonl`` logs (rank files merged) are all read.
        superseded: keep records that a resumed attempt rewound past (dropped by default).

    Raises:
        ReadError: a source that does not exist, or a folder without logs.
        ImportError: DuckDB is not installed.
    """
    connection: duckdb.DuckDBPyConnection = _engine("connect()").connect(
        *sources, superseded=superseded
    )
    return connection


def query(sql: str, *sources: str | os.PathLike[str], superseded: bool = False) -> pd.DataFrame:
    """Run *sql* over the records of *sources*, the view ``records``; return the result.

    Works on logs larger than memory: DuckDB streams the files (only the result must fit).

    Raises:
        QueryError: SQL that DuckDB refused (its message, and the view's name).
        ReadError: a source that does not exist, or a folder without logs.
        ImportError: DuckDB or pandas is not installed.
    """
    return _engine("query()").query(sql, *sources, superseded=superseded)


def query_to_file(
    sql: str,
    *sources: str | os.PathLike[str],
    output: str | os.PathLike[str],
    superseded: bool = False,
) -> Path:
    """Write the result of *sql* over *sources* to *output*: CSV or Parquet by its suffix.

    DuckDB writes it as it goes, so the result need not fit in memory.

    Raises:
        ValueError: an output suffix other than .csv or .parquet.
        QueryError: SQL that DuckDB refused.
    """
    written: Path = _engine("query_to_file()").query_to_file(
        sql, *sources, output=output, superseded=superseded
    )
    return written


def export(
    *sources: str | os.PathLike[str],
    output: str | os.PathLike[str],
    partition_by_run: bool = False,
    superseded: bool = False,
) -> Path:
    """Write every record of *sources*, decoded, to Parquet for BI tools and Spark; return *output*.

    Args:
        output: the Parquet file, or with *partition_by_run* a new folder of
            ``run=<name>/*.parquet`` files (Hive partitioning: readers get ``run`` back).
        superseded: keep records that a resumed attempt rewound past (dropped by default).

    Raises:
        FileExistsError: *partition_by_run* and *output* is a folder that is not empty.
        ReadError: a source that does not exist, or a folder without logs.
    """
    written: Path = _engine("export()").export(
        *sources, output=output, partition_by_run=partition_by_run, superseded=superseded
    )
    return written


def load_duckdb(
    *sources: str | os.PathLike[str],
    event: str | Iterable[str] | None = None,
    columns: Iterable[str] | None = None,
    superseded: bool = False,
) -> pd.DataFrame:
    """Return the records of *sources* as one DataFrame, read by DuckDB: `runlines.load`'s frame.

    Same arguments, columns, row order and dtypes as `runlines.load` (torn lines are skipped
    without a warning, lines nested too deep with one). It reads in parallel and out of core,
    but the frame must fit in memory.

    Raises:
        ReadError: a source that does not exist, or a folder without logs.
        FieldError: an event name or a column that no record has.
    """
    return _engine("load_duckdb()").load_duckdb(
        *sources, event=event, columns=columns, superseded=superseded
    )
