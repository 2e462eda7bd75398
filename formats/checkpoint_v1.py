"""statectl checkpoint format, version 1: typed Parquet files and ``_metadata.json``.

Layout (DESIGN "statectl checkpoint format, version 1")::

    <checkpoint dir>/_metadata.json                  written last; its presence means complete
    <checkpoint dir>/op-<i>/keyed/<s>/<subtask>.parquet      i, s: indexes; names live in the
    <checkpoint dir>/op-<i>/operator/<s>/<subtask>.parquet   metadata, so any uid/name is safe

Keyed files have the columns ``key_group`` (int32), ``key``, ``namespace`` (absent for the void
namespace), ``value`` and, with TTL, ``ttl_timestamp`` (int64 ms; ``list<int64>`` for list
state, ``map<K, int64>`` for map state, parallel to the values). Rows are grouped by key group
in ascending order; a row group never holds part of a key group together with another one, and
the metadata records per key group ``(first row, row count)``, so one key group is read from
its row groups only. Operator files have ``value`` (list states, in list order) or ``key`` and
``value`` (broadcast state). Every file's schema metadata carries the format version, state
name and kind.

Writing publishes atomically: files go into a sibling ``<dir>.inprogress-<random>`` directory
(fsynced where the filesystem is local), ``_metadata.json`` last (temp name, then rename), then
the directory is renamed into place (:mod:`formats.v1_publish`). A crash leaves either no
checkpoint or a complete one, and an existing checkpoint is never overwritten. All IO goes
through ``pyarrow.fs``: a local path or any URI pyarrow supports.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from formats.arrow_types import from_arrow, to_arrow
from formats.key_hash import key_groups
from formats.v1_columns import (
    block_appender,
    join_ttl,
    keyed_schema,
    operator_schema,
    ttl_spec,
    value_spec,
)
from formats.v1_publish import METADATA_FILE, fsync, publish, staged
from formats.v1_publish import filesystem as _filesystem
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
    check_relative_path,
    metadata_from_json,
)
from statecore.errors import (
    CheckpointCancelledError,
    CheckpointError,
    CorruptCheckpointError,
    InvalidArgumentError,
    StatectlError,
    UnsafePathError,
)
from statecore.key_groups import KeyGroupRange, assign_to_key_group
from statecore.keyed_backend import HeapKeyedStateBackend
from statecore.keyed_state import StateKind
from statecore.operator_backend import (
    OperatorStateBackend,
    OperatorStateMode,
    OperatorStateSnapshotEntry,
)
from statecore.serializers import VOID_NAMESPACE

__all__ = [
    "METADATA_FILE",
    "Checkpoint",
    "OperatorSnapshot",
    "copy_checkpoint",
    "subtask_states",
    "write_subtask",
    "SubtaskSnapshot",
    "open_checkpoint",
    "write_checkpoint",
]

#: Most rows, and Arrow bytes, in one row group. Key groups share row groups up to these
#: limits and are never split across a shared one; a larger key group gets row groups of its
#: own. One key group is read from its row groups, never the whole file.
ROW_GROUP_ROWS = 8192
ROW_GROUP_BYTES = 128 << 10
#: ``_metadata.json`` larger than this is refused before parsing (it is untrusted input).
MAX_METADATA_BYTES = 64 << 20
_MODE_KIND = {OperatorStateMode.SPLIT_DISTRIBUTE: "split", OperatorStateMode.UNION: "union",
              OperatorStateMode.BROADCAST: "broadcast"}


# -- writing --------------------------------------------------------------------------------


class _FileWriter:
    """One Parquet file being written, with its relative path; checksummed on close."""

    def __init__(self, fs: pafs.FileSystem, root: str, relative: str, schema: pa.Schema) -> None:
        self.fs, self.relative, self.schema = fs, relative, schema
        self.path = f"{root}/{relative}"
        fs.create_dir(self.path.rsplit("/", 1)[0], recursive=True)
        self._stream = fs.open_output_stream(self.path)
        # Statistics only where they help: min/max of values (a 4 KiB value's twice per row
        # group) would make the footer that every reader reads first grow with the data.
        self._writer = pq.ParquetWriter(
            self._stream, schema,
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

    def close(self) -> FileInfo:
        self._flush()
        self._writer.close()
        self._stream.close()
        fsync(self.fs, self.path)
        digest, size = hashlib.sha256(), 0
        with self.fs.open_input_stream(self.path) as stream:
            while chunk := stream.read(1 << 20):
                digest.update(chunk)
                size += len(chunk)
        return FileInfo(self.relative, size, "sha256:" + digest.hexdigest())


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
    fs, final = _filesystem(location, filesystem)
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


def copy_checkpoint(source: Checkpoint, location: str, checkpoint_id: int,
                    kind: CheckpointKind, *, created_ms: int | None = None) -> CheckpointMetadata:
    """A new checkpoint at ``location`` with the same state as ``source``, published atomically.

    Data files are hard-linked where both are on the local disk (no record is rewritten, and
    releasing either checkpoint later leaves the other intact), copied otherwise; only the
    metadata is new. ``source`` is verified (sizes and checksums) first and never modified.
    """
    fs = source.fs
    with staged(fs, location, location, "copying checkpoint to") as staging:
        for info in source.metadata.files:  # verify before linking: never copy damage
            source.verify_checksum(info.path)
        for info in source.metadata.files:
            link_file(source, info.path, staging)
        metadata = replace(source.metadata, checkpoint_id=checkpoint_id, kind=kind,
                           created_ms=int(time.time() * 1000) if created_ms is None
                           else created_ms)
        publish(fs, staging, location, metadata)
        return metadata


def link_file(source: Checkpoint, relative: str, staging: str) -> bool:
    """Put ``source``'s data file at the same relative path under ``staging``.

    A hard link where the filesystem is local (same inode: nothing rewritten, and releasing
    either checkpoint later leaves the other intact); a copy otherwise. True when linked.
    """
    fs = source.fs
    target = f"{staging}/{relative}"
    fs.create_dir(target.rsplit("/", 1)[0], recursive=True)
    if isinstance(fs, pafs.LocalFileSystem):
        try:
            os.link(source._path(relative), target)
            return True
        except OSError:
            pass  # another device, or links unsupported: copy instead
    fs.copy_file(source._path(relative), target)
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


def _write_keyed(fs: pafs.FileSystem, root: str, op_index: int, subtask: SubtaskSnapshot,
                 states: dict[str, StateMetadata], files: list[FileInfo],
                 cancelled: Callable[[], bool]) -> list[KeyedStateHandle]:
    snapshot = subtask.keyed
    assert snapshot is not None
    writers: dict[str, tuple[StateMetadata, _FileWriter, dict[str, list[Any]],
                             list[KeyGroupRows], Callable[..., Any]]] = {}
    for descriptor in snapshot.descriptors:
        meta = _keyed_metadata(descriptor)
        index = _register(states, meta)
        schema = keyed_schema(meta, snapshot.key_type)
        writer = _FileWriter(fs, root, f"op-{op_index}/keyed/{index}/{subtask.index}.parquet",
                             schema)
        writers[meta.name] = (meta, writer, {f.name: [] for f in schema}, [],
                              block_appender(meta, snapshot.key_type))
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
        writer.write(pending)  # one key group's rows (see _FileWriter.write_table)
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
        writer = _FileWriter(fs, root, f"op-{op_index}/operator/{index}/{subtask.index}.parquet",
                             operator_schema(meta))
        value = to_arrow(entry.value_type_spec)
        if entry.mode is OperatorStateMode.BROADCAST:
            assert entry.key_type_spec is not None
            key = to_arrow(entry.key_type_spec)
            writer.write({"key": [key(k) for k, _ in entry.entries],
                          "value": [value(v) for _, v in entry.entries]})
            count = len(entry.entries)
        else:
            writer.write({"value": [value(v) for v in entry.elements]})
            count = len(entry.elements)
        files.append(writer.close())
        handles.append(OperatorStateHandle(entry.name, entry.mode, writer.relative, 0, count))
    return handles


# -- reading --------------------------------------------------------------------------------


class _RowReader:
    """Rows of one data file by row number; each row group is decoded once, when first needed.

    Key groups are read in ascending order, so caching the last decoded row group is enough.
    """

    def __init__(self, relative: str, parquet: pq.ParquetFile, sizes: list[int]) -> None:
        self.relative, self.parquet, self.sizes = relative, parquet, sizes
        self.starts = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
        self._cached: tuple[int, dict[str, list[Any]]] | None = None

    def _group(self, index: int) -> dict[str, list[Any]]:
        if self._cached is None or self._cached[0] != index:
            try:
                table = self.parquet.read_row_groups([index])
                if table.num_rows != self.sizes[index]:
                    raise CorruptCheckpointError(
                        f"{self.relative}: row group {index} has {table.num_rows} rows, its "
                        f"footer says {self.sizes[index]}")
                columns = {name: table.column(name).to_pylist() for name in table.column_names}
            except (pa.ArrowException, OSError, ValueError) as exc:  # incl. UnicodeDecodeError
                raise CorruptCheckpointError(f"{self.relative}: {exc}") from exc
            self._cached = (index, columns)
        return self._cached[1]

    def rows(self, first: int, count: int) -> dict[str, list[Any]]:
        """Columns of rows ``[first, first + count)``, from the row groups that hold them."""
        if first + count > self.starts[-1]:
            raise CorruptCheckpointError(f"{self.relative}: rows {first}..{first + count} "
                                         f"beyond its {self.starts[-1]} rows")
        out: dict[str, list[Any]] = {name: [] for name in self.parquet.schema_arrow.names}
        for index in range(len(self.starts) - 1):
            lo, hi = self.starts[index], self.starts[index + 1]
            if hi <= first or lo >= first + count or lo == hi:
                continue
            group = self._group(index)
            for name, values in group.items():
                out[name].extend(values[max(first, lo) - lo:min(first + count, hi) - lo])
        return out


class Checkpoint:
    """An opened checkpoint: its validated metadata and access to its files.

    Nothing is written to it. Every failure to read is a :class:`StatectlError`.
    """

    #: ``inspect``'s ``format`` field: ``statectl`` here, ``flink`` for a Flink snapshot
    format_name = "statectl"

    def __init__(self, fs: pafs.FileSystem, root: str, metadata: CheckpointMetadata) -> None:
        self.fs, self.root, self.metadata = fs, root, metadata
        self._files = {f.path: f for f in metadata.files}

    def open_problems(self) -> list[tuple[str, str, str]]:
        """``(kind, where, message)`` of what could not be read when opening (``verify``)."""
        return []

    def key_group_of(self, op: OperatorMetadata, key: Any) -> int | None:
        """The key group of ``key`` in ``op`` (reference §1.2); ``None``: not computable."""
        assert op.key_type is not None
        group: int = assign_to_key_group(key, op.max_parallelism, op.key_type)
        return group

    def expected_key_groups(self, op: OperatorMetadata, handle: KeyedStateHandle,
                            table: pa.Table) -> np.ndarray | None:
        """The key group each row's key hashes to (reference §1.2), for ``verify``."""
        assert op.key_type is not None
        result: np.ndarray = key_groups(table.column("key"), op.key_type, op.max_parallelism)
        return result

    def operator(self, uid: str) -> OperatorMetadata:
        for op in self.metadata.operators:
            if op.uid == uid or op.operator_id == uid:
                return op
        raise CheckpointError(f"no operator with uid {uid!r} in this checkpoint")

    def _path(self, relative: str) -> str:
        check_relative_path(relative)
        path = f"{self.root}/{relative}"
        if isinstance(self.fs, pafs.LocalFileSystem):
            real_root = os.path.realpath(self.root)
            if not os.path.realpath(path).startswith(real_root + os.sep):
                raise UnsafePathError(f"{relative!r} leads out of the checkpoint directory")
        return path

    def _parquet(self, relative: str) -> pq.ParquetFile:
        info = self._files[relative]
        path = self._path(relative)
        try:
            actual = self.fs.get_file_info(path)
            if actual.type != pafs.FileType.File:
                raise CorruptCheckpointError(f"{relative} is missing")
            if actual.size != info.size:
                raise CorruptCheckpointError(
                    f"{relative} has {actual.size} bytes, the metadata says {info.size}")
            return pq.ParquetFile(self.fs.open_input_file(path))
        except (pa.ArrowException, OSError, ValueError) as exc:  # incl. UnicodeDecodeError
            raise CorruptCheckpointError(f"{relative} is not a readable Parquet file: {exc}") \
                from exc

    def row_groups(self, relative: str) -> list[tuple[int, int]]:
        """``(rows, compressed bytes)`` of each row group of a data file, from its footer only."""
        parquet = self._parquet(relative)
        try:
            footer = parquet.metadata
            return [(footer.row_group(i).num_rows,
                     sum(footer.row_group(i).column(c).total_compressed_size
                         for c in range(footer.num_columns)))
                    for i in range(footer.num_row_groups)]
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise CorruptCheckpointError(f"{relative}: unreadable footer: {exc}") from exc

    def verify_checksum(self, relative: str) -> None:
        """Read a whole file and compare its SHA-256 with the metadata."""
        info = self._files[relative]
        digest = hashlib.sha256()
        path = self._path(relative)
        try:
            actual = self.fs.get_file_info(path)
            if actual.type != pafs.FileType.File or actual.size != info.size:
                raise CorruptCheckpointError(
                    f"{relative} is missing, not a regular file, or not {info.size} bytes")
            with self.fs.open_input_stream(path) as stream:
                while chunk := stream.read(1 << 20):
                    digest.update(chunk)
        except OSError as exc:
            raise CorruptCheckpointError(f"cannot read {relative}: {exc}") from exc
        if "sha256:" + digest.hexdigest() != info.checksum:
            raise CorruptCheckpointError(f"{relative}: checksum mismatch")

    def _reader(self, relative: str, schema: pa.Schema) -> _RowReader:
        parquet = self._parquet(relative)
        try:
            if not parquet.schema_arrow.remove_metadata().equals(schema.remove_metadata()):
                raise CorruptCheckpointError(
                    f"{relative}: columns {parquet.schema_arrow} differ from the declared "
                    f"{schema}")
            sizes = [parquet.metadata.row_group(i).num_rows
                     for i in range(parquet.num_row_groups)]
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise CorruptCheckpointError(f"{relative}: {exc}") from exc
        return _RowReader(relative, parquet, sizes)

    def keyed_entries(self, uid: str, state_name: str,
                      key_groups: KeyGroupRange | None = None
                      ) -> Iterator[tuple[int, Any, Any, Any]]:
        """``(key_group, key, namespace, stored state)`` of one keyed state, key group order.

        Only the row groups of the requested key groups are read. TTL states come back as
        stored in a backend (``TtlValue`` wrappers).
        """
        op = self.operator(uid)
        state = _state(op, state_name, "keyed")
        assert op.key_type is not None
        schema = keyed_schema(state, op.key_type)
        read_key = from_arrow(op.key_type)
        read_ns = (None if state.namespace_type == "void"
                   else from_arrow(state.namespace_type))
        read_value = from_arrow(value_spec(state))
        read_ttl = from_arrow(ttl_spec(state))
        handles = [h for st in op.subtasks for h in st.keyed if h.state == state_name]
        selected = [(r, h) for h in handles for r in h.rows
                    if key_groups is None or r.key_group in key_groups]
        readers: dict[str, _RowReader] = {}
        for group, handle in sorted(selected, key=lambda pair: pair[0].key_group):
            if handle.file not in readers:
                readers[handle.file] = self._reader(handle.file, schema)
            columns = readers[handle.file].rows(group.first_row, group.row_count)
            for i in range(group.row_count):
                if columns["key_group"][i] != group.key_group:
                    raise CorruptCheckpointError(
                        f"{handle.file}: row {group.first_row + i} is in key group "
                        f"{columns['key_group'][i]}, the metadata says {group.key_group}")
                namespace = VOID_NAMESPACE if read_ns is None else read_ns(columns["namespace"][i])
                value = read_value(columns["value"][i])
                ttl = read_ttl(columns["ttl_timestamp"][i]) if state.ttl else None
                yield group.key_group, read_key(columns["key"][i]), namespace, join_ttl(
                    state, value, ttl)

    def rows_table(self, relative: str, schema: pa.Schema, first: int, count: int,
                   columns: Sequence[str] | None = None) -> pa.Table:
        """Rows ``[first, first + count)`` of a data file as an Arrow table (its row groups only).

        The file's columns must be ``schema``'s; ``columns`` selects some of them.
        """
        reader = self._reader(relative, schema)
        if first + count > reader.starts[-1]:
            raise CorruptCheckpointError(f"{relative}: rows {first}..{first + count} beyond "
                                         f"its {reader.starts[-1]} rows")
        groups = [i for i in range(len(reader.sizes))
                  if reader.starts[i] < first + count and reader.starts[i + 1] > first]
        names = list(columns) if columns is not None else schema.names
        if not groups or count == 0:
            return schema.empty_table().select(names)
        try:
            table = reader.parquet.read_row_groups(groups, columns=names)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise CorruptCheckpointError(f"{relative}: {exc}") from exc
        expected = reader.starts[groups[-1] + 1] - reader.starts[groups[0]]
        if table.num_rows != expected:
            raise CorruptCheckpointError(f"{relative}: row groups hold {table.num_rows} rows, "
                                         f"the footer says {expected}")
        return table.slice(first - reader.starts[groups[0]], count)

    def keyed_table(self, uid: str, handle: KeyedStateHandle,
                    columns: Sequence[str] | None = None) -> pa.Table:
        """The rows of one keyed handle as an Arrow table, in the file's typed columns.

        The ``key_group`` column is checked against the handle's per-key-group rows.
        """
        op = self.operator(uid)
        state = _state(op, handle.state, "keyed")
        assert op.key_type is not None
        schema = keyed_schema(state, op.key_type)
        names = None if columns is None else list(dict.fromkeys(["key_group", *columns]))
        if not handle.rows:
            return schema.empty_table().select(names or schema.names)
        first = handle.rows[0].first_row
        count = handle.rows[-1].first_row + handle.rows[-1].row_count - first
        table = self.rows_table(handle.file, schema, first, count, names)
        stored = np.asarray(table.column("key_group").to_numpy(), dtype=np.int64)
        expected = np.repeat([r.key_group for r in handle.rows],
                             [r.row_count for r in handle.rows])
        wrong = np.flatnonzero(stored != expected)
        if wrong.size:
            bad = int(wrong[0])
            raise CorruptCheckpointError(
                f"{handle.file}: row {first + bad} is in key group {stored[bad]}, the metadata "
                f"says {expected[bad]}")
        return table

    def operator_entries(self, uid: str, subtask_index: int) -> list[OperatorStateSnapshotEntry]:
        """The operator state one subtask holds, as snapshot entries (for restore)."""
        op = self.operator(uid)
        subtasks = [st for st in op.subtasks if st.index == subtask_index]
        if not subtasks:
            raise CheckpointError(f"operator {uid!r} has no subtask {subtask_index}")
        out = []
        for handle in subtasks[0].operator:
            state = _state(op, handle.state, "operator")
            columns = self._reader(handle.file, operator_schema(state)).rows(
                handle.first_element, handle.element_count)
            values = [from_arrow(state.value_type)(v) for v in columns["value"]]
            try:
                if handle.mode is OperatorStateMode.BROADCAST:
                    assert state.user_key_type is not None
                    keys = [from_arrow(state.user_key_type)(k) for k in columns["key"]]
                    out.append(OperatorStateSnapshotEntry(
                        state.name, handle.mode, state.value_type, state.user_key_type,
                        entries=tuple(zip(keys, values, strict=True))))
                else:
                    out.append(OperatorStateSnapshotEntry(state.name, handle.mode,
                                                          state.value_type,
                                                          elements=tuple(values)))
            except StatectlError as exc:
                raise CorruptCheckpointError(f"{handle.file}: {exc}") from exc
        return out

    def restore_keyed(self, uid: str, backend: HeapKeyedStateBackend[Any]) -> int:
        """Load the backend's key groups of every state it has registered; entries loaded.

        Register the states first (descriptors carry the functions a file cannot); a state the
        checkpoint lacks stays empty.
        """
        op = self.operator(uid)
        if op.max_parallelism != backend.max_parallelism:
            raise CheckpointError(
                f"the backend has max parallelism {backend.max_parallelism}, the checkpoint "
                f"{op.max_parallelism}: rescale the checkpoint first")
        loaded = 0
        declared = {s.name: s for s in op.states if s.scope == "keyed"}
        for descriptor in backend.descriptors:
            if descriptor.name not in declared:
                continue
            _check_compatible(declared[descriptor.name], descriptor)
            table = backend.table(descriptor.name)
            for key_group, key, namespace, stored in self.keyed_entries(
                    uid, descriptor.name, backend.key_group_range):
                table.map_for_key_group(key_group).put(key, namespace, stored)
                loaded += 1
        return loaded

    def restore_operator(self, uid: str, subtask_index: int) -> OperatorStateBackend:
        return OperatorStateBackend(self.operator_entries(uid, subtask_index))


