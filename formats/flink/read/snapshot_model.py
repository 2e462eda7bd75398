"""From Flink's decoded streams to statectl's model: a snapshot's operators, states and files.

:class:`SnapshotBuilder` decodes (or, ``decode=False``, only heads) every keyed and operator
state stream of a parsed ``_metadata`` and assembles the model (:mod:`statecore.checkpoint`):
operators, states with type specs, subtasks with key-group ranges, keyed handles with rows per
key group, operator handles with element ranges and modes, and the virtual data files
(:class:`~formats.flink.read.tables.DecodedTable`) that
:class:`formats.flink.checkpoint.FlinkCheckpoint` serves. What cannot be read is counted
(:class:`~statecore.undecodable.UndecodablePart`), never
the end of reading; :func:`refuse_damage` turns damage into an error unless partial results are
accepted.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from formats.flink.read.incremental import OpenedHandles
from formats.flink.read.keyed import (
    DecodedKeyed,
    HeaderCache,
    KeyedHeader,
    Losses,
    StateInfo,
    reason_of,
    undecodable_state,
)
from formats.flink.read.metadata import (
    FlinkIncrementalHandle,
    FlinkKeyedHandle,
    FlinkOperator,
    StreamHandle,
)
from formats.flink.read.operator import DecodedOperatorState, decode_operator_stream
from formats.flink.read.pickled import unpickle_keyed, unpickle_operator
from formats.flink.read.pieces import (
    KeyedSource,
    StateCounts,
    decode_keyed_handle,
    decode_piece,
    piece_of,
    read_header,
    state_rows,
)
from formats.flink.read.streams import SnapshotStreams
from formats.flink.read.tables import DecodedTable
from formats.flink.types.codecs import Codec, opaque_spec
from formats.flink.types.flink_version import written_by
from formats.model.checkpoint import (
    DownloadUnit,
)
from formats.model.columns import keyed_schema, operator_schema
from statecore.checkpoint import (
    TTL_UNKNOWN,
    KeyedStateHandle,
    KeyGroupRows,
    OperatorIdentity,
    OperatorMetadata,
    OperatorStateHandle,
    StateMetadata,
    SubtaskMetadata,
)
from statecore.errors import CorruptCheckpointError, StatectlError, UnsupportedFormatError
from statecore.key_groups import (
    KeyGroupRange,
    compute_key_group_range_for_operator_index,
)
from statecore.operator_backend import OperatorStateMode
from statecore.undecodable import UndecodablePart, describe_damage

__all__ = ["PendingRows", "Problem", "SnapshotBuilder", "refuse_damage", "state_declaration"]

_KINDS = {"value", "list", "map", "reducing", "aggregating"}
_MODES = {"SPLIT_DISTRIBUTE": ("split", OperatorStateMode.SPLIT_DISTRIBUTE),
          "UNION": ("union", OperatorStateMode.UNION),
          "BROADCAST": ("broadcast", OperatorStateMode.BROADCAST)}


@dataclass
class Problem:
    """A problem found while opening a snapshot, for ``verify``: its kind, where, what."""

    kind: str
    where: str
    detail: str


def refuse_damage(parts: Sequence[UndecodablePart]) -> None:
    """Raise a :class:`CorruptCheckpointError` naming the damaged parts, if any."""
    damage = describe_damage(parts)
    if damage:
        raise CorruptCheckpointError(damage)


class SnapshotBuilder:
    """Decodes the streams and assembles the model, the virtual files and the problems."""

    def __init__(self, fs: pafs.FileSystem, root: str, strict: bool,
                 allow_pickle: bool = False, decode: bool = True,
                 counts: Mapping[tuple[int, int, int], dict[str, StateCounts]] | None = None,
                 partial: bool = False, kryo_major: int = 5) -> None:
        self.fs, self.root, self.strict, self.allow_pickle = fs, root, strict, allow_pickle
        self.partial, self.kryo_major = partial, kryo_major
        self.decode, self.counts = decode, counts
        self.streams = SnapshotStreams(fs, root)
        #: the keyed handles as pieces of them are decoded (``decode=False``), and the handle
        #: (``KeyedSource.ident``) and state of each keyed virtual file
        self.sources: list[KeyedSource] = []
        self.file_sources: dict[str, tuple[tuple[int, int, int], str]] = {}
        self.tables: dict[str, DecodedTable] = {}
        self.problems: list[Problem] = []
        self.key_codecs: dict[str, Codec] = {}
        self.headers: HeaderCache = {}
        #: pieces decoded on demand (``decode=False``), the last few of all handles together
        self.pieces = PieceCache()
        #: where each virtual file's state is, as Flink stores it: ``inline`` or files relative
        #: to the snapshot directory (a RocksDB state: its column family's SST files)
        self.stored: dict[str, tuple[str, ...]] = {}
        self.operator_stored: dict[int, tuple[str, ...]] = {}  # id(decoded state) -> files
        #: each operator's incremental handles: what a restore downloads whole (plans)
        self.downloads: dict[str, list[DownloadUnit]] = {}
        #: what a savepoint writer carries over: each operator's keyed header, and the
        #: decoded operator state behind each virtual file
        self.keyed_headers: dict[str, KeyedHeader] = {}
        self.operator_files: dict[str, DecodedOperatorState] = {}  # virtual file -> state
        #: what could not be decoded (values kept as markers, or left out), as decoded
        self.undecodable: list[UndecodablePart] = []
        #: each operator as output names it (its identity's label), by model uid
        self.labels: dict[str, str] = {}
        #: why a keyed state cannot be read (completely), as its header tells: ``(uid, state)``
        #: -> reason (:func:`formats.flink.read.keyed.undecodable_state`)
        self.unread: dict[tuple[str, str], str] = {}

    def lost(self, uid: str, subtask: int, losses: Losses, on_demand: bool = False) -> None:
        """A decoder's losses as the snapshot's :class:`UndecodablePart` list.

        ``on_demand``: rows decoded after the opening, whose damage raises unless ``partial``.
        """
        start = len(self.undecodable)
        label = self.labels.get(uid, "")
        self.undecodable.extend(
            UndecodablePart(uid, state, subtask, key_group, values, cls, ser, reason, damaged,
                            kept, label)
            for state, key_group, values, cls, ser, reason, damaged, kept in losses.parts())
        if on_demand and not self.partial:
            refuse_damage(self.undecodable[start:])

    # -- streams --------------------------------------------------------------------------

    def stream_bytes(self, stream: StreamHandle) -> tuple[bytes, str]:
        """The bytes of a stream handle and a name for messages."""
        return self.streams.read(stream)

    def keyed_stream(self, handle: FlinkKeyedHandle | FlinkIncrementalHandle, where: str,
                     max_parallelism: int, uid: str, ident: tuple[int, int, int]
                     ) -> tuple[KeyedHeader, dict[str, Any], dict[str, dict[int, int]],
                                Callable[[str], tuple[str, ...]]]:
        """One keyed handle: header, rows and bytes per key group by state, where stored.

        How each state is stored is for plans. Decoded now, or (``decode=False``) its header
        only: its rows are then decoded when first asked for (:class:`PendingRows`), their
        counts are the scan's (``counts``).
        """
        if not self.decode:
            return self.keyed_layout(handle, where, max_parallelism, uid, ident)
        header, decoded, info = decode_keyed_handle(self.streams, handle, where,
                                                    max_parallelism, self.headers)
        self.lost(uid, ident[1], decoded.losses)
        rows = {s.name: state_rows(s, decoded) for s in header.states}
        if info is not None:
            self.downloads.setdefault(uid, []).append(DownloadUnit(
                KeyGroupRange(handle.first_key_group, handle.last_key_group),
                tuple((f.stored, f.size) for f in info.files)))
            by_family: dict[str, tuple[str, ...]] = {}
            for f in info.files:
                if f.column_family is not None:
                    by_family[f.column_family] = (*by_family.get(f.column_family, ()), f.stored)
            return header, rows, decoded.state_key_group_bytes, (
                lambda state: by_family.get(state, ()))
        assert isinstance(handle, FlinkKeyedHandle)
        stored = (self.stored_as(handle.stream),)
        return header, rows, decoded.state_key_group_bytes, lambda state: stored

    def keyed_layout(self, handle: FlinkKeyedHandle | FlinkIncrementalHandle, where: str,
                     max_parallelism: int, uid: str, ident: tuple[int, int, int]
                     ) -> tuple[KeyedHeader, dict[str, Any], dict[str, dict[int, int]],
                                Callable[[str], tuple[str, ...]]]:
        """:meth:`keyed_stream` without decoding: the header, files checked, rows pending."""
        header = read_header(self.streams, handle, where, self.headers)
        counts = self.counts.get(ident, {}) if self.counts is not None else {}
        source = KeyedSource(*ident, handle, max_parallelism, where,
                             0 if isinstance(handle, FlinkIncrementalHandle) else header.size,
                             self.kryo_major)
        self.sources.append(source)
        loader = _HandleLoader(self.streams, handle, where, max_parallelism,
                               lambda losses: self.lost(uid, ident[1], losses, True),
                               self.kryo_major, source, self.headers, self.pieces)
        rows = {s.name: PendingRows(loader, s, counts[s.name].rows if s.name in counts else {},
                                    ident) for s in header.states}
        sizes = {s.name: counts[s.name].bytes if s.name in counts else {}
                 for s in header.states}
        if isinstance(handle, FlinkIncrementalHandle):
            for _, stream in handle.files:
                self.streams.check(stream)
            self.downloads.setdefault(uid, []).append(DownloadUnit(
                KeyGroupRange(handle.first_key_group, handle.last_key_group),
                ((self.stored_as(handle.meta), handle.meta.size),
                 *((self.stored_as(stream), stream.size) for _, stream in handle.files))))
            return header, rows, sizes, lambda state: (
                counts[state].stored or () if state in counts else ())
        stored = (self.stored_as(handle.stream),)
        return header, rows, sizes, lambda state: stored

    def stored_as(self, stream: StreamHandle) -> str:
        """How a plan names a stream: ``inline`` (in ``_metadata``), else its file."""
        return self.streams.stored_as(stream)

    def fail(self, exc: StatectlError, where: str, uid: str = "", subtask: int = -1,
             what: str = "") -> None:
        """A part of the snapshot that could not be read: never the end of reading.

        It is counted as an :class:`UndecodablePart` (``what``: the state, or what of the
        operator), which ``verify`` lists (a damage as a problem, an unsupported serializer as
        a warning), and reading goes on.
        """
        self.undecodable.append(UndecodablePart(
            uid, what or "(state)", subtask, None, -1, "(unread)", "", reason_of(exc, where),
            not isinstance(exc, UnsupportedFormatError), False, self.labels.get(uid, "")))

    # -- operators ------------------------------------------------------------------------

    def operator(self, index: int, op: FlinkOperator, all_ops: tuple[FlinkOperator, ...]
                 ) -> OperatorMetadata:
        uid = op.uid or op.operator_id
        if sum(1 for o in all_ops if (o.uid or o.operator_id) == uid) > 1:
            uid = op.operator_id
        label = OperatorIdentity(op.operator_id, uid if op.uid == uid else None,
                                 op.name or None).label
        self.labels[uid] = label
        where = f"operator {label}"
        states: dict[str, StateMetadata] = {}
        keyed: dict[int, list[tuple[Any, ...]]] = {}
        key_type: str | None = None
        key_ranges: dict[int, KeyGroupRange] = {}
        op_states: dict[int, list[DecodedOperatorState]] = {}
        for st in op.subtasks:
            for position, handle in enumerate(st.managed_keyed):
                hw = f"{where}, subtask {st.index}"
                try:
                    header, rows_of, sizes, stored = self.keyed_stream(
                        handle, hw, op.max_parallelism, uid, (index, st.index, position))
                except StatectlError as exc:
                    self.fail(exc, hw, uid, st.index, "(keyed state)")
                    continue
                # keys statectl cannot decode: their type is opaque, and no entry is decoded
                key_spec = (header.key.spec if header.key is not None
                            else opaque_spec(header.key_snapshot))
                described = [(state_declaration(info), rows_of[info.name])
                             for info in header.states]
                try:  # every subtask's header declares the states alike
                    for state_meta, _rows in described:
                        _same_declaration(states.get(state_meta.name), state_meta, hw)
                    if key_type is not None and key_type != key_spec:
                        raise CorruptCheckpointError(f"{hw}: keys of type {key_spec}, "
                                                     f"another subtask's are {key_type}")
                except StatectlError as exc:
                    self.fail(exc, hw, uid, st.index, "(keyed state)")
                    continue
                key_type = key_spec
                if header.key is not None:
                    self.key_codecs[uid] = header.key
                for info in header.states:
                    why = undecodable_state(info, header)
                    if why:
                        self.unread.setdefault((uid, info.name), why)
                if header.missing:
                    self.fail(UnsupportedFormatError(
                        f"{header.missing} of the {len(header.states) + header.missing} states "
                        f"of its header could not be found ({header.recovered})"), hw, uid,
                        st.index, "(keyed state)")
                known = self.keyed_headers.setdefault(uid, header)
                if known is not header:  # a state registered in some subtasks only (lazily)
                    names = {info.name for info in known.states}
                    extra = [info for info in header.states if info.name not in names]
                    if extra:
                        self.keyed_headers[uid] = dataclasses.replace(
                            known, states=[*known.states, *extra])
                held = KeyGroupRange(handle.first_key_group, handle.last_key_group)
                key_ranges[st.index] = held if st.index not in key_ranges else KeyGroupRange(
                    min(held.start, key_ranges[st.index].start),
                    max(held.end, key_ranges[st.index].end))
                for state_meta, rows in described:
                    states.setdefault(state_meta.name, state_meta)
                    keyed.setdefault(st.index, []).append(
                        (state_meta.name, rows, sizes[state_meta.name],
                         held, header.key, op.max_parallelism, stored(state_meta.name)))
            for op_handle in st.managed_operator:
                hw = f"{where}, subtask {st.index}"
                try:
                    data, name = self.stream_bytes(op_handle.stream)
                    decoded_states = decode_operator_stream(data, op_handle, f"{hw}: {name}")
                except StatectlError as exc:
                    self.fail(exc, hw, uid, st.index, "(operator state)")
                    continue
                declared = [self.operator_state(ds) for ds in decoded_states]
                try:  # every subtask declares its operator states alike
                    for meta in declared:
                        _same_declaration(states.get(meta.name), meta, hw)
                except StatectlError as exc:
                    self.fail(exc, hw, uid, st.index, "(operator state)")
                    continue
                for meta in declared:
                    states.setdefault(meta.name, meta)
                op_states.setdefault(st.index, []).extend(decoded_states)
                for ds in decoded_states:
                    self.undecodable.extend(
                        UndecodablePart(uid, ds.name, st.index, None, n, cls, ser, why, damaged,
                                        kept, label)
                        for n, cls, ser, why, damaged, kept in ds.undecodable())
                for ds in decoded_states:
                    self.operator_stored[id(ds)] = (self.stored_as(op_handle.stream),)
        if self.allow_pickle:
            self.unpickle(states, keyed, op_states, where)
        subtasks = []
        for i in range(op.parallelism):
            rng: KeyGroupRange | None = key_ranges.get(i)
            if rng is None and key_type is not None:
                rng = compute_key_group_range_for_operator_index(op.max_parallelism,
                                                                 op.parallelism, i)
            keyed_handles = tuple(
                self.keyed_file(index, states[name], key_type, i, rows, kg_bytes, *extra)
                for name, rows, kg_bytes, *extra in keyed.get(i, []) if key_type is not None)
            operator_handles = tuple(
                self.operator_file(index, states[ds.name], i, ds,
                                   self.operator_stored.get(id(ds), ("inline",)))
                for ds in op_states.get(i, []))
            if rng is None and not operator_handles and i not in {s.index for s in op.subtasks}:
                subtasks.append(SubtaskMetadata(i, None, (), ()))
                continue
            subtasks.append(SubtaskMetadata(i, rng, keyed_handles, operator_handles))
        return OperatorMetadata(uid, op.name or "", op.parallelism, op.max_parallelism,
                                key_type, tuple(states.values()), tuple(subtasks),
                                operator_id=op.operator_id,
                                has_uid=op.uid is not None and op.uid == uid)

    @staticmethod
    def operator_state(ds: DecodedOperatorState) -> StateMetadata:
        """The model's declaration of one decoded operator state."""
        kind, _mode = _MODES[ds.mode]
        serializers = ds.info.serializers if ds.info is not None else {}
        value_spec = ds.value.spec if ds.value is not None else opaque_spec(
            serializers.get("VALUE_SERIALIZER"))
        return StateMetadata(
            ds.name, "operator", kind, value_spec,
            None if kind != "broadcast" else (ds.key.spec if ds.key else opaque_spec(
                serializers.get("KEY_SERIALIZER"))))

    @staticmethod
    def unpickle(states: dict[str, StateMetadata], keyed: dict[int, list[tuple[Any, ...]]],
                 op_states: dict[int, list[DecodedOperatorState]], where: str) -> None:
        """``allow_pickle``: PyFlink's pickled values as their ``repr()`` (:mod:`.pickled`)."""
        for name, state in list(states.items()):
            if state.scope == "keyed":
                states[name] = unpickle_keyed(state, [
                    rows for entries in keyed.values() for n, rows, *_rest in entries
                    if n == name], where)
            else:
                states[name] = unpickle_operator(state, [
                    ds.elements for decoded in op_states.values() for ds in decoded
                    if ds.name == name], where)

    def virtual_name(self, stem: str, stored: tuple[str, ...]) -> str:
        """A new virtual file ``<stem>[-<n>].parquet`` whose stream Flink names ``stored``.

        A subtask with several handles of one state (after a rescaled restore) gets one
        virtual file per handle.
        """
        name, n = f"{stem}.parquet", 1
        while name in self.tables:
            name, n = f"{stem}-{n}.parquet", n + 1
        self.stored[name] = stored
        return name

    def keyed_file(self, op_index: int, state: StateMetadata, key_type: str, subtask: int,
                   rows: list[tuple[int, Any, Any, Any]] | PendingRows, kg_bytes: dict[int, int],
                   key_group_range: KeyGroupRange, key_codec: Codec | None, max_parallelism: int,
                   stored: tuple[str, ...]) -> KeyedStateHandle:
        runs: list[tuple[int, int]] = []  # (key group, rows) per run of equal key groups
        pending = rows.ident if isinstance(rows, PendingRows) else None
        if isinstance(rows, PendingRows):
            runs = sorted(rows.counts.items())
        else:
            key_groups = [r[0] for r in rows]
            if key_groups != sorted(key_groups):  # the decoders emit key groups in order
                rows = sorted(rows, key=lambda r: r[0])
                key_groups = [r[0] for r in rows]
            first, n = 0, len(key_groups)
            while first < n:
                end = first + 1
                while end < n and key_groups[end] == key_groups[first]:
                    end += 1
                runs.append((key_groups[first], end - first))
                first = end
        groups: list[KeyGroupRows] = []
        row_groups: list[tuple[int, int]] = []  # one per key group
        first = 0
        for key_group, count in runs:
            groups.append(KeyGroupRows(key_group, first, count))
            row_groups.append((count, kg_bytes.get(key_group, 0)))
            first += count
        name = self.virtual_name(f"flink/op-{op_index}/keyed/{_safe(state.name)}/{subtask}",
                                 stored)
        if pending is not None:
            self.file_sources[name] = (pending, state.name)
        self.tables[name] = DecodedTable(rows, _keyed_schema(state, key_type), True,
                                   sum(kg_bytes.values()), row_groups, key_codec,
                                   max_parallelism, f"state {state.name!r} of operator "
                                   f"#{op_index}, subtask {subtask}", state, key_type,
                                   *((rows.rows_in, rows.bytes_in)
                                     if isinstance(rows, PendingRows) else ()))
        return KeyedStateHandle(state.name, name, key_group_range, tuple(groups))

    def operator_file(self, op_index: int, state: StateMetadata, subtask: int,
                      ds: DecodedOperatorState, stored: tuple[str, ...]) -> OperatorStateHandle:
        name = self.virtual_name(
            f"flink/op-{op_index}/operator/{_safe(state.name)}/{subtask}", stored)
        self.operator_files[name] = ds
        self.tables[name] = DecodedTable(ds.elements, _operator_schema(state), False, ds.bytes,
                                   [(len(ds.elements), ds.bytes)],
                                   where=f"operator state {state.name!r} of operator "
                                   f"#{op_index}, subtask {subtask}", state=state)
        return OperatorStateHandle(state.name, _MODES[ds.mode][1], name, 0, len(ds.elements))


