"""Writing Flink canonical savepoints that Flink restores into any state backend.

A savepoint is a directory: one keyed state file and one operator state file per subtask that
has such state, named like Flink's (random UUIDs) and referenced from ``_metadata`` by name
relative to it, so the directory can be moved. It is built in a staging directory beside its
final place and ``_metadata`` is written last, after every state file; then the directory is
renamed into place. An existing output is refused; a failed write leaves nothing that looks like
a savepoint (no ``_metadata``, and the staging directory is removed).

Keyed state files are in the canonical format (``FullSnapshotAsyncWriter``, reference §6.3):
the ``KeyedBackendSerializationProxy`` header (version 6, the compression flag, the key
serializer snapshot, every state's meta info), then per key group with data, optionally in its
own Snappy-framed stream, ``short state id`` and the state's ``(byte[] key, byte[] value)``
pairs; the last pair of a state in a key group has the top bit of its key's first byte set and
is followed by the next state's id or ``0xFFFF``. Keys are ``key-group prefix | key | namespace
[| map user key]`` (lengths after key and namespace when both are variable-sized); values as
RocksDB stores them (list elements joined by ``,``, a map value after its null flag, timers as
keys with empty values).

Operator state files: the ``OperatorBackendSerializationProxy`` header (version 6, no
compression, the list states' then the broadcast states' meta infos), then each list state's
elements back to back (the handle records each element's offset) and each broadcast state as
``int size`` and its key/value pairs (one offset).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from dataclasses import dataclass, field
from itertools import groupby
from operator import itemgetter
from typing import Any

import google_crc32c
import pyarrow as pa
import pyarrow.fs as pafs

from formats.flink.read.rocksdb.checksums import crc32c_mask
from formats.flink.types.encoders import Encoder, raw_encoder
from formats.flink.write.metadata_out import (
    KeyedHandleOut,
    OperatorHandleOut,
    OperatorOut,
    SubtaskOut,
    savepoint_metadata,
)
from formats.flink.write.versions import LATEST, FlinkRelease
from formats.model.checkpoint import WrittenSnapshot
from formats.storage.commit import commit, staged
from formats.storage.filesystems import fsync, resolve_filesystem
from statecore.checkpoint import OperatorIdentity
from statecore.errors import (
    CheckpointError,
    InvalidArgumentError,
    StatectlError,
    UnsupportedFormatError,
)
from statecore.key_groups import KeyGroupRange
from statecore.undecodable import Undecodable

__all__ = ["KeyedFiles", "KeyedStateOut", "OperatorProgress", "OperatorStateOut", "RowsWriter",
           "SavepointOperator",
           "frame_snappy", "key_group_blocks", "keyed_header", "keyed_stream",
           "operator_stream", "pair_writer", "write_keyed_file", "write_savepoint",
           "write_state_file"]

METADATA_FILE = "_metadata"
KEYED_PROXY_VERSION = 6
OPERATOR_PROXY_VERSION = 6
END_OF_KEY_GROUP = 0xFFFF
FIRST_BIT = 0x80
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")

#: One keyed entry: ``(key_group, key, namespace, value)``; a timer state's value is the list
#: of its timestamps for that key and namespace.
Entry = tuple[int, Any, Any, Any]
#: ``(done, total, what)``: ``done`` of ``total`` operators written, ``what`` now in work (an
#: operator's label; empty once all are written). See :func:`write_savepoint`.
OperatorProgress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class KeyedStateOut:
    """One keyed state of an operator, as the savepoint writes it.

    ``meta`` is its ``StateMetaInfoSnapshot`` (carried over, or written by
    :func:`formats.flink.write.snapshot_out.state_meta_info`). ``layout`` says how entries become
    pairs: ``value`` (also reducing and aggregating), ``list``, ``map`` or ``timers``.
    ``value`` encodes a value, list element or map value (``None``: values are kept as the raw
    bytes Flink delimited); ``user_key`` a map's keys; ``timer`` a ``(timestamp, key,
    namespace)``. ``key_length`` and ``namespace_length`` are the serializers' ``getLength()``
    (-1: variable), which decide the composite key's layout.
    """

    name: str
    meta: bytes
    layout: str
    namespace: Encoder | None
    namespace_length: int
    value: Encoder | None
    user_key: Encoder | None = None
    timer: Encoder | None = None


@dataclass(frozen=True)
class OperatorStateOut:
    """One operator state of one subtask: its meta info, mode and elements (or pairs)."""

    name: str
    meta: bytes
    mode: str  # SPLIT_DISTRIBUTE | UNION | BROADCAST
    elements: Sequence[Any]  # list states: elements; broadcast: (key, value) pairs
    value: Encoder | None  # None: elements are their raw bytes
    key: Encoder | None = None  # broadcast state's keys


@dataclass
class SavepointOperator:
    """An operator of the savepoint to write, with its state per new subtask."""

    operator_id: str
    name: str | None
    uid: str | None
    parallelism: int
    max_parallelism: int
    key_snapshot: bytes | None = None  # with the proxy version; None: no keyed state
    key: Encoder | None = None
    key_length: int = -1
    keyed_states: list[KeyedStateOut] = field(default_factory=list)
    #: per subtask: its key-group range and entries per state (by position in keyed_states)
    keyed: dict[int, tuple[KeyGroupRange, list[Iterable[Entry]]]] = field(default_factory=dict)
    #: per subtask: its operator states
    operator: dict[int, list[OperatorStateOut]] = field(default_factory=dict)
    coordinator: bytes | None = None
    #: each state's entries of ``keyed`` come in ascending key-group order: a subtask's file
    #: is written key group by key group as they come (:func:`write_keyed_file`), never held
    keyed_in_order: bool = False

    @property
    def label(self) -> str:
        """For people, as :attr:`~statecore.checkpoint.OperatorIdentity.label` names it."""
        return OperatorIdentity(self.operator_id, self.uid, self.name).label


# -- keyed state --------------------------------------------------------------------------------


def _composite_key_writer(op: SavepointOperator, state: KeyedStateOut) -> Any:
    """Appends ``key | namespace`` (with lengths where ambiguous) after a key-group prefix."""
    key = op.key
    assert key is not None
    ambiguous = op.key_length < 0 and state.namespace_length < 0
    namespace = state.namespace

    def write(out: bytearray, k: Any, ns: Any) -> None:
        start = len(out)
        key(out, k)
        if ambiguous:
            _variable_int(out, len(out) - start)
        if namespace is not None:
            start = len(out)
            namespace(out, ns)
            if ambiguous:
                _variable_int(out, len(out) - start)
    return write


def _variable_int(out: bytearray, value: int) -> None:
    """``CompositeKeySerializationUtils.writeVariableIntBytes``: low byte first, 1+ bytes."""
    while True:
        out.append(value & 0xFF)
        value >>= 8
        if not value:
            return


def keyed_header(op: SavepointOperator, compress: bool = False) -> bytes:
    """A keyed state file's header: the serialization proxy with the serializer snapshots."""
    assert op.key_snapshot is not None
    out = bytearray()
    out += _I32.pack(KEYED_PROXY_VERSION)
    out.append(1 if compress else 0)
    out += op.key_snapshot
    out += _I16.pack(len(op.keyed_states))
    for state in op.keyed_states:
        out += state.meta
    return bytes(out)


