"""Values to strict JSON lines: safe types, non-finite floats, odd values, the console line."""

from __future__ import annotations

import dataclasses
import enum
import importlib
import json
import math
import shutil
import subprocess
from datetime import UTC, date, datetime
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from _optional import skip_without
from runlines import FieldError, Run, RunlinesWarning
from runlines._encoding import (
    MAX_INLINE_ITEMS,
    encode_line,
    encode_line_safe,
    format_console,
    restore_nonfinite,
)


def strict_loads(line: bytes) -> Any:
    """Parse like a strict JSON parser: NaN and Infinity tokens are refused."""

    def refuse(token: str) -> None:
        msg = f"non-strict token {token}"
        raise ValueError(msg)

    return json.loads(line, parse_constant=refuse)


def roundtrip(record: dict[str, Any]) -> dict[str, Any]:
    line = encode_line(record)
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    return restore_nonfinite(strict_loads(line))


class Color(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Point:
    x: int
    y: float


def test_golden_line_pins_the_format() -> None:
    record = {"ts": 1767225600.0, "event": "train_step", "run": "baseline", "epoch": 3}
    record.update(step=1200, loss=0.412, lr=3e-4)

    assert encode_line(record) == (
        b'{"ts":1767225600.0,"event":"train_step","run":"baseline",'
        b'"epoch":3,"step":1200,"loss":0.412,"lr":0.0003}\n'
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (float("nan"), "NaN"),
        (float("inf"), "Infinity"),
        (float("-inf"), "-Infinity"),
    ],
)
def test_non_finite_float_is_null_with_a_marker(value: float, expected: str) -> None:
    line = encode_line({"event": "x", "loss": value})

    assert strict_loads(line) == {"event": "x", "loss": None, "_nonfinite": {"/loss": expected}}


def test_non_finite_values_are_restored_at_any_depth() -> None:
    record = {"loss": math.inf, "grads": [1.0, math.nan], "m": {"a/b": -math.inf}}

    back = roundtrip(record)

    assert back["loss"] == math.inf
    assert back["grads"][0] == 1.0
    assert math.isnan(back["grads"][1])
    assert back["m"] == {"a/b": -math.inf}
    assert "_nonfinite" not in back


def test_none_stays_none() -> None:
    assert roundtrip({"value": None}) == {"value": None}


def test_numpy_scalars_and_small_arrays_encode_as_numbers() -> None:
    record = {
        "f32": np.float32(0.5),
        "i64": np.int64(7),
        "b": np.bool_(True),
        "arr": np.arange(6).reshape(2, 3),
        "nan": np.float64("nan"),
    }

    back = roundtrip(record)

    assert back["f32"] == 0.5
    assert back["i64"] == 7
    assert back["b"] is True
    assert back["arr"] == [[0, 1, 2], [3, 4, 5]]
    assert math.isnan(back["nan"])


def test_torch_tensors_encode_as_numbers() -> None:
    skip_without("torch")
    import torch

    record = {
        "loss": torch.tensor(0.25),
        "vec": torch.tensor([1.0, 2.0]),
        "half": torch.tensor(0.5, dtype=torch.bfloat16),
        "bad": torch.tensor(float("inf")),
    }

    back = roundtrip(record)

    assert back == {"loss": 0.25, "vec": [1.0, 2.0], "half": 0.5, "bad": math.inf}


@pytest.mark.parametrize("library", ["numpy", "torch"])
def test_large_array_is_refused_pointing_to_artifact(library: str) -> None:
    if library == "torch":
        skip_without("torch")
    value = importlib.import_module(library).zeros(MAX_INLINE_ITEMS + 1)

    with pytest.raises(FieldError, match=r"too large to log inline.*run\.artifact"):
        encode_line({"event": "x", "preds": value})


def test_large_array_error_reaches_the_caller_of_log(run_dir: Path) -> None:
    with Run("r", run_dir, stdout=False) as run, pytest.raises(FieldError, match=r"run\.artifact"):
        run.log("eval", preds=np.zeros(10_000))


