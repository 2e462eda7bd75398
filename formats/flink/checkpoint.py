"""A real Flink checkpoint or savepoint, opened as a statectl :class:`Checkpoint`.

``open_flink_checkpoint`` reads ``_metadata`` (:mod:`formats.flink.metadata`), decodes every
keyed and operator state stream it references (:mod:`formats.flink.keyed`,
:mod:`formats.flink.operator`) and maps the result onto the shared metadata model
(:mod:`statecore.checkpoint`): operators, states with type specs, subtasks with key-group
ranges, keyed handles with per-key-group rows, operator handles with element ranges and modes.
The decoded state of each (operator, state, subtask) is a virtual data file: an in-memory Arrow
table in the model's columns (:mod:`formats.columns`), built when first read, so ``inspect``,
``verify``, ``export``, ``diff`` and ``rescale --plan`` run unchanged. Nothing is written, and
no file outside the snapshot directory is read.

Mapping decisions (DESIGN "Real Flink checkpoints and savepoints"):

- An operator's model ``uid`` is its uid, or its OperatorID (32 hex digits) when Flink stored
  none (SQL operators); ``operator_id`` is always the OperatorID.
- Timers (``_timer_state/...`` priority queues) are keyed list state of ``int64`` timestamps per
  (key, namespace), sorted.
- Values of serializers statectl cannot decode are raw ``bytes`` where Flink delimits them (the
  canonical format and operator state); the heap format cannot be read past them. Kryo values
  are ``kryo<class>`` bytes (:mod:`formats.flink.types.temporal`).
- A TTL state (``TtlSerializer`` values) is the model's TTL state: its values in ``value``, their
  last-access timestamps in ``ttl_timestamp``, ``ttl`` :data:`~statecore.checkpoint.TTL_UNKNOWN`
  (the TTL itself is in the job's ``StateTtlConfig``, not in the snapshot).
- Sizes are Flink's encoded bytes per state and subtask (state blocks of the heap format,
  key/value pairs of the canonical format, elements of operator state).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs

from formats.columns import keyed_schema, operator_schema
from formats.filesystems import is_storage_failure
from formats.flink.keyed import (
    DecodedKeyed,
    HeaderCache,
    KeyedHeader,
    Losses,
    StateInfo,
    reason_of,
)
from formats.flink.metadata import (
    FlinkIncrementalHandle,
    FlinkKeyedHandle,
    FlinkMetadata,
    FlinkOperator,
    StreamHandle,
    parse_metadata,
)
from formats.flink.operator import DecodedOperatorState, decode_operator_stream
from formats.flink.pickled import unpickle_keyed, unpickle_operator
from formats.flink.pieces import (
    KeyedSource,
    StateCounts,
    decode_keyed_handle,
    read_header,
    state_rows,
)
from formats.flink.rewrite import rewrite_flink_savepoint
from formats.flink.sources import READER_STATE, source_progress
from formats.flink.streams import SnapshotStreams, read_snapshot_file
from formats.flink.tables import DecodedTable, rehash_rows
from formats.flink.types.codecs import Codec, opaque_spec
from formats.flink.types.flink_version import kryo_major_of, written_by
from formats.model import (
    Checkpoint,
    DownloadUnit,
    FileProblem,
    WrittenSnapshot,
    rehash_refused,
    state_of,
)
from formats.sources import SourceProgress
from statecore.checkpoint import (
    TTL_UNKNOWN,
    CheckpointKind,
    CheckpointMetadata,
    FileInfo,
    KeyedStateHandle,
    KeyGroupRows,
    OperatorMetadata,
    OperatorStateHandle,
    StateMetadata,
    SubtaskMetadata,
)
from statecore.errors import CorruptCheckpointError, StatectlError, UnsupportedFormatError
from statecore.key_groups import (
    KeyGroupRange,
    compute_key_group_for_key_hash,
    compute_key_group_range_for_operator_index,
)
from statecore.operator_backend import OperatorStateMode
from statecore.rescale_plan import RescalePlan
from statecore.serializers import parse_type
from statecore.undecodable import UndecodablePart, describe_damage

__all__ = ["FLINK_METADATA_FILE", "FlinkCheckpoint", "is_flink_checkpoint",
           "open_flink_checkpoint"]

FLINK_METADATA_FILE = "_metadata"
MAX_METADATA_BYTES = 256 << 20
_KINDS = {"value", "list", "map", "reducing", "aggregating"}
_MODES = {"SPLIT_DISTRIBUTE": ("split", OperatorStateMode.SPLIT_DISTRIBUTE),
          "UNION": ("union", OperatorStateMode.UNION),
          "BROADCAST": ("broadcast", OperatorStateMode.BROADCAST)}


@dataclass
class Problem:
    kind: str
    where: str
    detail: str


def is_flink_checkpoint(fs: pafs.FileSystem, root: str) -> bool:
    """Whether ``root`` (a directory) holds a Flink ``_metadata`` file."""
    try:
        return bool(fs.get_file_info(f"{root}/{FLINK_METADATA_FILE}").type
                    == pafs.FileType.File)
    except OSError as exc:
        if is_storage_failure(exc):
            raise  # the store failed: not an answer
        return False


class FlinkCheckpoint(Checkpoint):
    """A decoded Flink snapshot behind the model's checkpoint interface (read-only).

    ``flink`` is the parsed ``_metadata`` as Flink stored it; data files are virtual (one per
    state and subtask), named ``flink/op-<i>/{keyed,operator}/<state>/<subtask>.parquet``.
    """

    format_name = "flink"

    def __init__(self, fs: pafs.FileSystem, root: str, location: str, flink: FlinkMetadata,
                 metadata: CheckpointMetadata, tables: dict[str, DecodedTable],
                 problems: list[Problem], key_codecs: dict[str, Codec],
                 stored: dict[str, tuple[str, ...]],
                 downloads: dict[str, list[DownloadUnit]],
                 keyed_headers: dict[str, KeyedHeader] | None = None,
                 operator_files: dict[str, DecodedOperatorState] | None = None,
                 unpickled: bool = False) -> None:
        super().__init__(location, metadata)
        self.fs, self.root = fs, root
        self.flink = flink
        self._tables = tables
        self._stored = stored
        self._downloads = downloads
        self._keyed_headers = keyed_headers or {}
        self._operator_files = operator_files or {}
        #: values were unpickled for display (``allow_pickle``): never write them back
        self.unpickled = unpickled
        self.problems = problems
        #: what could not be decoded, as far as read (decoding on demand adds to it)
        self.undecodable: list[UndecodablePart] = []
        self.key_codecs = key_codecs
        self._sources: tuple[SourceProgress, ...] | None = None
        #: whether keyed state was decoded at open (else: ``decode=False``, see
        #: :func:`open_flink_checkpoint`); then the keyed handles as tasks decode pieces of
        #: them, and the handle (``KeyedSource.ident``) and state of each keyed virtual file
        self.keyed_decoded = True
        self.keyed_sources: tuple[KeyedSource, ...] = ()
        self.file_sources: dict[str, tuple[tuple[int, int, int], str]] = {}
        #: whether the model's rows per key group are known (decoded, or counted by a scan),
        #: and the counts given at open (``decode=False``)
        self.counted = True
        self.counts: Mapping[tuple[int, int, int], dict[str, StateCounts]] | None = None
        #: how :meth:`write_rescaled` writes (``None``: :func:`rewrite_flink_savepoint` here;
        #: the Spark engine sets its own)
        self.rewriter: Callable[..., WrittenSnapshot] | None = None

    # -- the virtual files ------------------------------------------------------------------

    def _path_table(self, relative: str) -> DecodedTable:
        table = self._tables.get(relative)
        if table is None:
            raise CorruptCheckpointError(f"{relative}: no such decoded state")
        return table

    def rows_table(self, relative: str, schema: pa.Schema, first: int, count: int,
                   columns: Sequence[str] | None = None) -> pa.Table:
        table = self._path_table(relative).table
        # a value_undecodable column may follow the declared ones (formats.flink.tables)
        declared = (table if table.num_columns == len(schema.names)
                    else table.select(table.column_names[:len(schema.names)]))
        if not declared.schema.remove_metadata().equals(schema.remove_metadata()):
            raise CorruptCheckpointError(f"{relative}: columns {table.schema} differ from the "
                                         f"declared {schema}")
        if first < 0 or count < 0 or first + count > table.num_rows:
            raise CorruptCheckpointError(f"{relative}: rows {first}..{first + count} beyond "
                                         f"its {table.num_rows} rows")
        out = table.slice(first, count)
        return out if columns is None else out.select(list(columns))

    def keyed_table(self, uid: str, handle: KeyedStateHandle,
                    columns: Sequence[str] | None = None) -> pa.Table:
        """As the model's; the whole decoded file when rows per key group are unknown."""
        if self.counted:
            return super().keyed_table(uid, handle, columns)
        table = self._path_table(handle.file).table
        return table if columns is None else table.select(
            list(dict.fromkeys(["key_group", *columns])))

    def stored_names(self, relative: str) -> tuple[str, ...]:
        """Where a virtual file's state is: ``inline``, or files relative to the snapshot.

        The stream a full snapshot's state was decoded from; a RocksDB state's SST files.
        """
        self._path_table(relative)
        return self._stored[relative]

    def keyed_entries(self, uid: str, state_name: str,
                      key_groups: KeyGroupRange | None = None
                      ) -> Iterator[tuple[int, Any, Any, Any]]:
        """The decoded entries themselves, in key-group order (the model's contract).

        A Flink snapshot is decoded when opened: its entries need no trip through Arrow.
        """
        op = self.operator(uid)
        state_of(op, state_name, "keyed")
        handles = sorted((h for st in op.subtasks for h in st.keyed if h.state == state_name),
                         key=lambda h: h.key_group_range.start)
        for handle in handles:
            rows = self.decoded_rows(handle.file)
            if key_groups is None:
                yield from rows
            else:
                yield from (row for row in rows if row[0] in key_groups)

    # -- what a savepoint writer carries over -------------------------------------------------

    def keyed_header(self, uid: str) -> KeyedHeader | None:
        """An operator's keyed state header as Flink wrote it: key serializer, state metas.

        The states of every subtask's header: Flink registers a keyed state in a subtask when
        it first accesses it, so a state may be in some subtasks' headers only.
        """
        return self._keyed_headers.get(self.operator(uid).uid)

    def decoded_rows(self, relative: str) -> list[tuple[int, Any, Any, Any]]:
        """A virtual file's entries ``(key_group, key, namespace, value)`` as decoded.

        A timer state's value is the sorted list of timestamps of the key and namespace.
        """
        return self._path_table(relative).rows

    def decoded_operator_state(self, relative: str) -> DecodedOperatorState:
        """The decoded operator state behind a virtual file, its meta info as Flink wrote it."""
        self._path_table(relative)
        return self._operator_files[relative]

    def flink_operator(self, uid: str) -> FlinkOperator:
        """The operator as ``_metadata`` stores it (its coordinator state among others)."""
        op_id = self.operator(uid).operator_id
        return next(o for o in self.flink.operators if o.operator_id == op_id)

    def write_rescaled(self, plan: RescalePlan, location: str, *,
                       checkpoint_id: int | None = None, compress: bool = False
                       ) -> WrittenSnapshot:
        """A canonical savepoint of this snapshot, rescaled (:mod:`formats.flink.rewrite`).

        Refused when values could not be read at all (a heap checkpoint's block past an
        undecodable value): the savepoint would lose them. Values kept as undecodable markers
        are written back as their bytes.
        """
        lost = [p for p in self.undecodable if not p.kept]
        if lost:
            first = lost[0]
            raise UnsupportedFormatError(
                f"cannot write a savepoint of this snapshot: state {first.state!r} of operator "
                f"{first.operator} has values statectl could not read ({first.reason}), which "
                f"the savepoint would lose ({len(lost)} such part{'s' if len(lost) > 1 else ''}; "
                f"a canonical savepoint of the job, which delimits every value, can be "
                f"rewritten)")
        write = self.rewriter or rewrite_flink_savepoint
        with written_by(kryo_major_of(self.flink.version)):  # Kryo values as they were read
            return write(self, plan, location, checkpoint_id=checkpoint_id, compress=compress)

    def download_units(self, uid: str) -> list[DownloadUnit]:
        """An operator's incremental (RocksDB) handles: each is downloaded whole on restore."""
        return list(self._downloads.get(self.operator(uid).uid, ()))

    def row_groups(self, relative: str) -> list[tuple[int, int]]:
        """``(rows, Flink bytes)`` per key group of a decoded keyed state (one per row group)."""
        return list(self._path_table(relative).row_groups)

    def check_file(self, relative: str) -> FileProblem | None:
        """Flink's files were read, and checked as far as they can be, when opening."""
        self._path_table(relative)
        return None

    def open_problems(self) -> list[tuple[str, str, str]]:
        return [(p.kind, p.where, p.detail) for p in self.problems]

    def uncounted_keyed_bytes(self) -> dict[tuple[str, int], int] | None:
        """The keyed streams' bytes per ``(uid, subtask)`` when keyed state was not counted."""
        if self.counted:
            return None
        uids = [op.uid for op in self.metadata.operators]
        out: dict[tuple[str, int], int] = {}
        for source in self.keyed_sources:
            key = (uids[source.operator], source.subtask)
            out[key] = out.get(key, 0) + source.size
        return out

    def undecodable_parts(self) -> list[UndecodablePart]:
        """What could not be decoded so far (decoding on demand adds to it)."""
        return list(self.undecodable)

    def expected_key_groups(self, op: OperatorMetadata, handle: KeyedStateHandle,
                            table: pa.Table) -> np.ndarray | None:
        """The key groups the keys' Java hashes give, from the keys as Flink stored them.

        A ``RowData`` key's hash is over its binary form, which the decoded columns no
        longer hold.
        """
        expected = self._path_table(handle.file).expected()
        if expected is None:
            return None
        if len(expected) != table.num_rows:
            raise CorruptCheckpointError(f"{handle.file}: {table.num_rows} rows, "
                                         f"{len(expected)} decoded keys")
        return expected

    def new_key_groups(self, op: OperatorMetadata, handle: KeyedStateHandle,
                       max_parallelism: int) -> np.ndarray:
        """Key groups at ``max_parallelism`` by the key serializer's own hash (Flink's)."""
        codec = self.key_codecs.get(op.uid)
        reason = self.unknown_key_hash(op)
        if reason is not None or codec is None or codec.java_hash is None:
            raise rehash_refused(op, max_parallelism, reason or "its key serializer is unknown")
        try:
            return rehash_rows(codec.java_hash, self.decoded_rows(handle.file), max_parallelism)
        except (TypeError, ValueError) as exc:
            raise CorruptCheckpointError(f"{handle.file}: a key cannot be hashed: "
                                         f"{exc}") from exc

    def key_group_of(self, op: OperatorMetadata, key: Any) -> int | None:
        """The key group by the key serializer's own hash (a ``Row``'s is not a tuple's).

        ``None`` for a ``RowData`` key, whose hash is over a binary form a typed key lacks, and
        for keys whose hash statectl cannot compute (:meth:`unknown_key_hash`).
        """
        codec = self.key_codecs.get(op.uid)
        return None if codec is None else key_group_of(codec, key, op.max_parallelism)

    def sources(self) -> tuple[SourceProgress, ...]:
        """Every source operator's reader splits and enumerator state (:mod:`.sources`).

        A source operator: one with coordinator state or ``SourceReaderState``. Decoded when
        first asked for.
        """
        if self._sources is None:
            found = []
            for flink_op, op in zip(self.flink.operators, self.metadata.operators, strict=True):
                readers = [(st.index, [e for entry in self.operator_entries(op.uid, st.index)
                                       if entry.name == READER_STATE
                                       for e in entry.elements])
                           for st in op.subtasks
                           if any(h.state == READER_STATE for h in st.operator)]
                coordinator = flink_op.coordinator_state
                state = None
                if coordinator is not None:
                    state = coordinator.data if coordinator.kind == "inline" else None
                if coordinator is None and not readers:
                    continue
                progress = source_progress(op.uid, state, readers, f"operator {op.uid}")
                if coordinator is not None and state is None:
                    progress = replace(progress, notes=(
                        *progress.notes, "enumerator state in a file statectl does not read"))
                found.append(progress)
            self._sources = tuple(found)
        return self._sources

    def unknown_key_hash(self, op: OperatorMetadata) -> str | None:
        """Why the key serializer's ``hashCode`` is unknown to statectl; ``None`` if known."""
        codec = self.key_codecs.get(op.uid)
        if codec is None or codec.java_hash is not None:
            return None
        serializer = parse_type(codec.spec)
        if not serializer.hashable:
            return serializer.unhashable
        return f"a Java {codec.name} key hashes by identity (Object.hashCode)"

    def verify_checksum(self, relative: str) -> None:
        """Flink files carry no checksums; decoding them completely is the check (at open)."""
        self._path_table(relative)


