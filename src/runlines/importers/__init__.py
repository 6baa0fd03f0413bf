"""Importers of other trackers' runs as runlines logs (docs/compat.md)."""

# Each importer is its own module, imported with the reader it needs: `importers.tensorboard`.
__all__: list[str] = []
