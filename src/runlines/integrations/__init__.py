"""Adapters that log a framework's training through a `Run`: see docs/integrations.md.

- `runlines.integrations.transformers.RunlinesCallback`: a Hugging Face `TrainerCallback`.
- `runlines.integrations.lightning.RunlinesLogger`: a Lightning `Logger`.
- `runlines.integrations.optuna.RunlinesCallback`: an Optuna study callback, one run per trial.

Importing this package imports no framework; each adapter module imports its own.
"""

from __future__ import annotations

from typing import Final

from runlines.fields import STANDARD_ALIASES

__all__: list[str] = []

# Framework names that are no alias of an agreed field but have a unit-suffixed runlines name.
_RENAMES: Final = {"runtime": "duration_s", "steps_per_second": "steps_per_s"}


def _agreed_name(name: str) -> str:
    """Return runlines' name for a framework's metric name: learning_rate -> lr, acc -> accuracy."""
    return _RENAMES.get(name) or STANDARD_ALIASES.get(name, name)


def _strip_prefix(name: str, prefixes: tuple[str, ...]) -> str:
    """Return *name* without the first of *prefixes* it starts with (eval_loss -> loss)."""
    for prefix in prefixes:
        if name.startswith(prefix) and len(name) > len(prefix):
            return name[len(prefix) :]
    return name