# -- opening ------------------------------------------------------------------------------


def open_flink_checkpoint(
    fs: pafs.FileSystem, root: str, location: str, *, strict: bool = True,
    allow_pickle: bool = False, decode: bool = True,
    counts: Mapping[tuple[int, int, int], dict[str, StateCounts]] | None = None,
    partial: bool = False,
) -> FlinkCheckpoint:
    """Open the Flink snapshot in directory ``root``.

    Nothing that cannot be decoded stops the reading of the rest (docs/flink-types.md,
    "Never all-or-nothing"): values, key groups, states and streams statectl could not decode
    are listed in :attr:`FlinkCheckpoint.undecodable` (:mod:`statecore.undecodable`).
    Where that is damage (bytes that do not parse, not a missing decoder) the opening raises
    a :class:`CorruptCheckpointError` naming it unless ``partial`` (and so does reading rows
    decoded on demand later).

    ``strict=False`` collects problems (for ``verify``) where a state cannot be decoded,
    instead of raising the first. ``allow_pickle=True`` unpickles PyFlink's pickled values
    (:mod:`formats.flink.pickled`): unsafe, it runs code the snapshot carries.

    ``decode=False`` decodes no keyed state: ``_metadata``, each keyed stream's header (key
    serializer, states' serializer snapshots) and the operator state (small by Flink's design:
    every task holds it in memory) are read, every state file is checked to exist with its
    size, and the keyed handles are listed as :attr:`FlinkCheckpoint.keyed_sources`, which
    tasks elsewhere decode in pieces (:mod:`formats.flink.pieces`; the Spark engine). The
    model's per-key-group rows and bytes are then ``counts``' (per keyed source's
    ``ident``, :func:`formats.flink.pieces.merge_counts` of its pieces), or unknown (no
    ``counts``: rows are empty, :attr:`FlinkCheckpoint.counted` is false). A keyed file's rows
    are decoded in this process only if something reads them.
    """
    if allow_pickle and not decode:
        raise UnsupportedFormatError("--allow-pickle decodes every value in this process: "
                                     "run it with the local engine")
    path = f"{root}/{FLINK_METADATA_FILE}"
    data = read_snapshot_file(fs, root, path, FLINK_METADATA_FILE, MAX_METADATA_BYTES)
    flink = parse_metadata(data, FLINK_METADATA_FILE)
    try:
        created = int(fs.get_file_info(path).mtime_ns or 0) // 1_000_000
    except (OSError, TypeError):
        created = 0
    kryo = kryo_major_of(flink.version)
    builder = _Builder(fs, root, strict, allow_pickle, decode, counts, partial, kryo)
    with written_by(kryo):  # the codecs read the Kryo of the Flink that wrote the snapshot
        operators = tuple(builder.operator(i, op, flink.operators) for i, op in
                          enumerate(flink.operators))
    kind = (CheckpointKind.SAVEPOINT if flink.is_savepoint
            or (flink.is_savepoint is None and "savepoint" in root.rsplit("/", 1)[-1])
            else CheckpointKind.CHECKPOINT)
    files = tuple(FileInfo(name, t.flink_bytes, "flink:decoded") for name, t in
                  builder.tables.items())
    metadata = CheckpointMetadata(flink.checkpoint_id, kind, created, operators, files)
    checkpoint = FlinkCheckpoint(fs, root, location, flink, metadata, builder.tables,
                                 builder.problems, builder.key_codecs, builder.stored,
                                 builder.downloads, builder.keyed_headers,
                                 builder.operator_files, allow_pickle)
    checkpoint.keyed_decoded = decode
    checkpoint.undecodable = builder.undecodable  # decoding on demand adds to the same list
    checkpoint.keyed_sources = tuple(builder.sources)
    checkpoint.file_sources = builder.file_sources
    checkpoint.counted = decode or counts is not None
    checkpoint.counts = counts
    if not partial:
        refuse_damage(builder.undecodable)
    return checkpoint