def _state(op: OperatorMetadata, name: str, scope: str) -> StateMetadata:
    for state in op.states:
        if state.name == name and state.scope == scope:
            return state
    raise CheckpointError(f"operator {op.uid!r} has no {scope} state {name!r}")


def _check_compatible(state: StateMetadata, descriptor: Any) -> None:
    expected = (StateKind(state.kind), state.value_type, state.user_key_type,
                state.namespace_type, state.ttl is not None)
    actual = (descriptor.kind, descriptor.value_type, descriptor.user_key_type,
              descriptor.namespace_type, descriptor.ttl is not None)
    if expected != actual:
        raise CheckpointError(
            f"state {state.name!r} was checkpointed as {state.kind} {state.value_type} "
            f"(ttl: {state.ttl is not None}), the backend declares {descriptor.kind.value} "
            f"{descriptor.value_type} (ttl: {descriptor.ttl is not None})")


def _exists(fs: pafs.FileSystem, path: str) -> bool:
    try:
        return bool(fs.get_file_info(path).type != pafs.FileType.NotFound)
    except OSError:
        return False


def _not_a_checkpoint(fs: pafs.FileSystem, root: str, location: str) -> str:
    """Why ``location`` is not a checkpoint, and what to give instead."""
    kind = fs.get_file_info(root).type
    if kind == pafs.FileType.NotFound:
        return (f"{location} is not a checkpoint: it does not exist; give a checkpoint or "
                f"savepoint directory (one with {METADATA_FILE})")
    if kind != pafs.FileType.Directory:
        return (f"{location} is not a checkpoint: it is a file; give the directory that "
                f"holds {METADATA_FILE}")
    inside = sorted(i.base_name for i in fs.get_file_info(pafs.FileSelector(root))
                    if i.type == pafs.FileType.Directory
                    and i.base_name.startswith(("chk-", "savepoint-")))
    if inside:
        shown = ", ".join(inside[-3:])
        return (f"{location} is not a checkpoint but a state directory: give one of its "
                f"checkpoints ({shown}; `statectl snapshot list {location}` lists them)")
    return (f"{location} is not a checkpoint: it has no {METADATA_FILE} (an incomplete "
            f"checkpoint has none)")


