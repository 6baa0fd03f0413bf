"""The `runlines query` and `runlines export` commands: SQL and Parquet over many logs (DuckDB).

`add_commands` adds both to the `runlines` parser; each handler returns the exit status and
reports a failure as one ``runlines: error:`` line on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

from runlines import sql
from runlines.cli._terminal import printable
from runlines.errors import RunlinesError
from runlines.reading._rules import import_duckdb, json_ready

__all__ = ["add_commands"]

_EXAMPLE = "SELECT run, epoch, avg(loss) FROM records WHERE event = 'eval' GROUP BY ALL"


def add_commands(subparsers: Any) -> None:
    """Add `query` and `export` to *subparsers* (from ``parser.add_subparsers()``)."""
    query = subparsers.add_parser(
        "query",
        help="run SQL over the records of logs (the view 'records'); needs runlines[duckdb]",
        description=f"Run SQL over every record of the logs, the view 'records'. e.g. {_EXAMPLE!r}",
    )
    query.add_argument("sql", help="one SQL statement over the view 'records'")
    query.add_argument("sources", nargs="+", metavar="SOURCE", help="a .jsonl log or a folder")
    query.add_argument(
        "-o", "--output", type=Path, help="write the result to FILE.csv or FILE.parquet"
    )
    query.add_argument(
        "--superseded", action="store_true", help="keep records a resumed attempt rewound past"
    )
    query.add_argument("--json", action="store_true", help="print the rows as JSON")
    _set_handler(query, _query)
    export = subparsers.add_parser(
        "export",
        help="write every record of logs to Parquet for BI tools and Spark; needs runlines[duckdb]",
    )
    export.add_argument("sources", nargs="+", metavar="SOURCE", help="a .jsonl log or a folder")
    export.add_argument(
        "-o", "--output", type=Path, required=True, help="the .parquet file (or new folder)"
    )
    export.add_argument(
        "--partition-by-run",
        action="store_true",
        help="write a folder of run=<name>/ parts instead of one file",
    )
    export.add_argument(
        "--superseded", action="store_true", help="keep records a resumed attempt rewound past"
    )
    _set_handler(export, _export)


def _set_handler(parser: argparse.ArgumentParser, handler: Callable[[Any], int]) -> None:
    # `handler` is what runlines.cli.main calls; `func` is argparse's usual name for it
    parser.set_defaults(handler=handler, func=handler)


def _query(args: argparse.Namespace) -> int:
    def run() -> None:
        if args.output is not None:
            path = sql.query_to_file(
                args.sql, *args.sources, output=args.output, superseded=args.superseded
            )
            print(f"wrote {path}")
            return
        if args.json:
            print(_rows_json(args.sql, args.sources, superseded=args.superseded))
            return
        print(_table(_result(args.sql, args.sources, superseded=args.superseded)))

    return _reporting_errors(run)


def _result(
    text: str, sources: list[str], *, superseded: bool
) -> tuple[list[str], list[tuple[Any, ...]]] | None:
    """Return the column names and rows of SQL *text* (DuckDB's: NaN stays apart from NULL)."""
    import_duckdb("query")
    from runlines.reading import _duckdb

    return _duckdb.rows(text, *sources, superseded=superseded)


def _rows_json(text: str, sources: list[str], *, superseded: bool) -> str:
    """Return the rows of SQL *text* as a JSON array, in the convention of every `--json`."""
    result = _result(text, sources, superseded=superseded)
    if result is None:
        return "[]"
    names, rows = result
    found = [dict(zip(names, row, strict=True)) for row in rows]
    return json.dumps(json_ready(found), default=_json_default, allow_nan=False)


def _json_default(value: Any) -> Any:
    """Return a DuckDB value json cannot write as JSON: a time as ISO text, a decimal as float."""
    if isinstance(value, Decimal):
        return float(value)
    isoformat = getattr(value, "isoformat", None)
    return isoformat() if callable(isoformat) else str(value)


def _table(result: tuple[list[str], list[tuple[Any, ...]]] | None) -> str:
    """Return a SQL result as aligned columns: SQL NULL as ``NULL``, NaN as ``nan``."""
    if result is None or not result[0]:
        return "(no result)"
    names, rows = result
    header = [printable(str(name)) for name in names]
    if not rows:
        return "  ".join(header) + "\n(0 rows)"
    cells = [header, *([_cell(value) for value in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(names))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    """Return one value of a SQL result as the table shows it, `printable`."""
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return f"{value:.6g}"  # nan, inf and -inf as the other tables print them
    return printable(str(value))


def _export(args: argparse.Namespace) -> int:
    def run() -> None:
        path = sql.export(
            *args.sources,
            output=args.output,
            partition_by_run=args.partition_by_run,
            superseded=args.superseded,
        )
        print(f"wrote {path}")

    return _reporting_errors(run)


def _reporting_errors(work: Callable[[], None]) -> int:
    """Run *work*; print a failure as one line on stderr and return 1, else return 0."""
    try:
        work()
    except (RunlinesError, ImportError, OSError, ValueError) as err:
        print(f"runlines: error: {printable(_one_line(err))}", file=sys.stderr)
        return 1
    except Exception as err:  # DuckDB's own errors (I/O, conversion) during a COPY or scan
        if type(err).__module__.split(".")[0] not in ("duckdb", "_duckdb"):
            raise
        print(f"runlines: error: DuckDB failed: {printable(_one_line(err))}", file=sys.stderr)
        return 1
    return 0


def _one_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
