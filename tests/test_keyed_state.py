"""Semantics of every keyed state kind on the heap backend, on both map implementations.

Each test follows the behaviour of Flink's heap states (``flink-runtime/.../state/heap/``:
``HeapValueState``, ``HeapListState``, ``HeapMapState``, ``HeapReducingState``,
``HeapAggregatingState``, their base ``AbstractHeapState``, ``StateTable`` and
``HeapKeyedStateBackend``); the Flink class is cited where the rule comes from. Every test runs
on ``copy_on_write`` and on ``nested`` maps. The differential test at the end runs random
operation sequences on both map kinds and on a pure-dict model, snapshots included.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from statecore.errors import InvalidArgumentError, KeyGroupError, StatectlError
from statecore.key_groups import (
    KeyGroupRange,
    assign_to_key_group,
    compute_key_group_range_for_operator_index,
)
from statecore.keyed_backend import HeapKeyedStateBackend, MapKind
from statecore.keyed_state import (
    AggregatingState,
    KeyedState,
    ListState,
    MapState,
    ReducingState,
    StateDescriptor,
    StateKind,
    ValueState,
    aggregating_state,
    list_state,
    map_state,
    reducing_state,
    value_state,
)
from statecore.serializers import VOID_NAMESPACE

MAP_KINDS: tuple[MapKind, ...] = ("copy_on_write", "nested")
MAX_P = 128


@pytest.fixture(params=MAP_KINDS)
def map_kind(request: pytest.FixtureRequest) -> MapKind:
    kind: MapKind = request.param
    return kind


def make_backend(map_kind: MapKind, key_type: str = "string", max_parallelism: int = MAX_P,
                 key_group_range: KeyGroupRange | None = None) -> HeapKeyedStateBackend[Any]:
    return HeapKeyedStateBackend(key_type, max_parallelism, key_group_range, map_kind=map_kind)


def stored(backend: HeapKeyedStateBackend[Any], name: str) -> dict[tuple[Any, Any], Any]:
    """What the state's table holds, as ``{(key, namespace): state}``."""
    out: dict[tuple[Any, Any], Any] = {}
    for _, state_map in backend.table(name).items_by_key_group():
        for entry in state_map:
            assert (entry.key, entry.namespace) not in out, f"duplicate entry {entry}"
            out[(entry.key, entry.namespace)] = entry.state
    return out


def concat(a: str, b: str) -> str:
    """A non-commutative reduce function: the argument order is visible."""
    return f"({a}+{b})"


class AverageAggregate:
    """An ``AggregateFunction`` (Flink's interface) whose accumulator is mutated in place."""

    def __init__(self) -> None:
        self.created = 0

    def create_accumulator(self) -> list[int]:
        self.created += 1
        return [0, 0]

    def add(self, value: int, accumulator: list[int]) -> list[int]:
        accumulator[0] += value
        accumulator[1] += 1
        return accumulator

    def get_result(self, accumulator: list[int]) -> float:
        return accumulator[0] / accumulator[1]

    def merge(self, a: list[int], b: list[int]) -> list[int]:
        return [a[0] + b[0], a[1] + b[1]]


# -- value state (HeapValueState) ---------------------------------------------------------------


def test_value_state_update_value_clear(map_kind: MapKind) -> None:
    # HeapValueState.value returns null when absent; update overwrites; clear removes the entry.
    backend = make_backend(map_kind)
    state = backend.get_value_state(value_state("v", "int64"))
    backend.set_current_key("k")
    assert state.value() is None
    state.update(1)
    state.update(2)
    assert state.value() == 2
    assert stored(backend, "v") == {("k", VOID_NAMESPACE): 2}
    state.clear()
    assert state.value() is None
    assert stored(backend, "v") == {}
    state.clear()  # clearing absent state is a no-op
    assert stored(backend, "v") == {}


def test_value_state_update_none_clears(map_kind: MapKind) -> None:
    # HeapValueState.update: "if (value == null) { clear(); return; }"
    backend = make_backend(map_kind)
    state = backend.get_value_state(value_state("v"))
    backend.set_current_key("k")
    state.update("x")
    state.update(None)
    assert state.value() is None
    assert stored(backend, "v") == {}


def test_value_state_falsy_values_are_values(map_kind: MapKind) -> None:
    # Only null clears (HeapValueState.update); 0, "" and False are ordinary values.
    backend = make_backend(map_kind)
    state = backend.get_value_state(value_state("v"))
    for key, value in (("a", 0), ("b", ""), ("c", False), ("d", [])):
        backend.set_current_key(key)
        state.update(value)
    for key, value in (("a", 0), ("b", ""), ("c", False), ("d", [])):
        backend.set_current_key(key)
        assert state.value() == value and type(state.value()) is type(value)
    assert len(stored(backend, "v")) == 4


# -- list state (HeapListState) ----------------------------------------------------------------


def test_list_state_get_on_absent_state_is_empty(map_kind: MapKind) -> None:
    # HeapListState.get returns null; the user-facing ListState (UserFacingListState) makes it [].
    backend = make_backend(map_kind)
    state = backend.get_list_state(list_state("l", "int32"))
    backend.set_current_key("k")
    assert state.get() == []
    assert stored(backend, "l") == {}


def test_list_state_add_add_all_update_clear(map_kind: MapKind) -> None:
    # HeapListState.add appends; addAll appends in order; update replaces; clear removes.
    backend = make_backend(map_kind)
    state = backend.get_list_state(list_state("l", "int32"))
    backend.set_current_key("k")
    state.add(1)
    state.add(2)
    state.add_all([3, 4])
    assert state.get() == [1, 2, 3, 4]
    state.add_all(iter([5]))
    assert state.get() == [1, 2, 3, 4, 5]
    state.update([9, 8])
    assert state.get() == [9, 8]
    assert stored(backend, "l") == {("k", VOID_NAMESPACE): [9, 8]}
    state.clear()
    assert state.get() == []
    assert stored(backend, "l") == {}


