"""A real Flink checkpoint or savepoint, opened as a statectl :class:`Checkpoint`.

``open_flink_checkpoint`` reads ``_metadata`` (:mod:`formats.flink.read.metadata`), decodes every
keyed and operator state stream it references (:mod:`formats.flink.read.keyed`,
:mod:`formats.flink.read.operator`) and maps the result onto the shared metadata model
(:mod:`statecore.checkpoint`): operators, states with type specs, subtasks with key-group
ranges, keyed handles with per-key-group rows, operator handles with element ranges and modes.
The decoded state of each (operator, state, subtask) is a virtual data file: an in-memory Arrow
table in the model's columns (:mod:`formats.model.columns`), built when first read, so ``inspect``,
``verify``, ``export``, ``diff`` and ``rescale --plan`` run unchanged. Nothing is written, and
no file outside the snapshot directory is read.

Mapping decisions (DESIGN "Real Flink checkpoints and savepoints"):

- An operator's model ``uid`` is its uid, or its OperatorID (32 hex digits) when Flink stored
  none (SQL operators); ``operator_id`` is always the OperatorID.
- Timers (``_timer_state/...`` priority queues) are keyed list state of ``int64`` timestamps per
  (key, namespace), sorted.
- A window namespace (``TimeWindow.Serializer``) is a ``tuple<int64,int64>`` ``(start, end)``
  that reads back as a :class:`~statecore.values.TimeWindow`, so output can show its times
  (:meth:`FlinkCheckpoint.namespace_reader`).
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

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import replace
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs

from formats.flink import FLINK_METADATA_FILE
from formats.flink.read.keyed import (
    KeyedHeader,
)
from formats.flink.read.metadata import (
    FlinkIncrementalHandle,
    FlinkMetadata,
    FlinkOperator,
    parse_metadata,
)
from formats.flink.read.metadata_check import metadata_problems
from formats.flink.read.operator import DecodedOperatorState
from formats.flink.read.pieces import (
    KeyedSource,
    StateCounts,
    key_group_bytes,
)
from formats.flink.read.snapshot_model import Problem, SnapshotBuilder, refuse_damage
from formats.flink.read.sources import READER_STATE, source_progress
from formats.flink.read.state_meta import StateInfo
from formats.flink.read.streams import SnapshotStreams, read_snapshot_file
from formats.flink.read.tables import DecodedTable, rehash_rows
from formats.flink.types.codecs import Codec
from formats.flink.types.flink_version import kryo_major_of, written_by
from formats.flink.types.snapshots import SerializerSnapshot
from formats.model.arrow_types import named_as
from formats.model.checkpoint import (
    Checkpoint,
    DownloadUnit,
    FileProblem,
    WrittenSnapshot,
    rehash_refused,
    state_of,
)
from formats.model.columns import keyed_schema
from formats.model.operator_names import OperatorNames
from formats.model.sources import SourceProgress
from formats.storage.filesystems import is_storage_failure, join_location
from statecore.checkpoint import (
    CheckpointKind,
    CheckpointMetadata,
    FileInfo,
    KeyedStateHandle,
    OperatorMetadata,
    OperatorStateHandle,
    StateMetadata,
)
from statecore.errors import CorruptCheckpointError, StatectlError, UnsupportedFormatError
from statecore.key_groups import (
    KeyGroupRange,
    compute_key_group_for_key_hash,
)
from statecore.operator_backend import OperatorStateMode
from statecore.serializers import parse_type
from statecore.undecodable import Undecodable, UndecodablePart
from statecore.values import TimeWindow

if TYPE_CHECKING:  # written and compared on demand: ``inspect`` loads neither (issue 45)
    from formats.flink.compat import OperatorSchemas
    from formats.flink.write.savepoint_writer import OperatorProgress
    from formats.flink.write.versions import TargetRelease
    from formats.model.compatibility import OperatorMigration, StateCheck
    from statecore.rescale_plan import RescalePlan

_key_group = itemgetter(0)

__all__ = ["FLINK_METADATA_FILE", "FlinkCheckpoint", "is_flink_checkpoint",
           "open_flink_checkpoint"]

MAX_METADATA_BYTES = 256 << 20


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
        #: why keyed states cannot be read completely, as their headers tell
        self.unread: dict[tuple[str, str], str] = {}
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
        #: uids given to name operators (``open_flink_checkpoint(names=)``), and those of them
        #: that named none
        self.names: OperatorNames | None = None
        #: the stored bytes of a run :meth:`decoded_runs` reads (the rewrite of a snapshot not
        #: decoded at open: :func:`formats.flink.streamed.counted_in_runs`)
        self.run_bytes = 1 << 20
        self.unmatched_names: list[str] = []
        self._time_windows: dict[str, frozenset[str]] = {}

    # -- the virtual files ------------------------------------------------------------------

    def _path_table(self, relative: str) -> DecodedTable:
        table = self._tables.get(relative)
        if table is None:
            raise CorruptCheckpointError(f"{relative}: no such decoded state")
        return table

    def rows_table(self, relative: str, schema: pa.Schema, first: int, count: int,
                   columns: Sequence[str] | None = None) -> pa.Table:
        table = self._path_table(relative).table
        # a value_undecodable column may follow the declared ones (formats.flink.read.tables)
        declared = (table if table.num_columns == len(schema.names)
                    else table.select(table.column_names[:len(schema.names)]))
        declared = named_as(declared, schema)
        if not declared.schema.remove_metadata().equals(schema.remove_metadata()):
            raise CorruptCheckpointError(f"{relative}: columns {table.schema} differ from the "
                                         f"declared {schema}")
        if first < 0 or count < 0 or first + count > table.num_rows:
            raise CorruptCheckpointError(f"{relative}: rows {first}..{first + count} beyond "
                                         f"its {table.num_rows} rows")
        out = named_as(table.slice(first, count), schema)
        return out if columns is None else out.select(list(columns))

    def keyed_table(self, uid: str, handle: KeyedStateHandle,
                    columns: Sequence[str] | None = None) -> pa.Table:
        """As the model's; the whole decoded file when rows per key group are unknown."""
        if self.counted:
            return super().keyed_table(uid, handle, columns)
        table = self._declared(uid, handle, self._path_table(handle.file).table)
        return table if columns is None else table.select(
            list(dict.fromkeys(["key_group", *columns])))

    def keyed_table_in(self, uid: str, handle: KeyedStateHandle,
                       key_groups: Collection[int]) -> pa.Table:
        """As the model's; not decoded yet: only those key groups are decoded (pieces)."""
        if self.counted:
            return super().keyed_table_in(uid, handle, key_groups)
        return self._declared(uid, handle, self._path_table(handle.file).table_in(key_groups))

    def _declared(self, uid: str, handle: KeyedStateHandle, table: pa.Table) -> pa.Table:
        """A decoded table with the field names the model declares (a plan names rows)."""
        op = self.operator(uid)
        if op.plan is None or op.key_type is None:
            return table
        return named_as(table, keyed_schema(state_of(op, handle.state, "keyed"), op.key_type))

    def keyed_bytes_in(self, uid: str, handle: KeyedStateHandle,
                       key_groups: Collection[int]) -> int | None:
        """As the model's: not counted at open, the bytes of the pieces decoded."""
        if self.counted:
            return None
        return self._path_table(handle.file).bytes_in(key_groups)

    def key_group_estimates(self, uid: str, handle: KeyedStateHandle
                            ) -> list[tuple[int, int]] | None:
        """Bytes per key group of the handle's stream (:func:`key_group_bytes`), uncounted."""
        if self.counted or handle.file not in self.file_sources:
            return None
        ident = self.file_sources[handle.file][0]
        source = next((s for s in self.keyed_sources if s.ident == ident), None)
        return None if source is None else key_group_bytes(source)

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

        They need no trip through Arrow. Not decoded at open, a handle is decoded in runs of
        whole key groups (:meth:`decoded_runs`) of the requested ones only, each let go
        once its entries are taken: memory holds a run, not the snapshot (issue 45).
        """
        op = self.operator(uid)
        state_of(op, state_name, "keyed")
        handles = sorted((h for st in op.subtasks for h in st.keyed if h.state == state_name),
                         key=lambda h: h.key_group_range.start)
        for handle in handles:
            first, last = handle.key_group_range.start, handle.key_group_range.end
            if key_groups is not None:
                first, last = max(first, key_groups.start), min(last, key_groups.end)
            if first > last:
                continue
            for run in self.decoded_runs(handle.file, first, last):
                # a run is in the order decoded: a stream's is its key groups' (timsort
                # passes over it in one linear pass)
                yield from sorted(run, key=_key_group)

    def namespace_reader(self, op: OperatorMetadata, state: StateMetadata
                         ) -> Callable[[Any], Any] | None:
        """As the model's; a namespace of ``TimeWindow.Serializer`` is a ``TimeWindow``.

        Its spec, ``tuple<int64,int64>``, is also a ``Tuple2<Long, Long>``'s: the state's
        serializer snapshot tells them apart (:attr:`StateInfo.time_window_namespace
        <formats.flink.read.state_meta.StateInfo.time_window_namespace>`).
        """
        read = super().namespace_reader(op, state)
        if op.uid not in self._time_windows:
            header = self._keyed_headers.get(op.uid)
            states = () if header is None else header.states
            self._time_windows[op.uid] = frozenset(
                i.name for i in states if i.time_window_namespace)
        if read is None or state.name not in self._time_windows[op.uid]:
            return read
        plain = read

        def window(value: Any) -> TimeWindow:
            # export's tables (and so browse's and query's) hold a window as {start, end}
            if isinstance(value, dict) and "start" in value:
                return TimeWindow(value["start"], value["end"])
            return TimeWindow(*plain(value))

        return window

    # -- what a savepoint writer carries over -------------------------------------------------

    def keyed_header(self, uid: str) -> KeyedHeader | None:
        """An operator's keyed state header as Flink wrote it: key serializer, state metas.

        The states of every subtask's header: Flink registers a keyed state in a subtask when
        it first accesses it, so a state may be in some subtasks' headers only.
        """
        return self._keyed_headers.get(self.operator(uid).uid)

    def releases(self) -> str | None:
        """As the model's: the releases that write this ``_metadata`` version."""
        from formats.flink.write.versions import infer_release
        return infer_release(self.flink.version).releases

    def restore_checks(self, uid: str, new: Checkpoint, new_uid: str) -> list[StateCheck] | None:
        """As the model's: serializer snapshots compared as Flink's restore does.

        See :mod:`formats.flink.compat`.
        """
        if not isinstance(new, FlinkCheckpoint):
            return None
        from formats.flink.compat import restore_checks
        return restore_checks(self.operator_schemas(uid), new.operator_schemas(new_uid))

    def operator_schemas(self, uid: str) -> OperatorSchemas:
        """An operator's keyed state header and each operator state's mode and meta info."""
        from formats.flink.compat import OperatorSchemas
        operator: dict[str, tuple[str, StateInfo | None]] = {}
        for subtask in self.operator(uid).subtasks:
            for handle in subtask.operator:
                if handle.state not in operator:
                    decoded = self.decoded_operator_state(handle.file)
                    operator[handle.state] = (decoded.mode, decoded.info)
        return OperatorSchemas(self.keyed_header(uid), operator, kryo_major_of(self.flink.version))

    def decoded_rows(self, relative: str) -> list[tuple[int, Any, Any, Any]]:
        """A virtual file's entries ``(key_group, key, namespace, value)`` as decoded.

        A timer state's value is the sorted list of timestamps of the key and namespace.
        """
        return self._path_table(relative).rows

    def decoded_runs(self, relative: str, first: int, last: int
                     ) -> Iterator[list[tuple[int, Any, Any, Any]]]:
        """A keyed virtual file's entries of key groups ``first..last``, run by run.

        Runs of whole key groups of about :attr:`run_bytes` stored bytes in ascending order, each
        decoded when asked for and not kept (the snapshot keeps its last few pieces), when
        the file was not decoded at open; else one run. Each run's entries in the order
        decoded (not sorted by key group).
        """
        table = self._path_table(relative)
        found = self.file_sources.get(relative)
        source = None if found is None else next(
            (s for s in self.keyed_sources if s.ident == found[0]), None)
        if table.decoded or source is None:
            yield table.rows_in(first, last)
            return
        run_first, held = first, 0
        for group, size in key_group_bytes(source):
            if not first <= group <= last:
                continue
            if held and held + size > self.run_bytes and group > run_first:
                yield table.rows_in(run_first, group - 1)
                run_first, held = group, 0
            held += size
        yield table.rows_in(run_first, last)

    def decoded_operator_state(self, relative: str) -> DecodedOperatorState:
        """The decoded operator state behind a virtual file, its meta info as Flink wrote it."""
        self._path_table(relative)
        return self._operator_files[relative]

    def flink_operator(self, uid: str) -> FlinkOperator:
        """The operator as ``_metadata`` stores it (its coordinator state among others)."""
        op_id = self.operator(uid).operator_id
        return next(o for o in self.flink.operators if o.operator_id == op_id)

    def write_rescaled(self, plan: RescalePlan, location: str, *,
                       checkpoint_id: int | None = None, compress: bool = False,
                       flink_version: str | None = None,
                       drop_expired_at: int | None = None) -> WrittenSnapshot:
        """A canonical savepoint of this snapshot, rescaled (:mod:`formats.flink.write.rewrite`).

        ``drop_expired_at``: what TTL expired then is left out (local engine only), by the
        TTLs the model declares (given with ``--ttl``: the snapshot has none).

        Written for ``flink_version`` ("1.20"), by default the source's release as far as its
        ``_metadata`` version tells (:mod:`formats.flink.write.versions`); a release that cannot
        restore the state (Kryo values across majors, a serializer it does not have) is
        refused. Refused too when values could not be read at all (a heap checkpoint's block
        past an undecodable value): the savepoint would lose them. Values kept as undecodable
        markers are written back as their bytes.
        """
        from formats.flink.write.rewrite import rewrite_flink_savepoint
        target = self.target_release(flink_version)
        self._refuse_lost()
        unknown = [s.name for op in self.metadata.operators for s in op.states
                   if s.ttl is not None and s.ttl <= 0]
        if drop_expired_at is not None and (self.rewriter is not None or unknown):
            raise UnsupportedFormatError(
                f"--drop-expired: the TTL of {', '.join(map(repr, unknown))} is not in the "
                f"snapshot; give it with --ttl" if unknown else
                "--drop-expired on a Flink snapshot runs on the local engine")
        with written_by(target.release.kryo_major):  # the same as read: checked above
            if self.rewriter is not None:
                written = self.rewriter(self, plan, location, checkpoint_id=checkpoint_id,
                                        compress=compress, release=target.release)
            else:
                written = rewrite_flink_savepoint(self, plan, location,
                                                  checkpoint_id=checkpoint_id,
                                                  compress=compress, release=target.release,
                                                  drop_expired_at=drop_expired_at)
        return replace(written, release=target.to_json(), release_text=target.describe())

    def write_migrated(self, like: Checkpoint, migrations: Sequence[OperatorMigration],
                       plan: RescalePlan, location: str, *, compress: bool = False,
                       progress: OperatorProgress | None = None) -> WrittenSnapshot:
        """As the model's (:mod:`formats.flink.write.migrate`), for ``like``'s release.

        Refused when values could not be read at all (they would be lost), as a rescale is.
        Opened by the Spark engine, Spark tasks convert and write the keyed state
        (:attr:`rewriter`), the same bytes.
        """
        if not isinstance(like, FlinkCheckpoint):
            raise UnsupportedFormatError(f"{like.location} is a {like.format_name} checkpoint: "
                                         "migrate writes for the job of a Flink snapshot")
        from formats.flink.write.migrate import retargets
        from formats.flink.write.rewrite import rewrite_flink_savepoint
        target = replace(like.target_release(None),
                         reason="the release of the new job's snapshot (--like)")
        self._refuse_lost()
        specs = retargets(self, like, migrations)
        with written_by(target.release.kryo_major):  # converted values: the new job's Kryo
            if self.rewriter is not None:  # builds the retargets here and in every task
                written = self.rewriter(self, plan, location, compress=compress,
                                        release=target.release, retargets=specs,
                                        progress=progress)
            else:
                written = rewrite_flink_savepoint(
                    self, plan, location, compress=compress, release=target.release,
                    retargets={uid: spec.retarget() for uid, spec in specs.items()},
                    progress=progress)
        return replace(written, release=target.to_json(), release_text=target.describe())

    def _refuse_lost(self) -> None:
        """Refuse to write when values could not be read at all: the savepoint would lose them."""
        lost = [p for p in self.undecodable if not p.kept]
        if lost:
            first = lost[0]
            raise UnsupportedFormatError(
                f"cannot write a savepoint of this snapshot: state {first.state!r} of operator "
                f"{first.shown} has values statectl could not read ({first.reason}), which "
                f"the savepoint would lose ({len(lost)} such part{'s' if len(lost) > 1 else ''}; "
                f"a canonical savepoint of the job, which delimits every value, can be "
                f"rewritten)")

    def check_release(self, flink_version: str | None) -> None:
        self.target_release(flink_version)

    def target_release(self, flink_version: str | None = None) -> TargetRelease:
        """The release a savepoint of this snapshot is written for, checked that it holds it.

        Raises :class:`~statecore.errors.InvalidArgumentError` for a release statectl does
        not write for, :class:`~statecore.errors.UnsupportedFormatError` for one that cannot
        restore this snapshot's state.
        """
        from formats.flink.write.versions import check_target_holds, target_release
        target = target_release(flink_version, self.flink.version)
        check_target_holds(target, self.flink.version, self.carried_serializers())
        return target

    def carried_serializers(self) -> Iterator[tuple[str, SerializerSnapshot]]:
        """``(what, snapshot)`` of every serializer a savepoint of this snapshot carries over."""
        for op in self.metadata.operators:
            where = f"operator {op.identity.label}"
            header = self.keyed_header(op.uid)
            if header is not None:
                yield f"{where} (its keys)", header.key_snapshot
                for info in header.states:
                    for snapshot in info.serializers.values():
                        yield f"{where}, state {info.name!r}", snapshot
            seen: set[str] = set()
            for st in op.subtasks:
                for handle in st.operator:
                    if handle.state in seen:
                        continue
                    seen.add(handle.state)
                    op_info = self.decoded_operator_state(handle.file).info
                    for snapshot in (op_info.serializers.values() if op_info is not None
                                     else ()):
                        yield f"{where}, operator state {handle.state!r}", snapshot

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

    def verify_findings(self) -> list[tuple[str, str, str]]:
        """What is wrong in ``_metadata`` and the files it names, as only ``verify`` checks.

        ``_metadata`` beyond what opening parsed (:mod:`formats.flink.read.metadata_check`:
        checkpoint properties, source coordinator state, trailing bytes); files missing, of
        another size, or leading out of the snapshot (``verify``'s kinds, each file once).
        """
        found = metadata_problems(self.flink, [op.identity.label
                                               for op in self.metadata.operators])
        seen: set[str] = set()
        streams = SnapshotStreams(self.fs, self.root)
        for held, stream in self.flink.stream_handles():
            problem = streams.problem(stream)
            if problem is not None and problem[1] not in seen:
                seen.add(problem[1])
                found.append((problem[0], problem[1], f"{problem[2]} ({held})"))
        return found

    def uncounted_keyed_bytes(self) -> dict[tuple[str, int], int] | None:
        """The keyed streams' bytes per ``(uid, subtask)`` when keyed state was not counted."""
        if self.counted:
            return None
        return self.keyed_stream_bytes()

    def keyed_stream_bytes(self) -> dict[tuple[str, int], int]:
        """The keyed streams' bytes per ``(uid, subtask)`` as stored (decoded or not).

        A heap or canonical handle's stream, a RocksDB handle's files together.
        """
        out: dict[tuple[str, int], int] = {}
        for op, flink_op in zip(self.metadata.operators, self.flink.operators, strict=True):
            for st in flink_op.subtasks:
                for handle in st.managed_keyed:
                    size = (handle.meta.size + sum(f.size for _, f in handle.files)
                            if isinstance(handle, FlinkIncrementalHandle)
                            else handle.stream.size)
                    out[(op.uid, st.index)] = out.get((op.uid, st.index), 0) + size
        return out

    def undecodable_parts(self) -> list[UndecodablePart]:
        """What could not be decoded so far (decoding on demand adds to it)."""
        return list(self.undecodable)

    def add_undecodable(self, parts: Sequence[UndecodablePart]) -> None:
        """As the model's: added to :attr:`undecodable` (a worker refused damage already)."""
        self.undecodable.extend(parts)

    def unread_states(self) -> dict[tuple[str, str], str]:
        """Why keyed states cannot be read completely, from their headers (decoding nothing).

        Their keys, meta info, namespace or values have no decoder in statectl
        (:func:`formats.flink.read.keyed.undecodable_state`).
        """
        return dict(self.unread)

    def expected_key_groups(self, op: OperatorMetadata, handle: KeyedStateHandle,
                            table: pa.Table, key_groups: Collection[int] | None = None
                            ) -> np.ndarray | None:
        """The key groups the keys' Java hashes give, from the keys as Flink stored them.

        A ``RowData`` key's hash is over its binary form, which the decoded columns no
        longer hold.
        """
        decoded = self._path_table(handle.file)
        expected = decoded.expected() if key_groups is None else decoded.expected_in(
            key_groups)
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

    def _reader_elements(self, handles: Sequence[OperatorStateHandle]) -> list[Any]:
        """The elements of a subtask's ``SourceReaderState`` as decoded, in order.

        Those :meth:`operator_entries` gives (``None`` where a value could not be decoded),
        read from the decoded rows without building Arrow tables: ``inspect``'s summary shows
        the sources' progress, and Arrow's conversion of Python lists would import pandas where
        it is installed (issue 45: start-up).
        """
        out: list[Any] = []
        for handle in handles:
            if handle.state != READER_STATE or handle.mode is OperatorStateMode.BROADCAST:
                continue
            rows = self._path_table(handle.file).rows
            first, count = handle.first_element, handle.element_count
            if first < 0 or count < 0 or first + count > len(rows):
                raise CorruptCheckpointError(f"{handle.file}: rows {first}..{first + count} "
                                             f"beyond its {len(rows)} rows")
            out += [None if type(v) is Undecodable else v for v in rows[first:first + count]]
        return out

    def sources(self) -> tuple[SourceProgress, ...]:
        """Every source operator's reader splits and enumerator state (:mod:`.sources`).

        A source operator: one with coordinator state or ``SourceReaderState``. Decoded when
        first asked for.
        """
        if self._sources is None:
            found = []
            for flink_op, op in zip(self.flink.operators, self.metadata.operators, strict=True):
                readers = [(st.index, self._reader_elements(st.operator))
                           for st in op.subtasks
                           if any(h.state == READER_STATE for h in st.operator)]
                coordinator = flink_op.coordinator_state
                state = None
                if coordinator is not None:
                    state = coordinator.data if coordinator.kind == "inline" else None
                if coordinator is None and not readers:
                    continue
                progress = source_progress(op.uid, state, readers,
                                           f"operator {op.identity.label}")
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
    partial: bool = False, names: OperatorNames | None = None,
) -> FlinkCheckpoint:
    """Open the Flink snapshot in directory ``root``.

    ``names``: uids for operators the snapshot stores none for (Flink 1.x), given by the user
    (:mod:`formats.model.operator_names`); :attr:`FlinkCheckpoint.unmatched_names` lists
    those that name no operator here.

    Nothing that cannot be decoded stops the reading of the rest (docs/flink-types.md,
    "Never all-or-nothing"): values, key groups, states and streams statectl could not decode
    are listed in :attr:`FlinkCheckpoint.undecodable` (:mod:`statecore.undecodable`).
    Where that is damage (bytes that do not parse, not a missing decoder) the opening raises
    a :class:`CorruptCheckpointError` naming it unless ``partial`` (and so does reading rows
    decoded on demand later).

    ``strict=False`` collects problems (for ``verify``) where a state cannot be decoded,
    instead of raising the first. ``allow_pickle=True`` unpickles PyFlink's pickled values
    (:mod:`formats.flink.read.pickled`): unsafe, it runs code the snapshot carries.

    ``decode=False`` decodes no keyed state: ``_metadata``, each keyed stream's header (key
    serializer, states' serializer snapshots) and the operator state (small by Flink's design:
    every task holds it in memory) are read, every state file is checked to exist with its
    size, and the keyed handles are listed as :attr:`FlinkCheckpoint.keyed_sources`, which
    tasks elsewhere decode in pieces (:mod:`formats.flink.read.pieces`; the Spark engine). The
    model's per-key-group rows and bytes are then ``counts``' (per keyed source's
    ``ident``, :func:`formats.flink.read.pieces.merge_counts` of its pieces), or unknown (no
    ``counts``: rows are empty, :attr:`FlinkCheckpoint.counted` is false). A keyed file's rows
    are decoded in this process only if something reads them.
    """
    if allow_pickle and not decode:
        raise UnsupportedFormatError("--allow-pickle decodes every value in this process: "
                                     "run it with the local engine")
    path = f"{root}/{FLINK_METADATA_FILE}"
    data = read_snapshot_file(fs, root, path, FLINK_METADATA_FILE, MAX_METADATA_BYTES)
    shown = location if location.rstrip("/").endswith(FLINK_METADATA_FILE) else join_location(
        location, FLINK_METADATA_FILE)
    flink = parse_metadata(data, FLINK_METADATA_FILE, shown)
    named: dict[str, str] = {}
    if names:
        flink, named = _named(flink, names)
    try:
        created = int(fs.get_file_info(path).mtime_ns or 0) // 1_000_000
    except (OSError, TypeError):
        created = 0
    kryo = kryo_major_of(flink.version)
    builder = SnapshotBuilder(fs, root, strict, allow_pickle, decode, counts, partial, kryo)
    with written_by(kryo):  # the codecs read the Kryo of the Flink that wrote the snapshot
        operators = tuple(builder.operator(i, op, flink.operators) for i, op in
                          enumerate(flink.operators))
    operators = tuple(replace(op, uid_from=named[op.operator_id])
                      if op.has_uid and op.operator_id in named else op for op in operators)
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
    checkpoint.unread = builder.unread
    checkpoint.keyed_sources = tuple(builder.sources)
    checkpoint.file_sources = builder.file_sources
    checkpoint.counted = decode or counts is not None
    checkpoint.counts = counts
    checkpoint.names = names
    checkpoint.unmatched_names = names.unmatched(o.operator_id for o in flink.operators) \
        if names else []
    if not partial:
        refuse_damage(builder.undecodable)
    return checkpoint


def _named(flink: FlinkMetadata, names: OperatorNames) -> tuple[FlinkMetadata, dict[str, str]]:
    """``flink`` with the operators it stores no uid for named; ``{OperatorID: how}``."""
    named: dict[str, str] = {}
    operators = []
    for op in flink.operators:
        given = names.uid_of(op.operator_id)
        if given is not None and op.uid is None:
            op = replace(op, uid=given[0])
            named[op.operator_id] = given[1]
        operators.append(op)
    return replace(flink, operators=tuple(operators)), named


def key_group_of(codec: Codec, key: Any, max_parallelism: int) -> int | None:
    """The key group Flink assigns ``key`` (``None`` when its hash code is unknown)."""
    if codec.java_hash is None:
        return None
    try:
        return compute_key_group_for_key_hash(codec.java_hash(key), max_parallelism)
    except StatectlError:
        return None
