"""Arbitrary values, event names and field names: log() never raises for a value, never writes
a line a strict parser refuses, and the readers return what was logged.

What JSON cannot hold comes back as docs/format.md says: tuples and sets become lists (sets
sorted when they can be), keys that are not strings become their str(), lone surrogates become
U+FFFD, a cycle becomes "<cycle>" at its repeat, an int beyond the largest double becomes its
decimal string, and NaN and the infinities come back as floats. Containers deeper than 120
levels become (the start of) their repr. The readers (orjson) return ints beyond 64 bits as
floats, so the round-trip properties keep ints within 64 bits; the write property does not.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import math
import sys
import tempfile
import warnings
import weakref
from collections.abc import Iterator, Mapping
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _payloads import same
from _reliability import examples, read_log
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import runlines
from _optional import skip_without
from runlines import FieldDriftWarning, FieldError, Run, RunlinesWarning
from runlines.fields import RESERVED_FIELDS

# Every test runs on log()'s C fast path and on its pure-Python path (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("fast_path")

_SETTINGS = settings(
    max_examples=examples(40, 600),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
_MAX_NUMBER = int(sys.float_info.max)


@pytest.fixture(autouse=True, scope="module")
def _no_git() -> Iterator[None]:
    """Skip run_start's git probe: two subprocesses per Run, and hypothesis opens many runs."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("runlines._context.git_state", lambda cwd: {})
        yield


@contextlib.contextmanager
def drift_ignored() -> Iterator[None]:
    """Ignore FieldDriftWarning: a random field name can be a known alias ('GradientNorm')."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FieldDriftWarning)
        yield


# -- strategies -------------------------------------------------------------------------------

any_text = st.text(st.characters(exclude_categories=()), max_size=40)  # surrogates included
floats = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([-0.0, 5e-324])
ints_64 = st.integers(min_value=-(2**63), max_value=2**64 - 1)
huge_ints = st.integers() | st.sampled_from([2**64, -(2**63) - 1, 10**400, -(10**309)])
keys = any_text | st.integers() | st.booleans() | st.none() | st.floats(allow_nan=False)


def values(ints: st.SearchStrategy[int]) -> st.SearchStrategy[Any]:
    """Nested values of every kind log() takes, *ints* for the integers."""
    leaves = st.none() | st.booleans() | ints | floats | any_text
    hashable = st.none() | st.booleans() | ints | any_text
    return st.recursive(
        leaves,
        lambda inner: (
            st.lists(inner, max_size=5)
            | st.lists(inner, max_size=5).map(tuple)
            | st.dictionaries(keys, inner, max_size=5)
            | st.frozensets(hashable, max_size=5)
            | st.sets(hashable, max_size=5)
        ),
        max_leaves=25,
    )


field_names = st.text(st.characters(codec="utf-8"), min_size=1, max_size=20).filter(
    lambda name: name not in RESERVED_FIELDS  # utf-8: no lone surrogates, names must stay apart
)


# -- the oracle: what docs/format.md says a value is written as ---------------------------------


def clean_text(text: str) -> str:
    return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)


def written(value: Any, seen: tuple[int, ...] = ()) -> Any:
    """Return *value* as the log holds it, non-finite floats as floats (readers restore them)."""
    if value is None or isinstance(value, (bool, float)):
        return value
    if isinstance(value, int):
        return value if -_MAX_NUMBER <= value <= _MAX_NUMBER else str(value)
    if isinstance(value, str):
        return clean_text(value)
    if id(value) in seen:
        return "<cycle>"
    inner = (*seen, id(value))
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out[clean_text(key if isinstance(key, str) else str(key))] = written(item, inner)
        return out
    if isinstance(value, (set, frozenset)):
        try:
            items = sorted(value)
        except TypeError:
            items = list(value)
        return [written(item, inner) for item in items]
    return [written(item, inner) for item in value]


def logged_back(path: Path, event: str) -> list[dict[str, Any]]:
    """Return the fields of *path*'s records of *event*, as iter_events gives them."""
    records = [r for r in runlines.iter_events(path) if r["event"] == event]
    return [{k: v for k, v in r.items() if k not in ("ts", "event", "run")} for r in records]


