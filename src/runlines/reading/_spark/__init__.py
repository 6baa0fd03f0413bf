"""Read runlines logs with Apache Spark: `read` gives a Spark DataFrame of every record.

This door names the extra to install when PySpark lacks; the reader, `frame`, imports PySpark
at its top and is imported on the first `read`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["read"]


def read(
    spark: SparkSession, path_or_glob: str | os.PathLike[str], *, superseded: bool = False
) -> DataFrame:
    """Return every record of the logs at *path_or_glob* as a Spark DataFrame.

    Args:
        spark: the session to read with.
        path_or_glob: a folder of logs, one log, or a glob (``s3a://bucket/exp-*/*.jsonl``);
            only ``*.jsonl`` files are read, so side files and locks are skipped.
        superseded: keep records that a resumed attempt rewound past (dropped by default).

    Columns: ``ts``, ``event``, ``run``, ``rank`` (when any file or record has one),
    ``attempt``, then the fields.
    """
    try:
        from runlines.reading._spark import frame
    except ImportError as err:
        if (err.name or "").split(".")[0] == "runlines":
            raise
        msg = "runlines.spark needs PySpark: pip install 'runlines[spark]'"
        raise ImportError(msg) from err
    return frame.read(spark, path_or_glob, superseded=superseded)
