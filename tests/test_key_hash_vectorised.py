"""formats.model.key_hash: Flink's key groups over whole Arrow columns equal the per-key
functions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import load_json
from test_key_groups_oracle import _load

from formats.model.arrow_types import arrow_type, to_arrow
from formats.model.key_hash import java_hash_codes, key_groups, murmur_hashes
from statecore.errors import StatectlError
from statecore.key_groups import assign_to_key_group


def _column(spec: str, values: list[object]) -> pa.Array:
    convert = to_arrow(spec)
    return pa.array([convert(v) for v in values], type=arrow_type(spec))


def test_key_groups_equal_flink_for_every_oracle_key(key_groups_file: Path) -> None:
    data, keys = _load(key_groups_file)
    by_spec: dict[str, list[object]] = {}
    for key in keys:
        if isinstance(key.value, str) and any(0xD800 <= ord(c) <= 0xDFFF for c in key.value):
            continue  # lone surrogates: not storable in an Arrow string column
        by_spec.setdefault(key.spec, []).append(key)
    assert {"string", "int32", "int64"} <= by_spec.keys()
    for spec, group in by_spec.items():
        column = _column(spec, [k.value for k in group])  # type: ignore[attr-defined]
        codes = java_hash_codes(column, spec)
        assert list(codes) == [k.record["hashCode"] for k in group], spec  # type: ignore
        for i, max_parallelism in enumerate(data["max_parallelisms"]):
            expected = [k.record["key_groups"][i] for k in group]  # type: ignore[attr-defined]
            assert list(key_groups(column, spec, max_parallelism)) == expected, (
                spec, max_parallelism)


def test_murmur_hashes_equal_flink(key_groups_file: Path) -> None:
    pairs = load_json(key_groups_file)["murmur_ints"]
    codes = np.array([code for code, _ in pairs], dtype=np.int64)
    assert list(murmur_hashes(codes)) == [murmur for _, murmur in pairs]


KEYS = {
    "string": st.text(),
    "int32": st.integers(-(2**31), 2**31 - 1),
    "int64": st.integers(-(2**63), 2**63 - 1),
    "int16": st.integers(-(2**15), 2**15 - 1),
    "bool": st.booleans(),
    "tuple<string,int64>": st.tuples(st.text(max_size=5), st.integers(-(2**63), 2**63 - 1)),
}


@st.composite
def typed_keys(draw: st.DrawFn) -> tuple[str, list[object]]:
    spec = draw(st.sampled_from(sorted(KEYS)))
    values = draw(st.lists(KEYS[spec].filter(
        lambda v: not isinstance(v, str) or all(not 0xD800 <= ord(c) <= 0xDFFF for c in v)),
        max_size=40))
    return spec, values


@settings(max_examples=150, deadline=None)
@given(typed_keys(), st.integers(1, 32768), st.integers(0, 5))
def test_key_groups_equal_the_per_key_function(typed: tuple[str, list[object]],
                                               max_parallelism: int, cut: int) -> None:
    spec, values = typed
    column = _column(spec, values)
    expected = [assign_to_key_group(v, max_parallelism, spec) for v in values]
    assert list(key_groups(column, spec, max_parallelism)) == expected
    # a slice and a chunked array of the same values agree
    sliced = column.slice(min(cut, len(values)))
    assert list(key_groups(sliced, spec, max_parallelism)) == expected[min(cut, len(values)):]
    half = len(values) // 2
    chunked = pa.chunked_array([column.slice(0, half), column.slice(half)],
                               type=column.type)
    assert list(key_groups(chunked, spec, max_parallelism)) == expected


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(st.characters(max_codepoint=0x7F), max_size=30) | st.just(""),
                max_size=60),
       st.integers(1, 40), st.integers(0, 3))
def test_string_hashes_in_chunks_equal_the_per_key_function(
        values: list[str], chunk: int, cut: int) -> None:
    # strings are hashed a chunk of bytes at a time: chunks end inside and between strings,
    # strings longer than a chunk, empty strings (also at chunk ends) and a sliced column
    import formats.model.key_hash as key_hash
    column = pa.array(values, pa.string()).slice(min(cut, len(values)))
    expected = [assign_to_key_group(v, 128, "string") for v in values[min(cut, len(values)):]]
    saved = key_hash._STRING_CHUNK
    key_hash._STRING_CHUNK = chunk
    try:
        assert list(key_groups(column, "string", 128)) == expected
    finally:
        key_hash._STRING_CHUNK = saved


def test_null_keys_and_bad_max_parallelism_are_refused() -> None:
    with pytest.raises(StatectlError, match="null"):
        key_groups(pa.array(["a", None]), "string", 128)
    for bad in (0, 32769):
        with pytest.raises(StatectlError, match="Maximum parallelism"):
            key_groups(pa.array(["a"]), "string", bad)
