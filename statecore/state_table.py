"""``StateTable``: one state map per key group of a backend's ``KeyGroupRange``.

Port of Flink's ``StateTable`` / ``CopyOnWriteStateTable`` (reference §5, first paragraphs): the
maps are indexed by ``key_group - key_group_range.start``; a key whose key group falls outside
the range is refused with Flink's explanation (a non-deterministic key).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from statecore.copy_on_write_state_map import CopyOnWriteStateMap
from statecore.errors import KeyGroupError
from statecore.key_groups import KeyGroupRange, assign_to_key_group
from statecore.serializers import VOID_NAMESPACE, TypeSerializer, resolve_type
from statecore.state_map import StateEntry, StateIncrementalVisitor, StateMap, StateMapSnapshot

__all__ = ["StateTable", "StateTableSnapshot", "StateTableVisitor"]

K = TypeVar("K")
N = TypeVar("N")
S = TypeVar("S")
T = TypeVar("T")


class StateTable(Generic[K, N, S]):
    """State maps for the key groups ``key_group_range`` of a job with ``max_parallelism``.

    ``key_type`` decides key groups by its Java hash (so a key lands where Flink puts it);
    ``map_factory`` makes one map per key group (default: :class:`CopyOnWriteStateMap`).
    Every operation takes the key's group from ``key_group`` when the caller already computed
    it (as Flink's backend does once per ``set_current_key``), else computes it.
    """

    def __init__(
        self,
        key_group_range: KeyGroupRange,
        max_parallelism: int,
        key_type: str | TypeSerializer[K],
        map_factory: Callable[[], StateMap[K, N, S]] | None = None,
    ) -> None:
        if key_group_range.end >= max_parallelism:
            raise KeyGroupError(
                f"{key_group_range} exceeds max parallelism {max_parallelism}")
        if map_factory is None:
            map_factory = CopyOnWriteStateMap
        self.key_group_range = key_group_range
        self.max_parallelism = max_parallelism
        self.key_serializer: TypeSerializer[K] = resolve_type(key_type)
        self._maps: list[StateMap[K, N, S]] = [map_factory() for _ in key_group_range]

    def key_group_of(self, key: K) -> int:
        return assign_to_key_group(key, self.max_parallelism, self.key_serializer)

    def map_for_key_group(self, key_group: int) -> StateMap[K, N, S]:
        """The map of one key group; :class:`KeyGroupError` outside the range."""
        start = self.key_group_range.start
        if not start <= key_group <= self.key_group_range.end:
            raise KeyGroupError(
                f"Key group {key_group} is not in {self.key_group_range}. Unless you're "
                "directly using low level state access APIs, this is most likely caused by "
                "non-deterministic shuffle key (hashCode and equals implementation).")
        return self._maps[key_group - start]

    def _map(self, key: K, namespace: Any, key_group: int | None) -> StateMap[K, N, S]:
        StateMap._check_key_and_namespace(key, namespace)
        return self.map_for_key_group(self.key_group_of(key) if key_group is None else key_group)

    def get(self, key: K, namespace: N = VOID_NAMESPACE, key_group: int | None = None  # type: ignore[assignment]
            ) -> S | None:
        return self._map(key, namespace, key_group).get(key, namespace)

    def contains(self, key: K, namespace: N = VOID_NAMESPACE, key_group: int | None = None  # type: ignore[assignment]
                 ) -> bool:
        return self._map(key, namespace, key_group).contains(key, namespace)

    def put(self, key: K, namespace: N, state: S, key_group: int | None = None) -> None:
        self._map(key, namespace, key_group).put(key, namespace, state)

    def put_and_get_old(self, key: K, namespace: N, state: S,
                        key_group: int | None = None) -> S | None:
        return self._map(key, namespace, key_group).put_and_get_old(key, namespace, state)

    def remove(self, key: K, namespace: N, key_group: int | None = None) -> None:
        self._map(key, namespace, key_group).remove(key, namespace)

    def remove_and_get_old(self, key: K, namespace: N, key_group: int | None = None) -> S | None:
        return self._map(key, namespace, key_group).remove_and_get_old(key, namespace)

    def transform(self, key: K, namespace: N, value: T,
                  transformation: Callable[[S | None, T], S], key_group: int | None = None) -> None:
        self._map(key, namespace, key_group).transform(key, namespace, value, transformation)

    def __len__(self) -> int:
        return sum(len(m) for m in self._maps)

    def __iter__(self) -> Iterator[StateEntry[K, N, S]]:
        for state_map in self._maps:
            yield from state_map

    def items_by_key_group(self) -> Iterator[tuple[int, StateMap[K, N, S]]]:
        return zip(self.key_group_range, self._maps, strict=True)

    def incremental_visitor(self, recommended_max_positions: int) -> StateTableVisitor[K, N, S]:
        """Port of ``StateTable.getStateIncrementalVisitor``: the key groups' maps in order."""
        return StateTableVisitor(self._maps, recommended_max_positions)

    def snapshot(self) -> StateTableSnapshot[K, N, S]:
        """Snapshots of every key group's map (O(buckets) each for copy-on-write maps)."""
        return StateTableSnapshot(
            {kg: m.snapshot() for kg, m in self.items_by_key_group()})


class StateTableVisitor(StateIncrementalVisitor[K, N, S]):
    """Chains of every key group's map, key group by key group (§5.6, §9.4)."""

    def __init__(self, maps: list[StateMap[K, N, S]], recommended_max_positions: int) -> None:
        self._maps = maps
        self._max = recommended_max_positions
        self._index = 0
        self._visitor: StateIncrementalVisitor[K, N, S] | None = None

    def has_next(self) -> bool:
        while self._visitor is None or not self._visitor.has_next():
            if self._index == len(self._maps):
                return False
            self._visitor = self._maps[self._index].incremental_visitor(self._max)
            self._index += 1
        return True

    def next_entries(self) -> list[StateEntry[K, N, S]]:
        if not self.has_next():
            return []
        assert self._visitor is not None
        return self._visitor.next_entries()

    def remove(self, entry: StateEntry[K, N, S]) -> None:
        assert self._visitor is not None
        self._visitor.remove(entry)

    def update(self, entry: StateEntry[K, N, S], new_state: S) -> None:
        assert self._visitor is not None
        self._visitor.update(entry, new_state)


class StateTableSnapshot(Generic[K, N, S]):
    """Per-key-group map snapshots; each can be released on its own, as soon as it is written.

    ``release()`` releases whatever is still open (exactly once per key group).
    """

    def __init__(self, snapshots: dict[int, StateMapSnapshot[K, N, S]]) -> None:
        self._snapshots = snapshots

    @property
    def key_groups(self) -> list[int]:
        return sorted(self._snapshots)

    def for_key_group(self, key_group: int) -> StateMapSnapshot[K, N, S]:
        try:
            return self._snapshots[key_group]
        except KeyError:
            raise KeyGroupError(f"key group {key_group} is not in this snapshot") from None

    def release_key_group(self, key_group: int) -> None:
        self.for_key_group(key_group).release()

    def release(self) -> None:
        for snap in self._snapshots.values():
            snap.release()

    def __enter__(self) -> StateTableSnapshot[K, N, S]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()