def test_list_state_add_all_of_nothing_is_a_no_op(map_kind: MapKind) -> None:
    # HeapListState.addAll: "if (!values.isEmpty()) { stateTable.transform(...) }"
    backend = make_backend(map_kind)
    state = backend.get_list_state(list_state("l"))
    backend.set_current_key("k")
    state.add_all([])
    assert stored(backend, "l") == {}  # no empty list is created
    state.add(1)
    state.add_all([])
    assert state.get() == [1]


def test_list_state_update_with_empty_list_clears(map_kind: MapKind) -> None:
    # HeapListState.update: "if (values.isEmpty()) { clear(); return; }"
    backend = make_backend(map_kind)
    state = backend.get_list_state(list_state("l"))
    backend.set_current_key("k")
    state.update([1, 2])
    state.update([])
    assert state.get() == []
    assert stored(backend, "l") == {}


@pytest.mark.parametrize("operation", ["add", "add_all", "update"])
def test_list_state_refuses_null_elements(map_kind: MapKind, operation: str) -> None:
    # HeapListState: Preconditions.checkNotNull(v, "You cannot add null to a ListState.")
    backend = make_backend(map_kind)
    state = backend.get_list_state(list_state("l"))
    backend.set_current_key("k")
    state.update([1])
    argument: Any = None if operation == "add" else [2, None, 3]
    with pytest.raises(StatectlError, match="You cannot add null to a ListState."):
        getattr(state, operation)(argument)
    if operation != "add_all":  # Flink's addAll may have appended the elements before the null
        assert state.get() == [1]


@pytest.mark.parametrize("operation", ["add_all", "update"])
def test_list_state_refuses_a_null_list(map_kind: MapKind, operation: str) -> None:
    # HeapListState.addAll / update:
    # Preconditions.checkNotNull(values, "List of values to add cannot be null.")
    backend = make_backend(map_kind)
    state = backend.get_list_state(list_state("l"))
    backend.set_current_key("k")
    state.update([1])
    with pytest.raises(StatectlError):
        getattr(state, operation)(None)
    assert state.get() == [1]


def test_list_state_get_returns_a_copy(map_kind: MapKind) -> None:
    # The returned list is the caller's: mutating it must not change the state. Likewise
    # HeapListState.update copies the given list (newStateList), so later changes to the
    # argument do not leak into the state.
    backend = make_backend(map_kind)
    state = backend.get_list_state(list_state("l"))
    backend.set_current_key("k")
    given = [1, 2]
    state.update(given)
    given.append(99)
    got = state.get()
    got.append(3)
    got[0] = -1
    assert state.get() == [1, 2]
    added = [4]
    state.add_all(added)
    added.append(98)
    assert state.get() == [1, 2, 4]
    assert stored(backend, "l") == {("k", VOID_NAMESPACE): [1, 2, 4]}


# -- map state (HeapMapState) ------------------------------------------------------------------


def test_map_state_on_absent_state(map_kind: MapKind) -> None:
    # HeapMapState: get/contains/isEmpty on a null user map; UserFacingMapState: empty views.
    backend = make_backend(map_kind)
    state = backend.get_map_state(map_state("m", "string", "int64"))
    backend.set_current_key("k")
    assert state.get("x") is None
    assert not state.contains("x")
    assert state.keys() == [] and state.values() == [] and state.items() == []
    assert state.is_empty()
    state.remove("x")  # HeapMapState.remove: "if (userMap == null) return;"
    state.clear()
    assert stored(backend, "m") == {}


def test_map_state_put_get_contains_overwrite(map_kind: MapKind) -> None:
    # HeapMapState.put creates the user map on first use and overwrites existing user keys.
    backend = make_backend(map_kind)
    state = backend.get_map_state(map_state("m", "string", "int64"))
    backend.set_current_key("k")
    state.put("a", 1)
    state.put("b", 2)
    state.put("a", 3)
    assert state.get("a") == 3 and state.get("b") == 2 and state.get("c") is None
    assert state.contains("a") and state.contains("b") and not state.contains("c")
    assert not state.is_empty()
    assert sorted(state.keys()) == ["a", "b"]
    assert sorted(state.values()) == [2, 3]
    assert sorted(state.items()) == [("a", 3), ("b", 2)]
    assert stored(backend, "m") == {("k", VOID_NAMESPACE): {"a": 3, "b": 2}}


def test_map_state_null_value_is_present(map_kind: MapKind) -> None:
    # HeapMapState keeps user entries with null values (a HashMap does); contains sees them.
    backend = make_backend(map_kind)
    state = backend.get_map_state(map_state("m", "string"))
    backend.set_current_key("k")
    state.put("a", None)
    assert state.contains("a") and state.get("a") is None and not state.is_empty()
    assert state.items() == [("a", None)]


def test_map_state_put_all(map_kind: MapKind) -> None:
    # HeapMapState.putAll: "if (value == null || value.isEmpty()) return;" else merges.
    backend = make_backend(map_kind)
    state = backend.get_map_state(map_state("m", "int32", "string"))
    backend.set_current_key("k")
    state.put_all({})
    assert stored(backend, "m") == {}  # no empty user map is created
    state.put(1, "one")
    state.put_all({2: "two", 1: "uno"})
    assert dict(state.items()) == {1: "uno", 2: "two"}
    state.put_all({})
    assert dict(state.items()) == {1: "uno", 2: "two"}


