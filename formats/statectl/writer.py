"""Writing statectl checkpoints: state snapshots into Parquet files, published atomically.

:func:`write_checkpoint` writes every operator's snapshot (keyed state key group by key group,
releasing each map snapshot as soon as it is written; operator state as element lists) into a
staging directory and publishes it (:mod:`formats.statectl.publish`). :func:`copy_checkpoint`
makes a new checkpoint of an existing one's files (hard links where local). The layout is in
:mod:`formats.statectl`.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from formats.model.arrow_types import to_arrow
from formats.model.columns import keyed_schema, operator_schema
from formats.statectl.publish import publish
from formats.statectl.reader import StatectlCheckpoint
from formats.statectl.rows import block_appender
from formats.storage.commit import staged
from formats.storage.filesystems import fsync, renames_atomically, resolve_filesystem
from statecore.checkpoint import (
    CheckpointKind,
    CheckpointMetadata,
    FileInfo,
    KeyedStateHandle,
    KeyGroupRows,
    OperatorMetadata,
    OperatorSnapshot,
    OperatorStateHandle,
    StateMetadata,
    SubtaskMetadata,
    SubtaskSnapshot,
)
from statecore.errors import CheckpointCancelledError, CheckpointError, InvalidArgumentError
from statecore.operator_backend import OperatorStateMode, OperatorStateSnapshotEntry

__all__ = [
    "ParquetFileWriter",
    "close_snapshots",
    "copy_checkpoint",
    "link_file",
    "link_files",
    "subtask_states",
    "write_checkpoint",
    "write_subtask",
]

#: Most rows, and Arrow bytes, in one row group. Key groups share row groups up to these
#: limits and are never split across a shared one; a larger key group gets row groups of its
#: own. One key group is read from its row groups, never the whole file.
ROW_GROUP_ROWS = 8192
ROW_GROUP_BYTES = 128 << 10
#: Bytes per read when a data file is copied from one filesystem to another.
COPY_CHUNK = 8 << 20
#: Server-side copies in flight at once (within one object store).
COPY_THREADS = 8
_MODE_KIND = {OperatorStateMode.SPLIT_DISTRIBUTE: "split", OperatorStateMode.UNION: "union",
              OperatorStateMode.BROADCAST: "broadcast"}


class _HashingSink:
    """An output stream that hashes (SHA-256) and counts what goes through it.

    The checksum of a data file is taken as it is written: reading the file back (from an
    object store: downloading it) would double the traffic.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.digest = hashlib.sha256()
        self.size = 0
        self.closed = False

    def write(self, data: Any) -> int:
        view = memoryview(data)
        self.digest.update(view)
        self.size += view.nbytes
        self._stream.write(view)
        return view.nbytes

    def flush(self) -> None:
        self._stream.flush()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._stream.close()


class ParquetFileWriter:
    """One Parquet file of a checkpoint being written, checksummed on close (``FileInfo``)."""

    def __init__(self, fs: pafs.FileSystem, root: str, relative: str, schema: pa.Schema) -> None:
        self.fs, self.relative, self.schema = fs, relative, schema
        self.path = f"{root}/{relative}"
        if renames_atomically(fs):  # an object store has no directories to make
            fs.create_dir(self.path.rsplit("/", 1)[0], recursive=True)
        self._sink = _HashingSink(fs.open_output_stream(self.path))
        # Statistics only where they help: min/max of values (a 4 KiB value's twice per row
        # group) would make the footer that every reader reads first grow with the data.
        self._writer = pq.ParquetWriter(
            self._sink, schema,
            write_statistics=["key_group"] if "key_group" in schema.names else False)
        self.rows = 0
        self._pending: list[pa.Table] = []
        self._pending_bytes = self._pending_rows = 0

    def write(self, columns: dict[str, list[Any]]) -> None:
        n = len(next(iter(columns.values())))
        if n == 0:
            return
        try:
            table = pa.table({f.name: pa.array(columns[f.name], type=f.type)
                              for f in self.schema}, schema=self.schema)
        except (pa.ArrowException, OverflowError, TypeError, ValueError) as exc:
            raise CheckpointError(f"cannot store a value in {self.relative}: {exc}") from exc
        self.write_table(table)

    def write_table(self, table: pa.Table) -> None:
        """Append ``table`` (this file's schema): the rows of whole key groups (or elements).

        Small key groups share a row group up to ROW_GROUP_BYTES (Arrow bytes) or
        ROW_GROUP_ROWS; a key group that would not fit starts a new row group, and one larger
        than the limits gets row groups of its own. So a key group is never split across a
        row group it shares, and reading it reads at most ROW_GROUP_BYTES of its neighbours.
        """
        if not table.num_rows:
            return
        table = table.cast(self.schema)
        if self._pending and (self._pending_bytes + table.nbytes > ROW_GROUP_BYTES
                              or self._pending_rows + table.num_rows > ROW_GROUP_ROWS):
            self._flush()
        self._pending.append(table)
        self._pending_bytes += table.nbytes
        self._pending_rows += table.num_rows
        self.rows += table.num_rows
        if self._pending_bytes >= ROW_GROUP_BYTES or self._pending_rows >= ROW_GROUP_ROWS:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            table = pa.concat_tables(self._pending)
            self._writer.write_table(table, row_group_size=min(table.num_rows, ROW_GROUP_ROWS))
            self._pending, self._pending_bytes, self._pending_rows = [], 0, 0

    def abandon(self) -> None:
        """Close without a result after a failure.

        Then nothing is still being uploaded when the caller removes the partial output (an
        object store completes an upload on close, which could otherwise happen later, when
        the stream is collected).
        """
        for close in (self._writer.close, self._sink.close):
            try:
                close()
            except Exception:  # noqa: BLE001 - the failure being handled is what matters
                self._sink.closed = True

    def close(self) -> FileInfo:
        self._flush()
        self._writer.close()
        self._sink.close()
        fsync(self.fs, self.path)
        return FileInfo(self.relative, self._sink.size, "sha256:" + self._sink.digest.hexdigest())


