"""Flink's checkpoint metadata file ``_metadata``, versions 3 to 6 (reference §8).

Parses what ``Checkpoints.loadCheckpointMetadata`` reads: the header, master states, and per
operator its name and uid (version 5 and later), OperatorID, parallelism, max parallelism,
coordinator state and subtask states with their handles. Versions 4 and later end with the
Java-serialized ``CheckpointProperties``; we do not deserialize Java objects, only scan them for
the snapshot type (checkpoint or savepoint) and the savepoint format (see
:func:`_properties`).

Everything is read from untrusted bytes: every count is checked against the bytes left, every
handle type against the known ones, and any inconsistency is a ``CorruptCheckpointError``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from formats.flink.java.input import DataReader
from statecore.errors import CorruptCheckpointError, UnsupportedFormatError
from statecore.key_groups import UPPER_BOUND_MAX_PARALLELISM

__all__ = [
    "HEADER_MAGIC",
    "SUPPORTED_VERSIONS",
    "FlinkIncrementalHandle",
    "FlinkKeyedHandle",
    "FlinkMetadata",
    "FlinkOperator",
    "FlinkOperatorHandle",
    "FlinkSubtask",
    "StreamHandle",
    "parse_metadata",
]

HEADER_MAGIC = 0x4960672D
MASTER_STATE_MAGIC = 0xC96B1696 - (1 << 32)
SUPPORTED_VERSIONS = (3, 4, 5, 6)

# Handle type bytes (reference §8.5).
NULL_HANDLE = 0
BYTE_STREAM = 1
FILE_STREAM = 2
KEY_GROUPS = 3
PARTITIONABLE_OPERATOR = 4
INCREMENTAL_KEY_GROUPS = 5
RELATIVE_STREAM = 6
SAVEPOINT_KEY_GROUPS = 7
CHANGELOG_HANDLES = frozenset({8, 9, 10, 13, 14})
INCREMENTAL_KEY_GROUPS_V2 = 11
KEY_GROUPS_V2 = 12
SEGMENT_FILE = 15
EMPTY_SEGMENT_FILE = 16
SEGMENT_PARTITIONABLE_OPERATOR = 17

#: ``OperatorStateHandle.Mode`` ordinals.
OPERATOR_MODES = ("SPLIT_DISTRIBUTE", "UNION", "BROADCAST")


@dataclass(frozen=True)
class StreamHandle:
    """Where a state stream's bytes are.

    ``kind`` is ``inline`` (bytes kept in ``_metadata``; ``name`` is the path the file would
    have had), ``file`` (``path`` as Flink stored it, usually absolute), ``relative`` (``path``
    relative to the snapshot directory), ``segment`` (``size`` bytes at ``start`` of ``path``)
    or ``empty``.
    """

    kind: str
    path: str
    size: int
    data: bytes | None = None
    start: int = 0

    @property
    def file_name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]


@dataclass(frozen=True)
class FlinkKeyedHandle:
    """A keyed state handle: ``offsets[i]`` is where key group ``first_key_group + i`` starts.

    ``kind`` is ``heap`` (``KeyGroupsStateHandle``, types 3 and 12) or ``canonical``
    (``KeyGroupsSavepointStateHandle``, type 7: key groups without data have offset 0).
    """

    kind: str
    first_key_group: int
    offsets: tuple[int, ...]
    stream: StreamHandle
    handle_id: str | None = None

    @property
    def last_key_group(self) -> int:
        return self.first_key_group + len(self.offsets) - 1


@dataclass(frozen=True)
class FlinkIncrementalHandle:
    """An ``IncrementalRemoteKeyedStateHandle`` (types 5 and 11): a RocksDB instance's files.

    ``shared`` and ``private`` pair each file's RocksDB name (``HandleAndLocalPath``'s local
    path: ``000014.sst``, ``MANIFEST-000005``, ``CURRENT``, ``OPTIONS-000013``) with where
    Flink stored it; ``meta`` holds the states' meta data (``KeyedBackendSerializationProxy``).
    ``checkpointed_size`` is ``-1`` when unknown (type 5).
    """

    first_key_group: int
    last_key_group: int
    checkpoint_id: int
    backend_id: str
    checkpointed_size: int
    meta: StreamHandle
    shared: tuple[tuple[str, StreamHandle], ...]
    private: tuple[tuple[str, StreamHandle], ...]
    handle_id: str | None = None
    kind: str = "incremental"

    @property
    def files(self) -> tuple[tuple[str, StreamHandle], ...]:
        """Every RocksDB file of the handle, shared ones first."""
        return self.shared + self.private


@dataclass(frozen=True)
class FlinkOperatorHandle:
    """An operator state handle: per state name its mode and element byte offsets."""

    states: dict[str, tuple[str, tuple[int, ...]]]
    stream: StreamHandle


@dataclass(frozen=True)
class FlinkSubtask:
    """One subtask's state handles (a finished subtask has none)."""

    index: int
    finished: bool = False
    managed_operator: tuple[FlinkOperatorHandle, ...] = ()
    raw_operator: tuple[FlinkOperatorHandle, ...] = ()
    managed_keyed: tuple[FlinkKeyedHandle | FlinkIncrementalHandle, ...] = ()
    raw_keyed: tuple[FlinkKeyedHandle | FlinkIncrementalHandle, ...] = ()
    channel_state_handles: int = 0


