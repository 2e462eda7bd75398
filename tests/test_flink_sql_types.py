"""Flink SQL's and CEP's serializers (``formats.flink.types.table_runtime``, ``cep``,
``row_data``, ``binary_data``) against Flink's own bytes.

Ground truth: ``java SerializerVectors sql`` (``tests/flink_jobs/SerializerVectors.java``, class
``SqlVectors``) serializes values with Flink's own ``RowDataSerializer`` (every ``LogicalType``
its ``BinaryWriter`` writes), ``TimestampDataSerializer``, ``DecimalDataSerializer``,
``ArrayDataSerializer``, ``MapDataSerializer``, ``RawValueDataSerializer``,
``LinkedListSerializer``, ``SortedMapSerializer``, ``WindowKeySerializer``, the table runtime's
windows, ``ExternalSerializer``, and flink-cep's ``NFAStateSerializer``, ``Lockable``,
``SharedBufferNode``/``Edge``, ``NodeId``, ``EventId``, ``DeweyNumber`` serializers, with their
snapshots (older forms too), on Flink 2.3 and on Flink 1.20. statectl reads every snapshot,
decodes every value, and writes it back to Flink's bytes -- as it was read (a row keeps its
binary form) and as built by hand (the binary forms written anew, as Flink's writers do).
"""

from __future__ import annotations

import decimal
import hashlib
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats.flink.java.input import DataReader
from formats.flink.types.binary_data import make_decimal, read_row, sql_field, write_row
from formats.flink.types.codecs import RowWithKind, codec_for, why_undecodable
from formats.flink.types.encoders import encoder_for
from formats.flink.types.logical_types import SqlType
from formats.flink.types.row_data import EmptyRowData, RowDataTuple, murmur_hash_by_words
from formats.flink.types.snapshots import SerializerSnapshot, read_versioned_snapshot
from statecore.errors import InvalidArgumentError, StatectlError
from statecore.values import Instant

Vector = tuple[str, bytes, bytes]


def _run(lib: Path, classes: Path) -> list[Vector]:
    from flink_restore import JVM_OPTIONS

    done = subprocess.run(["java", *JVM_OPTIONS, "-cp", f"{lib}/*:{classes}",
                           "SerializerVectors", "sql"], capture_output=True, text=True,
                          check=False, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return [(name, bytes.fromhex(snapshot), bytes.fromhex(value))
            for name, snapshot, value in (line.split("\t")[1:] for line in
                                          done.stdout.splitlines()
                                          if line.startswith(("SQL\t", "SQL-OLD\t")))]


@pytest.fixture(scope="module")
def sql_vectors() -> list[Vector]:
    """``(name, versioned snapshot, value)`` of every SQL/CEP case, on Flink 2.3."""
    from flink_restore import FlinkUnavailable, build

    try:
        b = build()
    except FlinkUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    return _run(b.lib, b.classes)


@pytest.fixture(scope="module")
def sql_1x_vectors() -> list[Vector]:
    """The same cases on Flink 1.20 (its jars and compiled vectors from
    ``tests/flink_versions.py``, which compiles SerializerVectors.java against them)."""
    from flink_restore import DRIVER_SOURCES, FlinkUnavailable, cache_root
    from flink_versions import FLINK_1X, pyflink_lib, serializer_vectors

    try:
        serializer_vectors()  # compiles (once) and caches the classes
    except FlinkUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    sources = [DRIVER_SOURCES / "SerializerVectors.java",
               DRIVER_SOURCES / "java-1x" / "ScalaVectors.java"]
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:16]
    return _run(pyflink_lib(), cache_root() / f"vectors-{FLINK_1X}-{digest}")


def _ms(millis: int, nanos: int = 0) -> Instant:
    return Instant(millis * 1_000_000 + nanos)