def test_map_state_remove_and_removing_the_last_key_clears(map_kind: MapKind) -> None:
    # HeapMapState.remove: "userMap.remove(userKey); if (userMap.isEmpty()) clear();"
    backend = make_backend(map_kind)
    state = backend.get_map_state(map_state("m", "string", "int32"))
    backend.set_current_key("k")
    state.put_all({"a": 1, "b": 2})
    state.remove("a")
    state.remove("zz")  # absent user key: nothing happens
    assert state.items() == [("b", 2)]
    assert stored(backend, "m") == {("k", VOID_NAMESPACE): {"b": 2}}
    state.remove("b")
    assert state.is_empty() and state.get("b") is None
    assert ("k", VOID_NAMESPACE) not in stored(backend, "m")
    assert stored(backend, "m") == {}


def test_map_state_clear(map_kind: MapKind) -> None:
    backend = make_backend(map_kind)
    state = backend.get_map_state(map_state("m", "string"))
    backend.set_current_key("k")
    state.put_all({"a": 1, "b": 2})
    state.clear()
    assert state.is_empty() and state.items() == [] and not state.contains("a")
    assert stored(backend, "m") == {}
    state.put("c", 3)  # usable again after clear
    assert state.items() == [("c", 3)]


def test_map_state_views_are_consistent_and_detached(map_kind: MapKind) -> None:
    backend = make_backend(map_kind)
    state = backend.get_map_state(map_state("m", "int64", "int64"))
    backend.set_current_key("k")
    entries = {i: i * i for i in range(20)}
    state.put_all(entries)
    entries[100] = 1  # the argument is not aliased by the state
    assert dict(state.items()) == {i: i * i for i in range(20)}
    assert state.keys() == [k for k, _ in state.items()]
    assert state.values() == [v for _, v in state.items()]
    keys = state.keys()
    keys.clear()
    assert len(state.keys()) == 20


# -- reducing state (HeapReducingState) --------------------------------------------------------


def test_reducing_state_add_reduces_old_with_new(map_kind: MapKind) -> None:
    # HeapReducingState.ReduceTransformation: previous == null ? value : reduce(previous, value)
    calls: list[tuple[str, str]] = []

    def reduce(a: str, b: str) -> str:
        calls.append((a, b))
        return concat(a, b)

    backend = make_backend(map_kind)
    state = backend.get_reducing_state(reducing_state("r", reduce, "string"))
    backend.set_current_key("k")
    assert state.get() is None
    state.add("a")
    assert calls == [] and state.get() == "a"  # the first value is stored as is
    state.add("b")
    state.add("c")
    assert state.get() == "((a+b)+c)"
    assert calls == [("a", "b"), ("(a+b)", "c")]
    assert stored(backend, "r") == {("k", VOID_NAMESPACE): "((a+b)+c)"}


def test_reducing_state_add_none_clears(map_kind: MapKind) -> None:
    # HeapReducingState.add: "if (value == null) { clear(); return; }"
    backend = make_backend(map_kind)
    state = backend.get_reducing_state(reducing_state("r", concat))
    backend.set_current_key("k")
    state.add("a")
    state.add(None)
    assert state.get() is None
    assert stored(backend, "r") == {}
    state.add("b")  # starts over
    assert state.get() == "b"
    state.clear()
    assert state.get() is None and stored(backend, "r") == {}


# -- aggregating state (HeapAggregatingState) --------------------------------------------------


def test_aggregating_state_add_and_get(map_kind: MapKind) -> None:
    # HeapAggregatingState.AggregateTransformation: acc == null -> createAccumulator(), then
    # add(value, acc); get returns getResult(acc), or null when there is no accumulator.
    function = AverageAggregate()
    backend = make_backend(map_kind)
    state = backend.get_aggregating_state(aggregating_state("a", function))
    backend.set_current_key("k")
    assert state.get() is None
    state.add(2)
    state.add(4)
    state.add(9)
    assert state.get() == 5.0
    assert function.created == 1
    assert stored(backend, "a") == {("k", VOID_NAMESPACE): [15, 3]}
    backend.set_current_key("other")
    assert state.get() is None
    state.add(1)
    assert state.get() == 1.0 and function.created == 2


def test_aggregating_state_add_none_clears(map_kind: MapKind) -> None:
    # HeapAggregatingState.add: "if (value == null) { clear(); return; }"
    function = AverageAggregate()
    backend = make_backend(map_kind)
    state = backend.get_aggregating_state(aggregating_state("a", function))
    backend.set_current_key("k")
    state.add(3)
    state.add(None)
    assert state.get() is None
    assert stored(backend, "a") == {}
    state.add(7)  # a fresh accumulator
    assert state.get() == 7.0 and function.created == 2
    state.clear()
    assert state.get() is None and stored(backend, "a") == {}


# -- namespaces (AbstractHeapState.setCurrentNamespace, StateTable) ----------------------------

NAMESPACE_CASES = [
    pytest.param("int64", 1, 2, id="int64"),
    pytest.param("tuple<int64,int64>", (0, 10), (10, 20), id="window-tuple"),
    pytest.param("string", "w1", "w2", id="string"),
]


def _descriptors(namespace_type: str) -> dict[StateKind, StateDescriptor]:
    return {
        StateKind.VALUE: value_state("v", namespace_type=namespace_type),
        StateKind.LIST: list_state("l", namespace_type=namespace_type),
        StateKind.MAP: map_state("m", "string", namespace_type=namespace_type),
        StateKind.REDUCING: reducing_state("r", concat, namespace_type=namespace_type),
        StateKind.AGGREGATING: aggregating_state("a", AverageAggregate(),
                                                 namespace_type=namespace_type),
    }


def _write(state: KeyedState, tag: int) -> None:
    """Write something that depends on ``tag`` to ``state``, whatever its kind."""
    if isinstance(state, ValueState):
        state.update(tag)
    elif isinstance(state, ListState):
        state.add_all([tag, tag + 1])
    elif isinstance(state, MapState):
        state.put(f"u{tag}", tag)
    elif isinstance(state, ReducingState):
        state.add(str(tag))
    elif isinstance(state, AggregatingState):
        state.add(tag)
    else:  # pragma: no cover - a new kind must be added here
        raise AssertionError(type(state))