def refuse_damage(parts: Sequence[UndecodablePart]) -> None:
    """Raise a :class:`CorruptCheckpointError` naming the damaged parts, if any."""
    damage = describe_damage(parts)
    if damage:
        raise CorruptCheckpointError(damage)


class _Builder:
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

    def lost(self, uid: str, subtask: int, losses: Losses, on_demand: bool = False) -> None:
        """A decoder's losses as the snapshot's :class:`UndecodablePart` list.

        ``on_demand``: rows decoded after the opening, whose damage raises unless ``partial``.
        """
        start = len(self.undecodable)
        self.undecodable.extend(
            UndecodablePart(uid, state, subtask, key_group, values, cls, ser, reason, damaged,
                            kept)
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
        self.sources.append(KeyedSource(*ident, handle, max_parallelism, where,
                                        0 if isinstance(handle, FlinkIncrementalHandle)
                                        else header.size, self.kryo_major))
        loader = _HandleLoader(self.streams, handle, where, max_parallelism,
                               lambda losses: self.lost(uid, ident[1], losses, True),
                               self.kryo_major)
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
            not isinstance(exc, UnsupportedFormatError), False))

    # -- operators ------------------------------------------------------------------------

    def operator(self, index: int, op: FlinkOperator, all_ops: tuple[FlinkOperator, ...]
                 ) -> OperatorMetadata:
        uid = op.uid or op.operator_id
        if sum(1 for o in all_ops if (o.uid or o.operator_id) == uid) > 1:
            uid = op.operator_id
        where = f"operator {op.name or uid} ({op.operator_id})"
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
                assert header.key is not None
                described = [(state_declaration(info), rows_of[info.name])
                             for info in header.states]
                try:  # every subtask's header declares the states alike
                    for state_meta, _rows in described:
                        _same_declaration(states.get(state_meta.name), state_meta, hw)
                    if key_type is not None and key_type != header.key.spec:
                        raise CorruptCheckpointError(f"{hw}: keys of type {header.key.spec}, "
                                                     f"another subtask's are {key_type}")
                except StatectlError as exc:
                    self.fail(exc, hw, uid, st.index, "(keyed state)")
                    continue
                key_type = header.key.spec
                self.key_codecs[uid] = header.key
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
                                        kept)
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
                   key_group_range: KeyGroupRange, key_codec: Codec, max_parallelism: int,
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
                                   f"#{op_index}, subtask {subtask}", state, key_type)
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