D = decimal.Decimal
#: What some of Flink's values decode to (SqlVectors gives Flink's serializers these values).
SQL_VALUES: dict[str, Any] = {
    "TimestampData p3": _ms(1_700_000_000_123),
    "TimestampData p9": _ms(-1_500, 999_999),
    "TimestampData p6": _ms(-1, 1_000),
    "TimestampData p0": _ms(-62_135_596_800_000),
    "DecimalData 10,2": D("-12345678.90"),
    "DecimalData 38,10": D("1234567890123456789012345678.0123456789"),
    "DecimalData 20,0": D("-99999999999999999999"),
    "DecimalData 19,4 zero": D("0.0000"),
    "StringData": "Zürich 東京",
    "Array of INT": [1, None, -3],
    "Array of BIGINT NOT NULL": [-(1 << 63), 0, 7],
    "Array of STRING": ["a", None, "longer than seven"],
    "Array empty": [],
    "Array of BOOLEAN": [True, None, False],
    "Array of SMALLINT": [-2, None, 300],
    "Array of TIMESTAMP(9)": [_ms(5, 6), None],
    "Array of DECIMAL(30,2)": [D("-1.50"), None],
    "Array of ARRAY<INT>": [[1, 2], None],
    "Map of STRING to BIGINT": {"a": 1, "bb": None, "ccccccccc": -1},
    "Multiset of INT": {7: 2, -1: 1},
    "RawValueData of String": "raw ü",
    "RawValueData of Long": -5,
    "LinkedList of RowData": [("a", 1), None, RowWithKind(["b", None], 3)],
    "LinkedList of Long without null mask": [3, -4],
    "LinkedList of Long outer v2": [3, None],
    "LinkedList of Long outer v1": [3, 9],
    "SortedMap of Long to List of RowData": {-1: None, 5: [("x", 2)]},
    "WindowKey": (3_600_000, ("k1", 3)),
    "CountWindow": 42,
    "table TimeWindow": (-1000, 1000),
    "SortedLong": -5,
    "External ROW<a INT, b STRING>": (1, "x"),
    "External BIGINT": 7,
    "MapView of RowData to Long": {("d", 4): 2},
    "Row of every scalar type": (
        True, -128, -2, -(1 << 31), (1 << 63) - 1, 1.5, -0.25, "ab ",
        "a string longer than 7 bytes ü", b"\x01\x02", bytes(range(9, 0, -1)), -719_162,
        86_399_999, _ms(1_700_000_000_123), _ms(-1, 999_999), _ms(0), _ms(253_402_300_799_999,
                                                                            999_000),
        D("-12345678.90"), D("-12345678901234567890.123456789012345678"), -13,
        86_400_000 * 3 + 1),
    "Row of every scalar type all null": RowWithKind([None] * 21, 1),
    "Row of nested types": (
        (5, "inner string, long"), ["a", None, "bbbbbbbbbbb"], [1, 2, 3], {"k": 0.5, "n": None},
        {3: 2}, b"\x04raw", [_ms(1, 2), None], [(None, "x"), None]),
    "Row of nested types all null": (None,) * 8,
    "Row empty": [],
    "Row of 70 fields": tuple(None if i % 3 == 0 else i for i in range(70)),
    "Row key of one string": ("k17",),
    "Row NOT NULL fields": (9, "five5"),
    "EventId": (3, -5),
    "NodeId": ((3, -5), "middle ü"),
    "NodeId null": None,
    "DeweyNumber": [1, 3, 0],
    "SharedBufferEdge": {"target": ((0, 1000), "start"), "deweyNumber": [1, 3, 0]},
    "SharedBufferEdge to null": {"target": None, "deweyNumber": [1]},
    "SharedBufferNode": {"edges": [
        {"refCounter": 1, "element": {"target": ((0, 1000), "start"), "deweyNumber": [1]}},
        {"refCounter": 0, "element": {"target": None, "deweyNumber": [1, 3, 0]}}]},
    "Lockable of RowData": {"refCounter": 1, "element": ("k1", 7, _ms(1000))},
    "Lockable of String": {"refCounter": 0, "element": "event"},
    "Lockable v1 legacy": {"refCounter": 3, "element": "e"},
    "NFAState empty": {"partialMatches": [], "completedMatches": []},
    "Map of EventId to Lockable of RowData": {(0, 1000): {"refCounter": 1,
                                                           "element": (None, 1, None)}},
}
_STATE = {"currentStateName": "$endState$", "previousBufferEntry": ((0, 1000), "start"),
          "version": [1, 3, 0], "startTimestamp": 5, "previousTimestamp": 6,
          "startEventID": (3, -5)}
