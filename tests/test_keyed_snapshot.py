"""Keyed snapshots (issue 3, scope item 4): isolation, order and release, on both map kinds.

``HeapKeyedStateBackend.snapshot()`` must yield, key group by key group (ascending) and state by
state (ascending name), exactly the entries stored at the call, while the owner thread keeps
writing and another thread consumes it; it releases each key group's map snapshots once the
iteration has moved past that group, and everything on ``close()``.

* A hypothesis state machine drives a five-state backend (value, list, map, reducing,
  aggregating; TTL on list, map and reducing; namespaces on value and aggregating) while up to
  four snapshots are open, consumed piecemeal on other threads, finished or closed half-way. The
  model is what the maps physically store (TTL values as ``TtlValue(value, timestamp)``). The
  clock moves, but the TTL (10**12 ms) never expires anything, so incremental cleanup never
  changes stored state and ``on_read_and_write`` reads re-stamp (rewrite) entries under the
  open snapshots. After every step, every copy-on-write map pins exactly the snapshots that have
  not moved past its key group; after the run, nothing is pinned.
* Examples: mutate after a snapshot, release per key group, ``close()`` / ``with`` /
  abandoning mid-way, a second iteration, full-snapshot TTL cleanup.
* A concurrency run: the owner writes many rounds while a reader thread consumes (or abandons)
  every snapshot, with a short switch interval to interleave the two.
"""

from __future__ import annotations

import gc
import operator
import queue
import random
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from statecore.copy_on_write_state_map import CopyOnWriteStateMap
from statecore.errors import KeyGroupError, SnapshotReleasedError, StatectlError, StateMapError
from statecore.key_groups import KeyGroupRange, assign_to_key_group
from statecore.keyed_backend import (
    HeapKeyedStateBackend,
    KeyedStateSnapshot,
    KeyGroupStateBlock,
    MapKind,
)
from statecore.keyed_state import (
    AggregatingState,
    ListState,
    MapState,
    ReducingState,
    ValueState,
    aggregating_state,
    list_state,
    map_state,
    reducing_state,
    value_state,
)
from statecore.serializers import VOID_NAMESPACE
from statecore.ttl import IncrementalCleanup, ManualClock, TtlConfig, TtlValue, UpdateType

MAX_PARALLELISM = 16
KEY_POOL = tuple(f"k{i}" for i in range(40))
FULL_RANGE = KeyGroupRange(0, MAX_PARALLELISM - 1)
SUB_RANGE = KeyGroupRange(4, 11)  # groups 4 and 11 hold no pool key: empty blocks too
MAP_KINDS: tuple[MapKind, ...] = ("copy_on_write", "nested")

#: Never reached by the clock in these tests: nothing expires, so stored state is exactly the
#: model (incremental cleanup finds nothing to drop; full-snapshot cleanup is off).
NEVER_EXPIRES = 10**12
READ_AND_WRITE_TTL = TtlConfig(NEVER_EXPIRES, UpdateType.ON_READ_AND_WRITE)
WRITE_TTL = TtlConfig(NEVER_EXPIRES)

#: (state name, key group, key, namespace) -> what the map stores.
ModelKey = tuple[str, int, str, Any]
#: (key group, state name, ((key, namespace, canonical state), ...)) as a consumer saw it.
SeenBlock = tuple[int, str, tuple[tuple[str, Any, Any], ...]]


class CountSum:
    """Aggregate function with a (count, sum) tuple accumulator; the result is the tuple."""

    def create_accumulator(self) -> tuple[int, int]:
        return (0, 0)

    def add(self, value: int, accumulator: tuple[int, int]) -> tuple[int, int]:
        return (accumulator[0] + 1, accumulator[1] + value)

    def get_result(self, accumulator: tuple[int, int]) -> tuple[int, int]:
        return accumulator

    def merge(self, a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
        return (a[0] + b[0], a[1] + b[1])


@dataclass
class Harness:
    backend: HeapKeyedStateBackend[str]
    clock: ManualClock
    agg: AggregatingState
    lst: ListState
    map: MapState
    reduce: ReducingState
    value: ValueState


STATE_NAMES = ("agg", "list", "map", "reduce", "value")


def make_harness(map_kind: MapKind, key_group_range: KeyGroupRange = FULL_RANGE,
                 max_parallelism: int = MAX_PARALLELISM) -> Harness:
    clock = ManualClock(1_000)
    backend: HeapKeyedStateBackend[str] = HeapKeyedStateBackend(
        "string", max_parallelism, key_group_range, map_kind=map_kind, clock=clock)
    # registered out of name order: blocks must still come in ascending state name order
    value = backend.get_value_state(value_state("value", "int64", namespace_type="int64"))
    reduce = backend.get_reducing_state(
        reducing_state("reduce", operator.add, "int64", ttl=WRITE_TTL))
    lst = backend.get_list_state(list_state("list", "int64", ttl=READ_AND_WRITE_TTL))
    agg = backend.get_aggregating_state(aggregating_state(
        "agg", CountSum(), "tuple<int64,int64>", namespace_type="string"))
    mp = backend.get_map_state(map_state("map", "string", "int64", ttl=READ_AND_WRITE_TTL))
    return Harness(backend, clock, agg, lst, mp, reduce, value)


def canon(value: Any) -> Any:
    """An immutable, type-exact form of a stored state (a deep copy that compares strictly)."""
    if isinstance(value, TtlValue):
        return ("ttl", canon(value.user_value), value.last_access_timestamp)
    if isinstance(value, list):
        return ("list", tuple(canon(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, canon(v)) for k, v in value.items())))
    if isinstance(value, tuple):
        return ("tuple", tuple(canon(v) for v in value))
    return (type(value).__name__, value)


