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
  non-registered subclasses (their versioned snapshots, kept in ``outer``:
  ``registered_snapshots`` in tag order, ``subclass_snapshots``);
- ``EnumSerializerSnapshot`` (version 3): the enum class name, a count, the constant names;
- ``NullableSerializerSnapshot``: a composite snapshot whose outer snapshot is ``int
  nullPaddingLength`` (outer version 2; the versioned snapshot's version is 3);
- ``ValueSerializerSnapshot`` and ``CopyableValueSerializerSnapshot`` (version 2): the ``Value``
  class name;
- the Scala API's (Flink 1.x, ``flink-scala``): ``ScalaCaseClassSerializerSnapshot`` and
  ``Tuple2CaseClassSerializerSnapshot`` (the case class's name as outer snapshot),
  ``TraversableSerializerSnapshot`` (outer version 2: the ``CanBuildFrom``'s Scala code),
  ``ScalaOptionSerializerSnapshot`` and ``ScalaEitherSerializerSnapshot`` (no outer snapshot);
- ``KryoSerializerSnapshot`` (version 2, ``KryoSerializerSnapshotData``): the type class name,
  then three ``LinkedOptionalMap``s (registrations, default serializers, default serializer
  classes): the names in order and the serializer class a registration names (Java-serialized
  serializer instances are never deserialized).

Flink SQL's (``flink-table-runtime``) and CEP's (``flink-cep``): ``TimestampDataSerializerSnapshot``
(``int precision``), ``DecimalSerializerSnapshot`` (``int precision``, ``int scale``),
``BinaryRowDataSerializerSnapshot`` (``int`` arity), ``ArrayDataSerializerSnapshot`` and
``MapDataSerializerSnapshot`` (Java-serialized ``LogicalType``s and serializers),
``SortedMapSerializerSnapshot`` (a Java-serialized comparator, then the nested snapshots); the
composite ``NFAStateSerializerSnapshot`` (outer version 2: a boolean, "supports previous
timestamps") and ``LinkedListSerializerSnapshot`` (outer version 3: a boolean, "has a null
mask"; 2: a mask; 1: none), and the rest as composites without outer snapshot.

Composite snapshots of version 1 or 2 (``ListSerializerSnapshot``, ``MapSerializerSnapshot``,
``GenericArraySerializerSnapshot``, ``TupleSerializerSnapshot``, ``RowSerializerSnapshot``,
``NullableSerializerSnapshot``, ``JavaEitherSerializerSnapshot``) are their legacy form, which
Flink still reads: the outer snapshot without magic and outer version, then the nested
snapshots; the deprecated ``EitherSerializerSnapshot`` (version 2) is the nested snapshots alone.
Flink 1.20 writes every other snapshot here exactly as Flink 2.3 does (checked by
``tests/test_flink_encoders.py`` on both).

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

from formats.flink.java.input import DataReader
from formats.flink.java.serialization import read_java_object
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
    # Flink's Value types (``typeutils.base``) and Tuple0 (``typeutils.runtime``)
    "BooleanValueSerializer", "ByteValueSerializer", "CharValueSerializer",
    "DoubleValueSerializer", "FloatValueSerializer", "ShortValueSerializer",
    "NullValueSerializer", "Tuple0SerializerSnapshot",
    # flink-table-runtime (Flink SQL) and flink-cep
    "CountWindow", "SortedLongSerializer", "EventId", "DeweyNumber",
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
    if short in _VERSIONED_LEGACY and version <= HIGHEST_LEGACY_READ_VERSION:
        legacy_outer = {"version": version, **_VERSIONED_LEGACY[short](r, version)}
        return SerializerSnapshot(name, version, _nested(r, depth), outer=legacy_outer)
    legacy = _LEGACY_COMPOSITES.get(short)
    if legacy is not None and version <= HIGHEST_LEGACY_READ_VERSION:
        legacy_outer = {"version": version, **legacy(r)}
        return SerializerSnapshot(name, version, _nested(r, depth), outer=legacy_outer)
    if short == "RowDataSerializer$RowDataSerializerSnapshot":
        types = tuple(_java_object(r) for _ in range(r.count("row fields", 4)))
        return SerializerSnapshot(name, version, _nested(r, depth), types)
    if _peek_i32(r) == COMPOSITE_MAGIC:
        r.i32()
        outer_version = r.i32()
        objects: list[Any] = []
        outer: dict[str, Any] = {"version": outer_version}
        if short == "NullableSerializer$NullableSerializerSnapshot":
            outer["padding"] = _padding(r)
        elif short in ("ScalaCaseClassSerializerSnapshot", "Tuple2CaseClassSerializerSnapshot"):
            outer["class"] = _checked_name(r, "case class")
        elif short == "NFAStateSerializerSnapshot" and "previous_timestamp" not in outer:
            outer["previous_timestamp"] = outer_version >= 2 and r.boolean()
        elif short == "LinkedListSerializer$LinkedListSerializerSnapshot" and \
                "null_mask" not in outer:
            outer["null_mask"] = outer_version == 2 or (outer_version > 2 and r.boolean())
        elif short == "TraversableSerializerSnapshot":
            if outer_version != 2:
                raise UnsupportedFormatError(
                    f"{r.where}: serializer snapshot {name} outer version {outer_version}; "
                    f"statectl reads outer version 2 (the CanBuildFrom's code)")
            outer["cbf"] = r.utf()
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


#: Longest null padding of a ``NullableSerializer`` statectl accepts (the padding is the wrapped
#: serializer's fixed length: a few bytes for Flink's own).
MAX_PADDING = 1 << 16


def _padding(r: DataReader) -> int:
    """``NullableSerializerSnapshot.readOuterSnapshot``: ``int nullPaddingLength``."""
    padding = r.i32()
    if not 0 <= padding <= MAX_PADDING:
        raise r.fail(f"NullableSerializer null padding of {padding} bytes (0..{MAX_PADDING})")
    return padding


#: ``CompositeTypeSerializerSnapshot.HIGHEST_LEGACY_READ_VERSION``: a composite snapshot of this
#: version or lower was written before the magic number and the outer version (Flink 1.7/1.8).
HIGHEST_LEGACY_READ_VERSION = 2


def _no_outer(r: DataReader) -> dict[str, Any]:
    return {}


#: Composite snapshots Flink reads in their legacy form (``legacyInternalReadOuterSnapshot``:
#: ``readOuterSnapshot`` of the snapshot's version, no magic; then the nested snapshots):
#: short class name -> reader of the legacy outer snapshot. A legacy ``RowSerializerSnapshot``
#: (outer version below 3) has no ``RowKind``.
_LEGACY_COMPOSITES: dict[str, Callable[[DataReader], dict[str, Any]]] = {
    "ListSerializerSnapshot": _no_outer,
    "MapSerializerSnapshot": _no_outer,
    "GenericArraySerializerSnapshot": lambda r: {"class": _checked_name(
        r, "array component class")},
    "TupleSerializerSnapshot": lambda r: {"tuple_class": r.utf()},
    "RowSerializer$RowSerializerSnapshot": _no_outer,
    "NullableSerializer$NullableSerializerSnapshot": lambda r: {"padding": _padding(r)},
    "JavaEitherSerializerSnapshot": _no_outer,
}


#: Composite snapshots whose legacy outer snapshot depends on the legacy version (their
#: ``readOuterSnapshot(readVersion, ...)``): short class name -> reader of it.
_VERSIONED_LEGACY: dict[str, Callable[[DataReader, int], dict[str, Any]]] = {
    # flink-cep: a boolean "supports previous timestamps" from version 2 on
    "NFAStateSerializerSnapshot": lambda r, v: {"previous_timestamp": v >= 2 and r.boolean()},
    "LockableTypeSerializerSnapshot": lambda r, v: {},
    # flink-table-runtime: version 1 has no null mask, version 2 has one
    "LinkedListSerializer$LinkedListSerializerSnapshot": lambda r, v: {"null_mask": v == 2},
}


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
    registered = _subclasses(r, "registered POJO subclasses", depth)
    cached = _subclasses(r, "POJO subclasses", depth)
    return SerializerSnapshot(name, version, tuple(nested), outer={
        "class": pojo_class, "fields": tuple(fields),
        "registered_subclasses": tuple(n for n, _ in registered),
        "subclasses": tuple(n for n, _ in cached),
        "registered_snapshots": tuple(s for _, s in registered),
        "subclass_snapshots": tuple(s for _, s in cached)})


def _subclasses(r: DataReader, what: str, depth: int) -> list[tuple[str, SerializerSnapshot]]:
    """A ``PojoSerializerSnapshotData`` subclass map: per subclass its name and snapshot.

    The registered subclasses (``registeredSubclassSerializerSnapshots``, in tag order) or the
    subclass serializers the ``PojoSerializer`` had cached (``nonRegisteredSubclass...``).
    """
    # a subclass's name is data (a value's ``@class``), never part of a type spec
    return [(class_name, _framed_snapshot(snapshot, depth))
            for class_name, _key, snapshot in _optional_map(r, what)]


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


def _read_value_snapshot(r: DataReader, name: str, version: int, depth: int
                         ) -> SerializerSnapshot:
    """``ValueSerializerSnapshot`` / ``CopyableValueSerializerSnapshot`` (version 2).

    ``writeSnapshot``: the ``Value`` class name (``writeUTF``).
    """
    return SerializerSnapshot(name, version, outer={"class": _checked_name(r, "Value class")})


def _read_legacy_either_snapshot(r: DataReader, name: str, version: int, depth: int
                                 ) -> SerializerSnapshot:
    """The deprecated ``EitherSerializerSnapshot`` (version 2, which Flink 1.x reads).

    Its bytes are the nested snapshots (``NestedSerializersSnapshotDelegate``) alone.
    """
    return SerializerSnapshot(name, version, _nested(r, depth))


def _read_kryo_snapshot(r: DataReader, name: str, version: int, depth: int
                        ) -> SerializerSnapshot:
    """``KryoSerializerSnapshot`` version 2: the type class, registrations, default serializers.

    The registrations are kept in order (they decide Kryo's class ids), with the serializer
    class of those that name one (``KryoRegistrationSerializer``: class name, an int kind --
    0 Kryo's default serializer, 1 a serializer class, its name follows, 2 a Java-serialized
    serializer instance, which statectl never deserializes: ``"(instance)"``); of the default
    serializers only the classes they serialize.
    """
    type_class = _checked_name(r, "Kryo type class")
    registrations = []
    serializers = {}
    for entry, _key, value in _optional_map(r, "Kryo registrations"):
        registrations.append(entry)
        kind = _kryo_registration_kind(value)
        if kind:
            serializers[entry] = kind
    defaults = [entry[0] for entry in _optional_map(r, "Kryo default serializers")]
    defaults += [entry[0] for entry in _optional_map(r, "Kryo default serializer classes")]
    return SerializerSnapshot(name, version, outer={
        "class": type_class, "registrations": tuple(registrations),
        "registration_serializers": serializers, "default_serializers": tuple(defaults)})


def _kryo_registration_kind(frame: DataReader | None) -> str:
    """The serializer a framed ``KryoRegistration`` names: ``""`` for Kryo's default one."""
    if frame is None:
        return "(absent)"
    if frame.at_end():  # nothing written: Kryo's default serializer
        return ""
    frame.utf()
    if frame.remaining < 4:  # no kind written: Kryo's default serializer
        return ""
    kind = frame.i32()
    if kind == 0:
        return ""
    if kind == 1:
        return frame.utf()
    return "(instance)"


# -- flink-table-runtime's snapshots (Flink SQL) ------------------------------------------------

#: Highest ``DECIMAL`` precision and ``TIMESTAMP`` precision Flink SQL has.
MAX_DECIMAL_PRECISION = 38
MAX_TIMESTAMP_PRECISION = 9


def _bounded_int(r: DataReader, what: str, low: int, high: int) -> int:
    value = r.i32()
    if not low <= value <= high:
        raise r.fail(f"{what} {value} (expected {low}..{high})")
    return value


def _read_timestamp_data_snapshot(r: DataReader, name: str, version: int, depth: int
                                  ) -> SerializerSnapshot:
    """``TimestampDataSerializerSnapshot`` (version 1): ``int precision``."""
    precision = _bounded_int(r, "TIMESTAMP precision", 0, MAX_TIMESTAMP_PRECISION)
    return SerializerSnapshot(name, version, outer={"precision": precision})


def _read_decimal_data_snapshot(r: DataReader, name: str, version: int, depth: int
                                ) -> SerializerSnapshot:
    """``DecimalDataSerializer.DecimalSerializerSnapshot``: ``int precision``, ``int scale``."""
    precision = _bounded_int(r, "DECIMAL precision", 1, MAX_DECIMAL_PRECISION)
    scale = _bounded_int(r, "DECIMAL scale", 0, precision)
    return SerializerSnapshot(name, version, outer={"precision": precision, "scale": scale})


def _read_binary_row_snapshot(r: DataReader, name: str, version: int, depth: int
                              ) -> SerializerSnapshot:
    """``BinaryRowDataSerializer.BinaryRowDataSerializerSnapshot``: ``int numFields``."""
    arity = _bounded_int(r, "BinaryRowData arity", 0, MAX_FIELDS)
    return SerializerSnapshot(name, version, outer={"arity": arity})


def _java_objects(count: int) -> Callable[[DataReader, str, int, int], SerializerSnapshot]:
    """A snapshot of ``count`` Java-serialized objects (``InstantiationUtil.serializeObject``).

    ``ArrayDataSerializerSnapshot``: the element ``LogicalType`` and the element serializer;
    ``MapDataSerializerSnapshot``: the key and value ``LogicalType``, then their serializers.
    """
    def read(r: DataReader, name: str, version: int, depth: int) -> SerializerSnapshot:
        return SerializerSnapshot(name, version,
                                  java_objects=tuple(_java_object(r) for _ in range(count)))
    return read


def _read_sorted_map_snapshot(r: DataReader, name: str, version: int, depth: int
                              ) -> SerializerSnapshot:
    """``SortedMapSerializerSnapshot`` (version 3): a comparator, then the nested snapshots.

    The Java-serialized key ``Comparator``, then the key and value serializers' snapshots
    (``NestedSerializersSnapshotDelegate``).
    """
    comparator = _java_object(r)
    return SerializerSnapshot(name, version, _nested(r, depth), (comparator,))


#: Snapshots with their own layout: short class name -> (reader, versions statectl reads).
_SPECIAL_SNAPSHOTS: dict[str, tuple[Callable[[DataReader, str, int, int], SerializerSnapshot],
                                    frozenset[int]]] = {
    "PojoSerializerSnapshot": (_read_pojo_snapshot, frozenset({2})),
    "EnumSerializer$EnumSerializerSnapshot": (_read_enum_snapshot, frozenset({3})),
    "KryoSerializerSnapshot": (_read_kryo_snapshot, frozenset({2})),
    "ValueSerializer$ValueSerializerSnapshot": (_read_value_snapshot, frozenset({2})),
    "EitherSerializerSnapshot": (_read_legacy_either_snapshot, frozenset({2})),
    "CopyableValueSerializer$CopyableValueSerializerSnapshot": (_read_value_snapshot,
                                                                frozenset({2})),
    "TimestampDataSerializer$TimestampDataSerializerSnapshot": (_read_timestamp_data_snapshot,
                                                                frozenset({1})),
    "DecimalDataSerializer$DecimalSerializerSnapshot": (_read_decimal_data_snapshot,
                                                        frozenset({1, 2, 3})),
    "BinaryRowDataSerializer$BinaryRowDataSerializerSnapshot": (_read_binary_row_snapshot,
                                                                frozenset({1, 2, 3})),
    "ArrayDataSerializer$ArrayDataSerializerSnapshot": (_java_objects(2), frozenset({3})),
    "MapDataSerializer$MapDataSerializerSnapshot": (_java_objects(4), frozenset({3})),
    "SortedMapSerializerSnapshot": (_read_sorted_map_snapshot, frozenset({3})),
}