def _plain(value: Any) -> Any:
    """Return a DataFrame cell as a Python value: numpy scalars unwrapped, missing as None."""
    if value is None or value is getattr(__import__("pandas"), "NA", None):
        return None
    if hasattr(value, "item") and not isinstance(value, (list, dict)):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return math.nan
    return value


def same_cell(expected: Any, cell: Any) -> bool:
    """Compare a logged value with load()'s cell: a frame cannot tell None from a missing NaN."""
    got = _plain(cell)
    if expected is None:
        return got is None or (isinstance(got, float) and math.isnan(got))
    return same(expected, got)


# -- properties ---------------------------------------------------------------------------------


@_SETTINGS
@given(fields=st.dictionaries(field_names, values(huge_ints), min_size=1, max_size=4))
def test_any_value_is_written_as_one_strict_json_line(fields: dict[str, Any]) -> None:
    with (
        tempfile.TemporaryDirectory() as tmp,
        drift_ignored(),
        Run("r", tmp, stdout=False, redact=False, on_nonfinite="ignore") as run,
    ):
        for _ in range(2):  # the second is the C path's, if on and the values are plain
            run.log("v", **fields)

        records, tail = read_log(run.path)  # json.loads refusing NaN, and orjson, on every line
        assert tail == b""
        from runlines._encoding import restore_nonfinite

        for record in records[1:3]:
            fields_back = restore_nonfinite(record)
            assert same(written(fields), {k: fields_back[k] for k in fields_back if k in fields})


@_SETTINGS
@given(records=st.lists(st.dictionaries(field_names, values(ints_64), max_size=4), max_size=3))
def test_what_was_logged_is_what_iter_events_and_load_return(
    records: list[dict[str, Any]],
) -> None:
    # Field names get a per-record prefix: one record's fields are its own columns in load().
    # Each record is logged twice: the second of its key set is the C path's, if on.
    fields = [{f"r{i}_{k}": v for k, v in record.items()} for i, record in enumerate(records)]
    fields = [one for one in fields for _ in range(2)]
    with tempfile.TemporaryDirectory() as tmp:
        with (
            drift_ignored(),
            Run("r", tmp, stdout=False, redact=False, on_nonfinite="ignore") as run,
        ):
            for one in fields:
                run.log("v", **one)

        back = logged_back(run.path, "v")
        assert len(back) == len(fields)
        for one, got in zip(fields, back, strict=True):
            assert same(written(one), got)
        if not fields:
            return
        frame = runlines.load(run.path, event="v")
        assert len(frame) == len(fields)
        for row, one in enumerate(fields):
            for key, value in one.items():
                if key not in frame.columns:  # the event filter drops a field that is all None
                    assert value is None, key
                    continue
                assert same_cell(written(value), frame[key].iloc[row]), key


@_SETTINGS
@given(
    fields=st.dictionaries(
        field_names | st.sampled_from(["password", "api_key", "token", "note"]),
        values(huge_ints) | st.sampled_from(["Bearer " + "a" * 30, "sk-" + "aB3" * 16]),
        min_size=1,
        max_size=4,
    )
)
def test_with_redaction_any_value_is_still_one_strict_json_line(fields: dict[str, Any]) -> None:
    with (
        tempfile.TemporaryDirectory() as tmp,
        drift_ignored(),
        Run("r", tmp, stdout=False, on_nonfinite="ignore") as run,
    ):
        for _ in range(2):  # the second is the C path's, if on and the values allow it
            run.log("v", **fields)

        records, tail = read_log(run.path)
        assert tail == b""
        assert len(records) == 3
        assert {**records[2], "ts": records[1]["ts"]} == records[1]


