"""Differential tests: key hashes and key groups against every ``key_groups*.json``.

Every expected number was computed by Flink's own ``KeyGroupRangeAssignment`` and
``MathUtils`` (oracle README §1). Mismatches are collected per file and reported together, the
first few in full, so one failing file gives one readable failure.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oracle import load_json

from statecore.hashing import bit_mix, murmur_hash
from statecore.key_groups import assign_to_key_group
from statecore.serializers import parse_type

#: Java class of an oracle key -> statectl type spec.
JAVA_TYPE_SPECS = {
    "String": "string",
    "Integer": "int32",
    "Long": "int64",
    "Boolean": "bool",
    "Double": "float64",
    "Short": "int16",
    "Byte": "int8",
    "Character": "char",
}

SHOWN_MISMATCHES = 8


@dataclass(frozen=True)
class OracleKey:
    index: int
    java_type: str
    spec: str
    value: Any
    record: dict[str, Any]

    def describe(self) -> str:
        shown = repr(self.value)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        return f"keys[{self.index}] {self.java_type} {shown}"


def _double_from_bits(hex_bits: str) -> float:
    """The double with these raw bits (``doubleToRawLongBits``), NaN payload included."""
    value: float = struct.unpack(">d", bytes.fromhex(hex_bits))[0]
    return value


def _decode_value(java_type: str, record: dict[str, Any]) -> Any:
    raw = record["value"]
    if java_type in ("String", "Character"):
        return raw  # a str; json keeps lone surrogates as lone surrogate code points
    if java_type in ("Integer", "Short", "Byte", "Boolean"):
        return raw
    if java_type == "Long":
        return int(raw)
    if java_type == "Double":
        if "bits" in record:
            return _double_from_bits(record["bits"])
        return float(raw)  # float() reads Java's "NaN", "Infinity", "-0.0", "1.0E21"
    raise AssertionError(f"unknown key type {java_type!r}: map it in JAVA_TYPE_SPECS")


def oracle_keys(data: dict[str, Any]) -> Iterator[OracleKey]:
    for index, record in enumerate(data["keys"]):
        java_type = record["type"]
        assert java_type in JAVA_TYPE_SPECS, (
            f"keys[{index}] has unknown type {java_type!r}: map it in JAVA_TYPE_SPECS"
        )
        yield OracleKey(
            index, java_type, JAVA_TYPE_SPECS[java_type], _decode_value(java_type, record), record
        )


def _check_all(
    keys: list[OracleKey], check: Callable[[OracleKey], str | None], what: str, path: Path
) -> None:
    assert keys, f"{path.name}: no keys"
    mismatches = [f"{key.describe()}: {problem}" for key in keys if (problem := check(key))]
    assert not mismatches, (
        f"{path.name}: {len(mismatches)} of {len(keys)} keys differ from Flink in {what}:\n  "
        + "\n  ".join(mismatches[:SHOWN_MISMATCHES])
    )


def _load(path: Path) -> tuple[dict[str, Any], list[OracleKey]]:
    data = load_json(path)
    keys = list(oracle_keys(data))
    assert len(keys) == data["num_keys"], f"{path.name}: num_keys says {data['num_keys']}"
    return data, keys


def test_decoded_values_match_the_recorded_forms(key_groups_file: Path) -> None:
    """Sanity of the decoding itself: code units, char values and double bits agree."""

    def check(key: OracleKey) -> str | None:
        record = key.record
        if key.java_type == "String":
            units_hex = key.value.encode("utf-16-be", "surrogatepass").hex()
            if units_hex != record["utf16_hex"]:
                return f"code units {units_hex} != utf16_hex {record['utf16_hex']}"
            try:
                key.value.encode("utf-16-be")
                well_formed = True
            except UnicodeEncodeError:
                well_formed = False
            if well_formed != record["well_formed_utf16"]:
                return f"well-formed {well_formed} != {record['well_formed_utf16']}"
        elif key.java_type == "Character":
            if len(key.value) != 1 or ord(key.value) != record["code_unit"]:
                return f"not the single code unit {record['code_unit']}"
        elif key.java_type == "Double" and "bits" in record:
            from_text = float(record["value"])
            if math.isnan(key.value) != math.isnan(from_text):
                return f"bits {record['bits']} and text {record['value']!r} disagree on NaN"
            if not math.isnan(from_text) and struct.pack(">d", from_text) != bytes.fromhex(
                record["bits"]
            ):
                return f"text {record['value']!r} does not parse to bits {record['bits']}"
        return None

    _check_all(_load(key_groups_file)[1], check, "decoding", key_groups_file)


def test_java_hash_codes(key_groups_file: Path) -> None:
    def check(key: OracleKey) -> str | None:
        actual = parse_type(key.spec).java_hash(key.value)
        expected = key.record["hashCode"]
        return None if actual == expected else f"java_hash {actual} != hashCode {expected}"

    _check_all(_load(key_groups_file)[1], check, "hashCode", key_groups_file)


def test_murmur_hash_of_hash_codes(key_groups_file: Path) -> None:
    def check(key: OracleKey) -> str | None:
        actual = murmur_hash(key.record["hashCode"])
        expected = key.record["murmur"]
        return None if actual == expected else f"murmur_hash {actual} != murmur {expected}"

    _check_all(_load(key_groups_file)[1], check, "murmurHash", key_groups_file)


def test_assign_to_key_group_for_every_max_parallelism(key_groups_file: Path) -> None:
    data, keys = _load(key_groups_file)
    max_parallelisms: list[int] = data["max_parallelisms"]
    assert max_parallelisms, f"{key_groups_file.name}: no max_parallelisms"

    def check(key: OracleKey) -> str | None:
        expected: list[int] = key.record["key_groups"]
        if len(expected) != len(max_parallelisms):
            return f"{len(expected)} key groups for {len(max_parallelisms)} max parallelisms"
        wrong = [
            f"maxP={max_p}: {actual} != {want}"
            for max_p, want in zip(max_parallelisms, expected, strict=True)
            if (actual := assign_to_key_group(key.value, max_p, key.spec)) != want
        ]
        return "; ".join(wrong) or None

    _check_all(keys, check, "assignToKeyGroup", key_groups_file)


def _check_int_pairs(
    path: Path, field: str, function: Callable[[int], int], name: str
) -> None:
    pairs: list[list[int]] = load_json(path)[field]
    assert pairs, f"{path.name}: {field} is empty"
    mismatches = [
        f"{name}({given}) = {actual}, Flink {expected}"
        for given, expected in pairs
        if (actual := function(given)) != expected
    ]
    assert not mismatches, (
        f"{path.name}: {len(mismatches)} of {len(pairs)} {field} differ:\n  "
        + "\n  ".join(mismatches[:SHOWN_MISMATCHES])
    )


def test_murmur_ints(key_groups_file: Path) -> None:
    _check_int_pairs(key_groups_file, "murmur_ints", murmur_hash, "murmur_hash")


def test_bitmix_ints(key_groups_file: Path) -> None:
    _check_int_pairs(key_groups_file, "bitmix_ints", bit_mix, "bit_mix")
