"""The awkward logs of issue 25's "views agree" suite, and an oracle that reads their truth.

Each case is a folder of logs written with the real `Run` API (a kill -9 is a child process
killed with SIGKILL mid-run; a foreign log is plain `json`). Every record's `ts` comes from a
frozen clock, so durations and gaps are exact. `truth()` reads the files with `json` alone and
applies issue 25's rules (and docs/sync.md's for a synced copy's live-at-source marker), so
that it shares no code with the views it judges.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import pytest
from freezegun import freeze_time

import runlines
from runlines import Run

T0: Final = 1_767_225_600.0  # 2026-01-01T00:00:00Z
NAN: Final = math.nan
INF: Final = math.inf
CASES: Final = ("killed", "rerun", "nonfinite", "noconfig", "foreign", "ranks", "media", "synced")
# The Run options of every awkward run: no background records, no NaN alarm (the suite turns
# warnings into errors), nothing printed.
QUIET: Final[dict[str, Any]] = {"stdout": False, "system": False, "on_nonfinite": "ignore"}

# --- the logs --------------------------------------------------------------------------------

_KILLED_CHILD: Final = textwrap.dedent(
    """
    import sys
    from datetime import UTC, datetime

    from freezegun import freeze_time

    from runlines import Run

    folder, t0 = sys.argv[1], float(sys.argv[2])
    quiet = {"stdout": False, "system": False, "on_nonfinite": "ignore"}
    with freeze_time(datetime.fromtimestamp(t0, UTC)) as clock:
        job = Run("job", folder, config={"lr": 0.1}, **quiet)
        dead = Run("dead", folder, config={"lr": 0.2}, **quiet)
        for step in range(1, 6):
            clock.tick(1)
            job.log("train_step", step=step, loss=0.01 if step > 3 else 1 / step)
            dead.log("train_step", step=step, loss=2 / step)
            if step % 2 == 0:
                job.log("eval", step=step, accuracy=0.95 if step == 4 else step / 10)
        print("ready", flush=True)
        sys.stdin.read()  # killed here, both logs open
    """
)


@contextlib.contextmanager
def _killed_child(script: str, folder: Path) -> Iterator[None]:
    """Run *script* in its own interpreter on *folder* (this runlines, time T0); once it
    says ready, run the with-block, then SIGKILL it."""
    env = {**os.environ, "PYTHONPATH": str(Path(runlines.__file__).parents[1])}
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(folder), str(T0)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )
    assert child.stdout is not None
    try:
        assert child.stdout.readline() == b"ready\n"
        yield
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait()
        child.stdout.close()
        if child.stdin is not None:
            child.stdin.close()
    assert child.returncode == -signal.SIGKILL


def _killed(folder: Path) -> None:
    """`job`: attempt 1 killed at step 5, attempt 2 resumed from step 3 95 s later; `dead`:
    killed at step 5, never resumed. Attempt 1's records past step 3 hold the best loss and
    accuracy, which the resume supersedes.
    """
    with _killed_child(_KILLED_CHILD, folder):
        pass
    with _clock(T0 + 100) as clock, Run("job", folder, resume_step=3, **QUIET) as run:
        for step in range(4, 9):
            clock.tick(1)
            run.log("train_step", step=step, loss=0.9 / step)
            if step % 2 == 0:
                run.log("eval", step=step, accuracy=step / 10)
        clock.tick(1)


def _rerun(folder: Path) -> None:
    """`baseline` with lr=1e-3, finished ok; then the same name launched with lr=1e-2."""
    for lr, start in ((1e-3, T0), (1e-2, T0 + 50)):
        with _clock(start) as clock, Run("baseline", folder, config={"lr": lr}, **QUIET) as run:
            for step in range(1, 5):
                clock.tick(1)
                run.log("train_step", step=step, loss=lr * 100 / step)


def _nonfinite(folder: Path) -> None:
    """`nan`: loss NaN at step 5, +inf for its last two steps, accuracy NaN at the end;
    `short`: three finite steps, so the table of both runs has steps where it has no record.
    """
    with _clock(T0) as clock, Run("nan", folder, **QUIET) as run:
        for step in range(1, 11):
            clock.tick(1)
            loss = NAN if step == 5 else INF if step > 8 else 1 / step
            run.log("train_step", step=step, loss=loss)
            if step % 5 == 0:
                run.log("eval", step=step, accuracy=0.5 if step == 5 else NAN)
    with _clock(T0) as clock, Run("short", folder, **QUIET) as run:
        for step in range(1, 4):
            clock.tick(1)
            run.log("train_step", step=step, loss=3 / step)


def _noconfig(folder: Path) -> None:
    """`tuned`: attempt 1 with a config fails at step 3; attempt 2, no `config=`, ends ok."""
    config = {"lr": 0.1, "optim": {"name": "adam"}}
    with (
        _clock(T0) as clock,
        pytest.raises(RuntimeError, match="out of memory"),
        Run("tuned", folder, config=config, **QUIET) as run,
    ):
        for step in range(1, 4):
            clock.tick(1)
            run.log("train_step", step=step, loss=1 / step)
        raise RuntimeError("out of memory")
    with _clock(T0 + 20) as clock, Run("tuned", folder, **QUIET) as run:
        for step in range(4, 7):
            clock.tick(1)
            run.log("train_step", step=step, loss=1 / step)


def _foreign(folder: Path) -> None:
    """`real`: a runlines run; `metrics.jsonl`: another program's JSON Lines beside it."""
    with _clock(T0) as clock, Run("real", folder, **QUIET) as run:
        for step in range(1, 4):
            clock.tick(1)
            run.log("train_step", step=step, loss=1 / step)
    lines = [json.dumps({"epoch": epoch, "loss": 1 / epoch}) for epoch in (1, 2, 3)]
    (folder / "metrics.jsonl").write_text("\n".join(lines) + "\n")


