"""Drop-ins for the logging calls of other trackers, writing runlines logs: see docs/compat.md.

- `runlines.compat.wandb`: `import runlines.compat.wandb as wandb`, or `install()` it as `wandb`.
- `runlines.compat.tensorboard.SummaryWriter`: torch's `SummaryWriter`, same signature.

Importing this package imports neither tracker; `tee=True` imports the real `wandb`.
"""

from __future__ import annotations

__all__: list[str] = []
