"""Key placement in the heap keyed backend against the Flink oracle (``key_groups*.json``).

For string, int32 and int64 keys (Java ``String``, ``Integer``, ``Long``), every entry a
``HeapKeyedStateBackend`` stores must sit in the map of the key group that Flink's
``KeyGroupRangeAssignment.assignToKeyGroup`` gives for the same key and max parallelism, for
every max parallelism the oracle lists. A backend owning only one subtask's key groups
(``computeKeyGroupRangeForOperatorIndex``) must accept exactly the keys whose group it owns and
refuse the others (``StateTable``: "... non-deterministic shuffle key ...").

Placement is the ``StateTable``'s job, whatever the map: the full-range test runs on the default
copy-on-write maps, the subtask test on nested maps (cheaper to build, 32768 of them per run), so
both map kinds are covered. Decoding of oracle records is shared with
``test_key_groups_oracle.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from oracle import load_json, oracle_files
from test_key_groups_oracle import JAVA_TYPE_SPECS, oracle_keys

from statecore.errors import KeyGroupError
from statecore.key_groups import KeyGroupRange, compute_key_group_range_for_operator_index
from statecore.keyed_backend import HeapKeyedStateBackend, MapKind
from statecore.keyed_state import ValueState, value_state

#: Java key classes under test -> the backend's key type (JAVA_TYPE_SPECS must agree).
PLACED_TYPES = {"String": "string", "Integer": "int32", "Long": "int64"}
SUBTASKS = 3
SHOWN = 8


def test_placed_types_match_the_shared_decoding() -> None:
    for java_type, spec in PLACED_TYPES.items():
        assert JAVA_TYPE_SPECS[java_type] == spec


def test_every_placed_type_has_oracle_keys(oracle_dir: Path) -> None:
    """The placement tests below are only as good as the keys: each type must be present."""
    found = {java_type: 0 for java_type in PLACED_TYPES}
    for path in oracle_files(oracle_dir, "key_groups*.json"):
        for key in oracle_keys(load_json(path)):
            if key.java_type in found:
                found[key.java_type] += 1
    assert all(found.values()), f"oracle keys per placed type: {found}"


def _expected_groups(path: Path, java_type: str) -> tuple[list[int], dict[Any, list[int]]]:
    """(max parallelisms, {decoded key: oracle key group per max parallelism})."""
    data = load_json(path)
    max_parallelisms: list[int] = data["max_parallelisms"]
    assert max_parallelisms, f"{path.name}: no max_parallelisms"
    expected: dict[Any, list[int]] = {}
    for key in oracle_keys(data):
        if key.java_type != java_type:
            continue
        groups: list[int] = key.record["key_groups"]
        assert len(groups) == len(max_parallelisms), f"{path.name}: {key.describe()}"
        # the same key listed twice must have the same groups (else the oracle is inconsistent)
        assert expected.setdefault(key.value, groups) == groups, f"{path.name}: {key.describe()}"
    return max_parallelisms, expected


def _backend(spec: str, max_parallelism: int, map_kind: MapKind,
             key_group_range: KeyGroupRange | None = None
             ) -> tuple[HeapKeyedStateBackend[Any], ValueState]:
    backend: HeapKeyedStateBackend[Any] = HeapKeyedStateBackend(
        spec, max_parallelism, key_group_range, map_kind=map_kind)
    return backend, backend.get_value_state(value_state("v"))


def _placement(backend: HeapKeyedStateBackend[Any]) -> dict[Any, int]:
    """Every stored key and the key group of the map it sits in (each key exactly once)."""
    placed: dict[Any, int] = {}
    for key_group, state_map in backend.table("v").items_by_key_group():
        for entry in state_map:
            assert entry.key not in placed, f"{entry.key!r} is stored twice"
            placed[entry.key] = key_group
    return placed


def _mismatches(placed: dict[Any, int], expected: dict[Any, int]) -> list[str]:
    wrong = [f"{key!r}: stored in key group {group}, Flink {expected[key]}"
             for key, group in placed.items() if key in expected and expected[key] != group]
    wrong += [f"{key!r}: stored in key group {group}, but its Flink key group is not here"
              for key, group in placed.items() if key not in expected]
    wrong += [f"{key!r}: not stored (Flink key group {group})"
              for key, group in expected.items() if key not in placed]
    return wrong


@pytest.mark.parametrize("java_type", list(PLACED_TYPES))
def test_stored_entries_sit_in_flinks_key_group(key_groups_file: Path, java_type: str) -> None:
    spec = PLACED_TYPES[java_type]
    max_parallelisms, expected = _expected_groups(key_groups_file, java_type)
    problems: list[str] = []
    for index, max_parallelism in enumerate(max_parallelisms):
        backend, state = _backend(spec, max_parallelism, "copy_on_write")
        want = {key: groups[index] for key, groups in expected.items()}
        for key, group in want.items():
            backend.set_current_key(key)
            if backend.current_key_group != group:
                problems.append(f"maxP={max_parallelism} {key!r}: current key group "
                                f"{backend.current_key_group}, Flink {group}")
            state.update(group)
        problems += [f"maxP={max_parallelism} {m}"
                     for m in _mismatches(_placement(backend), want)]
        # the value written under each key is read back under that key
        for key, group in want.items():
            backend.set_current_key(key)
            if state.value() != group:
                problems.append(f"maxP={max_parallelism} {key!r}: reads {state.value()!r}")
    assert not problems, (
        f"{key_groups_file.name} {java_type}: {len(problems)} placement problems "
        f"({len(expected)} keys x {len(max_parallelisms)} max parallelisms):\n  "
        + "\n  ".join(problems[:SHOWN]))


@pytest.mark.parametrize("java_type", list(PLACED_TYPES))
def test_subtask_backends_accept_exactly_their_key_groups(key_groups_file: Path,
                                                          java_type: str) -> None:
    spec = PLACED_TYPES[java_type]
    max_parallelisms, expected = _expected_groups(key_groups_file, java_type)
    problems: list[str] = []
    refused_somewhere = False
    for index, max_parallelism in enumerate(max_parallelisms):
        parallelism = min(SUBTASKS, max_parallelism)
        want = {key: groups[index] for key, groups in expected.items()}
        owners: dict[Any, list[int]] = {key: [] for key in want}
        for operator_index in range(parallelism):
            key_range = compute_key_group_range_for_operator_index(
                max_parallelism, parallelism, operator_index)
            backend, state = _backend(spec, max_parallelism, "nested", key_range)
            where = f"maxP={max_parallelism} subtask {operator_index} {key_range}"
            for key, group in want.items():
                try:
                    backend.set_current_key(key)
                    state.update(group)
                except KeyGroupError as error:
                    refused_somewhere = True
                    if group in key_range:
                        problems.append(f"{where}: refused {key!r} of its own group {group}")
                    elif "non-deterministic" not in str(error):
                        problems.append(f"{where}: {key!r} refused without Flink's "
                                        f"explanation: {error}")
                else:
                    owners[key].append(operator_index)
                    if group not in key_range:
                        problems.append(f"{where}: accepted {key!r} of group {group}")
            inside = {key: group for key, group in want.items() if group in key_range}
            problems += [f"{where}: {m}" for m in _mismatches(_placement(backend), inside)]
        problems += [f"maxP={max_parallelism}: {key!r} owned by subtasks {subtasks}"
                     for key, subtasks in owners.items() if len(subtasks) != 1]
    assert not problems, (
        f"{key_groups_file.name} {java_type}: {len(problems)} problems:\n  "
        + "\n  ".join(problems[:SHOWN]))
    if expected and any(m >= SUBTASKS for m in max_parallelisms):
        assert refused_somewhere, "no key was ever outside a subtask's range: nothing was tested"
