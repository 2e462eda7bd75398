"""statectl diff on crafted pairs: exactly the added, removed and changed state is reported."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from formats.model.checkpoint import Checkpoint
from formats.open import open_checkpoint
from formats.ops.diff import DiffReport, diff_checkpoints
from formats.ops.rescale import plan_checkpoint, rescale_checkpoint
from formats.statectl.writer import write_checkpoint
from statecore.checkpoint import OperatorSnapshot, SubtaskSnapshot
from statecore.key_groups import (
    assign_key_to_parallel_operator,
    compute_key_group_range_for_operator_index,
)
from statecore.keyed_backend import HeapKeyedStateBackend
from statecore.keyed_state import value_state
from statecore.operator_backend import (
    BroadcastStateDescriptor,
    OperatorListStateDescriptor,
    OperatorStateBackend,
)
from statecore.serializers import VOID_NAMESPACE
from statecore.ttl import ManualClock, TtlConfig

M = 128
AMOUNT = value_state("amount", "float64")
WINDOWED = value_state("per_window", "int64", namespace_type="int64")
FRESH = value_state("fresh", "int64", ttl=TtlConfig(60_000))
SPLIT = OperatorListStateDescriptor("offsets", "int64")
UNION = OperatorListStateDescriptor("watermarks", "int64")
RULES = BroadcastStateDescriptor("rules", "string", "string")

Keyed = dict[tuple[str, Any], Any]  # (key, namespace or None) -> value, per state name


def keyed_checkpoint(path: Path, states: dict[str, Keyed], parallelism: int = 2, *,
                     uid: str = "op", touched_at: dict[str, int] | None = None) -> Checkpoint:
    """A keyed checkpoint: ``states`` by descriptor name (amount, per_window, fresh)."""
    descriptors = {d.name: d for d in (AMOUNT, WINDOWED, FRESH)}
    clock = ManualClock(1_000)
    backends = [HeapKeyedStateBackend("string", M, compute_key_group_range_for_operator_index(
        M, parallelism, i), clock=clock) for i in range(parallelism)]
    for name, entries in states.items():
        for (key, namespace), value in entries.items():
            backend = backends[assign_key_to_parallel_operator(key, M, parallelism, "string")]
            backend.set_current_key(key)
            state = backend.get_state(descriptors[name])
            if namespace is not None:
                state.set_current_namespace(namespace)
            clock.now = (touched_at or {}).get(key, 1_000)  # type: ignore[attr-defined]
            state.update(value)  # type: ignore[attr-defined]
    write_checkpoint(str(path), 1, [OperatorSnapshot(uid, uid, parallelism, M, tuple(
        SubtaskSnapshot(i, keyed=b.snapshot()) for i, b in enumerate(backends)))])
    return open_checkpoint(str(path))


def operator_checkpoint(path: Path, split: Sequence[Sequence[int]],
                        union: Sequence[Sequence[int]] = (),
                        rules: Sequence[dict[str, str]] = ()) -> Checkpoint:
    parallelism = len(split)
    subtasks = []
    for i in range(parallelism):
        backend = OperatorStateBackend()
        backend.get_list_state(SPLIT).add_all(split[i])
        if union:
            backend.get_union_list_state(UNION).add_all(union[i])
        if rules:
            backend.get_broadcast_state(RULES).put_all(rules[i].items())
        subtasks.append(SubtaskSnapshot(i, operator=backend.snapshot()))
    write_checkpoint(str(path), 1, [OperatorSnapshot("src", "src", parallelism, M,
                                                     tuple(subtasks))])
    return open_checkpoint(str(path))


def diff(a: Checkpoint, b: Checkpoint, limit: int | None = None) -> DiffReport:
    return diff_checkpoints(a, b, limit=limit)


def changes(report: DiffReport) -> set[tuple[Any, ...]]:
    return {(d.change, d.scope, d.state, d.key, d.namespace, _plain(d.left), _plain(d.right),
             d.count) for d in report.differences}


def _plain(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


BASE = {"amount": {("a", None): 1.5, ("b", None): 2.5, ("c", None): 3.5}}


def test_the_same_state_at_other_parallelisms_is_equal(tmp_path: Path) -> None:
    a = keyed_checkpoint(tmp_path / "a", BASE, 2)
    b = keyed_checkpoint(tmp_path / "b", BASE, 3)
    report = diff(a, b)
    assert report.equal and report.compared == 3 and not report.differences


def test_added_removed_and_changed_entries(tmp_path: Path) -> None:
    a = keyed_checkpoint(tmp_path / "a", BASE)
    b = keyed_checkpoint(tmp_path / "b", {"amount": {
        ("a", None): 1.5, ("b", None): 9.0, ("d", None): 4.5}}, 1)
    report = diff(a, b)
    assert not report.equal
    assert dict(report.counts) == {"added": 1, "removed": 1, "changed": 1}
    assert changes(report) == {
        ("removed", "entry", "amount", "c", None, 3.5, None, 1),
        ("changed", "entry", "amount", "b", None, 2.5, 9.0, 1),
        ("added", "entry", "amount", "d", None, None, 4.5, 1),
    }


def test_a_changed_ttl_timestamp_is_a_change(tmp_path: Path) -> None:
    states = {"fresh": {("a", None): 7, ("b", None): 8}}
    a = keyed_checkpoint(tmp_path / "a", states, touched_at={"a": 1_000})
    b = keyed_checkpoint(tmp_path / "b", states, touched_at={"a": 2_000})
    report = diff(a, b)
    assert dict(report.counts) == {"changed": 1}
    (difference,) = report.differences
    assert difference.key == "a"
    # the value, and its last access beside it (as inspect and export show them)
    assert (difference.left, difference.left_ttl_timestamp) == (7, 1_000)
    assert (difference.right, difference.right_ttl_timestamp) == (7, 2_000)


def test_namespaces_tell_entries_apart(tmp_path: Path) -> None:
    a = keyed_checkpoint(tmp_path / "a", {"per_window": {("a", 0): 1, ("a", 60_000): 2}})
    b = keyed_checkpoint(tmp_path / "b", {"per_window": {("a", 0): 1, ("a", 120_000): 2}})
    report = diff(a, b)
    assert changes(report) == {
        ("removed", "entry", "per_window", "a", 60_000, 2, None, 1),
        ("added", "entry", "per_window", "a", 120_000, None, 2, 1),
    }
    assert report.differences[0].namespace is not VOID_NAMESPACE


def test_split_lists_compare_as_multisets(tmp_path: Path) -> None:
    a = operator_checkpoint(tmp_path / "a", [[1, 2], [3]])
    assert diff(a, operator_checkpoint(tmp_path / "b", [[3], [2, 1], []])).equal
    report = diff(a, operator_checkpoint(tmp_path / "c", [[1, 2, 2], [4]]))
    assert changes(report) == {
        ("removed", "element", "offsets", None, None, 3, None, 1),
        ("added", "element", "offsets", None, None, None, 2, 1),
        ("added", "element", "offsets", None, None, None, 4, 1),
    }
    assert dict(report.counts) == {"removed": 1, "added": 2}


def test_union_ranges_shared_by_subtasks_count_once(tmp_path: Path) -> None:
    a = operator_checkpoint(tmp_path / "a", [[1], [2]], union=[[5], [6]])
    for p in (1, 3):
        rescaled = tmp_path / f"p{p}"
        rescale_checkpoint(a, str(rescaled), plan_checkpoint(a, p))
        assert diff(a, open_checkpoint(str(rescaled))).equal
    report = diff(a, operator_checkpoint(tmp_path / "c", [[1], [2]], union=[[5, 5], [6]]))
    assert changes(report) == {("added", "element", "watermarks", None, None, None, 5, 1)}


def test_broadcast_maps(tmp_path: Path) -> None:
    rules = {"mode": "strict", "currency": "EUR"}
    a = operator_checkpoint(tmp_path / "a", [[], []], rules=[rules, rules])
    b = operator_checkpoint(tmp_path / "b", [[], [], []],
                            rules=[{"mode": "lax", "limit": "9"}] * 3)
    report = diff(a, b)
    assert changes(report) == {
        ("changed", "entry", "rules", "mode", None, "strict", "lax", 1),
        ("removed", "entry", "rules", "currency", None, "EUR", None, 1),
        ("added", "entry", "rules", "limit", None, None, "9", 1),
    }


def test_states_and_operators_added_removed_and_redeclared(tmp_path: Path) -> None:
    a = keyed_checkpoint(tmp_path / "a", {**BASE, "fresh": {("a", None): 1}})
    b = keyed_checkpoint(tmp_path / "b", {**BASE, "per_window": {("a", 0): 1}})
    report = diff(a, b)
    scoped = {(d.change, d.scope, d.state) for d in report.differences}
    assert ("removed", "state", "fresh") in scoped and ("added", "state", "per_window") in scoped
    other = keyed_checkpoint(tmp_path / "other", BASE, uid="renamed")
    report = diff(a, other)
    assert {(d.change, d.scope, d.operator.uid) for d in report.differences} == {
        ("removed", "operator", "op"), ("added", "operator", "renamed")}


def test_limit_caps_the_list_but_counts_everything(tmp_path: Path) -> None:
    many = {"amount": {(f"k{i}", None): float(i) for i in range(30)}}
    a = keyed_checkpoint(tmp_path / "a", many)
    b = keyed_checkpoint(tmp_path / "b", {"amount": {}})
    report = diff(a, b, limit=5)  # the state is gone, and with it its 30 entries
    assert len(report.differences) == 5 and report.found == 31
    assert dict(report.counts) == {"removed": 31} and report.total == 31
    assert report.differences[0].scope == "state"
    assert {d.scope for d in diff(a, b).differences} == {"state", "entry"}


def test_nan_equals_nan(tmp_path: Path) -> None:
    nan = {"amount": {("a", None): math.nan}}
    assert diff(keyed_checkpoint(tmp_path / "a", nan), keyed_checkpoint(tmp_path / "b", nan)).equal
