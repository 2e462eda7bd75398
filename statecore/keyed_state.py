"""Keyed state: descriptors and the value, list, map, reducing and aggregating states.

Ports of Flink's ``StateDescriptor`` family, the heap states (``HeapValueState``,
``HeapListState``, ``HeapMapState``, ``HeapReducingState``, ``HeapAggregatingState``) and their
TTL decorators (``TtlValueState``, ``TtlListState``, ``TtlMapState``, ``TtlReducingState``,
``TtlAggregatingState`` with ``TtlReduceFunction`` / ``TtlAggregateFunction``), reference §9.

A state object belongs to one backend and reads the backend's current key (and its key group,
computed once per ``set_current_key``); the namespace is the state's own, set per call with
``set_current_namespace`` (windows). What the maps hold per key and namespace:

==============  =====================================  ===================================
kind            without TTL                            with TTL (§9.2)
==============  =====================================  ===================================
value           the value                              ``TtlValue(value, ts)``
list            ``list`` of elements                   ``list`` of ``TtlValue(element, ts)``
map             ``dict`` user key -> value             ``dict`` user key -> ``TtlValue``
reducing        the reduced value                      ``TtlValue(value, ts)``
aggregating     the accumulator                        ``TtlValue(accumulator, ts)``
==============  =====================================  ===================================

Folding state is not offered: Flink deprecated it in 1.4 and removed it in 2.0; an aggregating
state with an ``AggregateFunction`` does the same job.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Generic, Protocol, TypeVar

from statecore.errors import InvalidArgumentError
from statecore.serializers import VOID_NAMESPACE, TypeSerializer, parse_type
from statecore.state_map import StateMap
from statecore.state_table import StateTable
from statecore.ttl import TtlConfig, TtlContext, TtlValue, expired

__all__ = [
    "AggregateFunction",
    "AggregatingState",
    "CurrentKey",
    "KeyedState",
    "ListState",
    "MapState",
    "ReducingState",
    "StateDescriptor",
    "StateKind",
    "ValueState",
    "aggregating_state",
    "list_state",
    "map_state",
    "reducing_state",
    "value_state",
]

V = TypeVar("V")
IN = TypeVar("IN", contravariant=True)
ACC = TypeVar("ACC")
OUT = TypeVar("OUT", covariant=True)


class StateKind(Enum):
    """The keyed state kinds (Flink's ``StateDescriptor.Type``, less the removed folding)."""

    VALUE = "value"
    LIST = "list"
    MAP = "map"
    REDUCING = "reducing"
    AGGREGATING = "aggregating"


class AggregateFunction(Protocol[IN, ACC, OUT]):
    """Port of Flink's ``AggregateFunction``: an accumulator built up from inputs."""

    def create_accumulator(self) -> ACC: ...

    def add(self, value: IN, accumulator: ACC) -> ACC: ...

    def get_result(self, accumulator: ACC) -> OUT: ...

    def merge(self, a: ACC, b: ACC) -> ACC: ...


@dataclass(frozen=True)
class StateDescriptor:
    """Names and types one keyed state (port of ``StateDescriptor`` and its subclasses).

    ``value_type`` is the value's type for value and reducing state, the element type for list
    state, the value type for map state (``user_key_type`` is the map's key type) and the
    accumulator type for aggregating state. Types are specs (:func:`parse_type`); ``any`` keeps
    arbitrary Python values in memory. Use the factory functions (:func:`value_state`, ...).
    """

    name: str
    kind: StateKind
    value_type: str = "any"
    user_key_type: str | None = None
    namespace_type: str = "void"
    ttl: TtlConfig | None = None
    reduce_function: Callable[[Any, Any], Any] | None = field(default=None, compare=False)
    aggregate_function: AggregateFunction[Any, Any, Any] | None = field(
        default=None, compare=False)

    def __post_init__(self) -> None:
        if not self.name:
            raise InvalidArgumentError("a state needs a non-empty name")
        parse_type(self.value_type)
        parse_type(self.namespace_type)
        if self.kind is StateKind.MAP:
            if self.user_key_type is None:
                raise InvalidArgumentError(f"map state {self.name!r} needs a user key type")
            parse_type(self.user_key_type)
        elif self.user_key_type is not None:
            raise InvalidArgumentError(f"only map state has a user key type ({self.name!r})")
        if self.kind is StateKind.REDUCING and self.reduce_function is None:
            raise InvalidArgumentError(f"reducing state {self.name!r} needs a reduce function")
        if self.kind is StateKind.AGGREGATING and self.aggregate_function is None:
            raise InvalidArgumentError(
                f"aggregating state {self.name!r} needs an aggregate function")

    @property
    def value_serializer(self) -> TypeSerializer[Any]:
        return parse_type(self.value_type)

    def is_compatible_with(self, other: StateDescriptor) -> bool:
        """Same name, kind, types and TTL: what re-registering a state requires."""
        return (self.name, self.kind, self.value_type, self.user_key_type, self.namespace_type,
                self.ttl) == (other.name, other.kind, other.value_type, other.user_key_type,
                              other.namespace_type, other.ttl)


def value_state(name: str, value_type: str = "any", *, namespace_type: str = "void",
                ttl: TtlConfig | None = None) -> StateDescriptor:
    return StateDescriptor(name, StateKind.VALUE, value_type, namespace_type=namespace_type,
                           ttl=ttl)


def list_state(name: str, element_type: str = "any", *, namespace_type: str = "void",
               ttl: TtlConfig | None = None) -> StateDescriptor:
    return StateDescriptor(name, StateKind.LIST, element_type, namespace_type=namespace_type,
                           ttl=ttl)


def map_state(name: str, user_key_type: str, value_type: str = "any", *,
              namespace_type: str = "void", ttl: TtlConfig | None = None) -> StateDescriptor:
    return StateDescriptor(name, StateKind.MAP, value_type, user_key_type,
                           namespace_type=namespace_type, ttl=ttl)


def reducing_state(name: str, reduce_function: Callable[[Any, Any], Any],
                   value_type: str = "any", *, namespace_type: str = "void",
                   ttl: TtlConfig | None = None) -> StateDescriptor:
    return StateDescriptor(name, StateKind.REDUCING, value_type, namespace_type=namespace_type,
                           ttl=ttl, reduce_function=reduce_function)


def aggregating_state(name: str, aggregate_function: AggregateFunction[Any, Any, Any],
                      accumulator_type: str = "any", *, namespace_type: str = "void",
                      ttl: TtlConfig | None = None) -> StateDescriptor:
    return StateDescriptor(name, StateKind.AGGREGATING, accumulator_type,
                           namespace_type=namespace_type, ttl=ttl,
                           aggregate_function=aggregate_function)


# -- the states -------------------------------------------------------------------------------


class CurrentKey(Protocol):
    """What a state reads of its backend (``HeapKeyedStateBackend``): the current key.

    ``current_key_group`` is the key group of ``current_key``, computed once per
    ``set_current_key``; ``current_key`` is ``None`` outside a keyed context.
    """

    @property
    def current_key(self) -> Any: ...

    @property
    def current_key_group(self) -> int: ...


class KeyedState:
    """What every keyed state shares: the backend's current key, its own namespace, TTL."""

    def __init__(self, backend: CurrentKey, descriptor: StateDescriptor,
                 table: StateTable[Any, Any, Any], ttl: TtlContext | None,
                 on_access: Callable[[], None] | None) -> None:
        self.descriptor = descriptor
        self._backend = backend
        self._table = table
        self._ttl = ttl
        self._on_access = on_access
        self._namespace_serializer = parse_type(descriptor.namespace_type)
        self._element_copy = descriptor.value_serializer.copy
        # As Flink's AbstractHeapState: only void-namespaced state starts in a namespace;
        # any other must be given one with set_current_namespace before use.
        self._namespace: Any = VOID_NAMESPACE if descriptor.namespace_type == "void" else None

    @property
    def name(self) -> str:
        return self.descriptor.name

    @property
    def current_namespace(self) -> Any:
        return self._namespace

    def set_current_namespace(self, namespace: Any) -> None:
        """Set the namespace the next calls use (windows); it must be of the declared type."""
        if namespace is None:
            raise InvalidArgumentError("Provided namespace is null.")
        self._namespace_serializer.java_hash(namespace)  # type check, clear error if wrong
        self._namespace = namespace

    def _current(self) -> tuple[StateMap[Any, Any, Any], Any, Any]:
        """(map of the current key group, current key, current namespace); runs TTL cleanup.

        Flink's TTL states call the incremental-cleanup callback at the start of every access.
        """
        key = self._backend.current_key
        if key is None:
            raise InvalidArgumentError(
                "No key set. This method should not be called outside of a keyed context.")
        if self._namespace is None:
            raise InvalidArgumentError("Provided namespace is null.")
        state_map = self._table.map_for_key_group(self._backend.current_key_group)
        if self._on_access is not None:
            self._on_access()
        return state_map, key, self._namespace

    def clear(self) -> None:
        state_map, key, namespace = self._current()
        state_map.remove(key, namespace)

    def _read(self, state_map: StateMap[Any, Any, Any], key: Any, namespace: Any) -> Any:
        """The stored value through TTL's read rule (§9.3); the user value or ``None``."""
        stored = state_map.get(key, namespace)
        if self._ttl is None:
            return stored
        hit = self._ttl.get_with_check_and_update(
            stored, lambda v: state_map.put(key, namespace, v),
            lambda: state_map.remove(key, namespace))
        return None if hit is None else hit.user_value

    def _unexpired(self, stored: TtlValue[Any] | None) -> Any:
        """``TtlUtils.getUnexpired``: the user value, or ``None`` if absent or expired."""
        assert self._ttl is not None
        if stored is None or self._ttl.is_expired(stored):
            return None
        return stored.user_value

    def unexpired_or_none(self, stored: Any, now: int) -> Any:
        """``getUnexpiredOrNull`` for incremental cleanup (§9.4): same object, new or None."""
        assert self._ttl is not None
        return self._ttl.unexpired_value_or_none(stored, now)

    def snapshot_filter(self, stored: Any, now: int) -> Any:
        """Full-snapshot cleanup (§9.5): the stored value as it is written, or ``None``."""
        assert self._ttl is not None
        return None if expired(stored.last_access_timestamp, self._ttl.config.ttl, now) else stored


class ValueState(KeyedState):
    """Port of ``HeapValueState`` / ``TtlValueState``."""

    def value(self) -> Any:
        state_map, key, namespace = self._current()
        return self._read(state_map, key, namespace)

    def update(self, value: Any) -> None:
        """Set the value; ``None`` clears the state, as in Flink."""
        if value is None:
            self.clear()
            return
        state_map, key, namespace = self._current()
        state_map.put(key, namespace, value if self._ttl is None else self._ttl.wrap(value))


class ListState(KeyedState):
    """Port of ``HeapListState`` / ``TtlListState`` (each element carries its own timestamp)."""

    def get(self) -> list[Any]:
        """The elements (a new list).

        With TTL, Flink's ``get`` (§9.3): ``on_read_and_write`` first rewrites the live elements
        stamped now; expired elements are left out (or, with
        ``return_expired_if_not_cleaned_up``, returned); if none is live the state is cleared.
        """
        state_map, key, namespace = self._current()
        stored = state_map.get(key, namespace)
        if stored is None:
            return []
        ttl = self._ttl
        if ttl is None:
            return list(stored)
        if ttl.config.update_on_read:
            now = ttl.clock()
            restamped = [TtlValue(e.user_value, now) for e in stored
                         if not expired(e.last_access_timestamp, ttl.config.ttl, now)]
            if restamped:
                state_map.put(key, namespace, restamped)
        result, any_unexpired = [], False
        for element in stored:
            unexpired = not ttl.is_expired(element)
            any_unexpired = any_unexpired or unexpired
            if unexpired or ttl.config.return_expired:
                result.append(element.user_value)
        if not any_unexpired:
            state_map.remove(key, namespace)
        return result

    def _wrap_all(self, values: Iterable[Any]) -> list[Any]:
        if values is None:
            raise InvalidArgumentError("List of values to add cannot be null.")
        items = list(values)
        if any(v is None for v in items):
            raise InvalidArgumentError("You cannot add null to a ListState.")
        return items if self._ttl is None else [self._ttl.wrap(v) for v in items]

    def add(self, value: Any) -> None:
        (item,) = self._wrap_all([value])
        state_map, key, namespace = self._current()
        state_map.transform(key, namespace, item, _append)

    def add_all(self, values: Iterable[Any]) -> None:
        """Append every value; an empty iterable changes nothing (Flink's ``addAll``)."""
        items = self._wrap_all(values)
        if items:
            state_map, key, namespace = self._current()
            state_map.transform(key, namespace, items, _extend)

    def update(self, values: Iterable[Any]) -> None:
        """Replace the list; an empty one clears the state (Flink's ``update``)."""
        items = self._wrap_all(values)
        state_map, key, namespace = self._current()
        if items:
            state_map.put(key, namespace, items)
        else:
            state_map.remove(key, namespace)

    def unexpired_or_none(self, stored: Any, now: int) -> Any:
        assert self._ttl is not None
        return self._ttl.unexpired_list_or_none(stored, now, self._element_copy)

    def snapshot_filter(self, stored: Any, now: int) -> Any:
        assert self._ttl is not None
        return self._ttl.snapshot_list_filter(stored, now)


class MapState(KeyedState):
    """Port of ``HeapMapState`` / ``TtlMapState`` (each value carries its own timestamp)."""

    def _user_map(self, create: bool) -> tuple[dict[Any, Any] | None, StateMap[Any, Any, Any],
                                                   Any, Any]:
        state_map, key, namespace = self._current()
        user_map = state_map.get(key, namespace)
        if user_map is None and create:
            user_map = {}
            state_map.put(key, namespace, user_map)
        return user_map, state_map, key, namespace

    def _ttl_read(self, user_map: dict[Any, Any], user_key: Any,
                  state_map: StateMap[Any, Any, Any], key: Any, namespace: Any) -> Any:
        assert self._ttl is not None

        def update(value: TtlValue[Any]) -> None:
            user_map[user_key] = value

        def clear() -> None:
            _remove_user_key(state_map, key, namespace, user_map, user_key)

        return self._ttl.get_with_check_and_update(user_map.get(user_key), update, clear)

    def get(self, user_key: Any) -> Any:
        user_map, state_map, key, namespace = self._user_map(create=False)
        if user_map is None:
            return None
        if self._ttl is None:
            return user_map.get(user_key)
        hit = self._ttl_read(user_map, user_key, state_map, key, namespace)
        return None if hit is None else hit.user_value

    def contains(self, user_key: Any) -> bool:
        """Whether ``user_key`` has a value.

        With TTL, Flink's rule: an expired entry is removed, and still reported present under
        ``return_expired_if_not_cleaned_up``.
        """
        user_map, state_map, key, namespace = self._user_map(create=False)
        if user_map is None:
            return False
        if self._ttl is None:
            return user_key in user_map
        return self._ttl_read(user_map, user_key, state_map, key, namespace) is not None

    def put(self, user_key: Any, value: Any) -> None:
        user_map, _, _, _ = self._user_map(create=True)
        assert user_map is not None
        user_map[user_key] = value if self._ttl is None else self._ttl.wrap(value)

    def put_all(self, entries: dict[Any, Any]) -> None:
        """Put every entry; an empty dict changes nothing (Flink's ``putAll``)."""
        if not entries:
            return
        user_map, _, _, _ = self._user_map(create=True)
        assert user_map is not None
        ttl = self._ttl
        user_map.update(entries if ttl is None else {k: ttl.wrap(v) for k, v in entries.items()})

    def remove(self, user_key: Any) -> None:
        """Remove one entry; removing the last one clears the state (``HeapMapState``)."""
        user_map, state_map, key, namespace = self._user_map(create=False)
        if user_map is not None:
            _remove_user_key(state_map, key, namespace, user_map, user_key)

    def items(self) -> list[tuple[Any, Any]]:
        """The entries (a new list); with TTL each one passes the read rule (§9.3)."""
        user_map, state_map, key, namespace = self._user_map(create=False)
        if user_map is None:
            return []
        if self._ttl is None:
            return list(user_map.items())
        out = []
        for user_key in list(user_map):
            hit = self._ttl_read(user_map, user_key, state_map, key, namespace)
            if hit is not None:
                out.append((user_key, hit.user_value))
        return out

    def keys(self) -> list[Any]:
        return [k for k, _ in self.items()]

    def values(self) -> list[Any]:
        return [v for _, v in self.items()]

    def is_empty(self) -> bool:
        """Whether no entry is stored.

        As Flink's ``TtlMapState.isEmpty``, expired entries not yet cleaned up still count.
        """
        user_map, _, _, _ = self._user_map(create=False)
        return not user_map

    def unexpired_or_none(self, stored: Any, now: int) -> Any:
        assert self._ttl is not None
        return self._ttl.unexpired_map_or_none(stored, now, self._element_copy)

    def snapshot_filter(self, stored: Any, now: int) -> Any:
        # Map values are filtered one by one (§5.7); an empty result drops the entry.
        assert self._ttl is not None
        return self._ttl.unexpired_map_or_none(stored, now, lambda v: v) or None


class ReducingState(KeyedState):
    """Port of ``HeapReducingState`` / ``TtlReducingState`` (with ``TtlReduceFunction``)."""

    def get(self) -> Any:
        state_map, key, namespace = self._current()
        return self._read(state_map, key, namespace)

    def add(self, value: Any) -> None:
        """Reduce ``value`` into the state; ``None`` clears it (``HeapReducingState.add``)."""
        if value is None:
            self.clear()
            return
        state_map, key, namespace = self._current()
        reduce = self.descriptor.reduce_function
        assert reduce is not None
        if self._ttl is None:
            state_map.transform(key, namespace, value,
                                lambda old, v: v if old is None else reduce(old, v))
            return
        ttl = self._ttl

        def ttl_reduce(old: TtlValue[Any] | None, new: TtlValue[Any]) -> TtlValue[Any]:
            # TtlReduceFunction: an expired accumulated value counts as absent
            current = self._unexpired(old)
            if current is None:
                return ttl.wrap(new.user_value)
            return ttl.wrap(reduce(current, new.user_value))

        state_map.transform(key, namespace, ttl.wrap(value), ttl_reduce)


class AggregatingState(KeyedState):
    """Port of ``HeapAggregatingState`` / ``TtlAggregatingState``."""

    def _function(self) -> AggregateFunction[Any, Any, Any]:
        function = self.descriptor.aggregate_function
        assert function is not None
        return function

    def get(self) -> Any:
        """The aggregate's result, or ``None`` when there is no (live) accumulator."""
        state_map, key, namespace = self._current()
        accumulator = self._read(state_map, key, namespace)
        return None if accumulator is None else self._function().get_result(accumulator)

    def add(self, value: Any) -> None:
        """Add ``value`` to the accumulator; ``None`` clears the state (Flink's ``add``)."""
        if value is None:
            self.clear()
            return
        state_map, key, namespace = self._current()
        function = self._function()
        if self._ttl is None:
            state_map.transform(key, namespace, value, lambda acc, v: function.add(
                v, function.create_accumulator() if acc is None else acc))
            return
        ttl = self._ttl

        def ttl_add(stored: TtlValue[Any] | None, v: Any) -> TtlValue[Any]:
            # TtlAggregateFunction.add: an expired accumulator starts over
            accumulator = self._unexpired(stored)
            if accumulator is None:
                accumulator = function.create_accumulator()
            return ttl.wrap(function.add(v, accumulator))

        state_map.transform(key, namespace, value, ttl_add)


STATE_CLASSES: dict[StateKind, type[KeyedState]] = {
    StateKind.VALUE: ValueState,
    StateKind.LIST: ListState,
    StateKind.MAP: MapState,
    StateKind.REDUCING: ReducingState,
    StateKind.AGGREGATING: AggregatingState,
}


@dataclass
class IncrementalCleanup(Generic[V]):
    """Port of ``TtlIncrementalCleanup`` (§9.4).

    On each access, clean up to ``cleanup_size`` entries, whole bucket chains at a time,
    continuing where the last run stopped.
    """

    table: StateTable[Any, Any, Any]
    state: KeyedState
    cleanup_size: int
    _visitor: Any = None

    def state_accessed(self) -> None:
        if self._visitor is None or not self._visitor.has_next():
            self._visitor = self.table.incremental_visitor(self.cleanup_size)
        visitor = self._visitor
        ttl = self.state._ttl
        assert ttl is not None
        cleaned = 0
        while cleaned < self.cleanup_size and visitor.has_next():
            chain = visitor.next_entries()
            if not chain:
                break
            for entry in chain:
                clean = self.state.unexpired_or_none(entry.state, ttl.clock())
                if clean is None:
                    visitor.remove(entry)
                elif clean is not entry.state:
                    visitor.update(entry, clean)
            cleaned += len(chain)


def _append(old: list[Any] | None, value: Any) -> list[Any]:
    target = [] if old is None else old
    target.append(value)
    return target


def _extend(old: list[Any] | None, values: list[Any]) -> list[Any]:
    target = [] if old is None else old
    target.extend(values)
    return target


def _remove_user_key(state_map: StateMap[Any, Any, Any], key: Any, namespace: Any,
                     user_map: dict[Any, Any], user_key: Any) -> None:
    user_map.pop(user_key, None)
    if not user_map:
        state_map.remove(key, namespace)
