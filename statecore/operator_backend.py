"""Operator (non-keyed) state: split list, union list and broadcast state.

Port of Flink's ``DefaultOperatorStateBackend`` (``flink-runtime/.../state/``) with its
``PartitionableListState`` and ``HeapBroadcastState``, of the ``CheckpointedFunction`` hooks
(``flink-streaming-java/.../api/checkpoint/``). How the states are redistributed on restore
(Flink's ``RoundRobinOperatorStateRepartitioner``) is in :mod:`statecore.rescale`. Seed 003
walks through all three kinds of state.

Operator state is small by design, so :meth:`OperatorStateBackend.snapshot` deep-copies every
state through its serializers in the synchronous part, as Flink's
``DefaultOperatorStateBackendSnapshotStrategy`` does, and returns an immutable
:class:`OperatorStateSnapshot`: per state its name, mode (reference §7, Flink's ordinals),
type specs and elements (list states) or entries (broadcast state). Restoring appends the
elements of every entry given, in order, as ``OperatorStateRestoreOperation`` appends handles.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from statecore.errors import InvalidArgumentError
from statecore.serializers import TypeSerializer, parse_type

__all__ = [
    "BroadcastStateDescriptor",
    "CheckpointedFunction",
    "FunctionInitializationContext",
    "FunctionSnapshotContext",
    "HeapBroadcastState",
    "OperatorListStateDescriptor",
    "OperatorStateBackend",
    "OperatorStateMode",
    "OperatorStateSnapshot",
    "OperatorStateSnapshotEntry",
    "PartitionableListState",
    "initialize_function",
    "snapshot_function",
]

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")


class OperatorStateMode(IntEnum):
    """Port of ``OperatorStateHandle.Mode``; values are Flink's ordinals, stored as a byte (§7)."""

    SPLIT_DISTRIBUTE = 0  # getListState: elements are split evenly on rescale
    UNION = 1  # getUnionListState: every subtask gets every element on restore
    BROADCAST = 2  # getBroadcastState: a map, identical on every subtask


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"a state name must be a non-empty string, got {name!r}")
    return name


def _serializer(declared: object, what: str) -> TypeSerializer[Any]:
    if isinstance(declared, TypeSerializer):
        parse_type(declared.spec)  # restore rebuilds serializers from specs: they must parse
        return declared
    if isinstance(declared, str):
        return parse_type(declared)
    raise InvalidArgumentError(f"{what} must be a type spec or a TypeSerializer, got {declared!r}")


def _copy(serializer: TypeSerializer[Any], value: Any) -> Any:
    return None if value is None else serializer.copy(value)


@dataclass(frozen=True)
class OperatorListStateDescriptor:
    """Port of ``ListStateDescriptor`` as operator state takes it: a name and the element type.

    Used for split (``get_list_state``) and union (``get_union_list_state``) list state alike;
    equality is by name and element type spec.
    """

    name: str
    element_type: str | TypeSerializer[Any] = field(compare=False)
    element_serializer: TypeSerializer[Any] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        _check_name(self.name)
        object.__setattr__(
            self, "element_serializer", _serializer(self.element_type, "element_type"))


@dataclass(frozen=True)
class BroadcastStateDescriptor:
    """Port of the ``MapStateDescriptor`` that ``getBroadcastState`` takes: name, key, value."""

    name: str
    key_type: str | TypeSerializer[Any] = field(compare=False)
    value_type: str | TypeSerializer[Any] = field(compare=False)
    key_serializer: TypeSerializer[Any] = field(init=False, repr=False)
    value_serializer: TypeSerializer[Any] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        _check_name(self.name)
        object.__setattr__(self, "key_serializer", _serializer(self.key_type, "key_type"))
        object.__setattr__(self, "value_serializer", _serializer(self.value_type, "value_type"))