def state_declaration(info: StateInfo) -> StateMetadata:
    """The model's declaration of one keyed state of a header (timers: a list of ``int64``)."""
    namespace = "void"
    if info.namespace is not None and info.namespace.spec != "void":
        namespace = info.namespace.spec
    if info.kind == "timers":
        # no codec: an unknown timer serializer with no timers (else decoding failed)
        return StateMetadata(info.name, "keyed", "list", "int64", namespace_type=(
            info.value.spec if info.value is not None else "bytes"))
    value = info.serializers.get("VALUE_SERIALIZER")
    nested = value.nested if value is not None else ()
    if info.kind == "list" and nested:
        value = nested[0]
    elif info.kind == "map" and len(nested) == 2:
        value = nested[1]
    element = info.element.spec if info.element is not None else opaque_spec(value)
    ttl = TTL_UNKNOWN if info.element is not None and info.element.ttl else None
    if info.kind == "map":
        user_key = info.user_key.spec if info.user_key is not None else opaque_spec(
            nested[0] if len(nested) == 2 else None)
        return StateMetadata(info.name, "keyed", "map", element, user_key, namespace, ttl)
    if info.kind in _KINDS:
        return StateMetadata(info.name, "keyed", info.kind, element, namespace_type=namespace,
                             ttl=ttl)
    return StateMetadata(info.name, "keyed", "value", "bytes", namespace_type=namespace)


