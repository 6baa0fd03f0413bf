"""load() of records with thousands of fields (per-class metrics) against pd.read_json.

Prints whole-load seconds for each, and their ratio, measured side by side in one process:
3 records x 4,000 fields and 1 record x 20,000 fields. load() was quadratic in the number of
fields (15.8 s against 0.45 s for 3 x 4,000).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import orjson
import pandas as pd

import runlines


def _write(path: Path, records: int, fields: int) -> None:
    with path.open("wb") as out:
        for i in range(records):
            record = {"ts": 1.0 + i, "event": "eval", "run": "wide", "step": i}
            record.update({f"class_{k}_acc": k * 1e-4 + i for k in range(fields)})
            out.write(orjson.dumps(record) + b"\n")


def _best_of(work: object, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        for records, fields in ((3, 4_000), (1, 20_000)):
            path = Path(folder, f"wide-{records}x{fields}.jsonl")
            _write(path, records, fields)
            ours = _best_of(lambda p=path: runlines.load(p))
            theirs = _best_of(lambda p=path: pd.read_json(p, lines=True))
            print(
                f"{records} x {fields:,} fields: load {ours:.3f} s, pd.read_json {theirs:.3f} s,"
                f" ratio {ours / theirs:.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