class _HandleLoader:
    """Decodes one keyed handle in this process when first asked (then keeps its entries)."""

    def __init__(self, streams: SnapshotStreams,
                 handle: FlinkKeyedHandle | FlinkIncrementalHandle, where: str,
                 max_parallelism: int, lost: Callable[[Losses], None] | None = None,
                 kryo_major: int = 5) -> None:
        self.streams, self.handle, self.where = streams, handle, where
        self.max_parallelism = max_parallelism
        self.lost, self.kryo_major = lost, kryo_major
        self._decoded: DecodedKeyed | None = None

    def decoded(self) -> DecodedKeyed:
        if self._decoded is None:
            with written_by(self.kryo_major):
                _, self._decoded, _ = decode_keyed_handle(self.streams, self.handle,
                                                          self.where, self.max_parallelism)
            if self.lost is not None:
                self.lost(self._decoded.losses)
        return self._decoded


class PendingRows:
    """A state's rows of one handle, not decoded yet.

    ``counts``: rows per key group (when a scan counted them); called, the rows (the whole
    handle decoded in this process).
    """

    def __init__(self, loader: _HandleLoader, info: StateInfo, counts: dict[int, int],
                 ident: tuple[int, int, int]) -> None:
        self.loader, self.info, self.counts, self.ident = loader, info, counts, ident

    def __call__(self) -> list[tuple[int, Any, Any, Any]]:
        return state_rows(self.info, self.loader.decoded())


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


def key_group_of(codec: Codec, key: Any, max_parallelism: int) -> int | None:
    """The key group Flink assigns ``key`` (``None`` when its hash code is unknown)."""
    if codec.java_hash is None:
        return None
    try:
        return compute_key_group_for_key_hash(codec.java_hash(key), max_parallelism)
    except StatectlError:
        return None