#: Pieces a snapshot keeps decoded, of all its handles together (a browser going back and
#: forth between pages; every state of an operator read for the same key groups, as export
#: streams them): memory holds these, never more (issue 45).
_PIECES_KEPT = 4


class PieceCache:
    """The pieces decoded on demand last, ``(handle, first, last)`` -> entries, bounded."""

    def __init__(self, kept: int = _PIECES_KEPT) -> None:
        self.kept = kept
        self._pieces: dict[tuple[int, int, int], DecodedKeyed] = {}
        #: the RocksDB handle read last, its files opened, for its next piece
        self.handles = OpenedHandles()

    def pop(self, key: tuple[int, int, int]) -> DecodedKeyed | None:
        return self._pieces.pop(key, None)

    def put(self, key: tuple[int, int, int], decoded: DecodedKeyed) -> None:
        """Keep ``decoded`` as the most recent; the oldest go beyond :attr:`kept`."""
        self._pieces.pop(key, None)
        self._pieces[key] = decoded
        while len(self._pieces) > self.kept:
            del self._pieces[next(iter(self._pieces))]


class _HandleLoader:
    """Decodes one keyed handle in this process when first asked.

    Its entries whole (:meth:`decoded`) are kept once decoded; pieces of it
    (:meth:`decoded_groups`, the whole handle among them when one piece holds it) are kept in
    the snapshot's :class:`PieceCache`, a few of all handles together, so that reading a
    snapshot piece by piece holds a bounded part of it.
    """

    def __init__(self, streams: SnapshotStreams,
                 handle: FlinkKeyedHandle | FlinkIncrementalHandle, where: str,
                 max_parallelism: int, lost: Callable[[Losses], None] | None = None,
                 kryo_major: int = 5, source: KeyedSource | None = None,
                 headers: HeaderCache | None = None, pieces: PieceCache | None = None) -> None:
        self.streams, self.handle, self.where = streams, handle, where
        self.max_parallelism = max_parallelism
        self.lost, self.kryo_major = lost, kryo_major
        self.source, self.headers = source, headers
        self._decoded: DecodedKeyed | None = None
        self._pieces = PieceCache() if pieces is None else pieces
        # the key group ranges whose losses were reported (each once)
        self._reported: set[tuple[int, int]] = set()
        #: a RocksDB handle's bytes per state: its column family's files (known once decoded)
        self.disk_bytes: dict[str, int] = {}

    def decoded(self) -> DecodedKeyed:
        if self._decoded is None:
            with written_by(self.kryo_major):
                _, self._decoded, info = decode_keyed_handle(self.streams, self.handle,
                                                             self.where, self.max_parallelism)
            if info is not None:
                self.disk_bytes = info.disk_bytes
            if self.lost is not None and (self.handle.first_key_group,
                                          self.handle.last_key_group) not in self._reported:
                self.lost(self._decoded.losses)
        return self._decoded

    def decoded_groups(self, first: int, last: int) -> DecodedKeyed:
        """The entries of key groups ``first..last`` alone (:func:`piece_of`).

        The handle's whole once it is decoded. What could not be decoded is reported as when
        the whole handle is decoded (each piece's once).
        """
        if self._decoded is not None or self.source is None:
            return self.decoded()
        piece = piece_of(self.source, first, last)
        span = (piece.first_key_group, piece.last_key_group)
        key = (id(self), *span)
        found = self._pieces.pop(key)
        if found is None:
            _, found, info = decode_piece(self.streams, piece, self.headers, refuse=False,
                                          opened=self._pieces.handles)
            if info is not None:
                self.disk_bytes = info.disk_bytes
            if self.lost is not None and span not in self._reported:
                self._reported.add(span)
                self.lost(found.losses)
        self._pieces.put(key, found)
        return found


