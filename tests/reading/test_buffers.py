"""reading/_buffers.py: Arrow to numpy and back through buffers gives what pyarrow's own
conversions give, for sliced and chunked arrays, with nulls."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given
from hypothesis import strategies as st

from runlines.reading._buffers import (
    distinct,
    from_numpy,
    large_text,
    numpy_of,
    sparse_lists,
    sparse_strings,
    strings,
    text_codes,
    text_take,
    valid_of,
)

_KINDS = {
    "int": (pa.int64(), st.integers(min_value=-(2**63), max_value=2**63 - 1)),
    "int32": (pa.int32(), st.integers(min_value=-(2**31), max_value=2**31 - 1)),
    "float": (pa.float64(), st.floats()),
    "bool": (pa.bool_(), st.booleans()),
}


@st.composite
def _arrays(draw: Any) -> tuple[Any, list[Any]]:
    """An Arrow array (sliced, maybe chunked) and its values as Python's, None for null."""
    kind, values = _KINDS[draw(st.sampled_from(sorted(_KINDS)))]
    chunks = draw(st.lists(st.lists(st.none() | values, max_size=20), min_size=1, max_size=3))
    arrays = []
    expected: list[Any] = []
    for chunk in chunks:
        start = draw(st.integers(min_value=0, max_value=len(chunk)))
        whole = pa.array(chunk, type=kind)
        arrays.append(whole.slice(start))
        expected += chunk[start:]
    if len(arrays) == 1 and draw(st.booleans()):
        return arrays[0], expected
    return pa.chunked_array(arrays, type=kind), expected


@given(_arrays())
def test_numpy_of_and_valid_of_are_pyarrows_values_and_validity(case: Any) -> None:
    array, expected = case
    values, valid = numpy_of(array), valid_of(array)

    assert valid.tolist() == [v is not None for v in expected]
    null = np.nan if pa.types.is_floating(array.type) else 0  # what fill_null would give
    filled = [null if v is None else v for v in expected]
    assert len(values) == len(expected)
    for got, want in zip(values.tolist(), filled, strict=True):
        assert got == want or (got != got and want != want)  # NaN where null or logged


@given(_arrays())
def test_from_numpy_gives_back_the_array(case: Any) -> None:
    array, expected = case

    made = from_numpy(numpy_of(array), array.type, valid=valid_of(array))

    assert made.type == array.type
    for got, want in zip(made.to_pylist(), expected, strict=True):
        assert got == want or (got != got and want != want)  # NaN


@given(st.lists(st.none() | st.text(), max_size=30), st.booleans())
def test_strings_are_pyarrows_strings(texts: list[str | None], large: bool) -> None:
    kind = pa.large_string() if large else pa.string()

    assert strings(texts, kind).equals(pa.array(texts, type=kind))


@given(st.dictionaries(st.integers(min_value=0, max_value=40), st.text(), max_size=10))
def test_sparse_strings_place_each_text_at_its_row(at: dict[int, str]) -> None:
    size = 41
    rows = list(at)  # in the order drawn, not sorted

    made = sparse_strings(size, rows, [at[row] for row in rows], pa.large_string())

    assert made.to_pylist() == [at.get(row) for row in range(size)]


def test_sparse_lists_place_each_list_at_its_row() -> None:
    made = sparse_lists(5, [1, 4], [["loss"], ["lr", "step"]])

    assert made.to_pylist() == [None, ["loss"], None, None, ["lr", "step"]]
    assert made.type == pa.list_(pa.string())


_TEXTS = st.lists(st.none() | st.text(max_size=8) | st.sampled_from(["train", "é"]), max_size=30)


@st.composite
def _texts(draw: Any) -> Any:
    """A string Arrow array, sliced, maybe large_string."""
    texts = draw(_TEXTS)
    kind = pa.large_string() if draw(st.booleans()) else pa.string()
    start = draw(st.integers(min_value=0, max_value=len(texts)))
    return pa.array(texts, type=kind).slice(start)


@given(_texts())
def test_large_text_is_pyarrows_cast(array: Any) -> None:
    widened = large_text(array)
    assert widened.type == pa.large_string()
    assert widened.equals(array.cast(pa.large_string()))


@given(_texts())
def test_text_codes_are_dictionary_encodes(array: Any) -> None:
    coded = text_codes(array)
    if any(text is not None and "\x00" in text for text in array.to_pylist()):
        assert coded is None  # numpy's fixed-width keys cannot tell a trailing NUL
        return
    assert coded is not None
    encoded = pc.dictionary_encode(array)
    codes = np.where(valid_of(encoded.indices), numpy_of(encoded.indices), -1)
    assert coded[0] == encoded.dictionary.to_pylist()
    assert coded[1].tolist() == codes.tolist()


def test_text_codes_decline_long_and_invalid_texts() -> None:
    assert text_codes(pa.array(["x" * 65])) is None
    invalid = pa.Array.from_buffers(
        pa.string(), 1, [None, pa.py_buffer(np.array([0, 2], np.int32)), pa.py_buffer(b"a\xff")]
    )
    assert text_codes(invalid) is None


@given(_texts(), st.lists(st.integers(min_value=-1, max_value=40), max_size=30))
def test_text_take_is_pyarrows_take(array: Any, wanted: list[int]) -> None:
    index = np.array([i if i < len(array) else -1 for i in wanted], dtype=np.int64)
    taken = text_take(array, index)
    expected = pc.take(
        array.cast(pa.large_string()), from_numpy(index, pa.int64(), valid=index >= 0)
    )
    assert taken.equals(expected)


@given(st.lists(st.integers(min_value=-5, max_value=5), max_size=30))
def test_distinct_is_np_unique(values: list[int]) -> None:
    array = np.array(values, dtype=np.int64)
    assert distinct(array).tolist() == np.unique(array).tolist()
    assert distinct(array).dtype == np.int64
