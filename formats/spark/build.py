"""``statectl build --engine spark``: the local build's state, computed by Spark tasks.

The job is the local engine's, cut along its subtasks (:func:`statecore.job.open_subtask`):

1. one task per input file learns it as the local engine does (:class:`formats.inputs
   .FileSource`: its schema, row count and bad records, refused or found by
   ``on_bad_record``) and returns its schema, row count and bad records (counts per reason
   and the first ones); the driver checks that every input has the same columns;
2. one task per input file reads it (the same source as the local engine: bad records left
   out, keys converted to ``--key-type``) and tags every record with its key group (Java
   hashing vectorised over the key column), the subtask that owns it, and its position in
   the local job's reading order (subtask owning the file, file, row: split ``j`` is read by
   subtask ``j % parallelism``);
3. the records reach one task per subtask (:func:`formats.spark.jobs.exchange_rows`: Arrow
   IPC files on this machine for a local master, Spark's shuffle in blocks for a cluster);
   each sorts them into that order (by Arrow) and runs its subtask exactly as the local job
   does (the same backend, aggregations and state; the backend takes the key groups computed
   in step 2 instead of hashing every key again), turning records into Python dicts 64k at a
   time, and writes its snapshot with the format's writer;
4. the driver runs subtasks that received no record itself (empty keyed state, but their
   source positions and configuration), writes ``_metadata.json`` and publishes the
   checkpoint atomically in the state directory.

Only schemas, row counts, bad records and each subtask's metadata (handles and file
checksums) reach the driver. The checkpoint equals a local build's: ``statectl diff`` finds
nothing (TTL timestamps aside: they are the time of processing), the counts of bad records
left out (``on_bad_record="skip"``) included, stored per input by the subtask reading it as
the local job stores them. There are no checkpoints on the way and no ``--resume``: a Spark
build is one pass that either publishes its checkpoint or nothing (so no ``"fail"``, which
checkpoints the records before a bad one for a resume).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from formats.inputs import FileSource, InputError, column_spec
from formats.inputs.bad_records import EXAMPLES, FAIL, ON_BAD_RECORD, REFUSE, BadRecord
from formats.inputs.source import empty_table, no_records
from formats.model.key_hash import key_groups
from formats.ops.build import (
    BuildSeconds,
    BuildSummary,
    numeric_columns,
    parse_aggregations,
    refuse_another_build,
)
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
from formats.storage.commit import staged
from formats.storage.filesystems import absolute_location, redact, resolve_filesystem
from statecore.aggregations import AggregatingFunction
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
from statecore.errors import InvalidArgumentError, StatectlError
from statecore.job import open_subtask, subtask_snapshot
from statecore.key_groups import compute_default_max_parallelism
from statecore.serializers import resolve_type
from statecore.ttl import TtlConfig

__all__ = ["check_on_bad_record", "spark_build"]

_ORDER = ["_subtask", "_owner", "_split", "_row"]
#: Records turned into Python dicts at a time (a subtask's records are never all at once).
_RECORDS_AT_ONCE = 1 << 16


def _records(table: pa.Table, columns: list[str]) -> Iterator[tuple[dict[str, Any], int]]:
    """``table``'s records (its ``columns``) with their key groups (``_key_group``)."""
    for batch in table.to_batches(max_chunksize=_RECORDS_AT_ONCE):
        yield from zip(batch.select(columns).to_pylist(),
                       batch.column("_key_group").to_pylist(), strict=True)


def check_on_bad_record(on_bad_record: str) -> None:
    """Refuse an ``on_bad_record`` a Spark build does not take: ``"fail"`` (module doc)."""
    if on_bad_record not in ON_BAD_RECORD:
        raise InvalidArgumentError(f"--on-bad-record {on_bad_record!r}: give one of "
                                   f"{', '.join(ON_BAD_RECORD)}")
    if on_bad_record == FAIL:
        raise InvalidArgumentError(
            "--on-bad-record fail: the local engine's (it checkpoints the records before the "
            "bad one for --resume, and a Spark build is one pass); use skip or refuse, or run "
            "it with --engine local")


