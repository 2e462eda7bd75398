"""Read-only views of a ``CopyOnWriteStateMap``'s internals, for ``statectl trace`` and tests.

The map exposes nothing else of its insides: these frozen dataclasses are built on demand by
:func:`build_layout` from the map's tables and open snapshots, and share no mutable structure
with them (states are the same objects and must be treated as read-only).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Chains", "EntryView", "MapLayout", "SnapshotLayout", "build_layout"]


@dataclass(frozen=True, slots=True)
class EntryView:
    """Read-only view of one entry for layouts (``statectl trace`` and the oracle tests)."""

    key: Any
    namespace: Any
    state: Any
    hash: int
    entry_version: int
    state_version: int
    #: versions of the open snapshots whose arrays reach this very entry object
    shared_with: tuple[int, ...]
    #: whether the live map still reaches this entry object (false: only a snapshot's copy)
    live: bool


#: (bucket index, entries head to tail) for the non-empty buckets of one array.
Chains = tuple[tuple[int, tuple[EntryView, ...]], ...]


@dataclass(frozen=True, slots=True)
class SnapshotLayout:
    """Layout of one open snapshot: its version and the chains of its bucket-array copy."""

    version: int
    array_length: int
    number_of_entries: int
    taken_during_rehash: bool
    chains: Chains


@dataclass(frozen=True, slots=True)
class MapLayout:
    """Read-only view of a :class:`CopyOnWriteStateMap`'s internals after some operation.

    ``incremental_rehash_table_length`` is 2 when idle, as Flink's ``EMPTY_TABLE``. Chains are
    ``(bucket index, entries head to tail)`` for non-empty buckets only.
    """

    size: int
    primary_table_length: int
    incremental_rehash_table_length: int
    rehashing: bool
    rehash_index: int
    state_map_version: int
    highest_required_snapshot_version: int
    snapshot_versions: tuple[int, ...]
    primary_table_size: int
    incremental_rehash_table_size: int
    threshold: int
    primary_chains: Chains
    incremental_rehash_chains: Chains
    snapshots: tuple[SnapshotLayout, ...]



def _walk(head: Any) -> Any:
    e = head
    while e is not None:
        yield e
        e = e.next


def build_layout(
    *,
    size: int,
    primary: Sequence[Any],
    primary_length: int,
    incremental: Sequence[Any] | None,
    incremental_length: int,
    rehash_index: int,
    state_map_version: int,
    highest_required: int,
    snapshot_versions: tuple[int, ...],
    primary_size: int,
    incremental_size: int,
    threshold: int,
    snapshots: Sequence[Any],
    with_chains: bool,
    hash_of: Callable[[Any], int],
) -> MapLayout:
    """Assemble a :class:`MapLayout`; entries are matched to snapshots by object identity.

    ``hash_of(entry)`` is the entry's composite hash (entries do not store it).
    """
    sharing: dict[int, list[int]] = {}
    live_ids: set[int] = set()
    if with_chains:
        for snap in snapshots:
            for head in snap.buckets():
                for e in _walk(head):
                    sharing.setdefault(id(e), []).append(snap.snapshot_version)
        for table in (primary, incremental or ()):
            for head in table:
                live_ids.update(id(e) for e in _walk(head))

    def chains_of(table: Sequence[Any]) -> Chains:
        if not with_chains:
            return ()
        return tuple(
            (idx, tuple(EntryView(e.key, e.namespace, e.state, hash_of(e), e.entry_version,
                                  e.state_version, tuple(sharing.get(id(e), ())),
                                  id(e) in live_ids) for e in _walk(head)))
            for idx, head in enumerate(table) if head is not None)

    return MapLayout(
        size=size, primary_table_length=primary_length,
        incremental_rehash_table_length=incremental_length,
        rehashing=incremental is not None, rehash_index=rehash_index,
        state_map_version=state_map_version, highest_required_snapshot_version=highest_required,
        snapshot_versions=snapshot_versions, primary_table_size=primary_size,
        incremental_rehash_table_size=incremental_size, threshold=threshold,
        primary_chains=chains_of(primary), incremental_rehash_chains=chains_of(incremental or ()),
        snapshots=tuple(
            SnapshotLayout(s.snapshot_version, s.array_length, s.number_of_entries,
                           s.taken_during_rehash, chains_of(s.buckets()))
            for s in snapshots) if with_chains else ())