@dataclass(frozen=True)
class OperatorStateSnapshotEntry:
    """One named state of one subtask at a checkpoint.

    What Flink writes for it (reference §7): a ``StateMetaInfoSnapshot`` of type OPERATOR or
    BROADCAST, plus the values its offsets point at.

    List states (``SPLIT_DISTRIBUTE``, ``UNION``): ``value_type_spec`` is the element type
    (Flink's ``VALUE_SERIALIZER``), ``key_type_spec`` is ``None``, ``elements`` are in list
    order, ``entries`` is empty. Broadcast state: both specs (``KEY_SERIALIZER``,
    ``VALUE_SERIALIZER``), ``entries`` as ``(key, value)`` pairs in insertion order, ``elements``
    empty. Specs are normalised (``"long"`` becomes ``"int64"``); sequences become tuples.
    The objects inside must be treated as read-only (restoring copies them).
    """

    name: str
    mode: OperatorStateMode
    value_type_spec: str
    key_type_spec: str | None = None
    elements: tuple[Any, ...] = ()
    entries: tuple[tuple[Any, Any], ...] = ()

    def __post_init__(self) -> None:
        _check_name(self.name)
        try:
            mode = OperatorStateMode(self.mode)
        except ValueError:
            raise InvalidArgumentError(
                f"unknown operator state mode {self.mode!r} for state {self.name!r}") from None
        object.__setattr__(self, "mode", mode)
        object.__setattr__(self, "value_type_spec", parse_type(self.value_type_spec).spec)
        object.__setattr__(self, "elements", tuple(self.elements))
        raw: Any = self.entries
        pairs = raw.items() if isinstance(raw, Mapping) else raw
        object.__setattr__(self, "entries", tuple((k, v) for k, v in pairs))
        if mode is OperatorStateMode.BROADCAST:
            if self.key_type_spec is None or self.elements:
                raise InvalidArgumentError(
                    f"broadcast state {self.name!r} needs a key type and entries, not elements")
            object.__setattr__(self, "key_type_spec", parse_type(self.key_type_spec).spec)
        elif self.key_type_spec is not None or self.entries:
            raise InvalidArgumentError(
                f"list state {self.name!r} has elements only, no key type or entries")

    @property
    def type_specs(self) -> tuple[str, ...]:
        """``(element,)`` for a list state, ``(key, value)`` for broadcast state."""
        if self.key_type_spec is None:
            return (self.value_type_spec,)
        return (self.key_type_spec, self.value_type_spec)


@dataclass(frozen=True)
class OperatorStateSnapshot:
    """The operator state of one subtask at a checkpoint; immutable and self-contained.

    ``states`` keep the order given (a reader of a real Flink handle keeps Flink's order; the
    backend's snapshots are sorted by name); names are unique. An empty snapshot stands for a
    subtask without operator state (Flink's ``null`` handle).
    """

    states: tuple[OperatorStateSnapshotEntry, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "states", tuple(self.states))
        names = [entry.name for entry in self.states]
        if len(set(names)) != len(names):
            raise InvalidArgumentError(f"state names repeat in one snapshot: {names}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(entry.name for entry in self.states)

    def get(self, name: str) -> OperatorStateSnapshotEntry | None:
        return next((entry for entry in self.states if entry.name == name), None)

    def __iter__(self) -> Iterator[OperatorStateSnapshotEntry]:
        return iter(self.states)

    def __len__(self) -> int:
        return len(self.states)


class PartitionableListState(Generic[T]):
    """Port of ``PartitionableListState``: the list behind split and union list state.

    ``get`` returns a new list (the elements themselves are the live objects: mutating one in
    place changes the state, never a snapshot taken before). ``None`` elements are refused.
    """

    def __init__(self, name: str, mode: OperatorStateMode, serializer: TypeSerializer[T]) -> None:
        self.name = name
        self.mode = mode
        self.element_serializer = serializer
        self._elements: list[T] = []

    def get(self) -> list[T]:
        return list(self._elements)

    def add(self, value: T) -> None:
        if value is None:
            raise InvalidArgumentError("You cannot add null to a ListState.")
        self._elements.append(value)

    def add_all(self, values: Iterable[T]) -> None:
        """Appends ``values``; all-or-nothing when one of them is ``None``."""
        if values is None:
            raise InvalidArgumentError("List of values to add cannot be null.")
        checked = list(values)
        if any(value is None for value in checked):
            raise InvalidArgumentError("Any value to add to a list cannot be null.")
        self._elements.extend(checked)

    def update(self, values: Iterable[T]) -> None:
        """Replaces the list by ``values`` (checked first, so a refused update changes nothing)."""
        current, self._elements = self._elements, []
        try:
            self.add_all(values)
        except InvalidArgumentError:
            self._elements = current
            raise

    def clear(self) -> None:
        self._elements.clear()

    def __iter__(self) -> Iterator[T]:
        return iter(self.get())

    def __len__(self) -> int:
        return len(self._elements)

    def _deep_copy(self) -> tuple[T, ...]:
        return tuple(_copy(self.element_serializer, e) for e in self._elements)


class HeapBroadcastState(Generic[K, V]):
    """Port of ``HeapBroadcastState``: the map behind broadcast state (insertion-ordered).

    ``keys``/``values``/``items`` return lists, safe to iterate while the state changes.
    ``None`` keys are refused (Flink's key serializers cannot write them).
    """

    def __init__(
        self, name: str, key_serializer: TypeSerializer[K], value_serializer: TypeSerializer[V]
    ) -> None:
        self.name = name
        self.mode = OperatorStateMode.BROADCAST
        self.key_serializer = key_serializer
        self.value_serializer = value_serializer
        self._map: dict[K, V] = {}

    def get(self, key: K) -> V | None:
        return self._map.get(key)

    def put(self, key: K, value: V) -> None:
        if key is None:
            raise InvalidArgumentError(f"broadcast state {self.name!r} cannot hold a null key")
        self._map[key] = value

    def put_all(self, entries: Mapping[K, V] | Iterable[tuple[K, V]]) -> None:
        for key, value in entries.items() if isinstance(entries, Mapping) else entries:
            self.put(key, value)

    def remove(self, key: K) -> None:
        self._map.pop(key, None)

    def contains(self, key: K) -> bool:
        return key in self._map

    def keys(self) -> list[K]:
        return list(self._map)

    def values(self) -> list[V]:
        return list(self._map.values())

    def items(self) -> list[tuple[K, V]]:
        return list(self._map.items())

    def is_empty(self) -> bool:
        return not self._map

    def clear(self) -> None:
        self._map.clear()

    def __contains__(self, key: object) -> bool:
        return key in self._map

    def __iter__(self) -> Iterator[K]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self._map)

    def _deep_copy(self) -> tuple[tuple[K, V], ...]:
        return tuple((_copy(self.key_serializer, k), _copy(self.value_serializer, v))
                     for k, v in self._map.items())


