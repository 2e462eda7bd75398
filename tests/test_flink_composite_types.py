"""Hostile input and refusals for the serializers statectl added for Flink's state types.

``NullableSerializer``, ``SetSerializer``, ``EitherSerializer``, POJO subclasses, Flink's
``Value`` types, the Scala API's ``Option`` and collections: a corrupt value (a bad null or side
flag, a truncated padding, a subclass tag out of range) raises :class:`CorruptCheckpointError`;
an intact value statectl cannot decode (a subclass the snapshot has not, a user ``Value`` class)
:class:`UnsupportedFormatError` naming the class; ``why_undecodable`` names exactly what is
missing. Flink's own bytes of every one of these are checked in ``tests/test_flink_encoders.py``.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest

from formats.flink.java.input import DataReader
from formats.flink.types.codecs import codec_for, why_undecodable
from formats.flink.types.encoders import encoder_for
from formats.flink.types.snapshots import (
    COMPOSITE_MAGIC,
    SerializerSnapshot,
    read_versioned_snapshot,
)
from statecore.errors import CorruptCheckpointError, UnsupportedFormatError

BASE = "org.apache.flink.api.common.typeutils.base."
RUNTIME = "org.apache.flink.api.java.typeutils.runtime."
NULLABLE = RUNTIME + "NullableSerializer$NullableSerializerSnapshot"
SCALA = "org.apache.flink.api.scala.typeutils."


def simple(name: str) -> SerializerSnapshot:
    return SerializerSnapshot(f"{BASE}{name}${name}Snapshot", 3)


LONG, INT, STRING = simple("LongSerializer"), simple("IntSerializer"), simple("StringSerializer")


def composite(name: str, *nested: SerializerSnapshot, **outer: Any) -> SerializerSnapshot:
    return SerializerSnapshot(name, 3, nested, outer={"version": 1, **outer})


def pojo(class_name: str, fields: list[tuple[str, SerializerSnapshot]],
         registered: tuple[SerializerSnapshot, ...] = (),
         cached: tuple[SerializerSnapshot, ...] = ()) -> SerializerSnapshot:
    return SerializerSnapshot(RUNTIME + "PojoSerializerSnapshot", 2, tuple(s for _, s in fields),
                              outer={"class": class_name, "fields": tuple(n for n, _ in fields),
                                     "registered_subclasses": tuple(s.outer["class"]
                                                                    for s in registered),
                                     "registered_snapshots": registered,
                                     "subclasses": tuple(s.outer["class"] for s in cached),
                                     "subclass_snapshots": cached})


CIRCLE = pojo("Circle", [("name", STRING), ("r", LONG)])
SHAPE = pojo("Shape", [("name", STRING)], registered=(CIRCLE,))
PLAIN_SHAPE = pojo("Shape", [("name", STRING)])


def read(snapshot: SerializerSnapshot, data: bytes) -> Any:
    codec = codec_for(snapshot)
    assert codec is not None, why_undecodable(snapshot)
    reader = DataReader(data, "test")
    value = codec.read(reader)
    assert reader.at_end()
    return value


def utf(text: str) -> bytes:
    return struct.pack(">H", len(text)) + text.encode()


@pytest.mark.parametrize(("snapshot", "data", "message"), [
    (composite(NULLABLE, LONG, padding=8), b"\x02" + bytes(8), "null flag 2"),
    (composite(NULLABLE, LONG, padding=8), b"\x01" + bytes(3), "truncated"),
    (composite(NULLABLE, LONG), b"", "truncated"),
    (composite(BASE + "SetSerializerSnapshot", STRING), struct.pack(">i", 1) + b"\x07",
     "null flag 7"),
    (composite(BASE + "SetSerializerSnapshot", STRING), struct.pack(">i", 5) + b"\x01",
     "impossible set elements 5"),
    (composite(RUNTIME + "JavaEitherSerializerSnapshot", STRING, LONG), b"\x02\x00", "flag 2"),
    (composite(RUNTIME + "JavaEitherSerializerSnapshot", STRING, LONG), b"\x00\x00\x00",
     "truncated"),
    (SHAPE, b"\x08\x05", "tag 5"),                     # one registered subclass
    (PLAIN_SHAPE, b"\x08\x00", "tag 0"),               # none registered
    (SHAPE, b"\x08\x00\x01", "null value of subclass Circle"),
    (SHAPE, b"\x04\x00\x09Cir", "truncated"),          # the class name cut short
    (SHAPE, b"\x00", "flags 0x0"),
    (simple("StringValueSerializer"), b"\x05ab", "5 characters"),
    (composite(SCALA + "ScalaOptionSerializerSnapshot", STRING), b"\x02", "Option flag 2"),
    (composite(SCALA + "TraversableSerializerSnapshot", STRING, cbf="List"),
     struct.pack(">i", 1) + b"\x03", "element flag 3"),
    (composite(SCALA + "TraversableSerializerSnapshot", STRING, cbf="List"),
     struct.pack(">i", 2) + b"\x00", "impossible collection elements 2"),
])
def test_corrupt_values_are_refused(snapshot: SerializerSnapshot, data: bytes,
                                    message: str) -> None:
    with pytest.raises(CorruptCheckpointError, match=message):
        read(snapshot, data)


@pytest.mark.parametrize(("snapshot", "data", "named"), [
    (SHAPE, b"\x04" + utf("Triangle") + b"\x02\x00\x01t", "Triangle"),
    (PLAIN_SHAPE, b"\x04" + utf("Triangle") + b"\x02", "Triangle"),
    (pojo("Shape", [("name", STRING)], registered=(
        pojo("Circle", [("name", LONG)]),)), b"\x08\x00\x02\x00" + bytes(8), "Circle"),
])
def test_subclasses_statectl_cannot_decode_are_named(snapshot: SerializerSnapshot, data: bytes,
                                                     named: str) -> None:
    """A subclass not in the snapshot, or whose field clashes with the POJO's."""
    with pytest.raises(UnsupportedFormatError, match=named):
        read(snapshot, data)


