"""Flink serializer snapshots: what a state's header says about each of its serializers.

A state's header (reference §6.1) stores, per serializer, a *snapshot*: the snapshot class name,
its version and class-specific bytes (``TypeSerializerSnapshot.writeSnapshot``). We parse:

- simple snapshots (``SimpleTypeSerializerSnapshot`` and friends): no bytes;
- composite snapshots (``CompositeTypeSerializerSnapshot``): magic ``911108``, outer version,
  the outer snapshot (a tuple class name, a ``Row`` flag, or Java-serialized objects), then the
  nested snapshots (``NestedSerializersSnapshotDelegate``: magic ``1333245``, version, count,
  each as class name, version, bytes);
- ``RowDataSerializerSnapshot``: a count, that many Java-serialized ``LogicalType`` objects, then
  the nested snapshots;
- ``PojoSerializerSnapshot`` (version 2, ``PojoSerializerSnapshotData``): the POJO class name,
  then three ``LinkedOptionalMap``s (``LinkedOptionalMapSerializer``: magic ``0x4f2c69a3d70``,
  a count, per entry a name and two optional length-framed parts) -- the fields (declaring class
  and field name; the field's versioned snapshot), the registered subclasses and the cached
  non-registered subclasses (their versioned snapshots);
- ``EnumSerializerSnapshot`` (version 3): the enum class name, a count, the constant names;
- ``KryoSerializerSnapshot`` (version 2, ``KryoSerializerSnapshotData``): the type class name,
  then three ``LinkedOptionalMap``s (registrations, default serializers, default serializer
  classes) whose framed parts are skipped: only the names are kept.

Snapshots inside a length frame (a POJO's fields) that statectl cannot parse are skipped whole:
the field's values then have no codec. Field counts, names and nesting are bounded
(:data:`MAX_FIELDS`, :data:`MAX_NAME`, :data:`MAX_NESTING`).

What statectl makes of a parsed tree (a :class:`~formats.flink.types.codec.Codec` per
serializer) is :func:`formats.flink.types.codecs.codec_for`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from formats.flink.javaio import DataReader
from formats.flink.javaser import read_java_object
from statecore.errors import UnsupportedFormatError

__all__ = ["COMPOSITE_MAGIC", "MAX_FIELDS", "MAX_NAME", "MAX_NESTING", "NAME_PATTERN",
           "SerializerSnapshot", "read_snapshot", "read_versioned_snapshot"]

COMPOSITE_MAGIC = 911108
NESTED_MAGIC = 1333245
SNAPSHOT_PROXY_VERSION = 2
MAX_NESTING = 32
#: ``LinkedOptionalMapSerializer``'s header (a sanity check of the stream)
OPTIONAL_MAP_MAGIC = 0x4F2C69A3D70
#: Most fields of one POJO (and registered subclasses, Kryo registrations, enum constants)
#: statectl reads from a snapshot; more is refused as hostile.
MAX_FIELDS = 4096
#: Longest class, field or constant name (characters) statectl accepts from a snapshot.
MAX_NAME = 1024
#: What a name must look like to stand in a type spec (no space, no ``<>,:``).
NAME_PATTERN = _NAME = re.compile(r"[^\s<>,:]+")


@dataclass(frozen=True)
class SerializerSnapshot:
    """One serializer snapshot: class, version, nested snapshots and what the outer part says."""

    class_name: str
    version: int
    nested: tuple[SerializerSnapshot, ...] = ()
    java_objects: tuple[Any, ...] = ()  # LogicalType / DataType objects, parsed
    outer: dict[str, Any] = field(default_factory=dict)

    @property
    def short_name(self) -> str:
        return self.class_name.rsplit(".", 1)[-1]

    def describe(self) -> str:
        inner = ", ".join(n.describe() for n in self.nested)
        base = self.short_name.split("$")[0]
        named = self.outer.get("class")
        if named is not None:
            base = f"{base}({named})"
        return f"{base}<{inner}>" if inner else base


def _simple(name: str) -> bool:
    base = name.rsplit(".", 1)[-1]
    outer = base.split("$")[0]
    return outer in _SIMPLE_SERIALIZERS


#: Serializers whose snapshots write no bytes (``SimpleTypeSerializerSnapshot`` subclasses).
_SIMPLE_SERIALIZERS = frozenset({
    "StringSerializer", "IntSerializer", "LongSerializer", "ShortSerializer", "ByteSerializer",
    "BooleanSerializer", "FloatSerializer", "DoubleSerializer", "CharSerializer",
    "BytePrimitiveArraySerializer", "VoidNamespaceSerializer", "TimeWindow",
    "StringDataSerializer", "ByteArrayWrapperSerializer", "NullSerializer",
    "BigIntSerializer", "BigDecSerializer", "DateSerializer", "SqlDateSerializer",
    "SqlTimeSerializer", "SqlTimestampSerializer", "InstantSerializer",
    "LocalDateSerializer", "LocalTimeSerializer", "LocalDateTimeSerializer",
    "StringValueSerializer", "IntValueSerializer", "LongValueSerializer",
    "BooleanPrimitiveArraySerializer", "IntPrimitiveArraySerializer",
    "LongPrimitiveArraySerializer", "DoublePrimitiveArraySerializer",
    "FloatPrimitiveArraySerializer", "ShortPrimitiveArraySerializer",
    "CharPrimitiveArraySerializer", "StringArraySerializer", "GlobalWindow",
    "VoidSerializer", "UnitSerializer", "TimeWindowSerializer",
})


def read_snapshot(r: DataReader, depth: int = 0) -> SerializerSnapshot:
    """``TypeSerializerSnapshotSerializationUtil.readSerializerSnapshot``.

    Proxy version 2, then a versioned snapshot.
    """
    proxy = r.i32()
    if proxy != SNAPSHOT_PROXY_VERSION:
        raise r.fail(f"serializer snapshot proxy version {proxy}, expected "
                     f"{SNAPSHOT_PROXY_VERSION}")
    return read_versioned_snapshot(r, depth)


def read_versioned_snapshot(r: DataReader, depth: int = 0) -> SerializerSnapshot:
    """``TypeSerializerSnapshot.readVersionedSnapshot``: class name, version, bytes."""
    if depth > MAX_NESTING:
        raise r.fail("serializer snapshots nested too deeply")
    name = r.utf()
    version = r.i32()
    if _simple(name):
        return SerializerSnapshot(name, version)
    short = name.rsplit(".", 1)[-1]
    special = _SPECIAL_SNAPSHOTS.get(short)
    if special is not None:
        reader, versions = special
        if version not in versions:
            raise UnsupportedFormatError(
                f"{r.where}: serializer snapshot {name} version {version}; statectl reads "
                f"version{'s' if len(versions) > 1 else ''} "
                f"{', '.join(map(str, sorted(versions)))}")
        return reader(r, name, version, depth)
    if short == "RowDataSerializer$RowDataSerializerSnapshot":
        types = tuple(_java_object(r) for _ in range(r.count("row fields", 4)))
        return SerializerSnapshot(name, version, _nested(r, depth), types)
    if _peek_i32(r) == COMPOSITE_MAGIC:
        r.i32()
        outer_version = r.i32()
        objects: list[Any] = []
        outer: dict[str, Any] = {"version": outer_version}
        while _peek_i32(r) != NESTED_MAGIC:
            if r.data[r.pos:r.pos + 2] == b"\xac\xed":
                objects.append(_java_object(r))
            elif short.startswith("RowSerializer$") and "legacy_mode" not in outer:
                outer["legacy_mode"] = not r.boolean()  # written as "supports row kind"
            elif short.startswith("ExternalSerializer$") and objects and "internal" not in outer:
                outer["internal"] = r.boolean()  # is the external type the internal one
            elif short.startswith("TupleSerializerSnapshot") and "tuple_class" not in outer:
                outer["tuple_class"] = r.utf()
            elif short.startswith("GenericArraySerializerSnapshot") and "class" not in outer:
                outer["class"] = _checked_name(r, "array component class")
            else:
                raise UnsupportedFormatError(
                    f"{r.where}: serializer snapshot {name} (version {version}) has an outer "
                    f"snapshot statectl cannot read")
        return SerializerSnapshot(name, version, _nested(r, depth), tuple(objects), outer)
    raise UnsupportedFormatError(
        f"{r.where}: serializer snapshot {name} (version {version}) has a layout statectl "
        f"does not know, so the state header cannot be read past it")


def _peek_i32(r: DataReader) -> int | None:
    if r.remaining < 4:
        return None
    return int.from_bytes(r.data[r.pos:r.pos + 4], "big", signed=True)


def _java_object(r: DataReader) -> Any:
    return read_java_object(r)


def _nested(r: DataReader, depth: int) -> tuple[SerializerSnapshot, ...]:
    if r.i32() != NESTED_MAGIC:
        raise r.fail("bad nested serializer snapshots magic number")
    version = r.i32()
    if version != 1:
        raise r.fail(f"nested serializer snapshots version {version}, expected 1")
    return tuple(read_versioned_snapshot(r, depth + 1)
                 for _ in range(r.count("nested serializers", 6)))


def _checked_name(r: DataReader, what: str) -> str:
    """A ``writeUTF`` class, field or constant name: bounded, and fit for a type spec."""
    start = r.pos
    name = r.utf()
    if len(name) > MAX_NAME or not _NAME.fullmatch(name):
        r.pos = start
        raise UnsupportedFormatError(
            f"{r.where}: {what} {name[:60]!r}{'...' if len(name) > 60 else ''} is not a Java "
            f"name statectl accepts (at most {MAX_NAME} characters, no space or <>,:) "
            f"(at byte {start})")
    return name


def _frame(r: DataReader) -> DataReader:
    """A length-framed part (``LinkedOptionalMapSerializer.writeFramed``) as its own reader."""
    size = r.i32()
    if size < 0 or size > r.remaining:
        raise r.fail(f"impossible frame of {size} bytes ({r.remaining} left)")
    start = r.need(size)
    return DataReader(r.data, r.where, start, start + size)


def _optional_map(r: DataReader, what: str
                  ) -> list[tuple[str, DataReader | None, DataReader | None]]:
    """``LinkedOptionalMapSerializer.readOptionalMap``: per entry its name and framed parts."""
    start = r.pos
    if r.i64() != OPTIONAL_MAP_MAGIC:
        r.pos = start
        raise r.fail(f"bad {what} header")
    n = r.count(what, 4)  # a name and two flags at least
    if n > MAX_FIELDS:
        raise UnsupportedFormatError(f"{r.where}: {n} {what}, more than the {MAX_FIELDS} "
                                     f"statectl reads")
    entries = []
    for _ in range(n):
        name = r.utf()
        key = _frame(r) if r.boolean() else None
        value = _frame(r) if r.boolean() else None
        entries.append((name, key, value))
    return entries


def _framed_snapshot(frame: DataReader | None, depth: int) -> SerializerSnapshot:
    """A versioned snapshot in its own frame; one statectl cannot parse is kept as its class."""
    if frame is None:
        return SerializerSnapshot("(absent)", 0)
    start = frame.pos
    try:
        return read_versioned_snapshot(frame, depth + 1)
    except UnsupportedFormatError:
        frame.pos = start
        return SerializerSnapshot(frame.utf(), frame.i32(), outer={"unparsed": True})


def _read_pojo_snapshot(r: DataReader, name: str, version: int, depth: int
                        ) -> SerializerSnapshot:
    """``PojoSerializerSnapshotData.readSnapshotData`` (see the module doc)."""
    pojo_class = _checked_name(r, "POJO class")
    fields = []
    nested = []
    for field_name, _declared, snapshot in _optional_map(r, "POJO fields"):
        if len(field_name) > MAX_NAME or not _NAME.fullmatch(field_name):
            raise UnsupportedFormatError(f"{r.where}: POJO {pojo_class} has a field named "
                                         f"{field_name[:60]!r}, which statectl cannot name")
        fields.append(field_name)
        nested.append(_framed_snapshot(snapshot, depth))
    if len(set(fields)) != len(fields):
        raise UnsupportedFormatError(f"{r.where}: POJO {pojo_class} has two fields of one name")
    registered = tuple(entry[0] for entry in _optional_map(r, "registered POJO subclasses"))
    cached = tuple(entry[0] for entry in _optional_map(r, "POJO subclasses"))
    return SerializerSnapshot(name, version, tuple(nested), outer={
        "class": pojo_class, "fields": tuple(fields), "registered_subclasses": registered,
        "subclasses": cached})


def _read_enum_snapshot(r: DataReader, name: str, version: int, depth: int
                        ) -> SerializerSnapshot:
    """``EnumSerializerSnapshot`` version 3: the enum class, then its constants by name."""
    enum_class = _checked_name(r, "enum class")
    n = r.count("enum constants", 2)
    if n > MAX_FIELDS:
        raise UnsupportedFormatError(f"{r.where}: enum {enum_class} has {n} constants, more "
                                     f"than the {MAX_FIELDS} statectl reads")
    constants = tuple(_checked_name(r, f"a constant of enum {enum_class}") for _ in range(n))
    if len(set(constants)) != n:
        raise r.fail(f"enum {enum_class} names a constant twice")
    return SerializerSnapshot(name, version, outer={"class": enum_class,
                                                    "constants": constants})


def _read_kryo_snapshot(r: DataReader, name: str, version: int, depth: int
                        ) -> SerializerSnapshot:
    """``KryoSerializerSnapshot`` version 2: the type class, registrations, default serializers.

    Only the names are kept (the framed registrations may hold Java-serialized serializers).
    """
    type_class = _checked_name(r, "Kryo type class")
    registrations = tuple(entry[0] for entry in _optional_map(r, "Kryo registrations"))
    _optional_map(r, "Kryo default serializers")
    _optional_map(r, "Kryo default serializer classes")
    return SerializerSnapshot(name, version, outer={"class": type_class,
                                                    "registrations": registrations})


#: Snapshots with their own layout: short class name -> (reader, versions statectl reads).
_SPECIAL_SNAPSHOTS: dict[str, tuple[Callable[[DataReader, str, int, int], SerializerSnapshot],
                                    frozenset[int]]] = {
    "PojoSerializerSnapshot": (_read_pojo_snapshot, frozenset({2})),
    "EnumSerializer$EnumSerializerSnapshot": (_read_enum_snapshot, frozenset({3})),
    "KryoSerializerSnapshot": (_read_kryo_snapshot, frozenset({2})),
}
