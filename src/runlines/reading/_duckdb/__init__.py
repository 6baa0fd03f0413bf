"""SQL over runlines logs with DuckDB: the engine behind `runlines.sql`, out of core.

The logs are exposed as one view, ``records``, with `runlines.load`'s decoding: non-finite
floats restored, torn lines skipped, rank files merged into their run, each record's
``attempt``, and records superseded by a resumed attempt dropped. See docs/scale.md.

By part: `scan` (the discovery pass over each file, cached), `schema` (each field's kind and
DuckDB type), `copies` (a log read through its Parquet copy and the JSONL after it: same rows,
columns and types as the JSONL alone gives), `plan` (what a read reads), `views` (the view's
SQL, the connections that hold it, the SQL run on them) and `frame` (`load_duckdb`).

DuckDB is imported at the top of each module: a consumer imports this package inside the
public function that needs it, after `_rules.import_duckdb` named the extra if it lacks.
"""

from __future__ import annotations

from runlines.reading._duckdb.frame import load_duckdb
from runlines.reading._duckdb.text import VIEW
from runlines.reading._duckdb.views import connect, export, query, query_to_file, rows

__all__ = ["VIEW", "connect", "export", "load_duckdb", "query", "query_to_file", "rows"]
