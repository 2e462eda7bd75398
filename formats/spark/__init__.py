"""The Spark engine: statectl's jobs on PySpark, for state and input too big for one machine.

Spark distributes, statectl's own code does the work: tasks read checkpoint handles and input
files with the same readers as the local engine, compute key groups with the same vectorised
Java hashing (:mod:`formats.model.key_hash`), and write each partition with the format's own writer
from inside the task (``mapInArrow``). Only file statistics come back to the driver, which
plans, writes ``_metadata.json`` and publishes the output atomically, as the local engine
does. A failed or cancelled job leaves no output that looks complete.

pyspark is imported lazily, here only: without it every other command works, and asking for
``--engine spark`` says ``pip install 'statectl[spark]'``.

* :mod:`formats.spark.session`: the session (``local[*]`` by default, ``--spark-master`` or
  ``STATECTL_SPARK_MASTER``, the active session inside ``spark-submit``).
* :mod:`formats.spark.jobs`: rescale (compact and max-parallelism change), export, key-group
  histogram and build.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from statecore.errors import MissingDependencyError

__all__ = ["INSTALL_HINT", "require_pyspark"]

#: What to run when pyspark is missing.
INSTALL_HINT = "pip install 'statectl[spark]'"


def require_pyspark() -> ModuleType:
    """``pyspark``, or a :class:`MissingDependencyError` saying how to install it."""
    try:
        module = importlib.import_module("pyspark")
        importlib.import_module("pyspark.sql")
        importlib.import_module("pandas")  # Spark's Arrow UDFs (mapInArrow) need pandas
    except ImportError as exc:
        raise MissingDependencyError(
            f"--engine spark needs pyspark (and pandas), which are not installed: run "
            f"{INSTALL_HINT}") from exc
    return module
