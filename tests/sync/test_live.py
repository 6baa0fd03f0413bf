"""A run live at its source reads live in its synced copy, and a dead one `died` (docs/sync.md).

Each pass of `sync` writes `<log>.live` beside the copy of a log whose lock the source holds,
and removes it after the run's last lines; the readers' one liveness check (`is_locked`)
takes a fresh marker for a held lock. These tests race passes with the run's end, read the
marker while passes rewrite it, and move the clock (freezegun) past its expiry.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import socket
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import filelock
import pytest
from _sync_checks import Writer, folder_files, folder_markers, store_markers
from freezegun import freeze_time

import runlines
from _logs import T0, line, write
from runlines import _sync
from runlines._layout import lock_held
from runlines._sync import ends, live
from runlines.cli import _sync as command
from runlines.cli import main
from runlines.cli._common import when
from runlines.reading import is_locked, lifecycle, run_status


def _status(log: Path) -> str:
    """Return the status of *log* as `runlines ls` and the dashboard take it (run_status)."""
    return run_status(log, lifecycle(log))


def _cli(*argv: str) -> Any:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(argv)) == 0
    return json.loads(out.getvalue())


def _views(folder: Path, run: str) -> dict[str, str]:
    """Return the status of *run* in *folder* as runs(), `ls --json` and `show --json` state it."""
    frame = runlines.runs(folder)
    (row,) = [row for row in _cli("ls", "--json", str(folder)) if row["run"] == run]
    return {
        "runs()": frame.loc[frame.run == run, "status"].iloc[0],
        "ls": row["status"],
        "show": _cli("show", "--json", str(folder / f"{run}.jsonl"))["status"],
    }


def test_a_live_run_reads_running_in_every_view_of_the_copy_then_ok(
    run_dir: Path, tmp_path: Path
) -> None:
    dest = tmp_path / "copy"
    with runlines.Run("a", run_dir, stdout=False) as run:
        run.log("train_step", step=0, loss=2.0)
        _sync.sync([run_dir], dest)

        assert _views(run_dir, "a") == dict.fromkeys(("runs()", "ls", "show"), "running")
        assert _views(dest, "a") == _views(run_dir, "a")
    _sync.sync([run_dir], dest)

    assert _views(dest, "a") == dict.fromkeys(("runs()", "ls", "show"), "ok")
    assert folder_markers(dest) == {}


def test_the_marker_names_the_source_host_pid_pass_time_and_expiry(
    run_dir: Path, tmp_path: Path
) -> None:
    with runlines.Run("a", run_dir, stdout=False), freeze_time(datetime.fromtimestamp(T0, UTC)):
        report = _sync.sync([run_dir], tmp_path / "copy", live_for_s=30.0)

    (fields,) = folder_markers(tmp_path / "copy").values()
    assert fields["ts"] == T0
    assert fields["expires"] == T0 + 30.0
    assert fields["source"] == str((run_dir / "a.jsonl").absolute())
    assert fields["host"] == socket.gethostname()
    assert fields["pid"] == os.getpid()  # the sync that looked
    assert report.live == ["a.jsonl"]
    assert report.describe().endswith("; 1 log marked live at the source")


def test_a_run_killed_at_the_source_reads_died_after_the_next_pass(tmp_path: Path) -> None:
    source, dest = tmp_path / "runs", tmp_path / "copy"
    writer = Writer(source, "job")
    try:
        writer.start(3)
        writer.wait()
        _sync.sync([source], dest)
        assert _status(dest / "job.jsonl") == "running"
    finally:
        writer.kill()  # SIGKILL: no run_end, the lock freed

    _sync.sync([source], dest)

    assert _status(source / "job.jsonl") == "died"
    assert _status(dest / "job.jsonl") == "died"
    assert folder_markers(dest) == {}


# --- the clock: a marker holds until its expiry, with the skew allowance ---------------------


def _held_log(folder: Path) -> tuple[Path, filelock.FileLock]:
    """Return a log with no run_end and its run lock, taken: a live writer's, as sync sees it."""
    log = write(folder / "a.jsonl", line("run_start", run="a"), line("train_step", run="a"))
    lock = filelock.FileLock(f"{log}.lock")
    lock.acquire()
    return log, lock


def _at(ts: float) -> Any:
    return freeze_time(datetime.fromtimestamp(ts, UTC))


