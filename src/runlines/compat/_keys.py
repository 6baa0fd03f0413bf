"""How a tracker's metric key becomes a runlines event and field (docs/compat.md).

`train/loss` is the event `train` with the field `loss` (split at the first `/`; `a/b/c` is
the event `a` with the field `b/c`); a key without `/` is a field of the event `metrics`.
A field runlines writes itself (`ts`, `event`, `run`, `rank`, `step`) is written with a
trailing `_`: a key `step` is the field `step_`.
"""

from __future__ import annotations

from typing import Final

DEFAULT_EVENT: Final = "metrics"
# runlines' own fields, and `step`, which the drop-ins set from the tracker's step
_OWN: Final = frozenset({"ts", "event", "run", "rank", "step", "_nonfinite"})


def split_key(key: str) -> tuple[str, str]:
    """Return ``(event, field)`` for a tracker's metric *key*."""
    event, slash, field = key.partition("/")
    if not slash or not event or not field:
        event, field = DEFAULT_EVENT, key
    return event, f"{field}_" if field in _OWN else field


def column_of(key: str) -> str:
    """Return the `runs()` column of a tracker's metric *key*: `train/loss` -> `train.loss`."""
    event, field = split_key(key)
    return f"{event}.{field}"