@dataclass(frozen=True)
class FlinkOperator:
    """One operator: name and uid (``None`` when empty), OperatorID, parallelisms, state."""

    name: str | None
    uid: str | None
    operator_id: str  # 32 lowercase hex digits, as Flink prints an OperatorID
    parallelism: int
    max_parallelism: int
    coordinator_state: StreamHandle | None
    subtasks: tuple[FlinkSubtask, ...]
    fully_finished: bool = False


@dataclass(frozen=True)
class FlinkMetadata:
    """A whole ``_metadata`` file."""

    version: int
    checkpoint_id: int
    master_states: tuple[tuple[str, int, bytes], ...]
    operators: tuple[FlinkOperator, ...]
    is_savepoint: bool | None = None  # from the properties (versions >= 4), when found
    savepoint_format: str | None = None  # "CANONICAL" | "NATIVE", savepoints only
    properties_offset: int = 0  # where the (unparsed) Java-serialized properties start
    extra: dict[str, str] = field(default_factory=dict)
    #: the bytes after the operator states: the Java-serialized ``CheckpointProperties``
    #: (versions >= 4; checked by :mod:`formats.flink.read.checkpoint_properties`)
    properties: bytes = b""

    def stream_handles(self) -> Iterator[tuple[str, StreamHandle]]:
        """Every stream the snapshot refers to, with what it holds.

        ``("keyed state of operator X, subtask 1", stream)``: coordinator state, then each
        subtask's handles (an incremental handle's metadata and files).
        """
        for op in self.operators:
            # named as inspect names it: the uid, else the name with the OperatorID
            name = op.uid or (f"{op.name} ({op.operator_id})" if op.name else op.operator_id)
            if op.coordinator_state is not None:
                yield f"coordinator state of operator {name}", op.coordinator_state
            for st in op.subtasks:
                for handle in (*st.managed_operator, *st.raw_operator):
                    yield f"operator state of operator {name}, subtask {st.index}", handle.stream
                held = f"keyed state of operator {name}, subtask {st.index}"
                for keyed in (*st.managed_keyed, *st.raw_keyed):
                    if isinstance(keyed, FlinkIncrementalHandle):
                        yield held, keyed.meta
                        yield from ((held, stream) for _name, stream in keyed.files)
                    else:
                        yield held, keyed.stream


