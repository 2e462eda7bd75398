"""Rescale plans (``statecore.rescale_plan``) against Flink's own results and reference §4.

* every ``key_group_ranges`` case of every ``ranges*.json``: new subtask ``i`` of a plan to
  ``(M, P)`` owns Flink's ``computeKeyGroupRangeForOperatorIndex(M, P, i)``, whatever the old
  parallelism (and also when the plan changes the max parallelism to ``M``);
* every case of every ``repartition*.json`` through the planner's operator-state path: old
  subtask ``i``'s handle ``old-i`` becomes element ranges of one file per old subtask; each new
  subtask must get exactly Flink's ``{handle: {state: (mode, offsets)}}``, the offsets inside
  one entry in Flink's order (the only order the oracle README calls significant);
* the keyed intersection rules of reference §4.2 and ``KeyGroupsStateHandle.getIntersection``;
* ``check_rescale``: Flink's parallelism bounds, as :class:`ParallelismError` with a reason.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings
from oracle import load_json

from statecore.checkpoint import (
    CheckpointKind,
    CheckpointMetadata,
    FileInfo,
    KeyedStateHandle,
    KeyGroupRows,
    OperatorMetadata,
    OperatorStateHandle,
    StateMetadata,
    SubtaskMetadata,
)
from statecore.errors import ParallelismError
from statecore.key_groups import KeyGroupRange, compute_key_group_range_for_operator_index
from statecore.operator_backend import OperatorStateMode
from statecore.rescale_plan import check_rescale, intersect_handle, plan_rescale

CHECKSUM = "sha256:" + "0" * 64
KIND_OF_MODE = {"SPLIT_DISTRIBUTE": "split", "UNION": "union", "BROADCAST": "broadcast"}
SHOWN = 5


# -- building metadata -----------------------------------------------------------------------


def checkpoint(*operators: OperatorMetadata, files: dict[str, int] | None = None
               ) -> CheckpointMetadata:
    infos = tuple(FileInfo(path, size, CHECKSUM) for path, size in (files or {}).items())
    return CheckpointMetadata(1, CheckpointKind.CHECKPOINT, 0, operators, infos)


def keyed_state(name: str = "s") -> StateMetadata:
    return StateMetadata(name, "keyed", "value", "int64")


def dense_handle(state: str, file: str, kg: KeyGroupRange, rows_per_group: int = 1
                 ) -> KeyedStateHandle:
    """A handle of ``kg`` with ``rows_per_group`` rows in every key group, from row 0."""
    return KeyedStateHandle(state, file, kg, tuple(
        KeyGroupRows(g, (g - kg.start) * rows_per_group, rows_per_group)
        for g in range(kg.start, kg.end + 1)))


def keyed_operator(max_p: int, old_p: int, states: tuple[str, ...] = ("s",),
                   sparse: bool = False) -> OperatorMetadata:
    """One keyed operator at ``old_p`` with Flink's ranges and one handle per state and subtask.

    ``sparse``: handles list only the first and last key group's rows (cheap for M = 32768).
    """
    subtasks = []
    for i in range(old_p):
        kg = compute_key_group_range_for_operator_index(max_p, old_p, i)
        handles = []
        for s in states:
            file = f"op-0/keyed/{s}/{i}.parquet"
            if sparse:
                rows = (KeyGroupRows(kg.start, 0, 1),) + (
                    (KeyGroupRows(kg.end, 1, 1),) if kg.end != kg.start else ())
                handles.append(KeyedStateHandle(s, file, kg, rows))
            else:
                handles.append(dense_handle(s, file, kg))
        subtasks.append(SubtaskMetadata(i, kg, tuple(handles), ()))
    return OperatorMetadata("uid", "keyed", old_p, max_p, "string",
                            tuple(keyed_state(s) for s in states), tuple(subtasks))


def ranges_of(plan_subtasks: Any) -> list[list[int] | None]:
    return [None if s.key_group_range is None else [s.key_group_range.start,
                                                    s.key_group_range.end]
            for s in plan_subtasks]


# -- (a) key-group ranges: every ranges*.json case -------------------------------------------


def old_parallelisms(max_p: int, new_p: int) -> list[int]:
    """Old parallelisms to plan from: unchanged, 1, and one on either side (all valid)."""
    return sorted({new_p, 1, min(max_p, new_p + 1), max(1, new_p - 1), min(max_p, 3)})


def test_every_oracle_key_group_range_through_the_planner(ranges_file: Path) -> None:
    cases = load_json(ranges_file)["key_group_ranges"]
    assert cases, f"{ranges_file.name}: no key_group_ranges"
    failures, checked = [], 0
    for case in cases:
        max_p, new_p, expected = case["max_parallelism"], case["parallelism"], case["ranges"]
        assert len(expected) == new_p
        for old_p in old_parallelisms(max_p, new_p):
            metadata = checkpoint(keyed_operator(max_p, old_p, sparse=True))
            (op_plan,) = plan_rescale(metadata, new_p).operators
            checked += 1
            got = ranges_of(op_plan.subtasks)
            if got != expected or [s.index for s in op_plan.subtasks] != list(range(new_p)):
                failures.append(f"M={max_p} {old_p}->{new_p}: {got} != {expected}")
            if (op_plan.new_parallelism, op_plan.new_max_parallelism) != (new_p, max_p):
                failures.append(f"M={max_p} {old_p}->{new_p}: plan says "
                                f"{op_plan.new_parallelism}, {op_plan.new_max_parallelism}")
    assert checked
    assert not failures, f"{len(failures)} of {checked}:\n" + "\n".join(failures[:SHOWN])


def test_every_oracle_key_group_range_when_the_plan_changes_the_max_parallelism(
        ranges_file: Path) -> None:
    """Planned to max parallelism ``M`` from another one (a re-hash): the ranges are ``M``'s."""
    cases = load_json(ranges_file)["key_group_ranges"]
    failures, checked = [], 0
    for case in cases:
        max_p, new_p, expected = case["max_parallelism"], case["parallelism"], case["ranges"]
        old_max = 128 if max_p != 128 else 256
        old_p = min(2, old_max)
        metadata = checkpoint(keyed_operator(old_max, old_p))
        # one entry in old subtask 0's first key group, now in key group M - 1
        rehashed = {("uid", "s"): {(0, max_p - 1): 1}}
        plan = plan_rescale(metadata, new_p, max_p, rehashed=rehashed)
        (op_plan,) = plan.operators
        checked += 1
        got = ranges_of(op_plan.subtasks)
        if got != expected:
            failures.append(f"M {old_max}->{max_p}, p {old_p}->{new_p}: {got} != {expected}")
        entries = [s.entries for s in op_plan.subtasks]
        if not (plan.rehash and op_plan.rehash and entries == [0] * (new_p - 1) + [1]):
            failures.append(f"M {old_max}->{max_p}, p {old_p}->{new_p}: entries {entries}")
    assert checked
    assert not failures, f"{len(failures)} of {checked}:\n" + "\n".join(failures[:SHOWN])


