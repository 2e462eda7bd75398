"""``statectl build --engine spark``: the local build's state, computed by Spark tasks.

The job is the local engine's, cut along its subtasks (:func:`statecore.job.open_subtask`):

1. one task per input file reads it (the same reader as the local engine) and returns its
   schema and row count; the driver checks that every input has the same columns;
2. one task per input file reads it again and tags every record with its key group (Java
   hashing vectorised over the key column), the subtask that owns it, and its position in the
   local job's reading order (subtask owning the file, file, row: split ``j`` is read by
   subtask ``j % parallelism``);
3. Spark repartitions the records by subtask, one partition each (blocks of records, as Arrow
   IPC streams, carry a value Spark hashes to their subtask's partition: the subtask number
   itself could collide); each partition is sorted into that order (by Arrow, in the task),
   and a task per partition runs its subtask exactly as the local job does (the same
   backend, aggregations and state) and writes its snapshot with the format's writer;
4. the driver runs subtasks that received no record itself (empty keyed state, but their
   source positions and configuration), writes ``_metadata.json`` and publishes the
   checkpoint atomically in the state directory.

Only schemas, row counts and each subtask's metadata (handles and file checksums) reach the
driver. The checkpoint equals a local build's: ``statectl diff`` finds nothing (TTL timestamps
aside: they are the time of processing). There are no checkpoints on the way and no
``--resume``: a Spark build is one pass that either publishes its checkpoint or nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from formats.build import BuildSummary
from formats.commit import staged
from formats.filesystems import resolve_filesystem
from formats.inputs import InputError, column_spec, read_input
from formats.key_hash import key_groups
from formats.spark import require_pyspark
from formats.spark.jobs import (
    BLOCK_BYTES,
    BLOCKS,
    PARTITION,
    arrow_blocks,
    engine_errors,
    partition_tags,
    read_blocks,
    spark_schema,
)
from formats.statectl.publish import publish
from formats.statectl.storage import DirectoryCheckpointStorage
from formats.statectl.writer import subtask_states, write_subtask
from statecore.aggregations import AggregatingFunction, parse_aggregation
from statecore.checkpoint import (
    CheckpointKind,
    CheckpointMetadata,
    FileInfo,
    OperatorMetadata,
    SubtaskMetadata,
    SubtaskSnapshot,
    subtask_from_json,
    subtask_to_json,
)
from statecore.errors import InvalidArgumentError
from statecore.job import open_subtask, subtask_snapshot
from statecore.key_groups import compute_default_max_parallelism
from statecore.serializers import resolve_type
from statecore.ttl import TtlConfig

__all__ = ["spark_build"]

_ORDER = ["_subtask", "_owner", "_split", "_row"]


def _inputs_described(spark: Any, inputs: Sequence[str]) -> list[tuple[pa.Schema, int]]:
    schema = pa.schema([("i", pa.int64()), ("schema", pa.binary()), ("rows", pa.int64())])

    def describe(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            chosen = batch.column(0).to_pylist()
            tables = [read_input(inputs[i]) for i in chosen]
            yield pa.RecordBatch.from_pydict(
                {"i": chosen, "schema": [t.schema.serialize().to_pybytes() for t in tables],
                 "rows": [t.num_rows for t in tables]}, schema=schema)

    with engine_errors("reading the inputs"):
        rows = spark.range(len(inputs), numPartitions=len(inputs)).mapInArrow(
            describe, spark_schema(schema)).collect()
    found = {r.i: (pa.ipc.read_schema(pa.py_buffer(r.schema)), r.rows) for r in rows}
    return [found[i] for i in range(len(inputs))]


def spark_build(spark: Any, inputs: Sequence[str], *, key: str, aggregations: Sequence[str],
                checkpoint_dir: str, key_type: str | None = None, parallelism: int = 1,
                max_parallelism: int | None = None, uid: str = "build",
                ttl: int | None = None, block_bytes: int = BLOCK_BYTES) -> BuildSummary:
    """Build keyed state from ``inputs`` on ``spark`` (see the module doc).

    As :func:`formats.build.build_state`, without checkpoints on the way or a resume.
    ``block_bytes``: the size of the blocks records cross the shuffle in
    (:func:`formats.spark.jobs.arrow_blocks`).
    """
    require_pyspark()
    if not inputs:
        raise InvalidArgumentError("give at least one input file")
    if not aggregations:
        raise InvalidArgumentError("give at least one --agg (e.g. --agg count)")
    described = _inputs_described(spark, inputs)
    first = described[0][0]
    for path, (schema, _) in zip(inputs, described, strict=True):
        if not schema.equals(first):
            raise InputError(f"{path} has columns {schema.names} of other types than "
                             f"{inputs[0]}: every input needs the same columns")
    column_types = {f.name: column_spec(f.type, f.name) for f in first}
    if key not in column_types:
        raise InvalidArgumentError(f"--key {key!r} is not a column of the input "
                                   f"(columns: {', '.join(sorted(column_types))})")
    ttl_config = None if ttl is None else TtlConfig(ttl)
    parsed = [parse_aggregation(spec, column_types, ttl_config) for spec in aggregations]
    AggregatingFunction(parsed)  # refuses two aggregations sharing a state, here
    p = parallelism
    m = compute_default_max_parallelism(p) if max_parallelism is None else max_parallelism
    spec = key_type or column_types[key]
    serializer = resolve_type(spec)
    configuration = {"key": key, "key_type": spec, "aggregations": " ".join(aggregations),
                     "ttl": "" if ttl is None else str(ttl)}
    name = f"statectl build ({', '.join(aggregations)})"
    positions = [{path: rows for j, (path, (_, rows)) in enumerate(zip(inputs, described,
                                                                        strict=True))
                  if j % p == i} for i in range(p)]

    def subtask(index: int, records: list[dict[str, Any]]) -> SubtaskSnapshot:
        context = open_subtask(index, p, m, serializer, function := AggregatingFunction(parsed),
                               configuration)
        for record in records:
            context.keyed.set_current_key(record[key])
            function.process(record, context)
        return subtask_snapshot(context, positions[index])

    template = subtask(0, [])
    states = subtask_states(template)
    template.keyed.close()  # type: ignore[union-attr]

    storage = DirectoryCheckpointStorage(checkpoint_dir)
    with storage.writing():  # one build per state directory; its checkpoint id claimed
        checkpoint_id = storage.claim(
            1 + max((c.checkpoint_id for c in storage.completed()), default=0))
        location = storage.location(checkpoint_id, CheckpointKind.CHECKPOINT)
        fs, final = resolve_filesystem(location, None)
        columns = list(first.names)
        tagged = first
        for column, kind in (("_subtask", pa.int32()), ("_owner", pa.int32()),
                             ("_split", pa.int32()), ("_row", pa.int64())):
            tagged = tagged.append(pa.field(column, kind))
        result_schema = pa.schema([("subtask", pa.int32()), ("metadata", pa.string()),
                                   ("files", pa.string())])

        # one partition per subtask: hash partitioning on the subtask number itself could put
        # several subtasks in one partition (pmod(hash(0), 2) == pmod(hash(1), 2))
        tag_of = np.asarray(partition_tags(spark, p), dtype=np.int64)
        with staged(fs, final, location, "writing checkpoint") as staging:
            def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
                for batch in batches:
                    for j in batch.column(0).to_pylist():
                        table = read_input(inputs[j])
                        groups = key_groups(table.column(key), spec, m)
                        n = table.num_rows
                        table = table.append_column(
                            "_subtask", pa.array((groups.astype(np.int64) * p // m).astype(
                                np.int32))).append_column(
                            "_owner", pa.array(np.full(n, j % p, dtype=np.int32))).append_column(
                            "_split", pa.array(np.full(n, j, dtype=np.int32))).append_column(
                            "_row", pa.array(np.arange(n, dtype=np.int64)))
                        yield from arrow_blocks(table.cast(tagged),
                                                groups.astype(np.int64) * p // m, tag_of,
                                                block_bytes)

            def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
                table = read_blocks(batches, tagged)
                if table.num_rows == 0:
                    return
                table = table.sort_by([(column, "ascending") for column in _ORDER])
                owners = np.asarray(table.column("_subtask").to_numpy(), dtype=np.int32)
                out: dict[str, list[Any]] = {"subtask": [], "metadata": [], "files": []}
                for index in np.unique(owners):
                    lo, hi = np.searchsorted(owners, [index, index + 1])
                    records = table.slice(lo, hi - lo).select(columns).to_pylist()
                    files: list[FileInfo] = []
                    meta = write_subtask(fs, staging, 0, subtask(int(index), records),
                                         dict(states), files)
                    out["subtask"].append(int(index))
                    out["metadata"].append(json.dumps(subtask_to_json(meta)))
                    out["files"].append(json.dumps([[f.path, f.size, f.checksum] for f in files]))
                yield pa.RecordBatch.from_pydict(out, schema=result_schema)

            with engine_errors("building state"):
                rows = (spark.range(len(inputs), numPartitions=len(inputs))
                        .mapInArrow(read, spark_schema(BLOCKS))
                        .repartition(p, PARTITION)
                        .mapInArrow(run, spark_schema(result_schema))
                        .collect())
            subtasks: dict[int, SubtaskMetadata] = {}
            files: list[FileInfo] = []
            for row in rows:
                subtasks[row.subtask] = subtask_from_json(json.loads(row.metadata))
                files.extend(FileInfo(path, size, checksum)
                             for path, size, checksum in json.loads(row.files))
            for index in range(p):  # no record for it: its operator state still matters
                if index not in subtasks:
                    subtasks[index] = write_subtask(fs, staging, 0, subtask(index, []),
                                                    dict(states), files)
            metadata = CheckpointMetadata(
                checkpoint_id, CheckpointKind.CHECKPOINT, int(time.time() * 1000),
                (OperatorMetadata(uid, name, p, m, serializer.spec,
                                  tuple(states[n] for n in sorted(states)),
                                  tuple(subtasks[i] for i in range(p))),),
                tuple(sorted(files, key=lambda f: f.path)))
            publish(fs, staging, final, metadata)
    total = sum(rows for _, rows in described)
    return BuildSummary(records=total, total_records=total, restored_from=None, checkpoints=(),
                        failed_checkpoints={}, final_checkpoint=checkpoint_id,
                        final_location=location, states=tuple(a.state_name for a in parsed),
                        parallelism=p, max_parallelism=m)
