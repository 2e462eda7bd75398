"""Flink's ``CopyOnWriteStateMapSnapshot``: the bucket arrays of a copy-on-write map at one version.

Port of ``flink-runtime/.../runtime/state/heap/CopyOnWriteStateMapSnapshot.java`` (reference
§5.5). :meth:`statecore.copy_on_write_state_map.CopyOnWriteStateMap.snapshot` makes one: it bumps
the map's version and hands over its page lists (:mod:`statecore.bucket_table`); from then on
the map copies every entry and page the snapshot shares before changing it, until the snapshot
is released.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from statecore.bucket_table import slots
from statecore.errors import SnapshotReleasedError
from statecore.state_map import StateEntry, StateMap, StateMapSnapshot
from statecore.state_map_entry import StateMapEntry

__all__ = ["CopyOnWriteStateMapSnapshot", "SnapshotArrays"]

K = TypeVar("K")
N = TypeVar("N")
S = TypeVar("S")


@dataclass(frozen=True, slots=True)
class SnapshotArrays:
    """What a snapshot holds: the page lists of the tables at snapshot time (§5.5).

    Pages are never changed once a snapshot holds them (the map copies a shared page before
    writing), so these lists stand for Flink's ``snapshotData`` array without copying slots.
    """

    primary_pages: list[list[Any]]
    primary_length: int
    incremental_pages: list[list[Any]] | None
    incremental_length: int
    rehash_index: int
    size: int

    @property
    def array_length(self) -> int:
        """Flink's ``snapshotData.length``: ``max(rehashIndex + primary.length, size())``."""
        return max(self.rehash_index + self.primary_length, self.size)

    def heads(self) -> Iterator[Any]:
        """The chain heads in Flink's ``snapshotData`` order (§5.5), without the null padding.

        Not rehashing: the primary table. Rehashing: the primary table from ``rehash_index``,
        then the two ranges of the rehash table that received the migrated buckets.
        """
        if self.incremental_pages is None:
            yield from slots(self.primary_pages, 0, self.primary_length)
            return
        rh = self.rehash_index
        half = self.incremental_length >> 1
        yield from slots(self.primary_pages, rh, self.primary_length)
        yield from slots(self.incremental_pages, 0, rh)
        yield from slots(self.incremental_pages, half, half + rh)


class CopyOnWriteStateMapSnapshot(StateMapSnapshot[K, N, S], Generic[K, N, S]):
    """Port of ``CopyOnWriteStateMapSnapshot``: the bucket arrays at one map version.

    Created on the owner thread by ``CopyOnWriteStateMap.snapshot()``; may be iterated and
    released from another thread. The states it yields must be treated as read-only. It is
    released exactly once: the first ``release()`` gives its version back to the map (which then
    stops copying for it); later calls do nothing; iterating a released snapshot raises
    :class:`SnapshotReleasedError`.
    """

    def __init__(self, owner: StateMap[K, N, S], version: int, arrays: SnapshotArrays,
                 taken_during_rehash: bool, release_version: Callable[[int], None]) -> None:
        """Made by the map (``owner.snapshot()``).

        The map took ``version`` and ``arrays`` under its version lock; ``release_version``
        gives the version back to it.
        """
        self.owner = owner
        self.taken_during_rehash = taken_during_rehash
        self.number_of_entries = arrays.size
        self.snapshot_version = version
        self.array_length = arrays.array_length
        self._arrays: SnapshotArrays | None = arrays
        self._released = False
        self._release_lock = threading.Lock()
        self._release_version = release_version

    def __len__(self) -> int:
        return self.number_of_entries

    @property
    def released(self) -> bool:
        return self._released

    def _checked_arrays(self) -> SnapshotArrays:
        arrays = self._arrays
        if arrays is None:
            raise SnapshotReleasedError(
                f"snapshot version {self.snapshot_version} was released and cannot be read")
        return arrays

    def __iter__(self) -> Iterator[StateEntry[K, N, S]]:
        """Entries in array order, chain by chain (Flink's ``NonTransformSnapshotIterator``)."""
        for head in self._checked_arrays().heads():
            e = head
            while e is not None:
                yield StateEntry(e.key, e.namespace, e.state)
                e = e.next

    def buckets(self) -> list[StateMapEntry | None]:
        """Flink's ``snapshotData`` array: chain heads, null-padded to ``array_length``."""
        heads = list(self._checked_arrays().heads())
        return heads + [None] * (self.array_length - len(heads))

    def release(self) -> None:
        with self._release_lock:
            if self._released:
                return
            self._released = True
            self._release_version(self.snapshot_version)
            self._arrays = None

    def __repr__(self) -> str:
        state = "released" if self._released else f"{self.number_of_entries} entries"
        return f"CopyOnWriteStateMapSnapshot(version={self.snapshot_version}, {state})"