# -- (b) operator state: every repartition*.json case ------------------------------------------


def oracle_operator(case: dict[str, Any]) -> tuple[CheckpointMetadata, dict[str, list[int]]]:
    """The case's input as metadata: old subtask ``i``'s handle is file ``old-i``.

    The file holds the handle's states one after the other, in the handle's listed order (the
    order Flink saw them in, as the existing oracle test maps them to snapshots); each state is
    the element range of its offsets, so element ``k`` of file ``old-i`` *is* an offset.
    Returns the metadata and every file's elements.
    """
    contents: dict[str, list[int]] = {}
    declared: dict[str, str] = {}
    subtasks = []
    for i, handles in enumerate(case["input"]):
        operator = []
        for handle in handles:
            file = handle["handle"]
            elements = contents.setdefault(file, [])
            for name, mode, offsets in handle["states"]:
                assert declared.setdefault(name, mode) == mode, "one mode per name"
                operator.append(OperatorStateHandle(name, OperatorStateMode[mode], file,
                                                    len(elements), len(offsets)))
                elements.extend(offsets)
        subtasks.append(SubtaskMetadata(i, None, (), tuple(operator)))
    states = tuple(StateMetadata(name, "operator", KIND_OF_MODE[mode], "int64",
                                 "int64" if mode == "BROADCAST" else None)
                   for name, mode in sorted(declared.items()))
    op = OperatorMetadata("uid", "ops", case["old_parallelism"], 128, None, states,
                          tuple(subtasks))
    files = {path: 10 * (len(elements) + 1) for path, elements in contents.items()}
    return checkpoint(op, files=files), contents