def parse_metadata(data: bytes, where: str = "_metadata", path: str | None = None
                   ) -> FlinkMetadata:
    """Parse a whole ``_metadata`` file (reference §8.2).

    A file that ends before its structure does (its own reads run past its end, or a count
    or length needs more bytes than are left) is said to be truncated, with ``path`` (where
    the file is, for the message; default ``where``).
    """
    if len(data) < 8:
        raise CorruptCheckpointError(f"{path or where} is truncated: {len(data)} bytes, too "
                                     f"short for a Flink checkpoint metadata file")
    try:
        return _parse_metadata(data, where)
    except CorruptCheckpointError as exc:
        message = str(exc)
        if message.startswith(f"{where}: ") and any(
                sign in message for sign in ("truncated:", "bytes left)", " left (at byte")):
            detail = message.removeprefix(f"{where}: ").removeprefix("truncated: ")
            raise CorruptCheckpointError(
                f"{path or where} is truncated: it ends after {len(data)} bytes, before its "
                f"last part ({detail})") from exc
        raise


def _parse_metadata(data: bytes, where: str) -> FlinkMetadata:
    r = DataReader(data, where)
    magic = r.i32() & 0xFFFFFFFF
    if magic != HEADER_MAGIC:
        raise CorruptCheckpointError(f"{where}: not a Flink metadata file (magic number "
                                     f"{magic:#010x}, expected {HEADER_MAGIC:#010x})")
    version = r.i32()
    if version not in SUPPORTED_VERSIONS:
        raise UnsupportedFormatError(
            f"{where}: Flink metadata version {version}; statectl reads versions "
            f"{SUPPORTED_VERSIONS[0]} to {SUPPORTED_VERSIONS[-1]} (Flink 1.11 to 2.x)")
    checkpoint_id = r.i64()
    if checkpoint_id < 0:
        raise r.fail(f"negative checkpoint id {checkpoint_id}")
    masters = tuple(_master_state(r) for _ in range(r.count("master states", 8)))
    operators = tuple(_operator(r, version) for _ in range(r.count("operator states", 24)))
    is_savepoint, fmt = _properties(r.data[r.pos:r.end]) if version >= 4 else (None, None)
    return FlinkMetadata(version, checkpoint_id, masters, operators, is_savepoint, fmt, r.pos,
                         properties=r.data[r.pos:r.end])


def _master_state(r: DataReader) -> tuple[str, int, bytes]:
    if r.i32() != MASTER_STATE_MAGIC:
        raise r.fail("bad master state magic number")
    length = r.count("master state length")
    inner = DataReader(r.raw(length), r.where + " (master state)")
    version = inner.i32()
    name = inner.utf()
    payload = inner.raw(inner.count("master state bytes"))
    if not inner.at_end():
        raise inner.fail("trailing bytes in master state")
    return name, version, payload


def _operator(r: DataReader, version: int) -> FlinkOperator:
    name = uid = None
    if version >= 5:
        name, uid = r.utf() or None, r.utf() or None
    operator_id = r.raw(16).hex()
    parallelism, max_parallelism = r.i32(), r.i32()
    if not 1 <= parallelism <= max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        # Flink's KeyGroupRangeAssignment bounds (reference §1): 1 <= p <= max p <= 2^15
        raise r.fail(f"operator {operator_id}: parallelism {parallelism} and max parallelism "
                     f"{max_parallelism} outside 1 <= p <= max p <= "
                     f"{UPPER_BOUND_MAX_PARALLELISM}")
    coordinator = stream_handle(r)
    if coordinator is not None and coordinator.kind != "inline":
        raise r.fail(f"operator {operator_id}: coordinator state must be inline bytes")
    n = r.i32()
    if n < 0:
        if coordinator is not None:
            raise r.fail(f"operator {operator_id}: a finished operator with coordinator state")
        return FlinkOperator(name, uid, operator_id, parallelism, max_parallelism, None, (),
                             fully_finished=True)
    n = r.count("subtask states", 4, n)
    subtasks = []
    seen: set[int] = set()
    for _ in range(n):
        index = r.i32()
        finished = index < 0
        if finished:
            index = -index - 1
        if index in seen or index >= max(parallelism, 1):
            raise r.fail(f"operator {operator_id}: subtask index {index} repeated or not "
                         f"below the parallelism {parallelism}")
        seen.add(index)
        subtasks.append(FlinkSubtask(index, finished=True) if finished
                        else _subtask(r, index, version))
    return FlinkOperator(name, uid, operator_id, parallelism, max_parallelism, coordinator,
                         tuple(sorted(subtasks, key=lambda s: s.index)))


