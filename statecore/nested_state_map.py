"""The baseline state map: a dict of dicts with synchronous deep-copy snapshots.

Port in spirit of Flink's ``NestedStateMap`` (``namespace -> key -> state``), with the snapshot
made the only safe way a plain dict allows: a deep copy taken synchronously, which blocks the
owner for O(entries x state size). ``CopyOnWriteStateMap`` exists to avoid exactly that; the
benchmarks (``bench/``) measure the two side by side.
"""

from __future__ import annotations

import copy as _copy
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from statecore.errors import SnapshotReleasedError
from statecore.serializers import TypeSerializer
from statecore.state_map import StateEntry, StateIncrementalVisitor, StateMap, StateMapSnapshot

__all__ = ["NestedStateMap", "NestedStateMapSnapshot"]

K = TypeVar("K")
N = TypeVar("N")
S = TypeVar("S")
T = TypeVar("T")


class NestedStateMap(StateMap[K, N, S], Generic[K, N, S]):
    """``namespace -> key -> state`` in two levels of dicts; empty namespaces are dropped."""

    def __init__(self, state_serializer: TypeSerializer[S] | None = None) -> None:
        self._copy: Callable[[Any], Any] = (
            _copy.deepcopy if state_serializer is None else state_serializer.copy)
        self._maps: dict[N, dict[K, S]] = {}
        self._size = 0

    def get(self, key: K, namespace: N) -> S | None:
        keyed = self._maps.get(namespace)
        return None if keyed is None else keyed.get(key)

    def contains(self, key: K, namespace: N) -> bool:
        keyed = self._maps.get(namespace)
        return keyed is not None and key in keyed

    def put(self, key: K, namespace: N, state: S) -> None:
        keyed = self._maps.get(namespace)
        if keyed is None:
            keyed = self._maps[namespace] = {}
        if key not in keyed:
            self._size += 1
        keyed[key] = state

    def put_and_get_old(self, key: K, namespace: N, state: S) -> S | None:
        old = self.get(key, namespace)
        self.put(key, namespace, state)
        return old

    def remove(self, key: K, namespace: N) -> None:
        self.remove_and_get_old(key, namespace)

    def remove_and_get_old(self, key: K, namespace: N) -> S | None:
        keyed = self._maps.get(namespace)
        if keyed is None or key not in keyed:
            return None
        old = keyed.pop(key)
        self._size -= 1
        if not keyed:
            del self._maps[namespace]
        return old

    def transform(
        self, key: K, namespace: N, value: T, transformation: Callable[[S | None, T], S]
    ) -> None:
        self.put(key, namespace, transformation(self.get(key, namespace), value))

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[StateEntry[K, N, S]]:
        for namespace, keyed in self._maps.items():
            for key, state in keyed.items():
                yield StateEntry(key, namespace, state)

    def keys(self, namespace: N) -> Iterator[K]:
        return iter(list(self._maps.get(namespace, ())))

    def size_of_namespace(self, namespace: N) -> int:
        return len(self._maps.get(namespace, ()))

    def incremental_visitor(
        self, recommended_max_positions: int
    ) -> StateIncrementalVisitor[K, N, S]:
        """Batches of at most ``recommended_max_positions`` entries, namespace by namespace."""
        return _NestedIncrementalVisitor(self, recommended_max_positions)

    def snapshot(self) -> NestedStateMapSnapshot[K, N, S]:
        """A synchronous deep copy of every state: O(entries), blocks the owner meanwhile."""
        copy = self._copy
        data = {ns: {k: copy(s) for k, s in keyed.items()} for ns, keyed in self._maps.items()}
        return NestedStateMapSnapshot(data, self._size)


class _NestedIncrementalVisitor(StateIncrementalVisitor[K, N, S]):
    """Walks the ``(namespace, key)`` pairs present when it was made, in batches.

    Pairs removed meanwhile are skipped; pairs added meanwhile are left for the next visitor
    (the cleanup makes a new one when this one is exhausted).
    """

    def __init__(self, owner: NestedStateMap[K, N, S], batch: int) -> None:
        self._map = owner
        self._batch = max(1, batch)
        self._pending = [(ns, k) for ns, keyed in owner._maps.items() for k in keyed]
        self._pending.reverse()

    def has_next(self) -> bool:
        return bool(self._pending)

    def next_entries(self) -> list[StateEntry[K, N, S]]:
        entries: list[StateEntry[K, N, S]] = []
        while self._pending and len(entries) < self._batch:
            namespace, key = self._pending.pop()
            keyed = self._map._maps.get(namespace)
            if keyed is not None and key in keyed:
                entries.append(StateEntry(key, namespace, keyed[key]))
        return entries

    def remove(self, entry: StateEntry[K, N, S]) -> None:
        self._map.remove(entry.key, entry.namespace)

    def update(self, entry: StateEntry[K, N, S], new_state: S) -> None:
        self._map.put(entry.key, entry.namespace, new_state)


class NestedStateMapSnapshot(StateMapSnapshot[K, N, S], Generic[K, N, S]):
    """A private deep copy; releasing it drops the copy (exactly once, later calls no-ops)."""

    def __init__(self, data: dict[N, dict[K, S]], size: int) -> None:
        self._data: dict[N, dict[K, S]] | None = data
        self._size = size

    def __iter__(self) -> Iterator[StateEntry[K, N, S]]:
        if self._data is None:
            raise SnapshotReleasedError("snapshot was released and cannot be read")
        for namespace, keyed in self._data.items():
            for key, state in keyed.items():
                yield StateEntry(key, namespace, state)

    def __len__(self) -> int:
        return self._size

    @property
    def released(self) -> bool:
        return self._data is None

    def release(self) -> None:
        self._data = None
