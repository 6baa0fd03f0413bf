"""System metrics: the sampler's fields, the GPUs a process uses, and `system` records."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from _watching_fakes import FakeNvml, fake_proc, manual_watcher
from runlines import Run
from runlines._watching import describe_gpus, system, thread
from runlines._watching.system import SystemSampler, gpus_in_use


def records(path: Path, event: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [record for record in lines if record["event"] == event]


class TestGpusInUse:
    def test_every_gpu_when_nothing_says_which(self) -> None:
        assert gpus_in_use({}) is None

    def test_cuda_visible_devices_in_cuda_order(self) -> None:
        assert gpus_in_use({"CUDA_VISIBLE_DEVICES": "3,1"}) == [(0, "3"), (1, "1")]

    def test_local_rank_picks_its_visible_gpu(self) -> None:
        env = {"CUDA_VISIBLE_DEVICES": "4,5,6,7", "LOCAL_RANK": "2"}

        assert gpus_in_use(env) == [(2, "6")]

    def test_local_rank_alone_is_that_gpu(self) -> None:
        assert gpus_in_use({"LOCAL_RANK": "1"}) == [(1, "1")]

    def test_one_visible_gpu_per_rank_is_that_gpu(self) -> None:
        env = {"CUDA_VISIBLE_DEVICES": "GPU-aaaa-5", "LOCAL_RANK": "5"}

        assert gpus_in_use(env) == [(0, "GPU-aaaa-5")]

    def test_empty_or_invalid_entries_end_the_list_as_cuda_does(self) -> None:
        assert gpus_in_use({"CUDA_VISIBLE_DEVICES": ""}) == []
        assert gpus_in_use({"CUDA_VISIBLE_DEVICES": "0,-1,2"}) == [(0, "0")]


class TestSampler:
    def test_process_and_host_fields_from_procfs(self, tmp_path: Path) -> None:
        cpu = iter([10.0, 12.5])
        sampler = SystemSampler(
            proc=str(fake_proc(tmp_path)), nvml=lambda: None, environ={}, modules={},
            cpu_times=lambda: next(cpu),
        )  # fmt: skip
        sampler.start(100.0)

        fields = sampler.sample(110.0)

        import os

        assert fields == {
            "cpu_percent": 25.0,  # 2.5 s of CPU in 10 s
            "rss_bytes": 2560 * os.sysconf("SC_PAGE_SIZE"),
            "host_mem_used_bytes": 12_000_000 * 1024,
            "host_mem_total_bytes": 16_000_000 * 1024,
        }

    def test_only_the_gpus_this_process_uses(self, tmp_path: Path) -> None:
        nvml = FakeNvml(count=8)
        sampler = SystemSampler(
            proc=str(fake_proc(tmp_path)), nvml=lambda: nvml, modules={},
            environ={"CUDA_VISIBLE_DEVICES": "4,5", "LOCAL_RANK": "1"},
        )  # fmt: skip
        sampler.start(0.0)

        fields = sampler.sample(10.0)

        assert nvml.asked == [5]
        gpu = {k: v for k, v in fields.items() if k.startswith("gpu")}
        assert gpu == {
            "gpu1_util_percent": 60,
            "gpu1_mem_used_bytes": 6 * 2**30,
            "gpu1_mem_total_bytes": 80 * 2**30,
            "gpu1_power_w": 250.505,
            "gpu1_temp_c": 65,
        }

    def test_a_field_that_fails_is_left_out_and_the_rest_are_kept(self, tmp_path: Path) -> None:
        nvml = FakeNvml(count=1, broken=frozenset({"nvmlDeviceGetPowerUsage"}))
        (tmp_path / "proc").mkdir()  # no statm, no meminfo: those fields fail too
        sampler = SystemSampler(proc=str(tmp_path / "proc"), nvml=lambda: nvml, environ={})
        sampler.start(0.0)

        fields = sampler.sample(1.0)

        assert "gpu0_power_w" not in fields
        assert "rss_bytes" not in fields
        assert fields["gpu0_util_percent"] == 10
        assert fields["gpu0_temp_c"] == 60
        assert "cpu_percent" in fields

    def test_no_nvml_means_no_gpu_fields_and_no_error(self, tmp_path: Path) -> None:
        sampler = SystemSampler(proc=str(fake_proc(tmp_path)), nvml=lambda: None, environ={})
        sampler.start(0.0)

        assert not [k for k in sampler.sample(1.0) if k.startswith("gpu")]

    def test_torch_peak_only_once_cuda_is_initialised(self, tmp_path: Path) -> None:
        state = {"initialised": False}
        cuda = SimpleNamespace(
            is_initialized=lambda: state["initialised"],
            device_count=lambda: 2,
            max_memory_allocated=lambda index: 1000 * (index + 1),
        )
        torch = SimpleNamespace(cuda=cuda)
        sampler = SystemSampler(
            proc=str(fake_proc(tmp_path)), nvml=lambda: None, environ={},
            modules={"torch": torch},
        )  # fmt: skip
        sampler.start(0.0)

        before = sampler.sample(1.0)
        state["initialised"] = True
        after = sampler.sample(2.0)

        assert "gpu0_torch_peak_bytes" not in before
        assert after["gpu0_torch_peak_bytes"] == 1000
        assert after["gpu1_torch_peak_bytes"] == 2000


def test_describe_gpus_names_the_model_and_driver() -> None:
    nvml = FakeNvml(count=4)

    info = describe_gpus({}, nvml=lambda: nvml, environ={"CUDA_VISIBLE_DEVICES": "2"})

    assert info == {"gpu_driver": "570.86.15", "gpus": ["NVIDIA H200"]}
    assert nvml.asked == [2]


class _Sampler:
    """A sampler whose fields are a counter, to see each record."""

    def __init__(self) -> None:
        self.calls = 0

    def start(self, now: float) -> None:
        self.started = now

    def sample(self, now: float) -> dict[str, Any]:
        self.calls += 1
        return {"cpu_percent": float(self.calls)}


class TestRecords:
    def test_a_sample_every_interval_after_the_first_interval(
        self, run_dir: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        watcher, clock = manual_watcher(monkeypatch)
        sampler = _Sampler()
        monkeypatch.setattr("runlines._watching.system.SystemSampler", lambda: sampler)

        with Run("r", run_dir, stdout=False, system=5.0) as run:
            watcher.run_due()  # at open: nothing yet
            clock.tick(4.9)
            watcher.run_due()
            clock.tick(0.1)
            watcher.run_due()
            clock.tick(5.0)
            watcher.run_due()

        events = [json.loads(line)["event"] for line in run.path.read_text().splitlines()]
        assert events == ["run_start", "system", "system", "run_end"]
        assert [r["cpu_percent"] for r in records(run.path, "system")] == [1.0, 2.0]

    def test_a_run_shorter_than_the_interval_writes_no_sample(
        self, run_dir: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        watcher, clock = manual_watcher(monkeypatch)

        with Run("r", run_dir, stdout=False) as run:  # the default: every 10 s
            clock.tick(9.0)
            watcher.run_due()
        clock.tick(60.0)
        watcher.run_due()  # the job went with the run

        assert records(run.path, "system") == []
        assert watcher.run_due() is None

    def test_stops_at_close_before_run_end(
        self, run_dir: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        watcher, clock = manual_watcher(monkeypatch)
        monkeypatch.setattr("runlines._watching.system.SystemSampler", _Sampler)
        run = Run("r", run_dir, stdout=False, system=1.0)
        clock.tick(1.0)
        watcher.run_due()

        run.close()
        clock.tick(5.0)
        watcher.run_due()

        events = [json.loads(line)["event"] for line in run.path.read_text().splitlines()]
        assert events == ["run_start", "system", "run_end"]

    def test_system_false_schedules_nothing(
        self, run_dir: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        watcher, _ = manual_watcher(monkeypatch)

        with Run("r", run_dir, stdout=False, system=False):
            assert watcher.run_due() is None

    @pytest.mark.parametrize("bad", [0, -1, 0.01, "10"])
    def test_a_bad_interval_is_refused_before_anything_is_written(
        self, run_dir: Path, bad: Any
    ) -> None:
        with pytest.raises(ValueError, match="system must be the seconds between samples"):
            Run("r", run_dir, stdout=False, system=bad)

        assert not (run_dir / "r.jsonl").exists()


def test_the_watcher_thread_is_one_daemon_for_every_run(run_dir: Path) -> None:
    with Run("a", run_dir, stdout=False), Run("b", run_dir, stdout=False):
        threads = [t for t in threading.enumerate() if t.name == "runlines-watch"]

    assert len(threads) == 1
    assert threads[0].daemon


def test_the_watcher_clock_is_the_real_one_under_freezegun() -> None:
    """A frozen test clock must not make the thread write samples when a test ticks time."""
    import time

    from freezegun import freeze_time

    with freeze_time("2026-01-01") as frozen:
        before = thread.watcher.clock()
        frozen.tick(3600)
        after = thread.watcher.clock()

    assert after - before < 60
    assert abs(time.monotonic() - after) < 60


class TestNvmlStart:
    def test_a_slow_nvml_start_does_not_hold_up_the_open(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        release = threading.Event()
        nvml = FakeNvml(count=1)

        def slow_init() -> Any:
            release.wait()
            return nvml

        monkeypatch.setattr(system, "_NVML", system._Nvml())
        monkeypatch.setattr(system, "_NVML_MODULE", "json")  # an importable module
        monkeypatch.setattr(system, "_init_nvml", slow_init)

        wait = system.start_nvml(0.05)
        assert wait() is None  # gave up at the bound: run_start goes without GPU names
        release.set()

        assert system.load_nvml() is nvml  # the sampler gets it once it has started

    def test_without_nvidia_ml_py_no_thread_starts(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(system, "_NVML", system._Nvml())
        monkeypatch.setattr(system, "_NVML_MODULE", "no_such_module_here")
        before = threading.active_count()

        wait = system.start_nvml(1.0)

        assert threading.active_count() == before
        assert wait() is None


def test_a_forked_child_closes_without_waiting_on_the_parents_thread(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fork may come while the watcher thread writes: the child must not wait on its lock."""
    import os
    import signal

    manual_watcher(monkeypatch)
    run = Run("r", run_dir, stdout=False, system=1.0)
    assert run._watching is not None
    with run._watching._lock:  # as if the watcher thread were writing a sample
        pid = os.fork()
        if pid == 0:
            signal.alarm(10)  # a deadlock ends the child, and the test sees the signal
            run.close()
            os._exit(0)
        _, status = os.waitpid(pid, 0)
    run.close()

    assert os.WIFEXITED(status)
    assert os.WEXITSTATUS(status) == 0
