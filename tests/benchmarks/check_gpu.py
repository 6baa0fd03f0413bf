"""Check system metrics against a real GPU and NVML; run it on a GPU machine.

Run: pip install -e '.[system]' && python tests/benchmarks/check_gpu.py [--seconds S]

Opens a run with a system sample every second, keeps a CUDA tensor busy for S seconds when
torch with CUDA is there, and checks what NVML gave: run_start's `gpus` and `gpu_driver`, and
the `gpu0_*` fields of the `system` records (with torch, `gpu0_torch_peak_bytes` too). Prints
the records and the time NVML took to start and a run to open, and exits 1 if a field is
missing. Not collected by pytest, and not run by run_all.py (its name is not bench_*).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

EXPECTED = ("gpu0_util_percent", "gpu0_mem_used_bytes", "gpu0_mem_total_bytes", "gpu0_temp_c")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    started = time.perf_counter()
    from runlines._watching import load_nvml

    if load_nvml() is None:
        print("NVML did not start: is nvidia-ml-py installed, and is there a driver?")
        return 1
    print(f"NVML started in {time.perf_counter() - started:.3f} s (once per process)")
    torch: Any = None
    try:
        import torch
    except ImportError:
        pass
    from runlines import Run

    directory = Path(tempfile.mkdtemp(prefix="runlines-gpu-"))
    opened = time.perf_counter()
    with Run("gpu", directory, stdout=False, system=1.0) as run:
        print(f"Run() opened in {time.perf_counter() - opened:.3f} s")
        busy_until = time.monotonic() + args.seconds
        step = 0
        if torch is not None and torch.cuda.is_available():
            x = torch.randn(4096, 4096, device="cuda")
            while time.monotonic() < busy_until:
                x = (x @ x).tanh()
                torch.cuda.synchronize()
                run.log("train_step", step=step, value=float(x[0, 0]))
                step += 1
        else:
            while time.monotonic() < busy_until:
                time.sleep(0.1)
    records = [json.loads(line) for line in run.path.read_text().splitlines()]
    start = records[0]
    samples = [r for r in records if r["event"] == "system"]
    print("run_start:", {k: start.get(k) for k in ("gpus", "gpu_driver", "cuda", "packages")})
    for sample in samples:
        print("system:", sample)
    missing = [f for f in ("gpus", "gpu_driver") if f not in start]
    expected = [*EXPECTED, "gpu0_torch_peak_bytes"] if step else list(EXPECTED)
    missing += [f for f in expected if not samples or f not in samples[-1]]
    if missing:
        print(f"MISSING: {', '.join(missing)}")
        return 1
    print(f"ok: {len(samples)} system records, {step} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