@_SETTINGS
@given(
    event=any_text | st.integers() | st.none() | st.binary(max_size=5) | st.lists(st.integers()),
    names=st.lists(any_text, max_size=4, unique=True),
)
def test_event_and_field_names_either_raise_clearly_or_round_trip(
    event: Any, names: list[str]
) -> None:
    fields = {name: index for index, name in enumerate(names)}
    refused = event == "" or "" in fields or bool(set(fields) & RESERVED_FIELDS)
    with (
        tempfile.TemporaryDirectory() as tmp,
        Run("r", tmp, stdout=False, redact=False, on_nonfinite="ignore") as run,
    ):
        if not isinstance(event, str):
            with pytest.raises(TypeError, match="event name must be a str"):
                run.log(event, **fields)
            return
        if refused:
            with pytest.raises(FieldError, match=r"is empty|is reserved"):
                run.log(event, **fields)
            return
        with drift_ignored():
            run.log(event, **fields)
            run.log(event, **fields)  # the C path's, if on

        back = [r for r in runlines.iter_events(run.path) if r["event"] != "run_start"]
    cleaned: dict[str, int] = {}
    for name, index in fields.items():
        cleaned[clean_text(name)] = index  # two names that differ only by lone surrogates merge
    for record in back[:2]:
        assert record["event"] == clean_text(event)
        assert {k: v for k, v in record.items() if k not in ("ts", "event", "run")} == cleaned


# -- values a property does not reach -----------------------------------------------------------


def test_cycles_are_written_as_a_marker_at_their_repeat(run_dir: Path) -> None:
    looped: list[Any] = [1]
    looped.append(looped)
    mapping: dict[str, Any] = {"a": 1}
    mapping["self"] = mapping
    mapping["list"] = [mapping, looped]

    with Run("r", run_dir, stdout=False, redact=False) as run:
        run.log("v", looped=looped, mapping=mapping)
    with Run("r2", run_dir, stdout=False) as redacted:
        redacted.log("v", looped=looped, mapping=mapping)

    assert logged_back(run.path, "v") == [
        {
            "looped": [1, "<cycle>"],
            "mapping": {"a": 1, "self": "<cycle>", "list": ["<cycle>", [1, "<cycle>"]]},
        }
    ]
    read_log(redacted.path)


@pytest.mark.parametrize("redact", [False, True], ids=["plain", "redacted"])
@pytest.mark.parametrize("depth", [50, 119, 121, 300, 5_000, 200_000])
def test_deep_nesting_never_raises_and_stays_one_line(
    run_dir: Path, depth: int, redact: bool
) -> None:
    as_list: list[Any] = []
    as_dict: dict[str, Any] = {}
    for _ in range(depth):
        as_list, as_dict = [as_list], {"k": as_dict}

    with Run("r", run_dir, stdout=False, redact=redact) as run:
        run.log("v", as_list=as_list, as_dict=as_dict)

    records, tail = read_log(run.path)
    assert tail == b""
    assert [r["event"] for r in records] == ["run_start", "v", "run_end"]


