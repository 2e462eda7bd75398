"""The encoders of Flink's serializers (``formats.flink.types.encoders``) against their decoders.

Four kinds of check, for every serializer statectl decodes beyond the basic ones (POJOs, enums,
``java.time``, ``java.sql``, ``java.util.Date``, big numbers, arrays, tuples, rows, windows, TTL,
Kryo):

- Flink itself: values serialized by Flink 2.3's own serializers, with the serializers'
  snapshots (``tests/flink_jobs/SerializerVectors.java``, run on the Flink of the restore
  tests): statectl reads each snapshot, decodes the value and encodes it to Flink's bytes;
- vectors: the bytes Flink's serializers write (from the types fixtures' README and Flink 2.3's
  ``serialize`` methods) encode from the value they decode to, byte for byte;
- hypothesis round trips: any value of the type encodes to bytes that decode to it, whole;
- refusals: a value the serializer cannot hold is refused, never written wrong.

Fixture values of every kind are checked in ``tests/test_flink_savepoint_writer.py``.
"""

from __future__ import annotations

import datetime
import decimal
import json
import struct
import subprocess
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats.flink.java.input import DataReader
from formats.flink.types.codecs import RowWithKind, codec_for, why_undecodable
from formats.flink.types.encoders import encoder_for
from formats.flink.types.flink_version import written_by
from formats.flink.types.snapshots import SerializerSnapshot, read_versioned_snapshot
from statecore.errors import InvalidArgumentError, StatectlError, UnsupportedFormatError
from statecore.serializers import GLOBAL_WINDOW, decimal_parts
from statecore.ttl import TtlValue
from statecore.values import NANOS_PER_DAY, Instant, LocalDateTime, LocalTime

BASE = "org.apache.flink.api.common.typeutils.base."
RUNTIME = "org.apache.flink.api.java.typeutils.runtime."
WINDOWS = "org.apache.flink.streaming.api.windowing.windows."
SCALA = "org.apache.flink.api.scala.typeutils."


def simple(name: str, package: str = BASE) -> SerializerSnapshot:
    return SerializerSnapshot(f"{package}{name}${name}Snapshot", 3)


LONG, INT, STRING = simple("LongSerializer"), simple("IntSerializer"), simple("StringSerializer")
DOUBLE, BOOLEAN = simple("DoubleSerializer"), simple("BooleanSerializer")
INSTANT, LOCAL_DATE = simple("InstantSerializer"), simple("LocalDateSerializer")
LOCAL_TIME, LOCAL_DATETIME = simple("LocalTimeSerializer"), simple("LocalDateTimeSerializer")
SQL_TIMESTAMP = simple("SqlTimestampSerializer")
BIG_INT, BIG_DEC = simple("BigIntSerializer"), simple("BigDecSerializer")
GLOBAL = SerializerSnapshot(f"{WINDOWS}GlobalWindow$Serializer$GlobalWindowSerializerSnapshot", 3)
TIME_WINDOW = SerializerSnapshot(f"{WINDOWS}TimeWindow$Serializer$TimeWindowSerializerSnapshot",
                                 3)
STATUS = SerializerSnapshot(BASE + "EnumSerializer$EnumSerializerSnapshot", 3,
                            outer={"class": "TypesJob$Status",
                                   "constants": ("ACTIVE", "SUSPENDED", "CLOSED")})
KRYO_UUID = SerializerSnapshot(RUNTIME + "kryo.KryoSerializerSnapshot", 2,
                               outer={"class": "java.util.UUID", "registrations": ()})


def pojo(class_name: str, fields: list[tuple[str, SerializerSnapshot]]) -> SerializerSnapshot:
    return SerializerSnapshot(RUNTIME + "PojoSerializerSnapshot", 2,
                              tuple(s for _, s in fields),
                              outer={"class": class_name, "fields": tuple(n for n, _ in fields),
                                     "registered_subclasses": (), "subclasses": ()})


def composite(name: str, *nested: SerializerSnapshot, **outer: Any) -> SerializerSnapshot:
    return SerializerSnapshot(name, 1, nested, outer={"version": 1, **outer})


ADDRESS = pojo("TypesJob$Address", [("city", STRING), ("zip", INT)])
#: TypesJob.Event as the types fixtures' snapshots hold it (fields in the snapshot's order).
EVENT = pojo("TypesJob$Event", [("address", ADDRESS), ("amount", LONG), ("bonus", INT),
                                ("flag", BOOLEAN), ("score", DOUBLE), ("status", STATUS),
                                ("ts", INSTANT), ("user", STRING)])
TUPLE2 = composite(RUNTIME + "TupleSerializerSnapshot", STRING, INT,
                   tuple_class="org.apache.flink.api.java.tuple.Tuple2")
TTL_LONG = composite("org.apache.flink.runtime.state.ttl.TtlStateFactory$TtlSerializerSnapshot",
                     LONG, LONG)
TIMER = composite("org.apache.flink.streaming.api.operators.TimerSerializerSnapshot", STRING,
                  TIME_WINDOW)
LONG_ARRAY = composite(BASE + "GenericArraySerializerSnapshot", LONG, **{"class": "java.lang.Long"})


