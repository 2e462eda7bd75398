"""Contracts of the state maps, snapshots and StateTable (examples; the model test does more)."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from statecore.copy_on_write_state_map import CopyOnWriteStateMap
from statecore.errors import (
    ConcurrentModificationError,
    InvalidArgumentError,
    KeyGroupError,
    SnapshotReleasedError,
    StateMapError,
)
from statecore.hashing import bit_mix
from statecore.key_groups import KeyGroupRange, assign_to_key_group
from statecore.nested_state_map import NestedStateMap
from statecore.serializers import VOID_NAMESPACE as VOID
from statecore.serializers import parse_type
from statecore.state_table import StateTable


@pytest.mark.parametrize(("requested", "capacity", "threshold"),
                         [(0, 2, -1), (1, 4, 3), (5, 8, 6), (128, 128, 96), (129, 256, 192)])
def test_capacity_is_clamped_and_rounded_like_flink(requested: int, capacity: int,
                                                    threshold: int) -> None:
    layout = CopyOnWriteStateMap(requested).layout()
    assert (layout.primary_table_length, layout.threshold) == (capacity, threshold)


def test_negative_capacity_and_unknown_hash_mode_are_refused() -> None:
    with pytest.raises(InvalidArgumentError):
        CopyOnWriteStateMap(-1)
    with pytest.raises(InvalidArgumentError, match="unknown hash mode"):
        CopyOnWriteStateMap(hash_mode="md5")  # type: ignore[arg-type]


def test_first_doubling_happens_on_the_98th_insert_and_is_incremental() -> None:
    m: CopyOnWriteStateMap[int, Any, int] = CopyOnWriteStateMap(hash_mode="flink")
    for k in range(97):
        m.put(k, VOID, k)
    assert not m.is_rehashing  # size 97 > 96 is checked before the next insertion
    m.put(97, VOID, 97)
    assert m.is_rehashing and m.layout().incremental_rehash_table_length == 256
    while m.is_rehashing:
        m.get(0, VOID)
    assert m.layout().primary_table_length == 256 and len(m) == 98
    assert m.to_dict() == {(k, VOID): k for k in range(98)}


def test_snapshot_is_released_exactly_once_and_works_as_context_manager() -> None:
    m: CopyOnWriteStateMap[str, Any, int] = CopyOnWriteStateMap()
    m.put("a", VOID, 1)
    with m.snapshot() as s1:
        s2 = m.snapshot()
        assert m.snapshot_versions == (1, 2)
        assert m.highest_required_snapshot_version == 2
        m.put("a", VOID, 2)
        assert s1.to_dict() == s2.to_dict() == {("a", VOID): 1}
        s2.release()
        s2.release()  # a no-op
        assert m.highest_required_snapshot_version == 1
    assert s1.released and m.snapshot_versions == ()
    assert m.highest_required_snapshot_version == 0
    with pytest.raises(SnapshotReleasedError):
        list(s1)


def test_release_of_a_snapshot_owned_by_another_map_is_refused() -> None:
    a: CopyOnWriteStateMap[int, Any, int] = CopyOnWriteStateMap()
    b: CopyOnWriteStateMap[int, Any, int] = CopyOnWriteStateMap()
    snap = a.snapshot()
    with pytest.raises(SnapshotReleasedError, match="different state map"):
        b.release_snapshot(snap)
    a.release_snapshot(snap)
    assert a.snapshot_versions == ()


def test_structural_change_during_iteration_raises_but_value_updates_do_not() -> None:
    m: CopyOnWriteStateMap[int, Any, int] = CopyOnWriteStateMap()
    for k in range(10):
        m.put(k, VOID, k)
    for entry in m:
        m.put(entry.key, VOID, entry.state + 1)  # value update: allowed
    assert sorted(s for _, _, s in m) == list(range(1, 11))
    iterator = iter(m)
    next(iterator)
    m.put(99, VOID, 0)  # a new key
    with pytest.raises(ConcurrentModificationError):
        next(iterator)
    iterator = iter(m)
    next(iterator)
    m.remove(3, VOID)
    with pytest.raises(ConcurrentModificationError):
        list(iterator)


def test_get_hands_out_a_copy_only_while_a_snapshot_needs_the_state() -> None:
    m: CopyOnWriteStateMap[int, Any, list[int]] = CopyOnWriteStateMap(
        state_serializer=parse_type("list<int32>"))
    original = [1]
    m.put(1, VOID, original)
    assert m.get(1, VOID) is original  # no snapshot: no copy
    with m.snapshot() as snap:
        got = m.get(1, VOID)
        assert got == [1] and got is not original
        got.append(2)
        assert m.get(1, VOID) is got  # one copy per version, then in place
        assert snap.to_dict() == {(1, VOID): [1]}
    assert m.get(1, VOID) == [1, 2]


def test_version_overflow_is_refused_like_flink() -> None:
    m: CopyOnWriteStateMap[int, Any, int] = CopyOnWriteStateMap()
    m._state_map_version = 2**31 - 1
    with pytest.raises(StateMapError, match="Version count overflow"):
        m.snapshot()


def test_nested_state_map_snapshot_is_a_private_deep_copy() -> None:
    m: NestedStateMap[int, Any, list[int]] = NestedStateMap(parse_type("list<int32>"))
    m.put(1, VOID, [1])
    m.put(2, "w", [2])
    snap = m.snapshot()
    m.get(1, VOID).append(5)  # type: ignore[union-attr]
    m.remove(2, "w")
    assert snap.to_dict() == {(1, VOID): [1], (2, "w"): [2]} and len(snap) == 2
    assert m.to_dict() == {(1, VOID): [1, 5]} and m.size_of_namespace("w") == 0
    snap.release()
    snap.release()
    with pytest.raises(SnapshotReleasedError):
        list(snap)


@pytest.mark.parametrize("factory", [CopyOnWriteStateMap, NestedStateMap])
def test_both_maps_share_one_contract(factory: Any) -> None:
    m = factory()
    m.transform("k", VOID, 5, lambda old, v: (old or 0) + v)
    m.transform("k", VOID, 5, lambda old, v: (old or 0) + v)
    assert m.get("k", VOID) == 10
    assert m.put_and_get_old("k", VOID, 1) == 10
    assert m.contains("k", VOID) and not m.contains("k", "other")
    m.put("j", "other", 2)
    assert sorted(m.keys(VOID)) == ["k"] and m.size_of_namespace("other") == 1
    assert m.remove_and_get_old("k", VOID) == 1 and m.remove_and_get_old("k", VOID) is None
    assert len(m) == 1


def test_state_table_routes_keys_by_flink_key_group_and_refuses_foreign_keys() -> None:
    kg_range = KeyGroupRange(0, 63)
    table: StateTable[str, Any, int] = StateTable(kg_range, 128, "string")
    accepted = [k for k in (f"key-{i}" for i in range(200))
                if assign_to_key_group(k, 128, "string") in kg_range]
    rejected = [k for k in (f"key-{i}" for i in range(200)) if k not in accepted]
    assert accepted and rejected
    for i, key in enumerate(accepted):
        table.put(key, VOID, i)
    assert len(table) == len(accepted)
    for kg, state_map in table.items_by_key_group():
        assert all(assign_to_key_group(e.key, 128, "string") == kg for e in state_map)
    with pytest.raises(KeyGroupError, match="non-deterministic shuffle key"):
        table.put(rejected[0], VOID, 0)
    with pytest.raises(InvalidArgumentError, match="No key set"):
        table.get(None)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="namespace is null"):
        table.get(accepted[0], None)


def test_state_table_snapshot_releases_per_key_group() -> None:
    table: StateTable[int, Any, int] = StateTable(KeyGroupRange(0, 3), 4, "int32")
    for k in range(40):
        table.put(k, VOID, k)
    with table.snapshot() as snap:
        assert snap.key_groups == [0, 1, 2, 3]
        first = snap.for_key_group(0)
        expected = first.to_dict()
        table.put(next(k for k in range(40) if table.key_group_of(k) == 0), VOID, -1)
        assert first.to_dict() == expected
        snap.release_key_group(0)
        assert first.released and not snap.for_key_group(1).released
    assert all(snap.for_key_group(kg).released for kg in range(4))


@pytest.mark.parametrize("step", [1, 2])
def test_small_rehash_steps_defer_the_next_doubling_instead_of_failing(step: int) -> None:
    # With Flink's step of 4 the table never fills up during a rehash; with 1 or 2 it can
    # (capacity 4, keys 0..7 in identity mode): the next doubling then waits for the rehash.
    m: CopyOnWriteStateMap[int, Any, int] = CopyOnWriteStateMap(
        4, hash_mode="identity", min_transferred_per_incremental_rehash=step)
    for k in range(64):
        m.put(k, VOID, k)
    assert m.to_dict() == {(k, VOID): k for k in range(64)}
    while m.is_rehashing:
        m.get(0, VOID)
    assert m.capacity >= 64 and len(m) == 64


def test_iteration_sees_live_values_while_a_snapshot_shares_the_pages() -> None:
    m: CopyOnWriteStateMap[int, Any, str] = CopyOnWriteStateMap(hash_mode="identity")
    for k in range(4):
        m.put(k, VOID, "old")
    with m.snapshot() as snap:
        seen = {}
        for entry in m:
            if entry.key == 0:
                m.put(3, VOID, "new")  # a value update: allowed while iterating
            seen[entry.key] = entry.state
        assert seen[3] == "new"
        assert snap.to_dict()[(3, VOID)] == "old"


def test_an_entry_is_six_pointers_and_stores_no_hash() -> None:
    # The hash is recomputed where needed (rehash steps, layouts), not stored: an int object
    # per entry would add half again the entry's 80 bytes (bench section "memory").
    m: CopyOnWriteStateMap[int, Any, int] = CopyOnWriteStateMap(hash_mode="flink")
    m.put(7, VOID, 1)
    (bucket, (entry,)), = m.layout().primary_chains
    assert entry.hash == bit_mix(7 ^ 99) and bucket == entry.hash & 127
    head = m._primary.head(bucket)
    assert not hasattr(head, "hash") and not hasattr(head, "__dict__")
    assert sys.getsizeof(head) <= 80  # GC header + object header + 6 slots


@pytest.mark.parametrize("hash_mode", ["flink", "fast"])
def test_equal_python_keys_of_other_java_types_follow_the_hash_mode(hash_mode: Any) -> None:
    # Flink: Integer 1 and Boolean true are two keys (equals is false, hashes 1 and 1231);
    # Python: 1 == True. The flink mode keeps Flink's two entries (it compares hashes, also as
    # namespaces); the fast mode follows Python, as a dict does.
    m: CopyOnWriteStateMap[Any, Any, str] = CopyOnWriteStateMap(hash_mode=hash_mode)
    m.put(1, VOID, "int key")
    m.put(True, VOID, "bool key")
    m.put(5, 1, "int namespace")
    m.put(5, True, "bool namespace")
    for k in range(200):  # grow through rehashes: entries are re-placed by recomputed hashes
        m.put(k + 10, VOID, "x")
    while m.is_rehashing:
        m.get(0, VOID)
    found = (m.get(1, VOID), m.get(True, VOID), m.get(5, 1), m.get(5, True))
    if hash_mode == "flink":
        assert len(m) == 204
        assert found == ("int key", "bool key", "int namespace", "bool namespace")
        assert {type(e.namespace) for e in m if e.key == 5} == {int, bool}
    else:
        assert len(m) == 202
        assert found == ("bool key", "bool key", "bool namespace", "bool namespace")