SQL_VALUES["NFAState"] = {"completedMatches": [_STATE]}
#: Without previous timestamps (outer snapshot version 1, and the legacy form)
SQL_VALUES["NFAState outer v1"] = SQL_VALUES["NFAState v1 legacy"] = {
    "completedMatches": [{k: v for k, v in _STATE.items() if k != "previousTimestamp"}]}
SQL_VALUES["SharedBufferNode before 1.13"] = {"edges": [
    {"refCounter": 0, "element": {"target": ((0, 1000), "start"), "deweyNumber": [1]}},
    {"refCounter": 0, "element": {"target": None, "deweyNumber": [1, 3, 0]}}]}
#: Only in Flink 2.x, only in Flink 1.x
FLINK_2X_ONLY = frozenset({"SortedLong"})
FLINK_1X_ONLY = frozenset({"SharedBufferNode before 1.13"})


def _kinds_equal(a: Any, b: Any) -> bool:
    """Equal, with the same row kinds and decimal scales at any depth."""
    if isinstance(a, decimal.Decimal) or isinstance(b, decimal.Decimal):
        return isinstance(a, decimal.Decimal) and isinstance(b, decimal.Decimal) and \
            a.as_tuple() == b.as_tuple()
    if getattr(a, "kind", 0) != getattr(b, "kind", 0):
        return False
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        return len(a) == len(b) and all(_kinds_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_kinds_equal(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float) and a != a:
        return b != b
    return bool(a == b)


def _matches(value: Any, expected: Any) -> bool:
    """``value`` equals ``expected``; a dict of expected keys is checked on those keys only."""
    if isinstance(expected, dict) and isinstance(value, dict) and \
            set(expected) < set(value):
        return all(_kinds_equal(value[k], v) for k, v in expected.items())
    return _kinds_equal(value, expected)


def plain(value: Any) -> Any:
    """A decoded value as built by hand: no kept binary forms (a row's kind kept)."""
    if isinstance(value, EmptyRowData):
        return []
    if isinstance(value, tuple):
        fields = [plain(v) for v in value]
        kind = getattr(value, "kind", 0)
        return RowWithKind(fields, kind) if kind else tuple(fields)
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    return value


def _decode(name: str, snapshot_bytes: bytes, data: bytes) -> tuple[SerializerSnapshot, Any]:
    snapshot = read_versioned_snapshot(DataReader(snapshot_bytes, name))
    codec = codec_for(snapshot)
    assert codec is not None, f"{name}: {why_undecodable(snapshot)}"
    reader = DataReader(data, name)
    value = codec.read_delimited(reader)
    assert reader.at_end(), f"{name}: {reader.pos} of {len(data)} bytes read"
    return snapshot, value


def _encode(snapshot: SerializerSnapshot, value: Any) -> bytes:
    encoder = encoder_for(snapshot)
    assert encoder is not None
    out = bytearray()
    encoder(out, value)
    return bytes(out)


def _check(vectors: list[Vector]) -> list[str]:
    wrong = []
    for name, snapshot_bytes, data in vectors:
        try:
            snapshot, value = _decode(name, snapshot_bytes, data)
            if name in SQL_VALUES and not _matches(value, SQL_VALUES[name]):
                wrong.append(f"{name}: decoded {value!r}, expected {SQL_VALUES[name]!r}")
            if _encode(snapshot, value) != data:
                wrong.append(f"{name}: written back as {_encode(snapshot, value).hex()}, "
                             f"Flink wrote {data.hex()}")
            built = _encode(snapshot, plain(value))
            if built != data:
                wrong.append(f"{name}: built by hand, written as {built.hex()}, Flink wrote "
                             f"{data.hex()}")
        except (StatectlError, AssertionError) as exc:
            wrong.append(f"{name}: {type(exc).__name__}: {exc}")
    return wrong


def test_flinks_sql_and_cep_serializers_decode_and_encode_back(sql_vectors: list[Vector]
                                                               ) -> None:
    """Every value Flink 2.3 serialized decodes (to the expected value) and encodes back to
    Flink's bytes, as read and as built by hand."""
    names = {name for name, _, _ in sql_vectors}
    assert set(SQL_VALUES) - names == FLINK_1X_ONLY
    assert len(sql_vectors) >= 60
    wrong = _check(sql_vectors)
    assert not wrong, "\n".join(wrong)


def test_flink_1x_sql_and_cep_serializers_decode_and_encode_back(
        sql_1x_vectors: list[Vector]) -> None:
    """The same on Flink 1.20."""
    names = {name for name, _, _ in sql_1x_vectors}
    assert set(SQL_VALUES) - names == FLINK_2X_ONLY
    assert FLINK_1X_ONLY <= names
    wrong = _check(sql_1x_vectors)
    assert not wrong, "\n".join(wrong)


def test_flink_2x_and_1x_write_the_same_sql_snapshots_and_values(
        sql_vectors: list[Vector], sql_1x_vectors: list[Vector]) -> None:
    """Flink 1.20 writes every SQL/CEP snapshot and value as Flink 2.3 does (the Java-serialized
    ``LogicalType``s in the snapshots included)."""
    new = {name: (snapshot, data) for name, snapshot, data in sql_vectors}
    old = {name: (snapshot, data) for name, snapshot, data in sql_1x_vectors}
    assert set(new) - set(old) == FLINK_2X_ONLY
    assert set(old) - set(new) == FLINK_1X_ONLY
    assert {name for name in old if name in new and old[name] != new[name]} == set()


def test_every_decoded_sql_value_is_held_by_its_spec(sql_vectors: list[Vector]) -> None:
    """The spec of every codec is one statectl holds: each value goes into an Arrow array of
    the spec's type and into JSON, in the canonical forms (epoch milliseconds, decimal text)."""
    import json

    import pyarrow as pa

    from formats.model.arrow_types import arrow_type, to_arrow
    from formats.ops.export import jsonable

    for name, snapshot_bytes, data in sql_vectors:
        snapshot, value = _decode(name, snapshot_bytes, data)
        codec = codec_for(snapshot)
        assert codec is not None
        pa.array([to_arrow(codec.spec)(value)], type=arrow_type(codec.spec))
        json.dumps(jsonable(value))
    decoded = {name: _decode(name, s, d)[1] for name, s, d in sql_vectors}
    assert jsonable(decoded["TimestampData p3"]) == 1_700_000_000_123
    assert jsonable(decoded["DecimalData 10,2"]) == "-12345678.90"
    assert jsonable(decoded["Row empty"]) == []
    assert jsonable(decoded["NodeId"]) == [[3, -5], "middle ü"]


def test_a_row_key_hashes_the_same_built_by_hand(sql_vectors: list[Vector]) -> None:
    """``BinaryRowData.hashCode`` of a key typed by hand (its binary form written anew) is the
    hash of the row Flink wrote; the empty row's is over its 8-byte header."""
    for name in ("Row key of one string", "Row NOT NULL fields", "Row of every scalar type",
                 "Row empty"):
        snapshot_bytes, data = next((s, d) for n, s, d in sql_vectors if n == name)
        snapshot, value = _decode(name, snapshot_bytes, data)
        codec = codec_for(snapshot)
        assert codec is not None and codec.java_hash is not None
        assert codec.java_hash(value) == murmur_hash_by_words(data[4:])
        assert codec.java_hash(plain(value)) == codec.java_hash(value), name
    assert murmur_hash_by_words(bytes(8)) == codec.java_hash([])


def test_damaged_sql_values_fail_with_a_statectl_error(sql_vectors: list[Vector]) -> None:
    """Every value cut short, and with bytes flipped, is refused with a StatectlError (or reads
    as another value): never a raw exception."""
    for name, snapshot_bytes, data in sql_vectors:
        snapshot = read_versioned_snapshot(DataReader(snapshot_bytes, name))
        codec = codec_for(snapshot)
        assert codec is not None
        cuts = [data[:n] for n in range(0, len(data), max(1, len(data) // 16))]
        flips = [data[:i] + bytes([data[i] ^ mask]) + data[i + 1:]
                 for i in range(0, len(data), max(1, len(data) // 24)) for mask in (0x80, 0xFF)]
        for damaged in cuts + flips:
            try:
                codec.read_delimited(DataReader(damaged, name))
            except StatectlError:
                pass


def test_damaged_sql_snapshots_fail_with_a_statectl_error(sql_vectors: list[Vector]) -> None:
    """A snapshot cut short anywhere is refused with a StatectlError."""
    for name, snapshot_bytes, _ in sql_vectors[::5]:
        for n in range(0, len(snapshot_bytes), max(1, len(snapshot_bytes) // 40)):
            with pytest.raises(StatectlError):
                read_versioned_snapshot(DataReader(snapshot_bytes[:n], name))


@pytest.mark.parametrize(("root", "value"), [
    ("INTEGER", "1"), ("BIGINT", 1.5), ("VARCHAR", 3), ("BOOLEAN", 1),
    ("TIMESTAMP_WITHOUT_TIME_ZONE", 5), ("DECIMAL", D("1.234")), ("DECIMAL", D("123456789")),
    ("NULL", 1),
])
def test_what_a_row_field_cannot_hold_is_refused(root: str, value: Any) -> None:
    t = SqlType(root, precision=3 if root.startswith("TIMESTAMP") else 10 if root == "DECIMAL"
                else 0, scale=2 if root == "DECIMAL" else 0)
    field = sql_field(t)
    assert field is not None
    with pytest.raises(InvalidArgumentError):
        write_row((value,), [field])


def test_a_compact_timestamp_refuses_sub_millisecond_digits() -> None:
    field = sql_field(SqlType("TIMESTAMP_WITHOUT_TIME_ZONE", precision=3))
    assert field is not None
    with pytest.raises(InvalidArgumentError, match="sub-millisecond"):
        write_row((_ms(1, 1),), [field])


_ROW_TYPES = [SqlType("VARCHAR"), SqlType("BIGINT"), SqlType("DECIMAL", precision=38, scale=4),
              SqlType("DECIMAL", precision=9, scale=2), SqlType("TIMESTAMP_WITHOUT_TIME_ZONE",
                                                                  precision=9),
              SqlType("ARRAY", children=(SqlType("VARBINARY"),)),
              SqlType("MAP", children=(SqlType("INTEGER"), SqlType("DOUBLE"))),
              SqlType("ROW", children=(SqlType("SMALLINT"), SqlType("CHAR")))]
_FIELDS = [f for f in (sql_field(t) for t in _ROW_TYPES) if f is not None]
_ROW = st.tuples(
    st.none() | st.text(), st.none() | st.integers(-(1 << 63), (1 << 63) - 1),
    st.none() | st.integers(-(10 ** 37), 10 ** 37).map(lambda u: make_decimal(u, 4)),
    st.none() | st.integers(-(10 ** 8), 10 ** 8).map(lambda u: make_decimal(u, 2)),
    st.none() | st.integers(-(1 << 80), 1 << 80).map(Instant),
    st.none() | st.lists(st.none() | st.binary(max_size=20), max_size=5),
    st.none() | st.dictionaries(st.integers(-(1 << 31), (1 << 31) - 1),
                                st.none() | st.floats(allow_nan=False), max_size=5),
    st.none() | st.tuples(st.none() | st.integers(-(1 << 15), (1 << 15) - 1),
                          st.none() | st.text(max_size=12)))


@settings(max_examples=80, deadline=None)
@given(row=_ROW, kind=st.integers(0, 3))
def test_every_row_writes_a_binary_row_that_reads_back(row: tuple[Any, ...], kind: int) -> None:
    binary = write_row(row, _FIELDS, kind)
    assert len(binary) % 8 == 0 and binary[0] == kind
    back = read_row(binary, 0, len(binary), _FIELDS)
    assert _kinds_equal(back, list(row))
    assert write_row(back, _FIELDS, kind) == binary
    assert RowDataTuple(back, binary).kind == kind
