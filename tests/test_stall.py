"""Stalls seen from inside: `stall` and `stall_end` records, and the stacks side file."""

from __future__ import annotations

import importlib.util
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from _watching_fakes import manual_watcher
from runlines import Run
from runlines._watching.stall import StallWatch, dump_stacks


def events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


class TestStallWatch:
    def test_once_per_stall_then_once_when_progress_resumes(self) -> None:
        progress = [0]
        said: list[tuple[str, float]] = []
        watch = StallWatch(
            10.0,
            lambda: progress[0],
            lambda idle: said.append(("stall", idle)),
            lambda stalled: said.append(("resume", stalled)),
            now=0.0,
        )

        for now in (1.0, 5.0, 9.9, 10.0, 12.0, 30.0):
            watch.check(now)
        progress[0] = 100
        watch.check(31.0)
        watch.check(40.0)

        assert said == [("stall", 10.0), ("resume", 31.0)]

    def test_progress_that_keeps_moving_is_never_a_stall(self) -> None:
        progress = [0]
        said: list[float] = []
        watch = StallWatch(5.0, lambda: progress[0], said.append, said.append, now=0.0)

        for second in range(1, 60):
            progress[0] += 1
            watch.check(float(second))

        assert said == []

    def test_checks_about_ten_times_per_stall_after(self) -> None:
        watch = StallWatch(60.0, lambda: 0, print, print, now=0.0)

        assert watch.check(0.0) == 5.0
        assert StallWatch(1.0, lambda: 0, print, print, now=0.0).every_s == 0.1


def stacks_of_a_stall(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch, wait: Any, thread_name: str, **options: Any
) -> str:
    """Return the stacks file of a run that stalls while a thread *thread_name* is in *wait*."""
    watcher, clock = manual_watcher(monkeypatch)
    release = threading.Event()
    thread = threading.Thread(target=wait, args=(release,), name=thread_name)
    thread.start()
    try:
        with Run("r", run_dir, stdout=False, system=False, stall_after=10, **options) as run:
            for _ in range(12):
                clock.tick(1.0)
                watcher.run_due()
    finally:
        release.set()
        thread.join()
    stall = next(r for r in events(run.path) if r["event"] == "stall")
    stacks: str = stall["stacks"]
    return (run_dir / stacks).read_text()


def test_dump_stacks_names_every_thread(tmp_path: Path) -> None:
    path = tmp_path / "stacks.txt"

    count = dump_stacks(path)

    text = path.read_text()
    assert count >= 1
    assert '"MainThread"' in text
    assert "test_dump_stacks_names_every_thread" in text