def keyed_stream(op: SavepointOperator, key_groups: KeyGroupRange,
                 entries: Sequence[Iterable[Entry]], compress: bool = False
                 ) -> tuple[bytes, list[int], int]:
    """One subtask's keyed state file, the offset of each key group, the entries written.

    An offset is 0 for a key group without data. ``entries[i]`` are state ``i``'s entries of
    this subtask's key groups, in any order.
    """
    out = bytearray(keyed_header(op, compress))
    by_group: dict[int, list[list[Entry]]] = {}
    for index, state_entries in enumerate(entries):
        for entry in state_entries:
            group = entry[0]
            if group not in key_groups:
                raise InvalidArgumentError(f"operator {op.label}, state "
                                           f"{op.keyed_states[index].name!r}: key group "
                                           f"{group} is not in {key_groups}")
            by_group.setdefault(group, [[] for _ in op.keyed_states])[index].append(entry)
    writers = [pair_writer(op, s) for s in op.keyed_states]
    offsets, written = key_group_blocks(out, key_groups, ((g, by_group[g]) for g in
                                                          sorted(by_group)),
                                        writers, op.max_parallelism, compress)
    return bytes(out), offsets, written


#: Appends one state's rows of one key group to a block, each key after ``prefix`` (the key
#: group's); returns where the last pair's key starts in the block (-1: no pair written).
RowsWriter = Callable[[bytearray, bytes, Any], int]