def _read(state: KeyedState) -> Any:
    """Everything observable about ``state`` for the current key and namespace."""
    if isinstance(state, ValueState):
        return state.value()
    if isinstance(state, ListState):
        return state.get()
    if isinstance(state, MapState):
        return (state.items(), state.is_empty())
    if isinstance(state, ReducingState | AggregatingState):
        return state.get()
    raise AssertionError(type(state))  # pragma: no cover


_ABSENT: dict[type[KeyedState], Any] = {
    ValueState: None, ListState: [], MapState: ([], True), ReducingState: None,
    AggregatingState: None,
}


def _absent(state: KeyedState) -> Any:
    return _ABSENT[type(state)]


@pytest.mark.parametrize("kind", list(StateKind))
@pytest.mark.parametrize(("namespace_type", "ns_a", "ns_b"), NAMESPACE_CASES)
def test_namespaces_of_one_key_are_independent(map_kind: MapKind, kind: StateKind,
                                               namespace_type: str, ns_a: Any,
                                               ns_b: Any) -> None:
    # StateTable keys entries by (key, namespace): AbstractHeapState.currentNamespace selects.
    backend = make_backend(map_kind)
    state = backend.get_state(_descriptors(namespace_type)[kind])
    backend.set_current_key("k")
    state.set_current_namespace(ns_a)
    assert state.current_namespace == ns_a
    _write(state, 1)
    in_a = _read(state)
    assert in_a != _absent(state)
    state.set_current_namespace(ns_b)
    assert _read(state) == _absent(state)
    _write(state, 5)
    in_b = _read(state)
    assert in_b not in (in_a, _absent(state))
    state.set_current_namespace(ns_a)
    assert _read(state) == in_a
    assert set(stored(backend, state.name)) == {("k", ns_a), ("k", ns_b)}
    state.clear()  # clears namespace a only
    assert _read(state) == _absent(state)
    state.set_current_namespace(ns_b)
    assert _read(state) == in_b
    assert set(stored(backend, state.name)) == {("k", ns_b)}


def test_namespace_is_per_state(map_kind: MapKind) -> None:
    # Every InternalKvState has its own currentNamespace.
    backend = make_backend(map_kind)
    first = backend.get_value_state(value_state("first", namespace_type="int64"))
    second = backend.get_value_state(value_state("second", namespace_type="int64"))
    backend.set_current_key("k")
    first.set_current_namespace(1)
    second.set_current_namespace(2)
    first.update("f")
    second.update("s")
    assert stored(backend, "first") == {("k", 1): "f"}
    assert stored(backend, "second") == {("k", 2): "s"}


@pytest.mark.parametrize("kind", list(StateKind))
def test_set_current_namespace_none_raises(map_kind: MapKind, kind: StateKind) -> None:
    # AbstractHeapState.setCurrentNamespace / StateTable: "Provided namespace is null."
    backend = make_backend(map_kind)
    state = backend.get_state(_descriptors("int64")[kind])
    state.set_current_namespace(3)
    with pytest.raises(StatectlError):
        state.set_current_namespace(None)
    assert state.current_namespace == 3


@pytest.mark.parametrize(("namespace_type", "bad"), [
    ("int64", "1"), ("int64", 1.5), ("int64", True), ("int64", (1, 2)), ("int64", 2**63),
    ("int64", VOID_NAMESPACE),
    ("tuple<int64,int64>", (1,)), ("tuple<int64,int64>", (1, "a")), ("tuple<int64,int64>", [1, 2]),
    ("tuple<int64,int64>", 5), ("tuple<int64,int64>", (1, 2, 3)),
    ("void", 0), ("void", "VOID"), ("string", 7),
])
def test_namespace_of_the_wrong_type_raises(map_kind: MapKind, namespace_type: str,
                                            bad: Any) -> None:
    # The namespace serializer of the descriptor only accepts its own type.
    backend = make_backend(map_kind)
    state = backend.get_value_state(value_state("v", namespace_type=namespace_type))
    before = state.current_namespace
    with pytest.raises(StatectlError):
        state.set_current_namespace(bad)
    assert state.current_namespace is before


@pytest.mark.parametrize("kind", list(StateKind))
def test_namespaced_state_without_a_namespace_raises(map_kind: MapKind,
                                                     kind: StateKind) -> None:
    # AbstractHeapState starts with currentNamespace = null (only getPartitionedState sets the
    # void namespace, for void-namespaced states); StateTable then refuses the access with
    # "Provided namespace is null." The void namespace is not an int64, so it must never be
    # stored in an int64-namespaced table.
    backend = make_backend(map_kind)
    state = backend.get_state(_descriptors("int64")[kind])
    backend.set_current_key("k")
    with pytest.raises(StatectlError):
        _write(state, 1)
    assert stored(backend, state.name) == {}


def test_keys_per_namespace(map_kind: MapKind) -> None:
    # HeapKeyedStateBackend.getKeys(state, namespace): the keys with state in that namespace.
    backend = make_backend(map_kind)
    state = backend.get_list_state(list_state("l", namespace_type="tuple<int64,int64>"))
    expected: dict[tuple[int, int], set[str]] = {(0, 10): set(), (10, 20): set()}
    for i in range(40):
        key = f"key-{i}"
        backend.set_current_key(key)
        window = (0, 10) if i % 3 else (10, 20)
        state.set_current_namespace(window)
        state.add(i)
        expected[window].add(key)
        if i % 5 == 0:
            state.set_current_namespace((0, 10))
            state.add(-i)
            expected[(0, 10)].add(key)
    for window, keys in expected.items():
        listed = list(backend.keys("l", window))
        assert len(listed) == len(set(listed)) and set(listed) == keys
    assert list(backend.keys("l", (20, 30))) == []
    assert list(backend.keys("l")) == []  # nothing in the void namespace