@pytest.mark.parametrize(
    ("offset_s", "alive"),
    [
        (0.0, True),
        (15.0 + live.CLOCK_SKEW_S - 1, True),  # past its expiry, within the skew allowance
        (15.0 + live.CLOCK_SKEW_S + 1, False),  # the watcher stopped: the run reads died
        (-live.CLOCK_SKEW_S + 1, True),  # a reader whose clock is behind the source's
        (-live.CLOCK_SKEW_S - 1, False),  # further behind than any clock error allowed for
    ],
)
def test_a_marker_holds_from_its_pass_to_its_expiry_give_or_take_the_clock_skew(
    tmp_path: Path, offset_s: float, alive: bool
) -> None:
    log, lock = _held_log(tmp_path / "runs")
    try:
        with _at(T0):
            _sync.sync([log.parent], tmp_path / "copy", live_for_s=15.0)
    finally:
        lock.release()
    copy = tmp_path / "copy" / "a.jsonl"

    with _at(T0 + offset_s):
        assert is_locked(copy) is alive
        assert _status(copy) == ("running" if alive else "died")


@pytest.mark.parametrize(
    "data",
    [
        b'{"format": 1, "ts": 1.0, "expi',  # torn: never written so, but read as no marker
        b"[1, 2]",
        b'{"format": 1, "ts": true, "expires": 2e18}',
        b'{"format": 1, "ts": 1.0}',
        b"",
    ],
)
def test_a_marker_that_is_no_marker_counts_for_nothing(tmp_path: Path, data: bytes) -> None:
    log = write(tmp_path / "a.jsonl", line("run_start", run="a"))
    (tmp_path / "a.jsonl.live").write_bytes(data)

    with _at(1.5):
        assert not is_locked(log)