def row(*fields: SerializerSnapshot, legacy: bool = False) -> SerializerSnapshot:
    return SerializerSnapshot(RUNTIME + "RowSerializer$RowSerializerSnapshot", 3, fields,
                              outer={"version": 4, "legacy_mode": legacy})


def nullable(inner: SerializerSnapshot, padding: int = 0) -> SerializerSnapshot:
    return SerializerSnapshot(RUNTIME + "NullableSerializer$NullableSerializerSnapshot", 3,
                              (inner,), outer={"version": 2, "padding": padding})


def set_of(element: SerializerSnapshot) -> SerializerSnapshot:
    return composite(BASE + "SetSerializerSnapshot", element)


def either(left: SerializerSnapshot, right: SerializerSnapshot) -> SerializerSnapshot:
    return composite(RUNTIME + "JavaEitherSerializerSnapshot", left, right)


def with_subclasses(base: SerializerSnapshot, registered: list[SerializerSnapshot],
                    cached: list[SerializerSnapshot]) -> SerializerSnapshot:
    """A POJO snapshot with subclass snapshots (registered in tag order, cached)."""
    return SerializerSnapshot(base.class_name, base.version, base.nested, outer={
        **base.outer, "registered_subclasses": tuple(s.outer["class"] for s in registered),
        "registered_snapshots": tuple(registered),
        "subclasses": tuple(s.outer["class"] for s in cached),
        "subclass_snapshots": tuple(cached)})


SHAPES = with_subclasses(
    pojo("Shape", [("name", STRING)]),
    [pojo("Circle", [("name", STRING), ("radius", DOUBLE)]),
     pojo("Label", [("name", STRING), ("radius", STRING)])],  # radius clashes: left out
    [pojo("Square", [("name", STRING), ("side", INT), ("corner", ADDRESS)])])


def array(name: str) -> SerializerSnapshot:
    return simple(name, BASE + "array.")


def encode(snapshot: SerializerSnapshot, value: Any) -> bytes:
    encoder = encoder_for(snapshot)
    assert encoder is not None, snapshot.describe()
    out = bytearray()
    encoder(out, value)
    return bytes(out)


def decode(snapshot: SerializerSnapshot, data: bytes) -> Any:
    codec = codec_for(snapshot)
    assert codec is not None
    reader = DataReader(data, "test")
    value = codec.read_delimited(reader)
    assert reader.at_end()
    return value


# -- Flink's own serializers -------------------------------------------------------------------


