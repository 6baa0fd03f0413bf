"""Arrow arrays to numpy and back through their buffers, without pandas.

pyarrow's own conversions (`Array.to_numpy`, `pa.array`, `pa.scalar`) ask pandas whether the
value is one of its types, and so import it: about half a second of a fresh process. The copy
that a run writes as it closes (`reading/_copies/write.py`) needs none of pandas, so its path
converts here, from the buffers Arrow documents for primitive arrays: a validity bitmap (bit i
of byte i // 8, least significant first) and the values, after the array's offset.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

__all__ = [
    "compute",
    "distinct",
    "from_numpy",
    "large_text",
    "numpy_of",
    "sparse_lists",
    "sparse_strings",
    "strings",
    "text_codes",
    "text_take",
    "valid_of",
]


class _Compute:
    """`pyarrow.compute`, imported on the first use of one of its functions.

    Its import (about 25 ms) is most of what a run's close would import beyond reading the
    log and writing Parquet; the copy's path does without it where numpy does the same.
    """

    def __getattr__(self, name: str) -> Any:
        import pyarrow.compute

        return getattr(pyarrow.compute, name)


compute: Any = _Compute()


def distinct(values: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """Return the sorted distinct values of numpy array *values*, as `np.unique` does.

    numpy 2's `np.unique` imports `numpy.ma` on its first call (about 7 ms of a close).
    """
    ordered = np.sort(values, kind="stable")
    if len(ordered) < 2:
        return ordered
    keep = np.empty(len(ordered), dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def _bits(buffer: Any, offset: int, length: int) -> npt.NDArray[np.bool_]:
    """Return *length* bits of a bitmap *buffer* from bit *offset* on, as bools."""
    raw = np.frombuffer(buffer, dtype=np.uint8)
    return np.unpackbits(raw, count=offset + length, bitorder="little")[offset:].astype(bool)


def _chunks(array: Any) -> list[Any]:
    return array.chunks if isinstance(array, pa.ChunkedArray) else [array]


def valid_of(array: Any) -> npt.NDArray[np.bool_]:
    """Return which values of Arrow *array* (an array or a chunked one) are not null."""
    parts = []
    for chunk in _chunks(array):
        validity = chunk.buffers()[0]
        if chunk.null_count == 0 or validity is None:
            parts.append(np.full(len(chunk), chunk.null_count == 0, dtype=bool))
        else:
            parts.append(_bits(validity, chunk.offset, len(chunk)))
    return np.concatenate(parts) if len(parts) != 1 else parts[0]


def numpy_of(array: Any) -> npt.NDArray[Any]:
    """Return the values of a bool, int or float Arrow *array* as numpy's: NaN, 0 or False
    where a value is null (as `fill_null` would make them; `valid_of` tells which)."""
    parts = []
    for chunk in _chunks(array):
        kind = chunk.type
        data = chunk.buffers()[1]
        if pa.types.is_boolean(kind):
            values = _bits(data, chunk.offset, len(chunk)) if data is not None else None
            if values is None:
                values = np.zeros(len(chunk), dtype=bool)
            if chunk.null_count:
                values &= valid_of(chunk)
        elif pa.types.is_null(kind):
            values = np.zeros(len(chunk), dtype=np.float64)
        else:
            dtype = np.dtype(kind.to_pandas_dtype())
            values = np.frombuffer(data, dtype=dtype, count=chunk.offset + len(chunk))
            values = values[chunk.offset :]
            if chunk.null_count:
                values = np.where(
                    valid_of(chunk), values, np.nan if values.dtype.kind == "f" else 0
                )
        parts.append(values)
    if not parts:
        return np.zeros(0, dtype=np.dtype(array.type.to_pandas_dtype()))
    return np.concatenate(parts) if len(parts) != 1 else parts[0]


def from_numpy(values: npt.ArrayLike, kind: Any, *, valid: Any = None) -> Any:
    """Return the numpy *values* as an Arrow array of type *kind* (bool, int or float), null
    where *valid* (bools) is False."""
    count = len(values)  # type: ignore[arg-type]
    validity = None
    nulls = 0
    if valid is not None:
        valid = np.asarray(valid, dtype=bool)
        nulls = int(count - valid.sum())
        if nulls:
            validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
    if pa.types.is_boolean(kind):
        data = pa.py_buffer(np.packbits(np.asarray(values, dtype=bool), bitorder="little"))
    else:
        dtype = np.dtype(kind.to_pandas_dtype())
        data = pa.py_buffer(np.ascontiguousarray(values, dtype=dtype))
    return pa.Array.from_buffers(kind, count, [validity, data], null_count=nulls)


def strings(texts: Sequence[str | None], kind: Any = None) -> Any:
    """Return *texts* as an Arrow string array (large_string for *kind* so), None as null."""
    kind = pa.string() if kind is None else kind
    encoded = [b"" if text is None else text.encode() for text in texts]
    width = np.int64 if pa.types.is_large_string(kind) else np.int32
    offsets = np.zeros(len(encoded) + 1, dtype=width)
    np.cumsum([len(part) for part in encoded], out=offsets[1:])
    valid = np.fromiter((text is not None for text in texts), dtype=bool, count=len(texts))
    nulls = int(len(texts) - valid.sum())
    validity = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    buffers = [validity, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))]
    return pa.Array.from_buffers(kind, len(texts), buffers, null_count=nulls)


def _offsets(size: int, at: npt.NDArray[np.int64], lengths: Sequence[int], width: Any) -> Any:
    """Return the offsets of *size* values, those at rows *at* of *lengths*, the others empty."""
    each = np.zeros(size, dtype=width)
    each[at] = lengths
    offsets = np.zeros(size + 1, dtype=width)
    np.cumsum(each, out=offsets[1:])
    return offsets


def _validity(size: int, at: npt.NDArray[np.int64]) -> Any:
    if len(at) == size:
        return None
    valid = np.zeros(size, dtype=bool)
    valid[at] = True
    return pa.py_buffer(np.packbits(valid, bitorder="little"))


def sparse_strings(size: int, at: Sequence[int], texts: Sequence[str], kind: Any) -> Any:
    """Return *size* strings of type *kind*, *texts* at rows *at* (distinct) and null elsewhere:
    what `strings` makes of a list mostly None, without a Python value per row."""
    rows = np.asarray(at, dtype=np.int64)
    encoded = [text.encode() for text in texts]
    if len(rows) > 1 and (np.diff(rows) < 0).any():  # the bytes go in row order
        order = np.argsort(rows, kind="stable")
        rows, encoded = rows[order], [encoded[i] for i in order.tolist()]
    width = np.int64 if pa.types.is_large_string(kind) else np.int32
    offsets = _offsets(size, rows, [len(part) for part in encoded], width)
    buffers = [_validity(size, rows), pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))]
    return pa.Array.from_buffers(kind, size, buffers, null_count=size - len(rows))


def sparse_lists(size: int, at: Sequence[int], lists: Sequence[Sequence[str]]) -> Any:
    """Return *size* lists of strings, *lists* at rows *at* (distinct, ascending) and null
    elsewhere."""
    rows = np.asarray(at, dtype=np.int64)
    offsets = _offsets(size, rows, [len(names) for names in lists], np.int32)
    values = strings([name for names in lists for name in names])
    kind = pa.list_(pa.string())
    return pa.Array.from_buffers(
        kind,
        size,
        [_validity(size, rows), pa.py_buffer(offsets)],
        null_count=size - len(rows),
        children=[values],
    )


TEXT_KEY: Final = 64  # texts longer than this are encoded by pyarrow.compute, not numpy


def large_text(chunk: Any) -> Any:
    """Return the string (or large_string) Arrow array *chunk* as large_string: as `cast`
    does, with the offsets widened by numpy (the bytes and validity are shared)."""
    if pa.types.is_large_string(chunk.type):
        return chunk
    if not len(chunk):
        return strings([], pa.large_string())
    validity, offsets, data = chunk.buffers()
    wide = np.frombuffer(offsets, dtype=np.int32, count=chunk.offset + len(chunk) + 1)
    buffers = [validity, pa.py_buffer(wide.astype(np.int64)), data]
    return pa.Array.from_buffers(
        pa.large_string(), len(chunk), buffers, null_count=chunk.null_count, offset=chunk.offset
    )


def _text_parts(array: Any) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8]]:
    """Return the offsets (from 0) and bytes of string Arrow *array*, one chunk or several."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
    width = np.int64 if pa.types.is_large_string(array.type) else np.int32
    if not len(array):
        return np.zeros(1, np.int64), np.zeros(0, np.uint8)
    _, offsets, data = array.buffers()
    count = array.offset + len(array) + 1
    bounds = np.frombuffer(offsets, dtype=width, count=count)[array.offset :].astype(np.int64)
    raw = np.zeros(0, np.uint8) if data is None else np.frombuffer(data, dtype=np.uint8)
    return bounds, raw


