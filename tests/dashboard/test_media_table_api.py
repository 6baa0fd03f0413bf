"""The dashboard's /api/table: a page of a table record's Parquet file, and nothing else."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from runlines import Run
from runlines.dashboard import Server

pytest.importorskip("pyarrow", reason="pip install 'runlines[media]'")
QUIET: dict[str, Any] = {"stdout": False, "system": False, "capture": False}
ROWS = 2500


def _get(server: Server, path: str) -> Any:
    with urllib.request.urlopen(server.url.rstrip("/") + path, timeout=30) as answer:
        return json.loads(answer.read())


def _refused(server: Server, path: str) -> int:
    with pytest.raises(urllib.error.HTTPError) as refused:
        _get(server, path)
    refused.value.close()
    return refused.value.code


@pytest.fixture(name="served")
def _served(tmp_path: Path) -> Any:
    with Run("tables", tmp_path, **QUIET) as run:
        run.table("preds", [{"id": i, "label": f"l{i % 3}"} for i in range(ROWS)], step=1)
        run.image("samples", np.zeros((2, 2, 3), dtype=np.uint8), step=1)
    with Server(tmp_path, port=0) as server:
        server.store.catch_up(1 << 30)
        media = _get(server, "/api/media?run=tables")["media"]
        paths = {m["event"]: urllib.parse.quote(m["path"]) for m in media}
        yield server, paths


def test_a_page_of_rows_comes_from_the_offset_asked(served: Any) -> None:
    server, paths = served

    page = _get(server, f"/api/table?run=tables&path={paths['table']}&offset=1000&limit=3")
    first = _get(server, f"/api/table?run=tables&path={paths['table']}")

    assert page["columns"] == ["id", "label"]
    assert page["total"] == ROWS
    assert page["rows"] == [[1000, "l1"], [1001, "l2"], [1002, "l0"]]
    assert [r[0] for r in first["rows"]] == list(range(50))


def test_limits_are_bounded_and_the_end_is_an_empty_page(served: Any) -> None:
    server, paths = served
    table = f"/api/table?run=tables&path={paths['table']}"

    big = _get(server, table + "&limit=100000")
    tail = _get(server, table + f"&offset={ROWS - 2}&limit=10")
    past = _get(server, table + f"&offset={ROWS + 5}")

    assert len(big["rows"]) == 500
    assert [r[0] for r in tail["rows"]] == [ROWS - 2, ROWS - 1]
    assert past["rows"] == []


def test_only_a_table_records_file_is_read_and_bad_numbers_are_refused(served: Any) -> None:
    server, paths = served

    assert _refused(server, f"/api/table?run=tables&path={paths['image']}") == 404
    assert _refused(server, "/api/table?run=tables&path=tables.jsonl") == 404
    assert _refused(server, f"/api/table?run=tables&path={paths['table']}&offset=-1") == 400
    assert _refused(server, f"/api/table?run=tables&path={paths['table']}&limit=ten") == 400
