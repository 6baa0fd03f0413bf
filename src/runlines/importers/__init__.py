"""Importers of other trackers' runs as runlines logs (docs/compat.md)."""