def test_keys_of_void_namespace_and_after_clear(map_kind: MapKind) -> None:
    backend = make_backend(map_kind, "int32")
    state = backend.get_value_state(value_state("v"))
    for key in range(30):
        backend.set_current_key(key)
        state.update(key)
    assert sorted(backend.keys("v")) == list(range(30))
    assert sorted(backend.keys("v", VOID_NAMESPACE)) == list(range(30))
    for key in range(0, 30, 2):
        backend.set_current_key(key)
        state.clear()
    assert sorted(backend.keys("v")) == list(range(1, 30, 2))


# -- key context (HeapKeyedStateBackend, StateTable) -------------------------------------------

KEYLESS_OPERATIONS: list[tuple[StateKind, str, Callable[[Any], Any]]] = [
    (StateKind.VALUE, "value", lambda s: s.value()),
    (StateKind.VALUE, "update", lambda s: s.update(1)),
    (StateKind.VALUE, "clear", lambda s: s.clear()),
    (StateKind.LIST, "get", lambda s: s.get()),
    (StateKind.LIST, "add", lambda s: s.add(1)),
    (StateKind.LIST, "add_all", lambda s: s.add_all([1])),
    (StateKind.LIST, "update", lambda s: s.update([1])),
    (StateKind.LIST, "update-empty", lambda s: s.update([])),
    (StateKind.LIST, "clear", lambda s: s.clear()),
    (StateKind.MAP, "get", lambda s: s.get("a")),
    (StateKind.MAP, "put", lambda s: s.put("a", 1)),
    (StateKind.MAP, "put_all", lambda s: s.put_all({"a": 1})),
    (StateKind.MAP, "remove", lambda s: s.remove("a")),
    (StateKind.MAP, "contains", lambda s: s.contains("a")),
    (StateKind.MAP, "keys", lambda s: s.keys()),
    (StateKind.MAP, "values", lambda s: s.values()),
    (StateKind.MAP, "items", lambda s: s.items()),
    (StateKind.MAP, "is_empty", lambda s: s.is_empty()),
    (StateKind.MAP, "clear", lambda s: s.clear()),
    (StateKind.REDUCING, "get", lambda s: s.get()),
    (StateKind.REDUCING, "add", lambda s: s.add("x")),
    (StateKind.REDUCING, "clear", lambda s: s.clear()),
    (StateKind.AGGREGATING, "get", lambda s: s.get()),
    (StateKind.AGGREGATING, "add", lambda s: s.add(1)),
    (StateKind.AGGREGATING, "clear", lambda s: s.clear()),
]


@pytest.mark.parametrize(("kind", "operation"),
                         [pytest.param(k, op, id=f"{k.value}-{name}")
                          for k, name, op in KEYLESS_OPERATIONS])
def test_state_access_before_set_current_key_raises(map_kind: MapKind, kind: StateKind,
                                                    operation: Callable[[Any], Any]) -> None:
    # StateTable: "No key set. This method should not be called outside of a keyed context."
    backend = make_backend(map_kind)
    state = backend.get_state(_descriptors("void")[kind])
    with pytest.raises(StatectlError, match="No key set"):
        operation(state)
    assert stored(backend, state.name) == {}


def test_every_operation_kind_is_covered_by_the_keyless_test() -> None:
    assert {k for k, _, _ in KEYLESS_OPERATIONS} == set(StateKind)


def test_set_current_key_none_raises(map_kind: MapKind) -> None:
    # KeyGroupRangeAssignment.assignToKeyGroup: "Assigned key must not be null!"
    backend = make_backend(map_kind)
    state = backend.get_value_state(value_state("v"))
    with pytest.raises(StatectlError, match="must not be null"):
        backend.set_current_key(None)
    backend.set_current_key("k")
    state.update(1)
    with pytest.raises(StatectlError):
        backend.set_current_key(None)
    assert backend.current_key == "k" and state.value() == 1


@pytest.mark.parametrize(("key_type", "bad"), [
    ("int32", "1"), ("int32", 2**31), ("int32", -(2**31) - 1), ("int32", True), ("int32", 1.0),
    ("int64", 2**63), ("string", 1), ("string", b"x"),
])
def test_key_of_the_wrong_type_raises(map_kind: MapKind, key_type: str, bad: Any) -> None:
    # The key serializer decides the Java hash; a value that is not of the key type is refused.
    backend = make_backend(map_kind, key_type)
    with pytest.raises(StatectlError):
        backend.set_current_key(bad)


def _keys_by_key_group(key_type: str, max_parallelism: int,
                       candidates: Iterator[Any]) -> dict[int, list[Any]]:
    groups: dict[int, list[Any]] = {}
    for key in candidates:
        groups.setdefault(assign_to_key_group(key, max_parallelism, key_type), []).append(key)
    return groups


def test_key_outside_the_key_group_range_raises(map_kind: MapKind) -> None:
    # StateTable.getMapForKeyGroup -> KeyGroupRangeOffsets.newIllegalKeyGroupException:
    # "Key group %d is not in %s. Unless you're directly using low level state access APIs,
    # this is most likely caused by non-deterministic shuffle key (hashCode and equals ...)."
    key_range = compute_key_group_range_for_operator_index(MAX_P, 3, 1)  # [43, 85]
    backend = make_backend(map_kind, "int32", key_group_range=key_range)
    state = backend.get_value_state(value_state("v"))
    inside = outside = 0
    for key in range(200):
        key_group = assign_to_key_group(key, MAX_P, "int32")
        if key_group in key_range:
            backend.set_current_key(key)
            state.update(key)
            assert backend.current_key_group == key_group
            inside += 1
        else:
            with pytest.raises(KeyGroupError, match="non-deterministic") as caught:
                backend.set_current_key(key)
                state.update(key)
            assert str(key_group) in str(caught.value)
            outside += 1
    assert inside and outside
    assert sorted(stored(backend, "v")) == sorted(
        (k, VOID_NAMESPACE) for k in range(200) if assign_to_key_group(k, MAX_P, "int32")
        in key_range)