class Color(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Point:
    x: float
    y: list[int]


def test_documented_conversions_come_back_as_documented(run_dir: Path) -> None:
    when = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
    with Run("r", run_dir, stdout=False, redact=False, on_nonfinite="ignore") as run:
        run.log(
            "v",
            np_scalar=np.float32(0.5),
            np_int=np.int64(-3),
            np_array=np.array([[1.0, np.nan], [np.inf, -0.0]]),
            when=when,
            day=date(2026, 5, 1),
            path=Path("/data/x"),
            color=Color.RED,
            point=Point(1.5, [1, 2]),
            mixed_set={1, "a"},
            tuple_key={(1, 2): "t"},
            huge=10**400,
        )

    (got,) = logged_back(run.path, "v")
    assert same(
        got,
        {
            "np_scalar": 0.5,
            "np_int": -3,
            "np_array": [[1.0, math.nan], [math.inf, -0.0]],
            "when": "2026-05-01T12:00:00+00:00",
            "day": "2026-05-01",
            "path": "/data/x",
            "color": "red",
            "point": {"x": 1.5, "y": [1, 2]},
            "mixed_set": written({1, "a"}),
            "tuple_key": {"(1, 2)": "t"},
            "huge": str(10**400),
        },
    )


class _BadOrder:
    def __lt__(self, other: object) -> bool:
        raise ValueError("no order")

    def __hash__(self) -> int:
        return id(self)


class _BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def _hostile_objects() -> dict[str, Any]:
    skip_without("torch")
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's notes on sparse and nested tensors
        return _hostile_objects_of(torch)


def _hostile_objects_of(torch: Any) -> dict[str, Any]:
    return {
        "unorderable_set": {_BadOrder(), _BadOrder()},
        "broken_repr": _BadRepr(),
        "numpy_ufunc": np.add,
        "numpy_dtype": np.dtype("float32"),
        "numpy_object_array": np.array([object(), 1], dtype=object),
        "numpy_structured": np.zeros(2, dtype=[("a", "i4")]),
        "numpy_datetime": np.datetime64("NaT"),
        "meta_tensor": torch.empty(3, device="meta"),
        "sparse_tensor": torch.sparse_coo_tensor([[0]], [1.0], (2,)),
        "nested_tensor": torch.nested.nested_tensor([torch.ones(2), torch.ones(3)]),
        "complex_tensor": torch.tensor([1 + 2j]),
        "bfloat16_tensor": torch.tensor([1.5, math.nan], dtype=torch.bfloat16),
        "torch_size": torch.Size([2, 3]),
        "torch_dtype": torch.float32,
        "module": torch.nn.Linear(2, 2),
        "bytes": b"\xff\x00",
        "complex": 1j,
        "generator": (i for i in range(2)),
        "type": int,
    }


@pytest.mark.parametrize("redact", [False, True], ids=["plain", "redacted"])
def test_hostile_objects_never_make_log_raise(run_dir: Path, redact: bool) -> None:
    objects = _hostile_objects()

    with Run("r", run_dir, stdout=False, redact=redact) as run, warnings.catch_warnings():
        warnings.simplefilter("ignore", RunlinesWarning)  # "logged as its repr()", once per type
        for name, value in objects.items():
            run.log("v", **{name: value})
        run.log("v", **objects)

    records, tail = read_log(run.path)
    assert tail == b""
    assert [r["event"] for r in records].count("v") == len(objects) + 1


def test_an_array_over_the_inline_limit_is_refused_at_the_call_and_the_run_goes_on(
    run_dir: Path,
) -> None:
    from runlines._encoding import MAX_INLINE_ITEMS

    with Run("r", run_dir, stdout=False) as run:
        run.log("v", at_limit=np.zeros(MAX_INLINE_ITEMS))
        with pytest.raises(FieldError, match=r"run\.artifact"):
            run.log("v", over=np.zeros(MAX_INLINE_ITEMS + 1))
        with pytest.raises(FieldError, match=r"run\.artifact"):
            run.log("v", nested={"deep": [np.zeros(MAX_INLINE_ITEMS + 1)]})
        run.log("v", after=1)

    assert [len(r) for r in logged_back(run.path, "v")] == [1, 1]


class _UnresolvableConfig(Mapping[str, Any]):
    """An OmegaConf-like config whose one entry holds an unresolvable ${...}."""

    def __getitem__(self, key: str) -> Any:
        if key == "lr":
            return 0.1
        raise KeyError(f"unresolvable interpolation ${{{key}}}")

    def __iter__(self) -> Iterator[str]:
        return iter(["lr", "data_dir"])

    def __len__(self) -> int:
        return 2


class _BadStr:
    def __str__(self) -> str:
        raise ValueError("no str")

    __repr__ = __str__

    def __hash__(self) -> int:
        return 1


class _Gone:
    pass


def _broken_values() -> dict[str, Any]:
    skip_without("torch")
    import torch

    gone = _Gone()
    proxy = weakref.proxy(gone)
    del gone
    return {
        "config": _UnresolvableConfig(),
        "proxy": proxy,
        "bad_key": {_BadStr(): 1},
        "dtype": np.dtype("float32"),
        "meta": torch.tensor(1.0, device="meta"),
    }


@pytest.mark.parametrize("where", ["log", "config", "aggregate", "span"])
def test_values_whose_conversion_raises_are_written_never_raised(run_dir: Path, where: str) -> None:
    values = _broken_values()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RunlinesWarning)  # "logged as its repr()"
        config = values if where == "config" else None
        with Run("r", run_dir, stdout=False, config=config) as run:
            if where == "aggregate":
                run.sample("v", every=2, aggregate=True)
            for _ in range(2):
                if where == "span":
                    with run.span("eval", **values):
                        pass
                elif where != "config":
                    run.log("v", **values)

    records, tail = read_log(run.path)
    assert tail == b""
    event = {"log": "v", "aggregate": "v", "span": "span", "config": "run_start"}[where]
    written = [r for r in records if r["event"] == event][-1]
    fields = written["config"] if where == "config" else written
    assert fields["config"] == {"lr": 0.1, "data_dir": AnyText("KeyError")}
    assert fields["proxy"] == AnyText("weakproxy")
    assert fields["bad_key"] == {"<unrepresentable _BadStr key>": 1}
    assert fields["dtype"] == "float32"
    assert fields["meta"] == AnyText("meta")