def test_standard_python_values_encode_naturally() -> None:
    record = {
        "when": datetime(2026, 5, 1, 12, 0, tzinfo=UTC),
        "day": date(2026, 5, 1),
        "path": PurePosixPath("/ckpt/model.pt"),
        "color": Color.RED,
        "point": Point(1, 2.5),
        "pair": (1, 2),
        "tags": {"b", "a"},
    }

    back = roundtrip(record)

    assert back == {
        "when": "2026-05-01T12:00:00+00:00",
        "day": "2026-05-01",
        "path": "/ckpt/model.pt",
        "color": "red",
        "point": {"x": 1, "y": 2.5},
        "pair": [1, 2],
        "tags": ["a", "b"],
    }


def test_unknown_type_is_its_repr_with_one_warning_per_type() -> None:
    class Opaque:
        def __repr__(self) -> str:
            return "<opaque>"

    with pytest.warns(RunlinesWarning, match="cannot encode a value of type") as caught:
        first = roundtrip({"v": Opaque()})
        second = roundtrip({"v": Opaque()})

    assert first == second == {"v": "<opaque>"}
    assert len(caught) == 1


def test_odd_values_never_make_invalid_json() -> None:
    cyclic: list[Any] = [1]
    cyclic.append(cyclic)
    record = {
        "big": 2**70,
        "neg": -(2**80),
        "surrogate": "a\ud800b",
        "keys": {1: "one", (2, 3): "tuple"},
        "cycle": cyclic,
        "control": "\x00\x1f",
        "zero": -0.0,
    }

    back = roundtrip(record)

    assert back["big"] == 2**70
    assert back["neg"] == -(2**80)
    assert back["surrogate"] == "a\ufffdb"
    assert back["keys"] == {"1": "one", "(2, 3)": "tuple"}
    assert back["cycle"] == [1, "<cycle>"]
    assert back["control"] == "\x00\x1f"
    assert math.copysign(1, back["zero"]) == -1


def test_very_deep_nesting_is_written_as_valid_json() -> None:
    deep: Any = 0
    for _ in range(500):
        deep = [deep]

    line = encode_line({"deep": deep})

    assert strict_loads(line)["deep"][0][0][0] is not None


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


field_names = st.text(min_size=1).filter(lambda name: name != "_nonfinite")  # refused by log()


@given(st.dictionaries(field_names, json_values, max_size=5))
def test_json_values_round_trip_exactly(fields: dict[str, Any]) -> None:
    record = {"event": "x", **fields}

    assert roundtrip(record) == json.loads(json.dumps(record))


@given(st.lists(st.floats(), max_size=8))
def test_any_floats_round_trip_with_non_finite_restored(values: list[float]) -> None:
    back = roundtrip({"values": values})["values"]

    assert len(back) == len(values)
    for got, want in zip(back, values, strict=True):
        assert (math.isnan(got) and math.isnan(want)) or got == want


def test_safe_and_fast_paths_agree_on_plain_records() -> None:
    record = {"event": "x", "step": 3, "loss": 0.5, "name": "a", "nested": {"k": [1, 2]}}

    assert strict_loads(encode_line(record)) == strict_loads(encode_line_safe(record))


def test_nan_loss_passes_jq_and_the_seed_pandas_one_liner(run_dir: Path) -> None:
    jq = shutil.which("jq")
    assert jq is not None, "the jq binary is needed: apt-get install jq (or brew install jq)"
    with Run("baseline", run_dir, stdout=False, on_nonfinite="ignore") as run:
        for epoch in (1, 2):
            run.log("train_step", epoch=epoch, step=epoch * 10, loss=0.5 * epoch)
            run.log("train_step", epoch=epoch, step=epoch * 10 + 1, loss=math.nan)
            run.log("train_step", epoch=epoch, step=epoch * 10 + 2, loss=math.inf)

    checked = subprocess.run([jq, "-c", "."], input=run.path.read_bytes(), capture_output=True)
    df = pd.read_json(run.path, lines=True)
    steps = df[df.event == "train_step"]
    means = steps.groupby("epoch").loss.mean().round(3)

    assert checked.returncode == 0, checked.stderr
    assert means.to_dict() == {1: 0.5, 2: 1.0}


