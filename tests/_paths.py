"""Scenarios played on one path of Run.log, and what a run left: see tests/test_paths_agree.py.

A module of its own, so that a child process without the extension can play them too:
`python -c "import _paths; _paths.main(folder)"` with RUNLINES_NO_SPEEDUPS=1.
"""

from __future__ import annotations

import json
import math
import pickle
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from freezegun import freeze_time
from hypothesis import strategies as st

import runlines._writer
from runlines import Run

START = "2026-05-01T12:00:00Z"
SECRET = "sk-" + "aB3xY9" * 8  # a value redaction must catch on both paths


@contextmanager
def on_path(path: str, cwd: Path) -> Iterator[None]:
    """Open the runs inside on log()'s *path*, "c" or "python": tests/conftest.py's switch.

    In *cwd*, outside any git repository: `run_start` then has no diff of a dirty tree.
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(cwd)
        if path == "python":
            patch.setattr(runlines._writer, "_CWriter", None)
        yield


def c_writes(run: Run) -> int:
    """Return how many records the C fast path wrote for *run* (0 on the Python path)."""
    return int(getattr(run.log, "hits", 0))


# -- scenarios ----------------------------------------------------------------------------------
# A scenario is plain data: which events are sampled, the key sets, then a list of steps. A value
# is a Python value or ("np", dtype, number) for a 0-d numpy value, built when the step runs.


@dataclass(frozen=True)
class Scenario:
    samplers: dict[str, dict[str, Any]]
    steps: list[tuple[Any, ...]]


EVENTS = ["train_step", "eval", "batch", "note"]
KEYS = ["step", "loss", "lr", "done", "split", "tokens", "password", "api_key", "grad_norm"]

finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
# Training code logs one type per field; the odd value of another type is where paths decline.
typed = [
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    finite,
    st.booleans(),
    st.text(alphabet="abcdefxyz -_.0123456789", max_size=12),
    st.tuples(st.just("np"), st.sampled_from(["float32", "float64"]), finite),
    st.tuples(st.just("np"), st.sampled_from(["int64", "int32"]), st.integers(-1000, 1000)),
    st.tuples(st.just("np"), st.just("bool_"), st.booleans()),
]
odd = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf, None, SECRET]),
    st.integers(min_value=2**63, max_value=2**70),  # beyond 64 bits
)
values = st.one_of(*typed, odd)
key_sets = st.tuples(
    st.sampled_from(EVENTS),
    st.dictionaries(
        st.sampled_from(KEYS), st.sampled_from(range(len(typed))), min_size=1, max_size=4
    ),
)
samplers = st.dictionaries(
    st.sampled_from(["batch", "eval"]),
    st.one_of(
        st.fixed_dictionaries({"every": st.integers(1, 4), "aggregate": st.booleans()}),
        st.fixed_dictionaries({"per_second": st.integers(1, 3), "aggregate": st.booleans()}),
    ),
    max_size=1,
)
span_names = st.sampled_from(["forward", "eval", f"upload {SECRET}"])


def fields_of(draw: st.DrawFn, keys: dict[str, int]) -> dict[str, Any]:
    """Values for one record of a key set: of each key's type, one in ten of any other."""
    return {
        key: draw(st.one_of(typed[kind], values) if draw(st.integers(0, 9)) == 0 else typed[kind])
        for key, kind in keys.items()
    }


def span_fields(draw: st.DrawFn) -> dict[str, Any]:
    keys = draw(st.lists(st.sampled_from(["split", "shard", "token"]), unique=True, max_size=2))
    return {key: draw(values) for key in keys}


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    """Logs, spans (nested, with and without fields), ticks of the clock and artifacts."""
    shapes = draw(st.lists(key_sets, min_size=1, max_size=4))
    steps: list[tuple[Any, ...]] = []
    for _ in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["log", "log", "log", "span", "tick", "artifact"]))
        if kind == "log":
            event, keys = draw(st.sampled_from(shapes))
            steps.append(("log", event, fields_of(draw, keys)))
        elif kind == "span":
            inner = draw(st.lists(st.tuples(span_names, st.booleans()), max_size=2))
            steps.append(("span", draw(span_names), span_fields(draw), inner, draw(st.booleans())))
        elif kind == "tick":
            steps.append(("tick", draw(st.sampled_from([0.25, 0.5, 1.0, 2.5]))))
        else:
            steps.append(("artifact", draw(st.sampled_from(["preds", "ckpt"])), draw(values)))
    for event, keys in shapes:  # every key set twice more: the second goes to the C path
        for _ in range(2):
            steps.append(("log", event, fields_of(draw, keys)))
    return Scenario(draw(samplers), steps)


def build(value: Any) -> Any:
    """Return the value a step logs: a 0-d numpy value where the scenario names one."""
    if isinstance(value, tuple) and value and value[0] == "np":
        return np.array(value[2], dtype=getattr(np, value[1]))[()]
    return value


