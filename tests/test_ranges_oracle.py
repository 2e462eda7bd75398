"""Differential tests: key-group ranges and operator indexes against every ``ranges*.json``.

Plus example vectors from Flink's own tests (reference §1.1 and §1.3).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from oracle import load_json

from statecore.errors import InvalidArgumentError
from statecore.hashing import round_up_to_power_of_two
from statecore.key_groups import (
    UPPER_BOUND_MAX_PARALLELISM,
    assign_to_key_group,
    check_parallelism_preconditions,
    compute_default_max_parallelism,
    compute_key_group_range_for_operator_index,
    compute_operator_index_for_key_group,
)

SHOWN_MISMATCHES = 8

#: Flink's documented messages (reference §1.2); where Flink raised one, statectl must match it.
#: Other messages ("/ by zero", null) are not contracts: only the error type is checked there.
DOCUMENTED_MESSAGES = [
    re.compile(r"Operator parallelism not within bounds: -?\d+"),
    re.compile(re.escape("Maximum parallelism must not be smaller than parallelism.")),
    re.compile(re.escape("Assigned key must not be null!")),
    re.compile(r"Maximum parallelism must be between 1 and 32768\. Found: -?\d+"),
]


def _report(path: Path, what: str, mismatches: list[str], checked: int) -> None:
    assert checked, f"{path.name}: no {what} records"
    assert not mismatches, (
        f"{path.name}: {len(mismatches)} of {checked} {what} checks differ from Flink:\n  "
        + "\n  ".join(mismatches[:SHOWN_MISMATCHES])
    )


def test_key_group_ranges(ranges_file: Path) -> None:
    mismatches: list[str] = []
    checked = 0
    for entry in load_json(ranges_file)["key_group_ranges"]:
        max_p, p, ranges = entry["max_parallelism"], entry["parallelism"], entry["ranges"]
        if len(ranges) != p:
            mismatches.append(f"M={max_p} P={p}: {len(ranges)} ranges recorded")
        for index, (start, end) in enumerate(ranges):
            checked += 1
            actual = compute_key_group_range_for_operator_index(max_p, p, index)
            if (actual.start, actual.end) != (start, end):
                mismatches.append(
                    f"M={max_p} P={p} i={index}: ({actual.start}, {actual.end}) != "
                    f"({start}, {end})"
                )
    _report(ranges_file, "key_group_ranges", mismatches, checked)


def test_operator_index_for_key_group(ranges_file: Path) -> None:
    mismatches: list[str] = []
    checked = 0
    for entry in load_json(ranges_file)["operator_index_for_key_group"]:
        max_p, p = entry["max_parallelism"], entry["parallelism"]
        indexes: list[int] = entry["operator_index_per_key_group"]
        if len(indexes) != max_p:
            mismatches.append(f"M={max_p} P={p}: {len(indexes)} key groups recorded")
        for key_group, expected in enumerate(indexes):
            checked += 1
            actual = compute_operator_index_for_key_group(max_p, p, key_group)
            if actual != expected:
                mismatches.append(f"M={max_p} P={p} kg={key_group}: {actual} != {expected}")
    _report(ranges_file, "operator_index_for_key_group", mismatches, checked)


def test_default_max_parallelism(ranges_file: Path) -> None:
    pairs: list[list[int]] = load_json(ranges_file)["default_max_parallelism"]
    mismatches = [
        f"p={p}: {actual} != {expected}"
        for p, expected in pairs
        if (actual := compute_default_max_parallelism(p)) != expected
    ]
    _report(ranges_file, "default_max_parallelism", mismatches, len(pairs))


# --- invalid_inputs ---------------------------------------------------------------------------


def _parallelisms_in_bounds(max_p: int, p: int) -> bool:
    return 0 < p <= max_p <= UPPER_BOUND_MAX_PARALLELISM


def _assign_null_key(max_p: int) -> int:
    return assign_to_key_group(None, max_p, "int32")


def _range_as_list(max_p: int, p: int, index: int) -> list[int]:
    key_group_range = compute_key_group_range_for_operator_index(max_p, p, index)
    return [key_group_range.start, key_group_range.end]


@dataclass(frozen=True)
class OracleFunction:
    """A Flink function of ``invalid_inputs``: its statectl port and statectl's bounds."""

    call: Callable[..., Any]
    in_bounds: Callable[..., bool]


