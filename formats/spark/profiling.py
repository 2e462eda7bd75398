"""Where a Spark job's Python time goes: cProfile in the tasks, on demand.

With ``$STATECTL_SPARK_PROFILE`` set to a directory (read on the driver when a job is built;
on a cluster it must be one every executor can write to), every Python function statectl runs
in a Spark task (``mapInArrow``) is profiled with :mod:`cProfile` from its first batch to its
last, and the profile is written to ``<directory>/<name>-<partition>-<pid>-<n>.prof``. The
profiler follows the task's thread, so the profile includes PySpark's own work in it: reading
Arrow batches from the JVM and writing the results back. What the JVM does meanwhile (the
shuffle, its conversions) is in Spark's task metrics (the event log), not here.
:func:`summarise` adds profiles up by step. Off (the default), nothing is wrapped.
"""

from __future__ import annotations

import cProfile
import itertools
import os
import pstats
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

__all__ = ["PROFILE_VARIABLE", "STEPS", "profiled", "summarise"]

PROFILE_VARIABLE = "STATECTL_SPARK_PROFILE"

ArrowFunction = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]
_COUNTER = itertools.count()


def profiled(name: str, function: ArrowFunction) -> ArrowFunction:
    """``function`` profiled in its task when ``$STATECTL_SPARK_PROFILE`` is set, else itself."""
    directory = os.environ.get(PROFILE_VARIABLE)
    if not directory:
        return function

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext
        context = TaskContext.get()
        partition = 0 if context is None else context.partitionId()
        profile = cProfile.Profile(time.process_time)
        profile.enable()
        try:
            yield from function(batches)
        finally:
            profile.disable()
            Path(directory).mkdir(parents=True, exist_ok=True)
            profile.dump_stats(f"{directory}/{name}-{partition}-{os.getpid()}-"
                               f"{next(_COUNTER)}.prof")

    return run


#: Steps of a task, each the functions (``file:function`` suffixes, matched on the profile's
#: own time of each function, ``tottime``) whose time counts for it; the rest is "other".
STEPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("parquet read", ("read_row_groups", "read_table", "_read_table", "read_csv", "read_json")),
    ("java hash", ("key_hash.py:murmur_hashes", "key_hash.py:_string_hashes",
                   "{method 'reduceat'", "{method 'repeat'", "{method 'searchsorted'",
                   "{method 'astype'", "function_base_impl.py:diff")),
    ("sort (argsort, take)", ("{method 'argsort'", "compute.py:take", "{method 'take'",
                              "sort_by", "sort_indices")),
    ("arrow ipc (blocks)", ("ipc.py:", "{method 'to_pybytes'", "write_table' of 'pyarrow.lib",
                            "RecordBatchStreamWriter", "{method 'read_all'",
                            "concat_tables")),
    ("jvm <-> python (pyspark)", ("serializers.py:", "socket.py:", "{method 'readinto'",
                                  "{method 'read' of '_io", "{method 'write' of '_io",
                                  "{method 'flush' of '_io", "worker.py:",
                                  "{method '_export_to_c'", "_import_from_c")),
    ("parquet write", ("core.py:write_table", "parquet/core.py:close", "_flush")),
    ("checksum, fsync", ("_hashlib.HASH", "posix.fsync", "{method 'read' of 'pyarrow")),
    ("statecore job (per record)", ("statecore/",)),
    ("records to python", ("to_pylist", "as_py")),
)


def summarise(paths: Sequence[str | Path]) -> dict[str, float]:
    """Seconds per step (:data:`STEPS`) of the profiles ``paths``, plus ``other`` and ``total``.

    A function's own time (``tottime``) counts for the first step one of whose patterns its
    ``file:line(function)`` label contains (the file reduced to its last two path parts).
    """
    out = {name: 0.0 for name, _ in STEPS} | {"other": 0.0, "total": 0.0}
    for path in paths:
        stats: dict[tuple[str, int, str], tuple[Any, ...]] = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
        for (file, _, function), (_, _, own, _, _) in stats.items():
            label = f"{'/'.join(Path(file).parts[-2:])}:{function}" if file != "~" else function
            step = next((name for name, patterns in STEPS
                         if any(p in label for p in patterns)), "other")
            out[step] += own
            out["total"] += own
    return out