def test_a_subclass_whose_field_clashes_is_left_out_of_the_spec() -> None:
    """``name`` is a string in Shape, an int64 in Clash: Clash is left out, Circle kept."""
    clash = pojo("Clash", [("name", LONG)])
    codec = codec_for(pojo("Shape", [("name", STRING)], registered=(clash, CIRCLE)))
    assert codec is not None
    assert codec.spec == "struct<@class:string,name:string,r:int64>"
    assert read(pojo("Shape", [("name", STRING)], registered=(clash, CIRCLE)),
                b"\x08\x01\x02\x00\x02c\x00" + struct.pack(">q", -1)) == {
        "@class": "Circle", "name": "c", "r": -1}


def test_a_pojo_without_subclass_snapshots_keeps_its_plain_struct() -> None:
    codec = codec_for(PLAIN_SHAPE)
    assert codec is not None and codec.spec == "struct<name:string>"
    assert read(PLAIN_SHAPE, b"\x02\x00\x02s") == {"name": "s"}


@pytest.mark.parametrize(("snapshot", "says"), [
    (SerializerSnapshot(RUNTIME + "ValueSerializer$ValueSerializerSnapshot", 2,
                        outer={"class": "com.example.Point"}),
     "ValueSerializer of the user Value class com.example.Point"),
    (SerializerSnapshot(RUNTIME + "CopyableValueSerializer$CopyableValueSerializerSnapshot", 2,
                        outer={"class": "com.example.Point"}),
     "CopyableValueSerializer of the user Value class com.example.Point"),
    (composite(SCALA + "ScalaOptionSerializerSnapshot", composite(NULLABLE, LONG)),
     "a Scala Option of NullableSerializer<LongSerializer>: Some(None) and None"),
    (pojo("A", [("x", SerializerSnapshot(RUNTIME + "ValueSerializer$ValueSerializerSnapshot", 2,
                                         outer={"class": "com.example.Point"}))]),
     "field 'x' of POJO A: ValueSerializer of the user Value class com.example.Point"),
])
def test_why_undecodable_names_what_is_missing(snapshot: SerializerSnapshot, says: str) -> None:
    assert codec_for(snapshot) is None and encoder_for(snapshot) is None
    assert says in why_undecodable(snapshot)


