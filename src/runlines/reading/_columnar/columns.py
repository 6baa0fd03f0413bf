"""Columns over several parsed logs, each built straight into output order."""

from __future__ import annotations

import functools
import itertools
import math
import threading
from collections.abc import Callable, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from runlines._encoding import NONFINITE_KEY
from runlines.reading._buffers import compute as pc
from runlines.reading._buffers import (
    from_numpy,
    large_text,
    numpy_of,
    strings,
    text_codes,
    text_take,
    valid_of,
)
from runlines.reading._columnar.blocks import (
    Bools,
    Ints,
    ParsedLog,
    Piece,
    arrow_kind,
    memory_pool,
)
from runlines.reading._rules import (
    FIRST_COLUMNS,
)

NUMPY_TAKE: Final = 8 << 20  # string columns this small are laid out by numpy, not take()
KINDS: Final = {type(None): None, bool: "bool", int: "int", float: "float", str: "str"}


def python_kinds(values: Sequence[Any]) -> set[str | None]:
    """Return the value kinds of Python *values* (None for None), by their distinct types."""
    types = set(map(type, values))
    kinds = {KINDS.get(kind, "other") for kind in types}
    if int in types:
        ints = [value for value in values if type(value) is int]
        if not -(2**63) <= min(ints) <= max(ints) < 2**63:
            kinds.add("bigint")  # exact in an object column, not rounded into floats
    return kinds


def common_type(kinds: set[str | None]) -> Any:
    """Return the Arrow type for values of *kinds*, or None for an object column."""
    kinds.discard(None)
    if kinds == {"int"}:
        return pa.int64()
    if kinds and kinds <= {"int", "float"}:
        return pa.float64()
    if kinds == {"str"}:
        return pa.string()
    return pa.bool_() if kinds == {"bool"} else None


class Numbers:
    """A number or boolean column as numpy values and where they are present.

    Floats hold NaN where missing; ints and bools hold 0 or False there. Where they are
    present may be made on first use (*validity*): a frame of floats never asks.
    """

    __slots__ = ("_valid", "_validity", "values")

    def __init__(
        self,
        values: npt.NDArray[Any],
        valid: Bools | None = None,
        *,
        validity: Callable[[], Bools] | None = None,
    ) -> None:
        self.values = values
        self._valid = valid
        self._validity = validity

    @property
    def valid(self) -> Bools:
        """Return, per row, whether it holds a value."""
        if self._valid is None:
            assert self._validity is not None, "a Numbers needs valid or validity"
            self._valid, self._validity = self._validity(), None
        return self._valid

    def __len__(self) -> int:
        return len(self.values)


class Layout:
    """Where each piece's rows go in the output: one array per piece, -1 for a dropped row.

    Where each piece's kept rows are in output order (copies alone), `taken` says which
    rows of each piece the output takes in turn: its first N rows (an int: slices of the
    piece's columns, nothing reordered), or those of a mask. The positions are
    then made only when asked for.
    """

    __slots__ = ("_offsets", "_positions", "rows", "size", "taken")

    def __init__(
        self,
        size: int,
        positions: list[Ints] | None = None,
        *,
        taken: list[int | Bools] | None = None,
        rows: list[int] | None = None,
    ) -> None:
        self.size = size
        self._positions = positions
        self.taken = taken
        self.rows = rows  # each piece's row count, with `taken`
        self._offsets: list[int] | None = None  # with `taken`: each piece's first place

    @property
    def positions(self) -> list[Ints]:
        """Return, per piece, each row's place in the output (-1: dropped)."""
        if self._positions is None:
            counts = self.rows or []
            self._positions = [self.places(i, np.arange(count)) for i, count in enumerate(counts)]
        return self._positions

    def places(self, piece: int, rows: Ints) -> Ints:
        """Return the output places of rows *rows* of piece number *piece* (-1: dropped),
        without the positions of all its rows where `taken` says them."""
        if self.taken is None:
            return self.positions[piece][rows]
        if self._offsets is None:
            counts = map(self.kept, range(len(self.taken)))
            self._offsets = list(itertools.accumulate(counts, initial=0))
        return places_in(rows, self.taken[piece], self._offsets[piece])

    def kept(self, piece: int) -> int:
        """Return how many rows of piece number *piece* the output takes (with `taken`)."""
        taken = (self.taken or [])[piece]
        return taken if isinstance(taken, int) else int(taken.sum())