def canon_model(model: dict[ModelKey, Any]) -> dict[ModelKey, Any]:
    return {k: canon(v) for k, v in model.items()}


def live_contents(backend: HeapKeyedStateBackend[str]) -> dict[ModelKey, Any]:
    """What the backend's maps store now, read through the tables (canonical)."""
    live: dict[ModelKey, Any] = {}
    for descriptor in backend.descriptors:
        for key_group, state_map in backend.table(descriptor.name).items_by_key_group():
            for e in state_map:
                live[(descriptor.name, key_group, e.key, e.namespace)] = canon(e.state)
    return live


def seen_block(block: KeyGroupStateBlock) -> SeenBlock:
    return (block.key_group, block.state_name,
            tuple((e.key, e.namespace, canon(e.state)) for e in block.entries))


def expected_order(key_group_range: KeyGroupRange,
                   names: tuple[str, ...] = STATE_NAMES) -> list[tuple[int, str]]:
    return [(kg, name) for kg in key_group_range for name in sorted(names)]


def check_blocks(blocks: list[SeenBlock], expected: dict[ModelKey, Any],
                 key_group_range: KeyGroupRange, *, complete: bool,
                 names: tuple[str, ...] = STATE_NAMES,
                 max_parallelism: int = MAX_PARALLELISM) -> None:
    """``blocks`` are (a prefix of) the snapshot of ``expected`` (a canonical model copy).

    Order: one block per key group and state, key groups ascending, then state names
    ascending. Content: every entry once, in its key's group, equal to the model copy, and
    every model entry of the blocks seen present.
    """
    order = [(kg, name) for kg, name, _ in blocks]
    full_order = expected_order(key_group_range, names)
    assert order == full_order[:len(order)]
    if complete:
        assert len(order) == len(full_order)
    seen: dict[ModelKey, Any] = {}
    for key_group, name, entries in blocks:
        for key, namespace, state in entries:
            assert assign_to_key_group(key, max_parallelism, "string") == key_group, key
            model_key = (name, key_group, key, namespace)
            assert model_key not in seen, f"{model_key} yielded twice"
            seen[model_key] = state
    covered = set(order)
    assert seen == {k: v for k, v in expected.items() if (k[1], k[0]) in covered}


