"""Fakes for the watching tests: a clock, a manual watcher, fake procfs and a fake NVML."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from runlines._watching import thread


class FakeClock:
    """A monotonic clock that moves only when told to."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def tick(self, seconds: float) -> None:
        self.now += seconds


def manual_watcher(monkeypatch: pytest.MonkeyPatch) -> tuple[thread.Watcher, FakeClock]:
    """Replace the process's watcher with one that runs only when a test calls run_due()."""
    clock = FakeClock()
    watcher = thread.Watcher(clock, thread=False)
    monkeypatch.setattr(thread, "watcher", watcher)
    return watcher, clock


def fake_proc(root: Path, *, rss_pages: int = 2560, total_kb: int = 16_000_000) -> Path:
    """A procfs with what SystemSampler reads: self/statm and meminfo."""
    (root / "self").mkdir(parents=True)
    (root / "self" / "statm").write_text(f"100000 {rss_pages} 300 1 0 2000 0\n")
    (root / "meminfo").write_text(
        f"MemTotal:       {total_kb} kB\nMemFree:         1000 kB\n"
        f"MemAvailable:   {total_kb // 4} kB\nBuffers:  10 kB\n"
    )
    return root


class FakeNvml:
    """The parts of nvidia-ml-py's pynvml that runlines calls, for GPUs 0..count-1."""

    def __init__(self, count: int = 4, broken: frozenset[str] = frozenset()) -> None:
        self.count = count
        self.broken = broken  # names of functions that raise, as an unsupported field does
        self.asked: list[int] = []

    def _check(self, name: str) -> None:
        if name in self.broken:
            raise RuntimeError(f"NVML_ERROR_NOT_SUPPORTED in {name}")

    def nvmlDeviceGetCount(self) -> int:
        return self.count

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        if index >= self.count:
            raise RuntimeError("NVML_ERROR_INVALID_ARGUMENT")
        self.asked.append(index)
        return index

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> int:
        return int(uuid.rsplit("-", 1)[1])

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> Any:
        self._check("nvmlDeviceGetUtilizationRates")
        return SimpleNamespace(gpu=10 * (handle + 1), memory=5)

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> Any:
        self._check("nvmlDeviceGetMemoryInfo")
        return SimpleNamespace(used=(handle + 1) * 2**30, total=80 * 2**30, free=0)

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        self._check("nvmlDeviceGetPowerUsage")
        return 250_500 + handle

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        self._check("nvmlDeviceGetTemperature")
        assert sensor == 0
        return 60 + handle

    def nvmlDeviceGetName(self, handle: int) -> str:
        return "NVIDIA H200"

    def nvmlSystemGetDriverVersion(self) -> bytes:
        return b"570.86.15"