def test_console_line_is_compact_and_aligned() -> None:
    record = {"ts": 0.0, "event": "train_step", "run": "r", "epoch": 3, "loss": 0.41234567}

    line = format_console(record)

    assert line.endswith("train_step   epoch=3 loss=0.412346\n")


def test_console_line_shortens_long_values() -> None:
    line = format_console({"ts": 0.0, "event": "e", "text": "x" * 500, "items": list(range(100))})

    assert "x" * 57 + "..." in line
    assert len(line) < 200


@pytest.mark.parametrize("pure", [False, True], ids=["c", "pure"])
def test_torch_devices_and_dtypes_are_written_as_their_str_without_a_warning(
    run_dir: Path, pure: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    skip_without("torch")
    import torch

    if pure:
        monkeypatch.setattr("runlines._writer._CWriter", None)
    config = {"device": torch.device("cpu"), "dtype": torch.bfloat16, "np": np.dtype("int8")}

    with Run("r", run_dir, stdout=False, config=config) as run:  # filterwarnings=error
        run.log("v", device=torch.device("cuda", 1), dtype=torch.float32)

    start, record = (json.loads(line) for line in run.path.read_text().splitlines()[:2])
    assert start["config"] == {"device": "cpu", "dtype": "torch.bfloat16", "np": "int8"}
    assert (record["device"], record["dtype"]) == ("cuda:1", "torch.float32")


class _Opaque:
    def __repr__(self) -> str:
        return "<opaque>"


@pytest.mark.parametrize("pure", [False, True], ids=["c", "pure"])
def test_runlines_warnings_point_at_the_users_call(
    run_dir: Path, pure: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if pure:
        monkeypatch.setattr("runlines._writer._CWriter", None)
    monkeypatch.setattr("runlines._encoding._warned_types", set())

    with Run("r", run_dir, stdout=False) as run, pytest.warns(RunlinesWarning) as caught:
        run.log("v", thing=_Opaque())  # cannot encode: its repr
        run.log("w", loss=1.0)
        run.log("w", loss="high")  # a change of type
        run.log("x", GradNorm=1.0)  # an alias of grad_norm

    assert len(caught) == 3
    assert {Path(w.filename).name for w in caught} == {Path(__file__).name}


class TestNullInText:
    """A null in a line is looked for in the record's values, not in the text of the line."""

    @pytest.fixture(name="careful_calls")
    def _careful_calls(self, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
        import runlines._encoding

        calls: list[Any] = []
        careful = runlines._encoding.encode_line_safe

        def spy(*args: Any) -> bytes:
            calls.append(args)
            return careful(*args)

        monkeypatch.setattr(runlines._encoding, "encode_line_safe", spy)
        return calls

    def test_names_and_strings_holding_null_take_no_careful_walk(
        self, careful_calls: list[Any]
    ) -> None:
        record = {"event": "nullify", "run": "nullspace", "null_count": 2, "note": "null", "x": 1.5}

        line = encode_line(record)

        assert careful_calls == []
        assert json.loads(line) == record

    def test_a_none_at_any_depth_is_written_as_null_without_a_mark(
        self, careful_calls: list[Any]
    ) -> None:
        record = {"event": "e", "best": None, "hist": {"a": [1, None]}}

        line = encode_line(record)

        assert careful_calls == []
        assert json.loads(line) == record

    @pytest.mark.parametrize(
        ("value", "pointer"),
        [
            ({"loss": math.nan}, "/loss"),
            ({"losses": [0.5, math.inf]}, "/losses/1"),
            ({"eval": {"acc": -math.inf}}, "/eval/acc"),
            ({"loss": np.float32("nan")}, "/loss"),
        ],
    )
    def test_a_non_finite_value_beside_a_null_name_is_still_marked(
        self, value: dict[str, Any], pointer: str
    ) -> None:
        line = encode_line({"event": "nullify", **value})

        assert pointer in strict_loads(line)["_nonfinite"]