@dataclass(frozen=True)
class _Reading:
    """How the tasks read every input: the local engine's :class:`FileSource` settings."""

    key: str
    key_type: str | None
    on_bad_record: str
    numeric: frozenset[str]

    def source(self, path: str) -> FileSource:
        return FileSource([path], self.key, self.key_type, self.on_bad_record, self.numeric,
                          records_needed=False)


@dataclass(frozen=True)
class _Described:
    """One input as a task learnt it: columns (``None``: no record), rows, bad records."""

    schema: pa.Schema | None
    rows: int
    skipped: dict[str, int]
    examples: list[BadRecord]


def _describe(path: str, reading: _Reading) -> dict[str, Any]:
    """An input learnt by a task, as a row of :func:`_inputs_described` (errors as data)."""
    try:
        source = reading.source(path)
    except StatectlError as exc:
        return {"schema": None, "rows": 0, "bad": None, "error": str(exc),
                "invalid": not isinstance(exc, InputError)}
    try:
        bad = source.bad_records(path)
        counts = Counter(record.reason for record in bad)
        return {"schema": source.schema.serialize().to_pybytes() if source.has_records else None,
                "rows": source.count(), "error": None, "invalid": False,
                "bad": json.dumps({"counts": dict(counts), "examples": [
                    dataclasses.astuple(record) for record in bad[:EXAMPLES]]})}
    finally:
        source.close()


