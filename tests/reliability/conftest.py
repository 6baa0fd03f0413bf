"""The reliability suite's switches: `--long` (or RUNLINES_LONG=1) and the `long` marker.

Tests marked `long` are deselected unless the long variants are asked for; the terminal summary
says how many were left out and how to run them.

pytest reads command-line options only from *initial* conftests: the rootdir's, those of the
paths given on the command line, and those of their `test*` subfolders. So `--long` works with
`pytest tests/reliability --long`; from the rootdir (`pytest --long`) it needs the option in
tests/conftest.py (see docs/reliability.md). RUNLINES_LONG=1 works from anywhere.
"""

from __future__ import annotations

import os

import _reliability
import pytest

_LONG_HELP = "run the long variants of tests/reliability (same as RUNLINES_LONG=1)"
_deselected_key = pytest.StashKey[int]()


def pytest_addoption(parser: pytest.Parser) -> None:
    try:
        parser.addoption("--long", action="store_true", default=False, help=_LONG_HELP)
    except ValueError:  # tests/conftest.py registered it already
        pass


def is_long(config: pytest.Config) -> bool:
    """Return whether the long variants run: `--long`, or RUNLINES_LONG=1 in the environment."""
    return bool(config.getoption("--long", default=False)) or os.environ.get("RUNLINES_LONG") == "1"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "long: a heavy reliability variant, run with --long or RUNLINES_LONG=1"
    )
    _reliability.LONG = is_long(config)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if is_long(config):
        return
    kept = [item for item in items if item.get_closest_marker("long") is None]
    left_out = [item for item in items if item.get_closest_marker("long") is not None]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept
    config.stash[_deselected_key] = len(left_out)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    count = terminalreporter.config.stash.get(_deselected_key, 0)
    if count:
        terminalreporter.write_line(
            f"runlines reliability: {count} long variant(s) deselected; run them with "
            "`pytest tests/reliability --long` or RUNLINES_LONG=1"
        )