def test_keys_are_isolated(map_kind: MapKind) -> None:
    # Keys of the same key group share a map but never each other's state.
    backend = make_backend(map_kind, "int64", max_parallelism=4)
    value = backend.get_value_state(value_state("v"))
    lists = backend.get_list_state(list_state("l"))
    maps = backend.get_map_state(map_state("m", "int32"))
    keys = list(range(-50, 50)) + [2**40, -(2**40)]
    groups = _keys_by_key_group("int64", 4, iter(keys))
    assert max(len(g) for g in groups.values()) > 1  # some keys do share a key group
    for key in keys:
        backend.set_current_key(key)
        value.update(key * 10)
        lists.add_all([key, key])
        maps.put(key % 7, key)
    for key in keys:
        backend.set_current_key(key)
        assert value.value() == key * 10
        assert lists.get() == [key, key]
        assert maps.items() == [(key % 7, key)]
    backend.set_current_key(0)
    value.clear()
    lists.clear()
    maps.remove(0)
    for key in keys:
        if key == 0:
            continue
        backend.set_current_key(key)
        assert value.value() == key * 10 and lists.get() == [key, key]
        assert maps.get(key % 7) == key
    assert len(stored(backend, "v")) == len(keys) - 1


def test_entries_sit_in_the_map_of_their_key_group(map_kind: MapKind) -> None:
    # StateTable holds keyGroupedStateMaps[kg - range.start]; set_current_key picks the map.
    backend = make_backend(map_kind, "string")
    state = backend.get_value_state(value_state("v"))
    keys = [f"key-{i}" for i in range(300)]
    for key in keys:
        backend.set_current_key(key)
        assert backend.current_key_group == assign_to_key_group(key, MAX_P, "string")
        state.update(key)
    seen = 0
    for key_group, state_map in backend.table("v").items_by_key_group():
        for entry in state_map:
            assert assign_to_key_group(entry.key, MAX_P, "string") == key_group
            seen += 1
    assert seen == len(keys)


# -- registration (HeapKeyedStateBackend.createOrUpdateInternalState) -------------------------


@pytest.mark.parametrize("kind", list(StateKind))
def test_get_state_twice_returns_the_same_state(map_kind: MapKind, kind: StateKind) -> None:
    backend = make_backend(map_kind)
    descriptor = _descriptors("int64")[kind]
    state = backend.get_state(descriptor)
    getter = {
        StateKind.VALUE: backend.get_value_state, StateKind.LIST: backend.get_list_state,
        StateKind.MAP: backend.get_map_state, StateKind.REDUCING: backend.get_reducing_state,
        StateKind.AGGREGATING: backend.get_aggregating_state,
    }[kind]
    assert backend.get_state(descriptor) is state
    assert getter(descriptor) is state
    equal = StateDescriptor(descriptor.name, descriptor.kind, descriptor.value_type,
                            descriptor.user_key_type, descriptor.namespace_type,
                            reduce_function=descriptor.reduce_function,
                            aggregate_function=descriptor.aggregate_function)
    assert backend.get_state(equal) is state


@pytest.mark.parametrize("other", [
    pytest.param(list_state("s", "int64"), id="other-kind"),
    pytest.param(value_state("s", "string"), id="other-value-type"),
    pytest.param(value_state("s", "int64", namespace_type="int64"), id="other-namespace"),
    pytest.param(map_state("s", "int64", "int64"), id="map"),
])
def test_incompatible_re_registration_raises(map_kind: MapKind, other: StateDescriptor) -> None:
    # Flink refuses to re-register a state name with an incompatible kind or serializers.
    backend = make_backend(map_kind)
    state = backend.get_state(value_state("s", "int64"))
    with pytest.raises(StatectlError):
        backend.get_state(other)
    assert backend.get_state(value_state("s", "int64")) is state


def test_map_re_registration_with_another_user_key_type_raises(map_kind: MapKind) -> None:
    backend = make_backend(map_kind)
    backend.get_map_state(map_state("m", "string", "int64"))
    with pytest.raises(StatectlError):
        backend.get_map_state(map_state("m", "int32", "int64"))


@pytest.mark.parametrize(("descriptor_kind", "getter"), [
    (k, g) for k in StateKind
    for g in ("get_value_state", "get_list_state", "get_map_state", "get_reducing_state",
              "get_aggregating_state")
    if g.removeprefix("get_").removesuffix("_state") != k.value
])
def test_typed_getter_on_a_descriptor_of_another_kind_raises(map_kind: MapKind,
                                                             descriptor_kind: StateKind,
                                                             getter: str) -> None:
    backend = make_backend(map_kind)
    descriptor = _descriptors("void")[descriptor_kind]
    with pytest.raises(StatectlError):
        getattr(backend, getter)(descriptor)


def test_states_with_different_names_are_independent(map_kind: MapKind) -> None:
    backend = make_backend(map_kind)
    first = backend.get_value_state(value_state("first"))
    second = backend.get_value_state(value_state("second"))
    backend.set_current_key("k")
    first.update(1)
    assert second.value() is None
    second.update(2)
    assert first.value() == 1
    assert [d.name for d in backend.descriptors] == ["first", "second"]


