"""The history rows of a real wandb offline run, for the tests: its `.wandb` file's records.

wandb 0.31 has no public reader of its run files: this unframes the file's records (LevelDB's
log format, as wandb writes it: 32 KiB blocks, a 7-byte header per chunk) and decodes each with
wandb's own protobuf `Record`. A test helper only; no importer reads files this way.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment for a child that runs wandb, less any `WANDB_*` inherited.

    A real wandb run in this process (another test) leaves `WANDB_SERVICE` naming its own
    service; a child that inherits it hands its run to that service, which writes the run's
    file after the child has exited.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    return {**env, **extra}


_BLOCK = 32 * 1024
_HEADER = 7
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def _chunks(data: bytes) -> list[bytes]:
    records, partial, at = [], b"", _HEADER  # the file opens with wandb's own 7-byte header
    while at + _HEADER <= len(data):
        if _BLOCK - at % _BLOCK < _HEADER:
            at += _BLOCK - at % _BLOCK  # a block's tail too short for a header is padding
            continue
        _, length, kind = struct.unpack("<IHB", data[at : at + _HEADER])
        chunk = data[at + _HEADER : at + _HEADER + length]
        at += _HEADER + length
        if kind == _FULL:
            records.append(chunk)
        elif kind == _FIRST:
            partial = chunk
        elif kind == _MIDDLE:
            partial += chunk
        elif kind == _LAST:
            records.append(partial + chunk)
    return records


def history(run_dir: Path) -> list[dict[str, Any]]:
    """Return the history rows of the offline run in *run_dir* (`wandb/offline-run-*`)."""
    from wandb.proto import wandb_internal_pb2

    (path,) = run_dir.glob("*.wandb")
    rows = []
    for chunk in _chunks(path.read_bytes()):
        record = wandb_internal_pb2.Record()  # type: ignore[attr-defined]
        record.ParseFromString(chunk)
        if record.WhichOneof("record_type") == "history":
            rows.append(
                {
                    item.key or "/".join(item.nested_key): json.loads(item.value_json)
                    for item in record.history.item
                }
            )
    return rows
