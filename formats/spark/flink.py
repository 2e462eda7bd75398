"""Spark for real Flink snapshots: export, the key-group histogram and the canonical rewrite.

The driver decodes no keyed state. It reads ``_metadata``, each keyed stream's header (the key
serializer and the states' serializer snapshots) and the operator state (small by Flink's
design: every task keeps it in memory), checks that every state file exists with its size,
and cuts the keyed handles into pieces of key groups (:mod:`formats.flink.read.pieces`: a heap or
canonical stream by the key-group offsets ``_metadata`` keeps, a RocksDB handle by key-group
prefix). Spark tasks decode the pieces, each once per job, and send back small summaries:

* :func:`open_flink_on_spark` (``inspect --key-groups``, ``rescale`` plans): one task per piece
  counts rows and bytes per key group and state (and, for a max-parallelism change, the keys'
  new key groups); the driver builds the model from the counts, exactly the model decoding
  the snapshot here builds (:func:`formats.flink.checkpoint.open_flink_checkpoint` with
  ``counts``).
* :class:`FlinkStatesWriter` (``export``): one task per piece writes a part file of every
  state its key groups hold (``<state>.<ext>/part-NNNNN.<ext>``, in the local export's row
  order); only row counts come back. Operator state, already decoded, is written here.
* :func:`spark_flink_rewrite` (``rescale --out``, ``migrate``: a canonical savepoint): tasks
  decode a piece, compute each key's new key group (the key serializer's Java hash), convert
  the values of the states ``migrate`` converts (each task builds the converters the local
  rewrite builds, :meth:`formats.flink.write.migrate.RetargetSpec.retarget`), encode each
  entry's canonical key/value pairs with the serializer snapshots as read (a migrated state's:
  the new job's), under the Kryo of the release written for, and send them, as Arrow IPC
  blocks tagged with their new subtask, through Spark's shuffle; one task per new subtask
  sorts its pairs (key group, state, source order: the local rewrite's order, so the streams
  are byte for byte the local engine's) and writes its keyed state file. Only file names,
  sizes and key-group offsets come back; the driver writes operator state and ``_metadata``
  (:func:`formats.flink.write.savepoint_writer.write_savepoint`).

Errors in tasks become :class:`~statecore.errors.EngineError` naming the cause.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeGuard

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from formats.flink.checkpoint import FlinkCheckpoint, open_flink_checkpoint
from formats.flink.read.keyed import HeaderCache
from formats.flink.read.pieces import (
    KeyedPiece,
    StateCounts,
    count_piece,
    counts_from_json,
    counts_to_json,
    decode_piece,
    merge_counts,
    plan_pieces,
    state_rows,
)
from formats.flink.read.streams import SnapshotStreams
from formats.flink.read.tables import keyed_table, rehash_rows
from formats.flink.types.flink_version import written_by
from formats.flink.write.metadata_out import KeyedHandleOut
from formats.flink.write.migrate import RetargetSpec
from formats.flink.write.rewrite import (
    Retarget,
    converted,
    keyed_layout,
    retargeted_header,
    savepoint_operators,
)
from formats.flink.write.savepoint_writer import (
    OperatorProgress,
    SavepointOperator,
    key_group_blocks,
    keyed_header,
    pair_writer,
    write_savepoint,
    write_state_file,
)
from formats.flink.write.versions import LATEST, FlinkRelease
from formats.model.checkpoint import Checkpoint, WrittenSnapshot
from formats.model.columns import keyed_schema
from formats.ops.export import StateExport, in_microseconds, whole_microseconds
from formats.ops.rescale import RehashCounter, RehashTask
from formats.spark import require_pyspark
from formats.spark.jobs import (
    BLOCKS,
    PARTITION,
    arrow_blocks,
    engine_errors,
    partition_tags,
    read_blocks,
    spark_rehash_counter,
    spark_schema,
)
from statecore.errors import CorruptCheckpointError
from statecore.key_groups import KeyGroupRange
from statecore.rescale_plan import RescalePlan

__all__ = ["FlinkStatesWriter", "decoded_here", "flink_pieces", "flink_rehash_counter",
           "is_flink_snapshot", "open_flink_on_spark", "scan_pieces", "spark_flink_rewrite"]

#: A piece's bytes: at most this, at least ``MIN_PIECE_BYTES``; else about a quarter of the
#: keyed bytes per core, so that every core gets a few pieces (their sizes vary).
MAX_PIECE_BYTES = 32 << 20
MIN_PIECE_BYTES = 1 << 20
PIECES_PER_CORE = 4
#: Pairs of one entry (a record) of the rewrite, as they cross the shuffle.
_PAIRS = pa.schema([("operator", pa.int16()), ("key_group", pa.int32()), ("state", pa.int16()),
                    ("seq", pa.int64()), ("last", pa.int32()), ("pairs", pa.large_binary())])
_WRITTEN = pa.schema([("operator", pa.int32()), ("subtask", pa.int32()), ("name", pa.string()),
                      ("size", pa.int64()), ("offsets", pa.list_(pa.int64())),
                      ("entries", pa.int64())])


def flink_pieces(spark: Any, checkpoint: FlinkCheckpoint, piece_bytes: int | None = None,
                 operators: set[int] | None = None) -> list[KeyedPiece]:
    """The pieces Spark tasks decode: every keyed handle (of ``operators``, by position).

    ``piece_bytes`` (default: see ``MAX_PIECE_BYTES``) is a piece's size in stream bytes.
    """
    sources = [s for s in checkpoint.keyed_sources
               if operators is None or s.operator in operators]
    if piece_bytes is None:
        cores = max(1, int(spark.sparkContext.defaultParallelism))
        total = sum(s.size for s in sources)
        piece_bytes = min(MAX_PIECE_BYTES, max(MIN_PIECE_BYTES,
                                               total // (PIECES_PER_CORE * cores) + 1))
    return plan_pieces(sources, piece_bytes)


def _largest_first(pieces: Sequence[KeyedPiece]) -> list[int]:
    """Piece indexes, largest first: Spark runs partitions in order, so the tail is short."""
    return sorted(range(len(pieces)), key=lambda i: -pieces[i].weight)


def _run_per_piece(spark: Any, pieces: Sequence[KeyedPiece], schema: pa.Schema,
                   work: Callable[[Iterator[int]], Iterator[pa.RecordBatch]]) -> Any:
    """A DataFrame of ``work(piece indexes)`` (``schema``'s rows), one partition per piece."""
    order = _largest_first(pieces)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield from work(order[i] for batch in batches for i in batch.column(0).to_pylist())

    return spark.range(len(pieces), numPartitions=max(1, len(pieces))).mapInArrow(
        run, spark_schema(schema))


# -- opening: the counts ---------------------------------------------------------------------


def scan_pieces(spark: Any, checkpoint: FlinkCheckpoint, pieces: Sequence[KeyedPiece],
                rehash_to: int | None = None
                ) -> dict[tuple[int, int, int], dict[str, StateCounts]]:
    """Every piece decoded by a task, its counts merged per handle (:func:`merge_counts`).

    ``rehash_to``: also count the keys' key groups at this max parallelism (for handles of
    operators with another one).
    """
    require_pyspark()
    streams = SnapshotStreams(checkpoint.fs, checkpoint.root)
    schema = pa.schema([("piece", pa.int64()), ("counts", pa.string())])

    def work(chosen: Iterator[int]) -> Iterator[pa.RecordBatch]:
        headers: HeaderCache = {}
        for i in chosen:
            piece = pieces[i]
            header, decoded, info = decode_piece(streams, piece, headers)
            again = (rehash_to,) if rehash_to is not None and (
                rehash_to != piece.source.max_parallelism) else ()
            counts = count_piece(header, decoded, info, again, piece.source.where)
            yield pa.RecordBatch.from_pydict(
                {"piece": [i], "counts": [json.dumps(counts_to_json(counts))]}, schema=schema)

    if not pieces:
        return {}
    with engine_errors("reading the Flink snapshot's keyed state"):
        rows = _run_per_piece(spark, pieces, schema, work).collect()
    parts: dict[tuple[int, int, int], list[dict[str, StateCounts]]] = {}
    for row in sorted(rows, key=lambda r: r.piece):
        parts.setdefault(pieces[row.piece].source.ident, []).append(
            counts_from_json(json.loads(row.counts)))
    return {ident: merge_counts(found) for ident, found in parts.items()}


def is_flink_snapshot(checkpoint: Checkpoint) -> TypeGuard[FlinkCheckpoint]:
    """Whether ``checkpoint`` is a Flink snapshot (whose keyed state Spark tasks decode)."""
    return isinstance(checkpoint, FlinkCheckpoint)


def decoded_here(checkpoint: Checkpoint) -> bool:
    """Whether ``checkpoint`` is a Flink snapshot whose keyed state this process decoded.

    (Opened by :func:`formats.open.open_checkpoint`, not by the Spark engine.)
    """
    return isinstance(checkpoint, FlinkCheckpoint) and checkpoint.keyed_decoded


def open_flink_on_spark(spark: Callable[[], Any], checkpoint: FlinkCheckpoint, *,
                        count: bool = True, rehash_to: int | None = None,
                        piece_bytes: int | None = None) -> FlinkCheckpoint:
    """``checkpoint`` (opened with ``decode=False``) ready for the Spark engine's commands.

    ``count``: Spark tasks count every handle's rows and bytes per key group (and, with
    ``rehash_to``, its keys' key groups at that max parallelism), and the snapshot is opened
    again with those counts: its model is then the one decoding it here gives. Without, the
    model has no rows per key group (export needs none). ``spark`` gives the session (started
    only if needed). Rewrites (:meth:`FlinkCheckpoint.write_rescaled`) run on Spark.
    """
    if count and checkpoint.keyed_sources:
        session = spark()
        pieces = flink_pieces(session, checkpoint, piece_bytes)
        counts = scan_pieces(session, checkpoint, pieces, rehash_to)
        checkpoint = open_flink_checkpoint(checkpoint.fs, checkpoint.root, checkpoint.location,
                                           decode=False, counts=counts, names=checkpoint.names)
    elif count:
        checkpoint.counted = True  # no keyed state: nothing to count
    rewrite = spark_flink_rewrite(spark, piece_bytes)
    checkpoint.rewriter = rewrite
    return checkpoint


def flink_rehash_counter(spark: Any) -> RehashCounter:
    """A :data:`~formats.ops.rescale.RehashCounter` for any checkpoint on Spark.

    A Flink snapshot opened for Spark has its keys' counts from its scan
    (:func:`open_flink_on_spark` ``rehash_to``), or they are counted now by one more scan;
    statectl's checkpoints are counted by :func:`formats.spark.jobs.spark_rehash_counter`.
    """
    def count(checkpoint: Checkpoint, tasks: Sequence[RehashTask], max_parallelism: int
              ) -> list[np.ndarray[Any, Any]]:
        if not isinstance(checkpoint, FlinkCheckpoint) or checkpoint.keyed_decoded:
            return spark_rehash_counter(spark)(checkpoint, tasks, max_parallelism)
        counts = checkpoint.counts or {}
        wanted = [checkpoint.file_sources[handle.file] for _op, _subtask, handle in tasks]
        if any(ident not in counts or state not in counts[ident]
               or max_parallelism not in counts[ident][state].rehashed
               for ident, state in wanted):  # not counted when opened: count now
            counts = scan_pieces(spark, checkpoint, flink_pieces(spark, checkpoint),
                                 max_parallelism)
        out = []
        for ident, state in wanted:
            found = np.zeros(max_parallelism, dtype=np.int64)
            for group, n in counts[ident][state].rehashed.get(max_parallelism, {}).items():
                found[group] = n
            out.append(found)
        return out

    return count


# -- export -----------------------------------------------------------------------------------


class FlinkStatesWriter:
    """Exports the states of a Flink snapshot opened for Spark (see the module doc).

    A :class:`formats.ops.export.StatesWriter`: every keyed state of every exported operator in
    one job, each piece decoded once.
    """

    def __init__(self, spark: Any, checkpoint: FlinkCheckpoint,
                 piece_bytes: int | None = None) -> None:
        require_pyspark()
        self.spark, self.checkpoint, self.piece_bytes = spark, checkpoint, piece_bytes

    def __call__(self, task: StateExport, done: Callable[[], None]) -> tuple[str, int]:
        return self.write_states([task], done)[0]

    def write_states(self, tasks: Sequence[StateExport], done: Callable[[], None]
                     ) -> list[tuple[str, int]]:
        checkpoint = self.checkpoint
        position = {op.uid: i for i, op in enumerate(checkpoint.metadata.operators)}
        keyed = {i: task for i, task in enumerate(tasks) if task.state.scope == "keyed"}
        operators = {position[task.op.uid] for task in keyed.values()}
        pieces = flink_pieces(self.spark, checkpoint, self.piece_bytes, operators)
        rows = self._keyed(tasks, keyed, pieces) if keyed else {}
        out = []
        for i, task in enumerate(tasks):
            ext = task.path.rsplit(".", 1)[-1]
            if task.state.scope != "keyed":  # decoded when opened: written here
                micro = task.fmt == "parquet" and not in_microseconds(task.schema).equals(
                    task.schema) and all(whole_microseconds(read()) for _, read in task.pieces)
                count = replace(task, microseconds=micro).write(
                    f"{task.path}/part-00000.{ext}", task.pieces)
                out.append((task.path, count))
            else:
                if not rows.get(i):  # a state without entries: one empty part, its columns
                    micro = task.fmt == "parquet" and not in_microseconds(
                        task.schema).equals(task.schema)
                    replace(task, microseconds=micro).write(f"{task.path}/part-00000.{ext}", [])
                out.append((task.path, rows.get(i, 0)))
            for _ in task.pieces:
                done()
        return out

    def _keyed(self, tasks: Sequence[StateExport], keyed: Mapping[int, StateExport],
               pieces: Sequence[KeyedPiece]) -> dict[int, int]:
        """Write the keyed states' parts; rows per task index."""
        checkpoint = self.checkpoint
        position = {op.uid: i for i, op in enumerate(checkpoint.metadata.operators)}
        streams = SnapshotStreams(checkpoint.fs, checkpoint.root)
        # per operator position: (task index, the task without its pieces) of each state
        wanted: dict[int, list[tuple[int, StateExport]]] = {}
        for i, task in keyed.items():
            wanted.setdefault(position[task.op.uid], []).append((i, replace(task, pieces=())))
        # a part's number: the piece's among its operator's pieces (subtask, handle, key groups)
        number: dict[int, int] = {}
        seen: dict[int, int] = {}
        for i, piece in enumerate(pieces):
            number[i] = seen.get(piece.source.operator, 0)
            seen[piece.source.operator] = number[i] + 1
        schema = pa.schema([("task", pa.int64()), ("part", pa.string()), ("rows", pa.int64()),
                            ("whole_us", pa.bool_())])

        def work(chosen: Iterator[int]) -> Iterator[pa.RecordBatch]:
            headers: HeaderCache = {}
            for index in chosen:
                piece = pieces[index]
                header, decoded, _info = decode_piece(streams, piece, headers)
                infos = {info.name: info for info in header.states}
                found: dict[str, list[Any]] = {f.name: [] for f in schema}
                for i, task in wanted[piece.source.operator]:
                    rows = state_rows(infos[task.state.name], decoded)
                    if not rows:
                        continue
                    assert task.op.key_type is not None
                    table = keyed_table(rows, keyed_schema(task.state, task.op.key_type),
                                        task.state, task.op.key_type,
                                        f"state {task.state.name!r} of {piece.source.where}")
                    ext = task.path.rsplit(".", 1)[-1]
                    part = f"{task.path}/part-{number[index]:05d}.{ext}"
                    subtask = piece.source.subtask
                    task.write(part, [(subtask, _constant(table))])
                    for name, value in (("task", i), ("part", part), ("rows", len(rows)),
                                        ("whole_us", whole_microseconds(table))):
                        found[name].append(value)
                yield pa.RecordBatch.from_pydict(found, schema=schema)

        with engine_errors("exporting the Flink snapshot's keyed state"):
            written = _run_per_piece(self.spark, pieces, schema, work).collect()
        rows: dict[int, int] = {}
        parts: dict[int, list[tuple[str, bool]]] = {}
        for row in written:
            rows[row.task] = rows.get(row.task, 0) + row.rows
            parts.setdefault(row.task, []).append((row.part, row.whole_us))
        self._in_microseconds(keyed, parts)
        return rows

    def _in_microseconds(self, keyed: Mapping[int, StateExport],
                         parts: Mapping[int, list[tuple[str, bool]]]) -> None:
        """Parquet parts of states whose timestamps are all whole microseconds, as such.

        The local export decides per state (:func:`formats.ops.export.export_checkpoint`); a part
        knows only its own rows, so the parts were written in nanoseconds and are cast here,
        by tasks, when every part of the state allows it.
        """
        chosen = [(keyed[i], [part for part, _ in found]) for i, found in parts.items()
                  if keyed[i].fmt == "parquet"
                  and not in_microseconds(keyed[i].schema).equals(keyed[i].schema)
                  and all(whole for _, whole in found)]
        jobs = [(replace(task, pieces=(), microseconds=True), part)
                for task, found in chosen for part in found]
        if not jobs:
            return
        schema = pa.schema([("done", pa.int64())])

        def cast(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for batch in batches:
                for i in batch.column(0).to_pylist():
                    task, part = jobs[i]
                    path = f"{task.staging}/{part}"
                    table = pq.read_table(path, filesystem=task.fs).cast(task.schema)
                    with task.fs.open_output_stream(path) as stream:
                        pq.write_table(table, stream)
                    yield pa.RecordBatch.from_pydict({"done": [i]}, schema=schema)

        with engine_errors("exporting the Flink snapshot's keyed state"):
            self.spark.range(len(jobs), numPartitions=min(len(jobs), 64)).mapInArrow(
                cast, spark_schema(schema)).collect()


def _constant(table: pa.Table) -> Callable[[], pa.Table]:
    return lambda: table


# -- the canonical rewrite --------------------------------------------------------------------


def spark_flink_rewrite(spark: Callable[[], Any], piece_bytes: int | None = None
                        ) -> Callable[..., WrittenSnapshot]:
    """A :attr:`FlinkCheckpoint.rewriter` that writes the keyed state files on Spark.

    Called as :func:`~formats.flink.write.rewrite.rewrite_flink_savepoint` is, under the Kryo
    of ``release`` (``written_by``); ``retargets`` (``migrate``) as data, which the driver and
    every task build (:class:`~formats.flink.write.migrate.RetargetSpec`). ``progress``: the
    keyed state of every operator is written by one Spark job, before the operators' turns.
    """
    def rewrite(checkpoint: FlinkCheckpoint, plan: RescalePlan, location: str, *,
                checkpoint_id: int | None = None, compress: bool = False,
                release: FlinkRelease = LATEST,
                retargets: Mapping[str, RetargetSpec] | None = None,
                progress: OperatorProgress | None = None) -> WrittenSnapshot:
        built = None if retargets is None else {
            uid: spec.retarget() for uid, spec in retargets.items()}  # refusals: before Spark
        operators = savepoint_operators(checkpoint, plan, keyed_entries=False, retargets=built)
        # where each operator written is in the source (migrate writes only some)
        sources = [i for i, op in enumerate(checkpoint.metadata.operators)
                   if retargets is None or op.uid in retargets]
        specs = {position: retargets[checkpoint.metadata.operators[i].uid]
                 for position, i in enumerate(sources)} if retargets is not None else {}
        new_id = checkpoint.metadata.checkpoint_id if checkpoint_id is None else checkpoint_id
        keyed = [i for i, op in enumerate(operators) if op.key_snapshot is not None]
        if not keyed:
            return write_savepoint(location, new_id, operators, compress=compress,
                                   release=release, progress=progress)
        session = spark()
        require_pyspark()

        def keyed_files(fs: Any, staging: str
                        ) -> dict[tuple[int, int], tuple[KeyedHandleOut, int]]:
            return _rewrite_keyed(session, checkpoint, plan, operators,
                                  {position: sources[position] for position in keyed}, specs,
                                  release.kryo_major, fs, staging, compress, piece_bytes)

        return write_savepoint(location, new_id, operators, compress=compress,
                               keyed_files=keyed_files, release=release, progress=progress)

    return rewrite


def _rewrite_keyed(spark: Any, checkpoint: FlinkCheckpoint, plan: RescalePlan,
                   operators: list[SavepointOperator], keyed: Mapping[int, int],
                   specs: Mapping[int, RetargetSpec], kryo_major: int, fs: Any, staging: str,
                   compress: bool, piece_bytes: int | None
                   ) -> dict[tuple[int, int], tuple[KeyedHandleOut, int]]:
    """Write every keyed operator's new keyed state files into ``staging`` (module doc).

    ``keyed``: each keyed operator's position in ``operators`` -> its position in the source
    (and the plan); ``specs``: by position in ``operators``, how ``migrate`` writes it;
    ``kryo_major``: the Kryo of the release written for.
    """
    streams = SnapshotStreams(checkpoint.fs, checkpoint.root)
    pieces = flink_pieces(spark, checkpoint, piece_bytes, set(keyed.values()))
    written_as = {source: position for position, source in keyed.items()}
    # per keyed operator: new max parallelism, whether keys move, each new key group's
    # subtask, and the new subtasks' key groups
    layout: dict[int, tuple[int, bool, np.ndarray[Any, Any], list[KeyGroupRange]]] = {}
    partition: dict[tuple[int, int], int] = {}  # (operator, new subtask) -> partition
    headers: dict[int, bytes] = {}
    states = {position: len(operators[position].keyed_states) for position in keyed}
    for position, source in keyed.items():
        op_plan = plan.operators[source]
        m = op_plan.new_max_parallelism
        ranges = [sub.key_group_range for sub in op_plan.subtasks]
        owner = np.zeros(m, dtype=np.int64)
        for i, kg in enumerate(ranges):
            assert kg is not None
            owner[kg.start:kg.end + 1] = i
            partition[position, i] = len(partition)
        layout[position] = (m, op_plan.rehash, owner,
                            [kg for kg in ranges if kg is not None])
        headers[position] = keyed_header(operators[position], compress)
    tags = partition_tags(spark, len(partition))
    part_of = {position: np.asarray([partition[position, i] for i in range(len(ranges))],
                                    dtype=np.int64)
               for position, (_, _, _, ranges) in layout.items()}

    def encode(chosen: Iterator[int]) -> Iterator[pa.RecordBatch]:
        cache: HeaderCache = {}
        retargets: dict[int, Retarget] = {}
        for index in chosen:
            piece = pieces[index]
            position = written_as[piece.source.operator]
            header, decoded, _info = decode_piece(streams, piece, cache)
            m, rehash, owner, _ranges = layout[position]
            with written_by(kryo_major):  # encoders and converters: the release's Kryo
                if position in specs and position not in retargets:
                    retargets[position] = specs[position].retarget()
                table = _encoded_pairs(header, decoded, piece, index, position, m, rehash,
                                       retargets.get(position))
            if table.num_rows:
                subtasks = owner[np.asarray(table.column("key_group").to_numpy(), np.int64)]
                yield from arrow_blocks(table, part_of[position][subtasks], tags)

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = read_blocks(batches, _PAIRS)
        if table.num_rows == 0:
            return
        table = table.sort_by([("operator", "ascending"), ("key_group", "ascending"),
                               ("state", "ascending"), ("seq", "ascending")])
        operator = np.asarray(table.column("operator").to_numpy(), dtype=np.int64)
        groups = np.asarray(table.column("key_group").to_numpy(), dtype=np.int64)
        found: dict[str, list[Any]] = {f.name: [] for f in _WRITTEN}
        for position in np.unique(operator).tolist():
            lo, hi = np.searchsorted(operator, [position, position + 1])
            m, _rehash, owner, ranges = layout[position]
            subtasks = owner[groups[lo:hi]]
            for subtask in np.unique(subtasks).tolist():
                a, b = lo + np.searchsorted(subtasks, [subtask, subtask + 1])
                data, offsets, written = _keyed_file(
                    headers[position], table.slice(int(a), int(b - a)), ranges[subtask],
                    states[position], m, compress)
                name = write_state_file(fs, staging, data)
                for key, value in (("operator", position), ("subtask", subtask),
                                   ("name", name), ("size", len(data)),
                                   ("offsets", offsets), ("entries", written)):
                    found[key].append(value)
        yield pa.RecordBatch.from_pydict(found, schema=_WRITTEN)

    with engine_errors("rewriting the Flink snapshot's keyed state"):
        rows = (_run_per_piece(spark, pieces, BLOCKS, encode)
                .repartition(len(partition), PARTITION)
                .mapInArrow(write, spark_schema(_WRITTEN))
                .collect())
    out = {(row.operator, row.subtask): (KeyedHandleOut(
        layout[row.operator][3][row.subtask].start, tuple(row.offsets), row.name, row.size),
        row.entries) for row in rows}
    for position, subtask in partition:  # no entries: a file of the header alone, written here
        if (position, subtask) not in out:
            operators[position].keyed[subtask] = (layout[position][3][subtask],
                                                  [[] for _ in range(states[position])])
    return out


def _encoded_pairs(header: Any, decoded: Any, piece: KeyedPiece, index: int, operator: int,
                   max_parallelism: int, rehash: bool, retarget: Retarget | None) -> pa.Table:
    """Every entry of a decoded piece as its canonical pairs, with its new key group.

    A record per entry (``_PAIRS``): its operator (its position in the savepoint), its pairs'
    bytes (key-group prefix included), where its last pair's key starts in them (-1: none, an
    empty list or map), its state and ``seq``, its order in the source (piece, then row),
    which the local rewrite keeps. ``retarget``: the states written for the new job (``migrate``),
    values converted as the local rewrite converts them.
    """
    if retarget is not None:
        header = retargeted_header(header, retarget)
    key, key_length, states = keyed_layout(header, piece.source.where)
    writer_of = SavepointOperator("", None, None, 1, max_parallelism, key=key,
                                  key_length=key_length, keyed_states=states)
    assert header.key is not None
    prefix = 1 if max_parallelism <= 128 else 2
    tables = []
    for state_id, (info, out) in enumerate(zip(header.states, states, strict=True)):
        rows = state_rows(info, decoded)
        if not rows:
            continue
        convert = None if retarget is None else retarget.converters.get(
            info.source_name or info.name)
        if convert is not None:
            rows = list(converted(rows, convert))
        if rehash:
            assert header.key.java_hash is not None  # else refused when planning
            try:
                groups = rehash_rows(header.key.java_hash, rows, max_parallelism)
            except (TypeError, ValueError) as exc:
                raise CorruptCheckpointError(f"{piece.source.where}: a key cannot be hashed: "
                                             f"{exc}") from exc
        else:
            groups = np.fromiter((r[0] for r in rows), np.int32, len(rows))
        order = np.argsort(groups, kind="stable")
        write = pair_writer(writer_of, out)
        block = bytearray()
        ends: list[int] = []
        lasts: list[int] = []
        sorted_groups = groups[order]
        bounds = np.flatnonzero(np.diff(sorted_groups)) + 1
        for lo, hi in zip([0, *bounds.tolist()], [*bounds.tolist(), len(rows)], strict=True):
            group = int(sorted_groups[lo])
            write(block, group.to_bytes(prefix, "big"), [rows[i] for i in order[lo:hi]],
                  ends, lasts)
        offsets = np.asarray([0, *ends], dtype=np.int64)
        last = np.asarray(lasts, dtype=np.int64)
        starts = offsets[:-1]
        tables.append(pa.table({
            "operator": pa.array(np.full(len(rows), operator), pa.int16()),
            "key_group": pa.array(sorted_groups, pa.int32()),
            "state": pa.array(np.full(len(rows), state_id), pa.int16()),
            "seq": pa.array((np.int64(index) << 32) | order.astype(np.int64), pa.int64()),
            "last": pa.array(np.where(last >= 0, last - starts, -1), pa.int32()),
            "pairs": pa.Array.from_buffers(pa.large_binary(), len(rows), [
                None, pa.py_buffer(offsets), pa.py_buffer(block)]),
        }, schema=_PAIRS))
    return pa.concat_tables(tables) if tables else _PAIRS.empty_table()


def _keyed_file(header: bytes, table: pa.Table, key_groups: KeyGroupRange, states: int,
                max_parallelism: int, compress: bool) -> tuple[bytearray, list[int], int]:
    """One new subtask's keyed state file from its records, sorted (key group, state, seq)."""
    column = table.column("pairs").combine_chunks()
    validity, offsets_buffer, data_buffer = column.buffers()
    del validity
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64)[
        column.offset:column.offset + len(column) + 1]
    data = memoryview(data_buffer) if data_buffer is not None else memoryview(b"")
    last = np.asarray(table.column("last").to_numpy(), dtype=np.int64)
    groups = np.asarray(table.column("key_group").to_numpy(), dtype=np.int64)
    state = np.asarray(table.column("state").to_numpy(), dtype=np.int64)

    def write_records(block: bytearray, prefix: bytes, rows: range) -> int:
        lo, hi = rows.start, rows.stop
        start = len(block)
        block += data[offsets[lo]:offsets[hi]]
        with_pairs = np.flatnonzero(last[lo:hi] >= 0)
        if not with_pairs.size:
            return -1
        j = lo + int(with_pairs[-1])
        return start + int(offsets[j] - offsets[lo]) + int(last[j])

    def runs() -> Iterator[tuple[int, list[range | None]]]:
        n = len(groups)
        bounds = np.flatnonzero((np.diff(groups) != 0) | (np.diff(state) != 0)) + 1
        starts = [0, *bounds.tolist()]
        ends = [*bounds.tolist(), n]
        current = -1
        per_state: list[range | None] = [None] * states
        for lo, hi in zip(starts, ends, strict=True):
            group = int(groups[lo])
            if group != current:
                if current >= 0:
                    yield current, per_state
                current, per_state = group, [None] * states
            per_state[int(state[lo])] = range(lo, hi)
        if current >= 0:
            yield current, per_state

    out = bytearray(header)
    found, written = key_group_blocks(out, key_groups, runs(), [write_records] * states,
                                      max_parallelism, compress)
    return out, found, written