def _ranks(folder: Path) -> None:
    """`dist`: two ranks as torchrun starts them, both open at once, each its own file, with
    its own losses (a rank > 0 joins the run its rank 0 holds open)."""
    with _clock(T0) as clock:
        with _environ(RANK="0", WORLD_SIZE="2", LOCAL_RANK="0"):
            first = Run("dist", folder, **QUIET)
        with _environ(RANK="1", WORLD_SIZE="2", LOCAL_RANK="1"):
            second = Run("dist", folder, **QUIET)
        with first, second:
            for step in range(1, 5):
                clock.tick(1)
                for rank, run in enumerate((first, second)):
                    run.log("train_step", step=step, loss=(rank + 1) / step)


def _media(folder: Path) -> None:
    """`gallery`: a loss per step, and at every step an image, a histogram (with a NaN), a
    table, a text and an audio clip, whose numbers (width, mean, rows, frames) are no metrics."""
    # imported before the clock: pandas' C code, imported by pyarrow's, breaks on a frozen one
    import numpy as np
    import pandas  # noqa: F401

    pixels = np.zeros((4, 6, 3), dtype=np.uint8)
    with _clock(T0) as clock, Run("gallery", folder, config={"lr": 0.1}, **QUIET) as run:
        for step in range(1, 5):
            clock.tick(1)
            run.log("train_step", step=step, loss=1 / step)
            run.image("samples", pixels + step, step=step, caption=f"step {step}")
            run.histogram("weights", [0.5 * step, 1.0, float("nan")], step=step, bins=4)
            run.table("preds", [{"id": 1, "score": step / 10}], step=step)
            run.text("sample", f"text {step}", step=step)
            run.audio("clip", np.zeros(8), 8000, step=step)


_CRASHED_CHILD: Final = textwrap.dedent(
    """
    import sys
    from datetime import UTC, datetime

    from freezegun import freeze_time

    from runlines import Run

    folder, t0 = sys.argv[1], float(sys.argv[2])
    quiet = {"stdout": False, "system": False, "on_nonfinite": "ignore"}
    with freeze_time(datetime.fromtimestamp(t0, UTC)) as clock:
        run = Run("crashed", folder, config={"lr": 0.3}, **quiet)
        for step in range(1, 4):
            clock.tick(1)
            run.log("train_step", step=step, loss=3 / step)
        print("ready", flush=True)
        sys.stdin.read()  # killed here, the log open
    """
)


def _synced(folder: Path) -> None:
    """Copies that `runlines sync` made (docs/sync.md), read where no writer holds a lock.

    `live` was live at its source at the last pass (a fresh live-at-source marker; its
    records are old, so it reads stalled, as it does at its source); `gone` was live at a pass
    whose marker has expired since (its watcher stopped); `crashed` was killed after a pass
    that found it live, before the next; `done` ended ok before its pass.
    """
    from runlines import _sync

    source = folder.with_name(f"{folder.name}-source")
    with _clock(T0) as clock:
        gone = Run("gone", source, config={"lr": 0.4}, **QUIET)
        for step in range(1, 4):
            clock.tick(1)
            gone.log("train_step", step=step, loss=4 / step)
        _sync.sync([source / "gone.jsonl"], folder, live_for_s=15.0)  # expired long ago
        gone.close()  # at the source only: no pass sends its run_end
        with Run("done", source, config={"lr": 0.5}, **QUIET) as done:
            for step in range(1, 4):
                clock.tick(1)
                done.log("train_step", step=step, loss=5 / step)
        live = Run("live", source, config={"lr": 0.6}, **QUIET)
        for step in range(1, 4):
            clock.tick(1)
            live.log("train_step", step=step, loss=6 / step)
    logs = [source / f"{name}.jsonl" for name in ("live", "crashed", "done")]
    with _killed_child(_CRASHED_CHILD, source):
        _sync.sync(logs, folder, live_for_s=3600.0)  # on the real clock: fresh for an hour
    _sync.sync(logs, folder, live_for_s=3600.0)  # `crashed`'s lock is free: its marker goes
    with _clock(T0 + 20):
        live.close()  # at the source only


