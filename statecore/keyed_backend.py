"""The heap keyed state backend: one ``StateTable`` per registered state, and its snapshots.

Port of Flink's ``HeapKeyedStateBackend`` (``flink-runtime/.../state/heap/``): a backend owns
the key groups ``key_group_range`` of a job with ``max_parallelism``; ``set_current_key`` puts a
key in context once (its key group from the Java hash of the declared key type, reference §1);
states read the current key and their own namespace.

``snapshot()`` is the synchronous half of a checkpoint (seeds 000, 004): it takes every map's
snapshot (O(buckets / 1024) each for copy-on-write maps, a deep copy for nested maps) and
returns a :class:`KeyedStateSnapshot` that yields, key group by key group and state by state,
the entries as they were at the call, while the backend keeps being written. The asynchronous
half (writing files) is the format's job.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from statecore.copy_on_write_state_map import CopyOnWriteStateMap, HashMode
from statecore.errors import (
    InvalidArgumentError,
    KeyGroupError,
    StateMapError,
    UnknownKeyHashError,
)
from statecore.key_groups import KeyGroupRange, assign_to_key_group
from statecore.keyed_state import (
    STATE_CLASSES,
    AggregatingState,
    IncrementalCleanup,
    KeyedState,
    ListState,
    MapState,
    ReducingState,
    StateDescriptor,
    StateKind,
    ValueState,
)
from statecore.nested_state_map import NestedStateMap
from statecore.serializers import VOID_NAMESPACE, TypeSerializer, resolve_type
from statecore.state_map import StateEntry, StateMap
from statecore.state_table import StateTable, StateTableSnapshot
from statecore.ttl import Clock, TtlContext, TtlValue, system_clock

__all__ = ["HeapKeyedStateBackend", "KeyGroupStateBlock", "KeyedStateSnapshot", "MapKind"]

K = TypeVar("K")
S = TypeVar("S", bound=KeyedState)

MapKind = Literal["copy_on_write", "nested"]


class HeapKeyedStateBackend(Generic[K]):
    """Keyed state of one subtask: the key groups ``key_group_range`` of ``max_parallelism``.

    ``key_type`` decides key groups (``"string"``, ``"int64"``, ...: Flink's Java hash).
    ``map_kind`` chooses :class:`CopyOnWriteStateMap` (default: snapshots that never block) or
    :class:`NestedStateMap` (deep-copy snapshots, the baseline). ``clock`` is TTL's time source
    in milliseconds.
    """

    def __init__(
        self,
        key_type: str | TypeSerializer[K],
        max_parallelism: int,
        key_group_range: KeyGroupRange | None = None,
        *,
        map_kind: MapKind = "copy_on_write",
        hash_mode: HashMode = "fast",
        clock: Clock = system_clock,
    ) -> None:
        if map_kind not in ("copy_on_write", "nested"):
            raise InvalidArgumentError(
                f"unknown map kind {map_kind!r} (known: copy_on_write, nested)")
        self.key_serializer: TypeSerializer[K] = resolve_type(key_type)
        if not self.key_serializer.hashable:  # keys are placed by their Java hash
            raise UnknownKeyHashError(
                f"a backend cannot be keyed by {self.key_serializer.spec}: its key groups "
                f"are not computable ({self.key_serializer.unhashable})")
        self.max_parallelism = max_parallelism
        self.key_group_range = key_group_range or KeyGroupRange(0, max_parallelism - 1)
        if self.key_group_range.end >= max_parallelism:
            raise KeyGroupError(f"{self.key_group_range} exceeds max parallelism "
                                f"{max_parallelism}")
        self.map_kind = map_kind
        self.clock = clock
        self._hash_mode = hash_mode
        self._states: dict[str, KeyedState] = {}
        self._tables: dict[str, StateTable[K, Any, Any]] = {}
        self._key_selection_listeners: list[Callable[[], None]] = []
        self.current_key: K | None = None
        self.current_key_group = -1

    # -- key context ------------------------------------------------------------------------------

    def set_current_key(self, key: K, key_group: int | None = None) -> None:
        """Put ``key`` in context; its key group is computed once here (reference §1.2).

        ``key_group``, when given, is the caller's ``assign_to_key_group(key,
        max_parallelism, key_serializer)``, computed already (a job routes by it); it is
        trusted, not computed again. A key whose group is outside this backend's range is
        refused with Flink's explanation.
        """
        if key is None:
            raise InvalidArgumentError("Assigned key must not be null!")
        if key_group is None:
            key_group = assign_to_key_group(key, self.max_parallelism, self.key_serializer)
        if key_group not in self.key_group_range:
            # leave no key in context: a caller that goes on must not write to the previous key
            self.current_key = None
            self.current_key_group = -1
            raise KeyGroupError(
                f"Key group {key_group} is not in {self.key_group_range}. Unless you're "
                "directly using low level state access APIs, this is most likely caused by "
                "non-deterministic shuffle key (hashCode and equals implementation).")
        self.current_key = key
        self.current_key_group = key_group
        for listener in self._key_selection_listeners:
            listener()

    # -- registration ------------------------------------------------------------------------------

    def get_state(self, descriptor: StateDescriptor) -> KeyedState:
        """The state for ``descriptor``, registered on first use.

        Registering the same name again returns the same state; with a different kind, type or
        TTL it is refused (Flink refuses incompatible state re-registration).
        """
        existing = self._states.get(descriptor.name)
        if existing is not None:
            if not existing.descriptor.is_compatible_with(descriptor):
                raise StateMapError(
                    f"state {descriptor.name!r} is registered as {existing.descriptor}, "
                    f"which is incompatible with {descriptor}")
            return existing
        table: StateTable[K, Any, Any] = StateTable(
            self.key_group_range, self.max_parallelism, self.key_serializer,
            self._map_factory(descriptor))
        ttl = None if descriptor.ttl is None else TtlContext(descriptor.ttl, self.clock)
        cleanup_config = None if descriptor.ttl is None else (
            descriptor.ttl.effective_incremental_cleanup)
        cleanup: IncrementalCleanup[Any] | None = None
        state_class = STATE_CLASSES[descriptor.kind]
        state = state_class(self, descriptor, table, ttl, None)
        if cleanup_config is not None:
            cleanup = IncrementalCleanup(table, state, cleanup_config.cleanup_size)
            state._on_access = cleanup.state_accessed
            if cleanup_config.run_for_every_record:
                self._key_selection_listeners.append(cleanup.state_accessed)
        self._states[descriptor.name] = state
        self._tables[descriptor.name] = table
        return state

    def get_value_state(self, descriptor: StateDescriptor) -> ValueState:
        return self._typed(descriptor, ValueState)

    def get_list_state(self, descriptor: StateDescriptor) -> ListState:
        return self._typed(descriptor, ListState)

    def get_map_state(self, descriptor: StateDescriptor) -> MapState:
        return self._typed(descriptor, MapState)

    def get_reducing_state(self, descriptor: StateDescriptor) -> ReducingState:
        return self._typed(descriptor, ReducingState)

    def get_aggregating_state(self, descriptor: StateDescriptor) -> AggregatingState:
        return self._typed(descriptor, AggregatingState)

    def _typed(self, descriptor: StateDescriptor, cls: type[S]) -> S:
        state = self.get_state(descriptor)
        if not isinstance(state, cls):
            raise InvalidArgumentError(
                f"state {descriptor.name!r} is {descriptor.kind.value} state, not "
                f"{cls.__name__}")
        return state

    def _map_factory(self, descriptor: StateDescriptor) -> Callable[[], StateMap[K, Any, Any]]:
        serializer = _stored_state_serializer(descriptor)
        if self.map_kind == "nested":
            return lambda: NestedStateMap(serializer)
        hash_mode = self._hash_mode
        return lambda: CopyOnWriteStateMap(state_serializer=serializer, hash_mode=hash_mode)

    @property
    def descriptors(self) -> list[StateDescriptor]:
        return [self._states[name].descriptor for name in sorted(self._states)]

    def table(self, state_name: str) -> StateTable[K, Any, Any]:
        try:
            return self._tables[state_name]
        except KeyError:
            raise InvalidArgumentError(f"no state named {state_name!r} is registered") from None

    def keys(self, state_name: str, namespace: Any = VOID_NAMESPACE) -> Iterator[K]:
        """Port of ``getKeys``: the keys with state in ``namespace``, key group by key group."""
        for _, state_map in self.table(state_name).items_by_key_group():
            yield from state_map.keys(namespace)

    # -- snapshots -----------------------------------------------------------------------------

    def snapshot(self) -> KeyedStateSnapshot:
        """The synchronous half of a checkpoint: every map's snapshot, taken now.

        Consume the result (on any thread) while this backend keeps being written; it releases
        each key group's map snapshots once that group is consumed, and all of them on
        ``close()``.
        """
        names = sorted(self._states)
        tables = {name: self._tables[name].snapshot() for name in names}
        return KeyedStateSnapshot(
            key_group_range=self.key_group_range,
            max_parallelism=self.max_parallelism,
            key_type=self.key_serializer.spec,
            states=tuple(self._states[name] for name in names),
            tables=tables,
            clock=self.clock,
        )


@dataclass(frozen=True, slots=True)
class KeyGroupStateBlock:
    """One state's entries in one key group, as stored (TTL values as ``TtlValue``)."""

    key_group: int
    state_name: str
    entries: tuple[StateEntry[Any, Any, Any], ...]