def planned_handles(subtasks: Any, contents: dict[str, list[int]]) -> list[Any]:
    """Per new subtask ``{handle: {state: (mode, offsets)}}`` read through the element ranges."""
    out = []
    for sub in subtasks:
        handles: dict[str, dict[str, tuple[str, list[int]]]] = {}
        for h in sub.operator:
            states = handles.setdefault(h.file, {})
            mode, offsets = states.setdefault(h.state, (h.mode.name, []))
            assert mode == h.mode.name
            offsets.extend(contents[h.file][h.first_element:h.first_element + h.element_count])
        out.append(handles)
    return out


def test_every_oracle_repartition_case_through_the_planner(repartition_file: Path) -> None:
    """Handles and states compare order-insensitively (Java HashMap order in Flink's output,
    README §3); the offsets inside one entry in Flink's order. Flink's output may hold a
    handle with an empty state map (a handle with no state); a plan has no such handle."""
    document = load_json(repartition_file)
    assert document["cases"], "no cases"
    failures = []
    for case in document["cases"]:
        metadata, contents = oracle_operator(case)
        new_p = case["new_parallelism"]
        (op_plan,) = plan_rescale(metadata, new_p).operators
        got = planned_handles(op_plan.subtasks, contents)
        expected = [{h["handle"]: {n: (m, o) for n, m, o in h["states"]}
                     for h in sub if h["states"]} for sub in case["output"]]
        if len(op_plan.subtasks) != new_p or got != expected:
            failures.append(f"{case['id']}: got {got}, expected {expected}")
            continue
        if any(s.keyed or s.key_group_range is not None for s in op_plan.subtasks):
            failures.append(f"{case['id']}: keyed handles or ranges without keyed state")
        # entries per state and subtask: the elements planned; union elements counted once
        for sub, handles in zip(op_plan.subtasks, expected, strict=True):
            want: Counter[str] = Counter()
            for states in handles.values():
                for name, (_, offsets) in states.items():
                    want[name] += len(offsets)
            have = Counter({s.state: s.entries for s in sub.states})
            if +have != +want or any(s.scope != "operator" for s in sub.states):
                failures.append(f"{case['id']}: subtask {sub.index} shares {sub.states}, "
                                f"expected entries {dict(want)}")
        union = sum(len(o) for hs in case["input"] for h in hs for _, m, o in h["states"]
                    if m == "UNION")
        if (op_plan.union_elements, op_plan.union_blowup) != (union, union * new_p):
            failures.append(f"{case['id']}: union {op_plan.union_elements} "
                            f"x{new_p} = {op_plan.union_blowup}, expected {union}")
    assert not failures, f"{len(failures)} of {len(document['cases'])}:\n" + "\n".join(
        failures[:SHOWN])


def test_oracle_error_cases_through_the_planner(repartition_file: Path) -> None:
    """Flink refuses a new parallelism of 0 or -1; so does the planner, with a reason.
    (The list-size mismatch has no metadata form: the subtasks are the old parallelism.)"""
    errors = [e for e in load_json(repartition_file)["errors"] if e["new_parallelism"] <= 0]
    assert errors
    for error in errors:
        metadata, _ = oracle_operator(error)
        with pytest.raises(ParallelismError, match=str(error["new_parallelism"])):
            plan_rescale(metadata, error["new_parallelism"])


# -- (c) keyed intersection (reference §4.2) ---------------------------------------------------


def expected_intersection(handle: KeyedStateHandle, kg: KeyGroupRange
                          ) -> KeyedStateHandle | None:
    """``KeyGroupsStateHandle.getIntersection``, written out independently."""
    start, end = max(handle.key_group_range.start, kg.start), min(handle.key_group_range.end,
                                                                 kg.end)
    if end - start + 1 <= 0:
        return None
    return KeyedStateHandle(handle.state, handle.file, KeyGroupRange(start, end),
                            tuple(r for r in handle.rows if start <= r.key_group <= end))