def write_checkpoint(
    location: str,
    checkpoint_id: int,
    operators: Sequence[OperatorSnapshot],
    *,
    kind: CheckpointKind = CheckpointKind.CHECKPOINT,
    created_ms: int | None = None,
    filesystem: pafs.FileSystem | None = None,
    cancelled: Callable[[], bool] = lambda: False,
    staging_token: str | None = None,
) -> CheckpointMetadata:
    """Write a complete checkpoint at ``location`` and return its metadata.

    Consumes the given snapshots (each keyed snapshot's key groups are released as they are
    written) and closes them, also on failure or cancellation (``cancelled()`` is asked
    between key groups and files), when the partial directory is removed. Refuses a
    ``location`` that exists. Values must be of their declared types. The partial directory
    is ``<location>.inprogress-<staging_token>`` (random by default).
    """
    fs, final = resolve_filesystem(location, filesystem)
    try:
        with staged(fs, final, location, "writing checkpoint", staging_token) as staging:
            files: list[FileInfo] = []
            described = [_write_operator(fs, staging, i, op, files, cancelled)
                         for i, op in enumerate(operators)]
            _check_cancelled(cancelled, checkpoint_id)
            metadata = CheckpointMetadata(
                checkpoint_id=checkpoint_id, kind=kind,
                created_ms=int(time.time() * 1000) if created_ms is None else created_ms,
                operators=tuple(described), files=tuple(files))
            publish(fs, staging, final, metadata)
            return metadata
    except BaseException:
        close_snapshots(operators)  # release every map snapshot, whatever went wrong
        raise


def copy_checkpoint(source: StatectlCheckpoint, location: str, checkpoint_id: int,
                    kind: CheckpointKind, *, created_ms: int | None = None,
                    shown: str | None = None) -> CheckpointMetadata:
    """A new checkpoint at ``location`` (a path on ``source.fs``) with ``source``'s state.

    Data files are hard-linked where both are on the local disk (no record is rewritten, and
    releasing either checkpoint later leaves the other intact), copied by the server on an
    object store (nothing passes through this process); only the metadata is new.
    ``source`` is verified (sizes and checksums) first and never modified. ``shown``: the
    location in messages.
    """
    fs = source.fs
    with staged(fs, location, shown or location, "copying checkpoint to") as staging:
        for info in source.metadata.files:  # verify before linking: never copy damage
            source.verify_checksum(info.path)
        link_files(source, [info.path for info in source.metadata.files], fs, staging)
        metadata = replace(source.metadata, checkpoint_id=checkpoint_id, kind=kind,
                           created_ms=int(time.time() * 1000) if created_ms is None
                           else created_ms)
        publish(fs, staging, location, metadata)
        return metadata


