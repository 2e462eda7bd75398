"""The Spark session statectl's jobs run on.

* Inside ``spark-submit`` (an active session exists): that session, as configured.
* Otherwise a new one: master ``--spark-master``, else ``$STATECTL_SPARK_MASTER``, else
  ``local[*]`` (an embedded Spark using every core, no cluster needed); ``--spark-conf
  key=value`` settings on top; Python workers run the driver's interpreter (so they have
  statectl and pyarrow); for an embedded Spark the web UI and console progress are off and
  its JVM compiles with its quick compiler only (:data:`JIT_OPTIONS`); console progress is off
  on any master (statectl draws its own), Spark logs only errors, and what Spark's launcher and
  JVM print themselves goes to :func:`spark_log_path`, not among statectl's output
  (``--spark-conf statectl.log.level=INFO`` logs more, on stderr).

Either way the driver's object-store settings reach the Python workers: the ``AWS_*``
variables (credentials, region, profile, ...) are put in the environment Spark gives the
Python functions of every job (:func:`forward_storage_environment`), so a task opens
``s3://`` inputs and outputs as the driver does. (Checkpoints opened on the driver travel into
tasks with their filesystem, which carries the credentials it was given.)
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from formats.spark import require_pyspark
from statecore.errors import InvalidArgumentError

__all__ = ["DEFAULT_MASTER", "MASTER_VARIABLE", "STORAGE_VARIABLES",
           "forward_storage_environment", "parse_conf", "spark_log_path", "spark_session"]

#: Environment variables (prefixes) that say how to reach object stores.
STORAGE_VARIABLES = ("AWS_",)


def forward_storage_environment(session: Any) -> None:
    """Give the Python workers of ``session``'s later jobs the driver's ``AWS_*`` variables.

    ``SparkContext.environment`` is sent with every Python function to the executors (on a
    cluster too); a variable the driver does not have is left as the executor has it.
    """
    environment = session.sparkContext.environment
    for name, value in os.environ.items():
        if name.startswith(STORAGE_VARIABLES):
            environment[name] = value

DEFAULT_MASTER = "local[*]"
#: The embedded JVM's JIT: the quick compiler only (``--spark-conf
#: spark.driver.extraJavaOptions=...`` replaces it).
JIT_OPTIONS = "-XX:TieredStopAtLevel=1"
MASTER_VARIABLE = "STATECTL_SPARK_MASTER"


def parse_conf(pairs: Sequence[str]) -> dict[str, str]:
    """``key=value`` settings (``--spark-conf``) as a dict; a clear error for anything else."""
    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InvalidArgumentError(f"--spark-conf takes key=value, got {pair!r} (e.g. "
                                       "spark.executor.memory=4g)")
        conf[key.strip()] = value
    return conf


def spark_log_path() -> str:
    """Where the JVM statectl starts for Spark writes its own output (one file per user)."""
    return os.path.join(tempfile.gettempdir(), f"statectl-spark-{os.getuid()}.log")


@contextmanager
def _jvm_output_to(path: str) -> Iterator[None]:
    """Start the JVM (and what it forks) with its stdout and stderr in ``path``.

    Spark's launcher and JVM print their own lines (the log4j profile, "Setting default log
    level", native-library warnings, stage progress) on the file descriptors they inherit:
    while the JVM starts, ours point at the log file; they are ours again at once.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
    target = os.open(path, flags, 0o600)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    try:
        os.dup2(target, 1)
        os.dup2(target, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, target):
            os.close(fd)


def spark_session(master: str | None = None, conf: dict[str, str] | None = None) -> Any:
    """The active session, or a new one (see the module doc)."""
    require_pyspark()
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        forward_storage_environment(active)
        return active
    chosen = master or os.environ.get(MASTER_VARIABLE) or DEFAULT_MASTER
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(chosen).appName("statectl")
    settings = {"spark.sql.execution.arrow.pyspark.enabled": "true",
                "spark.speculation": "false",  # a task writes its files once
                "spark.pyspark.python": os.environ["PYSPARK_PYTHON"]}
    if chosen.startswith("local"):
        settings |= {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "8",
                     "spark.ui.showConsoleProgress": "false",  # statectl draws its own
                     # the JVM only schedules here (Python tasks do the work, rows are handed
                     # over in files: formats.spark.jobs.exchange_mode), and it lives for one
                     # command: its C2 compiler threads cost more CPU than they ever win back
                     "spark.driver.extraJavaOptions": JIT_OPTIONS}
    settings["spark.ui.showConsoleProgress"] = "false"  # statectl draws its own progress
    for key, value in {**settings, **(conf or {})}.items():
        builder = builder.config(key, value)
    level = (conf or {}).get("statectl.log.level")
    if level is None:
        with _jvm_output_to(spark_log_path()):
            session = builder.getOrCreate()
    else:
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel(level or "ERROR")
    forward_storage_environment(session)
    return session