def _check_spec(name: str, what: str, was: str, now: str) -> None:
    if was != now:
        raise InvalidArgumentError(
            f"The new {what} serializer for operator state {name!r} must not be incompatible: "
            f"it was {was}, now {now}.")


class OperatorStateBackend:
    """Port of ``DefaultOperatorStateBackend``: the operator state of one subtask, by name.

    A name is registered by its first ``get_*`` call or by restored state. A later call with
    another mode fails as in Flink ("Incompatible state assignment modes"), with another type
    too (Flink: "must not be incompatible"); a name cannot be both a list and a broadcast
    state. ``restored_state`` is what redistribution gave this subtask (see :meth:`restore`).
    Not thread-safe: like Flink's, it belongs to the task thread.
    """

    def __init__(self, restored_state: Iterable[OperatorStateSnapshotEntry] = ()) -> None:
        self._list_states: dict[str, PartitionableListState[Any]] = {}
        self._broadcast_states: dict[str, HeapBroadcastState[Any, Any]] = {}
        self.restore(restored_state)

    def get_list_state(
        self, descriptor: OperatorListStateDescriptor
    ) -> PartitionableListState[Any]:
        """Split-distribute list state (Flink's ``getListState``)."""
        return self._register_list_state(
            descriptor.name, OperatorStateMode.SPLIT_DISTRIBUTE, descriptor.element_serializer)

    def get_union_list_state(
        self, descriptor: OperatorListStateDescriptor
    ) -> PartitionableListState[Any]:
        """Union list state (Flink's ``getUnionListState``)."""
        return self._register_list_state(
            descriptor.name, OperatorStateMode.UNION, descriptor.element_serializer)

    def get_broadcast_state(
        self, descriptor: BroadcastStateDescriptor
    ) -> HeapBroadcastState[Any, Any]:
        """Broadcast map state (Flink's ``getBroadcastState``)."""
        return self._broadcast_state(
            descriptor.name, descriptor.key_serializer, descriptor.value_serializer)

    @property
    def registered_state_names(self) -> tuple[str, ...]:
        """Names of the list states, sorted (Flink's ``getRegisteredStateNames``)."""
        return tuple(sorted(self._list_states))

    @property
    def registered_broadcast_state_names(self) -> tuple[str, ...]:
        """Names of the broadcast states, sorted (``getRegisteredBroadcastStateNames``)."""
        return tuple(sorted(self._broadcast_states))

    def snapshot(self) -> OperatorStateSnapshot:
        """A deep copy of every registered state (restored ones included), sorted by name.

        Later writes to this backend never change it. Port of the synchronous part of
        ``DefaultOperatorStateBackendSnapshotStrategy`` (``deepCopy`` of every state).
        """
        entries: list[OperatorStateSnapshotEntry] = []
        for name in sorted(self._list_states.keys() | self._broadcast_states.keys()):
            if name in self._list_states:
                ls = self._list_states[name]
                entries.append(OperatorStateSnapshotEntry(
                    name, ls.mode, ls.element_serializer.spec, elements=ls._deep_copy()))
            else:
                bs = self._broadcast_states[name]
                entries.append(OperatorStateSnapshotEntry(
                    name, bs.mode, bs.value_serializer.spec, bs.key_serializer.spec,
                    entries=bs._deep_copy()))
        return OperatorStateSnapshot(tuple(entries))

    def restore(self, entries: Iterable[OperatorStateSnapshotEntry]) -> None:
        """Registers and fills the states of ``entries``, copying every value.

        Port of ``OperatorStateRestoreOperation.restore``: entries of one name (from several
        old subtasks) append their elements in the order given; broadcast entries are merged
        with ``put``. A name already registered must have the same mode and types.
        """
        for entry in entries:
            if entry.mode is OperatorStateMode.BROADCAST:
                assert entry.key_type_spec is not None  # guaranteed by the entry
                bs = self._broadcast_state(
                    entry.name, parse_type(entry.key_type_spec), parse_type(entry.value_type_spec))
                for key, value in entry.entries:
                    bs.put(_copy(bs.key_serializer, key), _copy(bs.value_serializer, value))
            else:
                ls = self._register_list_state(
                    entry.name, entry.mode, parse_type(entry.value_type_spec))
                ls.add_all(_copy(ls.element_serializer, e) for e in entry.elements)

    def _register_list_state(
        self, name: str, mode: OperatorStateMode, serializer: TypeSerializer[Any]
    ) -> PartitionableListState[Any]:
        if name in self._broadcast_states:
            raise InvalidArgumentError(
                f"operator state {name!r} is registered as broadcast state; a name cannot be "
                "both a list state and a broadcast state")
        state = self._list_states.get(name)
        if state is None:
            state = self._list_states[name] = PartitionableListState(name, mode, serializer)
            return state
        if state.mode is not mode:
            raise InvalidArgumentError(
                f"Incompatible state assignment modes for operator state {name!r}. "
                f"Was [{state.mode.name}], registered with [{mode.name}].")
        _check_spec(name, "element", state.element_serializer.spec, serializer.spec)
        return state

    def _broadcast_state(
        self, name: str, key: TypeSerializer[Any], value: TypeSerializer[Any]
    ) -> HeapBroadcastState[Any, Any]:
        if name in self._list_states:
            raise InvalidArgumentError(
                f"operator state {name!r} is registered as {self._list_states[name].mode.name} "
                "list state; a name cannot be both a list state and a broadcast state")
        state = self._broadcast_states.get(name)
        if state is None:
            state = self._broadcast_states[name] = HeapBroadcastState(name, key, value)
            return state
        _check_spec(name, "key", state.key_serializer.spec, key.spec)
        _check_spec(name, "value", state.value_serializer.spec, value.spec)
        return state