class PendingRows:
    """A state's rows of one handle, not decoded yet.

    ``counts``: rows per key group (when a scan counted them); called, the rows (the whole
    handle decoded in this process).
    """

    def __init__(self, loader: _HandleLoader, info: StateInfo, counts: dict[int, int],
                 ident: tuple[int, int, int]) -> None:
        self.loader, self.info, self.counts, self.ident = loader, info, counts, ident
        self._disk_counted = False  # a RocksDB state's files' bytes went to a run already

    def __call__(self) -> list[tuple[int, Any, Any, Any]]:
        return state_rows(self.info, self.loader.decoded())

    def rows_in(self, first: int, last: int) -> list[tuple[int, Any, Any, Any]]:
        """The rows of key groups ``first..last`` alone (decoding only them, if need be).

        None where the range and the handle's key groups do not meet.
        """
        handle = self.loader.handle
        first, last = max(first, handle.first_key_group), min(last, handle.last_key_group)
        if first > last:
            return []
        rows = state_rows(self.info, self.loader.decoded_groups(first, last))
        return [row for row in rows if first <= row[0] <= last]

    def bytes_in(self, first: int, last: int) -> int:
        """Flink's bytes of this state in key groups ``first..last`` (decoding them).

        A RocksDB state's bytes are its column family's files, as when its handle is decoded
        whole: they go to the first run (in the order asked) that holds some of its data.
        """
        handle = self.loader.handle
        first, last = max(first, handle.first_key_group), min(last, handle.last_key_group)
        if first > last:
            return 0
        sizes = self.loader.decoded_groups(first, last).state_key_group_bytes.get(
            self.info.name, {})
        held = sum(n for group, n in sizes.items() if first <= group <= last)
        if not isinstance(handle, FlinkIncrementalHandle):
            return held
        if not held or self._disk_counted:
            return 0
        self._disk_counted = True
        return self.loader.disk_bytes.get(self.info.name, 0)


def _same_declaration(known: StateMetadata | None, state: StateMetadata, where: str) -> None:
    """Refuse a state that another subtask's header declared otherwise (types, kind, TTL)."""
    if known is not None and known != state:
        raise CorruptCheckpointError(
            f"{where}: state {state.name!r} is declared as {state.kind} {state.value_type}, "
            f"another subtask declares it as {known.kind} {known.value_type}")


@functools.lru_cache(maxsize=1024)
def _keyed_schema(state: StateMetadata, key_type: str) -> pa.Schema:
    return keyed_schema(state, key_type)


@functools.lru_cache(maxsize=1024)
def _operator_schema(state: StateMetadata) -> pa.Schema:
    return operator_schema(state)


@functools.lru_cache(maxsize=4096)
def _safe(name: str) -> str:
    """A state name as a path component of the virtual files (names may hold any character)."""
    return hashlib.sha1(name.encode("utf-8", "surrogatepass")).hexdigest()[:12]