def link_files(source: StatectlCheckpoint, relatives: Sequence[str], fs: pafs.FileSystem,
               staging: str, progress: Callable[[int, int], None] | None = None, *,
               check_size: bool = False) -> int:
    """:func:`link_file` for each of ``relatives``; how many were hard links.

    ``check_size``: refuse a source file whose size is not the metadata's first. Copies within
    an object store are requests the server carries out: they run :data:`COPY_THREADS` at a
    time (a metadata-only rescale of many files takes the time of a few requests, not of
    their sum).
    """
    def one(relative: str) -> bool:
        if check_size:
            source.check_size(relative)
        return link_file(source, relative, fs, staging)

    linked = 0
    if renames_atomically(fs) or len(relatives) < 2:
        for done, relative in enumerate(relatives):
            linked += one(relative)
            if progress is not None:
                progress(done + 1, len(relatives))
        return linked
    with ThreadPoolExecutor(COPY_THREADS) as pool:
        for done, was_linked in enumerate(pool.map(one, relatives)):
            linked += was_linked
            if progress is not None:
                progress(done + 1, len(relatives))
    return linked


def link_file(source: StatectlCheckpoint, relative: str, fs: pafs.FileSystem,
              staging: str) -> bool:
    """Put ``source``'s data file at the same relative path under ``staging`` on ``fs``.

    A hard link where both are on the local disk (same inode: nothing rewritten, and releasing
    either checkpoint later leaves the other intact); a copy otherwise (within one filesystem
    by the filesystem, across filesystems through this process). True when linked.
    """
    target = f"{staging}/{relative}"
    if renames_atomically(fs):  # an object store has no directories to make
        fs.create_dir(target.rsplit("/", 1)[0], recursive=True)
    path = source.path(relative)
    if isinstance(source.fs, pafs.LocalFileSystem) and isinstance(fs, pafs.LocalFileSystem):
        try:
            os.link(path, target)
            return True
        except OSError:
            pass  # another device, or links unsupported: copy instead
        fs.copy_file(path, target)
        return False
    if source.fs.equals(fs):
        fs.copy_file(path, target)
        return False
    with source.fs.open_input_stream(path) as src, fs.open_output_stream(target) as out:
        while chunk := src.read(COPY_CHUNK):
            out.write(chunk)
    return False


def _check_cancelled(cancelled: Callable[[], bool], checkpoint_id: int) -> None:
    if cancelled():
        raise CheckpointCancelledError(f"checkpoint {checkpoint_id} was cancelled")


def close_snapshots(operators: Sequence[OperatorSnapshot]) -> None:
    for op in operators:
        for subtask in op.subtasks:
            if subtask.keyed is not None:
                subtask.keyed.close()


def _write_operator(fs: pafs.FileSystem, root: str, op_index: int, op: OperatorSnapshot,
                    files: list[FileInfo], cancelled: Callable[[], bool]) -> OperatorMetadata:
    states: dict[str, StateMetadata] = {}
    key_type: str | None = None
    subtasks = []
    for subtask in op.subtasks:
        if subtask.keyed is not None:
            key_type = subtask.keyed.key_type
        subtasks.append(write_subtask(fs, root, op_index, subtask, states, files, cancelled))
    return OperatorMetadata(op.uid, op.name, op.parallelism, op.max_parallelism, key_type,
                            tuple(states[n] for n in sorted(states)), tuple(subtasks))


def write_subtask(fs: pafs.FileSystem, root: str, op_index: int, subtask: SubtaskSnapshot,
                  states: dict[str, StateMetadata], files: list[FileInfo],
                  cancelled: Callable[[], bool] = lambda: False) -> SubtaskMetadata:
    """Write one subtask's snapshot under ``root`` (a checkpoint being staged).

    ``states`` maps state names to their metadata in the order they were first registered:
    a state's position is its directory index (``op-N/keyed/<index>/``), so subtasks written
    separately (by Spark tasks) share one order when given the same pre-filled ``states``.
    New files are appended to ``files``. The keyed snapshot is consumed.
    """
    keyed: list[KeyedStateHandle] = []
    operator: list[OperatorStateHandle] = []
    kg_range = None
    if subtask.keyed is not None:
        kg_range = subtask.keyed.key_group_range
        keyed = _write_keyed(fs, root, op_index, subtask, states, files, cancelled)
    if subtask.operator is not None:
        operator = _write_operator_state(fs, root, op_index, subtask, states, files)
    return SubtaskMetadata(subtask.index, kg_range, tuple(keyed), tuple(operator))


def subtask_states(subtask: SubtaskSnapshot) -> dict[str, StateMetadata]:
    """The states a subtask's snapshot declares, in registration order (see write_subtask)."""
    states: dict[str, StateMetadata] = {}
    if subtask.keyed is not None:
        for descriptor in subtask.keyed.descriptors:
            _register(states, _keyed_metadata(descriptor))
    for entry in subtask.operator or ():
        _register(states, _operator_metadata(entry))
    return states


