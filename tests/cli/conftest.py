"""Fixtures for the command line's tests: `tail -f` driven one poll at a time."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from runlines.cli import _tail


@pytest.fixture(name="sleep_appends")
def _sleep_appends(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """Return `install(log, appends, stop=True)`: from then on, each of `tail -f`'s sleeps
    appends the next chunk of *appends* to *log*; once none is left, it presses Ctrl-C
    (KeyboardInterrupt), or with ``stop=False`` does nothing.
    """

    def install(log: Path, appends: list[bytes], *, stop: bool = True) -> None:
        pending = list(appends)

        def sleep(_seconds: float) -> None:
            if not pending:
                if stop:
                    raise KeyboardInterrupt
                return
            with log.open("ab") as out:
                out.write(pending.pop(0))

        monkeypatch.setattr(_tail, "_sleep", sleep)

    return install