def test_a_watched_idle_run_is_marked_again_each_pass_and_nothing_is_printed(
    run_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, lock = _held_log(run_dir)
    dest = tmp_path / "copy"
    seen: list[dict[str, Any]] = []
    with _at(T0) as clock:

        def sleep(seconds: float) -> None:
            seen.append(folder_markers(dest)["a.jsonl"])
            if len(seen) == 3:
                raise KeyboardInterrupt
            clock.tick(seconds)

        monkeypatch.setattr(command, "_sleep", sleep)
        try:
            assert main(["sync", str(run_dir), str(dest), "--watch", "--interval", "5"]) == 0
        finally:
            lock.release()

    assert [(m["ts"], m["expires"]) for m in seen] == [(T0 + s, T0 + s + 15) for s in (0, 5, 10)]
    assert capsys.readouterr().out.count("\n") == 1  # the first pass's line only


# --- races: a pass and the run's end -----------------------------------------------------------


def _probe_then(monkeypatch: pytest.MonkeyPatch, around: Callable[[Path, bool], None]) -> None:
    """Have sync's probe of a source lock call *around*(log, held) right after it looks."""
    real = lock_held

    def probe(log: Any) -> bool:
        held = real(log)
        around(Path(log), held)
        return held

    monkeypatch.setattr(ends, "lock_held", probe)


def test_a_run_that_ends_before_the_pass_looks_at_its_lock_has_its_run_end_in_the_copy(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pass listed the log before its run_end; its lock is free when looked at."""
    dest = tmp_path / "copy"
    run = runlines.Run("a", run_dir, stdout=False)
    run.log("train_step", step=0, loss=2.0)
    _sync.sync([run_dir], dest)
    real = lock_held

    def probe(log: Any) -> bool:
        run.close()  # between the listing and the look at the lock
        return real(log)

    monkeypatch.setattr(ends, "lock_held", probe)

    _sync.sync([run_dir], dest)

    assert folder_files(dest)["a.jsonl"] == (run_dir / "a.jsonl").read_bytes()
    assert _status(dest / "a.jsonl") == "ok"
    assert folder_markers(dest) == {}


def test_a_run_that_ends_after_the_pass_found_it_live_is_ok_after_the_next_pass(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dest = tmp_path / "copy"
    run = runlines.Run("a", run_dir, stdout=False)
    run.log("train_step", step=0, loss=2.0)
    _probe_then(monkeypatch, lambda log, held: run.close())

    _sync.sync([run_dir], dest)

    assert _status(dest / "a.jsonl") == "running"  # live when the pass looked
    monkeypatch.undo()
    _sync.sync([run_dir], dest)
    assert _status(dest / "a.jsonl") == "ok"
    assert folder_markers(dest) == {}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_passes_racing_the_run_end_never_read_died_and_leave_no_marker(
    tmp_path: Path, seed: int
) -> None:
    """The job ends while passes run back to back; a reader reads the marker meanwhile."""
    source, dest = tmp_path / "runs", tmp_path / "copy"
    marker = dest / "job.jsonl.live"
    torn: list[bytes] = []
    reads = 0
    done, first_read = threading.Event(), threading.Event()

    def read_markers() -> None:
        nonlocal reads
        while not done.is_set():
            with contextlib.suppress(FileNotFoundError):
                data = marker.read_bytes()
                reads += 1
                first_read.set()
                try:
                    json.loads(data)
                except ValueError:
                    torn.append(data)

    writer = Writer(source, "job")
    reader = threading.Thread(target=read_markers)
    try:
        writer.start(random.Random(seed).randint(1, 200))
        writer.wait()
        _sync.sync([source], dest)
        reader.start()
        assert first_read.wait(timeout=60)  # the reader is at it before the passes race the end
        writer.start(random.Random(seed).randint(1, 200))  # logged while the passes run
        writer.finish()
        statuses = set()
        while writer.process.poll() is None:
            _sync.sync([source], dest)
            statuses.add(_status(dest / "job.jsonl"))
        _sync.sync([source], dest)
    finally:
        done.set()
        if reader.is_alive():
            reader.join()
        writer.kill()

    assert statuses <= {"running", "ok"}
    assert _status(dest / "job.jsonl") == "ok"
    assert folder_markers(dest) == {}
    assert folder_files(dest)["job.jsonl"] == (source / "job.jsonl").read_bytes()
    assert reads > 0
    assert torn == []


# --- copies of copies, and a store -----------------------------------------------------------


def test_a_copy_of_a_copy_sends_the_marker_on_as_it_is(run_dir: Path, tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    with runlines.Run("a", run_dir, stdout=False):
        _sync.sync([run_dir], first)
        _sync.sync([first], second)

        assert folder_markers(second) == folder_markers(first) != {}
        assert _status(second / "a.jsonl") == "running"
    _sync.sync([run_dir], first)
    _sync.sync([first], second)

    assert _status(second / "a.jsonl") == "ok"
    assert folder_markers(second) == {}


def test_an_expired_marker_is_not_sent_on(tmp_path: Path) -> None:
    log, lock = _held_log(tmp_path / "runs")
    try:
        with _at(T0):
            _sync.sync([log.parent], tmp_path / "first", live_for_s=15.0)
    finally:
        lock.release()

    with _at(T0 + 15.0 + live.CLOCK_SKEW_S + 1):
        _sync.sync([tmp_path / "first"], tmp_path / "second")

    assert folder_markers(tmp_path / "second") == {}
    assert _status(tmp_path / "second" / "a.jsonl") == "died"


def test_a_store_marks_a_live_run_and_its_readers_read_it_running(
    run_dir: Path, tmp_path: Path, bucket: tuple[Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fs, name = bucket
    url = f"s3://{name}/runs"
    monkeypatch.setenv("RUNLINES_SYNC_CACHE", str(tmp_path / "cache"))
    with runlines.Run("a", run_dir, stdout=False) as run:
        run.log("train_step", step=0, loss=2.0)
        _sync.sync([run_dir], url)

        assert list(store_markers(fs, f"{name}/runs")) == ["a.jsonl"]
        assert runlines.runs(url)["status"].tolist() == ["running"]
    _sync.sync([run_dir], url)

    assert runlines.runs(url)["status"].tolist() == ["ok"]
    assert store_markers(fs, f"{name}/runs") == {}
    assert folder_markers(_sync.cache_folder(url)) == {}


def test_show_says_where_and_when_the_source_was_seen_live(run_dir: Path, tmp_path: Path) -> None:
    dest = tmp_path / "copy"
    with runlines.Run("a", run_dir, stdout=False) as run:
        run.log("train_step", step=0, loss=2.0)
        with freeze_time(datetime.fromtimestamp(T0, UTC)):
            _sync.sync([run_dir], dest)
        with freeze_time(datetime.fromtimestamp(T0 + 5, UTC)):
            shown = _text("show", str(dest / "a.jsonl"))
            at_source = _text("show", str(run_dir / "a.jsonl"))
    seen = f"{socket.gethostname()} as of {when(T0)} (runlines sync's marker)"

    assert [
        line.split(None, 2)[2] for line in shown.splitlines() if line.startswith("live at")
    ] == [seen]
    assert "live at" not in at_source  # its own lock says so; no marker there
    with freeze_time(datetime.fromtimestamp(T0 + 3600, UTC)):  # the marker has expired
        assert "live at" not in _text("show", str(dest / "a.jsonl"))


def _text(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(argv)) == 0
    return out.getvalue()