def text_codes(array: Any) -> tuple[list[str], npt.NDArray[np.int64]] | None:
    """Return the distinct texts of string Arrow *array* in the order they first come, and
    each row's index among them (-1 for null), as `dictionary_encode` would; None where a
    text is longer than TEXT_KEY bytes, holds a NUL (numpy's fixed-width keys drop those) or
    is not UTF-8.
    """
    bounds, raw = _text_parts(array)
    valid = valid_of(array)
    lengths = np.diff(bounds)
    width = max(1, int(lengths.max(initial=0)))
    if width > TEXT_KEY or (raw[bounds[0] : bounds[-1]] == 0).any():
        return None
    place = np.arange(width)
    inside = place < lengths[:, None]
    keys = np.zeros((len(lengths), width), dtype=np.uint8)
    keys[inside] = raw[(bounds[:-1, None] + place)[inside]]
    held = keys.view(f"S{width}").ravel()[valid]
    codes = np.full(len(valid), -1, dtype=np.int64)
    if not len(held):
        return [], codes
    found, first, inverse = np.unique(held, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    codes[valid] = rank[inverse.ravel()]
    try:
        texts = [bytes(found[i]).decode() for i in order.tolist()]
    except UnicodeDecodeError:  # bytes pyarrow was handed as they came: its own rules apply
        return None
    return texts, codes


def text_take(array: Any, index: npt.NDArray[np.int64]) -> Any:
    """Return the values of string Arrow *array* at *index* (null at -1) as large_string,
    as `take` would, gathered by numpy."""
    if not len(array):
        return strings([None] * len(index), pa.large_string())
    bounds, raw = _text_parts(array)
    hit = index >= 0
    at = np.where(hit, index, 0)
    hit &= valid_of(array)[at]
    lengths = np.where(hit, bounds[at + 1] - bounds[at], 0)
    offsets = np.zeros(len(index) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    source = np.repeat(bounds[at] - offsets[:-1], lengths) + np.arange(int(offsets[-1]))
    nulls = int(len(index) - hit.sum())
    validity = pa.py_buffer(np.packbits(hit, bitorder="little")) if nulls else None
    buffers = [validity, pa.py_buffer(offsets), pa.py_buffer(raw[source])]
    return pa.Array.from_buffers(pa.large_string(), len(index), buffers, null_count=nulls)