_WRITERS: Final = {
    "killed": _killed,
    "rerun": _rerun,
    "nonfinite": _nonfinite,
    "noconfig": _noconfig,
    "foreign": _foreign,
    "ranks": _ranks,
    "media": _media,
    "synced": _synced,
}


def write_cases(root: Path) -> dict[str, Path]:
    """Write every case's logs under *root*, one folder per case; return case -> folder."""
    folders = {}
    for case in CASES:
        folder = folders[case] = root / case
        folder.mkdir(parents=True)
        # Run's notes (continuing a run, a new run's name) go to stderr or warnings: the logs
        # are what the suite judges, not how their writing was announced
        with (
            Path(os.devnull).open("w") as quiet,
            contextlib.redirect_stderr(quiet),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("ignore")
            _WRITERS[case](folder)
    return folders


@contextlib.contextmanager
def _clock(start: float) -> Iterator[Any]:
    with freeze_time(datetime.fromtimestamp(start, UTC)) as clock:
        yield clock


@contextlib.contextmanager
def _environ(**values: str) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


# --- the oracle ------------------------------------------------------------------------------

# Records runlines writes about a run, not what it learned: their numbers are no metrics.
OWN_EVENTS: Final = frozenset(
    {"run_start", "run_end", "span", "system", "warning", "log", "nonfinite", "stall",
     "stall_end", "artifact", "signal", "image", "histogram", "table", "text", "audio"}
)  # fmt: skip
NOT_METRICS: Final = frozenset({"ts", "event", "run", "step", "epoch", "attempt", "rank", "n"})
LOWER: Final = ("loss",)
HIGHER: Final = ("accuracy",)
# Issue 25: "a resumed run's gap between attempts is either always counted or never". The
# oracle takes runs()' documented rule: never. Flip this one constant if the fix chose always.
GAPS_COUNTED: Final = False
RUNLINES_MARKS: Final = frozenset({"run_start", "run_end"})
# docs/sync.md: a synced log's run is live while `<log>.live` holds, from its `ts` to its
# `expires` give or take this much clock skew; a live run is stalled after a minute without
# a record (its records are a second apart: their pace allows a minute).
CLOCK_SKEW_S: Final = 60.0
STALLED_AFTER_S: Final = 60.0


@dataclass
class Attempt:
    """One attempt of a run as its records say: status, first and last ts, config."""

    status: str = "died"  # no run_end, whatever came later
    first_ts: float | None = None
    last_ts: float | None = None
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def duration_s(self) -> float:
        if self.first_ts is None or self.last_ts is None:
            return 0.0
        return self.last_ts - self.first_ts


@dataclass
class Truth:
    """What every view must say of one run (rank 0's file; the other ranks in `ranks`)."""

    run: str
    attempts: list[Attempt]
    last: dict[str, float]  # `<event>.<field>` -> the last value logged, in file order
    best: dict[str, float | None]  # the best kept value, NaN left out; None: none is finite
    # `<event>.<field>` -> {step: "NaN" | "Infinity" | "-Infinity"}, superseded records left out
    nonfinite: dict[str, dict[float, str]]
    # `<event>.<field>` -> {step: value} of the records load() keeps (for compare and query)
    values: dict[str, dict[float, float]]
    ranks: dict[int, dict[str, float]]  # rank -> its last values, rank 0's included

    @property
    def status(self) -> str:
        return self.attempts[-1].status

    @property
    def config(self) -> dict[str, Any]:
        return self.attempts[-1].config

    @property
    def duration_s(self) -> float:
        durations = sum(a.duration_s for a in self.attempts)
        if not GAPS_COUNTED:
            return durations
        firsts = [a.first_ts for a in self.attempts if a.first_ts is not None]
        lasts = [a.last_ts for a in self.attempts if a.last_ts is not None]
        return max(lasts) - min(firsts)


def records(path: Path) -> list[dict[str, Any]]:
    """Return the records of *path* with json alone, each `_nonfinite` value put back."""
    found = []
    for text in path.read_text().splitlines():
        record = json.loads(text)
        for pointer, name in record.pop("_nonfinite", {}).items():
            key = pointer.removeprefix("/")
            if "/" not in key:  # the cases log flat records only
                record[key] = {"NaN": NAN, "Infinity": INF, "-Infinity": -INF}[name]
        found.append(record)
    return found


def is_runlines_log(path: Path) -> bool:
    """Return whether *path* holds a runlines record: a run_start or run_end with a run."""
    return any(r.get("event") in RUNLINES_MARKS and "run" in r for r in records(path))


def truth(folder: Path) -> dict[str, Truth]:
    """Return, per run of *folder*, what its logs say by issue 25's rules."""
    runs: dict[str, Truth] = {}
    for path in sorted(folder.glob("*.jsonl")):
        stem = path.name.removesuffix(".jsonl")
        if ".rank" in stem or not is_runlines_log(path):
            continue
        runs[stem] = _one_run(stem, records(path))
        last = runs[stem].attempts[-1]
        if last.status == "died" and _live_at_source(path):
            ago = time.time() - (last.last_ts or 0.0)
            last.status = "stalled" if ago > STALLED_AFTER_S else "running"
    for path in sorted(folder.glob("*.rank*.jsonl")):
        stem, _, rank = path.name.removesuffix(".jsonl").rpartition(".rank")
        runs[stem].ranks[int(rank)] = _one_run(stem, records(path)).last
    return runs


def _live_at_source(log: Path) -> bool:
    """Return whether the live-at-source marker beside a synced *log* holds now."""
    marker = log.with_name(log.name + ".live")
    if not marker.exists():
        return False
    fields = json.loads(marker.read_bytes())
    return bool(fields["ts"] - CLOCK_SKEW_S <= time.time() <= fields["expires"] + CLOCK_SKEW_S)


def _metrics(record: dict[str, Any]) -> dict[str, float]:
    event = record.get("event")
    if not isinstance(event, str) or event in OWN_EVENTS:
        return {}
    return {
        f"{event}.{name}": value
        for name, value in record.items()
        if type(value) in (int, float) and name not in NOT_METRICS
    }


def direction(key: str) -> str | None:
    """Return 'min' or 'max' for a metric whose name says which way is better, else None."""
    name = key.rsplit(".", 1)[-1]
    if name in LOWER:
        return "min"
    return "max" if name in HIGHER else None


def _one_run(name: str, found: list[dict[str, Any]]) -> Truth:
    attempts: list[Attempt] = []
    last: dict[str, float] = {}
    written: list[tuple[int, str, float, str, float]] = []  # attempt, event, step, key, value
    resumes: list[float] = []
    for record in found:
        event = record.get("event")
        if event == "run_start":
            config = record.get("config")
            before = attempts[-1].config if attempts else {}
            attempts.append(Attempt(config=config if config else before))
            resume = record.get("resume_step")
            resumes.append(math.inf if resume is None else float(resume))
        attempt = attempts[-1]
        ts = float(record["ts"])
        attempt.first_ts = ts if attempt.first_ts is None else attempt.first_ts
        attempt.last_ts = ts
        if event == "run_end":
            attempt.status = record.get("status") or "ok"
        for key, value in _metrics(record).items():
            last[key] = value
            written.append((len(attempts) - 1, str(event), float(record["step"]), key, value))
    # a record is superseded by a later attempt's record of its (event, step), or by a later
    # attempt's resume_step below its step
    owner = {(event, step): k for k, event, step, _, _ in written}
    kept = [
        (key, step, value)
        for k, event, step, key, value in written
        if owner[(event, step)] == k and step <= min([math.inf, *resumes[k + 1 :]])
    ]
    values: dict[str, dict[float, float]] = {}
    for key, step, value in kept:
        values.setdefault(key, {})[step] = value
    best: dict[str, float | None] = {}
    for key, by_step in values.items():
        way = direction(key)
        if way is not None:
            numbers = [v for v in by_step.values() if not math.isnan(v)]
            best[key] = (min if way == "min" else max)(numbers) if numbers else None
    nonfinite = {
        key: {s: _nonfinite_name(v) for s, v in by_step.items() if not math.isfinite(v)}
        for key, by_step in values.items()
    }
    return Truth(name, attempts, last, best, nonfinite, values, {0: dict(last)})


def _nonfinite_name(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"