def _inputs_described(spark: Any, inputs: Sequence[str], shipped: Sequence[str],
                      reading: _Reading) -> list[_Described]:
    """Every input learnt by a task of its own (see the module doc), in order."""
    schema = pa.schema([("i", pa.int64()), ("schema", pa.binary()), ("rows", pa.int64()),
                        ("bad", pa.string()), ("error", pa.string()), ("invalid", pa.bool_())])

    def describe(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            chosen = batch.column(0).to_pylist()
            found = [_describe(shipped[i], reading) for i in chosen]
            yield pa.RecordBatch.from_pydict(
                {"i": chosen, **{name: [f[name] for f in found]
                                 for name in ("schema", "rows", "bad", "error", "invalid")}},
                schema=schema)

    with engine_errors("reading the inputs"):
        rows = spark.range(len(inputs), numPartitions=len(inputs)).mapInArrow(
            describe, spark_schema(schema)).collect()
    found = {r.i: r for r in rows}
    described = []
    for i, path in enumerate(inputs):
        row = found[i]
        if row.error is not None:  # the local engine's refusal, naming the input as given
            message = row.error.replace(redact(shipped[i]), redact(path))
            raise InvalidArgumentError(message) if row.invalid else InputError(message)
        bad = json.loads(row.bad)
        described.append(_Described(
            None if row.schema is None else pa.ipc.read_schema(pa.py_buffer(row.schema)),
            row.rows, dict(bad["counts"]),
            [dataclasses.replace(BadRecord(*example), file=redact(path))
             for example in bad["examples"]]))
    return described


def spark_build(spark: Any, inputs: Sequence[str], *, key: str, aggregations: Sequence[str],
                checkpoint_dir: str, key_type: str | None = None, parallelism: int = 1,
                max_parallelism: int | None = None, uid: str = "build",
                ttl: int | None = None, block_bytes: int = BLOCK_BYTES,
                exchange: str | None = None, on_bad_record: str = REFUSE) -> BuildSummary:
    """Build keyed state from ``inputs`` on ``spark`` (see the module doc).

    As :func:`formats.ops.build.build_state`, without checkpoints on the way or a resume:
    ``on_bad_record`` ``"refuse"`` or ``"skip"`` (``"fail"`` needs a resume).
    ``block_bytes``: the size of the blocks records cross Spark's shuffle in
    (:func:`formats.spark.jobs.arrow_blocks`); ``exchange``: how records reach their
    subtask's task (:func:`formats.spark.jobs.exchange_mode`).
    """
    require_pyspark()
    started = time.perf_counter()
    if not inputs:
        raise InvalidArgumentError("give at least one input file")
    check_on_bad_record(on_bad_record)
    if not aggregations:
        raise InvalidArgumentError("give at least one --agg (e.g. --agg count)")
    # the tasks open the inputs in their own working directory (a cluster's executor)
    shipped = [absolute_location(path) for path in inputs]
    reading = _Reading(key, key_type, on_bad_record, numeric_columns(aggregations))
    described = _inputs_described(spark, inputs, shipped, reading)
    typed = [(path, d.schema) for path, d in zip(inputs, described, strict=True)
             if d.schema is not None]
    if not typed:
        raise no_records(inputs)
    first = typed[0][1]
    for path, schema in typed:
        if not schema.equals(first):
            raise InputError(f"{path} has columns {schema.names} of other types than "
                             f"{typed[0][0]}: every input needs the same columns")
    column_types = {f.name: column_spec(f.type, f.name) for f in first}
    if key not in column_types:
        raise InvalidArgumentError(f"--key {key!r} is not a column of the input "
                                   f"(columns: {', '.join(sorted(column_types))})")
    ttl_config = None if ttl is None else TtlConfig(ttl)
    parsed = parse_aggregations(aggregations, column_types, ttl_config)
    AggregatingFunction(parsed)  # refuses two aggregations sharing a state, here
    p = parallelism
    m = compute_default_max_parallelism(p) if max_parallelism is None else max_parallelism
    spec = key_type or column_types[key]
    serializer = resolve_type(spec)
    configuration = {"key": key, "key_type": spec, "aggregations": " ".join(aggregations),
                     "ttl": "" if ttl is None else str(ttl)}
    name = f"statectl build ({', '.join(aggregations)})"
    positions = [{path: d.rows for j, (path, d) in enumerate(zip(inputs, described,
                                                                  strict=True))
                  if j % p == i} for i in range(p)]
    # the bad records left out, stored by the subtask reading their input (as a local job)
    skipped = [{path: d.skipped for j, (path, d) in enumerate(zip(inputs, described,
                                                                  strict=True))
                if j % p == i and d.skipped} for i in range(p)]

    # the tasks computed every record's key group (vectorised); the backend may take it as
    # it is when it hashes the key as that column's type (a --key-type checks every key)
    trusted = spec == column_types[key]

    def subtask(index: int, records: Iterable[tuple[dict[str, Any], int]]) -> SubtaskSnapshot:
        context = open_subtask(index, p, m, serializer, function := AggregatingFunction(parsed),
                               configuration)
        for record, group in records:
            context.keyed.set_current_key(record[key], group if trusted else None)
            function.process(record, context)
        return subtask_snapshot(context, positions[index], skipped[index])

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
                if described[j].schema is None:  # no record to read
                    table = empty_table(first)
                else:
                    source = reading.source(shipped[j])
                    try:
                        table = source.rows(shipped[j], 0, described[j].rows)
                    finally:
                        source.close()
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
    total = sum(d.rows for d in described)
    counts = Counter[str]()
    for d in described:
        counts.update(d.skipped)
    return BuildSummary(records=total - counts.total(), total_records=total, restored_from=None,
                        checkpoints=(),
                        failed_checkpoints={}, final_checkpoint=checkpoint_id,
                        final_location=location, states=tuple(a.state_name for a in parsed),
                        parallelism=p, max_parallelism=m,
                        seconds=BuildSeconds(setup=processing - started,
                                             processing=time.perf_counter() - processing,
                                             final_checkpoint=None),
                        on_bad_record=on_bad_record, skipped=dict(sorted(counts.items())),
                        skipped_examples=tuple(
                            [e for d in described for e in d.examples][:EXAMPLES]))
