"""``statectl build --engine spark``: the local build's state, computed by Spark tasks.

The job is the local engine's, cut along its subtasks (:func:`statecore.job.open_subtask`):

1. one task per input file returns its schema and row count (a Parquet file's footer; CSV
   and JSON Lines files are read); the driver checks that every input has the same columns;
2. one task per input file reads it (the same reader as the local engine) and tags every
   record with its key group (Java hashing vectorised over the key column), the subtask that
   owns it, and its position in the local job's reading order (subtask owning the file, file,
   row: split ``j`` is read by subtask ``j % parallelism``);
3. the records reach one task per subtask (:func:`formats.spark.jobs.exchange_rows`: Arrow
   IPC files on this machine for a local master, Spark's shuffle in blocks for a cluster);
   each sorts them into that order (by Arrow) and runs its subtask exactly as the local job
   does (the same backend, aggregations and state; the backend takes the key groups computed
   in step 2 instead of hashing every key again), turning records into Python dicts 64k at a
   time, and writes its snapshot with the format's writer;
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
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from formats.build import BuildSeconds, BuildSummary, refuse_another_build
from formats.commit import staged
from formats.filesystems import absolute_location, resolve_filesystem
from formats.inputs import InputError, column_spec, read_input
from formats.key_hash import key_groups
from formats.spark import require_pyspark
from formats.spark.jobs import (
    BLOCK_BYTES,
    engine_errors,
    exchange_mode,
    exchange_rows,
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
#: Records turned into Python dicts at a time (a subtask's records are never all at once).
_RECORDS_AT_ONCE = 1 << 16


def _records(table: pa.Table, columns: list[str]) -> Iterator[tuple[dict[str, Any], int]]:
    """``table``'s records (its ``columns``) with their key groups (``_key_group``)."""
    for batch in table.to_batches(max_chunksize=_RECORDS_AT_ONCE):
        yield from zip(batch.select(columns).to_pylist(),
                       batch.column("_key_group").to_pylist(), strict=True)


def _described(path: str) -> tuple[pa.Schema, int]:
    """An input's columns and rows: a Parquet file's from its footer, any other file read."""
    fs, located = resolve_filesystem(path)
    if located.lower().endswith((".parquet", ".pq")):
        try:
            with fs.open_input_file(located) as stream:
                parquet = pq.ParquetFile(stream)
                return parquet.schema_arrow, parquet.metadata.num_rows
        except (pa.ArrowException, OSError):
            pass  # read_input says what is wrong with it
    table = read_input(path)
    return table.schema, table.num_rows