def _keyed_metadata(descriptor: Any) -> StateMetadata:
    return StateMetadata(descriptor.name, "keyed", descriptor.kind.value, descriptor.value_type,
                         descriptor.user_key_type, descriptor.namespace_type,
                         None if descriptor.ttl is None else descriptor.ttl.ttl)


def _operator_metadata(entry: OperatorStateSnapshotEntry) -> StateMetadata:
    return StateMetadata(entry.name, "operator", _MODE_KIND[entry.mode], entry.value_type_spec,
                         entry.key_type_spec)


def _register(states: dict[str, StateMetadata], state: StateMetadata) -> int:
    existing = states.setdefault(state.name, state)
    if existing != state:
        raise CheckpointError(f"state {state.name!r} is declared differently by two subtasks")
    return list(states).index(state.name)  # the file index: order of first registration


#: One keyed state's file being written: metadata, writer, pending rows, rows per key group,
#: the converter of a key group's entries into rows.
_StateFile = tuple[StateMetadata, ParquetFileWriter, dict[str, list[Any]], list[KeyGroupRows],
                   Callable[..., Any]]


def _write_keyed(fs: pafs.FileSystem, root: str, op_index: int, subtask: SubtaskSnapshot,
                 states: dict[str, StateMetadata], files: list[FileInfo],
                 cancelled: Callable[[], bool]) -> list[KeyedStateHandle]:
    snapshot = subtask.keyed
    assert snapshot is not None
    writers: dict[str, _StateFile] = {}
    for descriptor in snapshot.descriptors:
        meta = _keyed_metadata(descriptor)
        index = _register(states, meta)
        schema = keyed_schema(meta, snapshot.key_type)
        writer = ParquetFileWriter(fs, root, f"op-{op_index}/keyed/{index}/{subtask.index}.parquet",
                             schema)
        writers[meta.name] = (meta, writer, {f.name: [] for f in schema}, [],
                              block_appender(meta, snapshot.key_type))
    try:
        return _write_blocks(snapshot, writers, files, cancelled)
    except BaseException:
        for _, writer, _, _, _ in writers.values():
            writer.abandon()
        raise


def _write_blocks(snapshot: Any, writers: dict[str, _StateFile], files: list[FileInfo],
                  cancelled: Callable[[], bool]) -> list[KeyedStateHandle]:
    for block in snapshot:
        if cancelled():
            raise CheckpointCancelledError("the checkpoint was cancelled")
        meta, writer, pending, rows, convert = writers[block.state_name]
        if not block.entries:
            continue
        first = writer.rows + len(pending["key"])
        try:
            convert(block.key_group, block.entries, pending)
        except InvalidArgumentError as exc:
            raise CheckpointError(f"state {meta.name!r}, key group {block.key_group}: "
                                  f"{exc}") from exc
        rows.append(KeyGroupRows(block.key_group, first, len(block.entries)))
        writer.write(pending)  # one key group's rows (see ParquetFileWriter.write_table)
        for column in pending.values():
            column.clear()
    handles = []
    for meta, writer, pending, rows, _ in writers.values():
        writer.write(pending)
        files.append(writer.close())
        handles.append(KeyedStateHandle(meta.name, writer.relative, snapshot.key_group_range,
                                        tuple(rows)))
    return handles


def _write_operator_state(fs: pafs.FileSystem, root: str, op_index: int,
                          subtask: SubtaskSnapshot, states: dict[str, StateMetadata],
                          files: list[FileInfo]) -> list[OperatorStateHandle]:
    assert subtask.operator is not None
    handles = []
    for entry in subtask.operator:
        meta = _operator_metadata(entry)
        index = _register(states, meta)
        writer = ParquetFileWriter(fs, root,
                                   f"op-{op_index}/operator/{index}/{subtask.index}.parquet",
                                   operator_schema(meta))
        value = to_arrow(entry.value_type_spec)
        try:
            if entry.mode is OperatorStateMode.BROADCAST:
                assert entry.key_type_spec is not None
                key = to_arrow(entry.key_type_spec)
                writer.write({"key": [key(k) for k, _ in entry.entries],
                              "value": [value(v) for _, v in entry.entries]})
                count = len(entry.entries)
            else:
                writer.write({"value": [value(v) for v in entry.elements]})
                count = len(entry.elements)
        except BaseException:
            writer.abandon()
            raise
        files.append(writer.close())
        handles.append(OperatorStateHandle(entry.name, entry.mode, writer.relative, 0, count))
    return handles