def _subtask(r: DataReader, index: int, version: int) -> FlinkSubtask:
    managed_op = _operator_handles(r)
    raw_op = _operator_handles(r)
    managed_keyed = _keyed_handles(r)
    raw_keyed = _keyed_handles(r)
    channels = _channel_handles(r, version) + _channel_handles(r, version)
    return FlinkSubtask(index, False, managed_op, raw_op, managed_keyed, raw_keyed, channels)


def _operator_handles(r: DataReader) -> tuple[FlinkOperatorHandle, ...]:
    present = r.i32()
    if present == 0:
        return ()
    if present != 1:
        raise r.fail(f"operator state flag {present}, expected 0 or 1")
    handle = operator_handle(r)
    return () if handle is None else (handle,)


def _keyed_handles(r: DataReader) -> tuple[FlinkKeyedHandle | FlinkIncrementalHandle, ...]:
    handle = keyed_handle(r)
    return () if handle is None else (handle,)


def _channel_handles(r: DataReader, version: int) -> int:
    """Skip input-channel or result-subpartition handles (unaligned checkpoints); how many."""
    n = r.count("channel state handles", 4)
    for _ in range(n):
        r.i32()  # subtask index
        r.i32()
        r.i32()  # gate/partition index, channel/subpartition index
        r.raw(8 * r.count("channel state offsets", 8))
        r.i64()  # state size
        stream_handle(r)
    return n


def stream_handle(r: DataReader) -> StreamHandle | None:
    """``serializeStreamStateHandle`` (reference §8.5)."""
    kind = r.u8()
    if kind == NULL_HANDLE:
        return None
    if kind == BYTE_STREAM:
        name = r.utf()
        data = r.raw(r.count("inline state bytes"))
        return StreamHandle("inline", name, len(data), data)
    if kind == FILE_STREAM:
        size = r.i64()
        return StreamHandle("file", r.utf(), _size(r, size))
    if kind == RELATIVE_STREAM:
        path = r.utf()
        return StreamHandle("relative", path, _size(r, r.i64()))
    if kind == SEGMENT_FILE:
        start, size = r.i64(), r.i64()
        r.i32()  # scope ordinal
        path = r.utf()
        r.utf()  # logical file id
        if start < 0:
            raise r.fail(f"negative segment start {start}")
        return StreamHandle("segment", path, _size(r, size), start=start)
    if kind == EMPTY_SEGMENT_FILE:
        return StreamHandle("empty", "", 0)
    raise r.fail(f"unknown stream handle type {kind}")


def _size(r: DataReader, size: int) -> int:
    if size < 0:
        raise r.fail(f"negative state size {size}")
    return size


def keyed_handle(r: DataReader) -> FlinkKeyedHandle | FlinkIncrementalHandle | None:
    """``deserializeKeyedStateHandle`` of ``MetadataV2V3SerializerBase`` (reference §8.5)."""
    kind = r.i8()
    if kind == NULL_HANDLE:
        return None
    if kind in (KEY_GROUPS, KEY_GROUPS_V2, SAVEPOINT_KEY_GROUPS):
        start = r.i32()
        n = r.count("key groups", 8)
        if start < 0:
            raise r.fail(f"negative first key group {start}")
        offsets = tuple(r.fixed_array("q", 8, n))
        if any(o < 0 for o in offsets):
            raise r.fail("negative key-group offset")
        stream = stream_handle(r)
        handle_id = r.utf() if kind == KEY_GROUPS_V2 else None
        if stream is None:
            raise r.fail("keyed state handle without a stream")
        return FlinkKeyedHandle("canonical" if kind == SAVEPOINT_KEY_GROUPS else "heap", start,
                                offsets, stream, handle_id)
    if kind in (INCREMENTAL_KEY_GROUPS, INCREMENTAL_KEY_GROUPS_V2):
        return _incremental_handle(r, kind == INCREMENTAL_KEY_GROUPS_V2)
    if kind in CHANGELOG_HANDLES:
        raise UnsupportedFormatError(
            f"{r.where}: keyed state handle type {kind} (changelog state backend); statectl "
            f"reads full and incremental snapshots of the hashmap and RocksDB backends and "
            f"canonical savepoints")
    raise r.fail(f"unknown keyed state handle type {kind}")