class Columns:
    """The columns of several parsed logs, each built straight into output order.

    A piece holds one bucket's rows, so the pieces of a log are not in line order; the output
    has the logs in turn and each log's records in line order.
    """

    def __init__(self, logs: list[ParsedLog]) -> None:
        self.pieces = [piece for log in logs for piece in log.pieces]
        self.num_rows = sum(piece.table.num_rows for piece in self.pieces)
        self.names = column_names(logs)
        self._logs = logs
        self._full: Layout | None = None
        self._built: dict[str, Any] = {}
        self._releasing = threading.Lock()

    @property
    def full(self) -> Layout:
        """Return the layout of all rows, each log's records in line order (made once)."""
        if self._full is None:
            self._full = lay_out(self._logs, None)
        return self._full

    def release(self, name: str) -> None:
        """Drop the pieces' Arrow values of column *name*: the frame that was built from them
        holds them now, and a frame's peak memory is not then the table's and the frame's.

        Column *name* reads as missing afterwards.
        """
        with self._releasing:  # the frame's columns are built (and released) on threads
            self._built.pop(name, None)
            for piece in self.pieces:
                place = piece.places.get(name)
                if place is not None:
                    nulls = pa.nulls(piece.table.num_rows)  # type null: no buffers
                    piece.table = piece.table.set_column(place, name, nulls)
        # the freed pages stay in pyarrow's pool (mimalloc) for the columns built next: giving
        # them back to the system after each column cost more time than it saved memory

    def get(self, name: str) -> Any:
        """Return column *name* over all rows in output order (cached)."""
        if name not in self._built:
            self._built[name] = self.build(name, self.full)
        return self._built[name]

    def matches(self, name: str, wanted: Sequence[str]) -> Bools:
        """Return, per output row, whether text field *name* is one of *wanted*.

        Works piece by piece, without building the column.
        """
        out = np.zeros(self.full.size, dtype=bool)
        choices = strings(list(wanted))
        for piece, positions in zip(self.pieces, self.full.positions, strict=True):
            hit = np.zeros(piece.table.num_rows, dtype=bool)
            column = piece.column(name)
            if column is not None and arrow_kind(column.type) == "str":
                coded = text_codes(column)  # numpy's, without importing pyarrow.compute
                if coded is None:
                    found = pc.is_in(column.cast(pa.string()), value_set=choices)
                    hit = numpy_of(found)  # a null as False
                else:
                    texts, codes = coded
                    for code, text in enumerate(texts):
                        if text in wanted:
                            hit |= codes == code
            rows, values = piece.patches.get(name, ([], []))
            for row, value in zip(rows, values, strict=True):
                hit[row] = isinstance(value, str) and value in wanted
            out[positions] = hit
        return out

    def build(self, name: str, layout: Layout) -> Any:
        """Return column *name* laid out by *layout*.

        Numbers and booleans come as `Numbers`, strings as a pyarrow array, anything else
        (nested values, mixed types) as a numpy object array.
        """
        kinds: set[str | None] = set()
        for piece in self.pieces:
            kinds |= python_kinds(piece.patches.get(name, ((), ()))[1])
            place = piece.places.get(name)
            if place is not None:
                kinds.add(arrow_kind(piece.table.schema.field(place).type))
        kind = common_type(kinds)
        if kind is not None:
            build = self._arrow_column if kind == pa.string() else self._numbers
            try:
                return build(name, kind, layout)
            except (pa.ArrowException, OverflowError):  # an int beyond 64 bits
                pass
        return self._object_column(name, layout)

    def _numbers(self, name: str, kind: Any, layout: Layout) -> Numbers:
        """Scatter each piece's numbers straight into numpy arrays in output order."""
        if layout.taken is not None:
            return self._numbers_in_order(name, kind, layout)
        is_float = pa.types.is_floating(kind)
        # one spare slot at the end takes the dropped rows (position -1): no masks, no copies
        size = layout.size + 1
        values = np.full(size, np.nan) if is_float else np.zeros(size, kind.to_pandas_dtype())
        valid = np.zeros(size, dtype=bool)
        for piece, positions in zip(self.pieces, layout.positions, strict=True):
            arrays = arrow_chunks(piece, name, kind)
            if not arrays:
                continue
            column = pa.chunked_array(arrays, type=kind)
            values[positions] = numpy_of(column)  # NaN, 0 or False where missing
            if column.null_count:
                valid[positions] = valid_of(column)
            else:  # the common case: no bitmap to expand
                valid[positions] = True
        return Numbers(values[:-1], valid[:-1])

    def _numbers_in_order(self, name: str, kind: Any, layout: Layout) -> Numbers:
        """Take each piece's numbers as they are, its kept rows only: pieces in output order.

        Each column is one copy of the Arrow values into numpy (whose arrays pandas may write
        into in place), none reordered.
        """
        is_float = pa.types.is_floating(kind)
        dtype = np.float64 if is_float else kind.to_pandas_dtype()
        values: list[npt.NDArray[Any]] = []
        valid: list[Callable[[], Bools]] = []  # per piece, a maker of its present mask
        for number, (piece, taken) in enumerate(zip(self.pieces, layout.taken or [], strict=True)):
            arrays = arrow_chunks(piece, name, kind)
            if not arrays:
                kept = layout.kept(number)
                values.append(np.full(kept, np.nan) if is_float else np.zeros(kept, dtype))
                valid.append(functools.partial(made_mask, np.zeros(kept, dtype=bool)))
                continue
            column = pa.chunked_array(arrays, type=kind)
            if isinstance(taken, int):
                column = column.slice(0, taken)
            present = validity_of(column)
            if is_float:  # NaN where missing
                numbers = numpy_of(column)
            else:  # ints and bools use their mask now
                mask = present()
                present = functools.partial(made_mask, mask)
                ints = pa.types.is_integer(kind)
                numbers = own_ints(column, mask) if ints else numpy_of(column)
            if isinstance(taken, int):
                # pandas writes into a frame's columns in place: numpy's own, not Arrow's
                values.append(numbers if numbers.flags.writeable else numbers.copy())
                valid.append(present)
            else:
                values.append(numbers[taken])
                valid.append(functools.partial(rows_taken, present, taken))
        if not values:
            return Numbers(np.zeros(0, dtype), np.zeros(0, dtype=bool))
        joined = values[0] if len(values) == 1 else np.concatenate(values)
        validity = functools.partial(joined_masks, valid)
        # a float column's mask is made only when asked for: load() never asks
        return Numbers(joined, validity=validity) if is_float else Numbers(joined, validity())

    def _arrow_column(self, name: str, kind: Any, layout: Layout) -> Any:
        if layout.taken is not None:  # pieces in output order: their kept rows, in turn
            return self._arrow_in_order(name, layout)
        chunks: list[Any] = []
        where: list[Ints] = []
        for piece, positions in zip(self.pieces, layout.positions, strict=True):
            arrays = arrow_chunks(piece, name, kind)
            if arrays:
                chunks.extend(arrays)
                where.append(positions)
        # large_string: what pandas' string dtype holds, so to_pandas() need not copy it again
        wide = pa.large_string()
        if not chunks:
            return pa.nulls(layout.size, wide)
        pool = memory_pool()
        values = pa.chunked_array([large_text(chunk) for chunk in chunks], wide)
        positions = np.concatenate(where)
        if len(positions) == layout.size and (positions == np.arange(layout.size)).all():
            return values
        index = np.full(layout.size, -1, dtype=np.int64)
        kept = positions >= 0
        index[positions[kept]] = np.flatnonzero(kept)
        if sum(chunk.nbytes for chunk in chunks) <= NUMPY_TAKE:
            return text_take(values, index)
        return pc.take(values, from_numpy(index, pa.int64(), valid=index >= 0), memory_pool=pool)

    def _arrow_in_order(self, name: str, layout: Layout) -> Any:
        wide = pa.large_string()
        pool = memory_pool()
        parts: list[Any] = []
        for number, (piece, taken) in enumerate(zip(self.pieces, layout.taken or [], strict=True)):
            arrays = arrow_chunks(piece, name, wide)
            if not arrays:
                parts.append(pa.nulls(layout.kept(number), wide))
                continue
            column = pa.chunked_array([large_text(c) for c in arrays], wide)
            if isinstance(taken, int):
                column = column.slice(0, taken)
            else:
                column = pc.filter(column, from_numpy(taken, pa.bool_()), memory_pool=pool)
            parts.extend(column.chunks)
        return pa.chunked_array(parts, wide)

    def _object_column(self, name: str, layout: Layout) -> Any:
        """Return an object column, placing only the rows that hold a value."""
        out = np.empty(layout.size, dtype=object)  # numpy fills its slots with None
        for number, piece in enumerate(self.pieces):
            column = piece.column(name)
            kind = None if column is None else arrow_kind(column.type)
            if column is not None and kind is not None:
                at = layout.places(number, np.flatnonzero(valid_of(column)))
                values = np.empty(len(at), dtype=object)
                if kind == "other":  # numpy's values, as pandas would hold them
                    values[:] = column.drop_null().to_numpy(zero_copy_only=False)
                else:  # Python's str, int, float and bool, as to_numpy() gives them
                    values[:] = column.drop_null().to_pylist()
                out[at[at >= 0]] = values[at >= 0]
            rows, patched = piece.patches.get(name, ([], []))
            if rows:
                at = layout.places(number, np.asarray(rows, dtype=np.int64))
                out[at[at >= 0]] = object_array(patched)[at >= 0]
        return out


