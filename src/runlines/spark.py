"""Read runlines logs with Apache Spark: `read` gives a Spark DataFrame of every record."""

from __future__ import annotations

from runlines.reading._spark import read

__all__ = ["read"]
