"""The hostile logs through a Parquet copy: load() and runs() give what the JSONL alone gives.

Each hostile payload (and each hypothesis log of hostile field values) is read without a copy,
then compacted and read again: the same frame, the same run table, the same warnings, or the
same error.
"""

from __future__ import annotations

import json
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from _reliability import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_hostile_logs import HOSTILE, _hostile_records

import runlines
from runlines import RunlinesError, RunlinesWarning
from runlines.reading._copies import write_copy


def _outcome(read: Callable[[], Any]) -> tuple[Any, list[str]]:
    """Return what *read* returned (or its error's type) and the RunlinesWarnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result: Any = read()
        except RunlinesError as err:
            result = type(err)
    return result, [str(w.message) for w in caught if issubclass(w.category, RunlinesWarning)]


def _same(ours: Any, theirs: Any) -> None:
    if not isinstance(ours, pd.DataFrame):
        assert ours == theirs
        return
    assert list(ours.columns) == list(theirs.columns)
    assert list(ours.dtypes) == list(theirs.dtypes)
    for name in ours.columns:
        if str(ours[name].dtype).startswith("str"):  # may hold invalid UTF-8 that pandas refuses
            assert _arrow(ours[name]).equals(_arrow(theirs[name])), name
        else:
            pd.testing.assert_series_equal(ours[name], theirs[name])


def _arrow(column: pd.Series) -> Any:
    import pyarrow as pa

    values = pa.array(column.array)
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def _check_through_a_copy(path: Path) -> None:
    readers = [lambda: runlines.load(path), lambda: runlines.runs(path)]
    plain = [_outcome(read) for read in readers]
    try:
        written = write_copy(path)
    except RunlinesError:
        return  # no copy of what cannot be read: the readers go on reading the JSONL
    copied = [_outcome(read) for read in readers]
    for (ours, said), (theirs, said_too) in zip(plain, copied, strict=True):
        _same(ours, theirs)
        assert said == said_too
    if written is not None:
        written.unlink()


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_log_reads_the_same_through_its_copy(tmp_path: Path, name: str) -> None:
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(HOSTILE[name]())

    _check_through_a_copy(path)


@settings(
    max_examples=examples(30, 500),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(records=st.lists(_hostile_records, min_size=1, max_size=6))
def test_records_with_hostile_field_values_read_the_same_through_a_copy(
    records: list[dict[str, Any]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "h.jsonl"
        lines = [json.dumps(r, allow_nan=True).encode() for r in records]
        path.write_bytes(b"\n".join(lines) + b"\n")

        _check_through_a_copy(path)
