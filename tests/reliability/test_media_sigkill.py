"""SIGKILL during media writes: no record ever points at a missing or partial file.

A forked writer logs images, image lists, tables and audio clips and acknowledges each call
that returned; the test kills it with SIGKILL after a random number of acknowledgements plus a
random delay (a seeded random.Random), mostly in the middle of encoding or writing a file.
Then every media record of the log must point at a complete file (its size and sha256 as the
record says), every acknowledged call must have its records, and anything else left in the
media folder is a hidden temporary file or a complete file whose record the kill prevented.
"""

from __future__ import annotations

import hashlib
import random
import signal
from pathlib import Path
from typing import Any

from _reliability import read_log
from _zygote import Zygote

TRIALS = 30
MEDIA = ("image", "table", "audio")


def _check(folder: Path, acked: int) -> tuple[int, int]:
    """Assert the trial's log and media folder are consistent; return (records, stray files)."""
    records, _tail = read_log(folder / "job.jsonl")  # a torn last line is allowed
    media = [r for r in records if r.get("event") in MEDIA]
    referenced = set()
    for record in media:
        path = folder / record["path"]
        assert path.is_file(), f"record points at a missing file: {record}"
        data = path.read_bytes()
        assert len(data) == record["bytes"], f"partial file: {record}"
        assert hashlib.sha256(data).hexdigest() == record["sha256"], f"wrong content: {record}"
        referenced.add(path)
    steps = {r["step"] for r in media}
    assert set(range(acked + 1)) <= steps, f"an acknowledged call lost its record (<= {acked})"
    strays = [
        p for p in (folder / "job.artifacts").rglob("*") if p.is_file() and p not in referenced
    ]
    for stray in strays:
        # a kill between the file's name and its record; or before the name: a hidden .tmp
        hidden = stray.name.startswith(".") and stray.suffix == ".tmp"
        assert hidden or _complete(stray), stray
    return len(media), len(strays)


def _complete(path: Path) -> bool:
    data = path.read_bytes()
    endings: dict[str, Any] = {".png": b"IEND\xaeB`\x82", ".parquet": b"PAR1"}
    if path.suffix == ".wav":
        return len(data) >= 44 and int.from_bytes(data[4:8], "little") + 8 == len(data)
    return data.endswith(endings[path.suffix])


def test_sigkill_during_media_writes_never_leaves_a_record_without_its_file(
    tmp_path: Path,
) -> None:
    rng = random.Random(27)
    zygote = Zygote("_media_writer.py")
    try:
        totals = [0, 0]
        for trial in range(TRIALS):
            folder = tmp_path / f"trial{trial}"
            spec = {"dir": str(folder), "name": "job", "seed": trial}
            outcome = zygote.run(spec, rng.randint(0, 12), rng.uniform(0, 0.01))
            assert outcome.status == signal.SIGKILL, outcome  # killed, not failed
            acked = outcome.acked
            found, strays = _check(folder, acked)
            totals[0] += found
            totals[1] += strays
    finally:
        zygote.close()
    assert totals[0] > TRIALS  # the trials wrote media: the checks above had records to judge
    assert totals[1] > 0  # some kills landed mid-write (about 1 trial in 3 does)