def key_group_blocks(out: bytearray, key_groups: KeyGroupRange,
                     groups: Iterable[tuple[int, Sequence[Sized | None]]],
                     writers: Sequence[RowsWriter], max_parallelism: int,
                     compress: bool = False) -> tuple[list[int], int]:
    """Append the key groups' blocks to ``out`` (a file's header so far).

    ``groups``: ascending key groups, each with its rows per state (by state id, ``None`` or
    empty for none), which ``writers[state id]`` writes. Returns the offset of each key group
    of ``key_groups`` in ``out`` (0 for a key group without data) and the rows written (a
    state's rows count in a key group where it wrote a pair).
    """
    prefix = 1 if max_parallelism <= 128 else 2
    offsets = [0] * len(key_groups)
    written = 0
    for group, per_state in groups:
        block = bytearray()
        last = -1  # where the previous pair's key starts in block
        for state_id, rows in enumerate(per_state):
            if not rows:
                continue
            if last >= 0:
                block[last] |= FIRST_BIT  # meta data follows: a new state
            block += _I16.pack(state_id)
            before = last
            last = writers[state_id](block, group.to_bytes(prefix, "big"), rows)
            if last == before or last < 0:  # only empty lists or maps: nothing written
                del block[len(block) - 2:]
                last = before
                continue
            written += len(rows)
        if last < 0:
            continue
        block[last] |= FIRST_BIT
        block += _U16.pack(END_OF_KEY_GROUP)
        offsets[group - key_groups.start] = len(out)
        out += frame_snappy(bytes(block)) if compress else block
    return offsets, written


def kept_bytes(encode: Encoder) -> Encoder:
    """``encode``, writing a value statectl could not decode back as the bytes it was read as.

    Such a value (:class:`~statecore.undecodable.Undecodable`) was delimited by Flink (a
    canonical savepoint's or RocksDB's pair, an operator state element): its bytes are the
    value whole, as the serializer wrote it. Without bytes (none is kept where the format did
    not delimit it) it cannot be written.
    """
    def write(out: bytearray, value: Any) -> None:
        if type(value) is Undecodable:
            if value.data is None:
                raise UnsupportedFormatError(f"a {value.class_name} value statectl could not "
                                             f"decode has no bytes to write ({value.reason})")
            out += value.data
            return
        encode(out, value)
    return write


def pair_writer(op: SavepointOperator, state: KeyedStateOut) -> Any:
    """Appends a state's pairs of one key group; returns where the last pair's key starts.

    ``write(block, prefix, rows, ends=None, lasts=None)``: with ``ends`` and ``lasts`` (lists),
    also where each row's pairs end in the block and where its last pair's key starts (-1
    for a row without pairs: an empty list or map).
    """
    composite = _composite_key_writer(op, state)
    value = kept_bytes(state.value or raw_encoder)
    layout = state.layout

    def pair(block: bytearray, key: bytes | bytearray, val: bytes | bytearray) -> int:
        block += _I32.pack(len(key))
        at = len(block)
        block += key
        block += _I32.pack(len(val))
        block += val
        return at

    def write(block: bytearray, prefix: bytes, rows: Iterable[Entry],
              ends: list[int] | None = None, lasts: list[int] | None = None) -> int:
        last = -1
        for _group, k, ns, v in rows:
            here = -1
            if layout == "timers":
                assert state.timer is not None
                for timestamp in v:
                    timer_key = bytearray(prefix)
                    state.timer(timer_key, (timestamp, k, ns))
                    here = pair(block, timer_key, b"")
            else:
                head = bytearray(prefix)
                composite(head, k, ns)
                if layout == "map":
                    assert state.user_key is not None
                    for user_key, item in v.items():
                        key_bytes = bytearray(head)
                        state.user_key(key_bytes, user_key)
                        val = bytearray(b"\x01" if item is None else b"\x00")
                        if item is not None:
                            value(val, item)
                        here = pair(block, key_bytes, val)
                elif layout == "list":
                    if type(v) is Undecodable:  # the list whole, as it was delimited
                        val = bytearray()
                        value(val, v)
                        here = pair(block, head, val)
                    elif v:
                        val = bytearray()
                        for i, element in enumerate(v):
                            if i:
                                val.append(0x2C)
                            value(val, element)
                        here = pair(block, head, val)
                else:
                    val = bytearray()
                    value(val, v)
                    here = pair(block, head, val)
            if here >= 0:
                last = here
            if ends is not None:
                assert lasts is not None
                ends.append(len(block))
                lasts.append(here)
        return last
    return write