def on_other_thread(action: Callable[[], None]) -> None:
    """Run ``action`` on a new thread, wait for it, re-raise what it raised."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            action()
        except BaseException as exc:  # re-raised on the calling thread
            errors.append(exc)

    thread = threading.Thread(target=run, name="snapshot-consumer")
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive(), "consumer thread hung"
    if errors:
        raise errors[0]


def cow_maps(backend: HeapKeyedStateBackend[str]
             ) -> Iterator[tuple[str, int, int, CopyOnWriteStateMap[Any, Any, Any]]]:
    """(state name, index in the range, key group, map) of every copy-on-write map."""
    for descriptor in backend.descriptors:
        for index, (key_group, state_map) in enumerate(
                backend.table(descriptor.name).items_by_key_group()):
            assert isinstance(state_map, CopyOnWriteStateMap)
            yield descriptor.name, index, key_group, state_map


def assert_nothing_pinned(backend: HeapKeyedStateBackend[str]) -> None:
    if backend.map_kind != "copy_on_write":
        return
    for name, _, key_group, state_map in cow_maps(backend):
        assert state_map.snapshot_versions == (), (name, key_group)
        assert state_map.highest_required_snapshot_version == 0, (name, key_group)


def pinned_groups(backend: HeapKeyedStateBackend[str]) -> dict[int, int]:
    """Key group -> number of snapshot versions pinned in it (the same in every state's map)."""
    counts: dict[int, set[int]] = {}
    for _, _, key_group, state_map in cow_maps(backend):
        counts.setdefault(key_group, set()).add(len(state_map.snapshot_versions))
    assert all(len(c) == 1 for c in counts.values()), counts
    return {kg: c.pop() for kg, c in counts.items()}


# -- the state machine ------------------------------------------------------------------------

INT64 = st.integers(-(2**63), 2**63 - 1)
SMALL = st.integers(-1000, 1000)
VALUE_NAMESPACES = st.integers(0, 3)
AGG_NAMESPACES = st.sampled_from(["w1", "w2"])
USER_KEYS = st.sampled_from(["a", "b", "c", "d"])
PICK = st.integers(0, 99)
MAX_OPEN = 4


@dataclass
class OpenSnapshot:
    """A snapshot under test: the model copy at its call and what its consumers saw so far."""

    snapshot: KeyedStateSnapshot
    expected: dict[ModelKey, Any]
    blocks: list[SeenBlock] = field(default_factory=list)
    iterator: Iterator[KeyGroupStateBlock] | None = None
    exhausted: bool = False

    def pull(self, count: int | None) -> None:
        """Take up to ``count`` more blocks (all with ``None``); runs on a consumer thread."""
        assert threading.current_thread() is not threading.main_thread()
        if self.iterator is None:
            self.iterator = iter(self.snapshot)
        taken = 0
        while count is None or taken < count:
            try:
                block = next(self.iterator)
            except StopIteration:
                self.exhausted = True
                return
            self.blocks.append(seen_block(block))
            taken += 1

    def released_groups(self, states: int) -> int:
        """How many key groups (from the range's start) the iteration has moved past."""
        return (len(self.blocks) - 1) // states if self.blocks else 0


class KeyedSnapshotMachine(RuleBasedStateMachine):
    map_kind: MapKind = "copy_on_write"
    key_group_range = FULL_RANGE

    def __init__(self) -> None:
        super().__init__()
        self.h = make_harness(self.map_kind, self.key_group_range)
        groups = {k: assign_to_key_group(k, MAX_PARALLELISM, "string") for k in KEY_POOL}
        self.in_range = [k for k in KEY_POOL if groups[k] in self.key_group_range]
        self.out_of_range = [k for k in KEY_POOL if groups[k] not in self.key_group_range]
        self.key: str | None = None
        self.key_group = -1
        self.model: dict[ModelKey, Any] = {}
        self.open: list[OpenSnapshot] = []

    # -- key context and clock

    @initialize(pick=PICK)
    def first_key(self, pick: int) -> None:
        self.set_key(pick)

    @rule(pick=PICK)
    def set_key(self, pick: int) -> None:
        key = self.in_range[pick % len(self.in_range)]
        self.h.backend.set_current_key(key)
        self.key, self.key_group = key, assign_to_key_group(key, MAX_PARALLELISM, "string")
        assert self.h.backend.current_key_group == self.key_group

    @precondition(lambda self: self.out_of_range)
    @rule(pick=PICK)
    def set_key_out_of_range(self, pick: int) -> None:
        refused = self.out_of_range[pick % len(self.out_of_range)]
        with pytest.raises(KeyGroupError, match="non-deterministic"):
            self.h.backend.set_current_key(refused)
        assert self.h.backend.current_key != refused
        assert self.key is not None
        self.set_key(self.in_range.index(self.key))  # back to the model's key

    @rule(millis=st.integers(1, 1_000))
    def advance_clock(self, millis: int) -> None:
        self.h.clock.advance(millis)

    def _at(self, name: str, namespace: Any = VOID_NAMESPACE) -> ModelKey:
        assert self.key is not None
        return (name, self.key_group, self.key, namespace)

    def _stamp(self, value: Any) -> TtlValue[Any]:
        return TtlValue(value, self.h.clock.now)

    # -- state operations: one rule per state, the operation drawn (so that the snapshot rules
    # -- keep a fair share of the steps)

    @rule(op=st.sampled_from(["update", "read", "clear"]), ns=VALUE_NAMESPACES,
          value=st.none() | INT64)
    def value_op(self, op: str, ns: int, value: int | None) -> None:
        """Value state (int64 namespace, no TTL); ``update(None)`` clears."""
        state, at = self.h.value, self._at("value", ns)
        state.set_current_namespace(ns)
        if op == "update":
            state.update(value)
            if value is None:
                self.model.pop(at, None)
            else:
                self.model[at] = value
        elif op == "read":
            assert state.value() == self.model.get(at)
        else:
            state.clear()
            self.model.pop(at, None)

    @rule(start=st.integers(0, 150), count=st.integers(1, 120), value=SMALL)
    def value_fill(self, start: int, count: int, value: int) -> None:
        """Many namespaces of one key: its group's map grows (incremental rehash) under pins."""
        for ns in range(start, start + count):
            self.h.value.set_current_namespace(ns)
            self.h.value.update(value + ns)
            self.model[self._at("value", ns)] = value + ns

    @rule(op=st.sampled_from(["add", "add_all", "update", "get", "clear"]),
          values=st.lists(INT64, max_size=3))
    def list_op(self, op: str, values: list[int]) -> None:
        """List state, TTL ``on_read_and_write``: ``get`` re-stamps (rewrites) every element."""
        state, at = self.h.lst, self._at("list")
        if op == "add":
            value = values[0] if values else 0
            state.add(value)
            self.model.setdefault(at, []).append(self._stamp(value))
        elif op == "add_all":
            state.add_all(values)  # nothing for an empty list
            if values:
                self.model.setdefault(at, []).extend(map(self._stamp, values))
        elif op == "update":
            state.update(values)  # an empty list clears
            if values:
                self.model[at] = [self._stamp(v) for v in values]
            else:
                self.model.pop(at, None)
        elif op == "get":
            got = state.get()
            stored = self.model.get(at)
            assert got == [e.user_value for e in stored or []]
            if stored:
                self.model[at] = [self._stamp(e.user_value) for e in stored]
            got.append(-1)  # a new list: changing it changes nothing stored
        else:
            state.clear()
            self.model.pop(at, None)

    @rule(op=st.sampled_from(["put", "put_all", "remove", "get", "contains", "items", "keys",
                              "values", "is_empty", "clear"]),
          user_key=USER_KEYS, value=INT64, entries=st.dictionaries(USER_KEYS, INT64, max_size=3))
    def map_op(self, op: str, user_key: str, value: int, entries: dict[str, int]) -> None:
        """Map state, TTL ``on_read_and_write``: reads re-stamp the values they return."""
        state, at = self.h.map, self._at("map")
        stored: dict[str, TtlValue[Any]] | None = self.model.get(at)
        if op == "put":
            state.put(user_key, value)
            self.model.setdefault(at, {})[user_key] = self._stamp(value)
        elif op == "put_all":
            state.put_all(entries)  # nothing for an empty dict
            if entries:
                self.model.setdefault(at, {}).update(
                    {k: self._stamp(v) for k, v in entries.items()})
        elif op == "remove":
            state.remove(user_key)
            if stored is not None:
                stored.pop(user_key, None)
                if not stored:  # removing the last entry clears the state
                    del self.model[at]
        elif op in ("get", "contains"):
            hit = None if stored is None else stored.get(user_key)
            if op == "contains":
                assert state.contains(user_key) == (hit is not None)
            else:
                assert state.get(user_key) == (None if hit is None else hit.user_value)
            if stored is not None and hit is not None:
                stored[user_key] = self._stamp(hit.user_value)
        elif op in ("items", "keys", "values"):
            items = sorted((k, v.user_value) for k, v in (stored or {}).items())
            got: list[Any] = getattr(state, op)()
            expected = {"items": items, "keys": [k for k, _ in items],
                        "values": sorted(v for _, v in items)}[op]
            assert sorted(got) == expected
            got.append(None)  # a new list: changing it changes nothing stored
            for k, v in (stored or {}).items():
                stored[k] = self._stamp(v.user_value)  # type: ignore[index]
        elif op == "is_empty":
            assert state.is_empty() == (stored is None)
        else:
            state.clear()
            self.model.pop(at, None)

    @rule(op=st.sampled_from(["add", "get", "clear"]), value=st.none() | SMALL)
    def reduce_op(self, op: str, value: int | None) -> None:
        """Reducing state (sum), TTL ``on_create_and_write``: ``get`` does not re-stamp."""
        state, at = self.h.reduce, self._at("reduce")
        old = self.model.get(at)
        if op == "add":
            state.add(value)  # None clears
            if value is None:
                self.model.pop(at, None)
            else:
                self.model[at] = self._stamp(value if old is None else old.user_value + value)
        elif op == "get":
            assert state.get() == (None if old is None else old.user_value)
        else:
            state.clear()
            self.model.pop(at, None)

    @rule(op=st.sampled_from(["add", "get", "clear"]), ns=AGG_NAMESPACES,
          value=st.none() | SMALL)
    def agg_op(self, op: str, ns: str, value: int | None) -> None:
        """Aggregating state ((count, sum) accumulator, string namespace, no TTL)."""
        state, at = self.h.agg, self._at("agg", ns)
        state.set_current_namespace(ns)
        if op == "add":
            state.add(value)  # None clears
            if value is None:
                self.model.pop(at, None)
            else:
                count, total = self.model.get(at, (0, 0))
                self.model[at] = (count + 1, total + value)
        elif op == "get":
            assert state.get() == self.model.get(at)
        else:
            state.clear()
            self.model.pop(at, None)

    # -- snapshots

    @precondition(lambda self: len(self.open) < MAX_OPEN)
    @rule()
    def take_snapshot(self) -> None:
        snapshot = self.h.backend.snapshot()
        assert not snapshot.released
        self.open.append(OpenSnapshot(snapshot, canon_model(self.model)))

    def _finish(self, entry: OpenSnapshot) -> None:
        self.open.remove(entry)
        assert entry.snapshot.released
        check_blocks(entry.blocks, entry.expected, self.key_group_range, complete=True)

    @precondition(lambda self: self.open)
    @rule(pick=PICK, count=st.integers(1, 12))
    def consume_some(self, pick: int, count: int) -> None:
        entry = self.open[pick % len(self.open)]
        on_other_thread(lambda: entry.pull(count))
        if entry.exhausted:
            self._finish(entry)
        else:
            check_blocks(entry.blocks, entry.expected, self.key_group_range, complete=False)

    @precondition(lambda self: self.open)
    @rule(pick=PICK)
    def consume_rest(self, pick: int) -> None:
        entry = self.open[pick % len(self.open)]
        on_other_thread(lambda: entry.pull(None))
        assert entry.exhausted
        self._finish(entry)

    @precondition(lambda self: self.open)
    @rule(pick=PICK, on_consumer_thread=st.booleans())
    def close_snapshot(self, pick: int, on_consumer_thread: bool) -> None:
        """Abandon a snapshot (not started, or half-way) with ``close()``."""
        entry = self.open.pop(pick % len(self.open))
        if on_consumer_thread:
            on_other_thread(entry.snapshot.close)
        else:
            entry.snapshot.close()
        assert entry.snapshot.released
        entry.snapshot.close()  # again: nothing happens
        check_blocks(entry.blocks, entry.expected, self.key_group_range, complete=False)
        total = len(expected_order(self.key_group_range))
        if entry.iterator is not None and len(entry.blocks) < total:
            with pytest.raises(SnapshotReleasedError):  # a released snapshot cannot be read
                next(entry.iterator)

    # -- invariants

    @invariant()
    def backend_equals_model(self) -> None:
        assert live_contents(self.h.backend) == canon_model(self.model)

    @invariant()
    def pins_follow_open_snapshots(self) -> None:
        """Each map pins the open snapshots that have not moved past its key group."""
        for entry in self.open:
            assert not entry.snapshot.released
        if self.map_kind != "copy_on_write":
            return
        states = len(STATE_NAMES)
        for name, index, key_group, state_map in cow_maps(self.h.backend):
            pinned = sum(1 for e in self.open if e.released_groups(states) <= index)
            assert len(state_map.snapshot_versions) == pinned, (name, key_group)
            assert state_map.highest_required_snapshot_version == max(
                state_map.snapshot_versions, default=0), (name, key_group)

    def teardown(self) -> None:
        for entry in self.open:
            entry.snapshot.close()
            assert entry.snapshot.released
        self.open.clear()
        assert_nothing_pinned(self.h.backend)


_MACHINE_SETTINGS = settings(max_examples=50, stateful_step_count=60, deadline=None)


class CowFullRangeMachine(KeyedSnapshotMachine):
    map_kind = "copy_on_write"
    key_group_range = FULL_RANGE


class CowSubRangeMachine(KeyedSnapshotMachine):
    map_kind = "copy_on_write"
    key_group_range = SUB_RANGE


class NestedFullRangeMachine(KeyedSnapshotMachine):
    map_kind = "nested"
    key_group_range = FULL_RANGE


class NestedSubRangeMachine(KeyedSnapshotMachine):
    map_kind = "nested"
    key_group_range = SUB_RANGE


TestCowFullRange = CowFullRangeMachine.TestCase
TestCowFullRange.settings = _MACHINE_SETTINGS
TestCowSubRange = CowSubRangeMachine.TestCase
TestCowSubRange.settings = _MACHINE_SETTINGS
TestNestedFullRange = NestedFullRangeMachine.TestCase
TestNestedFullRange.settings = _MACHINE_SETTINGS
TestNestedSubRange = NestedSubRangeMachine.TestCase
TestNestedSubRange.settings = _MACHINE_SETTINGS


# -- examples -----------------------------------------------------------------------------------


def fill_every_state(h: Harness, keys: list[str]) -> None:
    for i, key in enumerate(keys):
        h.backend.set_current_key(key)
        h.value.set_current_namespace(i % 3)
        h.value.update(i)
        h.lst.add_all([i, i + 1])
        h.map.put_all({"a": i, "b": -i})
        h.reduce.add(i)
        h.agg.set_current_namespace("w1")
        h.agg.add(i)


def consume_on_other_thread(snapshot: KeyedStateSnapshot) -> list[SeenBlock]:
    blocks: list[SeenBlock] = []
    on_other_thread(lambda: blocks.extend(seen_block(b) for b in snapshot))
    return blocks


@pytest.mark.parametrize("map_kind", MAP_KINDS)
def test_snapshot_then_mutate_then_consume_yields_the_old_values(map_kind: MapKind) -> None:
    h = make_harness(map_kind)
    keys = list(KEY_POOL)
    fill_every_state(h, keys)
    before = live_contents(h.backend)
    snapshot = h.backend.snapshot()
    h.clock.advance(10)
    for i, key in enumerate(keys):  # rewrite, grow, shrink and clear under the snapshot
        h.backend.set_current_key(key)
        h.value.set_current_namespace(i % 3)
        if i % 2:
            h.value.update(i + 1000)
        else:
            h.value.clear()
        h.lst.add(7)
        h.lst.get()  # on_read_and_write: re-stamps every element
        h.map.put("c", 3)
        h.map.remove("a")
        h.map.get("b")  # re-stamps "b"
        h.reduce.add(5)
        h.agg.set_current_namespace("w1")
        h.agg.add(1)
        h.agg.set_current_namespace("w2")
        h.agg.add(2)
    after = live_contents(h.backend)
    assert after != before
    blocks = consume_on_other_thread(snapshot)
    check_blocks(blocks, before, FULL_RANGE, complete=True)
    assert snapshot.released
    assert live_contents(h.backend) == after
    assert_nothing_pinned(h.backend)


@pytest.mark.parametrize("key_group_range", [FULL_RANGE, SUB_RANGE], ids=["full", "sub"])
def test_each_key_group_is_released_once_the_iteration_moves_past_it(
        key_group_range: KeyGroupRange) -> None:
    h = make_harness("copy_on_write", key_group_range)
    keys = [k for k in KEY_POOL
            if assign_to_key_group(k, MAX_PARALLELISM, "string") in key_group_range]
    fill_every_state(h, keys)
    groups = list(key_group_range)
    snapshot = h.backend.snapshot()
    other = h.backend.snapshot()  # a second open snapshot keeps its own pins throughout
    assert pinned_groups(h.backend) == dict.fromkeys(groups, 2)
    iterator = iter(snapshot)
    states = len(STATE_NAMES)
    for pulled in range(1, len(groups) * states + 1):
        block = next(iterator)
        index = (pulled - 1) // states
        assert block.key_group == groups[index]
        # groups before the current one are released; the current one is still held (its
        # last block may still be being written), and so are the later ones
        assert pinned_groups(h.backend) == {
            kg: 1 if i < index else 2 for i, kg in enumerate(groups)}
        assert not snapshot.released
    with pytest.raises(StopIteration):
        next(iterator)
    assert snapshot.released
    assert pinned_groups(h.backend) == dict.fromkeys(groups, 1)
    other.close()
    assert_nothing_pinned(h.backend)


@pytest.mark.parametrize("map_kind", MAP_KINDS)
def test_close_mid_way_releases_everything(map_kind: MapKind) -> None:
    h = make_harness(map_kind)
    fill_every_state(h, list(KEY_POOL))
    snapshot = h.backend.snapshot()
    iterator = iter(snapshot)
    first = [seen_block(next(iterator)) for _ in range(len(STATE_NAMES) * 3 + 2)]
    snapshot.close()
    assert snapshot.released
    assert_nothing_pinned(h.backend)
    with pytest.raises(SnapshotReleasedError):
        next(iterator)
    check_blocks(first, live_contents(h.backend), FULL_RANGE, complete=False)


@pytest.mark.parametrize("map_kind", MAP_KINDS)
def test_leaving_a_with_block_or_abandoning_the_iterator_releases_everything(
        map_kind: MapKind) -> None:
    h = make_harness(map_kind)
    fill_every_state(h, list(KEY_POOL))
    with h.backend.snapshot() as snapshot:
        held = iter(snapshot)  # kept alive: only leaving the block releases
        next(held)
        assert not snapshot.released
    assert snapshot.released
    assert_nothing_pinned(h.backend)
    with pytest.raises(SnapshotReleasedError):
        next(held)

    abandoned = h.backend.snapshot()
    iterator = iter(abandoned)
    next(iterator)
    next(iterator)
    del iterator  # the generator is closed: its finally releases the rest
    gc.collect()
    assert abandoned.released
    assert_nothing_pinned(h.backend)


@pytest.mark.parametrize("map_kind", MAP_KINDS)
def test_a_snapshot_is_iterated_once(map_kind: MapKind) -> None:
    h = make_harness(map_kind)
    fill_every_state(h, list(KEY_POOL))
    expected = live_contents(h.backend)
    snapshot = h.backend.snapshot()
    iterator = iter(snapshot)
    blocks = [seen_block(next(iterator))]
    with pytest.raises(StateMapError, match="iterated once") as refused:
        next(iter(snapshot))
    assert isinstance(refused.value, StatectlError)
    # the refused second iteration released nothing: the first one carries on intact
    assert not snapshot.released
    blocks += map(seen_block, iterator)
    check_blocks(blocks, expected, FULL_RANGE, complete=True)
    assert snapshot.released
    with pytest.raises(StateMapError, match="iterated once"):
        list(snapshot)
    assert_nothing_pinned(h.backend)


@pytest.mark.parametrize("map_kind", MAP_KINDS)
def test_incremental_ttl_cleanup_after_the_call_does_not_reach_the_snapshot(
        map_kind: MapKind) -> None:
    # Incremental cleanup removes expired values and rewrites partly expired lists in the live
    # maps; a snapshot taken before still yields what was stored at its call.
    clock = ManualClock(0)
    backend: HeapKeyedStateBackend[str] = HeapKeyedStateBackend(
        "string", MAX_PARALLELISM, map_kind=map_kind, clock=clock)
    ttl = TtlConfig(100, incremental_cleanup=IncrementalCleanup(1000, True))
    value = backend.get_value_state(value_state("v", "int64", ttl=ttl))
    items = backend.get_list_state(list_state("l", "int64", ttl=ttl))
    for i, key in enumerate(KEY_POOL):
        backend.set_current_key(key)
        value.update(i)  # stamped 0
        items.add(i)  # stamped 0
    clock.now = 60
    for i, key in enumerate(KEY_POOL):
        backend.set_current_key(key)
        items.add(i + 100)  # stamped 60
    before = live_contents(backend)
    snapshot = backend.snapshot()
    clock.now = 120  # stamps 0 expired (0 + 100 <= 120), stamps 60 live
    for key in KEY_POOL:
        backend.set_current_key(key)  # cleanup runs for every record, over whole maps
        assert value.value() is None
    after = live_contents(backend)
    assert after == {  # values gone, lists down to their live element
        ("l", assign_to_key_group(key, MAX_PARALLELISM, "string"), key, VOID_NAMESPACE):
            canon([TtlValue(i + 100, 60)]) for i, key in enumerate(KEY_POOL)}
    check_blocks(consume_on_other_thread(snapshot), before, FULL_RANGE, complete=True,
                 names=("l", "v"))
    assert len(before) == 2 * len(KEY_POOL)
    assert live_contents(backend) == after
    assert_nothing_pinned(backend)


@pytest.mark.parametrize("map_kind", MAP_KINDS)
def test_full_snapshot_ttl_cleanup_drops_expired_entries_from_the_output_only(
        map_kind: MapKind) -> None:
    clock = ManualClock(0)
    backend: HeapKeyedStateBackend[str] = HeapKeyedStateBackend(
        "string", MAX_PARALLELISM, map_kind=map_kind, clock=clock)
    ttl = TtlConfig(100, cleanup_full_snapshot=True, cleanup_in_background=False)
    value = backend.get_value_state(value_state("v", "int64", ttl=ttl))
    items = backend.get_list_state(list_state("l", "int64", ttl=ttl))
    backend.set_current_key("old")
    value.update(1)  # stamped 0: expired from 100 on (ts + ttl <= now)
    items.add(10)  # stamped 0
    clock.advance(50)
    backend.set_current_key("new")
    value.update(2)  # stamped 50: live until 150
    items.add_all([20, 21])  # stamped 50
    backend.set_current_key("old")
    items.add(11)  # "old" list: [10@0, 11@50]; the expired head is dropped, 11 is kept
    clock.now = 120
    live_before = live_contents(backend)
    snapshot = backend.snapshot()
    blocks = consume_on_other_thread(snapshot)
    written = {(name, key, ns): state for _, name, entries in blocks
               for key, ns, state in entries}
    assert written == {
        ("l", "new", VOID_NAMESPACE): canon([TtlValue(20, 50), TtlValue(21, 50)]),
        ("l", "old", VOID_NAMESPACE): canon([TtlValue(11, 50)]),
        ("v", "new", VOID_NAMESPACE): canon(TtlValue(2, 50)),
    }
    # the live state keeps the expired entries (cleanup only shapes what is written)
    assert live_contents(backend) == live_before
    assert ("v", assign_to_key_group("old", MAX_PARALLELISM, "string"), "old",
            VOID_NAMESPACE) in live_before
    assert_nothing_pinned(backend)


# -- concurrency ---------------------------------------------------------------------------------

_DONE = object()


def _concurrent_run(map_kind: MapKind, seed: int, rounds: int, ops_per_round: int
                    ) -> tuple[int, int, list[str]]:
    """Owner writes ``rounds`` rounds; a reader consumes every snapshot (abandons every 4th)."""
    rng = random.Random(seed)
    h = make_harness(map_kind, FULL_RANGE, MAX_PARALLELISM)
    keys = [f"key-{i}" for i in range(1500)]  # ~94 keys per group: maps grow and rehash
    group_of = {k: assign_to_key_group(k, MAX_PARALLELISM, "string") for k in keys}
    model: dict[ModelKey, Any] = {}
    handoff: queue.Queue[Any] = queue.Queue(maxsize=3)
    errors: list[str] = []
    checked = abandoned = 0

    def reader() -> None:
        nonlocal checked, abandoned
        while (item := handoff.get()) is not _DONE:
            number, snapshot, expected = item
            blocks: list[SeenBlock] = []
            try:
                limit = len(STATE_NAMES) * 7 if number % 4 == 3 else None
                for i, block in enumerate(snapshot):
                    blocks.append(seen_block(block))
                    if i % 8 == 0:
                        threading.Event().wait(0)  # yield to the owner mid-iteration
                    if limit is not None and len(blocks) == limit:
                        break
                snapshot.close()
                check_blocks(blocks, expected, FULL_RANGE, complete=limit is None)
                if not snapshot.released:
                    errors.append(f"snapshot {number} not released")
                if limit is None:
                    checked += 1
                else:
                    abandoned += 1
            except Exception as exc:  # collected and asserted on the owner thread
                errors.append(f"snapshot {number}: {exc!r}")
                snapshot.close()

    thread = threading.Thread(target=reader, name="snapshot-reader")
    thread.start()
    try:
        for number in range(rounds):
            h.clock.advance(1)
            for _ in range(ops_per_round):
                key = rng.choice(keys)
                h.backend.set_current_key(key)
                kg = group_of[key]
                roll = rng.random()
                if roll < 0.3:
                    ns: Any = rng.randrange(3)
                    h.value.set_current_namespace(ns)
                    h.value.update(number)
                    model[("value", kg, key, ns)] = number
                elif roll < 0.5:
                    h.lst.add(number)
                    model.setdefault(("list", kg, key, VOID_NAMESPACE), []).append(
                        TtlValue(number, h.clock.now))
                elif roll < 0.6:
                    stored = model.get(("list", kg, key, VOID_NAMESPACE))
                    assert h.lst.get() == [e.user_value for e in stored or []]
                    if stored:  # on_read_and_write: re-stamped (rewritten) by the read
                        model[("list", kg, key, VOID_NAMESPACE)] = [
                            TtlValue(e.user_value, h.clock.now) for e in stored]
                elif roll < 0.8:
                    user_key = rng.choice("abc")
                    h.map.put(user_key, number)
                    model.setdefault(("map", kg, key, VOID_NAMESPACE), {})[user_key] = TtlValue(
                        number, h.clock.now)
                elif roll < 0.9:
                    h.reduce.add(1)
                    old = model.get(("reduce", kg, key, VOID_NAMESPACE))
                    model[("reduce", kg, key, VOID_NAMESPACE)] = TtlValue(
                        1 if old is None else old.user_value + 1, h.clock.now)
                else:
                    name = rng.choice(STATE_NAMES)
                    state = {"agg": h.agg, "list": h.lst, "map": h.map, "reduce": h.reduce,
                             "value": h.value}[name]
                    ns = rng.randrange(3) if name == "value" else (
                        "w1" if name == "agg" else VOID_NAMESPACE)
                    if name in ("value", "agg"):
                        state.set_current_namespace(ns)
                    state.clear()
                    model.pop((name, kg, key, ns), None)
            handoff.put((number, h.backend.snapshot(), canon_model(model)))
    finally:
        handoff.put(_DONE)
        thread.join(timeout=300)
    assert not thread.is_alive(), "reader thread hung"
    assert live_contents(h.backend) == canon_model(model)
    assert_nothing_pinned(h.backend)
    return checked, abandoned, errors


@pytest.mark.parametrize("map_kind", MAP_KINDS)
def test_owner_writes_while_another_thread_consumes_snapshots(map_kind: MapKind) -> None:
    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often, to interleave as much as possible
    try:
        rounds = 40
        checked, abandoned, errors = _concurrent_run(map_kind, seed=7, rounds=rounds,
                                                     ops_per_round=300)
    finally:
        sys.setswitchinterval(old_interval)
    assert not errors, errors[:5]
    assert (checked, abandoned) == (rounds - rounds // 4, rounds // 4)