def open_checkpoint(location: str, *, filesystem: pafs.FileSystem | None = None,
                    strict: bool = True, allow_pickle: bool = False) -> Checkpoint:
    """Open and validate a checkpoint, statectl's or Flink's (detected here).

    statectl's is a directory with ``_metadata.json``; a real Flink checkpoint or savepoint
    is a directory with ``_metadata``.

    ``strict=False`` (for ``verify``) opens a Flink snapshot even when some of its states
    cannot be decoded, recording why in its ``problems``. ``allow_pickle=True`` shows a Flink
    snapshot's PyFlink-pickled values unpickled (unsafe: it runs code the snapshot carries);
    statectl's own format never holds pickles.
    """
    fs, root = _filesystem(location, filesystem)
    root = root.rstrip("/") or root
    for name in (METADATA_FILE, "_metadata"):  # the metadata file itself: its directory
        if root.endswith("/" + name):
            root = root.rsplit("/", 1)[0]
    path = f"{root}/{METADATA_FILE}"
    from formats.flink.checkpoint import is_flink_checkpoint, open_flink_checkpoint
    if not _exists(fs, path) and is_flink_checkpoint(fs, root):
        return open_flink_checkpoint(fs, root, location, strict=strict,
                                     allow_pickle=allow_pickle)
    if isinstance(fs, pafs.LocalFileSystem) and os.path.islink(path) and not os.path.realpath(
            path).startswith(os.path.realpath(root) + os.sep):
        raise UnsafePathError(f"{METADATA_FILE} leads out of the checkpoint directory")
    try:
        info = fs.get_file_info(path)
        if info.type != pafs.FileType.File:
            raise CheckpointError(_not_a_checkpoint(fs, root, location))
        if info.size is not None and info.size > MAX_METADATA_BYTES:
            raise CorruptCheckpointError(f"{METADATA_FILE} is {info.size} bytes, more than "
                                         f"the {MAX_METADATA_BYTES} a checkpoint may have")
        with fs.open_input_stream(path) as stream:
            raw = stream.read(MAX_METADATA_BYTES + 1)
    except OSError as exc:
        raise CheckpointError(f"cannot read {path}: {exc}") from exc
    try:
        document = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise CorruptCheckpointError(f"{METADATA_FILE} is not valid JSON: {exc}") from exc
    return Checkpoint(fs, root, metadata_from_json(document))
