"""Model test: CopyOnWriteStateMap against a plain dict, with snapshots held open while mutating.

After every step the map equals the dict model, and every open snapshot iterates exactly the
dict copy taken when it was created, although states handed out by `get` are mutated in place.
"""

from __future__ import annotations

import copy
from typing import Any

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    rule,
)

from statecore.copy_on_write_state_map import CopyOnWriteStateMap
from statecore.serializers import VOID_NAMESPACE, parse_type

KEYS = st.integers(min_value=0, max_value=150)
NAMESPACES = st.sampled_from([VOID_NAMESPACE, 1, 2])
VALUES = st.lists(st.integers(-5, 5), max_size=3)


def _append(old: list[int] | None, value: int) -> list[int]:
    target = [] if old is None else old
    target.append(value)
    return target


class CopyOnWriteMapMachine(RuleBasedStateMachine):
    hash_mode = "fast"
    snapshots = Bundle("snapshots")

    @initialize()
    def start(self) -> None:
        # capacity 4: growing to ~150 entries takes several doublings and incremental rehashes
        self.map: CopyOnWriteStateMap[int, Any, list[int]] = CopyOnWriteStateMap(
            4, parse_type("list<int32>"), hash_mode=self.hash_mode)  # type: ignore[arg-type]
        self.model: dict[tuple[int, Any], list[int]] = {}
        self.open: dict[int, tuple[Any, dict[tuple[int, Any], list[int]]]] = {}

    @rule(key=KEYS, ns=NAMESPACES, value=VALUES)
    def put(self, key: int, ns: Any, value: list[int]) -> None:
        self.map.put(key, ns, list(value))
        self.model[(key, ns)] = list(value)

    @rule(start=KEYS, count=st.integers(1, 40), ns=NAMESPACES)
    def put_range(self, start: int, count: int, ns: Any) -> None:
        # bulk inserts make every run cross several capacity doublings and incremental rehashes
        for key in range(start, start + count):
            self.map.put(key, ns, [key])
            self.model[(key, ns)] = [key]

    @rule(key=KEYS, ns=NAMESPACES, extra=st.integers(-9, 9))
    def get_and_mutate(self, key: int, ns: Any, extra: int) -> None:
        state = self.map.get(key, ns)
        assert state == self.model.get((key, ns))
        if state is not None:
            state.append(extra)  # callers may mutate what get() returns
            self.model[(key, ns)].append(extra)

    @rule(key=KEYS, ns=NAMESPACES, value=VALUES)
    def put_and_get_old(self, key: int, ns: Any, value: list[int]) -> None:
        old = self.map.put_and_get_old(key, ns, list(value))
        assert old == self.model.get((key, ns))
        self.model[(key, ns)] = list(value)

    @rule(key=KEYS, ns=NAMESPACES)
    def remove(self, key: int, ns: Any) -> None:
        self.map.remove(key, ns)
        self.model.pop((key, ns), None)

    @rule(key=KEYS, ns=NAMESPACES)
    def remove_and_get_old(self, key: int, ns: Any) -> None:
        old = self.map.remove_and_get_old(key, ns)
        assert old == self.model.pop((key, ns), None)

    @rule(key=KEYS, ns=NAMESPACES, value=st.integers(-9, 9))
    def transform(self, key: int, ns: Any, value: int) -> None:
        self.map.transform(key, ns, value, _append)
        self.model[(key, ns)] = _append(self.model.get((key, ns)), value)

    @rule(key=KEYS, ns=NAMESPACES)
    def contains(self, key: int, ns: Any) -> None:
        assert self.map.contains(key, ns) == ((key, ns) in self.model)

    @rule(target=snapshots)
    def snapshot(self) -> int:
        snap = self.map.snapshot()
        assert snap.snapshot_version not in self.open
        self.open[snap.snapshot_version] = (snap, copy.deepcopy(self.model))
        return snap.snapshot_version

    @rule(version=consumes(snapshots))
    def release(self, version: int) -> None:
        snap, _ = self.open.pop(version)
        snap.release()
        snap.release()  # released exactly once: a second call does nothing
        assert snap.released
        assert version not in self.map.snapshot_versions

    @invariant()
    def map_equals_model(self) -> None:
        if not hasattr(self, "map"):
            return
        assert len(self.map) == len(self.model)
        assert self.map.to_dict() == self.model

    @invariant()
    def snapshots_see_their_moment(self) -> None:
        if not hasattr(self, "map"):
            return
        assert sorted(self.open) == list(self.map.snapshot_versions)
        assert self.map.highest_required_snapshot_version == max(self.open, default=0)
        for version, (snap, expected) in self.open.items():
            rows = list(snap)
            assert len(rows) == len(expected) == len(snap), version
            assert {(e.key, e.namespace): e.state for e in rows} == expected, version

    def teardown(self) -> None:
        for snap, _ in self.open.values():
            snap.release()


class FlinkHashedMapMachine(CopyOnWriteMapMachine):
    """Same model in `flink` hashing mode: Flink's bucket layout, real chain collisions."""

    hash_mode = "flink"


_SETTINGS = settings(max_examples=60, stateful_step_count=120, deadline=None)
TestCopyOnWriteMapModel = CopyOnWriteMapMachine.TestCase
TestCopyOnWriteMapModel.settings = _SETTINGS
TestFlinkHashedMapModel = FlinkHashedMapMachine.TestCase
TestFlinkHashedMapModel.settings = _SETTINGS


def test_model_run_grows_through_several_doublings() -> None:
    """The model's key space really drives the map through incremental rehashes."""
    m: CopyOnWriteStateMap[int, Any, list[int]] = CopyOnWriteStateMap(
        4, parse_type("list<int32>"))
    snap = m.snapshot()
    rehash_snapshots = []
    for k in range(150):
        m.put(k, VOID_NAMESPACE, [k])
        if m.is_rehashing and len(rehash_snapshots) < 3:
            rehash_snapshots.append((m.snapshot(), m.to_dict()))
    assert m.capacity >= 128  # 4 -> 8 -> ... -> 256: five doublings or more
    assert list(snap) == []
    for s, expected in rehash_snapshots:
        assert s.taken_during_rehash
        assert s.to_dict() == expected