class AnyText(str):
    """Equal to any str that contains this text."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and str.__contains__(other, str(self))

    __hash__ = str.__hash__


@pytest.mark.parametrize(
    ("value", "what"),
    [
        (list(range(100_000)), "a list of 100,000 items"),
        (tuple(range(1001)), "a tuple of 1,001 items"),
        (set(range(1001)), "a set of 1,001 items"),
        ("x" * 5_000_000, "a string of 5,000,000 characters"),
        ({"deep": ["y" * 100_001]}, "a string of 100,001 characters"),
    ],
    ids=["list", "tuple", "set", "string", "nested"],
)
def test_a_sequence_or_string_over_the_inline_limit_is_refused_on_every_path(
    run_dir: Path, value: Any, what: str
) -> None:
    config = {"vocab": list(range(5000))}
    with drift_ignored(), Run("r", run_dir, stdout=False, config=config) as run:
        run.log("v", x=1)  # a plain plan: the big value arrives where a number was
        run.log("w", x="short")  # a plan with a string
        for event in ("v", "w", "new"):
            with pytest.raises(FieldError, match=rf"{what}.*run\.artifact\(name, value\)"):
                run.log(event, x=value)
        with pytest.raises(FieldError, match=r"run\.artifact"), run.span("s", x=value):
            pass
        run.log("v", x=2)

    assert [r["x"] for r in logged_back(run.path, "v")] == [1, 2]
    assert [r["x"] for r in logged_back(run.path, "w")] == ["short"]


def test_values_at_the_inline_limit_are_written(run_dir: Path) -> None:
    from runlines._encoding import MAX_INLINE_CHARS, MAX_INLINE_ITEMS

    with Run("r", run_dir, stdout=False) as run:
        for _ in range(2):
            run.log("v", items=list(range(MAX_INLINE_ITEMS)), text="t" * MAX_INLINE_CHARS)

    assert len(logged_back(run.path, "v")) == 2


def test_a_config_mapping_with_an_unreadable_entry_opens_the_run(run_dir: Path) -> None:
    with Run("r", run_dir, stdout=False, config=_UnresolvableConfig()) as run:
        run.log("v", x=1)

    records, _ = read_log(run.path)
    assert records[0]["config"] == {"lr": 0.1, "data_dir": AnyText("unresolvable")}