@pytest.mark.parametrize(("snapshot", "data", "value"), [
    (simple("NullValueSerializer"), b"", None),
    (SerializerSnapshot(SCALA + "UnitSerializer$UnitSerializerSnapshot", 3), b"\x00", None),
    (SerializerSnapshot(RUNTIME + "Tuple0SerializerSnapshot", 3), b"\x2a", []),
    (composite(NULLABLE, SerializerSnapshot(RUNTIME + "Tuple0SerializerSnapshot", 3)),
     b"\x00\x2a", []),
])
def test_types_of_one_value_are_json_and_written_back(snapshot: SerializerSnapshot,
                                                      data: bytes, value: Any) -> None:
    """``Tuple0`` (the byte 42), ``NullValue`` (no byte), Scala's ``Unit`` (a 0): ``json``."""
    codec = codec_for(snapshot)
    assert codec is not None and "json" in codec.spec
    assert read(snapshot, data) == value
    encoder = encoder_for(snapshot)
    assert encoder is not None
    out = bytearray()
    encoder(out, value)
    assert bytes(out) == data


def test_a_tuple0_of_another_byte_is_corrupt() -> None:
    with pytest.raises(CorruptCheckpointError, match="Tuple0 is the byte 42"):
        read(SerializerSnapshot(RUNTIME + "Tuple0SerializerSnapshot", 3), b"\x2b")


def test_a_spec_statectl_cannot_hold_gives_no_codec() -> None:
    """Lists nested deeper than a type spec holds: no codec, and why_undecodable says so."""
    snapshot = LONG
    for _ in range(40):
        snapshot = composite(BASE + "ListSerializerSnapshot", snapshot)
    assert codec_for(snapshot) is None and encoder_for(snapshot) is None
    assert "type spec is not one statectl holds (type spec nested deeper than 32)" in \
        why_undecodable(snapshot)


def _composite_bytes(name: str, outer: bytes, nested: list[bytes]) -> bytes:
    return (utf(name) + struct.pack(">iii", 3, COMPOSITE_MAGIC, 2) + outer
            + struct.pack(">iii", 1333245, 1, len(nested)) + b"".join(nested))


LONG_SNAPSHOT = utf(LONG.class_name) + struct.pack(">i", 3)


def test_nullable_snapshot_bytes() -> None:
    """``NullableSerializerSnapshot``: the outer snapshot is the padding (int)."""
    snapshot = read_versioned_snapshot(DataReader(
        _composite_bytes(NULLABLE, struct.pack(">i", 8), [LONG_SNAPSHOT]), "test"))
    assert snapshot.outer["padding"] == 8
    codec = codec_for(snapshot)
    assert codec is not None and codec.length == 9 and codec.spec == "int64"


@pytest.mark.parametrize("padding", [-1, 1 << 20])
def test_impossible_paddings_are_refused(padding: int) -> None:
    with pytest.raises(CorruptCheckpointError, match="padding"):
        read_versioned_snapshot(DataReader(
            _composite_bytes(NULLABLE, struct.pack(">i", padding), [LONG_SNAPSHOT]), "test"))


def test_a_value_snapshot_with_an_unnameable_class_is_refused() -> None:
    data = utf(RUNTIME + "ValueSerializer$ValueSerializerSnapshot") + struct.pack(">i", 2) \
        + utf("a b<c>")
    with pytest.raises(UnsupportedFormatError, match="Value class"):
        read_versioned_snapshot(DataReader(data, "test"))


def test_a_legacy_composite_snapshot_must_have_its_nested_snapshots() -> None:
    """A version-1 ``ListSerializerSnapshot`` is the nested snapshots at once (no magic)."""
    data = utf(BASE + "ListSerializerSnapshot") + struct.pack(">ii", 1, COMPOSITE_MAGIC)
    with pytest.raises(CorruptCheckpointError, match="nested serializer snapshots magic"):
        read_versioned_snapshot(DataReader(data, "test"))


def test_the_deprecated_either_snapshot_of_another_version_is_refused() -> None:
    data = utf(RUNTIME + "EitherSerializerSnapshot") + struct.pack(">i", 1)
    with pytest.raises(UnsupportedFormatError, match="version 1; statectl reads version 2"):
        read_versioned_snapshot(DataReader(data, "test"))
