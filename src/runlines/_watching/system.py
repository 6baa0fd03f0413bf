"""System metrics of a run's process: CPU, memory, and the GPUs this process uses (NVML).

`SystemSampler.sample()` returns the fields of one `system` record; every field is read on its
own, so one that fails is left out and the others are kept. NVML comes from `nvidia-ml-py`
(`pip install 'runlines[system]'`), imported on first use; without it there are no GPU fields
beyond torch's own allocator peak. See docs/watching.md.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, Final

from runlines import fields as _f

__all__ = [
    "DEFAULT_SYSTEM_S",
    "SystemSampler",
    "check_system",
    "describe_gpus",
    "gpus_in_use",
    "load_nvml",
    "start_nvml",
]

_NVML_MODULE: Final = "pynvml"  # the module nvidia-ml-py installs
_NVML_TEMPERATURE_GPU: Final = 0
DEFAULT_SYSTEM_S: Final = 10.0
_MIN_SYSTEM_S: Final = 0.1


def check_system(value: object) -> float | None:
    """Return the seconds between `system` samples (None: off); raise on a bad value."""
    if value is False or value is None:
        return None
    if value is True:
        return DEFAULT_SYSTEM_S
    if isinstance(value, (int, float)) and value >= _MIN_SYSTEM_S:
        return float(value)
    msg = (
        f"system must be the seconds between samples (at least {_MIN_SYSTEM_S}), True "
        f"({DEFAULT_SYSTEM_S}) or False (off); got {value!r}"
    )
    raise ValueError(msg)


class _Nvml:
    """NVML initialised once per process, on first use; `module` is None where it is missing."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.tried = False
        self.module: Any = None

    def get(self) -> Any:
        with self._lock:
            if not self.tried:
                self.module = _init_nvml()
                self.tried = True
            return self.module


def _init_nvml() -> Any:
    try:
        nvml = importlib.import_module(_NVML_MODULE)
        nvml.nvmlInit()
    except Exception:  # no library, no driver, no GPU: fewer fields
        return None
    return nvml


_NVML: Final = _Nvml()


def load_nvml() -> Any:
    """Return the NVML module, initialised, or None where nvidia-ml-py or the driver is missing."""
    return _NVML.get()


def start_nvml(wait_s: float) -> Callable[[], Any]:
    """Start NVML on a thread (it can take a while on a host with many GPUs); return a call
    that waits for it until *wait_s* seconds from now, then returns the module or None."""
    if not _NVML.tried and importlib.util.find_spec(_NVML_MODULE) is None:
        return lambda: None  # no nvidia-ml-py: no thread either
    deadline = time.monotonic() + wait_s
    thread = threading.Thread(target=_NVML.get, name="runlines-nvml", daemon=True)
    thread.start()

    def wait() -> Any:
        thread.join(max(0.0, deadline - time.monotonic()))
        return None if thread.is_alive() else _NVML.module

    return wait


def gpus_in_use(environ: Mapping[str, str] | None = None) -> list[tuple[int, str]] | None:
    """Return the GPUs this process uses: (CUDA ordinal, NVML index or UUID) pairs.

    CUDA_VISIBLE_DEVICES names the visible GPUs; with LOCAL_RANK set (torchrun) the process
    uses only the visible GPU at that position. None: every GPU of the host is visible and
    the process's own is unknown.
    """
    env = os.environ if environ is None else environ
    visible = env.get("CUDA_VISIBLE_DEVICES")
    devices: list[str] | None = None
    if visible is not None:
        devices = []
        for item in visible.split(","):
            item = item.strip()
            if not item or item.startswith("-"):
                break  # CUDA stops at the first invalid entry, and so do we
            devices.append(item)
    local_rank = env.get("LOCAL_RANK", "")
    if local_rank.isdigit():
        rank = int(local_rank)
        if devices is None:
            return [(rank, str(rank))]
        if len(devices) > 1 and rank < len(devices):
            return [(rank, devices[rank])]
    return None if devices is None else list(enumerate(devices))


def _handles(nvml: Any, devices: list[tuple[int, str]] | None) -> list[tuple[int, Any]]:
    """(CUDA ordinal, NVML handle) of *devices*; every GPU of the host when *devices* is None."""
    if devices is None:
        count = nvml.nvmlDeviceGetCount()
        return [(i, nvml.nvmlDeviceGetHandleByIndex(i)) for i in range(count)]
    handles = []
    for ordinal, device in devices:
        if device.isdigit():
            handles.append((ordinal, nvml.nvmlDeviceGetHandleByIndex(int(device))))
        else:
            handles.append((ordinal, nvml.nvmlDeviceGetHandleByUUID(device)))
    return handles


