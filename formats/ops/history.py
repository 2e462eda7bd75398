"""One key across snapshots (``statectl history``): its state in each, oldest first, changes marked.

The snapshots are every complete checkpoint and savepoint found in the directories given, as
``statectl query DIR`` finds its databases (:func:`formats.ops.catalog.snapshot_locations`): a
statectl state directory (``chk-*``, ``savepoint-*``), a Flink job's checkpoint directory
(``chk-*``, also under the job-ID directory Flink puts them in), a directory of Flink
savepoints, any mix, or snapshots themselves. They are ordered by checkpoint id (one sequence
per job, for Flink as for statectl: a savepoint takes the next id), then by when they were
written.

Each snapshot is read as ``inspect --key`` reads it (:func:`formats.ops.state_scan.lookup`): in
statectl's format only the rows of the key's key group; in a Flink snapshot only that key
group is decoded (its bytes of a heap or canonical stream); the SST files RocksDB incremental
checkpoints share (in the job's ``shared/``) are read once for all of them
(:func:`formats.open.shared_files_read_once`). An incomplete snapshot (a directory without its
metadata file) is not one.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from formats.model.checkpoint import Checkpoint
from formats.open import METADATA_FILES, shared_files_read_once
from formats.ops.catalog import snapshot_locations
from formats.ops.diff import canonical
from formats.ops.state_scan import Entry, lookup
from statecore.checkpoint import OperatorIdentity
from statecore.errors import InvalidArgumentError
from statecore.serializers import VOID_NAMESPACE

__all__ = ["KeyHistory", "SnapshotState", "StateValue", "find_snapshots", "key_history"]

@dataclass(frozen=True)
class StateValue:
    """The key's value in one state and namespace of one snapshot, and how it changed.

    ``change``: ``added`` (not in the snapshot before), ``changed``, ``same``, or ``removed``
    (in the snapshot before, not in this one: ``value`` is then the value it had).
    """

    operator: OperatorIdentity
    state: str
    namespace: object
    value: object
    ttl_timestamp: object
    change: str


@dataclass(frozen=True)
class SnapshotState:
    """One snapshot: what it is and the key's values in it."""

    location: str
    checkpoint_id: int
    kind: str
    format: str
    created_ms: int
    values: tuple[StateValue, ...]

    @property
    def changed(self) -> bool:
        return any(v.change != "same" for v in self.values)


@dataclass(frozen=True)
class KeyHistory:
    """The key's state in every snapshot, oldest first."""

    key: str
    snapshots: tuple[SnapshotState, ...]


def find_snapshots(directories: Sequence[str]) -> list[str]:
    """Every complete snapshot in (or at) ``directories``: their locations, as given + name.

    Found as ``statectl query DIR…`` finds its databases, by listing alone
    (:func:`formats.ops.catalog.snapshot_locations`); none is an error.
    """
    found = snapshot_locations(directories)
    if not found:
        raise InvalidArgumentError(
            f"no complete checkpoint or savepoint in {', '.join(directories)} (a snapshot, or "
            f"a directory holding snapshots: directories with {' or '.join(METADATA_FILES)})")
    return found


_Found = dict[tuple[str, str, object], tuple[Entry, OperatorIdentity]]


def _values(checkpoint: Checkpoint, key: str, states: Collection[str] | None,
            namespace: str | None) -> _Found:
    """``(operator id, state, namespace) -> (entry, operator)`` of the key in ``checkpoint``."""
    found = lookup(checkpoint, key, states, namespace)
    identities = {op.uid: op.identity for op in checkpoint.metadata.operators}
    values: _Found = {}
    for entries in found.states:
        identity = identities[entries.uid]
        for entry in entries.entries:
            values[identity.id, entries.state, canonical(entry.namespace)] = (entry, identity)
    return values


def _same(a: Entry, b: Entry) -> bool:
    return bool(canonical(a.value) == canonical(b.value)
                and canonical(a.ttl_timestamp) == canonical(b.ttl_timestamp))


def key_history(locations: Sequence[str], key: str, open_snapshot: Callable[[str], Checkpoint],
                *, states: Collection[str] | None = None, namespace: str | None = None,
                progress: Callable[[int, int], None] | None = None) -> KeyHistory:
    """The state of ``key`` (as typed: see ``inspect --key``) in each snapshot at ``locations``.

    ``open_snapshot`` opens one (the command's options: pickles, uids). ``states`` and
    ``namespace`` select as ``inspect --key --state --namespace`` does.
    """
    read = []
    with shared_files_read_once():  # RocksDB incremental checkpoints share SST files
        for done, location in enumerate(locations):
            checkpoint = open_snapshot(location)
            metadata = checkpoint.metadata
            read.append((metadata.checkpoint_id, metadata.created_ms, location,
                         checkpoint.format_name, metadata_kind(checkpoint),
                         _values(checkpoint, key, states, namespace)))
            if progress is not None:
                progress(done + 1, len(locations))
    read.sort(key=lambda r: (r[0], r[1], r[2]))
    snapshots = []
    before: _Found = {}
    for checkpoint_id, created_ms, location, format_name, kind, now in read:
        values = []
        for where in sorted(now.keys() | before.keys(), key=repr):
            state = where[1]
            if where in now:
                entry, identity = now[where]
                previous = before.get(where)
                change = ("added" if previous is None
                          else "same" if _same(previous[0], entry) else "changed")
            else:
                (entry, identity), change = before[where], "removed"
            values.append(StateValue(identity, state, entry.namespace, entry.value,
                                     entry.ttl_timestamp, change))
        snapshots.append(SnapshotState(location, checkpoint_id, kind, format_name, created_ms,
                                       tuple(values)))
        before = now
    return KeyHistory(key, tuple(snapshots))


def metadata_kind(checkpoint: Checkpoint) -> str:
    """``checkpoint`` or ``savepoint``."""
    return str(checkpoint.metadata.kind.value)


def namespace_text(namespace: object) -> object:
    """The void namespace as ``None`` (JSON ``null``), others as they are."""
    return None if namespace is VOID_NAMESPACE else namespace