def test_table_of_an_unknown_state_raises(map_kind: MapKind) -> None:
    backend = make_backend(map_kind)
    with pytest.raises(StatectlError):
        backend.table("nope")
    with pytest.raises(StatectlError):
        list(backend.keys("nope"))


# -- descriptors and backend construction -----------------------------------------------------


@pytest.mark.parametrize("build", [
    pytest.param(lambda: value_state(""), id="empty-name"),
    pytest.param(lambda: list_state(""), id="empty-name-list"),
    pytest.param(lambda: StateDescriptor("m", StateKind.MAP), id="map-without-user-key-type"),
    pytest.param(lambda: StateDescriptor("v", StateKind.VALUE, user_key_type="string"),
                 id="user-key-type-on-value"),
    pytest.param(lambda: StateDescriptor("r", StateKind.REDUCING), id="reducing-no-function"),
    pytest.param(lambda: StateDescriptor("a", StateKind.AGGREGATING),
                 id="aggregating-no-function"),
    pytest.param(lambda: value_state("v", "int33"), id="unknown-value-type"),
    pytest.param(lambda: value_state("v", "list<int32"), id="malformed-value-type"),
    pytest.param(lambda: list_state("l", namespace_type="window"), id="unknown-namespace-type"),
    pytest.param(lambda: map_state("m", "mystery"), id="unknown-user-key-type"),
    pytest.param(lambda: map_state("m", "string", "map<string>"), id="map-with-one-argument"),
])
def test_invalid_descriptors_raise(build: Callable[[], StateDescriptor]) -> None:
    with pytest.raises(StatectlError):
        build()


def test_unknown_map_kind_raises() -> None:
    unknown: Any = "hash"
    with pytest.raises(InvalidArgumentError, match="map kind"):
        HeapKeyedStateBackend("string", MAX_P, map_kind=unknown)


@pytest.mark.parametrize("key_type", ["int3", "list<"])
def test_unknown_key_type_raises(key_type: str) -> None:
    with pytest.raises(StatectlError):
        HeapKeyedStateBackend(key_type, MAX_P)


def test_key_group_range_beyond_max_parallelism_raises(map_kind: MapKind) -> None:
    with pytest.raises(KeyGroupError):
        make_backend(map_kind, key_group_range=KeyGroupRange(0, MAX_P))


def test_default_range_covers_every_key_group(map_kind: MapKind) -> None:
    backend = make_backend(map_kind, max_parallelism=10)
    assert backend.key_group_range == KeyGroupRange(0, 9)
    backend.get_value_state(value_state("v"))
    assert [kg for kg, _ in backend.table("v").items_by_key_group()] == list(range(10))


# -- differential: both map kinds against a pure-dict model -----------------------------------

KEYS = [f"k{i}" for i in range(12)]
WINDOWS = [0, 1, 2]
USER_KEYS = ["a", "b", "c", "d"]


def _reduce_mod(a: int, b: int) -> int:
    return (a * 31 + b) % 1_000_003  # not commutative


DIFF_DESCRIPTORS = [
    value_state("value", "int64"),
    value_state("value_ns", "int64", namespace_type="int64"),
    list_state("list", "int64"),
    list_state("list_ns", "int64", namespace_type="int64"),
    map_state("map", "string", "int64"),
    map_state("map_ns", "string", "int64", namespace_type="int64"),
    reducing_state("reducing", _reduce_mod, "int64"),
    reducing_state("reducing_ns", _reduce_mod, "int64", namespace_type="int64"),
    aggregating_state("aggregating", AverageAggregate()),
    aggregating_state("aggregating_ns", AverageAggregate(), namespace_type="int64"),
]

Model = dict[str, dict[tuple[Any, Any], Any]]


class ModelBackend:
    """The same API as the subset exercised, over plain dicts (Flink's semantics, no maps)."""

    def __init__(self) -> None:
        self.data: Model = {d.name: {} for d in DIFF_DESCRIPTORS}
        self.namespaces: dict[str, Any] = {d.name: VOID_NAMESPACE for d in DIFF_DESCRIPTORS}
        # (namespaced states get their first namespace from the test before any access)
        self.key: Any = None

    def slot(self, name: str) -> tuple[dict[tuple[Any, Any], Any], tuple[Any, Any]]:
        return self.data[name], (self.key, self.namespaces[name])


def _apply(op: tuple[Any, ...], backend: HeapKeyedStateBackend[Any] | None,
           model: ModelBackend | None) -> Any:
    """Run ``op`` on a real backend (``backend``) or on the model; return what is observable."""
    name, action, *args = op
    if name == "$key":
        if backend is not None:
            backend.set_current_key(args[0])
        else:
            assert model is not None
            model.key = args[0]
        return None
    if backend is not None:
        state: Any = backend.get_state(next(d for d in DIFF_DESCRIPTORS if d.name == name))
        if action == "namespace":
            state.set_current_namespace(args[0])
            return None
        if action == "$keys":
            return sorted(backend.keys(name, args[0]))
        result = getattr(state, action)(*args)
        if isinstance(result, list):
            returned = copy.deepcopy(result)
            result.append("mutated by caller")  # the state must not see this
            return returned
        return result
    assert model is not None
    if action == "namespace":
        model.namespaces[name] = args[0]
        return None
    if action == "$keys":
        return sorted(k for (k, ns) in model.data[name] if ns == args[0])
    table, slot = model.slot(name)
    current = table.get(slot)
    kind = next(d for d in DIFF_DESCRIPTORS if d.name == name).kind
    if action == "clear":
        table.pop(slot, None)
        return None
    if kind is StateKind.VALUE:
        if action == "value":
            return current
        if args[0] is None:
            table.pop(slot, None)
        else:
            table[slot] = args[0]
        return None
    if kind is StateKind.LIST:
        if action == "get":
            return list(current or [])
        values = [args[0]] if action == "add" else list(args[0])
        if action == "update":
            if values:
                table[slot] = values
            else:
                table.pop(slot, None)
        elif values:
            table[slot] = (current or []) + values
        return None
    if kind is StateKind.MAP:
        user_map = current or {}
        if action == "get":
            return user_map.get(args[0])
        if action == "contains":
            return args[0] in user_map
        if action == "items":
            return list(user_map.items())
        if action == "keys":
            return list(user_map)
        if action == "values":
            return list(user_map.values())
        if action == "is_empty":
            return not user_map
        if action == "put":
            table[slot] = {**user_map, args[0]: args[1]}
        elif action == "put_all":
            if args[0]:
                table[slot] = {**user_map, **args[0]}
        elif action == "remove":
            if current is not None:
                rest = {k: v for k, v in user_map.items() if k != args[0]}
                if rest:
                    table[slot] = rest
                else:
                    table.pop(slot)
        return None
    if kind is StateKind.REDUCING:
        if action == "get":
            return current
        if args[0] is None:
            table.pop(slot, None)
        else:
            table[slot] = args[0] if current is None else _reduce_mod(current, args[0])
        return None
    assert kind is StateKind.AGGREGATING
    if action == "get":
        return None if current is None else current[0] / current[1]
    if args[0] is None:
        table.pop(slot, None)
    else:
        acc = current or [0, 0]
        table[slot] = [acc[0] + args[0], acc[1] + 1]
    return None