class KeyedStateSnapshot:
    """What ``HeapKeyedStateBackend.snapshot()`` returns: entries per key group and state.

    Iterating yields :class:`KeyGroupStateBlock` in ascending key group, then state name order.
    A key group's map snapshots are released as soon as the iteration moves past that group;
    ``close()`` (or leaving a ``with`` block, or abandoning the iteration) releases the rest.
    States with full-snapshot TTL cleanup leave out what is expired at write time (§9.5, with
    Flink's list rule). Iterate it once.
    """

    def __init__(self, *, key_group_range: KeyGroupRange, max_parallelism: int, key_type: str,
                 states: tuple[KeyedState, ...],
                 tables: dict[str, StateTableSnapshot[Any, Any, Any]], clock: Clock) -> None:
        self.key_group_range = key_group_range
        self.max_parallelism = max_parallelism
        self.key_type = key_type
        self.descriptors = tuple(s.descriptor for s in states)
        self._states = states
        self._tables = tables
        self._clock = clock
        self._consumed = False

    def __iter__(self) -> Iterator[KeyGroupStateBlock]:
        if self._consumed:
            raise StateMapError("a keyed snapshot can be iterated once")
        self._consumed = True
        try:
            for key_group in self.key_group_range:
                for state in self._states:
                    yield KeyGroupStateBlock(
                        key_group, state.name, tuple(self._entries(state, key_group)))
                for table in self._tables.values():
                    table.release_key_group(key_group)
        finally:
            self.close()

    def _entries(self, state: KeyedState,
                 key_group: int) -> Iterator[StateEntry[Any, Any, Any]]:
        entries = self._tables[state.name].for_key_group(key_group)
        ttl = state.descriptor.ttl
        if ttl is None or not ttl.cleanup_full_snapshot:
            yield from entries
            return
        for entry in entries:  # the time is read per entry, at write time (§9.5)
            kept = state.snapshot_filter(entry.state, self._clock())
            if kept is not None:
                yield entry if kept is entry.state else StateEntry(entry.key, entry.namespace,
                                                                    kept)

    def close(self) -> None:
        """Release every map snapshot still held (exactly once each; safe to call again)."""
        for table in self._tables.values():
            table.release()

    @property
    def released(self) -> bool:
        return all(table.for_key_group(kg).released
                   for table in self._tables.values() for kg in self.key_group_range)

    def __enter__(self) -> KeyedStateSnapshot:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _stored_state_serializer(descriptor: StateDescriptor) -> TypeSerializer[Any]:
    """The serializer of what the maps store for ``descriptor`` (its ``copy`` matters here)."""
    element = descriptor.value_serializer
    ttl = descriptor.ttl is not None

    def copy_element(value: Any) -> Any:
        if ttl:
            return TtlValue(element.copy(value.user_value), value.last_access_timestamp)
        return element.copy(value)

    def copy(stored: Any) -> Any:
        if descriptor.kind is StateKind.LIST:
            return [copy_element(v) for v in stored]
        if descriptor.kind is StateKind.MAP:
            return {k: copy_element(v) for k, v in stored.items()}
        return copy_element(stored)

    return TypeSerializer(f"state<{descriptor.kind.value}>", lambda _v: 0, copy)
