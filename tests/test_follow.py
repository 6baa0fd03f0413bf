"""LogFollower: the records appended to a growing log, as `tail -f` and `top` read them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runlines.errors import ReadError
from runlines.reading import LogFollower


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_fifo_named_like_a_log_is_refused_not_read_as_empty(tmp_path: Path) -> None:
    fifo = tmp_path / "f.jsonl"
    os.mkfifo(fifo)
    follower = LogFollower(fifo)

    with pytest.raises(ReadError, match="a FIFO, not a regular file"):
        follower.poll()
