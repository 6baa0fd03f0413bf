"""SIGKILL at random points: no acknowledged record is lost and only the last line can be torn.

A writer acknowledges each record on a pipe after `log()` returned; the test kills it with
SIGKILL after a random number of acknowledgements (a seeded random.Random), then reads the log
strictly, with `iter_events` and with `load`, and opens the run again as a restarted job would.
"""

from __future__ import annotations

import json
import os
import random
import signal
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _payloads import KINDS, LONG_KINDS, plain, same
from _reliability import read_log, strict_loads
from _zygote import Outcome, Zygote

import runlines
from runlines import Run, RunlinesWarning
from runlines._encoding import restore_nonfinite
from runlines.reading import run_status

# The most acknowledgements a trial waits for before the kill, per kind: bigger records, fewer.
_MAX_ACKS = {
    "tiny": 2000,
    "fields": 1000,
    "array": 120,
    "array_nonfinite": 80,
    "long_string": 12,
    "nested": 300,
    "tensor": 100,
    "huge_string": 3,
}


@dataclass(frozen=True)
class Trial:
    kind: str
    fsync: bool
    kill_after: int  # acknowledgements read before the kill


def plan_trials(count: int, seed: int, kinds: tuple[str, ...]) -> list[Trial]:
    """Return *count* trials cycling through *kinds* and fsync on/off, kill points at random."""
    rng = random.Random(seed)
    combos = [(kind, fsync) for kind in kinds for fsync in (False, True)]
    trials = []
    for index in range(count):
        kind, fsync = combos[index % len(combos)]
        most = _MAX_ACKS[kind] // (10 if fsync else 1)  # a disk flush per record is slow
        trials.append(Trial(kind, fsync, rng.randint(0, max(most, 1))))
    return trials


@pytest.fixture(name="no_git")
def _no_git(monkeypatch: pytest.MonkeyPatch) -> None:
    """Skip the git probe of run_start in this process: two subprocesses per Run otherwise."""
    monkeypatch.setattr("runlines._context.git_state", lambda cwd: {})


def _reader_warnings(path: Path) -> Iterator[tuple[str, Any]]:
    """Yield (reader, result) for iter_events and load, each with the warnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        events = list(runlines.iter_events(path))
    yield "iter_events", (events, [str(w.message) for w in caught if w.category is RunlinesWarning])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frame = runlines.load(path)
    yield "load", (frame, [str(w.message) for w in caught if w.category is RunlinesWarning])


def check_killed_log(path: Path, trial: Trial, outcome: Outcome) -> bool:
    """Assert what a log killed by SIGKILL must be; return whether its last line was torn."""
    assert os.WIFSIGNALED(outcome.status), f"writer ended by itself: status {outcome.status}"
    assert os.WTERMSIG(outcome.status) == signal.SIGKILL
    if not path.exists():  # killed while Run(...) started: nothing was acknowledged
        assert outcome.acked == -1
        return False
    records, tail = read_log(path)  # every complete line parses strictly
    if not records:  # killed before run_start was whole
        assert outcome.acked == -1
        return tail != b""
    assert records[0]["event"] == "run_start"
    assert records[0]["pid"] == outcome.pid
    recs = [restore_nonfinite(r) for r in records[1:]]
    assert all(r["event"] == "rec" for r in recs), "no run_end after SIGKILL"
    seqs = [r["seq"] for r in recs]
    assert seqs == list(range(len(seqs))), "records lost, repeated or reordered"
    assert len(seqs) > outcome.acked, f"acknowledged seq {outcome.acked} is missing"
    for record in recs:
        fields = {k: v for k, v in record.items() if k not in ("ts", "event", "run")}
        assert same(plain(trial.kind, record["seq"]), fields), f"seq {record['seq']} changed"
    torn = tail != b""
    for reader, (result, said) in _reader_warnings(path):
        assert len(result) == len(records), reader
        if torn:
            assert len(said) == 1, f"{reader} gave no single warning for the torn line: {said}"
            assert f"line {len(records) + 1}" in said[0]
        else:
            assert said == [], reader
    assert run_status(path, runlines.reading.lifecycle(path)) == "died"
    return torn


def check_restart(path: Path, torn: bool) -> None:
    """Open the killed run again: the next attempt appends whole lines after a torn fragment."""
    started = path.exists() and bool(read_log(path)[0])  # a whole run_start was written
    with Run("r", path.parent, stdout=False) as run:
        run.log("resumed", step=1)
    assert run.attempt == (2 if started else 1)
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""
    bad = []
    for line in lines[:-1]:
        try:
            strict_loads(line)
        except ValueError:
            bad.append(line)
    assert len(bad) == (1 if torn else 0), "only the torn fragment may fail to parse"
    assert [json.loads(x)["event"] for x in lines[-4:-1]] == ["run_start", "resumed", "run_end"]


@pytest.mark.usefixtures("no_git", "fast_path")  # the children follow fast_path too
@pytest.mark.parametrize(
    ("count", "seed", "kinds"),
    [
        pytest.param(30, 20260501, KINDS, id="30-trials"),
        pytest.param(300, 20260502, KINDS + LONG_KINDS, id="300-trials", marks=pytest.mark.long),
    ],
)
def test_sigkill_at_random_points_loses_no_acknowledged_record(
    tmp_path: Path, count: int, seed: int, kinds: tuple[str, ...]
) -> None:
    zygote = Zygote("_kill_writer.py", *(["--torch"] if "tensor" in kinds else []))
    torn = 0
    try:
        for index, trial in enumerate(plan_trials(count, seed, kinds)):
            directory = tmp_path / f"trial{index}"
            spec = {"dir": str(directory), "name": "r", "kind": trial.kind, "fsync": trial.fsync}
            outcome = zygote.run(spec, trial.kill_after)
            was_torn = check_killed_log(directory / "r.jsonl", trial, outcome)
            check_restart(directory / "r.jsonl", was_torn)
            torn += was_torn
    finally:
        zygote.close()
    print(f"{count} trials, {torn} with a torn last line")


def test_torn_last_line_is_skipped_with_a_warning_by_every_reader(tmp_path: Path) -> None:
    """What a kill in the middle of a write leaves: a prefix of a line and no newline."""
    with Run("r", tmp_path, stdout=False) as run:
        for step in range(3):
            run.log("step", step=step)
    whole = run.path.read_bytes()
    last = whole.rstrip(b"\n").rsplit(b"\n", 1)[1]
    run.path.write_bytes(whole[: -len(last) - 1] + last[: len(last) // 2])

    for reader, (result, said) in _reader_warnings(run.path):
        assert len(result) == 4, reader  # run_start and the three steps
        assert len(said) == 1, reader
        assert "line 5" in said[0], reader
