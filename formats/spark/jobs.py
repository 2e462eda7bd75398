"""statectl's jobs on Spark: rescale rewrites, export, the key-group histogram.

Each plugs into the local engine's orchestration (which plans, stages, writes metadata and
publishes) and replaces only the part that touches data:

* :func:`spark_keyed_writer` (for :func:`formats.ops.rescale.rescale_checkpoint`): one task per
  old keyed handle reads it with the checkpoint reader, drops expired entries and computes
  the new key group (vectorised Java hashing), target subtask and partition: equal ranges of
  new key groups, at least two per core, so every core writes and a partition's key groups
  belong to a few consecutive subtasks (keys hash evenly over key groups). Rows reach their
  partition's task by :func:`exchange_rows`; each partition sorts its rows by key group
  (Arrow, in the task) and writes its subtasks' rows with the format's writer
  (``op-N/keyed/S/<subtask>-p<partition>.parquet``) and returns only ``(file, size,
  checksum, key group, first row, rows)``. A subtask may get several files (one per
  partition holding its rows): handles of one state in several files are part of the
  format.
* :func:`spark_state_writer` (for :func:`formats.ops.export.export_checkpoint`): one task per
  stored piece writes a part file; a state's table is the directory ``<state>.<ext>/`` of
  ``part-NNNNN.<ext>`` files (what ``pyarrow.dataset`` and ``spark.read`` read as one table).
* :func:`spark_footers` (for :func:`formats.ops.key_group_stats.key_group_histograms`): the
  keyed files' footers, read by tasks.

How rows reach their partition's task (:func:`exchange_mode`, also used by
:mod:`formats.spark.build`):

* ``files``, on a local master (every task on this machine, the default there): map tasks
  write a piece's rows of each partition as uncompressed Arrow IPC files in a temporary
  directory, reduce tasks memory-map them (:func:`exchange_files`). The JVM only schedules.
* ``shuffle``, on a cluster: Spark's shuffle, rows in blocks (:func:`arrow_blocks`: Arrow
  IPC streams of many rows of one partition) that Spark's hash partitioning delivers (each
  block carries a value Spark hashes to its partition), with no sampling pass over the data
  as range partitioning would make and no conversion of every row to the JVM's format and
  back. On one machine the JVM's copies, conversions and compression of every block cost
  about as much CPU as the Python tasks' own work (``bench/bench_spark.py``).

Errors in tasks or in Spark become an :class:`~statecore.errors.EngineError` naming the
cause; the staging directory is then removed as for any failed write.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import pyarrow as pa

from formats.model.checkpoint import Checkpoint
from formats.model.columns import keyed_schema
from formats.ops.export import StateExport, StateWriter
from formats.ops.key_group_stats import footer_row_groups
from formats.ops.rescale import (
    KeyedJob,
    KeyedOutput,
    KeyedWriter,
    RehashCounter,
    RehashTask,
    count_new_key_groups,
    prepare_rows,
    write_sorted,
)
from formats.spark import require_pyspark
from formats.spark.profiling import profiled
from statecore.checkpoint import FileInfo, KeyedStateHandle, KeyGroupRows
from statecore.errors import EngineError, InvalidArgumentError, StatectlError

__all__ = ["BLOCKS", "EXCHANGES", "EXCHANGE_CONF", "PARTITION", "arrow_blocks",
           "engine_errors", "exchange_files", "exchange_mode", "exchange_rows",
           "partition_tags", "read_blocks", "read_exchange_files", "spark_footers",
           "spark_keyed_writer", "spark_rehash_counter", "spark_schema", "spark_state_writer"]

PARTITION = "_partition"
#: Rows cross Spark's shuffle as Arrow IPC streams of many rows each ("blocks"), tagged with
#: their partition: the JVM moves a few large binary values instead of converting every row
#: to its own format and back (which took most of a rewrite's time).
BLOCKS = pa.schema([(PARTITION, pa.int64()), ("block", pa.binary())])
#: A block's target size: well under Spark's Arrow batch limit
#: (``spark.sql.execution.arrow.maxBytesPerBatch``, 64 MiB by default) and Arrow's 2 GiB
#: binary column limit, large enough that a block's fixed costs do not matter.
BLOCK_BYTES = 8 << 20
_STATS = pa.schema([("subtask", pa.int32()), ("path", pa.string()), ("size", pa.int64()),
                    ("checksum", pa.string()), ("key_group", pa.int32()),
                    ("first_row", pa.int64()), ("row_count", pa.int64())])


def spark_schema(schema: pa.Schema) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema
    return from_arrow_schema(schema)


def _cause(exc: BaseException) -> str:
    """The useful line of a Spark failure: the Python error of a task, if any."""
    text = str(exc)
    found = re.findall(r"^((?:\w+\.)*\w*Error: .+)$", text, flags=re.MULTILINE)
    return found[-1] if found else text.strip().splitlines()[0] if text.strip() else repr(exc)


@contextmanager
def engine_errors(what: str) -> Iterator[None]:
    """Turn a Spark failure into an :class:`EngineError` (a StatectlError stays as it is)."""
    try:
        yield
    except StatectlError:
        raise
    except Exception as exc:  # py4j, pyspark.errors, a task's Python error: all the same here
        _let_tasks_stop()
        raise EngineError(f"{what} failed on Spark: {_cause(exc)}") from exc


#: After a failed job: how long its other tasks may take to stop, at most (seconds), and the
#: grace after its stages ended: Spark kills a cancelled task's Python worker after
#: ``spark.python.task.killTimeout`` (2 s by default).
STRAGGLER_SECONDS = 30.0
KILL_GRACE_SECONDS = 3.0


def _let_tasks_stop() -> None:
    """Wait until the failed job's other tasks have stopped (bounded).

    A job fails at its first failed task; the others are cancelled but may still be writing
    a file into the staging directory, which the caller removes next (:func:`formats.storage.commit
    .staged`): a task still running would leave a file behind.
    """
    try:
        from pyspark.sql import SparkSession
        session = SparkSession.getActiveSession()
        if session is None:
            return
        tracker = session.sparkContext.statusTracker()
        deadline = time.monotonic() + STRAGGLER_SECONDS
        while tracker.getActiveStageIds() and time.monotonic() < deadline:
            time.sleep(0.1)
    except Exception:  # noqa: BLE001 - Spark itself is gone: no task is running
        return
    time.sleep(KILL_GRACE_SECONDS)


def spark_keyed_writer(spark: Any, block_bytes: int = BLOCK_BYTES,
                       exchange: str | None = None) -> KeyedWriter:
    """A :data:`formats.ops.rescale.KeyedWriter` running on ``spark`` (see the module doc).

    ``block_bytes``: the size of the blocks rows cross Spark's shuffle in
    (:func:`arrow_blocks`). ``exchange``: how rows reach their partition's task
    (:func:`exchange_mode`; default: files on a local master, Spark's shuffle on a cluster).
    """
    require_pyspark()
    mode = exchange_mode(spark, exchange)

    def write(job: KeyedJob) -> KeyedOutput:
        assert job.op.key_type is not None
        handles = [h for st in sorted(job.op.subtasks, key=lambda s: s.index)
                   for h in st.keyed if h.state == job.state.name]
        p, m = job.plan.new_parallelism, job.plan.new_max_parallelism
        if not handles:
            return KeyedOutput(tuple(() for _ in range(p)), (), 0, 0)
        schema = keyed_schema(job.state, job.op.key_type)
        dropped = spark.sparkContext.accumulator(0)
        # ranges of key groups (so of subtasks: subtask = kg * p // M grows with kg), at least
        # two per core: every core writes, and a partition spans at most a few subtasks. A
        # row's partition is decided in the read task, from its key group (keys hash evenly
        # over key groups): partition = kg * partitions // M.
        partitions = max(p, 2 * spark.sparkContext.defaultParallelism)
        partition_of = np.arange(m, dtype=np.int64) * partitions // m

        def prepared(index: int) -> tuple[pa.Table, np.ndarray[Any, Any]]:
            table, groups, gone = prepare_rows(
                job.checkpoint.keyed_table(job.op.uid, handles[index]), job)
            dropped.add(gone)
            return table.cast(schema), partition_of[groups]

        def write_rows(table: pa.Table, partition: int) -> Iterator[pa.RecordBatch]:
            if table.num_rows:
                yield _write_partition(job, table, partition)

        with engine_errors(f"rewriting state {job.state.name!r}"):
            rows = exchange_rows(spark, mode, len(handles), partitions, schema, prepared,
                                 write_rows, _STATS, block_bytes, "rewrite")
        by_file: dict[tuple[int, str], list[KeyGroupRows]] = defaultdict(list)
        files: dict[str, FileInfo] = {}
        for row in rows:
            by_file[row.subtask, row.path].append(
                KeyGroupRows(row.key_group, row.first_row, row.row_count))
            files[row.path] = FileInfo(row.path, row.size, row.checksum)
        out: list[list[KeyedStateHandle]] = [[] for _ in range(p)]
        for sub in job.plan.subtasks:
            assert sub.key_group_range is not None
            for (subtask, path), kg_rows in sorted(by_file.items()):
                if subtask == sub.index:
                    out[subtask].append(KeyedStateHandle(
                        job.state.name, path, sub.key_group_range,
                        tuple(sorted(kg_rows, key=lambda r: r.key_group))))
        entries = sum(r.row_count for kg_rows in by_file.values() for r in kg_rows)
        return KeyedOutput(tuple(tuple(h) for h in out), tuple(files[f] for f in sorted(files)),
                           entries, int(dropped.value))

    return write


def _write_partition(job: KeyedJob, table: pa.Table, partition: int) -> pa.RecordBatch:
    """Write one partition's rows (any order) sorted by key group, a file per subtask.

    Rows of one key group keep their order in ``table``. Returns the ``_STATS`` rows.
    """
    p, m = job.plan.new_parallelism, job.plan.new_max_parallelism
    groups = np.asarray(table.column("key_group").to_numpy(), dtype=np.int32)
    order = np.argsort(groups, kind="stable")
    table, groups = table.take(pa.array(order)), groups[order]
    subtasks = groups.astype(np.int64) * p // m
    stats: dict[str, list[Any]] = {f.name: [] for f in _STATS}
    for subtask in np.unique(subtasks):
        lo, hi = np.searchsorted(subtasks, [subtask, subtask + 1])
        relative = job.file(int(subtask), f"-p{partition}")
        info, rows = write_sorted(job, job.fs, relative, table.slice(lo, hi - lo),
                                  groups[lo:hi])
        for r in rows:
            for name, value in (("subtask", int(subtask)), ("path", info.path),
                                ("size", info.size), ("checksum", info.checksum),
                                ("key_group", r.key_group), ("first_row", r.first_row),
                                ("row_count", r.row_count)):
                stats[name].append(value)
    return pa.RecordBatch.from_pydict(stats, schema=_STATS)


#: A map task's rows: ``index`` (of a piece of input) -> (rows, partition of each row).
Prepare = Callable[[int], tuple[pa.Table, np.ndarray[Any, Any]]]
#: A reduce task: (a partition's rows, the partition) -> result batches.
Reduce = Callable[[pa.Table, int], Iterator[pa.RecordBatch]]


def exchange_rows(spark: Any, mode: str, pieces: int, partitions: int, schema: pa.Schema,
                  prepare: Prepare, reduce: Reduce, out_schema: pa.Schema, block_bytes: int,
                  name: str) -> list[Any]:
    """Map pieces ``0..pieces-1`` to rows, hand them to ``partitions``, reduce; result rows.

    ``prepare(i)`` runs in a task per piece and gives rows (of ``schema``) and each row's
    partition; ``reduce(rows, j)`` runs in a task per partition and yields ``out_schema``
    batches, which are collected. ``mode`` (:func:`exchange_mode`): ``files``
    (:func:`_through_files`: a partition's rows in piece order, each piece's in its order)
    or ``shuffle`` (:func:`_through_shuffle`: a piece's rows keep their order, pieces arrive
    in any order). ``name`` names the tasks' profiles (:mod:`formats.spark.profiling`).
    """
    if mode == "files":
        return _through_files(spark, pieces, partitions, schema, prepare, reduce, out_schema,
                              name)
    return _through_shuffle(spark, pieces, partitions, schema, prepare, reduce, out_schema,
                            block_bytes, name)


def _through_shuffle(spark: Any, pieces: int, partitions: int, schema: pa.Schema,
                     prepare: Prepare, reduce: Reduce, out_schema: pa.Schema,
                     block_bytes: int, name: str) -> list[Any]:
    """Rows cross Spark's shuffle as Arrow IPC blocks (:func:`arrow_blocks`).

    Each block is tagged with a value Spark's hash partitioning sends to its partition
    (:func:`partition_tags`; range partitioning would first run the whole map stage once
    more to sample), so the JVM moves a few large binary values instead of converting every
    row to its own format and back. A partition's blocks arrive in no particular order.
    """
    tags = partition_tags(spark, partitions)

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for index in batch.column(0).to_pylist():
                table, targets = prepare(index)
                yield from arrow_blocks(table, targets, tags, block_bytes)

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext
        context = TaskContext.get()
        yield from reduce(read_blocks(batches, schema),
                          0 if context is None else context.partitionId())

    return list(spark.range(pieces, numPartitions=pieces)
                .mapInArrow(profiled(f"{name}-map", read), spark_schema(BLOCKS))
                .repartition(partitions, PARTITION)
                .mapInArrow(profiled(f"{name}-reduce", write), spark_schema(out_schema))
                .collect())


_EXCHANGED = pa.schema([("piece", pa.int64()), ("partition", pa.int64()),
                        ("path", pa.string())])


def _through_files(spark: Any, pieces: int, partitions: int, schema: pa.Schema,
                   prepare: Prepare, reduce: Reduce, out_schema: pa.Schema, name: str
                   ) -> list[Any]:
    """Rows handed over in files on this machine (local masters), not through the JVM.

    Two Spark jobs: map tasks write each piece's rows of partition ``j`` as an Arrow IPC
    file (uncompressed: it stays in the page cache), ``<directory>/<piece>-<j>.arrow``, and
    return only its name; then a task per partition memory-maps its files and gets their
    rows in piece order (deterministic, unlike a shuffle's arrival order). The directory is
    removed at the end, whatever happens.
    """
    directory = tempfile.mkdtemp(prefix=f"statectl-{name}-")
    try:
        def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for batch in batches:
                for index in batch.column(0).to_pylist():
                    table, targets = prepare(index)
                    found: dict[str, list[Any]] = {f.name: [] for f in _EXCHANGED}
                    for target, path in exchange_files(table, targets,
                                                       f"{directory}/{index}"):
                        for column, value in (("piece", index), ("partition", target),
                                              ("path", path)):
                            found[column].append(value)
                    yield pa.RecordBatch.from_pydict(found, schema=_EXCHANGED)

        written = (spark.range(pieces, numPartitions=min(pieces, 4 * partitions))
                   .mapInArrow(profiled(f"{name}-map", read), spark_schema(_EXCHANGED))
                   .collect())
        inbox: list[list[tuple[int, str]]] = [[] for _ in range(partitions)]
        for row in written:
            inbox[row.partition].append((row.piece, row.path))

        def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for batch in batches:
                for partition in batch.column(0).to_pylist():
                    paths = [path for _, path in sorted(inbox[partition])]
                    yield from reduce(read_exchange_files(paths, schema), partition)
                    for path in paths:
                        os.remove(path)  # the page cache it holds is free again

        return list(spark.range(partitions, numPartitions=partitions)
                    .mapInArrow(profiled(f"{name}-reduce", write), spark_schema(out_schema))
                    .collect())
    except BaseException:
        _let_tasks_stop()  # a task of the failed job may still be writing into the directory
        raise
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def exchange_files(table: pa.Table, partitions: np.ndarray[Any, Any], prefix: str
                   ) -> Iterator[tuple[int, str]]:
    """Write ``table``'s rows of each partition as an Arrow IPC file ``<prefix>-<j>.arrow``.

    Row ``i`` goes to partition ``partitions[i]``; rows keep their order. Yields ``(j, path)``
    for each partition that got rows.
    """
    if table.num_rows == 0:
        return
    order = np.argsort(partitions, kind="stable")
    ordered, targets = table.take(pa.array(order)), partitions[order]
    for target in np.unique(targets):
        lo, hi = np.searchsorted(targets, [target, target + 1])
        path = f"{prefix}-{int(target)}.arrow"
        with pa.ipc.new_file(path, table.schema) as writer:
            writer.write_table(ordered.slice(int(lo), int(hi - lo)), max_chunksize=1 << 20)
        yield int(target), path


def read_exchange_files(paths: Sequence[str], schema: pa.Schema) -> pa.Table:
    """The rows of the files ``paths`` (:func:`exchange_files`), one after another."""
    tables = [pa.ipc.open_file(pa.memory_map(path)).read_all() for path in paths]
    return pa.concat_tables(tables) if tables else schema.empty_table()


#: How rows reach their partition's task: "files" (Arrow IPC files on this machine) or
#: "shuffle" (Spark's shuffle). ``--spark-conf statectl.exchange=...`` chooses.
EXCHANGES = ("files", "shuffle")
EXCHANGE_CONF = "statectl.exchange"


def exchange_mode(spark: Any, exchange: str | None = None) -> str:
    """``exchange``, else the session's ``statectl.exchange``, else by master.

    A local master (``local``, ``local[N]``, ``local-cluster[...]``) runs every task on this
    machine: rows are handed over in files (Spark's shuffle would copy, convert and compress
    every block through the JVM: most of the JVM's work in a rewrite). Any other master
    shuffles (its executors' disks need not be shared).
    """
    chosen = exchange or spark.conf.get(EXCHANGE_CONF, None)
    if chosen is None:
        chosen = "files" if spark.sparkContext.master.startswith("local") else "shuffle"
    if chosen not in EXCHANGES:
        raise InvalidArgumentError(f"{EXCHANGE_CONF}={chosen!r}: one of "
                                   f"{', '.join(EXCHANGES)}")
    return str(chosen)


def arrow_blocks(table: pa.Table, partitions: np.ndarray[Any, Any],
                 tags: Sequence[int] | np.ndarray[Any, Any],
                 block_bytes: int = BLOCK_BYTES) -> Iterator[pa.RecordBatch]:
    """``table``'s rows as ``BLOCKS`` batches: row ``i`` goes to partition ``partitions[i]``.

    Each block is an Arrow IPC stream of rows of one partition (in their order in
    ``table``) of about ``block_bytes``, tagged with ``tags[partition]``; one block per
    batch, a partition's blocks in order.
    """
    if table.num_rows == 0:
        return
    order = np.argsort(partitions, kind="stable")
    ordered, targets = table.take(pa.array(order)), partitions[order]
    per_block = max(1, block_bytes * table.num_rows // max(1, table.nbytes))
    for target in np.unique(targets):
        lo, hi = np.searchsorted(targets, [target, target + 1])
        tag = pa.array([int(tags[int(target)])], pa.int64())
        for start in range(int(lo), int(hi), per_block):
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, table.schema) as writer:
                writer.write_table(ordered.slice(start, min(per_block, int(hi) - start)))
            # one block per batch: a batch's binary column stays far below Arrow's 2 GiB
            yield pa.RecordBatch.from_arrays(
                [tag, pa.array([sink.getvalue().to_pybytes()], pa.binary())], schema=BLOCKS)


def read_blocks(batches: Iterator[pa.RecordBatch], schema: pa.Schema) -> pa.Table:
    """The rows of the ``BLOCKS`` batches ``batches`` (see :func:`arrow_blocks`)."""
    tables = [pa.ipc.open_stream(block).read_all()
              for batch in batches for block in batch.column("block").to_pylist()]
    return pa.concat_tables(tables) if tables else schema.empty_table()


def partition_tags(spark: Any, partitions: int) -> list[int]:
    """Per partition ``j`` a value that ``repartition(partitions, column)`` sends to ``j``.

    Spark's hash partitioning puts a row in ``pmod(hash(column), partitions)`` (Murmur3,
    seed 42, the SQL ``hash`` function); Spark itself computes it here for a few small
    values, so no hash function is re-implemented. Had Spark another rule, rows would only
    be spread differently: a partition writes whatever rows it gets.
    """
    from pyspark.sql import functions as F
    found: dict[int, int] = {}
    start, step = 0, 16 * partitions
    while len(found) < partitions:
        if start >= 1 << 24:
            raise EngineError(f"no values found that Spark hashes to each of {partitions} "
                              f"partitions")
        for row in (spark.range(start, start + step)
                    .select("id", F.expr(f"pmod(hash(id), {partitions})").alias("to"))
                    .collect()):
            found.setdefault(row.to, row.id)
        start += step
    return [found[j] for j in range(partitions)]


def spark_state_writer(spark: Any) -> StateWriter:
    """A :data:`formats.ops.export.StateWriter` running on ``spark`` (see the module doc)."""
    require_pyspark()
    stats = pa.schema([("part", pa.string()), ("rows", pa.int64())])

    def write(task: StateExport, done: Callable[[], None]) -> tuple[str, int]:
        directory = task.path  # "<uid>/<state>.<ext>": a directory of parts
        extension = task.path.rsplit(".", 1)[-1]
        count = max(1, len(task.pieces))

        def write_parts(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for batch in batches:
                for index in batch.column(0).to_pylist():
                    part = f"{directory}/part-{index:05d}.{extension}"
                    pieces = task.pieces[index:index + 1]
                    rows = task.write(part, pieces)
                    yield pa.RecordBatch.from_pydict({"part": [part], "rows": [rows]},
                                                     schema=stats)

        with engine_errors(f"exporting state {task.state.name!r}"):
            written = (spark.range(count, numPartitions=count)
                       .mapInArrow(write_parts, spark_schema(stats)).collect())
        for _ in task.pieces:
            done()
        return directory, sum(r.rows for r in written)

    return write


def spark_footers(spark: Any, checkpoint: Checkpoint, files: list[str]
                  ) -> dict[str, list[tuple[int, int, int]]]:
    """The row groups of ``files``, read by Spark tasks.

    As :func:`formats.ops.key_group_stats.footer_row_groups`; only the footers' figures come back.
    """
    require_pyspark()
    schema = pa.schema([("file", pa.string()), ("first_row", pa.int64()),
                        ("rows", pa.int64()), ("bytes", pa.int64())])
    if not files:
        return {}

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            chosen = [files[i] for i in batch.column(0).to_pylist()]
            found = footer_row_groups(checkpoint, chosen)
            columns: dict[str, list[Any]] = {f.name: [] for f in schema}
            for name, groups in found.items():
                for first, rows, size in groups:
                    for column, value in (("file", name), ("first_row", first),
                                          ("rows", rows), ("bytes", size)):
                        columns[column].append(value)
            yield pa.RecordBatch.from_pydict(columns, schema=schema)

    parallel = min(len(files), max(1, spark.sparkContext.defaultParallelism * 4))
    with engine_errors("reading footers"):
        rows = spark.range(len(files), numPartitions=parallel).mapInArrow(
            read, spark_schema(schema)).collect()
    out: dict[str, list[tuple[int, int, int]]] = {f: [] for f in files}
    for row in rows:
        out[row.file].append((row.first_row, row.rows, row.bytes))
    return {f: sorted(groups) for f, groups in out.items()}


def spark_rehash_counter(spark: Any) -> RehashCounter:
    """A :data:`formats.ops.rescale.RehashCounter` on ``spark``, for a max-parallelism change.

    One task per handle hashes its keys; only the per-key-group counts come back.
    """
    require_pyspark()

    def count(checkpoint: Checkpoint, given: Sequence[RehashTask], max_parallelism: int
              ) -> list[np.ndarray[Any, Any]]:
        tasks = list(given)
        if not tasks:
            return []
        schema = pa.schema([("task", pa.int64()), ("counts", pa.list_(pa.int64()))])

        def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for batch in batches:
                chosen = batch.column(0).to_pylist()
                found = count_new_key_groups(checkpoint, [tasks[i] for i in chosen],
                                             max_parallelism)
                yield pa.RecordBatch.from_pydict(
                    {"task": chosen, "counts": [c.tolist() for c in found]}, schema=schema)

        with engine_errors("hashing keys"):
            rows = spark.range(len(tasks), numPartitions=len(tasks)).mapInArrow(
                profiled("rehash-count", run), spark_schema(schema)).collect()
        by_task = {row.task: np.asarray(row.counts, dtype=np.int64) for row in rows}
        return [by_task[i] for i in range(len(tasks))]

    return count
