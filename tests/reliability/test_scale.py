"""A 10,000,000-record run (--long only): the writer's memory stays flat, the reader's bounded.

The reader's bound: at most half of what `pd.read_json(lines=True)` takes on the same file, the
target of tests/benchmarks/bench_load.py. pd.read_json on ten million records would need tens of
GiB, so its figure is measured on the first twentieth of the file and scaled linearly (its memory
grows with the records: one Python dict per record, then the frame): read_json(full) =
baseline + 20 x (read_json(twentieth) - baseline), the baseline being Python with pandas imported.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from _reliability import finish, spawn

_RECORDS = 10_000_000
_SLICE = 20
_WRITER_GROWTH_BYTES = 4 << 20

_PEAK = """
import sys
what, path = sys.argv[1], sys.argv[2]
import pandas as pd
import runlines
if what == "load":
    rows = len(runlines.load(path))
elif what == "read_json":
    rows = len(pd.read_json(path, lines=True))
else:
    rows = 0
# VmHWM: this program's own peak (ru_maxrss would count the parent's size at the fork)
peak = next(l for l in open("/proc/self/status") if l.startswith("VmHWM:")).split()[1]
print(rows, int(peak) * 1024)
"""


def _peak(what: str, path: Path) -> tuple[int, int]:
    """Return (rows, peak RSS in bytes) of one reader in a fresh process."""
    child = subprocess.Popen(
        [sys.executable, "-c", _PEAK, what, str(path)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = child.communicate(timeout=3600)
    assert child.returncode == 0, err.decode()
    rows, peak = out.decode().split()
    return int(rows), int(peak)


@pytest.mark.long
@pytest.mark.usefixtures("fast_path")  # the writer, a child, follows it (tests/conftest.py)
def test_ten_million_records_keep_the_writer_flat_and_the_reader_bounded(
    tmp_path: Path,
) -> None:
    writer = spawn("_scale_writer.py", str(tmp_path), str(_RECORDS))
    code, out, err = finish(writer, timeout_s=3600)
    assert code == 0, err
    rss = {int(p): int(b) for _, p, b in (line.split() for line in out.splitlines())}
    growth = rss[100] - rss[10]
    print(f"writer RSS at 10%: {rss[10] >> 20} MiB, at 100%: {rss[100] >> 20} MiB")
    assert growth < _WRITER_GROWTH_BYTES, f"the writer grew by {growth >> 20} MiB"

    log = tmp_path / "long.jsonl"
    lines = _RECORDS + _RECORDS // 1000 + 2
    twentieth = tmp_path / "twentieth.jsonl"
    with log.open("rb") as source, twentieth.open("wb") as target:
        for _ in range(lines // _SLICE):
            target.write(source.readline())
    rows, load_peak = _peak("load", log)
    _, slice_peak = _peak("read_json", twentieth)
    _, baseline = _peak("nothing", twentieth)
    read_json_full = baseline + _SLICE * (slice_peak - baseline)
    print(
        f"load: {rows:,} rows, peak {load_peak >> 20} MiB; pd.read_json scaled from a "
        f"twentieth: {read_json_full >> 20} MiB; file {log.stat().st_size >> 20} MiB"
    )
    assert rows == lines
    assert load_peak <= 0.5 * read_json_full