def test_intersect_handle_examples() -> None:
    rows = (KeyGroupRows(10, 0, 2), KeyGroupRows(12, 2, 1), KeyGroupRows(20, 3, 4))
    handle = KeyedStateHandle("s", "f", KeyGroupRange(10, 20), rows)
    assert intersect_handle(handle, KeyGroupRange(12, 30)) == KeyedStateHandle(
        "s", "f", KeyGroupRange(12, 20), rows[1:])
    assert intersect_handle(handle, KeyGroupRange(0, 10)) == KeyedStateHandle(
        "s", "f", KeyGroupRange(10, 10), rows[:1])
    assert intersect_handle(handle, KeyGroupRange(20, 20)) == KeyedStateHandle(
        "s", "f", KeyGroupRange(20, 20), rows[2:])
    # key groups in common but no rows there: still a handle (Flink keeps it: > 0 key groups)
    assert intersect_handle(handle, KeyGroupRange(13, 19)) == KeyedStateHandle(
        "s", "f", KeyGroupRange(13, 19), ())
    assert intersect_handle(handle, KeyGroupRange(0, 9)) is None
    assert intersect_handle(handle, KeyGroupRange(21, 127)) is None


@st.composite
def keyed_layouts(draw: st.DrawFn) -> tuple[OperatorMetadata, int]:
    """A keyed operator whose old subtasks hold several handles (a rescaled checkpoint's shape:
    handles of parts of their range, several per state, some with no rows), listed in any
    order, and a new parallelism."""
    max_p = draw(st.integers(1, 40))
    old_p = draw(st.integers(1, max_p))
    subtasks = []
    for i in range(old_p):
        kg = compute_key_group_range_for_operator_index(max_p, old_p, i)
        cuts = sorted(draw(st.sets(st.integers(kg.start + 1, kg.end), max_size=3))
                      if kg.end > kg.start else set())
        bounds = [kg.start, *cuts, kg.end + 1]
        handles = []
        for j, (lo, hi) in enumerate(zip(bounds, bounds[1:], strict=False)):
            for s in draw(st.lists(st.sampled_from(["a", "b"]), min_size=1, max_size=2,
                                   unique=True)):
                groups = sorted(draw(st.sets(st.integers(lo, hi - 1), max_size=hi - lo)))
                rows, first = [], draw(st.integers(0, 5))
                for g in groups:
                    n = draw(st.integers(1, 3))
                    rows.append(KeyGroupRows(g, first, n))
                    first += n
                handles.append(KeyedStateHandle(s, f"f-{i}-{j}-{s}", KeyGroupRange(lo, hi - 1),
                                                tuple(rows)))
        subtasks.append(SubtaskMetadata(i, kg, tuple(handles), ()))
    subtasks = draw(st.permutations(subtasks))  # metadata order is not subtask order
    op = OperatorMetadata("uid", "keyed", old_p, max_p, "int32",
                          (keyed_state("a"), keyed_state("b")), tuple(subtasks))
    return op, draw(st.integers(1, max_p))


@settings(max_examples=300, deadline=None)
@given(keyed_layouts())
def test_keyed_handles_follow_flinks_redistribution(layout: tuple[OperatorMetadata, int]
                                                    ) -> None:
    op, new_p = layout
    (op_plan,) = plan_rescale(checkpoint(op), new_p).operators
    old = sorted(op.subtasks, key=lambda s: s.index)
    assert len(op_plan.subtasks) == new_p
    for i, sub in enumerate(op_plan.subtasks):
        kg = compute_key_group_range_for_operator_index(op.max_parallelism, new_p, i)
        assert sub.index == i and sub.key_group_range == kg
        if new_p == op.parallelism:  # unchanged: old subtask i's handles as they are
            expected = list(old[i].keyed)
        else:  # every old handle in old-subtask order, intersected; empty ones dropped
            expected = [x for s in old for h in s.keyed
                        if (x := expected_intersection(h, kg)) is not None]
        assert list(sub.keyed) == expected
        entries = Counter({s.state: s.entries for s in sub.states})
        rows: Counter[str] = Counter()
        for h in expected:
            rows[h.state] += sum(r.row_count for r in h.rows)
        assert +entries == +rows
        assert sub.entries == sum(rows.values())
    if new_p == op.parallelism:
        assert op_plan.bytes_moved == 0