def play(run: Run, scenario: Scenario, frozen: Any) -> None:
    """Run *scenario*'s steps on *run*."""
    for event, options in scenario.samplers.items():
        run.sample(event, **options)
    for step in scenario.steps:
        kind = step[0]
        if kind == "log":
            run.log(step[1], **{key: build(value) for key, value in step[2].items()})
        elif kind == "span":
            _, name, fields, inner, fails = step
            try:
                with run.span(name, **{k: build(v) for k, v in fields.items()}):
                    frozen.tick(0.5)
                    for inner_name, inner_fails in inner:
                        _inner_span(run, inner_name, inner_fails, frozen)
                    if fails:
                        raise KeyError(name)
            except KeyError:
                pass
        elif kind == "tick":
            frozen.tick(step[1])
        else:
            run.artifact(step[1], {"value": repr(build(step[2]))}, step=len(step[1]))


def _inner_span(run: Run, name: str, fails: bool, frozen: Any) -> None:
    try:
        with run.span(name):
            frozen.tick(0.25)
            if fails:
                raise ValueError(name)
    except ValueError:
        pass


# -- running and comparing ----------------------------------------------------------------------


@dataclass
class Outcome:
    """What one path left: the files, byte for byte but normalised, and the run's state."""

    log: bytes
    artifacts: dict[str, bytes]
    state: dict[str, Any]
    warnings: list[tuple[str, str, str, int]]
    c_writes: int


def outcome(folder: Path, scenario: Scenario, path: str, cwd: Path, **options: Any) -> Outcome:
    """Play *scenario* on *path* in *folder* under frozen time and collect what it left."""
    with (
        on_path(path, cwd),
        freeze_time(START) as frozen,
        warnings.catch_warnings(record=True) as shown,
    ):
        warnings.simplefilter("always")
        run = Run("agree", folder, stdout=False, system=False, **options)
        with run:
            play(run, scenario, frozen)
    return Outcome(
        log=normalised(run),
        artifacts={
            str(p.relative_to(run.artifacts_dir)): p.read_bytes()
            for p in sorted(run.artifacts_dir.rglob("*"))
            if p.is_file()
        },
        state=public_state(run),
        warnings=[(w.category.__name__, str(w.message), w.filename, w.lineno) for w in shown],
        c_writes=c_writes(run),
    )


# What legitimately differs between the two paths' `run_start`: which path wrote; and, from a
# child process, the process itself (its pid, argv and the packages it had imported).
PER_PATH = ("writer",)
PER_PROCESS = ("pid", "argv", "packages")


def normalised(run: Run) -> bytes:
    """The log, with the run's random id and `run_start`'s per-path fields made equal."""
    start, *rest = run.path.read_bytes().split(b"\n")
    record = json.loads(start)
    assert record["event"] == "run_start"
    for key in (*PER_PATH, *PER_PROCESS):
        if key in record:
            record[key] = "*"
    start = json.dumps(record, separators=(",", ":")).encode()
    return b"\n".join([start, *rest]).replace(run.id.encode(), b"<id>")


def public_state(run: Run) -> dict[str, Any]:
    """Every public attribute of *run* that is not a method, paths relative to its folder."""
    state = {}
    for name in dir(run):
        if name.startswith("_") or callable(value := getattr(run, name)):
            continue
        if isinstance(value, Path):
            value = value.relative_to(run.directory)
        state[name] = "<id>" if name == "id" else value
    state["directory"] = "<folder>"
    return state


def epoch(i: int) -> list[tuple[Any, ...]]:
    """One epoch of TRAINING: plain, string and numpy records, spans, secrets, a clock tick."""
    return [
        ("log", "train_step", {"step": i, "loss": 1.0 / (i + 1), "lr": 3e-4}),
        ("log", "train_step", {"step": i, "split": "train", "done": i == 11}),
        ("log", "batch", {"step": i, "loss": float(i), "tokens": ("np", "int64", i)}),
        ("log", "eval", {"step": i, "acc": ("np", "float32", 0.5)}),
        ("span", "forward", {}, [("eval", False)], False),
        ("span", "forward", {"split": "val"}, [], i == 5),
        ("log", "note", {"password": "hunter2", "api_key": SECRET, "text": SECRET}),
        ("tick", 0.4),
    ]


TRAINING = Scenario(
    samplers={"batch": {"every": 3, "aggregate": True}, "eval": {"per_second": 1}},
    steps=[
        *(step for i in range(12) for step in epoch(i)),
        ("log", "train_step", {"step": 12, "loss": math.nan, "lr": 3e-4}),  # the NaN alarm
        ("log", "train_step", {"step": 13, "loss": 0.1, "lr": math.inf}),
        ("log", "train_step", {"step": 14, "loss": None, "lr": 3e-4}),
        ("artifact", "final", 14),
        ("log", "batch", {"step": 15, "loss": 2.0, "tokens": 7}),  # owed at close
    ],
)


# Options that change what the paths must do: redaction off, NaN written as null without alarms.
OPTIONS: list[dict[str, Any]] = [{}, {"redact": False}, {"on_nonfinite": "ignore"}]


def main(folder: str) -> None:
    """In a child without the extension: play TRAINING per option set, pickle each Outcome."""
    if runlines._writer._CWriter is not None:
        raise SystemExit("run this with RUNLINES_NO_SPEEDUPS=1: it plays the pure-Python path")
    for index, options in enumerate(OPTIONS):
        found = outcome(
            Path(folder) / str(index), TRAINING, "python", Path(folder).parent, **options
        )
        (Path(folder) / f"{index}.pickle").write_bytes(pickle.dumps(found))