def frame_snappy(data: bytes) -> bytes:
    """``SnappyFramedOutputStream``: the stream identifier, then chunks of at most 64 KiB.

    Each chunk: type 0 (compressed) or 1 (stored when compression does not pay), a 3-byte
    little-endian length, the masked CRC32C of the uncompressed chunk, the data.
    """
    out = bytearray(b"\xff\x06\x00\x00sNaPpY")
    codec = pa.Codec("snappy")
    for start in range(0, len(data), 1 << 16):
        chunk = data[start:start + (1 << 16)]
        crc = crc32c_mask(google_crc32c.value(chunk)).to_bytes(4, "little")
        packed = codec.compress(chunk, asbytes=True)
        kind, body = (0, packed) if len(packed) < len(chunk) else (1, chunk)
        length = len(body) + 4
        out.append(kind)
        out += length.to_bytes(3, "little")
        out += crc
        out += body
    return bytes(out)


# -- operator state -----------------------------------------------------------------------------


def operator_stream(states: Sequence[OperatorStateOut], version: int = OPERATOR_PROXY_VERSION
                    ) -> tuple[bytes, dict[str, tuple[str, tuple[int, ...]]]]:
    """One subtask's operator state file and, per state, its mode and element offsets.

    ``version``: the ``OperatorBackendSerializationProxy`` version, 6 (Flink 1.18 and later:
    a compression flag follows) or 5 (Flink 1.17 and older: none); the meta infos are the same.
    """
    lists = [s for s in states if s.mode != "BROADCAST"]
    broadcasts = [s for s in states if s.mode == "BROADCAST"]
    out = bytearray()
    out += _I32.pack(version)
    if version >= 6:
        out.append(0)  # no compression
    for group in (lists, broadcasts):
        out += _I16.pack(len(group))
        for s in group:
            out += s.meta
    offsets: dict[str, tuple[str, tuple[int, ...]]] = {}
    for s in lists:
        encode = kept_bytes(s.value or raw_encoder)
        at = []
        for element in s.elements:
            at.append(len(out))
            encode(out, element)
        offsets[s.name] = (s.mode, tuple(at))
    for s in broadcasts:
        if s.key is None or s.value is None:
            raise InvalidArgumentError(f"broadcast state {s.name!r} needs its key and value "
                                       f"serializers")
        offsets[s.name] = (s.mode, (len(out),))
        out += _I32.pack(len(s.elements))
        for k, v in s.elements:
            s.key(out, k)
            s.value(out, v)
    return bytes(out), offsets


# -- the savepoint ------------------------------------------------------------------------------


#: Writes keyed state files into the staging directory (``fs``, path) elsewhere (Spark tasks);
#: returns per (operator position, subtask) the handle written and its entries.
KeyedFiles = Callable[[pafs.FileSystem, str], Mapping[tuple[int, int], tuple[KeyedHandleOut, int]]]


def write_savepoint(location: str, checkpoint_id: int, operators: Sequence[SavepointOperator],
                    *, compress: bool = False, filesystem: pafs.FileSystem | None = None,
                    keyed_files: KeyedFiles | None = None,
                    release: FlinkRelease = LATEST,
                    progress: OperatorProgress | None = None) -> WrittenSnapshot:
    """Write a canonical savepoint of ``operators`` at ``location`` (see the module doc).

    ``keyed_files`` writes keyed state files first (named with :func:`write_state_file`); a
    subtask it wrote none for has its entries of ``op.keyed`` written here. ``release``: the
    Flink release the savepoint is for, which decides its ``_metadata`` version
    (:mod:`formats.flink.write.versions`; the state files are the same for every release).
    ``progress(done, total, what)`` is called before each operator is written, with its
    label (before ``keyed_files``: with ``"keyed state"``), and at the end, ``(total, total,
    "")``.
    """
    fs, final = resolve_filesystem(location, filesystem)
    files = size = entries = 0
    report = progress or (lambda done, total, what: None)
    with staged(fs, final, location, "writing savepoint") as staging:
        if keyed_files is not None:
            report(0, len(operators), "keyed state")
        prewritten = keyed_files(fs, staging) if keyed_files is not None else {}
        described = []
        for position, op in enumerate(operators):
            report(position, len(operators), op.label)
            subtasks = []
            for index in range(op.parallelism):
                keyed = operator = None
                if (position, index) in prewritten:
                    keyed, count = prewritten[position, index]
                    files, size, entries = files + 1, size + keyed.size, entries + count
                elif index in op.keyed:
                    key_groups, state_entries = op.keyed[index]
                    try:
                        if op.keyed_in_order:
                            keyed, written = write_keyed_file(fs, staging, op, key_groups,
                                                              state_entries, compress)
                        else:
                            data, offsets, written = keyed_stream(op, key_groups,
                                                                  state_entries, compress)
                    except InvalidArgumentError:
                        raise  # names its operator and state (a value migrate cannot convert)
                    except (StatectlError, TypeError, ValueError, KeyError,
                            struct.error) as exc:
                        raise CheckpointError(f"operator {op.uid or op.operator_id}, subtask "
                                              f"{index}: {exc}") from exc
                    if keyed is None:
                        name = write_state_file(fs, staging, data)
                        keyed = KeyedHandleOut(key_groups.start, tuple(offsets), name,
                                               len(data))
                    files, size, entries = files + 1, size + keyed.size, entries + written
                if op.operator.get(index):
                    try:
                        data, states = operator_stream(op.operator[index],
                                                       release.operator_proxy_version)
                    except (StatectlError, TypeError, ValueError, struct.error) as exc:
                        raise CheckpointError(f"operator {op.uid or op.operator_id}, subtask "
                                              f"{index}: {exc}") from exc
                    name = write_state_file(fs, staging, data)
                    operator = OperatorHandleOut(states, name, len(data))
                    files, size = files + 1, size + len(data)
                subtasks.append(SubtaskOut(index, keyed, operator))
            described.append(OperatorOut(op.operator_id, op.name, op.uid, op.parallelism,
                                         op.max_parallelism, tuple(subtasks), op.coordinator,
                                         f"{final}/{uuid.uuid4()}"))
        metadata = savepoint_metadata(checkpoint_id, described, release.metadata_version)
        commit(fs, staging, final, METADATA_FILE, metadata)  # last: its presence means complete
    report(len(operators), len(operators), "")
    return WrittenSnapshot(location, files + 1, size + len(metadata), entries)