def test_unchanged_parallelism_keeps_handles_even_beyond_the_new_range() -> None:
    """No intersection at unchanged parallelism (§4.2), even where an old subtask's handle
    covers more than Flink's range for its index: it is kept whole."""
    wide = dense_handle("s", "f0", KeyGroupRange(0, 70))
    narrow = dense_handle("s", "f1", KeyGroupRange(71, 127))
    op = OperatorMetadata("uid", "keyed", 2, 128, "string", (keyed_state(),), (
        SubtaskMetadata(0, KeyGroupRange(0, 70), (wide,), ()),
        SubtaskMetadata(1, KeyGroupRange(71, 127), (narrow,), ())))
    (same,) = plan_rescale(checkpoint(op), 2).operators
    assert [s.keyed for s in same.subtasks] == [(wide,), (narrow,)]
    assert ranges_of(same.subtasks) == [[0, 63], [64, 127]]
    (three,) = plan_rescale(checkpoint(op), 3).operators  # changed: intersected
    assert [[(h.file, h.key_group_range.start, h.key_group_range.end) for h in s.keyed]
            for s in three.subtasks] == [[("f0", 0, 42)], [("f0", 43, 70), ("f1", 71, 85)],
                                         [("f1", 86, 127)]]


def test_changed_parallelism_takes_old_subtasks_in_index_order() -> None:
    """Old subtasks listed 2, 1, 0 in the metadata: a new subtask spanning several still
    takes old subtask 0's part first."""
    op = keyed_operator(12, 3)
    reordered = OperatorMetadata(op.uid, op.name, 3, 12, op.key_type, op.states,
                                 tuple(reversed(op.subtasks)))
    (plan,) = plan_rescale(checkpoint(reordered), 1).operators
    assert [h.file for h in plan.subtasks[0].keyed] == [f"op-0/keyed/s/{i}.parquet"
                                                        for i in range(3)]
    assert [h.key_group_range for h in plan.subtasks[0].keyed] == [
        KeyGroupRange(0, 3), KeyGroupRange(4, 7), KeyGroupRange(8, 11)]


def test_bytes_are_apportioned_by_rows_and_moves_counted() -> None:
    """4 key groups x 1 row per old file of 400 bytes, 2 -> 4: each new subtask gets 2 rows
    (200 bytes); new subtasks 1 and 2 read old files of another index (moved)."""
    op = keyed_operator(8, 2)
    files = {f"op-0/keyed/s/{i}.parquet": 400 for i in range(2)}
    (plan,) = plan_rescale(checkpoint(op, files=files), 4).operators
    assert [s.bytes for s in plan.subtasks] == [200, 200, 200, 200]
    assert [s.bytes_moved for s in plan.subtasks] == [0, 200, 200, 200]
    assert plan.bytes_moved == 600 and plan.skew == 1.0


# -- (d) check_rescale: Flink's bounds --------------------------------------------------------


@pytest.mark.parametrize(("new_p", "new_max", "fragment"), [
    (129, None, "129"),          # p > max p (unchanged max parallelism 128)
    (5, 4, "4"),                 # p > the new max p
    (0, None, "0"),              # p < 1
    (-1, None, "-1"),
    (1, 0, "0"),                 # max p outside [1, 32768]
    (1, -3, "-3"),
    (1, 32769, "32769"),
    (40000, 40000, "40000"),
])
def test_refused_rescales_raise_parallelism_error_with_a_reason(
        new_p: int, new_max: int | None, fragment: str) -> None:
    op = keyed_operator(128, 2)
    with pytest.raises(ParallelismError) as info:
        plan_rescale(checkpoint(op), new_p, new_max, rehashed={("uid", "s"): {}})
    message = str(info.value)
    assert fragment in message and len(message) > 20
    with pytest.raises(ParallelismError):
        check_rescale(op, new_p, 128 if new_max is None else new_max)


def test_p_above_max_p_names_the_operator_and_the_bound() -> None:
    op = keyed_operator(128, 2)
    with pytest.raises(ParallelismError, match=r"'uid'.*129.*128"):
        check_rescale(op, 129, 128)
    with pytest.raises(ParallelismError, match=r"at least 1"):
        check_rescale(op, 0, 128)
    with pytest.raises(ParallelismError, match=r"between 1 and 32768"):
        check_rescale(op, 1, 32769)


@pytest.mark.parametrize(("new_p", "new_max"), [(128, 128), (1, 1), (1, 32768), (32768, 32768)])
def test_bounds_are_inclusive(new_p: int, new_max: int) -> None:
    op = keyed_operator(128, 2)
    check_rescale(op, new_p, new_max)  # no error
    if new_max == 128:
        (plan,) = plan_rescale(checkpoint(op), new_p).operators
        assert len(plan.subtasks) == new_p
