"""The opened checkpoint every reader produces and every operation consumes.

A :class:`Checkpoint` is format-neutral: its :attr:`~Checkpoint.metadata` is the model of
:mod:`statecore.checkpoint` (operators -> subtasks -> keyed handles with per-key-group rows and
operator handles with element ranges), and its state is read as Arrow tables in the columns of
:mod:`formats.model.columns` (``key_group``, ``key``, ``namespace``, ``value``, ``ttl_timestamp``).
A *data file* named by a handle is whatever the format has behind that name: a Parquet file in
statectl's format (:mod:`formats.statectl.reader`), the decoded state of one Flink state and
subtask (:mod:`formats.flink.checkpoint`).

A format implements four primitives -- :meth:`~Checkpoint.rows_table`,
:meth:`~Checkpoint.row_groups`, :meth:`~Checkpoint.verify_checksum` and
:meth:`~Checkpoint.check_file` -- and may refine the key-hash hooks; everything else
(entries, restore, lookups by operator) is written once, here, over those.
:func:`formats.open.open_checkpoint` detects the format of a directory and opens it.

Nothing is ever written to an opened checkpoint. Every failure to read is a
:class:`~statecore.errors.StatectlError`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from formats.model.arrow_types import from_arrow, pydict
from formats.model.columns import join_ttl, keyed_schema, operator_schema, ttl_spec, value_spec
from statecore.checkpoint import (
    CheckpointMetadata,
    KeyedStateHandle,
    KeyGroupRows,
    OperatorMetadata,
    StateMetadata,
)
from statecore.errors import (
    CheckpointError,
    CorruptCheckpointError,
    InvalidArgumentError,
    StatectlError,
    UnknownKeyHashError,
    UnsupportedFormatError,
)
from statecore.key_groups import KeyGroupRange, assign_to_key_group
from statecore.operator_backend import (
    OperatorStateBackend,
    OperatorStateMode,
    OperatorStateSnapshotEntry,
)
from statecore.serializers import VOID_NAMESPACE, parse_type
from statecore.undecodable import UndecodablePart

if TYPE_CHECKING:  # annotations only: opening a checkpoint loads none of these (issue 45)
    from formats.model.compatibility import OperatorMigration, StateCheck
    from formats.model.sources import SourceProgress
    from statecore.keyed_backend import HeapKeyedStateBackend
    from statecore.rescale_plan import RescalePlan

__all__ = ["Checkpoint", "DownloadUnit", "FileProblem", "WrittenSnapshot", "rehash_refused",
           "state_of"]

#: Rows read at once by :meth:`Checkpoint.keyed_entries` (whole key groups, at least one).
ENTRY_BATCH_ROWS = 65536

#: ``(kind, message)`` of a data file that is missing or damaged; kinds: ``unsafe-path``,
#: ``missing-file``, ``size``, ``checksum``.
FileProblem = tuple[str, str]


@dataclass(frozen=True)
class WrittenSnapshot:
    """What writing a snapshot in a format's own files produced."""

    location: str
    files: int
    bytes: int
    entries: int
    #: for which release of the format's engine it was written, as JSON (Flink:
    #: ``formats.flink.write.versions.TargetRelease.to_json``), and in words; ``None``: no choice
    release: dict[str, Any] | None = None
    release_text: str = ""
    #: entries left out because their TTL expired (``rescale --drop-expired``)
    dropped: int = 0


@dataclass(frozen=True)
class DownloadUnit:
    """Files a restore fetches whole, and the key groups they hold: ``(stored name, bytes)``."""

    key_group_range: KeyGroupRange
    files: tuple[tuple[str, int], ...]


def rehash_refused(op: OperatorMetadata, max_parallelism: int, reason: str
                   ) -> UnknownKeyHashError:
    """The error for a max-parallelism change of keys whose key group cannot be computed."""
    return UnknownKeyHashError(
        f"operator {op.identity.label!r} cannot change its max parallelism to "
        f"{max_parallelism}: its keys ({op.key_type}) would each need their key group at the "
        f"new max parallelism, and that is not computable: {reason}. Its max parallelism "
        f"({op.max_parallelism}) can stay: rescale without --max-parallelism")