def describe_gpus(
    modules: Mapping[str, Any] | None = None,
    *,
    nvml: Callable[[], Any] = load_nvml,
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Return `gpus` (model names of the GPUs in use) and `gpu_driver`, where they can be read.

    NVML when nvidia-ml-py is installed; else torch's device names once CUDA is initialised.
    """
    info: dict[str, Any] = {}
    module = nvml()
    if module is not None:
        _put(info, _f.GPU_DRIVER, lambda: _text(module.nvmlSystemGetDriverVersion()))
        _put(
            info,
            _f.GPUS,
            lambda: [
                _text(module.nvmlDeviceGetName(h))
                for _, h in _handles(module, gpus_in_use(environ))
            ],
        )
        return info
    torch = (sys.modules if modules is None else modules).get("torch")
    if torch is not None:
        _put(info, _f.GPUS, lambda: _torch_gpu_names(torch, gpus_in_use(environ)))
    return info


def _torch_gpu_names(torch: Any, devices: list[tuple[int, str]] | None) -> list[str]:
    if not torch.cuda.is_initialized():
        msg = "CUDA not initialised"  # asking now would initialise it
        raise RuntimeError(msg)
    if devices is None:
        ordinals = list(range(torch.cuda.device_count()))
    else:
        ordinals = [ordinal for ordinal, _ in devices]
    return [torch.cuda.get_device_name(i) for i in ordinals]


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _put(out: dict[str, Any], name: str, read: Callable[[], Any]) -> None:
    """Set out[name] = read(), or leave it out when reading fails."""
    try:
        value = read()
    except Exception:  # one field that fails is left out, the rest are kept
        return
    if value is not None:
        out[name] = value


class SystemSampler:
    """Read the fields of one `system` record; each read is isolated.

    *proc* is the procfs root (a fake folder in tests), *nvml* returns the NVML module or None,
    *modules* is where torch is looked up (never imported here).
    """

    def __init__(
        self,
        *,
        proc: str = "/proc",
        nvml: Callable[[], Any] = load_nvml,
        environ: Mapping[str, str] | None = None,
        modules: Mapping[str, Any] | None = None,
        cpu_times: Callable[[], float] | None = None,
    ) -> None:
        self._proc = proc
        self._nvml = nvml
        self._devices = gpus_in_use(environ)
        self._modules = sys.modules if modules is None else modules
        self._cpu_times = _process_cpu_s if cpu_times is None else cpu_times
        self._handles: list[tuple[int, Any]] | None = None
        self._last: tuple[float, float] | None = None  # (monotonic, process CPU seconds)

    def start(self, now: float) -> None:
        """Take the reference point of the first sample's `cpu_percent`."""
        self._last = (now, self._cpu_times())

    def sample(self, now: float) -> dict[str, Any]:
        """Return the fields of a `system` record at monotonic time *now*."""
        out: dict[str, Any] = {}
        _put(out, _f.CPU_PERCENT, lambda: self._cpu_percent(now))
        _put(out, _f.RSS_BYTES, self._rss_bytes)
        _put(out, _f.HOST_MEM_USED_BYTES, lambda: self._meminfo()[1])
        _put(out, _f.HOST_MEM_TOTAL_BYTES, lambda: self._meminfo()[0])
        self._sample_gpus(out)
        self._sample_torch(out)
        return out

    def _cpu_percent(self, now: float) -> float | None:
        cpu = self._cpu_times()
        last, self._last = self._last, (now, cpu)
        if last is None or now <= last[0]:
            return None
        return round(100.0 * (cpu - last[1]) / (now - last[0]), 1)

    def _rss_bytes(self) -> int:
        with open(os.path.join(self._proc, "self", "statm"), "rb") as file:
            resident_pages = int(file.read().split()[1])
        return resident_pages * os.sysconf("SC_PAGE_SIZE")

    def _meminfo(self) -> tuple[int, int]:
        """(total, used) bytes of host memory, from MemTotal and MemAvailable."""
        values: dict[bytes, int] = {}
        with open(os.path.join(self._proc, "meminfo"), "rb") as file:
            for line in file:
                key, _, rest = line.partition(b":")
                if key in (b"MemTotal", b"MemAvailable"):
                    values[key] = int(rest.split()[0]) * 1024
        total = values[b"MemTotal"]
        return total, total - values[b"MemAvailable"]

    def _sample_gpus(self, out: dict[str, Any]) -> None:
        nvml = self._nvml()
        if nvml is None:
            return
        if self._handles is None:
            try:
                self._handles = _handles(nvml, self._devices)
            except Exception:  # a device NVML cannot name: no GPU fields
                self._handles = []
        for index, handle in self._handles:
            _gpu_fields(nvml, index, handle, out)

    def _sample_torch(self, out: dict[str, Any]) -> None:
        torch = self._modules.get("torch")
        if torch is None:
            return
        try:
            if not torch.cuda.is_initialized():
                return  # asking would initialise CUDA in this thread
            if self._devices is None:
                ordinals = list(range(torch.cuda.device_count()))
            else:
                ordinals = [ordinal for ordinal, _ in self._devices]
        except Exception:  # a torch without CUDA: no allocator fields
            return
        for index in ordinals:
            _put(out, _f.GPU_TORCH_PEAK_BYTES.format(index), partial(_torch_peak, torch, index))


def _gpu_fields(nvml: Any, index: int, handle: Any, out: dict[str, Any]) -> None:
    """Put the NVML fields of one GPU into *out*, each on its own."""
    memory: list[Any] = []

    def read_memory() -> Any:
        if not memory:
            memory.append(nvml.nvmlDeviceGetMemoryInfo(handle))
        return memory[0]

    _put(
        out,
        _f.GPU_UTIL_PERCENT.format(index),
        lambda: nvml.nvmlDeviceGetUtilizationRates(handle).gpu,
    )
    _put(out, _f.GPU_MEM_USED_BYTES.format(index), lambda: int(read_memory().used))
    _put(out, _f.GPU_MEM_TOTAL_BYTES.format(index), lambda: int(read_memory().total))
    _put(out, _f.GPU_POWER_W.format(index), lambda: nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0)
    _put(
        out,
        _f.GPU_TEMP_C.format(index),
        lambda: nvml.nvmlDeviceGetTemperature(handle, _NVML_TEMPERATURE_GPU),
    )


def _torch_peak(torch: Any, index: int) -> int:
    return int(torch.cuda.max_memory_allocated(index))


def _process_cpu_s() -> float:
    times = os.times()
    return times.user + times.system