def _inputs_described(spark: Any, inputs: Sequence[str]) -> list[tuple[pa.Schema, int]]:
    schema = pa.schema([("i", pa.int64()), ("schema", pa.binary()), ("rows", pa.int64())])

    def describe(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            chosen = batch.column(0).to_pylist()
            found = [_described(inputs[i]) for i in chosen]
            yield pa.RecordBatch.from_pydict(
                {"i": chosen, "schema": [f.serialize().to_pybytes() for f, _ in found],
                 "rows": [rows for _, rows in found]}, schema=schema)

    with engine_errors("reading the inputs"):
        rows = spark.range(len(inputs), numPartitions=len(inputs)).mapInArrow(
            describe, spark_schema(schema)).collect()
    found = {r.i: (pa.ipc.read_schema(pa.py_buffer(r.schema)), r.rows) for r in rows}
    return [found[i] for i in range(len(inputs))]


def spark_build(spark: Any, inputs: Sequence[str], *, key: str, aggregations: Sequence[str],
                checkpoint_dir: str, key_type: str | None = None, parallelism: int = 1,
                max_parallelism: int | None = None, uid: str = "build",
                ttl: int | None = None, block_bytes: int = BLOCK_BYTES,
                exchange: str | None = None) -> BuildSummary:
    """Build keyed state from ``inputs`` on ``spark`` (see the module doc).

    As :func:`formats.build.build_state`, without checkpoints on the way or a resume.
    ``block_bytes``: the size of the blocks records cross Spark's shuffle in
    (:func:`formats.spark.jobs.arrow_blocks`); ``exchange``: how records reach their
    subtask's task (:func:`formats.spark.jobs.exchange_mode`).
    """
    require_pyspark()
    started = time.perf_counter()
    if not inputs:
        raise InvalidArgumentError("give at least one input file")
    if not aggregations:
        raise InvalidArgumentError("give at least one --agg (e.g. --agg count)")
    # the tasks open the inputs in their own working directory (a cluster's executor)
    shipped = [absolute_location(path) for path in inputs]
    described = _inputs_described(spark, shipped)
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

    # the tasks computed every record's key group (vectorised); the backend may take it as
    # it is when it hashes the key as that column's type (a --key-type checks every key)
    trusted = spec == column_types[key]

    def subtask(index: int, records: Iterable[tuple[dict[str, Any], int]]) -> SubtaskSnapshot:
        context = open_subtask(index, p, m, serializer, function := AggregatingFunction(parsed),
                               configuration)
        for record, group in records:
            context.keyed.set_current_key(record[key], group if trusted else None)
            function.process(record, context)
        return subtask_snapshot(context, positions[index])

    template = subtask(0, [])
    states = subtask_states(template)
    template.keyed.close()  # type: ignore[union-attr]

    storage = DirectoryCheckpointStorage(checkpoint_dir)
    refuse_another_build(storage, {**configuration, "uid": uid})
    with storage.writing():  # one build per state directory; its checkpoint id claimed
        checkpoint_id = storage.claim(
            1 + max((c.checkpoint_id for c in storage.completed()), default=0))
        location = storage.location(checkpoint_id, CheckpointKind.CHECKPOINT)
        fs, final = resolve_filesystem(location, None)
        columns = list(first.names)
        tagged = first
        for column, kind in (("_key_group", pa.int32()), ("_subtask", pa.int32()),
                             ("_owner", pa.int32()), ("_split", pa.int32()),
                             ("_row", pa.int64())):
            tagged = tagged.append(pa.field(column, kind))
        result_schema = pa.schema([("subtask", pa.int32()), ("metadata", pa.string()),
                                   ("files", pa.string())])

        mode = exchange_mode(spark, exchange)
        with staged(fs, final, location, "writing checkpoint") as staging:
            def prepare(j: int) -> tuple[pa.Table, np.ndarray[Any, Any]]:
                table = read_input(shipped[j])
                groups = key_groups(table.column(key), spec, m)
                targets = groups.astype(np.int64) * p // m
                n = table.num_rows
                table = table.append_column("_key_group", pa.array(groups)).append_column(
                    "_subtask", pa.array(targets.astype(np.int32))).append_column(
                    "_owner", pa.array(np.full(n, j % p, dtype=np.int32))).append_column(
                    "_split", pa.array(np.full(n, j, dtype=np.int32))).append_column(
                    "_row", pa.array(np.arange(n, dtype=np.int64)))
                return table.cast(tagged), targets

            def run(table: pa.Table, _partition: int) -> Iterator[pa.RecordBatch]:
                if table.num_rows == 0:
                    return
                table = table.sort_by([(column, "ascending") for column in _ORDER])
                owners = np.asarray(table.column("_subtask").to_numpy(), dtype=np.int32)
                out: dict[str, list[Any]] = {"subtask": [], "metadata": [], "files": []}
                for index in np.unique(owners):
                    lo, hi = np.searchsorted(owners, [index, index + 1])
                    files: list[FileInfo] = []
                    meta = write_subtask(fs, staging, 0, subtask(int(index), _records(
                        table.slice(lo, hi - lo), columns)), dict(states), files)
                    out["subtask"].append(int(index))
                    out["metadata"].append(json.dumps(subtask_to_json(meta)))
                    out["files"].append(json.dumps([[f.path, f.size, f.checksum] for f in files]))
                yield pa.RecordBatch.from_pydict(out, schema=result_schema)

            # one partition per subtask (its records in reading order: sorted in its task)
            processing = time.perf_counter()
            with engine_errors("building state"):
                rows = exchange_rows(spark, mode, len(inputs), p, tagged, prepare, run,
                                     result_schema, block_bytes, "build")
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
                        parallelism=p, max_parallelism=m,
                        seconds=BuildSeconds(setup=processing - started,
                                             processing=time.perf_counter() - processing,
                                             final_checkpoint=None))