@pytest.mark.usefixtures("fast_path")
class TestRecords:
    def test_stall_record_stacks_file_and_stall_end(
        self, run_dir: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        watcher, clock = manual_watcher(monkeypatch)

        with Run("r", run_dir, stdout=False, system=False, stall_after=30) as run:
            run.log("train_step", step=1)
            for _ in range(40):
                clock.tick(1.0)
                watcher.run_due()
            run.log("train_step", step=2)
            for _ in range(5):  # checks run every 3 s (a tenth of stall_after)
                clock.tick(1.0)
                watcher.run_due()

        names = [r["event"] for r in events(run.path)]
        assert names == ["run_start", "train_step", "stall", "train_step", "stall_end", "run_end"]
        stall = events(run.path)[2]
        assert 30.0 <= stall["idle_s"] <= 33.0
        assert stall["threads"] >= 1
        stacks = run_dir / stall["stacks"]
        assert stacks.parent == run.artifacts_dir
        assert "test_stall_record_stacks_file_and_stall_end" in stacks.read_text()
        assert events(run.path)[4]["stalled_s"] == pytest.approx(42.0, abs=4.0)

    def test_the_runs_own_system_records_are_no_sign_of_life(
        self, run_dir: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        watcher, clock = manual_watcher(monkeypatch)

        class Sampler:
            def start(self, now: float) -> None:
                pass

            def sample(self, now: float) -> dict[str, Any]:
                return {"cpu_percent": 1.0}

        monkeypatch.setattr("runlines._watching.system.SystemSampler", Sampler)

        with Run("r", run_dir, stdout=False, system=1.0, stall_after=10) as run:
            for _ in range(15):
                clock.tick(1.0)
                watcher.run_due()

        names = [r["event"] for r in events(run.path)]
        assert names.count("stall") == 1
        assert "stall_end" not in names
        assert names.count("system") >= 10

    def test_off_by_default(self, run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        watcher, clock = manual_watcher(monkeypatch)

        with Run("r", run_dir, stdout=False, system=False) as run:
            clock.tick(3600.0)
            watcher.run_due()

        assert "stall" not in [r["event"] for r in events(run.path)]

    def test_the_stacks_file_hides_secrets_in_source_lines_and_thread_names(
        self, run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        token = "gh" + "p_" + "A1b2C3d4" * 5  # built here: no token in this file's own text
        password = "hunter2-" + "x9Y8z7"
        source = tmp_path / "waiting.py"
        source.write_text(
            f"def wait(event):\n    event.wait()  # fetch https://bob:{password}@example.com/data\n"
        )
        spec = importlib.util.spec_from_file_location("waiting", source)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        text = stacks_of_a_stall(run_dir, monkeypatch, module.wait, f"push {token}")

        assert "event.wait()  # fetch https://bob:[redacted]@example.com/data" in text
        assert 'push [redacted]"' in text
        assert token not in text
        assert password not in text

    def test_the_stacks_file_is_as_written_when_redaction_is_off(
        self, run_dir: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        token = "gh" + "p_" + "A1b2C3d4" * 5

        text = stacks_of_a_stall(
            run_dir, monkeypatch, threading.Event.wait, f"push {token}", redact=False
        )

        assert f"push {token}" in text

    @pytest.mark.parametrize("bad", [0, -5, "60", True])
    def test_a_bad_stall_after_is_refused(self, run_dir: Path, bad: Any) -> None:
        with pytest.raises(ValueError, match="stall_after must be a number of seconds"):
            Run("r", run_dir, stdout=False, stall_after=bad)


@pytest.mark.usefixtures("fast_path")
class TestStallEndingAtClose:
    def test_a_stall_that_ends_just_before_close_gets_its_stall_end(
        self, run_dir: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        watcher, clock = manual_watcher(monkeypatch)

        with Run("r", run_dir, stdout=False, system=False, stall_after=30) as run:
            for _ in range(40):
                clock.tick(1.0)
                watcher.run_due()
            clock.tick(1.0)
            run.log("train_step", step=2)  # then close at once: no check saw it

        records = events(run.path)
        names = [r["event"] for r in records]
        assert names == ["run_start", "stall", "train_step", "stall_end", "run_end"]
        assert records[3]["stalled_s"] == pytest.approx(41.0, abs=4.0)

    def test_a_stall_still_under_way_at_close_is_closed_by_run_end_alone(
        self, run_dir: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        watcher, clock = manual_watcher(monkeypatch)

        with Run("r", run_dir, stdout=False, system=False, stall_after=30) as run:
            for _ in range(40):
                clock.tick(1.0)
                watcher.run_due()

        assert [r["event"] for r in events(run.path)] == ["run_start", "stall", "run_end"]

    def test_a_check_racing_close_writes_the_stall_end_once_and_before_run_end(
        self, run_dir: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        watcher, clock = manual_watcher(monkeypatch)
        for round_ in range(30):
            with Run(f"r{round_}", run_dir, stdout=False, system=False, stall_after=30) as run:
                for _ in range(40):
                    clock.tick(1.0)
                    watcher.run_due()
                clock.tick(5.0)  # the next check is due: the racing thread may run it
                run.log("train_step", step=2)
                go = threading.Barrier(2)

                def check(go: threading.Barrier = go) -> None:
                    go.wait()
                    for _ in range(50):
                        watcher.run_due()

                racer = threading.Thread(target=check)
                racer.start()
                go.wait()
                run.close()
                racer.join()

            names = [r["event"] for r in events(run.path)]
            assert names == ["run_start", "stall", "train_step", "stall_end", "run_end"], round_
