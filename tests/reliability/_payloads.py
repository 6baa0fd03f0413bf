"""Records of known content for the kill trials: the writer logs them, the test recomputes them.

Each kind is a size class: tiny records, several fields, arrays and tensors at the inline limit
(with and without non-finite items), strings at the inline limit and nested values.
"""

from __future__ import annotations

import math
import random
from typing import Any, Final

from runlines._encoding import MAX_INLINE_CHARS, MAX_INLINE_ITEMS

KINDS: Final = ("tiny", "fields", "array", "array_nonfinite", "long_string", "nested")
#: Kinds that need torch or write tens of megabytes a record: --long only.
LONG_KINDS: Final = ("tensor", "huge_string")


def plain(kind: str, seq: int) -> dict[str, Any]:
    """Return the fields of record *seq* of *kind* as plain values, as the readers return them."""
    rng = random.Random(seq)
    if kind == "tiny":
        return {"seq": seq}
    if kind == "fields":
        return {"seq": seq, "loss": rng.random(), "lr": 3e-4, "split": "train", "ok": True}
    if kind in ("array", "tensor"):
        values = [float(rng.randrange(1 << 20)) for _ in range(MAX_INLINE_ITEMS)]
        return {"seq": seq, "values": values}
    if kind == "array_nonfinite":
        values = [rng.random() for _ in range(MAX_INLINE_ITEMS)]
        for index in range(seq % 7, MAX_INLINE_ITEMS, 97):
            values[index] = (math.nan, math.inf, -math.inf)[index % 3]
        return {"seq": seq, "values": values}
    if kind == "long_string":  # up to the inline limit: 2 to 4 bytes a character
        piece = f"αβγ-日本-{seq}-"
        return {
            "seq": seq,
            "text": piece * ((MAX_INLINE_CHARS // len(piece)) - (seq * 7919) % 5_000),
        }
    if kind == "huge_string":  # 32 MiB in strings at the inline limit
        part = f"{seq:08d}" * (MAX_INLINE_CHARS // 8)
        return {"seq": seq, "text": {f"part{i}": part for i in range(336)}}
    if kind == "nested":
        value: Any = [seq, str(seq), None, {"empty": {}, "list": []}]
        for depth in range(30):
            value = {f"level{depth}": value, "n": depth}
        return {"seq": seq, "tree": value}
    msg = f"unknown payload kind {kind!r}"
    raise ValueError(msg)


def logged(kind: str, seq: int) -> dict[str, Any]:
    """Return the fields of record *seq* of *kind* as the writer passes them to log()."""
    fields = plain(kind, seq)
    if kind in ("array", "array_nonfinite"):
        import numpy as np

        fields["values"] = np.array(fields["values"])
    elif kind == "tensor":
        import torch

        fields["values"] = torch.tensor(fields["values"], dtype=torch.float64)
    return fields


def same(expected: Any, got: Any) -> bool:
    """Return whether *got* equals *expected*, NaN equal to NaN and -0.0 told from 0.0."""
    if isinstance(expected, float) and isinstance(got, float):
        if math.isnan(expected):
            return math.isnan(got)
        return expected == got and math.copysign(1, expected) == math.copysign(1, got)
    if isinstance(expected, dict):
        return (
            isinstance(got, dict)
            and expected.keys() == got.keys()
            and all(same(expected[k], got[k]) for k in expected)
        )
    if isinstance(expected, list):
        return (
            isinstance(got, list)
            and len(expected) == len(got)
            and all(same(e, g) for e, g in zip(expected, got, strict=True))
        )
    return type(expected) is type(got) and expected == got