# --- CheckpointedFunction ---------------------------------------------------------------------


@dataclass(frozen=True)
class FunctionInitializationContext:
    """Port of ``FunctionInitializationContext``: the state store and whether this is a restore.

    ``is_restored`` is true whenever the job restores from a checkpoint, even if this subtask
    got no state (as Flink's ``isRestored``).
    """

    operator_state_store: OperatorStateBackend
    is_restored: bool


@dataclass(frozen=True)
class FunctionSnapshotContext:
    """Port of ``FunctionSnapshotContext`` (``ManagedSnapshotContext``)."""

    checkpoint_id: int
    checkpoint_timestamp: int


@runtime_checkable
class CheckpointedFunction(Protocol):
    """Port of ``CheckpointedFunction``: a user function that keeps operator state.

    ``initialize_state`` runs once per instance before any record (register states, read the
    restored ones); ``snapshot_state`` runs at each checkpoint, before the backend snapshot,
    to move the function's working copy into its states.
    """

    def snapshot_state(self, context: FunctionSnapshotContext) -> None: ...

    def initialize_state(self, context: FunctionInitializationContext) -> None: ...


def initialize_function(
    function: CheckpointedFunction, backend: OperatorStateBackend, restored: bool
) -> None:
    """Calls ``function.initialize_state`` with a context over ``backend``."""
    function.initialize_state(FunctionInitializationContext(backend, restored))


def snapshot_function(
    function: CheckpointedFunction,
    backend: OperatorStateBackend,
    checkpoint_id: int,
    checkpoint_timestamp: int,
) -> OperatorStateSnapshot:
    """``function.snapshot_state`` then ``backend.snapshot()`` (the synchronous part)."""
    function.snapshot_state(FunctionSnapshotContext(checkpoint_id, checkpoint_timestamp))
    return backend.snapshot()