def _incremental_handle(r: DataReader, v2: bool) -> FlinkIncrementalHandle:
    """``deserializeIncrementalStateHandle``: ids, key groups, meta data and the file lists."""
    checkpoint_id = r.i64()
    backend_id = r.utf()
    start = r.i32()
    n = r.i32()
    if start < 0 or n < 1 or start + n - 1 >= UPPER_BOUND_MAX_PARALLELISM:
        raise r.fail(f"impossible key-group range: {n} key groups from {start}")
    checkpointed_size = r.i64() if v2 else -1
    meta = stream_handle(r)
    if meta is None:
        raise r.fail("incremental keyed state handle without its meta data")
    shared = _handle_and_local_paths(r, "shared")
    private = _handle_and_local_paths(r, "private")
    handle_id = r.utf() if v2 else None
    return FlinkIncrementalHandle(start, start + n - 1, checkpoint_id, backend_id,
                                  checkpointed_size, meta, shared, private, handle_id)


def _handle_and_local_paths(r: DataReader, what: str) -> tuple[tuple[str, StreamHandle], ...]:
    """``deserializeHandleAndLocalPathList``: ``int n``, then n x (UTF local path, handle)."""
    out = []
    for _ in range(r.count(f"{what} state files", 3)):
        local = r.utf()
        if not local or "/" in local or "\\" in local or local in (".", ".."):
            raise r.fail(f"{what} state file with the local name {local!r}")
        handle = stream_handle(r)
        if handle is None:
            raise r.fail(f"{what} state file {local!r} without a handle")
        out.append((local, handle))
    return tuple(out)


def operator_handle(r: DataReader) -> FlinkOperatorHandle | None:
    kind = r.i8()
    if kind == NULL_HANDLE:
        return None
    if kind not in (PARTITIONABLE_OPERATOR, SEGMENT_PARTITIONABLE_OPERATOR):
        raise r.fail(f"unknown operator state handle type {kind}")
    states: dict[str, tuple[str, tuple[int, ...]]] = {}
    for _ in range(r.count("operator states", 7)):
        name = r.utf()
        mode = r.u8()
        if mode >= len(OPERATOR_MODES):
            raise r.fail(f"operator state {name!r}: unknown distribution mode {mode}")
        offsets = tuple(r.i64() for _ in range(r.count("element offsets", 8)))
        if any(o < 0 for o in offsets):
            raise r.fail(f"operator state {name!r}: negative element offset")
        states[name] = (OPERATOR_MODES[mode], offsets)
    if kind == SEGMENT_PARTITIONABLE_OPERATOR:
        r.utf()
        r.utf()  # task-owned and shared directories
        r.boolean()  # is empty
    stream = stream_handle(r)
    if stream is None:
        raise r.fail("operator state handle without a stream")
    return FlinkOperatorHandle(states, stream)


def _properties(trailer: bytes) -> tuple[bool | None, str | None]:
    """The snapshot type from the Java-serialized ``CheckpointProperties`` (versions >= 4).

    We do not deserialize Java objects; the class names and enum constants in the stream are
    plain modified UTF-8 strings, so the type is found by name: ``SavepointType`` with its
    ``SavepointFormatType`` constant (``CANONICAL`` or ``NATIVE``), or ``CheckpointType``.
    """
    if b"SavepointType" in trailer:
        fmt = ("CANONICAL" if b"\x00\x09CANONICAL" in trailer
               else "NATIVE" if b"\x00\x06NATIVE" in trailer else None)
        return True, fmt
    if b"CheckpointType" in trailer:
        return False, None
    return None, None