def validity_of(column: Any) -> Callable[[], Bools]:
    """Return a maker of *column*'s present mask: its bitmap is taken now, and unpacked into
    bools (a byte a row) only when called."""
    size = len(column)
    if not column.null_count:
        return lambda: np.ones(size, dtype=bool)
    return functools.partial(valid_of, column)


def made_mask(mask: Bools) -> Bools:
    """Return *mask* (a maker of a mask already made)."""
    return mask


def rows_taken(present: Callable[[], Bools], taken: Bools) -> Bools:
    """Return the rows *taken* of the mask *present* makes."""
    return present()[taken]


def joined_masks(makers: list[Callable[[], Bools]]) -> Bools:
    """Return the masks *makers* make, as one mask."""
    masks = [make() for make in makers]
    return masks[0] if len(masks) == 1 else np.concatenate(masks)


def object_array(values: list[Any]) -> npt.NDArray[np.object_]:
    """Return *values* as a numpy object array, one slot each (a list stays one value)."""
    return np.fromiter(values, dtype=object, count=len(values))


def lay_out(logs: list[ParsedLog], keep: Bools | None) -> Layout:
    """Return where each piece row goes: the logs in turn, each in line order, *keep* rows only."""
    if logs and all(log.in_order is not None for log in logs):
        found = in_order_layout(logs, keep)
        if found is not None:
            return found
    target: list[Ints] = []
    offset = 0
    for log in logs:
        lines = np.concatenate([p.lines for p in log.pieces]) if log.pieces else np.zeros(0, int)
        # each line's rank among the log's rows: a running count, no sort (lines are distinct)
        present = np.zeros(int(lines.max()) + 1 if len(lines) else 0, dtype=np.int64)
        present[lines] = 1
        target.append((np.cumsum(present) - 1)[lines] + offset)
        offset += len(lines)
    where = np.concatenate(target) if target else np.zeros(0, np.int64)
    size = offset
    if keep is not None:
        renumber = np.cumsum(keep) - 1
        where = np.where(keep[where], renumber[where], -1)
        size = int(keep.sum())
    sizes = [p.table.num_rows for log in logs for p in log.pieces]
    return Layout(size, np.split(where, np.cumsum(sizes)[:-1]) if sizes else [])