def write_keyed_file(fs: pafs.FileSystem, staging: str, op: SavepointOperator,
                     key_groups: KeyGroupRange, entries: Sequence[Iterable[Entry]],
                     compress: bool = False) -> tuple[KeyedHandleOut, int]:
    """One subtask's keyed state file written key group by key group; its handle, entries.

    The file :func:`keyed_stream` makes of the same entries, byte for byte, when each state's
    entries come in ascending key-group order (``op.keyed_in_order``): memory holds one key
    group's entries, not the subtask's. Named as :func:`write_state_file` names it.
    """
    writers = [pair_writer(op, s) for s in op.keyed_states]
    name = str(uuid.uuid4())
    path = f"{staging}/{name}"
    offsets, written = [0] * len(key_groups), 0
    with fs.open_output_stream(path) as stream:
        head = keyed_header(op, compress)
        stream.write(head)
        size = len(head)
        for group, per_state in _by_key_group(op, key_groups, entries):
            block = bytearray()
            written += key_group_blocks(block, key_groups, [(group, per_state)], writers,
                                        op.max_parallelism, compress)[1]
            if block:  # else only empty lists or maps: no data, offset 0
                offsets[group - key_groups.start] = size
                stream.write(block)
                size += len(block)
    fsync(fs, path)
    return KeyedHandleOut(key_groups.start, tuple(offsets), name, size), written


def _by_key_group(op: SavepointOperator, key_groups: KeyGroupRange,
                  entries: Sequence[Iterable[Entry]]
                  ) -> Iterator[tuple[int, list[list[Entry]]]]:
    """Each key group's entries per state, in ascending order, from ordered streams."""
    def groups(index: int, state_entries: Iterable[Entry]
               ) -> Iterator[tuple[int, list[Entry]]]:
        previous = -1
        for group, rows in groupby(state_entries, key=itemgetter(0)):
            if group not in key_groups:
                raise InvalidArgumentError(f"operator {op.label}, state "
                                           f"{op.keyed_states[index].name!r}: key group "
                                           f"{group} is not in {key_groups}")
            if group <= previous:
                raise CheckpointError(f"state {op.keyed_states[index].name!r}: key group "
                                      f"{group} after {previous} (not in key-group order)")
            previous = group
            yield group, list(rows)

    streams = [groups(i, e) for i, e in enumerate(entries)]
    heads = [next(s, None) for s in streams]
    while any(h is not None for h in heads):
        group = min(h[0] for h in heads if h is not None)
        per_state: list[list[Entry]] = []
        for i, head in enumerate(heads):
            if head is not None and head[0] == group:
                per_state.append(head[1])
                heads[i] = next(streams[i], None)
            else:
                per_state.append([])
        yield group, per_state


def write_state_file(fs: pafs.FileSystem, staging: str, data: bytes | bytearray) -> str:
    """A state file beside ``_metadata``, named like Flink's (a random UUID); its name."""
    name = str(uuid.uuid4())
    path = f"{staging}/{name}"
    with fs.open_output_stream(path) as stream:
        stream.write(data)
    fsync(fs, path)
    return name