def state_of(op: OperatorMetadata, name: str, scope: str) -> StateMetadata:
    """The declared state ``name`` of scope ``keyed`` or ``operator``; an error if none."""
    for state in op.states:
        if state.name == name and state.scope == scope:
            return state
    raise CheckpointError(f"operator {op.identity.label!r} has no {scope} state {name!r}")


class Checkpoint(ABC):
    """An opened checkpoint: its validated metadata and its state as Arrow tables.

    ``location`` is what the user gave (for messages); ``format_name`` is ``inspect``'s
    ``format`` field. Subclasses are the formats' readers.
    """

    format_name: str = ""

    def __init__(self, location: str, metadata: CheckpointMetadata) -> None:
        self.location, self.metadata = location, metadata

    # -- what a format implements -----------------------------------------------------------

    @abstractmethod
    def rows_table(self, relative: str, schema: pa.Schema, first: int, count: int,
                   columns: Sequence[str] | None = None) -> pa.Table:
        """Rows ``[first, first + count)`` of a data file as an Arrow table.

        The file's columns must be ``schema``'s (:mod:`formats.model.columns`); ``columns`` selects
        some of them. Only what holds those rows is read where the format allows.
        """

    @abstractmethod
    def row_groups(self, relative: str) -> list[tuple[int, int]]:
        """``(rows, stored bytes)`` of each row group of a data file, from metadata only."""

    @abstractmethod
    def verify_checksum(self, relative: str) -> None:
        """Check a data file's content against what the metadata says (an error if not)."""

    @abstractmethod
    def check_file(self, relative: str) -> FileProblem | None:
        """What is wrong with a data file, or ``None``: ``verify``'s check of one file.

        Missing, not a regular file, a size other than the metadata's, a path that leaves the
        checkpoint, or content that fails its checksum.
        """

    # -- hooks a format may refine -----------------------------------------------------------

    def stored_names(self, relative: str) -> tuple[str, ...]:
        """Where a data file's state is, as the format stores it (plans show this)."""
        return (relative,)

    def check_release(self, flink_version: str | None) -> None:
        """Refuse, before any work, a ``flink_version`` that :meth:`write_rescaled` would.

        Formats whose output has no release to choose accept anything.
        """
        return None

    def write_rescaled(self, plan: RescalePlan, location: str, *,
                       checkpoint_id: int | None = None, compress: bool = False,
                       flink_version: str | None = None,
                       drop_expired_at: int | None = None) -> WrittenSnapshot:
        """Write this checkpoint rescaled as ``plan`` says, in its own format's kind of output.

        ``drop_expired_at`` (epoch ms): leave out what TTL expired then (every state with TTL
        must have a known TTL).

        A Flink snapshot writes a canonical savepoint that Flink restores
        (:mod:`formats.flink.write.rewrite`), for the Flink release ``flink_version`` ("1.20"; by
        default the source's: :mod:`formats.flink.write.versions`); statectl's format has its own
        rewrite (:func:`formats.ops.rescale.rescale_checkpoint`), so the model has none.
        """
        raise UnsupportedFormatError(f"{self.format_name} snapshots are not rewritten this way")

    def releases(self) -> str | None:
        """The releases that write this snapshot as it is (``"Flink 1.16 to 1.20"``), if known."""
        return None

    def restore_checks(self, uid: str, new: Checkpoint, new_uid: str) -> list[StateCheck] | None:
        """How the job that wrote ``new`` restores operator ``uid`` of this snapshot.

        Its operator ``new_uid`` in ``new``: a check per state (:mod:`formats.model.compatibility`).

        ``None``: this format cannot tell (statectl's own checkpoints have no serializer
        snapshots; a Flink job restores them only once converted to a savepoint).
        """
        return None

    def write_migrated(self, like: Checkpoint, migrations: Sequence[OperatorMigration],
                       plan: RescalePlan, location: str, *, compress: bool = False,
                       progress: Callable[[int, int, str], None] | None = None
                       ) -> WrittenSnapshot:
        """Write this snapshot for the job that wrote ``like`` (``statectl migrate``).

        Only the operators of ``migrations``, each under the new job's identity, some states
        converted to its serializers (:class:`~formats.model.compatibility.OperatorMigration`),
        for the release that wrote ``like``; ``plan`` gives parallelisms and key groups.
        ``progress(done, total, what)``: operators written of all, the one in work
        (:data:`formats.flink.write.savepoint_writer.OperatorProgress`).
        """
        raise UnsupportedFormatError(f"{self.format_name} snapshots are not migrated: statectl "
                                     "migrate rewrites Flink snapshots")

    def download_units(self, uid: str) -> list[DownloadUnit]:
        """What a restore of an operator fetches whole, with the key groups it covers.

        A Flink RocksDB incremental handle is downloaded whole by every new subtask whose
        key groups intersect it (``RocksDBIncrementalRestoreOperation``); files of other
        formats are read by key group, so they have none.
        """
        return []

    def open_problems(self) -> list[tuple[str, str, str]]:
        """``(kind, where, message)`` of what could not be read when opening (``verify``)."""
        return []

    def verify_findings(self) -> list[tuple[str, str, str]]:
        """``(kind, where, message)`` of a format's own deeper checks, which only verify runs.

        Problems, and warnings (kinds in :data:`formats.ops.verify.WARNING_KINDS`); a rewrite does
        not refuse a source for them (:meth:`open_problems` it does).
        """
        return []

    def key_group_of(self, op: OperatorMetadata, key: Any) -> int | None:
        """The key group of ``key`` in ``op`` (reference §1.2); ``None``: not computable."""
        assert op.key_type is not None
        if self.unknown_key_hash(op) is not None:
            return None
        group: int = assign_to_key_group(key, op.max_parallelism, op.key_type)
        return group

    def expected_key_groups(self, op: OperatorMetadata, handle: KeyedStateHandle,
                            table: pa.Table, key_groups: Collection[int] | None = None
                            ) -> np.ndarray | None:
        """The key group each row's key hashes to (reference §1.2), for ``verify``.

        ``table``: the handle's rows (:meth:`keyed_table`), or those of ``key_groups``
        (:meth:`keyed_table_in`). ``None`` when the key type's hash is not computable
        (:meth:`unknown_key_hash`).
        """
        assert op.key_type is not None
        if self.unknown_key_hash(op) is not None:
            return None
        from formats.model import key_hash  # pyarrow.compute: when keys are hashed
        result: np.ndarray = key_hash.key_groups(table.column("key"), op.key_type,
                                                 op.max_parallelism)
        return result

    def new_key_groups(self, op: OperatorMetadata, handle: KeyedStateHandle,
                       max_parallelism: int) -> np.ndarray:
        """The key group each row of ``handle`` has at another max parallelism (reference §1.2).

        The keys' Java hash decides; a key type whose hash cannot be computed (user code, such
        as a POJO's ``hashCode``) is refused with an error naming the operator.
        """
        assert op.key_type is not None
        reason = self.unknown_key_hash(op)
        if reason is not None:
            raise rehash_refused(op, max_parallelism, reason)
        from formats.model.key_hash import key_groups  # pyarrow.compute: when keys are hashed
        try:
            result: np.ndarray = key_groups(self.keyed_table(op.uid, handle, ["key"]).column(
                "key"), op.key_type, max_parallelism)
        except InvalidArgumentError as exc:
            raise CorruptCheckpointError(f"a stored key cannot be hashed: {exc}") from exc
        return result

    def sources(self) -> tuple[SourceProgress, ...]:
        """What the job's sources have read (their splits and enumerators), where known.

        Statectl's own checkpoints keep source offsets as operator state: none here.
        """
        return ()

    def unknown_key_hash(self, op: OperatorMetadata) -> str | None:
        """Why the key groups of ``op``'s keys cannot be computed; ``None`` when they can.

        A POJO's ``hashCode`` is user code, an enum's ``Object.hashCode`` (identity-based), a
        Kryo object's its class's: statectl has none of them.
        """
        if op.key_type is None:
            return None
        serializer = parse_type(op.key_type)
        return None if serializer.hashable else serializer.unhashable

    def namespace_reader(self, op: OperatorMetadata, state: StateMetadata
                         ) -> Callable[[Any], Any] | None:
        """How ``state``'s ``namespace`` column decodes to Python values; ``None``: void.

        By the declared spec (:func:`formats.model.arrow_types.from_arrow`). A format that knows
        more than the spec refines it: a Flink ``TimeWindow`` is stored as a
        ``tuple<int64,int64>`` and decodes to a :class:`~statecore.values.TimeWindow`.
        """
        return None if state.namespace_type == "void" else from_arrow(state.namespace_type)

    # -- written once, over the primitives ---------------------------------------------------

    def operator(self, uid: str) -> OperatorMetadata:
        """The operator with this uid (or OperatorID); an error if none."""
        for op in self.metadata.operators:
            if op.uid == uid or op.operator_id == uid:
                return op
        raise CheckpointError(f"no operator with uid {uid!r} in this checkpoint")

    def find_operator(self, text: str) -> OperatorMetadata:
        """The operator the user names ``text``: its uid, OperatorID (any case) or name.

        As :meth:`operator` matches (a uid, the uid given with ``--uid`` to a Flink 1.x
        snapshot's operator, the OperatorID), and by name (``GroupAggregate[5]``).
        Raises :class:`~statecore.errors.InvalidArgumentError` when no operator has that name,
        or several do (then a uid or OperatorID tells them apart); the message lists them.
        """
        operators = self.metadata.operators
        for op in operators:
            if text in (op.uid, op.identity.uid) or text.lower() == op.identity.id:
                return op
        named = [op for op in operators if text == op.name]
        if len(named) == 1:
            return named[0]
        if named:
            raise InvalidArgumentError(
                f"{len(named)} operators are named {text!r}: give one's OperatorID ("
                + ", ".join(op.identity.id for op in named) + ")")
        shown = [op.identity.label for op in operators]
        raise InvalidArgumentError(
            f"no operator {text!r} in this checkpoint (by uid, name or OperatorID); it has "
            + (", ".join(shown[:8]) + (f" and {len(shown) - 8} more" if len(shown) > 8 else "")
               if shown else "none"))

    def uncounted_keyed_bytes(self) -> dict[tuple[str, int], int] | None:
        """Keyed state not counted (read without decoding): bytes per ``(uid, subtask)``.

        ``None`` when the rows per key group are known (always, in statectl's format).
        """
        return None

    def keyed_stream_bytes(self) -> dict[tuple[str, int], int] | None:
        """Each subtask's keyed bytes as stored, per ``(uid, subtask)``, if not its states' sum.

        A Flink snapshot's streams also hold headers and framing; ``None``: the sum is right
        (statectl's files).
        """
        return None

    def undecodable_parts(self) -> list[UndecodablePart]:
        """What could not be decoded (:mod:`statecore.undecodable`).

        None in statectl's format, whose values are typed columns.
        """
        return []

    def add_undecodable(self, parts: Sequence[UndecodablePart]) -> None:
        """Add what another process (a worker of ``export``) could not decode of this state.

        As if read here; statectl's format has none (nothing to add).
        """
        if parts:
            raise CheckpointError(f"{self.location}: values of a {self.format_name} snapshot "
                                  f"are typed columns, none can be undecodable; a reader found "
                                  f"{len(parts)}")

    def unread_states(self) -> dict[tuple[str, str], str]:
        """``(uid, state)`` -> why the state cannot be read completely, without reading it.

        Known from its declaration (a Flink state whose serializers statectl has no decoder
        for). None in statectl's format.
        """
        return {}

    def keyed_table_in(self, uid: str, handle: KeyedStateHandle,
                       key_groups: Collection[int]) -> pa.Table:
        """The rows of one keyed handle in ``key_groups``: only those read where possible.

        Where the rows per key group are known, only theirs are read, and their
        ``key_group`` column is checked against them as :meth:`keyed_table` does; a snapshot
        read without decoding (a Flink snapshot) decodes only those key groups.
        """
        op = self.operator(uid)
        state = state_of(op, handle.state, "keyed")
        assert op.key_type is not None
        if not handle.rows:
            table = self.keyed_table(uid, handle)
        else:
            runs: list[tuple[int, int]] = []  # (first row, rows) of consecutive rows read
            chosen = [r for r in handle.rows if r.key_group in key_groups and r.row_count]
            for rows in chosen:
                if runs and runs[-1][0] + runs[-1][1] == rows.first_row:
                    runs[-1] = (runs[-1][0], runs[-1][1] + rows.row_count)
                else:
                    runs.append((rows.first_row, rows.row_count))
            schema = keyed_schema(state, op.key_type)
            if not runs:
                return schema.empty_table()
            table = pa.concat_tables([self.rows_table(handle.file, schema, first, count)
                                      for first, count in runs])
            _check_key_groups(handle.file, table, chosen)
            return table
        import pyarrow.compute as pc  # only where rows are filtered (issue 45: start-up)
        column = table.column("key_group")
        return table.filter(pc.is_in(column, pa.array(sorted(key_groups), column.type)))

    def keyed_bytes_in(self, uid: str, handle: KeyedStateHandle,
                       key_groups: Collection[int]) -> int | None:
        """Stored bytes of ``handle``'s ``key_groups``, where its file's size does not say.

        A Flink snapshot opened without decoding learns a state's bytes as it decodes them
        (``verify`` counts them run by run); ``None``: the metadata's file sizes hold them.
        """
        return None

    def key_group_estimates(self, uid: str, handle: KeyedStateHandle
                            ) -> list[tuple[int, int]] | None:
        """``(key group, bytes)`` of a keyed handle whose rows per key group are not known.

        Estimated without decoding (a Flink stream's key-group offsets; all the handle's
        states together); ``None`` where the rows are known (:attr:`KeyedStateHandle.rows`)
        or nothing tells.
        """
        return None

    def keyed_table(self, uid: str, handle: KeyedStateHandle,
                    columns: Sequence[str] | None = None) -> pa.Table:
        """The rows of one keyed handle as an Arrow table, in the typed columns.

        The ``key_group`` column is checked against the handle's per-key-group rows.
        """
        op = self.operator(uid)
        state = state_of(op, handle.state, "keyed")
        assert op.key_type is not None
        schema = keyed_schema(state, op.key_type)
        names = None if columns is None else list(dict.fromkeys(["key_group", *columns]))
        if not handle.rows:
            return schema.empty_table().select(names or schema.names)
        first = handle.rows[0].first_row
        count = handle.rows[-1].first_row + handle.rows[-1].row_count - first
        table = self.rows_table(handle.file, schema, first, count, names)
        _check_key_groups(handle.file, table, handle.rows)
        return table

    def keyed_entries(self, uid: str, state_name: str,
                      key_groups: KeyGroupRange | None = None
                      ) -> Iterator[tuple[int, Any, Any, Any]]:
        """``(key_group, key, namespace, stored state)`` of one keyed state, key group order.

        Only the rows of the requested key groups are read, a batch of whole key groups at a
        time. TTL states come back as stored in a backend (``TtlValue`` wrappers).
        """
        op = self.operator(uid)
        state = state_of(op, state_name, "keyed")
        assert op.key_type is not None
        schema = keyed_schema(state, op.key_type)
        read_key = from_arrow(op.key_type)
        read_ns = self.namespace_reader(op, state)
        read_value = from_arrow(value_spec(state))
        read_ttl = from_arrow(ttl_spec(state))
        selected = sorted(((r, h) for st in op.subtasks for h in st.keyed
                           if h.state == state_name for r in h.rows
                           if key_groups is None or r.key_group in key_groups),
                          key=lambda pair: pair[0].key_group)
        start = 0
        while start < len(selected):
            # a batch: consecutive rows of one file, whole key groups, about ENTRY_BATCH_ROWS
            handle = selected[start][1]
            end, rows = start + 1, selected[start][0].row_count
            while (end < len(selected) and selected[end][1].file == handle.file
                   and selected[end][0].first_row
                   == selected[end - 1][0].first_row + selected[end - 1][0].row_count
                   and rows + selected[end][0].row_count <= ENTRY_BATCH_ROWS):
                rows += selected[end][0].row_count
                end += 1
            first = selected[start][0].first_row
            columns = _pydict(self.rows_table(handle.file, schema, first, rows), handle.file)
            stored_groups = columns["key_group"]
            at = 0
            for group, _ in selected[start:end]:
                for i in range(at, at + group.row_count):
                    if stored_groups[i] != group.key_group:
                        raise CorruptCheckpointError(
                            f"{handle.file}: row {first + i} is in key group "
                            f"{stored_groups[i]}, the metadata says {group.key_group}")
                    namespace = (VOID_NAMESPACE if read_ns is None
                                 else read_ns(columns["namespace"][i]))
                    value = read_value(columns["value"][i])
                    ttl = read_ttl(columns["ttl_timestamp"][i]) if state.ttl else None
                    yield group.key_group, read_key(columns["key"][i]), namespace, join_ttl(
                        state, value, ttl)
                at += group.row_count
            start = end

    def operator_entries(self, uid: str, subtask_index: int) -> list[OperatorStateSnapshotEntry]:
        """The operator state one subtask holds, as snapshot entries (for restore)."""
        op = self.operator(uid)
        subtasks = [st for st in op.subtasks if st.index == subtask_index]
        if not subtasks:
            raise CheckpointError(f"operator {op.identity.label!r} has no subtask {subtask_index}")
        out = []
        for handle in subtasks[0].operator:
            state = state_of(op, handle.state, "operator")
            columns = _pydict(self.rows_table(handle.file, operator_schema(state),
                                              handle.first_element, handle.element_count),
                              handle.file)
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
        """An operator state backend holding what one subtask stored."""
        return OperatorStateBackend(self.operator_entries(uid, subtask_index))