def places_in(rows: Ints, taken: int | Bools, offset: int) -> Ints:
    """Return the output places of rows *rows* of a piece that the output takes as *taken*
    says (see `Layout`), from *offset* on; -1 for a row it drops."""
    if isinstance(taken, int):
        return np.where(rows < taken, rows + offset, -1)
    return np.where(taken[rows], np.cumsum(taken, dtype=np.int64)[rows] - 1 + offset, -1)


def own_ints(column: Any, present: Bools) -> Ints:
    """Return an int64 column as a numpy array of its own, 0 where missing: one copy of the
    Arrow values (`fill_null` would make a second)."""
    # one chunk as it is: combine_chunks() would copy a slice of it
    chunk = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    if not chunk.null_count:
        return np.array(numpy_of(chunk), dtype=np.int64)
    if chunk.null_count > len(chunk) // 2:  # mostly missing: zeros (pages the system gives
        values = np.zeros(len(chunk), dtype=np.int64)  # untouched), the few values placed
        values[present] = numpy_of(chunk.drop_null())
        return values
    data = np.frombuffer(chunk.buffers()[1], dtype=np.int64)
    return np.where(present, data[chunk.offset : chunk.offset + len(chunk)], 0)


def in_order_layout(logs: list[ParsedLog], keep: Bools | None) -> Layout | None:
    """Return the layout of copies' pieces that takes each one's rows as they are, or None
    where the output needs a superseded row (which a copy stores after the others)."""
    taken: list[int | Bools] = []
    rows: list[int] = []
    offset = 0
    for log in logs:
        size = log.num_rows
        for piece in log.pieces:  # one, or none
            first = log.in_order or 0
            late = log.late if log.late is not None else np.zeros(0, np.int64)
            mine = None if keep is None else keep[offset : offset + size]
            if mine is None or mine.all():
                if first < size:
                    return None  # superseded rows wanted: in line order only by positions
                taken.append(size)
            elif mine[late].any():
                return None
            else:
                early = np.delete(mine, late) if len(late) else mine  # the first rows' keep
                if early.all():
                    taken.append(first)
                else:
                    mask = np.zeros(size, dtype=bool)
                    mask[:first] = early
                    taken.append(mask)
            rows.append(piece.table.num_rows)
        offset += size
    layout = Layout(0, taken=taken, rows=rows)
    layout.size = sum(layout.kept(number) for number in range(len(taken)))
    return layout


