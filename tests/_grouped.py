"""A stand-in for `compare(..., group_by=[...])` (issue #28), to its contract, for tests.

The contract: a DataFrame indexed by x, two-level columns (group label "k=v,k2=v2", stat), the
stats n, mean, std, min and max over the runs of each group at each x. Computed here from the
per-run compare() and the runs' config, with pandas; the report's tests of groups use it until
the real one lands on the branch.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

import runlines
from runlines import reading

_REAL_COMPARE = reading.compare


def grouped_compare(
    *sources: str | os.PathLike[str], group_by: list[str] | None = None, **options: Any
) -> Any:
    """Return compare()'s table, grouped by *group_by* to the contract when given."""
    import pandas as pd

    table = _REAL_COMPARE(*sources, **options)
    if not group_by:
        return table
    config = runlines.runs(*sources).set_index("run")
    labels = {
        run: ",".join(f"{key}={config.loc[run, f'config.{key}']}" for key in group_by)
        for run in table.columns
    }
    parts = {}
    for label in dict.fromkeys(labels.values()):
        runs = [run for run in table.columns if labels[run] == label]
        values = table[runs].astype("float64")
        parts[label] = pd.DataFrame(
            {
                "n": values.notna().sum(axis=1).astype("float64"),
                "mean": values.mean(axis=1),
                "std": values.std(axis=1),
                "min": values.min(axis=1),
                "max": values.max(axis=1),
            }
        )
    return pd.concat(parts, axis=1)


def install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make `runlines.reading.compare` take group_by, as the contract says."""
    monkeypatch.setattr(reading, "compare", grouped_compare)
