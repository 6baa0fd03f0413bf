"""The C fast path and the pure-Python path of Run write the same files and end in the same state.

The same scripted scenario runs twice under frozen time, once per path: the logs byte for byte
(`run_end` with its counts and span stats, sampled windows and what samplers owe at close, NaN
alarms), the artifacts' side files, the warnings shown (with the line they point at) and the
run's public state (`dropped`, `dropped_by_sink`, ...) must be equal. Only what legitimately
differs is normalised, explicitly: the run's random id and `run_start`'s `writer` (and, against
a child process, its pid, argv and imported packages). Every key set is logged at least twice:
the C path takes a call only from the second record of its key set.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import event as tally

import runlines._writer
from _extensions import REQUIRED
from _paths import OPTIONS, SECRET, TRAINING, Outcome, Scenario, outcome, scenarios

if runlines._writer._CWriter is None:  # there are not two paths to compare
    _REASON = "the C extension is not built (or RUNLINES_NO_SPEEDUPS=1)"
    if REQUIRED:
        raise ImportError(f"{_REASON}; RUNLINES_REQUIRE_SPEEDUPS=1 requires it")
    pytest.skip(_REASON, allow_module_level=True)


def assert_same(on_c: Outcome, on_python: Outcome) -> None:
    """Assert that every part of what the two paths left is equal."""
    assert on_c.log.decode().splitlines() == on_python.log.decode().splitlines()  # a diff
    assert on_c.log == on_python.log
    assert on_c.artifacts == on_python.artifacts
    assert on_c.state == on_python.state
    assert on_c.warnings == on_python.warnings
    assert on_python.c_writes == 0


def agree(tmp_path: Path, scenario: Scenario, **options: Any) -> tuple[Outcome, Outcome]:
    """Play *scenario* on both paths in one process; assert that they left the same."""
    on_c = outcome(tmp_path / "c", scenario, "c", tmp_path, **options)
    on_python = outcome(tmp_path / "python", scenario, "python", tmp_path, **options)

    assert_same(on_c, on_python)
    return on_c, on_python


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(scenario=scenarios())
def test_any_scenario_writes_the_same_files_and_state_on_both_paths(
    tmp_path_factory: pytest.TempPathFactory, scenario: Scenario
) -> None:
    on_c, _ = agree(tmp_path_factory.mktemp("agree"), scenario)

    tally(f"the C path wrote records: {on_c.c_writes > 0}")


@pytest.mark.parametrize("options", OPTIONS)
def test_a_training_loop_writes_the_same_files_and_state_on_both_paths(
    tmp_path: Path, options: dict[str, Any]
) -> None:
    on_c, _ = agree(tmp_path, TRAINING, **options)

    assert on_c.c_writes >= 30  # the C path wrote a good part of the log: two paths compared
    assert (b'"event":"nonfinite"' in on_c.log) == (options.get("on_nonfinite") != "ignore")
    assert (SECRET.encode() in on_c.log) == (options.get("redact") is False)


def test_a_process_without_the_extension_writes_what_the_c_paths_write(tmp_path: Path) -> None:
    """As without a C compiler: spans' `with` protocol is Python's too, chosen at import."""
    here = Path(__file__).resolve().parent
    code = f"import sys; sys.path[:0] = [{str(here)!r}]; import _paths; _paths.main(sys.argv[1])"
    env = {
        **os.environ,
        "RUNLINES_NO_SPEEDUPS": "1",
        "PYTHONPATH": str(Path(runlines.__file__).parents[1]),
    }
    subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "pure")], env=env, check=True, timeout=120
    )

    for index, options in enumerate(OPTIONS):
        on_c = outcome(tmp_path / "c" / str(index), TRAINING, "c", tmp_path, **options)
        pure: Outcome = pickle.loads((tmp_path / "pure" / f"{index}.pickle").read_bytes())

        assert_same(on_c, pure)
        assert on_c.c_writes > 0