@pytest.fixture(scope="module")
def flink_vectors() -> list[tuple[str, bytes, bytes]]:
    """``(name, versioned snapshot, value)`` of every case SerializerVectors.java prints."""
    from flink_restore import JVM_OPTIONS, FlinkUnavailable, build

    try:
        b = build()
    except FlinkUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    done = subprocess.run(["java", *JVM_OPTIONS, "-cp", f"{b.lib}/*:{b.classes}",
                           "SerializerVectors"], capture_output=True, text=True, check=False,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    vectors = [line.split("\t")[1:] for line in done.stdout.splitlines()
               if line.startswith(("VECTOR\t", "LEGACY\t"))]
    return [(name, bytes.fromhex(snapshot), bytes.fromhex(value))
            for name, snapshot, value in vectors]


@pytest.fixture(scope="module")
def flink_1x_vectors() -> list[tuple[str, bytes, bytes]]:
    """The same cases run on Flink 1.20 (the Kryo 2.24 era): its jars installed on first use
    (``tests/flink_versions.py``)."""
    from flink_restore import FlinkUnavailable
    from flink_versions import serializer_vectors

    try:
        return serializer_vectors()
    except FlinkUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


SHAPE = "SerializerVectors$Shape"
#: What some of Flink's values decode to (the rest: whatever they decode to, encoded back); the
#: values SerializerVectors.java gives Flink's serializers.
FLINK_VALUES: dict[str, Any] = {
    "Instant": Instant(-1),
    "LocalTime": LocalTime(NANOS_PER_DAY - 2 * 10**9 + 999_999_999),
    "Timestamp": Instant(1_700_000_000_123_456_789),
    "Timestamp before 1970": Instant(-1_500_000_000),
    "BigInteger 1 (long form)": 1,
    "BigDecimal 15E+3": decimal.Decimal("15E+3"),
    "enum": "WEDNESDAY",
    "Long[]": [5, None, -1],
    "Row UPDATE_BEFORE": RowWithKind([None, 1], 1),
    "Row legacy": (None, 2),
    "Row of 9 fields": RowWithKind([1, None, 3, 4, 5, 6, 7, None, 9], 3),
    "POJO with nulls": {"address": {"city": None, "zip": None}, "amount": -7, "bonus": None,
                        "counts": None, "day": None, "ids": None, "price": None,
                        "tags": None, "ts": None, "user": "k1"},
    "Map of enum to Long": {"FRIDAY": 3, "MONDAY": None},
    "window timer": (3_599_999, "k1", (0, 3_600_000)),
    # NullableSerializer: the wrapped serializer's value, None for null
    "Nullable Long padded": 5,
    "Nullable Long padded null": None,
    "Nullable Long": -(1 << 63),
    "Nullable Long null": None,
    "Nullable String null": None,
    "List of Nullable Integer": [1, None, (1 << 31) - 1],
    # SetSerializer (2.x): a list in Flink's iteration order
    "Set of String": ["b", None, "a"],
    "Set empty": [],
    # types of one value: json (Tuple0 the empty array, NullValue null)
    "Tuple0": [],
    "NullValue": None,
    "Scala Unit": None,
    "Set of List of Long": [[1, 2], []],
    "Map of List of Map": {"k": [{1: "v"}, {}]},
    "List empty": [],
    # POJO fields of List/Map/Set (2.x: NullableSerializer of List/Map/SetSerializer)
    "POJO with collections": {"addresses": [{"city": "Oslo", "zip": 150}, None],
                              "counts": {"a": (1 << 63) - 1, "b": None},
                              "items": ["x", None, ""], "owner": "o", "tags": [3, None, -1]},
    "POJO with empty collections": {"addresses": None, "counts": {}, "items": [],
                                    "owner": "o", "tags": []},
    "POJO with null collections": {"addresses": None, "counts": None, "items": None,
                                   "owner": None, "tags": None},
    # POJO subclasses: @class, then the union of the fields
    "POJO subclass registered": {"@class": "SerializerVectors$Circle", "name": "c",
                                 "radius": -0.5, "corner": None, "side": None},
    "POJO subclass by name": {"@class": "SerializerVectors$Square", "name": "s", "radius": None,
                              "corner": {"city": "Lima", "zip": None}, "side": -(1 << 31)},
    "POJO subclass base": {"@class": SHAPE, "name": "plain", "radius": None, "corner": None,
                           "side": None},
    "POJO subclass null": None,
    "Either Left": {"left": "l", "right": None},
    "Either Right": {"left": None, "right": -1},
    "Either nested": {"left": None, "right": {"left": "x", "right": None}},
    "Row named": RowWithKind(["n", None], 2),
    "Row positional into named": (None, 9),
    "Row nested": (RowWithKind(["a", 1], 3), None),
    "Tuple25": tuple(range(-12, 13)),
    "IntValue": -(1 << 31),
    "LongValue": (1 << 63) - 1,
    "ShortValue": -2,
    "ByteValue": -128,
    "BooleanValue": True,
    "CharValue": "\u00e9",
    "DoubleValue": -1e-300,
    "FloatValue": 3.5,
    "StringValue": "Zürich 東京",
    "StringValue empty": "",
    "CopyableValue IntValue": 7,
    "ValueSerializer LongValue": -7,
    "enum reordered": "SATURDAY",
    "Long[] extremes": [-(1 << 63), (1 << 63) - 1, 0],
    "Tuple2 extremes": (-(1 << 63), float("-inf")),
    # composite snapshots in their legacy form (version 1/2: no magic, no outer version)
    "List v1": ["a", None],
    "Map v1": {"k": 1},
    "Long[] v1": [1, None],
    "Tuple2 v1": ("k", 2),
    "Row v1": ("a", None),       # a legacy row has no RowKind
    "Row v2": (None, 3),
    "Nullable Long padded v1": None,
    "Either v1": {"left": None, "right": 4},
    "EitherSerializerSnapshot v2": {"left": "x", "right": None},
    # the Scala API (Flink 1.x)
    "Scala Option Some": "s",
    "Scala Option None": None,
    "Scala case class Tuple2": ("a", -3),
    "Scala case class nested": (("b", 1), None),
    "Scala Either Left": {"left": "l", "right": None},
    "Scala Either Right": {"left": None, "right": -(1 << 63)},
    "Scala List": ["x", None, "y"],
    "Scala List empty": [],
    "Scala Map": [("k", 7)],
}
#: Cases of one Flink major only: SetSerializer is 2.x's, the old EitherSerializerSnapshot and
#: the Scala API 1.x's.
FLINK_2X_ONLY = frozenset({"Set of String", "Set empty", "Set of List of Long"})
FLINK_1X_ONLY = frozenset({"EitherSerializerSnapshot v2"}) | {
    name for name in FLINK_VALUES if name.startswith("Scala ")}

#: Cases Flink 1.x gives to Kryo (a POJO's List/Map/Set fields: ``GenericTypeInfo``; Kryo 2.24
#: writes a UUID unlike Kryo 5), whose bytes statectl may refuse (naming Kryo) where it does not
#: know Kryo's layout of the class; what it decodes must encode back.
KRYO_IN_1X = frozenset({"POJO with collections", "POJO with empty collections",
                        "POJO with null collections", "List of POJOs with collections",
                        "Kryo UUID"})


def _check_vectors(vectors: list[tuple[str, bytes, bytes]], kryo: frozenset[str] = frozenset()
                   ) -> list[str]:
    """What goes wrong with Flink's vectors: decode, expected value, encode back, refusals."""
    wrong = []
    for name, snapshot_bytes, data in vectors:
        try:
            wrong.extend(_check_vector(name, snapshot_bytes, data, name in kryo))
        except StatectlError as exc:
            wrong.append(f"{name}: {type(exc).__name__}: {exc}")
    return wrong


def _check_vector(name: str, snapshot_bytes: bytes, data: bytes, kryo: bool) -> list[str]:
    wrong = []
    snapshot = read_versioned_snapshot(DataReader(snapshot_bytes, name))
    if name.startswith("undecodable:"):
        return _check_refused(name, snapshot, data)
    codec = codec_for(snapshot)
    if codec is None:
        why = why_undecodable(snapshot)
        return [] if kryo and "Kryo" in why else [f"{name}: no codec: {why}"]
    reader = DataReader(data, name)
    try:
        value = codec.read_delimited(reader)
    except UnsupportedFormatError as exc:
        if kryo and "Kryo" in str(exc):
            return []
        raise
    if not reader.at_end():
        return [f"{name}: decoded {value!r} from {reader.pos} of {len(data)} bytes"]
    if name in FLINK_VALUES and not _same(value, FLINK_VALUES[name]):
        wrong.append(f"{name}: decoded {value!r}, expected {FLINK_VALUES[name]!r}")
    want = data
    if name.endswith("(long form)"):
        want = encode(snapshot, value)
        assert len(want) == len(data) - 1 and decode(snapshot, want) == value
    encoded = encode(snapshot, value)
    if encoded != want:
        wrong.append(f"{name}: statectl wrote {encoded.hex()}, Flink {want.hex()}")
    return wrong


def _check_refused(name: str, snapshot: SerializerSnapshot, data: bytes) -> list[str]:
    """An ``undecodable:Class ...`` case: no codec (``why_undecodable`` names Class) or its
    value refused with an UnsupportedFormatError naming Class; never an encoder."""
    word = name.split(":", 1)[1].split()[0]
    codec = codec_for(snapshot)
    if codec is None:
        why = why_undecodable(snapshot)
        ok = word in why and encoder_for(snapshot) is None
        return [] if ok else [f"{name}: why_undecodable says {why!r}"]
    try:
        value = codec.read_delimited(DataReader(data, name))
    except UnsupportedFormatError as exc:
        return [] if word in str(exc) else [f"{name}: refused as {exc}"]
    return [f"{name}: decoded {value!r}, should be refused"]


def test_flinks_own_serializers_bytes_decode_and_encode_back(
        flink_vectors: list[tuple[str, bytes, bytes]]) -> None:
    """Every value Flink serialized decodes and encodes back to Flink's bytes; ``BigInteger``
    values whose form depends on object identity are written in the short form (see
    :mod:`formats.flink.types.encoders`); the values statectl cannot decode are refused with
    their class named."""
    assert len(flink_vectors) > 100
    names = {name for name, _, _ in flink_vectors}
    assert set(FLINK_VALUES) - names == FLINK_1X_ONLY
    wrong = _check_vectors(flink_vectors)
    assert not wrong, "\n".join(wrong)


def test_flink_1x_serializers_bytes_decode_and_encode_back(
        flink_1x_vectors: list[tuple[str, bytes, bytes]]) -> None:
    """The same on Flink 1.20: its snapshots and values (1.x has no ``SetSerializer``; a POJO's
    collections are Kryo's there)."""
    names = {name for name, _, _ in flink_1x_vectors}
    assert len(flink_1x_vectors) > 100
    assert set(FLINK_VALUES) - names == FLINK_2X_ONLY
    with written_by(2):  # Flink 1.x's Kryo (a snapshot's _metadata version says so)
        wrong = _check_vectors(flink_1x_vectors, KRYO_IN_1X)
    assert not wrong, "\n".join(wrong)


def test_flink_2x_and_1x_write_the_same_snapshots(
        flink_vectors: list[tuple[str, bytes, bytes]],
        flink_1x_vectors: list[tuple[str, bytes, bytes]]) -> None:
    """Flink 1.20 writes every snapshot and value as 2.3 does, but Kryo's and those of POJOs
    whose fields 1.x gives to Kryo (what statectl reads of 1.x is what it reads of 2.x)."""
    new = {name: (snapshot, data) for name, snapshot, data in flink_vectors}
    differ = {name for name, snapshot, data in flink_1x_vectors
              if name in new and new[name] != (snapshot, data)}
    assert differ <= KRYO_IN_1X, differ


#: Values with unpaired UTF-16 surrogates, which Java strings hold and Arrow's UTF-8 cannot.
LONE_SURROGATES = frozenset({"char[]", "StringValue long"})


def test_every_decoded_flink_value_is_held_by_its_spec(
        flink_vectors: list[tuple[str, bytes, bytes]]) -> None:
    """``codec_for``'s spec is one statectl holds: the type spec parses, and every value Flink
    wrote goes into an Arrow array of the spec's Arrow type and into JSON."""
    from formats.model.arrow_types import arrow_type, to_arrow
    from formats.ops.export import jsonable

    for name, snapshot_bytes, data in flink_vectors:
        snapshot = read_versioned_snapshot(DataReader(snapshot_bytes, name))
        codec = codec_for(snapshot)
        if codec is None or name.startswith("undecodable:") or name in LONE_SURROGATES or \
                codec.name.startswith("Timer<"):
            continue  # a timer's spec is its namespace's (the timer is the state's key)
        value = decode(snapshot, data)
        if codec.ttl:
            value = value.user_value
        converted = None if value is None else to_arrow(codec.spec)(value)  # null: a null
        array = pa.array([converted], type=arrow_type(codec.spec))
        assert len(array) == 1, name
        json.dumps(jsonable(value))


def test_truncated_flink_values_are_refused(flink_vectors: list[tuple[str, bytes, bytes]]) -> None:
    """Every strict prefix of every value Flink wrote is refused with a statectl error."""
    wrong = []
    for name, snapshot_bytes, data in flink_vectors:
        snapshot = read_versioned_snapshot(DataReader(snapshot_bytes, name))
        codec = codec_for(snapshot)
        if codec is None or name.startswith("undecodable:") or "kryo<" in codec.spec:
            continue
        for end in range(len(data)):
            try:
                value = codec.read(DataReader(data[:end], name))
            except StatectlError:
                continue
            wrong.append(f"{name}: {end} of {len(data)} bytes decoded to {value!r}")
    assert not wrong, "\n".join(wrong[:20])


# -- vectors: Flink's bytes ---------------------------------------------------------------------

#: ``last-event`` of key ``k1`` in the types fixtures (their README, "Byte layouts").
README_POJO = bytes.fromhex(
    "02" "00" "02" "00" "074b72616bf30177" "00" "0000274b" "00" "0000000000000002" "01" "00" "01"
    "00" "3fe0000000000000" "00" "00000000" "00" "0000000065540bf4" "00000000" "00" "036b31")
README_EVENT = {"address": {"city": "Kraków", "zip": 10059}, "amount": 2, "bonus": None,
                "flag": True, "score": 0.5, "status": "ACTIVE",
                "ts": Instant.of_epoch_second(0x65540BF4), "user": "k1"}
MIN_INT, MIN_SHORT, MIN_LONG = -(1 << 31), -(1 << 15), -(1 << 63)

VECTORS: list[tuple[str, SerializerSnapshot, bytes, Any]] = [
    ("pojo (README)", EVENT, README_POJO, README_EVENT),
    ("pojo null", EVENT, b"\x01", None),
    ("enum CLOSED (README)", STATUS, bytes.fromhex("00000002"), "CLOSED"),
    ("LocalDate (README)", LOCAL_DATE, bytes.fromhex("000007e70b0f"), datetime.date(2023, 11, 15)),
    ("LocalDate null", LOCAL_DATE, struct.pack(">ih", MIN_INT, MIN_SHORT), None),
    ("Tuple2 key (README)", TUPLE2, bytes.fromhex("036b3100000001"), ("k1", 1)),
    ("window timer (README)", TIMER,
     bytes.fromhex("8000018bd0470fff036b310000018bd01021800000018bd0471000"),
     (0x18BD0470FFF, "k1", (0x18BD0102180, 0x18BD0471000))),
    ("Kryo UUID (README)", KRYO_UUID, bytes.fromhex("5401d83e8af07ab137b6da15e9cdcc180c85"),
     "b637b17a-f08a-3ed8-850c-18cccde915da"),
    ("TTL", TTL_LONG, bytes.fromhex("0000019b000000000000000000000002"),
     TtlValue(2, 0x19B00000000)),
    ("Instant", INSTANT, struct.pack(">qi", -1, 999_999_999), Instant(-1)),
    ("Instant null", INSTANT, struct.pack(">qi", MIN_LONG, MIN_INT), None),
    ("LocalTime", LOCAL_TIME, struct.pack(">bbbi", 1, 2, 3, 4), LocalTime(3723 * 10**9 + 4)),
    ("LocalTime null", LOCAL_TIME, struct.pack(">bhi", -128, MIN_SHORT, MIN_INT), None),
    ("LocalDateTime", LOCAL_DATETIME, struct.pack(">ibbbbbi", 1969, 12, 31, 23, 59, 59, 5),
     LocalDateTime(-10**9 + 5)),
    ("LocalDateTime null", LOCAL_DATETIME,
     struct.pack(">ihbhi", MIN_INT, MIN_SHORT, -128, MIN_SHORT, MIN_INT), None),
    # Timestamp(-1500): getTime() -1500, getNanos() 500000000
    ("Timestamp", SQL_TIMESTAMP, struct.pack(">qi", -1500, 500_000_000),
     Instant(-1_500_000_000)),
    ("Timestamp null", SQL_TIMESTAMP, struct.pack(">qi", MIN_LONG, 0), None),
    ("java.sql.Date", simple("SqlDateSerializer"), struct.pack(">q", 86_400_000),
     Instant.of_epoch_milli(86_400_000)),
    ("java.sql.Time null", simple("SqlTimeSerializer"), struct.pack(">q", MIN_LONG), None),
    ("java.util.Date", simple("DateSerializer"), struct.pack(">q", -1), Instant.of_epoch_milli(-1)),
    ("BigInteger ONE", BIG_INT, struct.pack(">i", 2), 1),
    ("BigInteger TEN", BIG_INT, struct.pack(">i", 3), 10),
    ("BigInteger null", BIG_INT, struct.pack(">i", 0), None),
    ("BigInteger 255", BIG_INT, struct.pack(">i", 6) + b"\x00\xff", 255),
    ("BigInteger -128", BIG_INT, struct.pack(">i", 5) + b"\x80", -128),
    ("BigInteger -129", BIG_INT, struct.pack(">i", 6) + b"\xff\x7f", -129),
    ("BigInteger -2^64", BIG_INT, struct.pack(">i", 4 + 9)
     + (-(1 << 64)).to_bytes(9, "big", signed=True), -(1 << 64)),
    ("BigDecimal -1.06", BIG_DEC, struct.pack(">i", 5) + bytes([0x96]) + struct.pack(">i", 2),
     decimal.Decimal("-1.06")),
    ("BigDecimal 15E+3", BIG_DEC, struct.pack(">i", 5) + b"\x0f" + struct.pack(">i", -3),
     decimal.Decimal("15E+3")),
    ("BigDecimal 0.00", BIG_DEC, struct.pack(">ii", 1, 2), decimal.Decimal("0.00")),
    ("BigDecimal null", BIG_DEC, struct.pack(">i", 0), None),
    ("Long[]", LONG_ARRAY, struct.pack(">i?q?", 2, True, 5, False), [5, None]),
    ("int[]", array("IntPrimitiveArraySerializer"), struct.pack(">iii", 2, 7, -7), [7, -7]),
    ("boolean[]", array("BooleanPrimitiveArraySerializer"), struct.pack(">i??", 2, True, False),
     [True, False]),
    ("String[]", array("StringArraySerializer"), struct.pack(">i", 2) + b"\x00\x02a",
     [None, "a"]),
    ("GlobalWindow", GLOBAL, b"\x00", GLOBAL_WINDOW),
    ("TimeWindow", TIME_WINDOW, struct.pack(">qq", 0, 3_600_000), (0, 3_600_000)),
    # RowSerializer: the mask's bits are kind & 1, kind & 2, then a null bit per field
    ("Row INSERT", row(STRING, LONG), bytes([0b0001_0000]) + b"\x02a", ("a", None)),
    ("Row UPDATE_AFTER", row(STRING, LONG), bytes([0b0101_0000]) + b"\x02a",
     RowWithKind(["a", None], 2)),
    ("Row DELETE", row(STRING, LONG), bytes([0b1100_0000]) + b"\x02a" + struct.pack(">q", 1),
     RowWithKind(["a", 1], 3)),
    ("Row legacy", row(STRING, LONG, legacy=True), bytes([0b0100_0000]) + b"\x02a", ("a", None)),
    ("Row of 7 fields", row(*[INT] * 7), bytes([0b0000_0000, 0b1000_0000])
     + struct.pack(">6i", 1, 2, 3, 4, 5, 6), (1, 2, 3, 4, 5, 6, None)),
]


@pytest.mark.parametrize(("snapshot", "data", "value"), [v[1:] for v in VECTORS],
                         ids=[v[0] for v in VECTORS])
def test_flinks_bytes_encode_from_the_value_they_decode_to(snapshot: SerializerSnapshot,
                                                           data: bytes, value: Any) -> None:
    decoded = decode(snapshot, data)
    assert decoded == value
    assert getattr(decoded, "kind", 0) == getattr(value, "kind", 0)
    assert encode(snapshot, value) == data


def test_a_snapshot_has_an_encoder_exactly_when_it_has_a_codec() -> None:
    unknown = SerializerSnapshot("com.example.MySerializer$MySnapshot", 1)
    unparsed = SerializerSnapshot("com.example.Other", 1, outer={"unparsed": True})
    for snapshot in (unknown, unparsed, pojo("A", [("x", unknown)]),
                     composite(BASE + "ListSerializerSnapshot", unparsed)):
        assert codec_for(snapshot) is None and encoder_for(snapshot) is None
    for _name, snapshot, _data, _value in VECTORS:
        assert encoder_for(snapshot) is not None


def test_a_tuple_field_holds_null_where_its_serializer_writes_one() -> None:
    """Flink's StringSerializer writes a null String (length 0), also as a tuple field (the
    coverage job's Tuple3 holds one); an Integer field cannot (``NullFieldException``)."""
    data = encode(TUPLE2, (None, 3))
    assert data == b"\x00" + struct.pack(">i", 3)
    assert decode(TUPLE2, data) == (None, 3)
    with pytest.raises(InvalidArgumentError, match="field f1 of a Flink tuple is null"):
        encode(TUPLE2, ("k1", None))


@pytest.mark.parametrize(("snapshot", "value"), [
    (EVENT, {**README_EVENT, "extra": 1}),           # a field the POJO has not
    (EVENT, {k: v for k, v in README_EVENT.items() if k != "user"}),
    (STATUS, "UNKNOWN"),                              # no such constant
    (STATUS, None),                                   # EnumSerializer writes no null
    (TUPLE2, ("k1", None)),                           # TupleSerializer: NullFieldException
    (row(STRING, LONG, legacy=True), RowWithKind(["a", 1], 1)),  # no kind bits to hold it
    (simple("SqlDateSerializer"), Instant(1)),        # not whole milliseconds
    (KRYO_UUID, "b637b17a-f08a"),  # a UUID's canonical text, or kept bytes
    (TTL_LONG, (1, 2)),                               # a TTL value is a TtlValue
    (GLOBAL, (0, 1)),
    (either(STRING, LONG), {"left": "a", "right": 1}),  # an Either holds one side
    (either(STRING, LONG), {"left": None, "right": None}),
    (either(STRING, LONG), ("a", None)),
    (set_of(STRING), {"a"}),                          # a set is its list of elements
    (composite(SCALA + "ScalaCaseClassSerializerSnapshot", LONG, **{"class": "scala.Tuple1"}),
     (None,)),                                        # a Long field holds no null
    (simple("StringValueSerializer"), None),          # a StringValue is never null
    (SHAPES, {"@class": "Label", "name": "l", "radius": None, "side": None, "corner": None}),
    (SHAPES, {"@class": "Triangle", "name": "t", "radius": None, "side": None, "corner": None}),
    (SHAPES, {"@class": "Shape", "name": "s", "radius": 1.0, "side": None, "corner": None}),
    (SHAPES, {"name": "s"}),
])
def test_what_the_serializer_cannot_hold_is_refused(snapshot: SerializerSnapshot,
                                                    value: Any) -> None:
    with pytest.raises(InvalidArgumentError):
        encode(snapshot, value)


# -- hypothesis: encode -> decode ---------------------------------------------------------------

_I64 = st.integers(-(1 << 63), (1 << 63) - 1)
_I32 = st.integers(-(1 << 31), (1 << 31) - 1)
_INSTANT = st.builds(Instant, _I64)
_MILLIS = st.builds(Instant.of_epoch_milli, st.integers(-(1 << 63) + 1, (1 << 63) - 1))
_BIG = st.integers(-(1 << 8191), (1 << 8191) - 1)
_DECIMAL = st.builds(lambda unscaled, scale: decimal.Decimal(
    (int(unscaled < 0), tuple(int(d) for d in str(abs(unscaled))), -scale)), _BIG, _I32)
_EVENT = st.fixed_dictionaries({
    "address": st.none() | st.fixed_dictionaries({"city": st.none() | st.text(),
                                                  "zip": st.none() | _I32}),
    "amount": st.none() | _I64, "bonus": st.none() | _I32, "flag": st.none() | st.booleans(),
    "score": st.none() | st.floats(allow_nan=False), "status": st.none() | st.sampled_from(
        ["ACTIVE", "SUSPENDED", "CLOSED"]),
    "ts": st.none() | _INSTANT, "user": st.none() | st.text()})
_KIND_ROW = st.builds(lambda fields, kind: RowWithKind(fields, kind) if kind else tuple(fields),
                      st.tuples(st.none() | st.text(), st.none() | _I64, st.none() | _INSTANT)
                      .map(list), st.integers(0, 3))

_ADDRESS = st.none() | st.fixed_dictionaries({"city": st.none() | st.text(),
                                               "zip": st.none() | _I32})
_SHAPE = st.one_of(
    st.fixed_dictionaries({"@class": st.just("Shape"), "name": st.none() | st.text(),
                           "radius": st.none(), "side": st.none(), "corner": st.none()}),
    st.fixed_dictionaries({"@class": st.just("Circle"), "name": st.none() | st.text(),
                           "radius": st.none() | st.floats(allow_nan=False), "side": st.none(),
                           "corner": st.none()}),
    st.fixed_dictionaries({"@class": st.just("Square"), "name": st.none() | st.text(),
                           "radius": st.none(), "side": st.none() | _I32,
                           "corner": _ADDRESS}))

ROUND_TRIPS: list[tuple[str, SerializerSnapshot, st.SearchStrategy[Any]]] = [
    ("Nullable padded", nullable(LONG, 8), st.none() | _I64),
    ("Nullable", nullable(STRING), st.none() | st.text()),
    ("List of Nullable", composite(BASE + "ListSerializerSnapshot", nullable(INT, 4)),
     st.lists(st.none() | _I32)),
    ("Set", set_of(nullable(STRING)), st.lists(st.none() | st.text())),
    ("POJO of collections", pojo("Basket", [
        ("counts", nullable(composite(BASE + "MapSerializerSnapshot", STRING, LONG))),
        ("items", nullable(composite(BASE + "ListSerializerSnapshot", STRING))),
        ("tags", nullable(set_of(INT)))]),
     st.none() | st.fixed_dictionaries({
         "counts": st.none() | st.dictionaries(st.text(), st.none() | _I64),
         "items": st.none() | st.lists(st.none() | st.text()),
         "tags": st.none() | st.lists(st.none() | _I32)})),
    ("POJO with subclasses", SHAPES, st.none() | _SHAPE),
    ("list of POJOs with subclasses", composite(BASE + "ListSerializerSnapshot", SHAPES),
     st.lists(st.none() | _SHAPE)),
    ("Either", either(STRING, either(LONG, INT)), st.one_of(
        st.builds(lambda v: {"left": v, "right": None}, st.text()),
        st.builds(lambda v: {"left": None, "right": {"left": v, "right": None}}, _I64),
        st.builds(lambda v: {"left": None, "right": {"left": None, "right": v}}, _I32))),
    ("Scala Option", composite(SCALA + "ScalaOptionSerializerSnapshot", STRING),
     st.none() | st.text()),
    ("Scala case class with an Option", composite(
        SCALA + "ScalaCaseClassSerializerSnapshot", LONG,
        composite(SCALA + "ScalaOptionSerializerSnapshot", INT), **{"class": "scala.Tuple2"}),
     st.tuples(_I64, st.none() | _I32)),
    ("Scala List", composite(SCALA + "TraversableSerializerSnapshot", STRING, cbf="List"),
     st.lists(st.none() | st.text())),
    ("Scala Either", composite(SCALA + "ScalaEitherSerializerSnapshot", STRING, LONG),
     st.one_of(st.builds(lambda v: {"left": v, "right": None}, st.text()),
               st.builds(lambda v: {"left": None, "right": v}, _I64))),
    ("IntValue", simple("IntValueSerializer"), _I32),
    ("LongValue", simple("LongValueSerializer"), _I64),
    ("ShortValue", simple("ShortValueSerializer"), st.integers(-(1 << 15), (1 << 15) - 1)),
    ("ByteValue", simple("ByteValueSerializer"), st.integers(-128, 127)),
    ("BooleanValue", simple("BooleanValueSerializer"), st.booleans()),
    ("CharValue", simple("CharValueSerializer"), st.characters(max_codepoint=0xFFFF)),
    ("FloatValue", simple("FloatValueSerializer"), st.floats(width=32, allow_nan=False)),
    ("DoubleValue", simple("DoubleValueSerializer"), st.floats(allow_nan=False)),
    ("StringValue", simple("StringValueSerializer"), st.text()),
    ("pojo", EVENT, st.none() | _EVENT),
    ("list of pojos", composite(BASE + "ListSerializerSnapshot", EVENT), st.lists(_EVENT)),
    ("map of enum to long", composite(BASE + "MapSerializerSnapshot", STATUS, LONG),
     st.dictionaries(st.sampled_from(["ACTIVE", "SUSPENDED", "CLOSED"]), st.none() | _I64)),
    ("enum", STATUS, st.sampled_from(["ACTIVE", "SUSPENDED", "CLOSED"])),
    ("Instant", INSTANT, st.none() | _INSTANT),
    ("LocalDate", LOCAL_DATE, st.none() | st.dates()),
    ("LocalTime", LOCAL_TIME, st.none() | st.builds(LocalTime, st.integers(0, NANOS_PER_DAY - 1))),
    ("LocalDateTime", LOCAL_DATETIME, st.none() | st.builds(LocalDateTime, _I64)),
    ("Timestamp", SQL_TIMESTAMP, st.none() | _INSTANT),
    ("java.sql.Date", simple("SqlDateSerializer"), st.none() | _MILLIS),
    ("java.sql.Time", simple("SqlTimeSerializer"), st.none() | _MILLIS),
    ("java.util.Date", simple("DateSerializer"), st.none() | _MILLIS),
    ("BigInteger", BIG_INT, st.none() | _BIG),
    ("BigDecimal", BIG_DEC, st.none() | _DECIMAL),
    ("Long[]", LONG_ARRAY, st.lists(st.none() | _I64)),
    ("String[]", array("StringArraySerializer"), st.lists(st.none() | st.text())),
    ("int[]", array("IntPrimitiveArraySerializer"), st.lists(_I32)),
    ("long[]", array("LongPrimitiveArraySerializer"), st.lists(_I64)),
    ("short[]", array("ShortPrimitiveArraySerializer"),
     st.lists(st.integers(-(1 << 15), (1 << 15) - 1))),
    ("char[]", array("CharPrimitiveArraySerializer"),
     st.lists(st.characters(max_codepoint=0xFFFF))),
    ("float[]", array("FloatPrimitiveArraySerializer"),
     st.lists(st.floats(width=32, allow_nan=False))),
    ("double[]", array("DoublePrimitiveArraySerializer"), st.lists(st.floats(allow_nan=False))),
    ("boolean[]", array("BooleanPrimitiveArraySerializer"), st.lists(st.booleans())),
    ("Tuple2", TUPLE2, st.tuples(st.text(), _I32)),
    ("Row", row(STRING, LONG, INSTANT), _KIND_ROW),
    ("Row legacy", row(STRING, LONG, INSTANT, legacy=True),
     st.tuples(st.none() | st.text(), st.none() | _I64, st.none() | _INSTANT)),
    ("TTL of a pojo", composite(TTL_LONG.class_name, LONG, EVENT),
     st.builds(TtlValue, _EVENT, _I64)),
    ("window timer", TIMER,
     st.tuples(_I64, st.text(), st.tuples(_I64, _I64))),
    ("TimeWindow", TIME_WINDOW, st.tuples(_I64, _I64)),
    ("GlobalWindow", GLOBAL, st.just(GLOBAL_WINDOW)),
    ("Kryo", KRYO_UUID, st.uuids().map(str)),
]


def _same(a: Any, b: Any) -> bool:
    """Equal, and of the same decimal scale and row kind where those are."""
    if isinstance(a, decimal.Decimal) and isinstance(b, decimal.Decimal):
        return decimal_parts(a) == decimal_parts(b)
    return bool(a == b) and getattr(a, "kind", 0) == getattr(b, "kind", 0)


@pytest.mark.parametrize(("snapshot", "values"), [r[1:] for r in ROUND_TRIPS],
                         ids=[r[0] for r in ROUND_TRIPS])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_every_value_encodes_to_bytes_that_decode_to_it(snapshot: SerializerSnapshot,
                                                        values: st.SearchStrategy[Any],
                                                        data: st.DataObject) -> None:
    value = data.draw(values)
    encoded = encode(snapshot, value)
    decoded = decode(snapshot, encoded)
    assert _same(decoded, value)
    assert encode(snapshot, decoded) == encoded