#: Keyed by the exact ``function`` strings of the oracle; an unknown name fails the test.
ORACLE_FUNCTIONS = {
    "computeKeyGroupRangeForOperatorIndex": OracleFunction(
        _range_as_list, lambda m, p, i: _parallelisms_in_bounds(m, p) and 0 <= i < p
    ),
    "computeOperatorIndexForKeyGroup": OracleFunction(
        compute_operator_index_for_key_group,
        lambda m, p, kg: _parallelisms_in_bounds(m, p) and 0 <= kg < m,
    ),
    "computeDefaultMaxParallelism": OracleFunction(
        compute_default_max_parallelism, lambda p: 0 < p <= UPPER_BOUND_MAX_PARALLELISM
    ),
    "checkParallelismPreconditions": OracleFunction(
        check_parallelism_preconditions, lambda p: 0 < p <= UPPER_BOUND_MAX_PARALLELISM
    ),
    "assignToKeyGroup(Integer 42, maxP)": OracleFunction(
        lambda max_p: assign_to_key_group(42, max_p, "int32"),
        lambda max_p: 0 < max_p <= UPPER_BOUND_MAX_PARALLELISM,
    ),
    # A null key is never valid; Flink cannot return a value for it either.
    "assignToKeyGroup(null, maxP)": OracleFunction(_assign_null_key, lambda max_p: False),
}


def _check_invalid_input(record: dict[str, Any]) -> str | None:
    """``None`` if statectl behaves as required for this record, else what went wrong."""
    name, args = record["function"], record["args"]
    function = ORACLE_FUNCTIONS[name]
    try:
        actual = function.call(*args)
    except InvalidArgumentError as exc:
        raised: InvalidArgumentError | None = exc
    else:
        raised = None

    if "exception" in record:
        # Flink raised: statectl must raise too, with Flink's text where Flink documents one.
        if raised is None:
            return f"Flink raised {record['exception']}, statectl returned {actual!r}"
        message = record["message"]
        if message is not None and any(p.fullmatch(message) for p in DOCUMENTED_MESSAGES):
            if str(raised) != message:
                return f"message {str(raised)!r} != Flink's {message!r}"
        return None

    if not function.in_bounds(*args):
        # Deliberate, documented difference (statecore/key_groups.py docstring): Flink returns
        # a value outside its documented bounds (operator index >= parallelism, anything for
        # computeOperatorIndexForKeyGroup, maxP 0 / negative / > 32768 for assignToKeyGroup);
        # statectl refuses with InvalidArgumentError instead of a key group no subtask owns.
        if raised is None:
            return f"out of bounds: expected InvalidArgumentError, got {actual!r}"
        return None

    if raised is not None:
        return f"in bounds, Flink returned {record['result']!r}, statectl raised {raised!r}"
    if actual != record["result"]:
        return f"{actual!r} != Flink's {record['result']!r}"
    return None


def test_invalid_inputs(ranges_file: Path) -> None:
    records: list[dict[str, Any]] = load_json(ranges_file)["invalid_inputs"]
    unknown = sorted({r["function"] for r in records} - ORACLE_FUNCTIONS.keys())
    assert not unknown, f"{ranges_file.name}: unknown functions {unknown}; map them"
    mismatches = [
        f"{record['function']}({', '.join(map(str, record['args']))}): {problem}"
        for record in records
        if (problem := _check_invalid_input(record))
    ]
    _report(ranges_file, "invalid_inputs", mismatches, len(records))


# --- examples from Flink's own tests ----------------------------------------------------------


@pytest.mark.parametrize(("key", "key_group"), [(7, 1), (10, 9), (45, 6), (90, 2)])
def test_cep_rescaling_key_groups(key: int, key_group: int) -> None:
    """``CEPRescalingTest``: Integer keys, maxParallelism 10."""
    assert assign_to_key_group(key, 10, "int32") == key_group


@pytest.mark.parametrize(("key_group", "operator_index"), [(1, 0), (9, 1)])
def test_cep_rescaling_operator_indexes(key_group: int, operator_index: int) -> None:
    """``CEPRescalingTest``: maxParallelism 10, parallelism 2."""
    assert compute_operator_index_for_key_group(10, 2, key_group) == operator_index


@pytest.mark.parametrize(
    ("value", "rounded"), [(0, 0), (1, 1), (3, 4), (5, 8), (17, 32), (125, 128)]
)
def test_round_up_to_power_of_two(value: int, rounded: int) -> None:
    """``MathUtilTest``."""
    assert round_up_to_power_of_two(value) == rounded
