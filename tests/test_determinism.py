"""Key groups do not depend on the process: no builtin ``hash()`` reaches a key group.

Also property tests of the Java ``hashCode`` rules against independent formulations.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from oracle import REPO_ROOT

from statecore.hashing import INT32_MAX, INT32_MIN, java_string_hash, java_tuple_hash
from statecore.serializers import parse_type

#: Defines ``key_group_table()``: key groups of ~200 keys of each kind, as JSON-ready lists.
#: Run both in this process and in subprocesses; keys come from a seeded ``random.Random``.
KEY_GROUP_TABLE_SOURCE = """
import random

from statecore.key_groups import assign_to_key_group


def key_group_table():
    rng = random.Random(20240601)
    alphabet = "abcXYZ019 _-\\u00e9\\u00df\\u4e2d\\u6587\\U0001F600\\U0001D11E\\ud800\\udfff"
    strings = ["", "Aa", "BB", "polygenelubricants", "f5a5a608"] + [
        "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 24))) for _ in range(195)
    ]
    int64s = [0, -1, 2**31, -(2**31) - 1, 2**63 - 1, -(2**63)] + [
        rng.randrange(-(2**63), 2**63) for _ in range(194)
    ]
    float64s = [0.0, -0.0, float("nan"), float("inf"), float("-inf"), 1e21] + [
        rng.uniform(-1e6, 1e6) for _ in range(194)
    ]
    tuples = list(zip(strings, int64s))
    table = {}
    for max_p in (128, 32768):
        table[f"string/{max_p}"] = [assign_to_key_group(k, max_p, "string") for k in strings]
        table[f"string-inferred/{max_p}"] = [assign_to_key_group(k, max_p) for k in strings]
        table[f"int64/{max_p}"] = [assign_to_key_group(k, max_p, "int64") for k in int64s]
        table[f"float64/{max_p}"] = [assign_to_key_group(k, max_p, "float64") for k in float64s]
        table[f"tuple/{max_p}"] = [
            assign_to_key_group(k, max_p, "tuple<string,int64>") for k in tuples
        ]
        table[f"tuple-inferred/{max_p}"] = [assign_to_key_group(k, max_p) for k in tuples]
    return table
"""

PRINT_TABLE = """
import json
print(json.dumps({"python_hash": hash("statectl"), "table": key_group_table()}))
"""


def _table_in_subprocess(hash_seed: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    completed = subprocess.run(
        [sys.executable, "-c", KEY_GROUP_TABLE_SOURCE + PRINT_TABLE],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    result: dict[str, Any] = json.loads(completed.stdout)
    return result


def _table_in_process() -> dict[str, list[int]]:
    namespace: dict[str, Any] = {}
    exec(KEY_GROUP_TABLE_SOURCE, namespace)
    table: dict[str, list[int]] = namespace["key_group_table"]()
    return table


def test_key_groups_do_not_depend_on_pythonhashseed() -> None:
    first = _table_in_subprocess("1")
    second = _table_in_subprocess("12345")
    # The seeds really took effect: builtin hash() differs between the two processes.
    assert first["python_hash"] != second["python_hash"]
    assert first["table"] == second["table"]
    assert first["table"] == _table_in_process()
    assert all(len(groups) == 200 for groups in first["table"].values())


# --- Java hashCode rules, as properties --------------------------------------------------------

#: Any code point, including lone surrogates (which ``st.characters()`` leaves out by default).
JAVA_CHARS = st.one_of(st.characters(codec=None), st.characters(categories=["Cs"]))
JAVA_STRINGS = st.text(alphabet=JAVA_CHARS)


def _to_int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _horner_over_utf16_units(text: str) -> int:
    """``String.hashCode`` straight from its definition over the Java code units."""
    encoded = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for (unit,) in struct.iter_unpack(">H", encoded):
        h = _to_int32(31 * h + unit)
    return h


@given(JAVA_STRINGS)
def test_java_string_hash_is_horner_over_utf16_code_units(text: str) -> None:
    assert java_string_hash(text) == _horner_over_utf16_units(text)
    assert parse_type("string").java_hash(text) == _horner_over_utf16_units(text)


TUPLE_FIELDS = st.lists(
    st.one_of(
        st.tuples(st.just("int32"), st.none() | st.integers(INT32_MIN, INT32_MAX)),
        st.tuples(st.just("string"), st.none() | JAVA_STRINGS),
    ),
    min_size=1,
    max_size=6,
)


def _field_hash(value: int | str | None) -> int:
    if value is None:
        return 0
    if isinstance(value, str):
        return _horner_over_utf16_units(value)
    return value


@given(TUPLE_FIELDS)
def test_java_tuple_hash_follows_flink_tuple_rule(fields: list[tuple[str, Any]]) -> None:
    # Flink TupleN.hashCode: h = hash(f0); then h = 31 * h + hash(fi); a null field hashes to 0.
    values = tuple(value for _, value in fields)
    expected = _field_hash(values[0])
    for value in values[1:]:
        expected = _to_int32(31 * expected + _field_hash(value))

    field_hashes = [None if v is None else _field_hash(v) for v in values]
    assert java_tuple_hash(field_hashes) == expected
    spec = "tuple<" + ",".join(spec for spec, _ in fields) + ">"
    assert parse_type(spec).java_hash(values) == expected