def _random_op(rng: random.Random) -> tuple[Any, ...]:
    roll = rng.random()
    if roll < 0.12:
        return ("$key", "set", rng.choice(KEYS))
    descriptor = rng.choice(DIFF_DESCRIPTORS)
    name = descriptor.name
    namespaced = descriptor.namespace_type != "void"
    if namespaced and roll < 0.22:
        return (name, "namespace", rng.choice(WINDOWS))
    if roll < 0.26:
        return (name, "$keys", rng.choice(WINDOWS) if namespaced else VOID_NAMESPACE)
    if roll < 0.30:
        return (name, "clear")
    small = rng.randrange(-5, 50)
    maybe_none = None if rng.random() < 0.1 else small
    kind = descriptor.kind
    if kind is StateKind.VALUE:
        return rng.choice([(name, "value"), (name, "update", maybe_none)])
    if kind is StateKind.LIST:
        values = [rng.randrange(100) for _ in range(rng.randrange(4))]
        return rng.choice([(name, "get"), (name, "add", small), (name, "add_all", values),
                           (name, "update", values)])
    if kind is StateKind.MAP:
        user_key = rng.choice(USER_KEYS)
        entries = {rng.choice(USER_KEYS): rng.randrange(100) for _ in range(rng.randrange(3))}
        return rng.choice([
            (name, "get", user_key), (name, "contains", user_key), (name, "items"),
            (name, "keys"), (name, "values"), (name, "is_empty"), (name, "put", user_key, small),
            (name, "put_all", entries), (name, "remove", user_key), (name, "remove", user_key),
        ])
    return rng.choice([(name, "get"), (name, "add", maybe_none), (name, "add", small)])


def _snapshot_contents(snapshot: Any) -> Model:
    out: Model = {d.name: {} for d in DIFF_DESCRIPTORS}
    for block in snapshot:
        for entry in block.entries:
            assert entry.key is not None
            out[block.state_name][(entry.key, entry.namespace)] = copy.deepcopy(entry.state)
    return out


def _live_contents(backend: HeapKeyedStateBackend[Any]) -> Model:
    return {d.name: stored(backend, d.name) for d in DIFF_DESCRIPTORS}


@pytest.mark.parametrize("seed", range(12))
def test_random_operations_agree_on_both_map_kinds_and_the_model(seed: int) -> None:
    rng = random.Random(seed)
    backends = {kind: make_backend(kind, max_parallelism=8) for kind in MAP_KINDS}
    for backend in backends.values():
        for descriptor in DIFF_DESCRIPTORS:
            backend.get_state(descriptor)
    model = ModelBackend()
    initial = [("$key", "set", KEYS[0])] + [
        (d.name, "namespace", WINDOWS[0]) for d in DIFF_DESCRIPTORS if d.namespace_type != "void"]
    for op in initial:
        for backend in backends.values():
            _apply(op, backend, None)
        _apply(op, None, model)
    # (model copy at the call, one snapshot per map kind): consumed a few hundred ops later
    open_snapshots: list[tuple[Model, dict[MapKind, Any]]] = []
    for step in range(400):
        op = _random_op(rng)
        results = {kind: _apply(op, backend, None) for kind, backend in backends.items()}
        expected = _apply(op, None, model)
        assert results == {kind: expected for kind in MAP_KINDS}, (
            f"seed {seed} step {step}: {op!r} gave {results}, model {expected!r}")
        if rng.random() < 0.03 and len(open_snapshots) < 3:
            open_snapshots.append((copy.deepcopy(model.data),
                                   {k: b.snapshot() for k, b in backends.items()}))
        if open_snapshots and rng.random() < 0.02:
            at_call, snapshots = open_snapshots.pop(rng.randrange(len(open_snapshots)))
            for kind, snapshot in snapshots.items():
                assert _snapshot_contents(snapshot) == at_call, f"seed {seed} {kind} snapshot"
        if step % 50 == 49:
            for kind, backend in backends.items():
                assert _live_contents(backend) == model.data, f"seed {seed} step {step} {kind}"
    for at_call, snapshots in open_snapshots:
        for kind, snapshot in snapshots.items():
            assert _snapshot_contents(snapshot) == at_call, f"seed {seed} {kind} final snapshot"
    for kind, backend in backends.items():
        assert _live_contents(backend) == model.data, f"seed {seed} {kind} at the end"
    assert any(model.data.values()), "the sequence left no state at all"
