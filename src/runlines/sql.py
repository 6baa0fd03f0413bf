"""SQL over runlines logs with DuckDB: `query`, `connect`, `load_duckdb` and `export`."""

from __future__ import annotations

from runlines.reading._duckdb import (
    VIEW,
    QueryError,
    connect,
    export,
    load_duckdb,
    query,
    query_to_file,
)

__all__ = ["VIEW", "QueryError", "connect", "export", "load_duckdb", "query", "query_to_file"]