def arrow_values(values: list[Any], kind: Any) -> Any:
    """Return Python *values* of one kind as an Arrow array of type *kind*."""
    kinds = set(map(type, values))
    if kinds <= {str, type(None)} and (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        return strings(values, kind)
    exact = {int} if pa.types.is_integer(kind) else {float} if pa.types.is_floating(kind) else set()
    if (exact and kinds <= exact) or (pa.types.is_boolean(kind) and kinds <= {bool}):
        dtype = bool if pa.types.is_boolean(kind) else kind.to_pandas_dtype()
        try:
            return from_numpy(np.asarray(values, dtype=dtype), kind)
        except OverflowError:
            pass  # pyarrow says what does not fit
    return pa.array(values, type=kind)  # None among them, or another kind: pyarrow's rules


def arrow_chunks(piece: Piece, name: str, kind: Any) -> list[Any]:
    """Return column *name* of *piece* as arrays of type *kind*, Python values patched in.

    Returns no arrays when the piece has no value for *name*.
    """
    table = piece.table
    column = piece.column(name)
    rows, values = piece.patches.get(name, ([], []))
    if column is None or arrow_kind(column.type) is None:
        if not rows:
            return []
        column = pa.chunked_array([pa.nulls(table.num_rows, kind)], type=kind)
    elif column.type != kind:
        column = column.cast(kind)
    if rows:
        mask = np.zeros(table.num_rows, dtype=bool)
        mask[rows] = True
        column = pc.replace_with_mask(
            column, from_numpy(mask, pa.bool_()), arrow_values(values, kind)
        )
    return list(column.chunks) if isinstance(column, pa.ChunkedArray) else [column]


def column_names(logs: list[ParsedLog]) -> list[str]:
    """Return the field names, the commonest first, `_nonfinite` left out.

    A field's count is the number of records holding a value (not None) for it; fields as
    common as each other come in the order the logs first hold them (by line, then by place
    in the line), and fields only ever None last, by name. The order is the same whichever
    reader (pyarrow, Python) took a line.
    """
    counts: dict[str, int] = {}
    first: dict[str, tuple[int, int, int]] = {}
    for number, log in enumerate(logs):
        for piece in log.pieces:
            for name, (count, (line, place)) in piece.fields.items():
                counts[name] = counts.get(name, 0) + count
                if count:
                    where = (number, line, place)
                    first[name] = min(first.get(name, where), where)
    counts.pop(NONFINITE_KEY, None)
    held = sorted((n for n in counts if counts[n]), key=lambda n: (-counts[n], first[n]))
    none_only = sorted(n for n in counts if not counts[n])
    return [*FIRST_COLUMNS, *(n for n in [*held, *none_only] if n not in FIRST_COLUMNS)]


def values_at(column: Any, rows: Ints) -> list[Any]:
    if isinstance(column, Numbers):
        values = column.values[rows].tolist()
        return [v if ok else None for v, ok in zip(values, column.valid[rows], strict=True)]
    if isinstance(column, np.ndarray):
        return column[rows].tolist()  # type: ignore[no-any-return]
    taken = column.take(from_numpy(np.asarray(rows, dtype=np.int64), pa.int64()))
    return taken.to_pylist()  # type: ignore[no-any-return]


def as_floats(column: Any) -> npt.NDArray[np.float64]:
    """Return *column* as floats: NaN where missing or not a number."""
    if isinstance(column, Numbers):
        if column.values.dtype == np.float64:
            return column.values
        if column.values.dtype == np.bool_:
            return np.full(len(column), np.nan)
        return np.where(column.valid, column.values, np.nan)
    if isinstance(column, np.ndarray):
        return np.array([number_or_nan(v) for v in column], dtype=np.float64)
    if arrow_kind(column.type) in ("int", "float"):
        return numpy_of(column.cast(pa.float64()))
    return np.full(len(column), np.nan)


def number_or_nan(value: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:  # an int beyond any float
            return math.inf if value > 0 else -math.inf
    return float("nan")