def _check_key_groups(relative: str, table: pa.Table, rows: Sequence[KeyGroupRows]) -> None:
    """Refuse ``table`` (the rows ``rows`` give, in order) where a row's key group is not its.

    A :class:`CorruptCheckpointError` names the first such row of the file.
    """
    stored = np.asarray(table.column("key_group").to_numpy(), dtype=np.int64)
    expected = np.repeat([r.key_group for r in rows], [r.row_count for r in rows])
    if len(stored) != len(expected):  # rows_table read the rows asked for: never, but say so
        raise CorruptCheckpointError(f"{relative}: {len(stored)} rows where the metadata "
                                     f"gives {len(expected)}")
    wrong = np.flatnonzero(stored != expected)
    if wrong.size:
        bad = int(wrong[0])
        at = np.concatenate([np.arange(r.first_row, r.first_row + r.row_count)
                             for r in rows])[bad]
        raise CorruptCheckpointError(
            f"{relative}: row {at} is in key group {stored[bad]}, the metadata "
            f"says {expected[bad]}")


def _pydict(table: pa.Table, relative: str) -> dict[str, list[Any]]:
    """A table's columns as Python lists; a value Python cannot hold is corruption."""
    try:
        columns: dict[str, list[Any]] = pydict(table)
    except (pa.ArrowException, ValueError, OverflowError) as exc:  # incl. UnicodeDecodeError
        raise CorruptCheckpointError(f"{relative}: {exc}") from exc
    return columns


def _check_compatible(state: StateMetadata, descriptor: Any) -> None:
    from statecore.keyed_state import StateKind  # restoring: the backend's (issue 45)
    expected = (StateKind(state.kind), state.value_type, state.user_key_type,
                state.namespace_type, state.ttl is not None)
    actual = (descriptor.kind, descriptor.value_type, descriptor.user_key_type,
              descriptor.namespace_type, descriptor.ttl is not None)
    if expected != actual:
        raise CheckpointError(
            f"state {state.name!r} was checkpointed as {state.kind} {state.value_type} "
            f"(ttl: {state.ttl is not None}), the backend declares {descriptor.kind.value} "
            f"{descriptor.value_type} (ttl: {descriptor.ttl is not None})")
