"""What several benchmark scripts share: stdout redirected as a scheduler's log would take it."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def stdout_to_temp_file() -> Iterator[None]:
    """Send fd 1 to a temporary file for the duration, as a scheduler's log would take it."""
    real_stdout = os.dup(1)
    with tempfile.TemporaryFile(prefix="runlines-bench-stdout-") as sink:
        sys.stdout.flush()
        os.dup2(sink.fileno(), 1)
        try:
            yield
        finally:
            sys.stdout.flush()
            os.dup2(real_stdout, 1)
            os.close(real_stdout)
