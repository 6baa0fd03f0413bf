"""Test doubles for users' own tests: a sink that keeps lines, and records captured from runs.

from runlines.testing import capture_records

with capture_records() as records:
    train(...)  # opens a Run and logs
assert records[-1]["event"] == "run_end"
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from runlines import sinks as _sinks

__all__ = ["MemorySink", "capture_records"]


class MemorySink:
    """A sink that keeps every line it is given: `Run(..., sinks=[MemorySink()])`."""

    kind = "memory"

    def __init__(self) -> None:
        self.lines: list[bytes] = []  # as written: UTF-8 JSON, each ending in a newline
        self.closed = False

    def write(self, line: bytes) -> None:
        """Keep *line*."""
        self.lines.append(line)

    def flush(self) -> None:
        """Nothing to flush: the lines are kept in memory."""

    def close(self) -> None:
        """Mark the sink closed; its lines stay readable."""
        self.closed = True

    @property
    def records(self) -> list[dict[str, Any]]:
        """The lines parsed, in the order they were written."""
        return [json.loads(line) for line in self.lines]

    def events(self, event: str) -> list[dict[str, Any]]:
        """The records of *event* only."""
        return [record for record in self.records if record.get("event") == event]


class _RecordingSink(MemorySink):
    """A MemorySink that also appends each record, parsed, to a list."""

    def __init__(self, records: list[dict[str, Any]]) -> None:
        super().__init__()
        self._records = records

    def write(self, line: bytes) -> None:
        """Keep *line*, and its record in the list."""
        self.lines.append(line)
        self._records.append(json.loads(line))


@contextmanager
def capture_records() -> Iterator[list[dict[str, Any]]]:
    """Collect the records of every Run opened inside the block, as parsed dicts.

    Runs still write their log files and stdout as usual; the records are also kept in the
    list this yields, which grows as the runs log (read it inside the block or after it).
    """
    records: list[dict[str, Any]] = []
    sink = _RecordingSink(records)
    _sinks._ADDED.append(sink)
    try:
        yield records
    finally:
        _sinks._ADDED.remove(sink)
